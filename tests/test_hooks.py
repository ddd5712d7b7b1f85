"""Hooks: the right shape for every host, never twice, honest stop prompts, and always exit 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retained.installers.hosts import get
from retained.store import Store
from tests.conftest import run_cli
from tests.helpers.hostile import append_line, jsonl, sealed_chain

ROOT = Path(__file__).resolve().parents[1]


def fixtures(project: Path, transcript: Path) -> dict[str, tuple[dict, dict]]:
    """Input shapes from the hosts reference (section 2.3, 3.4, 4.2, 5.2, 6.3), and each host's environment."""
    p = str(project)
    return {
        "claude": ({"session_id": "f658-claude", "transcript_path": str(transcript), "cwd": p,
                    "hook_event_name": "SessionStart", "source": "startup"},
                   {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": p, "CLAUDE_CODE_SESSION_ID": "f658-claude"}),
        "codex": ({"session_id": "01a226f3-codex", "transcript_path": str(transcript), "cwd": p,
                   "hook_event_name": "SessionStart", "model": "gpt-fake", "permission_mode": "bypassPermissions",
                   "source": "startup"}, {"CODEX_MANAGED_BY_NPM": "1"}),
        "gemini": ({"session_id": "gem-1", "transcript_path": str(transcript), "cwd": p,
                    "hook_event_name": "SessionStart", "timestamp": "2026-11-29T10:00:00Z", "source": "startup"},
                   {"GEMINI_SESSION_ID": "gem-1", "GEMINI_PROJECT_DIR": p, "CLAUDE_PROJECT_DIR": p}),
        "vscode": ({"timestamp": "2026-11-29T10:00:00Z", "cwd": p, "sessionId": "vs-1", "hookEventName": "SessionStart",
                    "transcript_path": str(transcript), "source": "new"}, {}),
        "cursor": ({"session_id": "cur-1", "conversation_id": "conv-1", "generation_id": "g-1",
                    "hook_event_name": "sessionStart", "workspace_roots": [p], "model": "auto",
                    "cursor_version": "2.1.0", "user_email": "dev@example.com", "is_background_agent": False,
                    "composer_mode": "agent"}, {"CURSOR_VERSION": "2.1.0"}),
    }


@pytest.fixture
def transcript(tmp_path):
    path = tmp_path / "transcript.jsonl"
    path.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n")
    return path


def hook(event, payload, env=None, *args, raw=None):
    proc = run_cli("hook", event, *args, input=raw if raw is not None else json.dumps(payload), env=env or {})
    assert proc.returncode == 0, proc.stderr
    return proc


def context_of(host, out):
    data = json.loads(out)
    if host == "cursor":
        assert data["continue"] is True
        return data["additional_context"]
    assert data["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return data["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("host", ["claude", "codex", "gemini", "vscode", "cursor"])
def test_session_start_prints_the_brief_in_each_hosts_shape(store_dir, project, transcript, host):
    with Store(store_dir) as s:
        s.write("deploys go through the release branch", scope=str(project))
        s.write("someone else's project", scope="/elsewhere")
    payload, env = fixtures(project, transcript)[host]
    proc = hook("session-start", payload, env)
    text = context_of(host, proc.stdout)
    assert "deploys go through the release branch" in text and "someone else" not in text
    assert text.splitlines()[0].startswith(f"retained memory for {project}: 1 record, 1 shown, 0 left out")


@pytest.mark.parametrize("host", ["claude", "codex", "gemini", "vscode", "cursor"])
def test_host_is_detected_without_the_flag_and_forced_with_it(store_dir, project, transcript, host):
    payload, env = fixtures(project, transcript)[host]
    out = hook("session-start", payload, env).stdout
    assert ("additional_context" in out) == (host == "cursor")
    forced = hook("session-start", {"cwd": str(project), "session_id": f"forced-{host}"}, {}, "--host", host).stdout
    assert ("additional_context" in forced) == (host == "cursor")


def test_never_injects_twice_into_one_session(store_dir, project, transcript):
    with Store(store_dir) as s:
        s.write("x", scope=str(project))
    payload, env = fixtures(project, transcript)["claude"]
    assert hook("session-start", payload, env).stdout  # Claude Code's own run
    # The same ~/.claude/settings.json hook, run again by VS Code or Cursor for the same session: silent.
    assert hook("session-start", payload, env).stdout == ""
    # A later compaction re-injects: the context was emptied.
    assert hook("session-start", dict(payload, source="compact"), env).stdout


@pytest.mark.parametrize("sid", ["0b4d2c3e-5f60-4718-9a2b-3c4d5e6f7a8b", "../../escape", "a" * 65, "sp ace", ".hidden",
                                 "\u00e9t\u00e9", "x/y"])
def test_each_session_has_its_own_note_inside_the_sessions_folder_whatever_its_id(store_dir, project, transcript, sid):
    """A session's note is named by its id when that is a plain name (no OpenSSL load on the prompt path),
    else by its sha256: either way inside `sessions/`, one note per session, and a second session's
    hook still injects what the first was already shown."""
    with Store(store_dir) as s:
        s.write("deploys go through the release branch", scope=str(project))
    payload, env = fixtures(project, transcript)["claude"]
    env = dict(env, CLAUDE_CODE_SESSION_ID=sid)
    assert hook("session-start", dict(payload, session_id=sid), env).stdout
    assert hook("session-start", dict(payload, session_id=sid), env).stdout == ""  # noted: not twice
    notes = [p for p in store_dir.rglob("*") if p.is_file() and p.parent.name == "sessions"]
    assert len(notes) == 1 and notes[0].parent == store_dir / "sessions"
    assert not any(p.name.startswith(".") for p in notes)
    other = dict(env, CLAUDE_CODE_SESSION_ID=sid + "-2")
    assert hook("session-start", dict(payload, session_id=sid + "-2"), other).stdout
    assert not list(store_dir.parent.glob("escape*")) and not (store_dir / "escape").exists()


@pytest.mark.parametrize("raw", ["", "not json", "[1,2]", "null", '{"cwd": 42, "session_id": ["x"]}', "\xff"])
def test_broken_stdin_still_exits_zero(store_dir, raw):
    proc = hook("session-start", None, None, raw=raw)
    assert proc.stdout == "" or json.loads(proc.stdout)


def test_missing_store_exits_zero_and_creates_no_log(tmp_path, project, transcript):
    missing = tmp_path / "nope" / "store"
    payload, env = fixtures(project, transcript)["claude"]
    proc = hook("session-start", payload, dict(env, RETAINED_DIR=str(missing)))
    assert "0 records" in context_of("claude", proc.stdout)
    assert not (missing / "log.jsonl").exists()  # only the session note, so the stop hook can ask for a first memory


def test_unreadable_store_fails_open(store_dir, project, transcript):
    store_dir.mkdir(mode=0o700)
    (store_dir / "log.jsonl").mkdir()  # something that cannot be read as a log, even by root
    payload, env = fixtures(project, transcript)["codex"]
    proc = hook("session-start", payload, env)
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert "retained hook session-start: skipped" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_store_without_permissions_fails_open(store_dir, project, transcript):
    with Store(store_dir) as s:
        s.write("x")
    os.chmod(store_dir / "log.jsonl", 0)
    try:
        proc = hook("session-start", *fixtures(project, transcript)["claude"])
        assert proc.stdout == "" and proc.stderr.count("\n") == 1
    finally:
        os.chmod(store_dir / "log.jsonl", 0o600)


def test_output_stays_under_the_claude_and_codex_caps(store_dir, project, transcript):
    with Store(store_dir) as s:
        s.write("note 0 " + "word " * 80, scope=str(project))
    # 399 more, appended as one piece as another program may: what is promised is the hook's output, and
    # 400 acknowledged writes (an fsync each) were most of the test's time
    last = json.loads((store_dir / "log.jsonl").read_bytes().splitlines()[-1])
    more = sealed_chain([{"text": f"note {i} " + "word " * 80, "scope": str(project)} for i in range(1, 400)],
                        start_seq=last["seq"] + 1, prev=last["sha256"])
    append_line(store_dir, jsonl(more), newline=False)
    for host, budget in (("claude", "5000"), ("codex", "5000")):
        payload, env = fixtures(project, transcript)[host]
        payload = dict(payload, session_id=f"cap-{host}")
        out = hook("session-start", payload, env, "--budget", budget).stdout
        cap = get(host)
        assert len(out) <= cap.max_chars
        text = context_of(host, out)
        from retained.tokens import estimate_tokens

        if cap.max_tokens:
            assert estimate_tokens(text) <= cap.max_tokens


def test_hook_path_imports_no_mcp(store_dir, project, transcript):
    payload, env = fixtures(project, transcript)["claude"]
    code = ("import sys, io; sys.stdin = io.StringIO(sys.argv[1]); from retained.entry import main; main(['hook', "
            "'session-start']); bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('mcp', 'mcp_types', 'pydantic', 'anyio', 'platformdirs', 'yaml', 'tomlkit')); "
            "sys.stderr.write('IMPORTED=' + ','.join(bad))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], capture_output=True, text=True,
                          env=dict(os.environ, **env))
    assert "IMPORTED=\n" in proc.stderr + "\n", proc.stderr


def test_session_start_notes_the_session_without_an_fsync(store_dir, project, transcript):
    """The session note only keeps a brief from being given twice: writing it costs the hook no fsync
    (the memory itself is never written by a hook), and the note is still there for the next copy."""
    with Store(store_dir) as s:
        s.write("deploys go through the release branch", scope=str(project))
    payload, env = fixtures(project, transcript)["claude"]
    code = ("import io, os, sys; calls = []; real = os.fsync; os.fsync = lambda fd: (calls.append(fd), real(fd)); "
            "sys.stdin = io.StringIO(sys.argv[1]); from retained.entry import main\n"
            "try: main(['hook', 'session-start'])\n"
            "except SystemExit: pass\n"
            "sys.stderr.write('FSYNCS=%d' % len(calls))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], capture_output=True, text=True,
                          env=dict(os.environ, **env))
    assert "FSYNCS=0" in proc.stderr and "release branch" in proc.stdout, proc.stderr
    assert list((store_dir / "sessions").glob("*.json"))
    assert hook("session-start", payload, env).stdout == ""  # the note was kept: no second brief


# -- stop -----------------------------------------------------------------------------------------
# A call of a tool that changes files or runs commands, as each host's transcript records it.
WORK_LINES = {
    "claude": [{"type": "assistant", "message": {"content": [
        {"type": "tool_use", "name": "Edit", "input": {"file_path": "a.py"}},
        {"type": "tool_use", "name": "Bash", "input": {"command": "pytest"}}]}}],
    "codex": [{"type": "response_item", "payload": {"type": "function_call", "name": "apply_patch",
                                                    "arguments": "*** Begin Patch"}},
              {"type": "response_item", "payload": {"type": "local_shell_call", "action": {"command": ["pytest"]}}}],
    "gemini": [{"type": "gemini", "toolCalls": [{"name": "run_shell_command", "args": {"command": "pytest"}}]}],
    "vscode": [{"type": "toolInvocation", "toolName": "editFiles", "input": {"files": ["a.py"]}}],
    "cursor": [{"role": "assistant", "tool_name": "edit_file", "tool_input": {"target_file": "a.py"}}],
}


def _work_transcript(path: Path, *, host="claude", wrote_memory=False, began=None):
    lines = [
        {"type": "user", "message": {"content": "fix the parser"}, **({"timestamp": began} if began else {})},
        *WORK_LINES[host],
    ]
    if wrote_memory:
        lines.append({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "mcp__retained__memory_checkpoint", "input": {"label": "done"}}]}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def _worked_session(tmp_path, project, host="claude", name="t.jsonl", **transcript):
    """A session that began (session-start ran) and did real work: (start payload, env, transcript)."""
    path = tmp_path / name
    _work_transcript(path, host=host, **transcript)
    start, env = fixtures(project, path)[host]
    hook("session-start", start, env)
    return start, env, path


def _stop_payload(start_payload, transcript, **extra):
    payload = dict(start_payload, hook_event_name="Stop", transcript_path=str(transcript), stop_hook_active=False)
    payload.update(extra)
    return payload


@pytest.mark.parametrize("host", ["claude", "codex", "vscode", "cursor", "gemini"])
def test_stop_asks_once_after_real_work_with_nothing_saved(store_dir, project, tmp_path, host):
    with Store(store_dir) as s:
        s.write("before the session", scope=str(project))
    start, env, transcript = _worked_session(tmp_path, project, host, name=f"t-{host}.jsonl")
    first = hook("stop", _stop_payload(start, transcript), env).stdout
    data = json.loads(first)
    expected = {
        "claude": lambda d: d["decision"] == "block" and "memory_checkpoint" in d["reason"],
        "codex": lambda d: d["decision"] == "block" and "memory_checkpoint" in d["reason"],
        "vscode": lambda d: d["hookSpecificOutput"]["decision"] == "block",
        "cursor": lambda d: "memory_checkpoint" in d["followup_message"],
        "gemini": lambda d: d["decision"] == "deny",
    }[host]
    assert expected(data), data
    assert hook("stop", _stop_payload(start, transcript), env).stdout == ""  # never twice


def test_stop_counts_the_work_tools_of_the_host_that_called(store_dir, project, tmp_path):
    """Each host's own tool names (its registry module's `work_tools`) are its real work: another host's
    tool names in a transcript are not, and the host's own always are."""
    for host in ("gemini", "cursor"):
        transcript = tmp_path / f"{host}.jsonl"
        start, env = fixtures(project, transcript)[host]
        _work_transcript(transcript, host="claude")  # Claude Code's tools, in a transcript of this host
        hook("session-start", start, env)
        assert hook("stop", _stop_payload(start, transcript), env).stdout == "", host
        _work_transcript(transcript, host=host)
        assert hook("stop", _stop_payload(start, transcript), env).stdout != "", host
    for name in ("claude", "codex", "gemini", "vscode", "cursor"):
        assert get(name).work_tools, f"{name} declares no work tools: its stop hook would never ask"


def test_stop_is_silent_when_stop_hook_active(store_dir, project, tmp_path):
    start, env, transcript = _worked_session(tmp_path, project)
    assert hook("stop", _stop_payload(start, transcript, stop_hook_active=True), env).stdout == ""
    assert hook("stop", _stop_payload(start, transcript), env).stdout != ""  # it was not used up


def test_stop_is_silent_in_a_session_that_only_chatted(store_dir, project, transcript):
    start, env = fixtures(project, transcript)["claude"]
    hook("session-start", start, env)
    assert hook("stop", _stop_payload(start, transcript), env).stdout == ""


def test_stop_is_silent_when_memory_was_written(store_dir, project, tmp_path):
    start, env, transcript = _worked_session(tmp_path, project, "codex")
    with Store(store_dir) as s:  # the agent wrote through the server during the session
        s.write("what we learned", scope=str(project))
    assert hook("stop", _stop_payload(start, transcript), env).stdout == ""


def test_stop_is_not_silenced_by_another_session_of_the_same_project(store_dir, project, tmp_path):
    """Claude Code's server tags records with its session id: a second session's writes are not ours."""
    start, env, transcript = _worked_session(tmp_path, project)
    with Store(store_dir) as s:
        s.write("the other window's note", scope=str(project), fields={"session_id": "another-session"})
    assert json.loads(hook("stop", _stop_payload(start, transcript), env).stdout)["decision"] == "block"


def test_stop_is_silent_when_this_session_wrote_anywhere(store_dir, project, tmp_path):
    start, env, transcript = _worked_session(tmp_path, project)
    with Store(store_dir) as s:
        s.write("filed under another scope", scope="/elsewhere", fields={"session_id": env["CLAUDE_CODE_SESSION_ID"]})
    assert hook("stop", _stop_payload(start, transcript), env).stdout == ""


def test_stop_is_silent_when_the_transcript_shows_a_checkpoint(store_dir, project, tmp_path):
    start, env, transcript = _worked_session(tmp_path, project, wrote_memory=True)
    assert hook("stop", _stop_payload(start, transcript), env).stdout == ""


def test_stop_can_be_turned_off(store_dir, project, tmp_path):
    start, env, transcript = _worked_session(tmp_path, project)
    assert hook("stop", _stop_payload(start, transcript), dict(env, RETAINED_STOP_HOOK="off")).stdout == ""


@pytest.mark.parametrize("raw", ["", "garbage", '{"stop_hook_active": "yes"}'])
def test_stop_with_broken_input_exits_zero_silently(store_dir, raw):
    assert hook("stop", None, None, raw=raw).stdout == ""


# -- the portable script ------------------------------------------------------------------------------
def test_portable_sh_script_runs_the_same_code(store_dir, project, transcript, tmp_path):
    with Store(store_dir) as s:
        s.write("from the sh hook", scope=str(project))
    payload, env = fixtures(project, transcript)["claude"]
    script = ROOT / "hooks" / "session-start.sh"
    assert "Exit policy" in script.read_text()
    bare_path = "/usr/bin:/bin"  # no retained on PATH: the script must find it through RETAINED_PYTHON
    proc = subprocess.run(["sh", str(script)], input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PATH=bare_path, RETAINED_PYTHON=sys.executable, **env))
    assert proc.returncode == 0 and "from the sh hook" in context_of("claude", proc.stdout)
    sh = shutil.which("sh")
    nothing = subprocess.run([sh, str(script)], input="{}", capture_output=True, text=True,
                             env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert nothing.returncode == 0 and nothing.stdout == "" and "not installed" in nothing.stderr


def test_powershell_script_states_its_exit_policy():
    text = (ROOT / "hooks" / "session-start.ps1").read_text()
    assert "Exit policy: ALWAYS exits 0" in text and "exit 0" in text


def test_stop_without_a_session_note_dates_the_session_from_the_transcript(store_dir, project, tmp_path):
    """Hooks installed mid-session: the stop hook still asks once, judging by the transcript's first timestamp."""
    transcript = tmp_path / "t.jsonl"
    _work_transcript(transcript, began="2020-01-01T00:00:00.000Z")
    start, env = fixtures(project, transcript)["claude"]
    payload = _stop_payload(dict(start, session_id="no-note"), transcript)
    assert json.loads(hook("stop", payload, env).stdout)["decision"] == "block"
    assert hook("stop", payload, env).stdout == ""  # still never twice


def test_stop_without_a_note_is_silent_when_memory_was_written_since_the_transcript_began(store_dir, project, tmp_path):
    transcript = tmp_path / "t.jsonl"
    _work_transcript(transcript, began="2020-01-01T00:00:00.000Z")
    with Store(store_dir) as s:
        s.write("saved during the session", scope=str(project))
    start, env = fixtures(project, transcript)["claude"]
    assert hook("stop", _stop_payload(dict(start, session_id="no-note-2"), transcript), env).stdout == ""


def test_read_only_hook_briefs_but_writes_nothing(store_dir, project, tmp_path):
    """RETAINED_READ_ONLY (doctor's trial run): a brief every time, no session note, no stop prompt."""
    with Store(store_dir) as s:
        s.write("read-only brief source", scope=str(project))
    before = sorted(p.name for p in store_dir.rglob("*"))
    transcript = tmp_path / "t-ro.jsonl"
    _work_transcript(transcript)
    payload, env = fixtures(project, transcript)["claude"]
    env = dict(env, RETAINED_READ_ONLY="1")
    for _ in range(2):  # not silenced as "already briefed": nothing was noted the first time
        assert "read-only brief source" in context_of("claude", hook("session-start", payload, env).stdout)
    assert hook("stop", _stop_payload(payload, transcript), env).stdout == ""
    assert sorted(p.name for p in store_dir.rglob("*")) == before


# -- fail open, say nothing they should not ------------------------------------------------------------
@pytest.mark.parametrize("event", ["session-start", "stop", "prompt", "pre-compact"])
@pytest.mark.parametrize("raw", [b"", b"   \n", b"garbage", b"[1, 2]", b"null", b'"a string"', b"\xff\xfe{\x00"])
def test_input_that_is_not_a_json_object_prints_nothing(store_dir, project, event, raw):
    with Store(store_dir) as s:
        s.write("another project's secret plan", scope="/elsewhere")
        s.write("a global note")
    proc = subprocess.run([sys.executable, "-m", "retained", "hook", event], input=raw, capture_output=True,
                          env=dict(os.environ, CLAUDECODE="1"))
    assert proc.returncode == 0 and proc.stdout == b"", proc.stdout


def test_a_session_that_gives_no_project_sees_no_project_records(store_dir, project):
    with Store(store_dir) as s:
        s.write("another project's secret plan", scope=str(project))
        s.write("a global note")
    text = context_of("claude", hook("session-start", {"session_id": "no-project"}).stdout)
    assert "a global note" in text and "secret plan" not in text


def test_damaged_lines_are_named_in_the_brief_header(store_dir, project, transcript):
    with Store(store_dir) as s:
        s.write("good record one", scope=str(project))
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(b"\x00\x01 garbage {{{\n")
    with Store(store_dir) as s:
        s.write("good record two", scope=str(project))
    payload, env = fixtures(project, transcript)["claude"]
    text = context_of("claude", hook("session-start", dict(payload, session_id="damaged"), env).stdout)
    head = "\n".join(text.splitlines()[:2])  # the header, and the line right under it
    assert "1 record could not be read" in head and "retained verify" in head
    assert "good record one" in text and "good record two" in text


# -- compaction -------------------------------------------------------------------------------------
def _grow(path: Path, line: str = "turn") -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"type": "user", "message": {"content": line}}) + "\n")


def test_claude_compaction_rebriefs_every_time_and_pre_compact_asks_once_per_compaction(store_dir, project, transcript):
    """Claude Code: PreCompact asks for memory_checkpoint (its stdout joins the compaction instructions);
    SessionStart source "compact" gives the brief again, never swallowed by the two-minute guard."""
    with Store(store_dir) as s:
        s.write("the brief's record", scope=str(project))
    start, env = fixtures(project, transcript)["claude"]
    assert "the brief's record" in context_of("claude", hook("session-start", start, env).stdout)
    for n in range(2):  # two compactions, seconds apart
        _grow(transcript, f"work {n}")
        pre = dict(start, hook_event_name="PreCompact", trigger="auto", custom_instructions="")
        ask = hook("pre-compact", pre, env).stdout
        assert "memory_checkpoint" in ask and not ask.lstrip().startswith("{")  # plain text instructions
        assert hook("pre-compact", pre, env).stdout == ""  # a second copy of the hook, same compaction
        _grow(transcript, "compact boundary")
        again = hook("session-start", dict(start, source="compact"), env).stdout
        assert "the brief's record" in context_of("claude", again)
        assert hook("session-start", dict(start, source="compact"), env).stdout == ""  # its duplicate


@pytest.mark.parametrize("host, pre_event, prompt_event", [
    ("gemini", "PreCompress", "BeforeAgent"),
    ("codex", "PreCompact", "UserPromptSubmit"),
    ("vscode", "PreCompact", "UserPromptSubmit"),
])
def test_hosts_without_a_compact_session_start_get_the_brief_with_the_next_prompt(
        store_dir, project, transcript, host, pre_event, prompt_event):
    with Store(store_dir) as s:
        s.write("the brief's record", scope=str(project))
    start, env = fixtures(project, transcript)[host]
    hook("session-start", start, env)
    key = "hookEventName" if host == "vscode" else "hook_event_name"
    pre = dict(start, **{key: pre_event}, trigger="auto")
    assert hook("pre-compact", pre, env).stdout == ""  # its output reaches no model on these hosts
    ask = dict(start, **{key: prompt_event}, prompt="carry on", turn_id="t-1")
    out = json.loads(hook("prompt", ask, env).stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == prompt_event
    assert "the brief's record" in out["hookSpecificOutput"]["additionalContext"]
    assert hook("prompt", dict(ask, prompt="an unrelated question about weather"), env).stdout == ""  # once


def test_read_only_pre_compact_notes_nothing(store_dir, project, transcript):
    start, env = fixtures(project, transcript)["claude"]
    before = sorted(p.name for p in store_dir.rglob("*")) if store_dir.exists() else []
    out = hook("pre-compact", dict(start, hook_event_name="PreCompact"), dict(env, RETAINED_READ_ONLY="1")).stdout
    assert out == "" and (sorted(p.name for p in store_dir.rglob("*")) if store_dir.exists() else []) == before


# -- prompt submit: recall ------------------------------------------------------------------------------
PROMPT_EVENTS = {"claude": "UserPromptSubmit", "codex": "UserPromptSubmit", "gemini": "BeforeAgent",
                 "vscode": "UserPromptSubmit"}


def _prompt_payload(host, start, prompt):
    key = "hookEventName" if host == "vscode" else "hook_event_name"
    return dict(start, **{key: PROMPT_EVENTS[host]}, prompt=prompt, turn_id="t-1")


def _recalled(host, out):
    data = json.loads(out)
    assert data["hookSpecificOutput"]["hookEventName"] == PROMPT_EVENTS[host]
    return data["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("host", sorted(PROMPT_EVENTS))
def test_a_relevant_prompt_recalls_the_record_in_the_hosts_shape(store_dir, project, transcript, host):
    start, env = fixtures(project, transcript)[host]
    hook("session-start", start, env)  # an empty store's brief: nothing shown yet
    with Store(store_dir) as s:
        s.write("database migrations run with alembic upgrade head before deploying", scope=str(project))
        s.write("someone else's migrations use flyway", scope="/elsewhere")
    out = hook("prompt", _prompt_payload(host, start, "how do we run the database migrations?"), env).stdout
    text = _recalled(host, out)
    assert "alembic upgrade head" in text and "flyway" not in text and "<<<retained-memory" in text
    # the same record is never injected twice in a session
    assert hook("prompt", _prompt_payload(host, start, "run the database migrations again"), env).stdout == ""


@pytest.mark.parametrize("flag", [[], ["--host", "cursor"]])
def test_cursor_prompt_submit_only_lets_the_prompt_through(store_dir, project, transcript, flag):
    """Cursor's beforeSubmitPrompt takes `continue` and `user_message` only (nothing reaches the model):
    with a relevant record, after a compaction, from Claude Code's hook file or its own, retained prints
    exactly `{"continue": true}`."""
    start, env = fixtures(project, transcript)["cursor"]
    hook("session-start", start, env)
    with Store(store_dir) as s:
        s.write("database migrations run with alembic upgrade head before deploying", scope=str(project))
    hook("pre-compact", dict(start, hook_event_name="preCompact"), env)
    ask = dict(start, hook_event_name="beforeSubmitPrompt", prompt="how do we run the database migrations?")
    out = hook("prompt", ask, env, *flag).stdout
    assert out == '{"continue": true}\n'


def test_cursor_is_not_given_prompt_or_compaction_hooks_and_is_told_so(isolate_home):
    home = isolate_home
    (home / ".cursor").mkdir()
    proc = run_cli("install", "--yes", "--host", "cursor")
    assert proc.returncode == 0, proc.stderr
    events = json.loads((home / ".cursor" / "hooks.json").read_text())["hooks"]
    assert sorted(events) == ["sessionStart", "stop"]
    assert "no per-prompt recall" in proc.stdout and "no brief again after a compaction" in proc.stdout
    doctor = run_cli("doctor", "--host", "cursor")
    assert "what Cursor gets" in doctor.stdout and "no per-prompt recall" in doctor.stdout
    # an earlier release's prompt and compaction entries are still taken out by uninstall
    hooks_file = home / ".cursor" / "hooks.json"
    doc = json.loads(hooks_file.read_text())
    start = doc["hooks"]["sessionStart"][0]["command"].replace("session-start", "{}")
    doc["hooks"]["beforeSubmitPrompt"] = [{"command": start.format("prompt")}]
    doc["hooks"]["preCompact"] = [{"command": start.format("pre-compact")}]
    hooks_file.write_text(json.dumps(doc, indent=2) + "\n")
    assert run_cli("uninstall", "--yes", "--host", "cursor").returncode == 0
    assert not hooks_file.exists() or "retained" not in hooks_file.read_text()


def test_an_unrelated_prompt_and_a_record_already_in_the_brief_inject_nothing(store_dir, project, transcript):
    with Store(store_dir) as s:
        s.write("database migrations run with alembic upgrade head before deploying", scope=str(project))
    start, env = fixtures(project, transcript)["claude"]
    assert "alembic" in context_of("claude", hook("session-start", start, env).stdout)
    assert hook("prompt", _prompt_payload("claude", start, "how do we run the database migrations?"), env).stdout == ""
    assert hook("prompt", _prompt_payload("claude", start, "what is the weather like on mars"), env).stdout == ""


def test_recall_can_be_turned_off(store_dir, project, transcript):
    start, env = fixtures(project, transcript)["codex"]
    hook("session-start", start, env)
    with Store(store_dir) as s:
        s.write("database migrations run with alembic upgrade head", scope=str(project))
    payload = _prompt_payload("codex", start, "how do we run the database migrations?")
    assert hook("prompt", payload, dict(env, RETAINED_RECALL="off")).stdout == ""
