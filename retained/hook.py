"""What hosts run: `retained hook session-start` and `retained hook stop`.

Fail open, fast: standard library only (no `mcp`), any internal error means exit 0, nothing on
stdout and one line on stderr. A hook must never be the reason a session cannot start or stop.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

HOSTS = ("claude", "codex", "gemini", "vscode", "cursor")
CLAUDE_MAX_CHARS = 9_000  # Claude Code persists hook output over 10,000 characters and shows a 2 KB preview
CODEX_MAX_TOKENS = 2_000  # Codex cuts hook output at about 2,500 tokens (estimated here on the high side)
DUPLICATE_WINDOW_S = 120  # two hooks for one session start (Claude's file read by VS Code or Cursor too)
SESSIONS_DIR = "sessions"
SESSION_TTL_S = 14 * 24 * 3600

# Tool calls in a transcript that mean the session did real work (edits or commands).
_WORK_TOOLS = re.compile(
    rb'"(?:name|tool_name|toolName)"\s*:\s*"(?:Edit|MultiEdit|Write|NotebookEdit|Bash|shell|exec_command|'
    rb'apply_patch|local_shell|write_file|replace|run_shell_command|edit_file|create_file|run_terminal_cmd|'
    rb'str_replace_based_edit_tool|runInTerminal|editFiles|createFile)"'
    rb'|"type"\s*:\s*"local_shell_call"'
)
_MEMORY_WRITES = re.compile(rb'memory_(?:write|checkpoint)')
TRANSCRIPT_SCAN_BYTES = 8 * 1024 * 1024

STOP_REASON = (
    "Before you finish: this session did real work but saved nothing to retained memory. Call "
    "memory_checkpoint once with a one-line label and a short summary (what changed, decisions and why, "
    "what is left), so the next session starts from here. If nothing is worth keeping, just finish."
)


# -- what the host told us ------------------------------------------------------------------------
def read_input(stream: Any) -> dict[str, Any]:
    """The host's JSON on stdin; anything unreadable becomes an empty object (fail open)."""
    try:
        if stream.isatty():  # run by hand at a terminal: no host input to wait for
            return {}
        raw = stream.read()
    except (OSError, ValueError):
        return {}
    if not raw or not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def detect_host(data: dict[str, Any], env: dict[str, str], explicit: str | None = None) -> str:
    """Which host called: --host wins, then the input's shape, then the environment."""
    if explicit in HOSTS:
        return explicit  # type: ignore[return-value]
    if "cursor_version" in data or "workspace_roots" in data or "conversation_id" in data or env.get("CURSOR_VERSION"):
        return "cursor"
    if "sessionId" in data or "hookEventName" in data:
        return "vscode"
    if env.get("CLAUDECODE") == "1":
        return "claude"
    if env.get("GEMINI_SESSION_ID") or env.get("GEMINI_CLI") or data.get("hook_event_name") == "AfterAgent":
        return "gemini"
    if env.get("CODEX_MANAGED_BY_NPM") or ("turn_id" in data) or ("model" in data and "permission_mode" in data):
        return "codex"
    return "claude"


def session_id(data: dict[str, Any], env: dict[str, str]) -> str | None:
    for key in ("session_id", "sessionId", "conversation_id"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    for key in ("CLAUDE_CODE_SESSION_ID", "GEMINI_SESSION_ID"):
        if env.get(key):
            return env[key]
    return None


def project_of(data: dict[str, Any], env: dict[str, str]) -> str | None:
    """The project of the session: the input's workspace root or cwd, by the rule of `project_dir`."""
    from .project import project_dir

    hints = dict(env)
    if not hints.get("CLAUDE_PROJECT_DIR") and env.get("GEMINI_PROJECT_DIR"):
        hints["CLAUDE_PROJECT_DIR"] = env["GEMINI_PROJECT_DIR"]
    roots = data.get("workspace_roots")
    start = None
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and os.path.isdir(roots[0]):
        start = roots[0]
    elif isinstance(data.get("cwd"), str) and os.path.isdir(data["cwd"]):
        start = data["cwd"]
    root = project_dir(start, hints) if start else project_dir(None, hints) if hints.get("CLAUDE_PROJECT_DIR") else None
    return str(root) if root is not None else None


# -- output shapes ----------------------------------------------------------------------------------
def session_start_output(host: str, text: str) -> dict[str, Any]:
    if host == "cursor":
        return {"continue": True, "additional_context": text}
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


def stop_output(host: str, reason: str) -> dict[str, Any]:
    if host == "cursor":
        return {"followup_message": reason}
    if host == "vscode":
        return {"hookSpecificOutput": {"hookEventName": "Stop", "decision": "block", "reason": reason}}
    if host == "gemini":
        return {"decision": "deny", "reason": reason}
    return {"decision": "block", "reason": reason}


# -- per-session state --------------------------------------------------------------------------------
def _session_file(store_dir: Path, sid: str) -> Path:
    return store_dir / SESSIONS_DIR / (hashlib.sha256(sid.encode("utf-8", "replace")).hexdigest()[:32] + ".json")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _save(path: Path, state: dict[str, Any]) -> None:
    path.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the store directory
    path.parent.mkdir(mode=0o700, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def _prune(store_dir: Path, now: float) -> None:
    d = store_dir / SESSIONS_DIR
    try:
        entries = list(d.iterdir())
    except OSError:
        return
    if len(entries) < 200:
        return
    for p in entries:
        try:
            if now - p.stat().st_mtime > SESSION_TTL_S:
                p.unlink()
        except OSError:
            pass


# -- the two hooks ----------------------------------------------------------------------------------------
def _fit_for_host(host: str, store: Any, project: str | None, budget: int) -> dict[str, Any]:
    from .brief import make_brief

    if host == "codex":
        budget = min(budget, CODEX_MAX_TOKENS)
    while True:
        brief = make_brief(store, project, budget=budget)
        out = json.dumps(session_start_output(host, brief["text"]), ensure_ascii=False)
        if len(out) <= CLAUDE_MAX_CHARS or budget <= 50:
            return brief
        budget = budget * 3 // 4


def session_start(data: dict[str, Any], env: dict[str, str], host: str, store_dir: Path,
                  budget: int) -> dict[str, Any] | None:
    """The brief in the host's shape, or None when this session already got it moments ago."""
    from .brief import render
    from .log import LOG_NAME
    from .paths import read_only_requested

    project = project_of(data, env)
    sid = session_id(data, env)
    now = time.time()
    # Read-only (doctor's trial run): no session note, and no "already briefed" silence either.
    state_path = _session_file(store_dir, sid) if sid and not read_only_requested() else None
    if state_path is not None:
        prior = _load(state_path)
        if prior and now - prior.get("started", 0) < DUPLICATE_WINDOW_S and prior.get("source") == data.get("source"):
            return None  # the same session start, reported by a second copy of the hook
    start_seq = 0
    if not (store_dir / LOG_NAME).exists():
        # No memory yet: say so, without creating a log from a hook.
        brief = render([], 0, project=project, budget=budget)
    else:
        from .store import Store

        with Store(store_dir, create=False) as store:
            brief = _fit_for_host(host, store, project, budget)
            start_seq = store.index.query("SELECT COALESCE(MAX(seq), 0) AS n FROM records")[0]["n"]
    if state_path is not None:
        try:
            store_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            _save(state_path, {"session_id": sid, "host": host, "project": project, "started": now,
                               "source": data.get("source"), "start_seq": start_seq, "asked": False})
            _prune(store_dir, now)
        except OSError as e:
            sys.stderr.write(f"retained hook: could not note the session start ({e})\n")
    return session_start_output(host, brief["text"])


def _transcript_start(path: Any) -> str | None:
    """The first timestamp in a transcript (Claude Code, Codex and Gemini lines carry one), as retained writes ts."""
    if not isinstance(path, str) or not path:
        return None
    try:
        with open(os.path.expanduser(path), "rb") as f:
            head = f.read(256 * 1024)
    except OSError:
        return None
    from datetime import datetime, timezone

    for raw in head.splitlines()[:50]:
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        stamp = item.get("timestamp") if isinstance(item, dict) else None
        if isinstance(stamp, str):
            try:
                when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                continue
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return None


def _transcript_flags(path: Any) -> tuple[bool, bool]:
    """(did real work, called a retained write tool) from the tail of the transcript file."""
    if not isinstance(path, str) or not path:
        return False, False
    try:
        with open(os.path.expanduser(path), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TRANSCRIPT_SCAN_BYTES))
            blob = f.read()
    except OSError:
        return False, False
    return bool(_WORK_TOOLS.search(blob)), bool(_MEMORY_WRITES.search(blob))


def stop(data: dict[str, Any], env: dict[str, str], host: str, store_dir: Path) -> dict[str, Any] | None:
    """Ask once for a checkpoint when the session worked but wrote nothing to memory."""
    if data.get("stop_hook_active") is True or data.get("stopHookActive") is True:
        return None
    if env.get("RETAINED_STOP_HOOK", "on").strip().lower() in ("off", "0", "false", "no"):
        return None
    from .paths import read_only_requested

    if read_only_requested():  # "ask once" needs a note of the asking; read-only writes none
        return None
    sid = session_id(data, env)
    if not sid:
        return None
    state_path = _session_file(store_dir, sid)
    state = _load(state_path)
    if state is not None and state.get("asked"):
        return None
    worked, wrote_in_transcript = _transcript_flags(data.get("transcript_path"))
    if not worked or wrote_in_transcript:
        return None
    if state is None:
        # The session-start hook did not note this session (installed mid-session, or another copy of
        # retained): the transcript's first timestamp says when it began.
        began = _transcript_start(data.get("transcript_path"))
        if began is None:
            return None
        state = {"session_id": sid, "host": host, "project": project_of(data, env), "began_ts": began,
                 "asked": False}
    from .log import LOG_NAME

    written = 0
    if (store_dir / LOG_NAME).exists():
        from .store import Store

        with Store(store_dir, create=False) as store:
            store.index.catch_up()
            scopes = [s for s in (state.get("project"), "global") if s]
            since, value = ("ts >= ?", state["began_ts"]) if "began_ts" in state else ("seq > ?", int(state.get("start_seq", 0)))
            written = store.index.query(
                f"SELECT COUNT(*) AS n FROM records WHERE {since} AND (session = ? OR (session IS NULL"
                f" AND scope IN ({','.join('?' * len(scopes))})))",
                [value, sid, *scopes],
            )[0]["n"]
    if written:
        return None
    state["asked"] = True
    _save(state_path, state)  # never twice: if this cannot be saved, the exception keeps us silent
    return stop_output(host, STOP_REASON)


def run(event: str, host_flag: str | None, store_dir: Path, budget: int, stdin: Any = None) -> int:
    """Entry point for `retained hook EVENT`: always exit 0."""
    try:
        env = dict(os.environ)
        data = read_input(stdin if stdin is not None else sys.stdin)
        host = detect_host(data, env, host_flag)
        if event == "session-start":
            out = session_start(data, env, host, store_dir, budget)
        elif event == "stop":
            out = stop(data, env, host, store_dir)
        else:
            sys.stderr.write(f"retained hook: unknown event {event!r} (use session-start or stop)\n")
            return 0
        if out is not None:
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    except Exception as e:  # noqa: BLE001 - fail open: the session must go on without memory
        msg = " ".join(str(e).split())[:300]
        try:
            sys.stderr.write(f"retained hook {event}: skipped ({type(e).__name__}: {msg})\n")
        except OSError:
            pass
    return 0
