"""`retained install` against real host CLIs in a sandboxed HOME: the hosts see the server, run the hooks
(Codex without its trust bypass), put the brief in their first model request, and a memory_write the
fake model asks for lands in the log. Skipped, with the reason, where npm is unavailable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retained.store import Store
from tests.conftest import host_env, require_npm_bin
from tests.fake_model import FakeModel

MARKER = "E2E-INSTALL-MARKER deploys go through the release branch"


def _env(home: Path, store: Path, **extra: str) -> dict[str, str]:
    return host_env(home, RETAINED_DIR=str(store), **extra)


def _install(host: str, home: Path, store: Path, project: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "retained", "install", "--yes", "--host", host],
                          env=_env(home, store), cwd=project, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    with Store(store) as s:
        s.write(MARKER, scope=str(project))


def _log_texts(store: Path) -> list[str]:
    return [json.loads(line)["text"] for line in (store / "log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_claude_code_sees_the_installed_server_and_uses_it(isolate_home, store_dir, project):
    claude = require_npm_bin("claude", "Claude Code CLI")
    _install("claude", isolate_home, store_dir, project)
    listed = subprocess.run([claude, "mcp", "list"], env=_env(isolate_home, store_dir), cwd=project,
                            capture_output=True, text=True, timeout=120)
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("retained:")), "")
    assert "Connected" in line and "✔" in line, listed.stdout + listed.stderr

    def script(api, body):
        history = json.dumps(body.get("messages", []))
        if "tool_result" in history:
            return ("text", "saved")
        return ("tool", "mcp__retained__memory_write", {"text": "written by claude through retained", "kind": "fact"})

    with FakeModel(script) as fm:
        env = _env(isolate_home, store_dir, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        proc = subprocess.run([claude, "-p", "remember something"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    convo = fm.conversation_requests("anthropic")
    assert MARKER in fm.text_of(convo[0])
    tools = {t.get("name"): t for t in convo[0].get("tools", [])}
    assert "ToolSearch" in tools, "tool deferral was not on: the test would prove nothing"
    for name in ("memory_write", "memory_search", "memory_list"):  # loaded inline, not behind ToolSearch
        tool = tools.get(f"mcp__retained__{name}")
        assert tool is not None and not tool.get("defer_loading"), sorted(tools)
    assert "written by claude through retained" in _log_texts(store_dir)
    with Store(store_dir) as s:
        assert s.verify()["intact"] is True


@pytest.mark.slow
def test_codex_sees_the_installed_server_and_uses_it(isolate_home, store_dir, project):
    codex = require_npm_bin("codex", "Codex CLI")
    _install("codex", isolate_home, store_dir, project)
    got = subprocess.run([codex, "mcp", "get", "retained", "--json"], env=_env(isolate_home, store_dir),
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    entry = json.loads(got.stdout)
    assert entry["enabled"] is True and entry["transport"]["args"][-1] == "serve"
    assert Path(entry["transport"]["command"]).is_absolute()
    assert entry["transport"]["env"]["RETAINED_DIR"] == str(store_dir)

    def script(api, body):
        history = json.dumps(body.get("input", []))
        if "function_call_output" in history:
            return ("text", "saved")
        return ("tool", "memory_write", {"text": "written by codex through retained"}, {"namespace": "mcp__retained"})

    with FakeModel(script) as fm:
        config = isolate_home / ".codex" / "config.toml"
        config.write_text('model = "gpt-fake"\nmodel_provider = "fake"\n' + config.read_text()
                          + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{fm.url}/v1"\n'
                            'env_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n')
        # No --dangerously-bypass-hook-trust: the hooks run because install wrote their trust hashes.
        proc = subprocess.run([codex, "exec", "--skip-git-repo-check", "hello"], cwd=project,
                              env=_env(isolate_home, store_dir, FAKE_OPENAI_KEY="fake"), capture_output=True,
                              text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook: SessionStart Completed" in proc.stderr + proc.stdout
    convo = fm.conversation_requests("openai")
    assert MARKER in fm.text_of(convo[0])
    assert "written by codex through retained" in _log_texts(store_dir)


@pytest.mark.slow
def test_gemini_cli_gets_the_brief_and_uses_the_installed_server(isolate_home, store_dir, project):
    gemini = require_npm_bin("gemini", "Gemini CLI")
    _install("gemini", isolate_home, store_dir, project)
    settings_path = isolate_home / ".gemini" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}  # offline auth against the fake API
    settings_path.write_text(json.dumps(settings, indent=2))
    (isolate_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))

    def script(api, body):
        if "functionResponse" in json.dumps(body.get("contents", [])):
            return ("text", "saved")
        return ("tool", "mcp_retained_memory_write", {"text": "written by gemini through retained"})

    with FakeModel(script) as fm:
        env = _env(isolate_home, store_dir, GEMINI_API_KEY="fake", GOOGLE_GEMINI_BASE_URL=fm.url)
        proc = subprocess.run([gemini, "-m", "gemini-2.5-flash", "-p", "hello", "--yolo"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    convo = fm.conversation_requests("gemini")
    assert convo, (proc.stdout[-1000:], proc.stderr[-2000:], [p for p, _ in fm.requests])
    assert MARKER in fm.text_of(convo[0]) and "<hook_context>" in fm.text_of(convo[0])
    assert "written by gemini through retained" in _log_texts(store_dir)


@pytest.mark.slow
def test_install_and_uninstall_while_real_claude_code_rewrites_its_config(isolate_home, store_dir, project):
    """Real Claude Code processes adding servers to ~/.claude.json while retained installs and
    uninstalls: every server Claude Code added survives, and so does the final install."""
    claude = require_npm_bin("claude", "Claude Code CLI")
    env = _env(isolate_home, store_dir)
    (isolate_home / ".claude.json").write_text('{\n  "myOwnKey": 42\n}\n')
    added = [f"other{i}" for i in range(6)]
    adder = subprocess.Popen(
        ["sh", "-c", " ; ".join(f"{claude} mcp add-json -s user {name} "
                                 "'{\"type\":\"stdio\",\"command\":\"echo\",\"args\":[\"x\"]}' >/dev/null 2>&1"
                                 for name in added)],
        env=env, cwd=project)
    cli = [sys.executable, "-m", "retained"]
    for _ in range(3):
        for args in (["install", "--yes", "--host", "claude", "--no-hooks"], ["uninstall", "--yes", "--host", "claude"]):
            proc = subprocess.run(cli + args, env=env, cwd=project, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(cli + ["install", "--yes", "--host", "claude", "--no-hooks"], env=env, cwd=project,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert adder.wait(timeout=120) == 0
    doc = json.loads((isolate_home / ".claude.json").read_text())
    assert set(added) <= set(doc["mcpServers"]), sorted(doc["mcpServers"])
    assert "retained" in doc["mcpServers"] and doc.get("myOwnKey") == 42
