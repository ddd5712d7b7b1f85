"""Issue 30, item 2: the plugin brings its own retained (hooks/launch.sh, hooks/launch.py).

Each test runs the launcher of a clean checkout (tests/test_e2e_plugins.py's `checkout`) as a host does,
with a PATH that holds no `retained` unless the test puts one there, in an isolated HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retained import __version__
from tests.helpers import plugin_checkout
from tests.mcp_wire import WireServer

checkout = plugin_checkout.checkout  # the fixture, by name

BARE_PATH = "/usr/bin:/bin"


def served_tools() -> set[str]:
    """The tools `retained serve` itself lists (this test run's retained)."""
    server = WireServer()
    try:
        server.initialize()
        return {t["name"] for t in server.request(2, "tools/list", {}, timeout=60)["result"]["tools"]}
    finally:
        server.close()


def launcher_env(home: Path, data: Path | None, path: str = BARE_PATH, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "PLUGIN_", "RETAINED_PLUGIN"))}
    env.pop("RETAINED_DIR", None)
    env.update(HOME=str(home), PATH=path, **extra)
    if data is not None:
        env["CLAUDE_PLUGIN_DATA"] = str(data)
    return env


def hold_build_lock(data: Path) -> subprocess.Popen:
    """A live process holding the build lock: the environment is being made (by someone else)."""
    data.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    (data / "build.lock").write_text(str(sleeper.pid))
    return sleeper


def session_input(project: Path) -> str:
    return json.dumps({"session_id": "launcher-test-1", "transcript_path": "", "cwd": str(project),
                       "hook_event_name": "SessionStart", "source": "startup"})


def test_hooks_fail_open_while_the_environment_is_made(checkout, isolate_home, project, tmp_path):
    data = tmp_path / "data"
    sleeper = hold_build_lock(data)
    try:
        start = time.monotonic()
        proc = subprocess.run(["sh", str(checkout / "hooks" / "launch.sh"), "hook", "session-start"],
                              input=session_input(project), capture_output=True, text=True, cwd=project,
                              env=launcher_env(isolate_home, data), timeout=30)
        took = time.monotonic() - start
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0 and proc.stdout == ""
    assert "being made" in proc.stderr
    assert took < 5, took
    assert not (data / f"env-{__version__}").exists()  # the hook started no second build


def test_server_answers_the_handshake_at_once_while_the_environment_is_made(checkout, isolate_home, project,
                                                                             tmp_path):
    data = tmp_path / "data"
    sleeper = hold_build_lock(data)
    server = WireServer(env=launcher_env(isolate_home, data, RETAINED_PLUGIN_WAIT_S="1"), cwd=str(project),
                        cmd=["sh", str(checkout / "hooks" / "launch.sh"), "serve"])
    try:
        start = time.monotonic()
        # Claude Code probes the 2026 protocol first and falls back to initialize: at once, or it waits 3 s
        probe = server.request(1, "server/discover", {}, timeout=10)
        init = server.initialize()
        tools = server.request(2, "tools/list", {}, timeout=10)
        took = time.monotonic() - start
        called = server.call(3, "memory_write", {"text": "too early"}, timeout=20)
    finally:
        server.close()
        sleeper.kill()
        sleeper.wait()
    assert took < 2, took  # far inside any host's start window (Claude Code: about 30 s)
    assert probe["error"]["code"] == -32601
    assert init["result"]["serverInfo"]["name"] == "retained" and init["result"]["protocolVersion"] == "2025-06-18"
    listed = {t["name"]: t for t in tools["result"]["tools"]}
    assert set(listed) == served_tools()  # the real server's tools, before it runs
    assert all(t["_meta"]["anthropic/alwaysLoad"] is True for t in listed.values())
    assert called["result"]["isError"] is True
    assert "making its private environment" in called["result"]["content"][0]["text"]


def test_a_retained_of_another_version_on_path_is_not_used(checkout, isolate_home, project, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "retained"
    fake.write_text("#!/bin/sh\necho 'retained 0.0.1'\n")
    fake.chmod(0o755)
    data = tmp_path / "data"
    sleeper = hold_build_lock(data)
    try:
        proc = subprocess.run(["sh", str(checkout / "hooks" / "launch.sh"), "hook", "session-start"],
                              input=session_input(project), capture_output=True, text=True, cwd=project,
                              env=launcher_env(isolate_home, data, path=f"{bindir}:{BARE_PATH}"), timeout=30)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0 and proc.stdout == ""
    assert not list(data.glob("on-path-*"))


def test_server_files_records_under_the_project_when_started_in_the_plugin_folder(checkout, isolate_home,
                                                                                   project, tmp_path):
    """Codex starts a plugin's server in the plugin's folder with no project variable: the project is
    where the host runs (here a parent process in the project, as Codex is)."""
    store = tmp_path / "store"
    env = launcher_env(isolate_home, tmp_path / "data", path=os.path.dirname(sys.executable) + ":" + BARE_PATH,
                       RETAINED_DIR=str(store))
    host = ("import os, subprocess, sys; os.chdir(sys.argv[1]); "
            "sys.exit(subprocess.call(['sh', sys.argv[2] + '/hooks/launch.sh', 'serve'], cwd=sys.argv[2]))")
    server = WireServer(env=env, cwd=str(project), cmd=[sys.executable, "-c", host, str(project), str(checkout)])
    try:
        server.initialize()
        reply = server.call(2, "memory_write", {"text": "filed where the host runs"}, timeout=60)
    finally:
        server.close()
    assert reply["result"]["isError"] is False, reply
    records = [json.loads(line) for line in (store / "log.jsonl").read_text().splitlines()]
    assert [r["scope"] for r in records if r["text"] == "filed where the host runs"] == [str(project)]


def test_data_folder_of_an_installed_copy_is_the_hosts_data_folder_for_it(checkout, isolate_home, project,
                                                                         tmp_path):
    """A copy a host installed under <home>/plugins/cache/<marketplace>/<plugin>/<version>, started with no
    data variable (Codex's server), keeps its notes where the host's hooks for it keep theirs."""
    import shutil

    root = tmp_path / "codex" / "plugins" / "cache" / "market" / "retained" / __version__
    shutil.copytree(checkout, root, ignore=shutil.ignore_patterns(".git"))
    env = launcher_env(isolate_home, None, path=os.path.dirname(sys.executable) + ":" + BARE_PATH)
    proc = subprocess.run(["sh", str(root / "hooks" / "launch.sh"), "--version"], capture_output=True, text=True,
                          cwd=project, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"retained {__version__}", proc.stderr
    noted = tmp_path / "codex" / "plugins" / "data" / "retained-market" / f"on-path-{__version__}"
    assert noted.read_text() == str(Path(sys.executable).parent / "retained")


@pytest.mark.slow
def test_first_run_makes_the_private_environment_once_and_then_serves(checkout, isolate_home, project, tmp_path):
    """No retained anywhere: the first server start answers the handshake at once, a tool call waits for
    the environment made from the plugin's own source, then is answered by the real server; the
    environment is in the data folder, nothing is written in the plugin's folder, and the next start is
    the fast path."""
    data = tmp_path / "data"
    env = launcher_env(isolate_home, data, RETAINED_DIR=str(tmp_path / "store"), RETAINED_PLUGIN_WAIT_S="600")
    server = WireServer(env=env, cwd=str(project), cmd=["sh", str(checkout / "hooks" / "launch.sh"), "serve"])
    try:
        start = time.monotonic()
        server.initialize()
        handshake = time.monotonic() - start
        tools = server.request(2, "tools/list", {}, timeout=10)
        reply = server.call(3, "memory_write", {"text": "the first run's write"}, timeout=900)
        took = time.monotonic() - start
    finally:
        server.close()
    print(f"first run: handshake in {handshake:.2f} s, environment made and the first write answered in {took:.1f} s")
    assert handshake < 2
    assert {t["name"] for t in tools["result"]["tools"]} == served_tools()
    assert reply["result"]["isError"] is False and reply["result"]["structuredContent"]["durable"] is True, reply
    assert "making a private environment" in server.stderr
    ready = data / f"env-{__version__}" / "ready"
    assert ready.read_text().split()[0] == __version__
    git_status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=checkout, capture_output=True,
                                text=True).stdout
    assert git_status == "", git_status  # nothing written in the plugin's folder
    again = time.monotonic()
    proc = subprocess.run(["sh", str(checkout / "hooks" / "launch.sh"), "--version"], capture_output=True, text=True,
                          cwd=project, env=env, timeout=60)
    assert proc.stdout.strip() == f"retained {__version__}" and time.monotonic() - again < 10


def test_a_lock_being_taken_is_a_build_not_a_stale_lock(checkout, isolate_home, project, tmp_path):
    """A build's lock exists a moment before its pid is in it: a second start that took it for a dead
    build's would remove it and build beside it (measured: two builds deleting each other's files)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "build.lock").write_text("")
    proc = subprocess.run(["sh", str(checkout / "hooks" / "launch.sh"), "hook", "session-start"],
                          input=session_input(project), capture_output=True, text=True, cwd=project,
                          env=launcher_env(isolate_home, data), timeout=30)
    assert proc.returncode == 0 and proc.stdout == "" and "being made" in proc.stderr
    assert "making a private environment" not in proc.stderr  # no second build started
    assert (data / "build.lock").exists() and not (data / f"env-{__version__}").exists()
