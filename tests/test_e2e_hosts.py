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
    # Once: one "Stop hook feedback" user turn, in one request. (2.1.332 also echoes the same block as
    # a system line, "Stop hook blocking error from command: …": one delivery, shown twice.)
    feedback = [m for m in convo[-1]["messages"] if m["role"] == "user" and REASON_SNIPPET in json.dumps(m)]
    assert len(feedback) == 1 and json.dumps(feedback[0]).count(REASON_SNIPPET) == 1, last
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


@pytest.mark.slow
@pytest.mark.parametrize("matcher", ["startup|compact", "startup"])
def test_claude_code_gives_the_brief_again_after_a_compact(project, store_dir, isolate_home, matcher):
    """A real Claude Code, offline: a few resumed turns, then `/compact` in a resumed `-p` session (it
    runs the compaction against the fake model), then one more turn. With retained's session-start hook
    on `compact` the request after the compaction carries the brief again although the startup brief
    was compacted away (the two-minute guard does not swallow it), and the pre-compaction hook's
    memory_checkpoint request reaches the compaction instructions. The control, a matcher without
    `compact`, shows the brief is then gone: what the first case finds is the compact hook's doing."""
    from retained.hook import PRE_COMPACT_ASK

    claude = require_npm_bin("claude", "Claude Code CLI")
    _seed(store_dir, project)
    (isolate_home / ".claude").mkdir()
    (isolate_home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {
        "SessionStart": [{"matcher": matcher,
                          "hooks": [{"type": "command", "command": _hook("session-start", "claude"), "timeout": 30}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": _hook("pre-compact", "claude"), "timeout": 30}]}]}}))
    with FakeModel() as fm:  # every turn, the compaction's summary included, answers "ok"
        env = host_env(isolate_home, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake",
                       RETAINED_DIR=str(store_dir), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                       DISABLE_AUTOUPDATER="1")

        def turn(*args: str) -> dict:
            proc = subprocess.run([claude, "-p", *args, "--output-format", "json"], cwd=project, env=env,
                                  capture_output=True, text=True, timeout=240)
            assert proc.returncode == 0, proc.stderr[-2000:]
            return json.loads(proc.stdout)

        sid = turn("hello")["session_id"]
        for prompt in ("tell me more", "and then?", "one more thing"):  # enough to compact
            turn(prompt, "--resume", sid)
        before = len(fm.conversation_requests("anthropic"))
        compacted = turn("/compact", "--resume", sid)
        assert "Not enough messages" not in json.dumps(compacted), compacted
        summary = fm.conversation_requests("anthropic")[before:]
        turn("what next?", "--resume", sid)
    convo = fm.conversation_requests("anthropic")
    assert MARKER in fm.text_of(convo[0])  # the startup brief
    assert summary and PRE_COMPACT_ASK[:60] in fm.text_of(summary[-1])  # asked once, in the compaction's request
    after = fm.text_of(convo[-1])
    assert "ok" in after and "what next?" in after
    if "compact" in matcher:
        assert MARKER in after and "<<<retained-memory" in after
    else:
        assert MARKER not in after  # compacted away, and nothing gave it back
