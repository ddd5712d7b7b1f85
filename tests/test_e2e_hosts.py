"""Real host CLIs against a fake model API on 127.0.0.1: the brief reaches the first model request, and
the stop hook's reason reaches the model at most once. Skipped, with the reason, where npm is unavailable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retained.hook import STOP_REASON
from retained.installers.hosts.codex import trust_entries
from tests.conftest import host_env, require_npm_bin
from tests.fake_model import FakeModel

MARKER = "E2E-MARKER the build uses ninja"
REASON_SNIPPET = STOP_REASON[:60]
PY = sys.executable


def _hook(event, host):
    return f"{PY} -m retained hook {event} --host {host}"


def _seed(store_dir, project):
    subprocess.run([PY, "-m", "retained", "write", MARKER, "--scope", str(project)], check=True,
                   env=dict(os.environ, RETAINED_DIR=str(store_dir)), capture_output=True)


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    (p / ".git").mkdir(parents=True)
    return p


@pytest.mark.slow
def test_claude_code_gets_the_brief_and_one_stop_prompt(tmp_path, project, store_dir, isolate_home):
    claude = require_npm_bin("claude", "Claude Code CLI")
    _seed(store_dir, project)
    (isolate_home / ".claude").mkdir()
    (isolate_home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {
        "SessionStart": [{"matcher": "startup|resume|clear|compact",
                          "hooks": [{"type": "command", "command": _hook("session-start", "claude"), "timeout": 30}]}],
        "Stop": [{"hooks": [{"type": "command", "command": _hook("stop", "claude"), "timeout": 30}]}]}}))

    def script(api, body):
        history = json.dumps(body.get("messages", []))
        if "Stop hook feedback" in history:
            return ("text", "fine")
        if "tool_result" in history:
            return ("text", "done")
        return ("tool", "Bash", {"command": "echo hi", "description": "say hi"})  # real work

    with FakeModel(script) as fm:
        env = host_env(isolate_home, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake",
                        RETAINED_DIR=str(store_dir), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                        DISABLE_AUTOUPDATER="1")
        proc = subprocess.run([claude, "-p", "hello", "--allowedTools", "Bash"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    convo = fm.conversation_requests("anthropic")
    assert convo, "Claude Code sent no request to the fake API"
    assert MARKER in fm.text_of(convo[0])  # the brief, in the very first model request
    assert "<<<retained-memory" in fm.text_of(convo[0])
    last = fm.text_of(convo[-1])
    assert last.count(REASON_SNIPPET) == 1, "the stop prompt must reach the model exactly once"
    assert sum(REASON_SNIPPET in fm.text_of(b) for b in convo) == 1


@pytest.mark.slow
def test_codex_runs_trusted_hooks_without_bypass(tmp_path, project, store_dir, isolate_home):
    codex = require_npm_bin("codex", "Codex CLI")
    _seed(store_dir, project)
    codex_home = isolate_home / ".codex"
    codex_home.mkdir()
    hooks = {"hooks": {
        "SessionStart": [{"matcher": "startup|resume|clear",
                          "hooks": [{"type": "command", "command": _hook("session-start", "codex"), "timeout": 30}]}],
        "Stop": [{"hooks": [{"type": "command", "command": _hook("stop", "codex"), "timeout": 30}]}]}}
    (codex_home / "hooks.json").write_text(json.dumps(hooks))

    def script(api, body):
        history = json.dumps(body.get("input", []))
        if REASON_SNIPPET in history:
            return ("text", "fine")
        if "function_call_output" in history:
            return ("text", "done")
        return ("tool", "exec_command", {"cmd": "echo hi"})  # real work

    with FakeModel(script) as fm:
        config = (f'model = "gpt-fake"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
                  f'base_url = "{fm.url}/v1"\nenv_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n')
        for key, digest in trust_entries(str(codex_home / "hooks.json"), hooks).items():
            config += f'\n[hooks.state."{key}"]\nenabled = true\ntrusted_hash = "{digest}"\n'
        (codex_home / "config.toml").write_text(config)
        env = host_env(isolate_home, CODEX_HOME=str(codex_home), FAKE_OPENAI_KEY="fake", RETAINED_DIR=str(store_dir))
        proc = subprocess.run([codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                               "hello"], cwd=project, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook: SessionStart Completed" in proc.stderr + proc.stdout
    convo = fm.conversation_requests("openai")
    assert convo and MARKER in fm.text_of(convo[0])
    assert fm.text_of(convo[-1]).count(REASON_SNIPPET) == 1
    assert sum(REASON_SNIPPET in fm.text_of(b) for b in convo) == 1
