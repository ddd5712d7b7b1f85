"""Issue 30, item 1 (and 4): this repository installs from each host's own plugin surface.

Real host CLIs at the pinned versions, offline against tests/fake_model.py, each in an isolated HOME:
the host's documented plugin or extension commands against a checkout of this repository, then a
headless session whose first model request holds retained's tools (inline, under their plugin names) and
the brief, a memory_write round trip filed under the user's project, and an uninstall that leaves no
trace of retained in the HOME. `retained` of this version is on PATH (this test run's own), so the plugin
launcher takes its fast path; tests/test_plugin_launcher.py covers the first run that builds.
Skipped, with the reason, where npm is unavailable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retained import __version__
from retained.hook import STOP_REASON
from retained.instructions import GUIDANCE
from retained.store import Store
from tests.conftest import host_env, require_npm_bin
from tests.fake_model import FakeModel
from tests.helpers import plugin_checkout

checkout = plugin_checkout.checkout  # the fixture, by name

BRIEF_HEAD = " left out (brief budget "
MARKER = "E2E-PLUGIN-MARKER releases are cut from the trunk on Thursdays"
# Where a host keeps its own session history (transcripts, logs, caches): not retained's to remove.
HOST_HISTORY = (".claude/projects", ".claude/session-env", ".claude/shell-snapshots", ".claude/todos",
                ".claude/statsig", ".claude/backups", ".codex/sessions", ".codex/log", ".codex/.tmp",
                ".codex/tmp", ".codex/state", ".gemini/tmp", ".gemini/history", ".cache/pip",
                ".cache/claude-cli-nodejs", ".claude/plugins/install-counts-cache.json",
                ".codex/thread_history", ".local/share/retained/", ".cache/retained/")
# (the last two: the store, whose memories stay the user's, and retained's model cache, both retained's
# own wherever it is installed from; the README's removal names them)


def plugin_env(home: Path, **extra: str) -> dict[str, str]:
    """A host's environment with this test run's `retained` on PATH and the default store (in HOME)."""
    env = host_env(home, DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **extra)
    env.pop("RETAINED_DIR", None)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


RECALLED = "heliotrope"
RECALL_HEAD = "retained recalled "  # the first words of the prompt hook's block
ASK = "what is the PLUGINRECALL codeword?"
REASON = STOP_REASON[:60]


def seed(home: Path, project: Path) -> Path:
    """The default store with a marker the brief shows, and a note it leaves out (the brief shows
    decisions first) that only the prompt hook's recall can bring for ASK."""
    store = home / ".local" / "share" / "retained"
    with Store(store) as s:
        s.write(f"the PLUGINRECALL codeword is {RECALLED}", scope=str(project), kind="note")
        for i in range(40):
            s.write(f"filler decision {i}: module {i} keeps its own cache layer", scope=str(project), kind="decision")
        s.write(MARKER, scope=str(project), kind="decision")
    return store


def written(store: Path, text: str) -> list[dict]:
    lines = [json.loads(line) for line in (store / "log.jsonl").read_text().splitlines()]
    return [r for r in lines if r.get("text") == text]


def hook_briefs(body: dict) -> int:
    """How many session-start briefs a model request holds: every brief, less the one inside each copy
    of the server's instructions (which carry a brief of their own). Counted by the brief's first line,
    which hosts pass as it is (Gemini CLI escapes the fence's angle brackets)."""
    blob = json.dumps(body, ensure_ascii=False)
    return blob.count(BRIEF_HEAD) - blob.count(GUIDANCE[:80])


def traces(home: Path) -> list[str]:
    """Files in HOME that name retained, outside the host's own history and the user's store."""
    found = []
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home).as_posix()
        if not path.is_file() or rel.startswith(HOST_HISTORY):
            continue
        if "retained" in rel:
            found.append(rel)
            continue
        if path.stat().st_size < 2_000_000:
            try:
                if "retained" in path.read_text(errors="replace"):
                    found.append(rel)
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_claude_code_plugin_from_its_marketplace_wires_retained(checkout, isolate_home, project):
    claude = require_npm_bin("claude", "Claude Code CLI")
    home = isolate_home
    env = plugin_env(home)
    validated = run([claude, "plugin", "validate", str(checkout)], env, project)
    assert validated.returncode == 0 and "Validation passed" in validated.stdout, validated.stdout + validated.stderr
    before = traces(home)
    for cmd in (["plugin", "marketplace", "add", str(checkout)], ["plugin", "install", "retained@retained"]):
        proc = run([claude, *cmd], env, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    store = seed(home, project)
    tool = "mcp__plugin_retained_retained__memory_write"

    def script(api, body):
        if "tool_result" in json.dumps(body.get("messages", [])):
            return ("text", "saved")
        return ("tool", tool, {"text": "written by claude through the plugin", "kind": "fact"})

    with FakeModel(script) as fm:
        env_s = dict(env, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake")
        proc = run([claude, "-p", ASK, "--allowedTools", tool], env_s, project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    convo = fm.conversation_requests("anthropic")
    first = convo[0]
    assert MARKER in fm.text_of(first)
    assert RECALL_HEAD in fm.text_of(first)  # the prompt hook's recall
    assert REASON not in json.dumps([b["messages"] for b in convo])  # it saved: not asked to
    assert hook_briefs(first) == 1
    tools = {t.get("name"): t for t in first.get("tools", [])}
    assert "ToolSearch" in tools, "tool deferral was not on: the test would prove nothing"
    for name in ("memory_write", "memory_search", "memory_checkpoint"):  # inline, not behind ToolSearch
        entry = tools.get(f"mcp__plugin_retained_retained__{name}")
        assert entry is not None and not entry.get("defer_loading"), sorted(tools)
    records = written(store, "written by claude through the plugin")
    assert records and records[0]["scope"] == str(project)
    assert not (checkout / "build").exists() and not list(checkout.glob("*.egg-info"))  # ran in place, wrote nothing

    def worker(api, body):  # a session that works and saves nothing: the stop hook asks, once
        history = json.dumps(body.get("messages", []))
        if "Stop hook feedback" in history:
            return ("text", "fine")
        if "tool_result" in history:
            return ("text", "done")
        return ("tool", "Bash", {"command": "echo hi", "description": "say hi"})

    with FakeModel(worker) as fm:
        env_s = dict(env, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake")
        proc = run([claude, "-p", "say hi", "--allowedTools", "Bash"], env_s, project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    convo = fm.conversation_requests("anthropic")
    assert sum(REASON in json.dumps(b["messages"]) for b in convo) == 1

    for cmd in (["plugin", "uninstall", "retained@retained"], ["plugin", "marketplace", "remove", "retained"]):
        proc = run([claude, *cmd], env, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (home / ".claude" / "plugins" / "data" / "retained-retained").exists()  # the launcher's notes went with it
    # Claude Code keeps an uninstalled plugin's cached copy, and notes in ~/.claude.json that it was
    # declined (its own bookkeeping); the README's removal deletes the copy.
    shutil.rmtree(home / ".claude" / "plugins" / "cache" / "retained")
    state = json.loads((home / ".claude.json").read_text())
    assert state.pop("declinedPlugins", None) in (None, ["retained@retained"])
    (home / ".claude.json").write_text(json.dumps(state))
    left = [t for t in traces(home) if t not in before]
    assert not left, sorted({"/".join(t.split("/")[:4]) for t in left})


@pytest.mark.slow
def test_gemini_extension_installs_from_a_path_and_wires_retained(checkout, isolate_home, project):
    gemini = require_npm_bin("gemini", "Gemini CLI")
    home = isolate_home
    env = plugin_env(home)
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER",
                                                                      str(checkout): "TRUST_FOLDER"}))
    validated = run([gemini, "extensions", "validate", str(checkout)], env, project)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    before = traces(home)
    proc = run([gemini, "extensions", "install", str(checkout), "--consent"], env, project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    store = seed(home, project)

    def script(api, body):
        if "functionResponse" in json.dumps(body.get("contents", [])):
            return ("text", "saved")
        return ("tool", "mcp_retained_memory_write", {"text": "written by gemini through the extension"})

    with FakeModel(script) as fm:
        env_s = dict(env, GEMINI_API_KEY="fake", GOOGLE_GEMINI_BASE_URL=fm.url)
        proc = run([gemini, "-m", "gemini-2.5-flash", "-p", ASK, "--yolo"], env_s, project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    convo = fm.conversation_requests("gemini")
    assert convo, (proc.stdout[-1000:], proc.stderr[-2000:])
    first = fm.text_of(convo[0])
    assert MARKER in first and "<hook_context>" in first
    assert hook_briefs(convo[0]) == 1
    assert RECALL_HEAD in first  # the prompt hook's recall (BeforeAgent)
    names = {d.get("name") for t in convo[0].get("tools", []) for d in t.get("functionDeclarations", [])}
    assert "mcp_retained_memory_write" in names, sorted(n for n in names if n)
    records = written(store, "written by gemini through the extension")
    assert records and records[0]["scope"] == str(project)
    assert "Invalid hook event name" not in proc.stderr  # the extension's hooks file holds only Gemini's events

    def worker(api, body):  # a session that works and saves nothing: the stop hook (AfterAgent) asks, once
        history = json.dumps(body.get("contents", []))
        if REASON in history:
            return ("text", "fine")
        if "functionResponse" in history:
            return ("text", "done")
        return ("tool", "run_shell_command", {"command": "echo hi"})

    with FakeModel(worker) as fm:
        env_s = dict(env, GEMINI_API_KEY="fake", GOOGLE_GEMINI_BASE_URL=fm.url)
        proc = run([gemini, "-m", "gemini-2.5-flash", "-p", "say hi", "--yolo"], env_s, project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    convo = fm.conversation_requests("gemini")
    assert sum(REASON in json.dumps(b.get("contents", [])) for b in convo) == 1, [fm.text_of(b)[-300:] for b in convo]

    proc = run([gemini, "extensions", "uninstall", "retained"], env, project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Gemini CLI gives an extension no data folder, so the launcher's notes (and, without a retained on
    # PATH, its environment) are in retained-plugin beside the store: the README's removal deletes it.
    # Gemini keeps a signed record of the extensions it has seen (extension_integrity.json): its own.
    assert (home / ".local" / "share" / "retained-plugin").is_dir()
    shutil.rmtree(home / ".local" / "share" / "retained-plugin")
    left = [t for t in traces(home) if t not in before and t != ".gemini/extension_integrity.json"]
    assert not left, sorted({"/".join(t.split("/")[:4]) for t in left})


@pytest.mark.slow
def test_codex_plugin_from_its_marketplace_wires_retained(checkout, isolate_home, project):
    codex = require_npm_bin("codex", "Codex CLI")
    home = isolate_home
    env = plugin_env(home, FAKE_OPENAI_KEY="fake")
    (home / ".codex").mkdir()
    before = traces(home)
    for cmd in (["plugin", "marketplace", "add", str(checkout)], ["plugin", "add", "retained@retained"]):
        proc = run([codex, *cmd], env, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    store = seed(home, project)

    def script(api, body):
        if "function_call_output" in json.dumps(body.get("input", [])):
            return ("text", "saved")
        return ("tool", "memory_write", {"text": "written by codex through the plugin"}, {"namespace": "mcp__retained"})

    with FakeModel(script) as fm:
        config = home / ".codex" / "config.toml"
        kept = config.read_text()
        config.write_text('model = "gpt-fake"\nmodel_provider = "fake"\n' + kept
                          + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{fm.url}/v1"\n'
                            'env_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n')
        # The plugin's hooks go through Codex's hash trust like any hook: a person reviews them once in
        # /hooks; headless, this run stands in for that review.
        proc = run([codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", ASK], env, project)
        config.write_text(kept)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook: SessionStart Completed" in proc.stderr + proc.stdout
    convo = fm.conversation_requests("openai")
    first = fm.text_of(convo[0])
    assert MARKER in first
    assert RECALL_HEAD in first  # the prompt hook's recall
    assert hook_briefs(convo[0]) == 1
    assert "mcp__retained" in json.dumps(convo[0].get("tools", []))
    records = written(store, "written by codex through the plugin")
    assert records and records[0]["scope"] == str(project)  # the server ran in the plugin's folder

    def worker(api, body):  # a session that works and saves nothing: the stop hook asks, once
        history = json.dumps(body.get("input", []))
        if REASON in history:
            return ("text", "fine")
        if "function_call_output" in history:
            return ("text", "done")
        return ("tool", "exec_command", {"cmd": "echo hi"})

    with FakeModel(worker) as fm:
        config.write_text('model = "gpt-fake"\nmodel_provider = "fake"\n' + kept
                          + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{fm.url}/v1"\n'
                            'env_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n')
        proc = run([codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                    "--dangerously-bypass-approvals-and-sandbox", "say hi"], env, project)
        config.write_text(kept)
    assert proc.returncode == 0, proc.stderr[-3000:]
    convo = fm.conversation_requests("openai")
    assert sum(REASON in fm.text_of(b) for b in convo) == 1

    for cmd in (["plugin", "remove", "retained@retained"], ["plugin", "marketplace", "remove", "retained"]):
        proc = run([codex, *cmd], env, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    # Codex keeps a removed plugin's data folder (the launcher's notes, and its environment when it made
    # one): the README's removal deletes it.
    assert (home / ".codex" / "plugins" / "data" / "retained-retained").is_dir()
    shutil.rmtree(home / ".codex" / "plugins" / "data" / "retained-retained")
    left = [t for t in traces(home) if t not in before]
    assert not left, sorted({"/".join(t.split("/")[:4]) for t in left})


@pytest.mark.slow
def test_claude_codes_first_session_after_install_has_the_tools_while_retained_is_made(checkout, isolate_home,
                                                                                       project):
    """No retained anywhere: the first session's first request already lists retained's tools (the
    launcher's stand-in answered within Claude Code's start window), the hooks skip, and the model's
    memory_write waits for the private environment, then lands in the store."""
    claude = require_npm_bin("claude", "Claude Code CLI")
    home = isolate_home
    env = plugin_env(home, RETAINED_PLUGIN_WAIT_S="600")
    env["PATH"] = "/usr/bin:/bin"  # no retained on it: the plugin must bring its own
    for cmd in (["plugin", "marketplace", "add", str(checkout)], ["plugin", "install", "retained@retained"]):
        proc = run([claude, *cmd], env, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    tool = "mcp__plugin_retained_retained__memory_write"

    def script(api, body):
        if "tool_result" in json.dumps(body.get("messages", [])):
            return ("text", "saved")
        return ("tool", tool, {"text": "the first session's write", "kind": "fact"})

    with FakeModel(script) as fm:
        env_s = dict(env, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake")
        proc = run([claude, "-p", "remember something", "--allowedTools", tool], env_s, project, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = fm.conversation_requests("anthropic")[0]
    tools = {t.get("name"): t for t in first.get("tools", [])}
    assert "ToolSearch" in tools
    entry = tools.get(tool)
    assert entry is not None and not entry.get("defer_loading"), sorted(tools)
    data = home / ".claude" / "plugins" / "data" / "retained-retained"
    ready = (data / f"env-{__version__}" / "ready").read_text().split()
    print(f"first session: private environment made in {ready[1]} s")
    records = written(home / ".local" / "share" / "retained", "the first session's write")
    assert records and records[0]["scope"] == str(project)
