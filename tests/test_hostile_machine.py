"""Issue 29 item 7, "this machine": a folder or socket another user can change is not trusted.

The suite runs as root; the other user is `nobody` (a process run as nobody, or files chowned to it),
so these tests are skipped without root. Every hostile case has a control beside it: the same
listener, trusted when nothing else about it changes, so that each refusal is the check's doing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from retained import warm
from retained.paths import others_can_write
from retained.store import Store
from tests.helpers.hostile import LEXICAL, cli, cli_json, one_line_error

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as nobody")

FORGED = {"v": warm.PROTOCOL, "warm": True, "recall": {"text": "FORGED-BY-ANOTHER-USER", "ids": []}}
# A listener that answers every connection with one JSON line (argv[2]), whoever it runs as.
LISTENER = """
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    try:
        c.recv(1 << 16)
        c.sendall(sys.argv[2].encode() + b"\\n")
    except OSError:
        pass
    c.close()
"""


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _nobody() -> tuple[int, int]:
    import pwd

    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    return pw.pw_uid, pw.pw_gid


def _python() -> str:
    """An interpreter `nobody` may run (the venv's may sit under a folder it cannot enter)."""
    uid, gid = _nobody()
    minor = f"python3.{sys.version_info.minor}"
    for exe in (sys.executable, shutil.which(minor), f"/usr/bin/{minor}", "/usr/bin/python3"):
        try:
            if exe and subprocess.run([exe, "-c", "pass"], user=uid, group=gid, extra_groups=[], cwd="/",
                                      capture_output=True).returncode == 0:
                return exe
        except OSError:  # not executable by that user
            continue
    pytest.skip("no interpreter nobody may run")


@contextlib.contextmanager
def _listener(path: Path, reply: dict, *, as_nobody: bool = False) -> Iterator[None]:
    kw = {}
    if as_nobody:
        uid, gid = _nobody()
        kw = {"user": uid, "group": gid, "extra_groups": []}
    proc = subprocess.Popen([_python() if as_nobody else sys.executable, "-c", LISTENER, str(path), json.dumps(reply)],
                            stdout=subprocess.PIPE, text=True, cwd="/", **kw)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield
    finally:
        proc.kill()
        proc.wait()


def _private_tmp() -> Path:
    """A short folder (socket paths must fit ~100 bytes) only root may write."""
    d = Path(tempfile.mkdtemp(prefix="m-", dir="/tmp"))
    os.chmod(d, 0o700)
    return d


@pytest.fixture
def store(tmp_path) -> Iterator[Path]:
    d = _private_tmp() / "store"
    with Store(d) as s:
        s.write("a record of this store")
    yield d
    shutil.rmtree(d.parent, ignore_errors=True)


# -- sockets in the store folder (the prompt hook's recall.sock) ----------------------------------------------
def test_a_recall_sock_of_this_user_in_a_private_store_folder_is_asked(store):
    """The control: the fake listener below is believed when nothing about it is another user's."""
    with _listener(store / warm.SOCKET_NAME, FORGED):
        assert warm.ask(store, {"op": "ping"}) == FORGED


@pytest.mark.parametrize("loose", ["the store folder", "the folder above it"])
def test_a_recall_sock_in_a_folder_another_user_can_write_is_not_asked(store, loose):
    with _listener(store / warm.SOCKET_NAME, FORGED):
        os.chmod(store if loose == "the store folder" else store.parent, 0o777)
        assert warm.ask(store, {"op": "ping"}) is None
        assert warm.recall(store, "anything", project=None, shown=[]) == (False, None)


def test_a_recall_sock_file_another_user_owns_is_not_asked(store):
    uid, gid = _nobody()
    with _listener(store / warm.SOCKET_NAME, FORGED):
        os.chown(store / warm.SOCKET_NAME, uid, gid)
        assert warm.ask(store, {"op": "ping"}) is None


def test_a_socket_another_user_listens_on_is_not_asked_even_as_this_users_file(store):
    """SO_PEERCRED: the listener runs as nobody; its socket file, moved into the private store folder
    and given to this user, passes every check on the file and the folder, so only the peer's uid refuses it."""
    uid, gid = _nobody()
    theirs = Path(tempfile.mkdtemp(prefix="n-", dir="/tmp"))
    os.chown(theirs, uid, gid)
    try:
        with _listener(theirs / "s", FORGED, as_nobody=True):
            os.rename(theirs / "s", store / warm.SOCKET_NAME)
            os.chown(store / warm.SOCKET_NAME, 0, 0)
            assert warm.trusted_socket(store / warm.SOCKET_NAME)  # the file and folder alone would pass
            assert warm.ask(store, {"op": "ping"}) is None
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


def test_a_prompt_hook_never_shows_what_a_foreign_recall_sock_says(store, tmp_path):
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    payload = json.dumps({"session_id": "s1", "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                          "prompt": "what about the record of this store?"})
    with _listener(store / warm.SOCKET_NAME, FORGED):
        os.chmod(store, 0o777)
        proc = subprocess.run([sys.executable, "-m", "retained", "hook", "prompt", "--host", "claude"], input=payload,
                              env=dict(os.environ, RETAINED_DIR=str(store), CLAUDECODE="1", RETAINED_EMBED="local"),
                              capture_output=True, text=True, cwd=project, timeout=120)
    assert proc.returncode == 0 and "FORGED" not in proc.stdout, proc.stdout


def test_the_lender_answers_no_other_users_process(store):
    uid, gid = _nobody()
    with Store(store) as s:
        lender = warm.Lender(s)
        assert lender.start()
        try:
            os.chmod(store, 0o711)
            os.chmod(store.parent, 0o711)
            os.chmod(store / warm.SOCKET_NAME, 0o777)  # as if its mode were lost: the peer check still holds
            ask = ("import socket, sys\ns = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                   "try:\n    s.sendall(sys.argv[2].encode() + b'\\n'); print(s.recv(1 << 16).decode())\n"
                   "except OSError:\n    pass  # closed on it: no answer\n")
            line = json.dumps(warm._stamp({"op": "ping"}))
            theirs = subprocess.run([_python(), "-c", ask, str(store / warm.SOCKET_NAME), line], user=uid, group=gid,
                                    extra_groups=[], capture_output=True, text=True, cwd="/", timeout=30)
            mine = subprocess.run([sys.executable, "-c", ask, str(store / warm.SOCKET_NAME), line],
                                  capture_output=True, text=True, cwd="/", timeout=30)
        finally:
            lender.stop()
    assert '"warm"' in mine.stdout, mine.stderr  # the control: this user is answered
    assert theirs.returncode == 0 and theirs.stdout.strip() == "", theirs.stdout + theirs.stderr


# -- the store folder ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("loose", ["writable by every user", "writable by a shared group", "owned by nobody",
                                   "under a folder every user can write"])
def test_a_store_folder_another_user_can_change_is_opened_read_only_with_a_warning(store, loose):
    uid, gid = _nobody()
    if loose == "writable by every user":
        os.chmod(store, 0o707)
    elif loose == "writable by a shared group":
        os.chown(store, 0, gid)  # nobody's group: not this user's own
        os.chmod(store, 0o770)
    elif loose == "owned by nobody":
        os.chown(store, uid, gid)
    else:
        os.chmod(store.parent, 0o777)
    before = (store / "log.jsonl").read_bytes()
    listed = cli_json("--dir", str(store), "list")
    assert [r["text"] for r in listed["records"]] == ["a record of this store"]
    assert any("read-only" in w and "another user can change it" in w for w in listed["warnings"]), listed["warnings"]
    line = one_line_error(cli("--dir", str(store), "write", "a new record"), f"write to a store {loose}")
    assert "another user can change it" in line
    assert (store / "log.jsonl").read_bytes() == before


def test_a_private_store_under_sticky_tmp_is_written_as_before(tmp_path):
    """The sticky bit (/tmp) lets nobody rename what another user put there: such a parent is fine."""
    d = Path(tempfile.mkdtemp(prefix="sticky-", dir="/tmp"))
    os.chmod(d, 0o1777)
    try:
        assert others_can_write(d / "store") is None
        receipt = cli_json("--dir", str(d / "store"), "write", "written")
        assert receipt["durable"] and not receipt["warnings"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- the kept model ------------------------------------------------------------------------------------------
def test_a_cache_folder_another_user_can_write_holds_no_model_this_process_maps(monkeypatch):
    """The rewritten model is kept to be mapped by every later process; in a folder another user can
    write, they could put their own weights there, so it is neither kept nor mapped: the model is made
    from its checked file in each process, and embeds the same."""
    from retained import embed

    cache = _private_tmp()
    try:
        monkeypatch.setenv("RETAINED_CACHE_DIR", str(cache))
        control = embed.LocalEmbedder({})
        mine = control.embed(["where do the deploy keys live?"])
        kept = embed._mapped_model_file(embed.onnxruntime_module())
        assert kept is not None and str(kept.parent / embed.WEIGHTS) in Path("/proc/self/maps").read_text()
        del control
        os.chmod(cache, 0o777)  # anyone may write it, without the sticky bit
        embed._GOOD.clear()  # as a fresh process: only the stamp files say what was checked
        theirs = embed.LocalEmbedder({})
        assert embed._kept_mapped_model(theirs.model_path(), embed.onnxruntime_module()) is None
        shutil.rmtree(kept.parent)
        got = theirs.embed(["where do the deploy keys live?"])
        assert not kept.parent.exists() and str(cache) not in Path("/proc/self/maps").read_text()
        assert abs(got - mine).max() < 1e-5
    finally:
        shutil.rmtree(cache, ignore_errors=True)
