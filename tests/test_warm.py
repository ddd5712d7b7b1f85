"""A running server warms the model after its handshake and lends it to the prompt hook.

Real `retained serve` processes over stdio, real hook processes, the real model; the hook's own
numpy and onnxruntime are made unimportable, so only a borrowed model can find a paraphrase.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retained import warm
from retained.store import Store
from tests.helpers.stuck import stuck_listener
from tests.mcp_wire import WireServer

PARAPHRASE = "what day of the week do we ship?"  # no word in common with DEPLOY; close in meaning (cosine 0.45)
DEPLOY = "Deploys to production go out on Tuesdays after the release review."


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    return project.resolve()


def _seed(store_dir: Path, project: Path) -> None:
    with Store(store_dir) as store:
        store.write("Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files.", scope=str(project))
        store.write(DEPLOY, kind="decision", scope=str(project))


def _mapped(pid: int, name: str) -> bool:
    return name in Path(f"/proc/{pid}/maps").read_text()


def _wait_warm(store_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = warm.ask(store_dir, {"op": "ping"})
        if reply and reply.get("warm"):
            return
        time.sleep(0.1)
    raise AssertionError("the server never said it was warm")


@contextlib.contextmanager
def _warm_server(store_dir: Path, project: Path) -> Iterator[WireServer]:
    """A `retained serve` of the store, past its tool list and warm; it exits cleanly at the end."""
    srv = WireServer(env={"RETAINED_DIR": str(store_dir)}, cwd=str(project))
    try:
        srv.initialize()
        srv.request("t", "tools/list", {})
        _wait_warm(store_dir)
        yield srv
    finally:
        assert srv.close() == 0


def _hook(store_dir: Path, project: Path, shim: Path, prompt: str, sid: str) -> subprocess.CompletedProcess[str]:
    payload = json.dumps({"session_id": sid, "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                          "prompt": prompt})
    env = dict(os.environ, RETAINED_DIR=str(store_dir), CLAUDECODE="1",
               PYTHONPATH=str(shim))
    return subprocess.run([sys.executable, "-m", "retained", "hook", "prompt", "--host", "claude"], input=payload,
                          env=env, capture_output=True, text=True, cwd=project, timeout=60)


def _no_model_here(tmp_path: Path) -> Path:
    shim = tmp_path / "shim"
    shim.mkdir()
    for name in ("numpy", "onnxruntime"):
        (shim / f"{name}.py").write_text(f"raise ImportError('no {name} in the hook process')\n")
    return shim


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps")
def test_server_loads_the_model_after_the_tool_list_never_before_and_maps_it(store_dir, tmp_path):
    """Before the tool list, no model (no onnxruntime in the server); after it, the model is loaded in the
    server itself, its weights mapped from the kept model (shared with every other retained process of
    this user through the page cache, not copied)."""
    project = _project(tmp_path)
    _seed(store_dir, project)
    srv = WireServer(env={"RETAINED_DIR": str(store_dir)}, cwd=str(project))
    try:
        srv.initialize()
        srv.request("p", "ping", {}, timeout=60)  # the SDK is up: whatever it loads at start is loaded
        time.sleep(0.5)
        assert not _mapped(srv.proc.pid, "onnxruntime"), "model runtime loaded before the tool list"
        assert not (store_dir / warm.SOCKET_NAME).exists()
        tools = srv.request("t", "tools/list", {})
        assert tools["result"]["tools"]
        _wait_warm(store_dir)
        assert _mapped(srv.proc.pid, "onnxruntime")
        assert _mapped(srv.proc.pid, str(Path(os.environ["RETAINED_CACHE_DIR"]).resolve() / "model-")), "kept model mapped"
        reply = srv.call("s", "memory_search", {"query": PARAPHRASE})
        found = reply["result"]["structuredContent"]
        assert found["semantic"] == "on" and found["hits"][0]["text"] == DEPLOY
    finally:
        assert srv.close() == 0
    assert all(json.loads(line) for line in srv.lines)  # stdout carried protocol only, warm-up included
    assert not (store_dir / warm.SOCKET_NAME).exists()  # removed at exit


def test_prompt_hook_borrows_a_running_servers_model_and_searches_alone_without_one(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    shim = _no_model_here(tmp_path)  # the hook process itself cannot import numpy or onnxruntime
    with _warm_server(store_dir, project):
        served = _hook(store_dir, project, shim, PARAPHRASE, "s-served")
        assert served.returncode == 0, served.stderr
        assert "Tuesdays" in served.stdout  # found by meaning: the server's model
    alone = _hook(store_dir, project, shim, PARAPHRASE, "s-alone")
    assert alone.returncode == 0 and "Traceback" not in alone.stderr, alone.stderr
    assert alone.stdout == ""  # by words alone the paraphrase finds nothing, so nothing is injected
    words = _hook(store_dir, project, shim, "when do deploys to production go out?", "s-words")
    assert "Tuesdays" in words.stdout


def test_a_warm_server_answers_the_whole_recall_and_the_hook_opens_no_store(store_dir, tmp_path):
    """With a warm server, the prompt hook asks it for the recall itself (the bar, what the session was
    shown, the fenced block): the hook process cannot even import sqlite3, so it opened no store and no
    index, and a record it was shown is not injected again."""
    project = _project(tmp_path)
    _seed(store_dir, project)
    shim = _no_model_here(tmp_path)
    (shim / "sqlite3.py").write_text("raise ImportError('no sqlite3 in the hook process')\n")
    with _warm_server(store_dir, project):
        first = _hook(store_dir, project, shim, PARAPHRASE, "s-whole")
        assert first.returncode == 0 and "Tuesdays" in first.stdout, first.stderr
        assert "<<<retained-memory" in first.stdout  # fenced as data, as the hook's own recall fences it
        again = _hook(store_dir, project, shim, PARAPHRASE, "s-whole")
        assert again.returncode == 0 and again.stdout == "", again.stdout  # shown once: not again
        unrelated = _hook(store_dir, project, shim, "rename the variable foo to bar in utils.py", "s-other")
        assert unrelated.returncode == 0 and unrelated.stdout == ""


# What a prompt costs before it is answered is mostly imports: each of these took a warm prompt hook
# 1.5-6 ms (python -c "import json, X" against "import json"), and none is needed to ask a warm server.
NOT_ON_THE_WARM_PATH = ("typing", "hashlib", "socket", "threading", "sqlite3", "numpy", "onnxruntime", "mcp",
                        "pydantic", "argparse")


def test_a_prompt_answered_by_a_warm_server_imports_only_what_asking_takes(store_dir, tmp_path):
    """The warm path stays lean: the hook process that asks a warm server imports no typing, hashlib,
    socket (the C module _socket is enough), threading, store or model modules."""
    project = _project(tmp_path)
    _seed(store_dir, project)
    payload = json.dumps({"session_id": "0b4d2c3e-5f60-4718-9a2b-3c4d5e6f7a8b", "cwd": str(project),
                          "hook_event_name": "UserPromptSubmit", "prompt": PARAPHRASE})
    env = dict(os.environ, RETAINED_DIR=str(store_dir), CLAUDECODE="1")
    with _warm_server(store_dir, project):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "retained", "hook", "prompt", "--host", "claude"],
                             input=payload, env=env, capture_output=True, text=True, cwd=project, timeout=60)
    assert out.returncode == 0 and "Tuesdays" in out.stdout, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "retained.warm" in imported  # the path asked about
    assert not {m for m in imported if m.split(".")[0] in NOT_ON_THE_WARM_PATH}


def test_a_server_with_another_embedder_or_version_is_not_asked(store_dir, tmp_path, monkeypatch):
    project = _project(tmp_path)
    _seed(store_dir, project)
    with Store(store_dir) as store:
        lender = warm.Lender(store)
        assert lender.start()
        try:
            assert warm.ask(store_dir, {"op": "ping"}) == {"v": warm.PROTOCOL, "warm": False}
            monkeypatch.setenv("RETAINED_EMBED_MODEL_PATH", str(tmp_path / "other.onnx"))
            assert warm.ask(store_dir, {"op": "ping"}) is None
            monkeypatch.delenv("RETAINED_EMBED_MODEL_PATH")
            version = warm.__version__
            monkeypatch.setattr(warm, "__version__", "0.0.0-other")  # this side speaks another version
            assert warm.ask(store_dir, {"op": "ping"}) is None
            monkeypatch.setattr(warm, "__version__", version)
            assert warm.ask(store_dir, {"op": "search", "query": "x", "k": "many"}) is None
            deep = b"[" * 30_000 + b"]" * 30_000 + b"\n"  # within the size bound, nested past the depth bound
            assert lender.answer(deep) == {"v": warm.PROTOCOL, "error": "not JSON"}
            # a lone surrogate written raw (as json.loads of bytes takes it) is still read, as before the bound
            surrogate = (json.dumps(warm._stamp({"op": "ping"}))[:-1] + ', "x": "\ud800"}').encode("utf-8", "surrogatepass")
            assert lender.answer(surrogate) == {"v": warm.PROTOCOL, "warm": False}
            second = warm.Lender(store)
            assert second.start() is False  # one lender per store: the live one keeps the name
        finally:
            lender.stop()
    assert not (store_dir / warm.SOCKET_NAME).exists()


def test_a_socket_left_by_a_killed_server_is_replaced_and_a_dead_one_never_blocks_the_hook(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(store_dir / warm.SOCKET_NAME))
    stale.close()  # the name stays, nobody listens: a server killed with SIGKILL leaves this
    started = time.monotonic()
    assert warm.ask(store_dir, {"op": "ping"}) is None
    assert time.monotonic() - started < 1
    with Store(store_dir) as store:
        lender = warm.Lender(store)
        assert lender.start()
        try:
            assert warm.ask(store_dir, {"op": "ping"}) is not None
        finally:
            lender.stop()


@pytest.mark.parametrize("server", ["hangs", "closes"])
def test_a_server_that_hangs_or_drops_the_request_costs_the_hook_at_most_its_timeout(store_dir, tmp_path, server):
    """The hook asks with a deadline (warm.ASK_TIMEOUT_S), then answers by words itself: a server
    that accepts and never replies, or accepts and hangs up, neither blocks the prompt nor loses it."""
    project = _project(tmp_path)
    _seed(store_dir, project)
    with stuck_listener(store_dir / warm.SOCKET_NAME, server):
        started = time.monotonic()
        assert warm.ask(store_dir, {"op": "ping"}) is None
        assert time.monotonic() - started < warm.ASK_TIMEOUT_S + 0.5
        shim = _no_model_here(tmp_path)
        started = time.monotonic()
        words = _hook(store_dir, project, shim, "when do deploys to production go out?", f"s-{server}")
        took = time.monotonic() - started
        assert words.returncode == 0 and "Traceback" not in words.stderr, words.stderr
        assert "Tuesdays" in words.stdout  # answered by words, in the hook's own process
        assert took < warm.ASK_TIMEOUT_S + 5  # the deadline, plus one fresh interpreter on a loaded machine
