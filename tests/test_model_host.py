"""One model process per user (retained/model_host.py), shared by every `retained serve` of that user.

Real servers over stdio, real host processes, the real model and real unix sockets. Each test gets a
private, short XDG_RUNTIME_DIR (a socket path must fit in ~100 bytes) and stops every host still running
under it (a host lives while a server holds a lease on it; a test that asks a host directly holds one
itself, as a server does).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retained import model_host
from retained.embed import LocalEmbedder
from retained.store import Store
from tests.helpers.stuck import stuck_listener
from tests.mcp_wire import WireServer

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists() or not hasattr(socket, "AF_UNIX"),
                                reason="reads /proc and needs unix sockets")

PARAPHRASE = "what day of the week do we ship?"  # no word in common with DEPLOY; close in meaning
DEPLOY = "Deploys to production go out on Tuesdays after the release review."


def _hosts(runtime: Path) -> list[int]:
    """Pids of the model hosts of this test (by their XDG_RUNTIME_DIR), zombies left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"retained.model_host" not in (entry / "cmdline").read_bytes():
                continue
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            if f"XDG_RUNTIME_DIR={runtime}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


EXIT_S = 5.0  # a host ends GRACE_S after its last lease; this bound leaves room for a loaded machine


def _gone(runtime: Path, path: Path | None = None) -> bool:
    return not _hosts(runtime) and (path is None or not path.exists())


def _mapped(pid: int, name: str) -> bool:
    return name in Path(f"/proc/{pid}/maps").read_text()


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def runtime(monkeypatch) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="rh-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("RETAINED_MODEL_HOST", "on")
    monkeypatch.setenv("RETAINED_EMBED_IDLE_S", "120")  # every host of the run ends by itself, too
    try:
        yield d
    finally:
        for pid in _hosts(d):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(d, ignore_errors=True)


def _store(root: Path, name: str) -> tuple[Path, Path]:
    store_dir, project = root / name, root / f"{name}-proj"
    (project / ".git").mkdir(parents=True)
    with Store(store_dir) as store:
        store.write("Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files.",
                    scope=str(project.resolve()))
        store.write(DEPLOY, kind="decision", scope=str(project.resolve()))
    return store_dir, project.resolve()


@contextlib.contextmanager
def _server(store_dir: Path, project: Path, **env: str) -> Iterator[WireServer]:
    srv = WireServer(env={"RETAINED_DIR": str(store_dir), **env}, cwd=str(project))
    try:
        srv.initialize()
        srv.request("t", "tools/list", {})  # the warm-up starts: it asks for a vector
        yield srv
    finally:
        assert srv.close() == 0
    assert all(json.loads(line) for line in srv.lines)  # stdout carried the protocol only


def _search(srv: WireServer, query: str = PARAPHRASE, msg_id: str = "s") -> dict:
    found = srv.call(msg_id, "memory_search", {"query": query}, timeout=120)["result"]["structuredContent"]
    assert found["semantic"] == "on", found
    assert found["hits"] and found["hits"][0]["text"] == DEPLOY
    return found


def test_vectors_through_the_host_are_exactly_the_in_process_vectors(runtime):
    """Exact, not within a tolerance: the host runs the same LocalEmbedder on the same verified bytes with
    the same session options, and is given the same texts in one request, so the same batches are run;
    the vectors travel as raw float32 bytes, which lose nothing."""
    import numpy as np

    env = dict(os.environ)
    texts = ["Deploys go out on Tuesdays", "", "naïve café — 東京 🚀", "word " * 3000, "x" * 20000,
             *[f"record number {i} about the cache" for i in range(40)]]
    path = model_host.socket_path(env)
    assert path is not None
    model_host.start(path, env)
    with model_host.lease(path, env):
        hosted = model_host.embed(path, env, texts)
        local = LocalEmbedder(env).embed(texts)
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert hosted.dtype == np.float32 and hosted.shape == (len(texts), 384)
    assert np.array_equal(hosted, local)


def test_two_servers_of_one_user_share_one_host_and_map_no_onnxruntime(runtime, tmp_path):
    a = _store(tmp_path, "a")
    b = _store(tmp_path, "b")
    with _server(*a) as one, _server(*b) as two:
        _search(one)
        _search(two)
        hosts = _hosts(runtime)
        assert len(hosts) == 1, hosts
        assert _mapped(hosts[0], "onnxruntime")
        for srv in (one, two):
            assert not _mapped(srv.proc.pid, "onnxruntime"), "the server loaded the model runtime itself"
            assert _mapped(srv.proc.pid, "numpy")  # the vector math stays in the server


@pytest.mark.parametrize("end", ["exits", "is killed with SIGKILL"])
def test_the_host_exits_promptly_when_the_server_that_used_it_ends(runtime, tmp_path, end):
    """No retained process outlives the agent sessions: the server's lease ends with it, however it
    ends, and the host follows within GRACE_S, taking its socket file with it."""
    store_dir, project = _store(tmp_path, "a")
    path = model_host.socket_path(dict(os.environ))
    assert path is not None
    srv = WireServer(env={"RETAINED_DIR": str(store_dir)}, cwd=str(project))
    try:
        srv.initialize()
        _search(srv)
        assert len(_hosts(runtime)) == 1 and path.exists()
        if end == "exits":
            assert srv.close() == 0
        else:
            srv.proc.kill()
            srv.proc.wait(10)
        _wait(lambda: _gone(runtime, path), EXIT_S, "the host to exit after its only server")
    finally:
        srv.close()


def test_with_two_servers_the_host_stays_while_one_remains_and_goes_with_the_last(runtime, tmp_path):
    a = _store(tmp_path, "a")
    b = _store(tmp_path, "b")
    path = model_host.socket_path(dict(os.environ))
    assert path is not None
    with _server(*a) as one:
        _search(one)
        with _server(*b) as two:
            _search(two)
            [host] = _hosts(runtime)
        time.sleep(model_host.GRACE_S + 1.5)  # past the grace: the first server's lease keeps it
        assert _hosts(runtime) == [host] and path.exists()
        _search(one, "on which weekday are production releases shipped?", "s2")  # and it still answers
        assert _hosts(runtime) == [host] and not _mapped(one.proc.pid, "onnxruntime")
    _wait(lambda: _gone(runtime, path), EXIT_S, "the host to exit after its last server")


def test_a_host_nobody_leases_exits_soon_after_it_was_started(runtime):
    """The server that starts a host takes its lease next; a host that never gets one (its starter died
    meanwhile) does not stay: it waits START_WAIT_S for a first lease, then GRACE_S after each."""
    env = dict(os.environ)
    path = model_host.socket_path(env)
    assert path is not None
    model_host.start(path, env)
    assert len(_hosts(runtime)) == 1
    _wait(lambda: _gone(runtime, path), model_host.START_WAIT_S + EXIT_S, "the unleased host to exit")


def test_the_host_exits_after_its_idle_time_even_while_leased(runtime, monkeypatch):
    """Idle (no request for RETAINED_EMBED_IDLE_S), the host exits although a server still holds its
    lease: that server finds its lease ended and starts a new host on its next need."""
    monkeypatch.setenv("RETAINED_EMBED_IDLE_S", "2")
    env = dict(os.environ)
    path = model_host.socket_path(env)
    assert path is not None
    model_host.start(path, env)
    with model_host.lease(path, env) as held:
        model_host.embed(path, env, ["one text"])
        assert len(_hosts(runtime)) == 1 and model_host.held(held)
        _wait(lambda: not _hosts(runtime), 15, "the idle host to exit")
        assert not path.exists()  # it took its socket file with it
        assert model_host.ping(path, env) is None
        # the kernel closes the lease as the process ends (its command line may vanish a moment earlier)
        _wait(lambda: not model_host.held(held), 5, "the lease to end with its host")


def test_a_host_killed_with_sigkill_is_replaced_and_search_keeps_its_meaning(runtime, tmp_path):
    store_dir, project = _store(tmp_path, "a")
    with _server(store_dir, project) as srv:
        _search(srv)
        [first] = _hosts(runtime)
        os.kill(first, signal.SIGKILL)
        _wait(lambda: first not in _hosts(runtime), 10, "the killed host to go")
        # a new query (the first one's vector is cached): the server finds the stale socket, starts a host
        found = _search(srv, "on which weekday are production releases shipped?", "s2")
        assert found["semantic"] == "on"
        hosts = _hosts(runtime)
        assert len(hosts) == 1 and hosts[0] != first
        assert not _mapped(srv.proc.pid, "onnxruntime")
    # the server took a lease on the new host too: it goes with the server
    _wait(lambda: not _hosts(runtime), EXIT_S, "the replacement host to exit after its server")


def test_a_host_of_another_version_or_configuration_is_never_used(runtime, tmp_path, monkeypatch):
    env = dict(os.environ)
    path = model_host.socket_path(env)
    assert path is not None
    other_model = tmp_path / "copy.onnx"  # the same pinned model elsewhere: another configuration
    shutil.copy(LocalEmbedder(env).model_path(), other_model)
    other_env = dict(env, RETAINED_EMBED_MODEL_PATH=str(other_model))
    other = model_host.socket_path(other_env)
    assert other is not None and other != path
    model_host.start(other, other_env)
    other_lease = model_host.lease(other, other_env)  # held by this test to the end, as a server would
    assert model_host.ping(path, env) is None  # this configuration's name: nobody there
    monkeypatch.setattr(model_host, "__version__", "0.0.0-other")
    assert model_host.socket_path(env) != path  # another version: another name as well
    with pytest.raises(model_host.HostUnavailable, match="another retained version"):
        model_host._exchange(other, model_host._stamped(other_env, "embed", texts=["x"]), 5)
    with pytest.raises(model_host.HostUnavailable, match="another retained version"):  # config in the stamp
        model_host._exchange(other, model_host._stamped(env, "embed", texts=["x"]), 5)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("RETAINED_MODEL_HOST", "on")
    store_dir, project = _store(tmp_path, "a")
    with _server(store_dir, project) as srv:
        _search(srv)
        assert len(_hosts(runtime)) == 2  # the server started a host of its own configuration
    other_lease.close()


def _raw(path: Path, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(str(path))
        with contextlib.suppress(OSError):
            s.sendall(data)
        return s.makefile("rb").readline()


def test_the_host_refuses_requests_out_of_bounds_with_one_line_errors(runtime):
    env = dict(os.environ)
    path = model_host.socket_path(env)
    assert path is not None
    model_host.start(path, env)
    held = model_host.lease(path, env)
    too_many = model_host._stamped(env, "embed", texts=["x"] * (model_host.MAX_TEXTS + 1))
    with pytest.raises(model_host.HostUnavailable, match=f"more than {model_host.MAX_TEXTS} texts"):
        model_host._exchange(path, too_many, 10)
    not_texts = json.dumps(model_host._stamped(env, "embed", texts=[1, 2])).encode() + b"\n"
    assert b"unknown request" in _raw(path, not_texts)
    assert b"not JSON" in _raw(path, b"{oops\n")
    assert b"not JSON" in _raw(path, b"[" * 100_000 + b"]" * 100_000 + b"\n")  # nested past any bound: refused,
    assert model_host.ping(path, env) is not None  # and the host answers on
    reply = _raw(path, b"[" + b"1," * (model_host.MAX_REQUEST // 2 + 8) + b"1]\n")  # longer than the bound
    assert b"too large" in reply and reply.count(b"\n") == 1
    assert len(model_host.embed(path, env, ["x"] * 600)) == 600  # the asking side cuts what is allowed
    wrong = json.dumps(model_host._stamped(env, "lease") | {"embed": ["other"]}).encode() + b"\n"
    assert b"another retained version" in _raw(path, wrong)  # a lease is stamped like a request
    held.close()


def test_with_the_switch_off_the_server_loads_the_model_itself(runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("RETAINED_MODEL_HOST", "off")
    store_dir, project = _store(tmp_path, "a")
    with _server(store_dir, project) as srv:
        _search(srv)
        assert _mapped(srv.proc.pid, "onnxruntime")
        assert not _hosts(runtime)
    assert not list((runtime / "retained").glob("*.sock")) if (runtime / "retained").exists() else True


@pytest.mark.parametrize("host", ["hangs", "closes"])
def test_a_host_that_hangs_or_drops_the_request_costs_a_bounded_time(runtime, tmp_path, host):
    """Something listens at the host's name and never answers (the server waits REPLY_BASE_S and more,
    then embeds in-process), or hangs up at once (the server takes the name with a host of its own):
    either way the search answers with meaning in bounded time."""
    env = dict(os.environ)
    path = model_host.socket_path(env)
    assert path is not None
    store_dir, project = _store(tmp_path, "a")
    with stuck_listener(path, host), _server(store_dir, project) as srv:
        started = time.monotonic()
        _search(srv)
        took = time.monotonic() - started
        bound = 2 * (model_host.REPLY_BASE_S + model_host.REPLY_PER_TEXT_S) + 15  # warm-up and search
        assert took < bound, took
        if host == "hangs":
            assert _mapped(srv.proc.pid, "onnxruntime")  # it fell back to its own model
            assert not _hosts(runtime)
        else:
            assert len(_hosts(runtime)) == 1 and not _mapped(srv.proc.pid, "onnxruntime")


def _doctor_semantic(store_dir: Path, **env: str) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "retained", "doctor", "--json", "--host", "claude"],
                         env=dict(os.environ, RETAINED_DIR=str(store_dir), **env), capture_output=True, text=True,
                         timeout=120)
    checks = json.loads(out.stdout)["checks"]
    return next(c for c in checks if c["host"] == "store" and c["check"] == "semantic search")["detail"]


def test_doctor_says_whether_a_model_host_runs_and_for_how_many_servers_starting_and_making_nothing(runtime, tmp_path):
    store_dir, _ = _store(tmp_path, "a")
    detail = _doctor_semantic(store_dir)
    assert "no model host running: the first server that needs a vector starts one" in detail, detail
    assert not (runtime / "retained").exists()  # doctor looked: it made no directory and started no host
    assert _hosts(runtime) == []
    env = dict(os.environ)
    path = model_host.socket_path(env)
    model_host.start(path, env)
    with model_host.lease(path, env):
        pid = _hosts(runtime)[0]
        _wait(lambda: model_host.ping(path, env)["ready"], 60, "the host to load its model")
        detail = _doctor_semantic(store_dir)
        assert f"model host running (pid {pid}), shared by 1 server" in detail, detail
    assert "model host off (RETAINED_MODEL_HOST=off)" in _doctor_semantic(store_dir, RETAINED_MODEL_HOST="off")


def test_a_status_look_keeps_no_idle_host_alive(runtime):
    """doctor's look is not use: a host whose last lease ended exits GRACE_S later however often it is looked at."""
    env = dict(os.environ)
    path = model_host.socket_path(env)
    model_host.start(path, env)
    with model_host.lease(path, env):
        pass
    deadline = time.monotonic() + EXIT_S
    looks = 0
    while time.monotonic() < deadline and not _gone(runtime, path):
        looks += model_host.status(env).startswith("model host running")
        time.sleep(0.05)
    assert looks and _gone(runtime, path), f"the host outlived its grace while looked at {looks} times"
