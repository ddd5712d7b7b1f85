"""A store the user cannot write (someone else's, a read-only disk) still serves reads, and one the
user cannot read fails with one line naming the problem: never an internal error, never exit 3.

As root, the commands really run as `nobody` against a store root owns. Without root, the same
conditions come from the store's modes (r-x for "shared", --- for "private").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from retained.store import Store

ROOT = Path(__file__).resolve().parents[1]
SITE = sysconfig.get_paths()["purelib"]
LAUNCH = ("import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'retained'; "
          "runpy.run_module('retained', run_name='__main__', alter_sys=True)")

# One invocation per command; a command missing here still runs, with no arguments.
INVOCATIONS = {
    "write": ["write", "a new fact"], "checkpoint": ["checkpoint", "where we are"], "search": ["search", "owned"],
    "get": ["get", "mem_NOPE"], "list": ["list"], "forget": ["forget", "mem_NOPE", "--reason", "wrong"],
    "verify": ["verify"], "reindex": ["reindex"], "brief": ["brief"], "export": ["export"],
    "import": ["import", "missing.jsonl"], "hook": ["hook", "session-start", "--host", "claude"],
    "install": ["install", "--dry-run", "--host", "claude"], "uninstall": ["uninstall", "--dry-run", "--host", "claude"],
    "doctor": ["doctor", "--host", "claude"], "serve": ["serve"], "scopes": ["scopes"], "maintain": ["maintain"],
    "ui": ["ui", "--no-open"],
}
READS = {"search", "get", "list", "verify", "brief", "export", "scopes", "maintain", "ui"}
WRITES = {"write", "checkpoint", "reindex", "forget"}


def _commands() -> list[str]:
    from retained.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)


def _nobody() -> tuple[int, int] | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    import pwd

    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _python_for(ids: tuple[int, int] | None) -> str | None:
    """An interpreter of this Python version that the other user may run (a venv under /root may not be)."""
    minor = f"python3.{sys.version_info.minor}"
    for exe in (sys.executable, shutil.which(minor), f"/usr/bin/{minor}"):
        if exe and os.path.exists(exe):
            kw = {} if ids is None else {"user": ids[0], "group": ids[1], "extra_groups": []}
            try:
                ok = subprocess.run([exe, "-c", f"import site; site.addsitedir({SITE!r}); import mcp"],
                                    capture_output=True, timeout=120, cwd="/", **kw)
            except OSError:  # not executable by that user
                continue
            if ok.returncode == 0:
                return exe
    return None


@pytest.fixture(params=["shared", "private"])
def foreign_store(request):
    """A store with one record that this test's commands may read ("shared") or not even read."""
    base = Path(tempfile.mkdtemp(prefix="retained-perm-", dir="/tmp" if os.path.isdir("/tmp") else None))
    os.chmod(base, 0o755)
    store = base / "store"
    with Store(store) as s:
        s.write("owned by someone else", scope="global")
        s.search("owned")  # the index exists too
    home = base / "home"
    home.mkdir()
    ids = _nobody()
    if ids is not None:  # the store stays root's; nobody gets a home of its own
        os.chown(home, *ids)
        mode_dir, mode_file = (0o755, 0o644) if request.param == "shared" else (0o700, 0o600)
    else:
        mode_dir, mode_file = (0o555, 0o444) if request.param == "shared" else (0o000, 0o000)
    for p in store.iterdir():
        os.chmod(p, mode_file)
    os.chmod(store, mode_dir)
    exe = _python_for(ids)
    if exe is None:
        pytest.skip("no interpreter the other user may run")
    yield request.param, store, home, exe, ids
    os.chmod(store, 0o700)
    shutil.rmtree(base, ignore_errors=True)


def _run(exe: str, ids, home: Path, store: Path, args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETAINED_", "XDG_"))}
    env.update(HOME=str(home), RETAINED_DIR=str(store), PYTHONDONTWRITEBYTECODE="1")
    kw = {} if ids is None else {"user": ids[0], "group": ids[1], "extra_groups": []}
    return subprocess.run([exe, "-c", LAUNCH, SITE, *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=str(home), timeout=120, **kw)


def _run_ui(exe: str, ids, home: Path, store: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`retained ui` serves until stopped: wait for its address, load the page, then stop it. The page's
    first screen is in the HTML, so its text joins stdout as if the command had printed it."""
    import selectors
    import time
    import urllib.request

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETAINED_", "XDG_"))}
    env.update(HOME=str(home), RETAINED_DIR=str(store), PYTHONDONTWRITEBYTECODE="1")
    kw = {} if ids is None else {"user": ids[0], "group": ids[1], "extra_groups": []}
    proc = subprocess.Popen([exe, "-c", LAUNCH, SITE, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(home), **kw)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    first, deadline = "", time.monotonic() + 120
    while not first and proc.poll() is None and time.monotonic() < deadline:
        if sel.select(timeout=0.5):
            first = proc.stdout.readline()
    page = ""
    if "http://" in first:
        url = first.split("retained ui: ", 1)[1].strip()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the token becomes a cookie
        with opener.open(url, timeout=30) as reply:
            page = reply.read().decode("utf-8", "replace")
    if proc.poll() is None:
        proc.terminate()
    out, err = proc.communicate(timeout=30)
    rc = 0 if page else proc.returncode
    return subprocess.CompletedProcess(proc.args, rc, first + out + page, err)


def test_every_command_against_someone_elses_store_reads_or_says_why(foreign_store):
    kind, store, home, exe, ids = foreign_store
    for name in _commands():
        args = INVOCATIONS.get(name, [name])
        proc = (_run_ui if name == "ui" else _run)(exe, ids, home, store, args)
        err = proc.stderr.strip()
        where = f"retained {' '.join(args)} ({kind}): rc {proc.returncode}, stderr {err!r}"
        assert proc.returncode in (0, 1, 2), where
        assert "Traceback" not in err and "internal error" not in err, where
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(errors) <= 1, where
        if "✗" in proc.stdout or name == "doctor":  # a failed check is a failure (README: exit codes)
            assert "✗" in proc.stdout and proc.returncode == 1, where  # doctor: this user cannot write the store
        if kind == "private" and name in READS | WRITES:
            assert proc.returncode == 1 and "permission denied" in err and len(err.splitlines()) == 1, where
        elif kind == "shared" and name in READS:
            assert not errors, where
            if name in ("search", "list", "export", "brief", "ui"):
                assert "owned by someone else" in proc.stdout, where
        elif kind == "shared" and name in WRITES:
            assert proc.returncode == 1 and "read-only" in err and len(err.splitlines()) == 1, where


def test_a_read_only_store_says_so_once_and_json_errors_stay_json(foreign_store):
    kind, store, home, exe, ids = foreign_store
    if kind != "shared":
        pytest.skip("needs a store this user may read")
    listed = _run(exe, ids, home, store, ["list"])
    assert listed.returncode == 0 and sum("read-only" in ln for ln in listed.stderr.splitlines()) == 1, listed.stderr
    wrote = _run(exe, ids, home, store, ["write", "nope", "--json"])
    assert wrote.returncode == 1
    reply = json.loads(wrote.stdout)
    assert "read-only" in reply["error"] and reply["hint"]
    assert len(wrote.stderr.strip().splitlines()) == 1


def test_the_server_reads_someone_elses_store_and_refuses_writes_in_one_line(foreign_store):
    kind, store, home, exe, ids = foreign_store
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_search",
                                                                       "arguments": {"query": "owned"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_write",
                                                                       "arguments": {"text": "x"}}},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETAINED_", "XDG_"))}
    env.update(HOME=str(home), RETAINED_DIR=str(store), PYTHONDONTWRITEBYTECODE="1")
    kw = {} if ids is None else {"user": ids[0], "group": ids[1], "extra_groups": []}
    proc = subprocess.Popen([exe, "-c", LAUNCH, SITE, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(home), **kw)
    replies = {}
    for msg in lines:  # one at a time, each after the previous reply, as a host does
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        while "id" in msg and msg["id"] not in replies:
            reply = json.loads(proc.stdout.readline())
            replies[reply.get("id")] = reply
    proc.stdin.close()
    assert proc.wait(60) == 0
    stderr = proc.stderr.read().decode()
    search, listed, write = replies[1]["result"], replies[2]["result"], replies[3]["result"]
    assert write["isError"] is True and len(write["content"][0]["text"].splitlines()) == 1
    if kind == "shared":
        assert search["isError"] is False and search["structuredContent"]["hits"][0]["text"] == "owned by someone else"
        said = [w for r in (search, listed) for w in r["structuredContent"]["warnings"] if "read-only" in w]
        assert len(said) == 1  # said once, not on every call
        assert "read-only" in write["content"][0]["text"]
    else:
        for r in (search, listed):
            assert r["isError"] is True and "permission denied" in r["content"][0]["text"]
    assert "Traceback" not in stderr
