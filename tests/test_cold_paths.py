"""The cold paths: a one-shot CLI search answers by words at once and says meaning was not used, a
running server answers the CLI with its model, and the prompt hook falls back by itself when the server
is gone or hangs, within a bounded wait. Real processes, real sockets, the real model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from retained import warm
from retained.store import Store
from tests.test_warm import DEPLOY, PARAPHRASE, _hook, _no_model_here, _project, _seed


def _cli(store_dir: Path, project: Path, *args: str, shim: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RETAINED_DIR=str(store_dir))
    if shim is not None:
        env["PYTHONPATH"] = str(shim)
    return subprocess.run([sys.executable, "-m", "retained", *args], env=env, capture_output=True, text=True,
                          cwd=project, timeout=60)


def test_cli_search_with_words_answers_by_words_at_once_and_says_meaning_was_not_used(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    shim = _no_model_here(tmp_path)  # loading the model would fail loudly: it must not be tried
    out = _cli(store_dir, project, "search", "--json", "--words", "deploys production", shim=shim)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["semantic"] == "off: words only (--words)"
    assert res["hits"][0]["text"] == DEPLOY and res["hits"][0]["match"] == "words"
    assert any("meaning was not used" in w and "--words" in w for w in res["warnings"])
    text = _cli(store_dir, project, "search", "--words", "deploys production", shim=shim)
    assert "words only (semantic off: words only (--words))" in text.stdout and "Tuesdays" in text.stdout


def test_cli_search_answers_by_meaning_by_default_loading_the_model_here(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    res = json.loads(_cli(store_dir, project, "search", "--json", PARAPHRASE).stdout)
    assert res["semantic"] == "on" and res["hits"][0]["text"] == DEPLOY


def test_cli_search_is_answered_by_a_running_servers_model(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    shim = _no_model_here(tmp_path)
    with Store(store_dir) as store:
        lender = warm.Lender(store)
        assert lender.start()
        try:
            store.semantic().warm()
            out = _cli(store_dir, project, "search", "--json", "-k", "1", PARAPHRASE, shim=shim)
        finally:
            lender.stop()
    res = json.loads(out.stdout)
    assert res["semantic"] == "on", res
    assert res["returned"] == 1 and res["hits"][0]["text"] == DEPLOY and res["hits"][0]["match"] == "meaning"


class _HangingServer:
    """Accepts on the store's recall.sock and never answers, like a server stuck in a long call."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_the_prompt_hook_falls_back_by_itself_when_the_server_hangs(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    hanging = _HangingServer(store_dir / warm.SOCKET_NAME)
    try:
        started = time.monotonic()
        assert warm.ask(store_dir, {"op": "ping"}, timeout=0.5) is None
        assert time.monotonic() - started < 5  # bounded by the timeout, not by the server
        # The hook asks, gives up after ASK_TIMEOUT_S and finds the paraphrase with its own model.
        got = _hook(store_dir, project, tmp_path / "no-shim", PARAPHRASE, "s-hang")
    finally:
        hanging.close()
    assert got.returncode == 0, got.stderr
    assert "Tuesdays" in got.stdout


def test_the_prompt_hook_falls_back_when_the_server_is_gone(store_dir, tmp_path):
    project = _project(tmp_path)
    _seed(store_dir, project)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(store_dir / warm.SOCKET_NAME))
    stale.close()  # a server killed with SIGKILL leaves its socket's name behind
    got = _hook(store_dir, project, tmp_path / "no-shim", PARAPHRASE, "s-gone")
    assert got.returncode == 0 and "Tuesdays" in got.stdout, got.stderr
