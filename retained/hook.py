"""What hosts run: `retained hook session-start`, `prompt`, `pre-compact` and `stop`.

Fail open, fast: standard library only (no `mcp`), any internal error means exit 0, nothing on
stdout and one line on stderr. A hook must never be the reason a session cannot start or stop.
Input that is not a JSON object (garbage, empty, an array, bytes that are not UTF-8) prints nothing.
Which host called, the shape it needs, how much of it it keeps and which tools in its transcript are
real work come from the host registry (installers/hosts/); this module passes them on to the core.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import sys
import time
from pathlib import Path

from .errors import StoreError
from .installers import hosts
from .installers.hosts import loaded_at_start, project_start, project_vars, recognise
from .paths import LOG_NAME, has_team, read_only_requested, store_dir
from .safejson import loads
from .switches import embed_mode, switch

# What every event loads is imported here. The rest is imported where an event needs it, each import's
# cost measured as the median of 7 fresh processes after what the stop hook loads (the least any event
# loads): the store +49 ms and the brief +54 ms (with the store), recall +90 ms (ranking, the model's
# module), project +7 ms, records +4.6 ms, the warm server's client +4 ms, datetime +2.3 ms, durable
# +2.4 ms, team/background +1.3 ms; hashlib ~8 ms, and a prompt a warm server answers never hashes.
TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from typing import Any

    from .installers.host import Host
    from .store import Store

EVENTS = ("session-start", "stop", "prompt", "pre-compact")
DUPLICATE_WINDOW_S = 120  # two hooks for one session start (one host's hook file read by another host too)
COMPACT_DUPLICATE_S = 10  # two copies of a hook for one compaction run within moments of each other
SESSIONS_DIR = "sessions"
STARTS_DIR = "starts"  # inside SESSIONS_DIR: who is briefing which session start (`_claim_start`)
SESSION_TTL_S = 14 * 24 * 3600

# A call of retained's write tools in a transcript, under any host's name for them (memory_write,
# mcp__retained__memory_write, a plugin's mcp__plugin_retained_retained__memory_write, Gemini's
# mcp_retained_memory_write): the name followed by the call's arguments (Claude Code's "input", Codex's
# "arguments", Gemini CLI's "args") or its reply ("response"). Not a bare mention: the tool lists and
# server instructions a host copies into its transcript name these tools in every session.
_MEMORY_WRITES = re.compile(rb'"(?:name|tool|tool_name|toolName)"\s*:\s*"[\w.-]*memory_(?:write|checkpoint)"\s*,\s*'
                            rb'"(?:input|arguments|args|tool_input|toolInput|response)"')
TRANSCRIPT_SCAN_BYTES = 8 * 1024 * 1024

STOP_REASON = (
    "Before you finish: this session did real work but saved nothing to retained memory. Call "
    "memory_checkpoint once with a one-line label and a short summary (what changed, decisions and why, "
    "what is left), so the next session starts from here. If nothing is worth keeping, just finish."
)


# -- what the host told us ------------------------------------------------------------------------
def read_input(stream: Any) -> dict[str, Any] | None:
    """The host's JSON object on stdin; None for anything else (garbage, empty, an array, not UTF-8).

    Run by hand at a terminal there is no host input to wait for: an empty object.
    """
    try:
        if stream.isatty():
            return {}
        raw = getattr(stream, "buffer", stream).read()
    except (OSError, ValueError):
        return None
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not raw or not raw.strip():
        return None

    try:
        data = loads(raw)  # bounded: a host's input nested thousands deep is garbage, not a crash
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def detect_host(data: dict[str, Any], env: dict[str, str], explicit: str | None = None) -> Host:
    """Which host called: --host wins, then the input's shape and the environment (the registry's rules)."""
    return recognise(data, env, explicit)


def session_id(data: dict[str, Any], env: dict[str, str]) -> str | None:
    """The host's session id: from the input (each host's key), else its environment."""
    for key in hosts.session_keys():
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return hosts.session_id(env)


def project_of(data: dict[str, Any], env: dict[str, str]) -> str | None:
    """The project of the session: the input's workspace root or cwd, by the rule of `project_dir`."""
    from .project import scope_of  # lazy: +7 ms on the stop and pre-compact hooks (see the top)

    root = project_root_of(data, env)
    return scope_of(root) if root is not None else None


def project_root_of(data: dict[str, Any], env: dict[str, str]) -> Path | None:
    """The session's project directory (its git root), or None."""
    from .project import project_dir, project_hint  # lazy, as in `project_of`

    start = project_start(data)
    if start is not None and not os.path.isdir(start):
        start = None
    hints = project_vars()
    return project_dir(start, env, hints) if start else project_dir(None, env, hints) if project_hint(env, hints) \
        else None


# -- per-session state --------------------------------------------------------------------------------
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _session_file(store_dir: Path, sid: str) -> Path:
    """The session's note: named by its id when that is a plain name (hosts use UUIDs), else by a hash of
    it (sha256: hashlib loads OpenSSL, ~3 ms that a prompt need not pay when the name is plain)."""
    if _PLAIN_ID.fullmatch(sid):
        return store_dir / SESSIONS_DIR / f"s-{sid}.json"
    import hashlib  # lazy: ~8 ms (see the top)

    return store_dir / SESSIONS_DIR / (hashlib.sha256(sid.encode("utf-8", "replace")).hexdigest()[:32] + ".json")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = loads(path.read_bytes())  # bounded: another program can write this file too
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _save(path: Path, state: dict[str, Any]) -> None:
    """Replace the session's note whole: a reader sees the old note or the new one, never a part.

    Not fsynced: the note only keeps a hook from asking or briefing twice, so a power cut that loses
    it costs one repeated brief, while two fsyncs on every session start and prompt would cost every
    user milliseconds (more on a busy disk). A note cut short reads as no note (`_load`)."""
    from . import durable  # lazy: +2.4 ms on a hook that notes nothing (see the top)

    path.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the store directory
    path.parent.mkdir(mode=0o700, exist_ok=True)
    durable.write_atomic(path, json.dumps(state).encode("utf-8"), sync=False)


def _prune(store_dir: Path, now: float) -> None:
    _prune_in(store_dir / SESSIONS_DIR, now)
    _prune_in(store_dir / SESSIONS_DIR / STARTS_DIR, now)


def _prune_in(d: Path, now: float) -> None:
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


# -- session start, and again after a compaction --------------------------------------------------------
def _fit_for_host(host: Host, store: Store, project: str | None, budget: int) -> dict[str, Any]:
    """The biggest brief within `budget` whose output the host keeps whole (its character and token caps)."""
    from .brief import make_brief  # lazy: +54 ms on the hooks that brief no one (see the top)
    from .records import GLOBAL_SCOPE  # lazy: +4.6 ms on the stop hook (see the top)

    if host.max_tokens:
        budget = min(budget, host.max_tokens)
    loaded = loaded_at_start(host.name)  # what this host loads itself, not what another host would
    while True:
        # No project given: global records only, never every project's (a session must not see others').
        brief = make_brief(store, project, budget=budget, scope=None if project else GLOBAL_SCOPE,
                           loaded_at_start=loaded)
        out = json.dumps(host.session_start_output(brief["text"]), ensure_ascii=False)
        if not host.max_chars or len(out) <= host.max_chars or budget <= 50:
            return brief
        budget = budget * 3 // 4


def session_start(data: dict[str, Any], env: dict[str, str], host: Host, store_dir: Path,
                  budget: int) -> dict[str, Any] | None:
    """The brief in the host's shape, or None when this session already got it moments ago.

    After a compaction (a session-start input the host marks as one) the brief the host injected at
    the start is gone from the context: it is given again, unless this same compaction was just briefed
    by another copy of the hook.
    """
    from .brief import render  # lazy, as in `_fit_for_host`
    from .project import scope_of  # lazy, as in `project_of`

    root = project_root_of(data, env)
    project = scope_of(root) if root is not None else None  # project_of, with the root kept for the join hint
    sid = session_id(data, env)
    now = time.time()
    compaction = host.is_compaction(data)
    # Read-only (doctor's trial run): no session note, and no "already briefed" silence either.
    state_path = _session_file(store_dir, sid) if sid and not read_only_requested() else None
    prior = _load(state_path) if state_path is not None else None
    if _briefed_already(prior, state_path, compaction, data.get("source"), now):
        return None
    start_seq = 0
    _check_openable(store_dir)
    shares = _sync_beside(store_dir)
    if not (store_dir / LOG_NAME).exists() and not shares:
        # No memory yet: say so, without creating a log from a hook.
        brief = render([], 0, project=project, budget=budget, scope_label=None if project else "global")
    else:
        from .store import Store  # lazy: +49 ms on a hook that opens no store (see the top)

        with Store(store_dir, create=False) as store:
            brief = _fit_for_host(host, store, project, budget)  # the brief names damaged lines itself
            start_seq = store.index.max_seq()
    if not compaction and not read_only_requested():
        _add_join_hint(brief, store_dir, project, root)
    if state_path is not None:
        if prior and compaction:
            # the session goes on: keep when it began
            state = dict(prior, compact_briefed=now, compact_briefed_n=prior.get("compactions", 0), rebrief=False)
        else:
            state = {"session_id": sid, "host": host.name, "project": project, "started": now,
                     "source": data.get("source"), "start_seq": start_seq, "asked": False}
        state["shown"] = sorted(set(state.get("shown") or []) | set(_ids(brief)))
        _note(store_dir, state_path, state, now)
    return host.session_start_output(brief["text"])


def _briefed_already(prior: dict[str, Any] | None, state_path: Path | None, compaction: bool, source: Any,
                     now: float) -> bool:
    """Whether another copy of the hook briefs (or just briefed) this same session start or compaction."""
    if prior and compaction:
        return prior.get("compact_briefed_n") == prior.get("compactions", 0) and \
            now - prior.get("compact_briefed", 0) < COMPACT_DUPLICATE_S  # this compaction, reported twice
    if prior and now - prior.get("started", 0) < DUPLICATE_WINDOW_S and prior.get("source") == source:
        return True  # the same session start, reported by a second copy of the hook
    # the same session start, being briefed at this moment by another copy of the hook
    return state_path is not None and not compaction and not _claim_start(state_path, source, now)


def _claim_start(state_path: Path, source: Any, now: float) -> bool:
    """Whether this copy of the hook briefs this session start: the first to create the claim beside the
    session's note does. Two copies run side by side (a host runs a plugin's hook and a settings file's
    hook for the same event at once) both find no note yet; only one may create the claim. A claim from
    an earlier start (another source, or older than the window) gives way."""
    claim = state_path.parent / STARTS_DIR / state_path.name
    key = str(source)
    try:
        state_path.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        claim.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return True  # no claim possible (read-only store): as before, the note alone keeps repeats out
    for _ in range(3):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            try:
                age, held = now - os.stat(claim).st_mtime, claim.read_text()
            except OSError:
                continue
            if age < DUPLICATE_WINDOW_S and held in ("", key):  # "": its holder is writing it now
                return False
            try:
                os.unlink(claim)
            except OSError:
                pass
            continue
        except OSError:
            return True
        try:
            os.write(fd, key.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return True
    return False


def _ids(brief: dict[str, Any]) -> list[str]:
    out = []
    for rec in brief.get("records") or []:
        rid = rec.get("id") if isinstance(rec, dict) else rec
        if isinstance(rid, str):
            out.append(rid)
    return out


def _note(store_dir: Path, state_path: Path, state: dict[str, Any], now: float) -> None:
    try:
        store_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _save(state_path, state)
        _prune(store_dir, now)
    except OSError as e:
        sys.stderr.write(f"retained hook: could not note the session ({e})\n")


PRE_COMPACT_ASK = (
    "retained memory: the conversation is being compacted. Keep in the summary, as the first thing to do "
    "after compaction: call memory_checkpoint once with a one-line label and a short summary of where the "
    "work stands (what changed, decisions and why, what is left), so it survives this and later compactions."
)


def pre_compact(data: dict[str, Any], env: dict[str, str], host: Host, store_dir: Path) -> Any:
    """A compaction is starting: ask (once per compaction) that the current state be kept with
    memory_checkpoint, where the host puts this hook's output in front of the model; and note it, so
    the brief is given again after it (by the session-start hook, or with the next prompt)."""
    if read_only_requested():
        return None
    sid = session_id(data, env)
    if not sid:
        return host.pre_compact_output(PRE_COMPACT_ASK)
    state_path = _session_file(store_dir, sid)
    now = time.time()
    state = _load(state_path) or _new_state(sid, host, project_of(data, env), now)
    key = _compaction_key(data)
    if key is not None and key == state.get("compact_key") or \
            key is None and now - state.get("compact_asked", 0) < COMPACT_DUPLICATE_S:
        return None  # this compaction was noted by another copy of the hook
    state["compact_asked"] = now
    state["compact_key"] = key
    state["compactions"] = int(state.get("compactions", 0)) + 1
    state["rebrief"] = True
    _save(state_path, state)  # once per compaction: if this cannot be saved, stay silent
    return host.pre_compact_output(PRE_COMPACT_ASK)


def _compaction_key(data: dict[str, Any]) -> str | None:
    """What tells one compaction from the next: the transcript as it stands (each compaction adds to it)."""
    path = data.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    try:
        st = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    return f"{data.get('trigger')}:{st.st_size}:{st.st_mtime_ns}"


def _new_state(sid: str, host: Host, project: str | None, now: float) -> dict[str, Any]:
    return {"session_id": sid, "host": host.name, "project": project, "started": now, "source": None,
            "start_seq": 0, "asked": False}


# -- prompt submit: what memory says about this prompt ----------------------------------------------------
def prompt(data: dict[str, Any], env: dict[str, str], host: Host, store_dir: Path) -> dict[str, Any] | None:
    """Records relevant to the prompt the user just submitted, not shown before in this session; after a
    compaction the host gave no session-start hook for, the brief again first."""
    if not host.prompt_reaches_model:
        return host.prompt_output("")  # what lets the prompt through, and nothing else
    text = host.prompt_of(data)
    if not text or not text.strip() or host.prompt_output("") is None:
        return None
    _check_openable(store_dir)

    if not (store_dir / LOG_NAME).exists() and not has_team(store_dir):
        return None
    sid = session_id(data, env)
    state_path = _session_file(store_dir, sid) if sid and not read_only_requested() else None
    state = (_load(state_path) if state_path is not None else None) or {}
    project = project_of(data, env)
    shown = set(state.get("shown") or [])
    parts: list[str] = []
    with contextlib.ExitStack() as opened:
        store: Store | None = None
        if state.get("rebrief"):
            store = opened.enter_context(_open_store(store_dir))
            brief = _fit_for_host(host, store, project, 800)
            parts.append(brief["text"])
            shown |= set(_ids(brief))
        # A warm server of the store answers the whole recall: then this process opens no store at all.
        served, found = _recall_served(store_dir, text, project, shown, env)
        if not served:
            store = store or opened.enter_context(_open_store(store_dir))
            found = _recall(store, text, project, shown)
    if found:
        parts.append(found["text"])
        shown |= {i for i in found.get("ids") or [] if isinstance(i, str)}
    if not parts:
        return None
    if state_path is not None:
        now = time.time()
        state = state or _new_state(sid, host, project, now)  # type: ignore[arg-type]
        state["shown"] = sorted(shown)
        state["rebrief"] = False
        _note(store_dir, state_path, state, now)
    return host.prompt_output("\n\n".join(parts))


def _add_join_hint(brief: dict[str, Any], store_dir: Path, project: str | None, root: Path | None) -> None:
    """Issue 28: a clone of a project whose remote holds team memory learns it once, under the brief's
    header (team/background.py); a look at the remote is only ever started beside the hook, never made
    in it. Fails open."""
    try:
        if not project:
            return
        from .team.background import join_hint  # lazy: +1.3 ms, for a project whose remote shares

        hint = join_hint(store_dir, project, str(root) if root else None)
    except Exception:
        return
    if hint:
        head, _, rest = brief["text"].partition("\n")
        brief["text"] = f"{head}\nNote: {hint}." + (f"\n{rest}" if rest else "")


def _sync_beside(store_dir: Path, *, if_written: bool = False) -> bool:
    """Whether the store shares memory (issue 19); when it does, and may change files, a background
    sync starts beside the hook, never in it (`if_written`: only when the log changed since the last)."""
    if not has_team(store_dir):
        return False
    if not read_only_requested():
        from .team.background import kick  # lazy: +1.3 ms, for a store that shares

        kick(store_dir, if_written=if_written)
    return True


def _check_openable(store_dir: Path) -> None:
    """A store path that is there but cannot be a store (a file, a folder this user cannot read) is an
    error the hook reports on stderr, with nothing on stdout: not an empty brief ("0 records"), which
    would tell the model there is no memory. A path with nothing there yet is a store without memory."""
    if not os.path.lexists(store_dir):
        return
    if not store_dir.is_dir():
        raise StoreError(f"the store path {store_dir} is not a directory")
    if not os.access(store_dir, os.R_OK | os.X_OK):
        raise StoreError(f"the store at {store_dir} cannot be read by this user")


def _open_store(store_dir: Path) -> Store:
    from .store import Store  # lazy, as in `session_start`

    return Store(store_dir, create=False)


def _recall_served(store_dir: Path, text: str, project: str | None, shown: set[str],
                   env: dict[str, str]) -> tuple[bool, dict[str, Any] | None]:
    """(True, the recall or None) when recall is off or a warm server of the store answered it whole;
    (False, None) when this process must open the store and recall by itself."""
    if not switch("RETAINED_RECALL", True, env):
        return True, None

    if embed_mode() == "off":
        return False, None  # words only: quick here, and no server would have more to offer
    from .records import GLOBAL_SCOPE  # lazy, as in `_fit_for_host`
    from .warm import recall as served_recall  # lazy: +4 ms, for a prompt with the semantic tier on

    # No project given: global records only (recall's "no project" would search every project's).
    served, found = served_recall(store_dir, text, project=project or GLOBAL_SCOPE, shown=sorted(shown))
    return served, found if isinstance(found, dict) and found.get("text") else None


def _recall(store: Store, text: str, project: str | None, shown: set[str]) -> dict[str, Any] | None:
    """The recall contract (retained/recall.py), in this process: the few relevant records, fenced, or
    None. Reached only with recall on (`_recall_served` answers for it switched off)."""
    try:
        from .recall import recall  # lazy: +90 ms on a hook that recalls nothing (see the top)
    except ImportError:
        return None  # a retained without recall: the prompt hook only re-briefs after compactions
    from .records import GLOBAL_SCOPE  # lazy, as in `_fit_for_host`

    store.semantic().quick_start()  # a fresh process that embeds the prompt once, if no server does it
    # No project given: global records only (recall's "no project" would search every project's).
    found = recall(store, text, project=project or GLOBAL_SCOPE, shown=shown)
    return found if isinstance(found, dict) and found.get("text") else None


# -- stop -----------------------------------------------------------------------------------------------
def _transcript_start(path: Any) -> str | None:
    """The first timestamp in a transcript (most hosts' transcript lines carry one), as retained writes ts."""
    if not isinstance(path, str) or not path:
        return None
    try:
        with open(os.path.expanduser(path), "rb") as f:
            head = f.read(256 * 1024)
    except OSError:
        return None
    from datetime import datetime  # lazy: +2.3 ms on the stop hook (see the top)

    from . import records  # lazy, as in `_fit_for_host`

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
            return records.rfc3339(when)
    return None


def _work_pattern(host: Host) -> re.Pattern[bytes] | None:
    """A call of one of the host's work tools (or an item of its work types) in a transcript line."""
    parts = []
    if host.work_tools:
        names = b"|".join(re.escape(n.encode()) for n in host.work_tools)
        parts.append(rb'"(?:name|tool_name|toolName)"\s*:\s*"(?:' + names + rb')"')
    if host.work_item_types:
        types = b"|".join(re.escape(t.encode()) for t in host.work_item_types)
        parts.append(rb'"type"\s*:\s*"(?:' + types + rb')"')
    return re.compile(b"|".join(parts)) if parts else None


def _transcript_flags(path: Any, host: Host) -> tuple[bool, bool]:
    """(did real work, called a retained write tool) from the tail of the transcript file: real work is
    a call of one of the tools the host that called declares (`Host.work_tools`)."""
    if not isinstance(path, str) or not path:
        return False, False
    try:
        with open(os.path.expanduser(path), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TRANSCRIPT_SCAN_BYTES))
            blob = f.read()
    except OSError:
        return False, False
    work = _work_pattern(host)
    return bool(work is not None and work.search(blob)), bool(_MEMORY_WRITES.search(blob))


def stop(data: dict[str, Any], env: dict[str, str], host: Host, store_dir: Path) -> dict[str, Any] | None:
    """Ask once for a checkpoint when the session worked but wrote nothing to memory. A store that
    shares memory syncs in the background after the session wrote (issue 19)."""
    _sync_beside(store_dir, if_written=True)
    if data.get("stop_hook_active") is True or data.get("stopHookActive") is True:
        return None
    if not switch("RETAINED_STOP_HOOK", True, env):
        return None

    if read_only_requested():  # "ask once" needs a note of the asking; read-only writes none
        return None
    sid = session_id(data, env)
    if not sid:
        return None
    state_path = _session_file(store_dir, sid)
    state = _load(state_path)
    if state is not None and state.get("asked"):
        return None
    worked, wrote_in_transcript = _transcript_flags(data.get("transcript_path"), host)
    if not worked or wrote_in_transcript:
        return None
    if state is None:
        # The session-start hook did not note this session (installed mid-session, or another copy of
        # retained): the transcript's first timestamp says when it began.
        began = _transcript_start(data.get("transcript_path"))
        if began is None:
            return None
        state = {"session_id": sid, "host": host.name, "project": project_of(data, env), "began_ts": began,
                 "asked": False}

    written = 0
    if (store_dir / LOG_NAME).exists():
        from .store import Store  # lazy, as in `session_start`

        with Store(store_dir, create=False) as store:
            store.index.catch_up()
            scopes = [s for s in (state.get("project"), "global") if s]
            written = store.index.written_in_session(sid, scopes, began_ts=state.get("began_ts"),
                                                     after_seq=int(state.get("start_seq", 0)))
    if written:
        return None
    state["asked"] = True
    _save(state_path, state)  # never twice: if this cannot be saved, the exception keeps us silent
    return host.stop_output(STOP_REASON)


def command(event: str, host: str | None, dir_arg: str | None, budget: int) -> int:
    """`retained hook EVENT`, read by retained/entry.py or by the CLI's parser: it always exits 0."""
    # A hook lives for a fraction of a second and makes little cyclic garbage, while the collector's
    # passes over everything its imports create cost ~3% of a session-start hook's instructions.
    gc.disable()
    try:
        directory = store_dir(dir_arg)
    except Exception as e:
        sys.stderr.write(f"retained hook: skipped ({e})\n")
        return 0
    return run(event, host, directory, budget)


def run(event: str, host_flag: str | None, store_dir: Path, budget: int, stdin: Any = None) -> int:
    """Entry point for `retained hook EVENT`: always exit 0."""
    try:
        if event not in EVENTS:
            sys.stderr.write(f"retained hook: unknown event {event!r} (use {', '.join(EVENTS)})\n")
            return 0
        env = dict(os.environ)
        data = read_input(stdin if stdin is not None else sys.stdin)
        if data is None:
            return 0  # not a host's input: say nothing (a brief here could show another project's memory)
        host = detect_host(data, env, host_flag)
        if event == "session-start":
            out = session_start(data, env, host, store_dir, budget)
        elif event == "stop":
            out = stop(data, env, host, store_dir)
        elif event == "prompt":
            out = prompt(data, env, host, store_dir)
        else:
            out = pre_compact(data, env, host, store_dir)
        if out is not None:
            sys.stdout.write((out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)) + "\n")
            sys.stdout.flush()
    except Exception as e:
        msg = " ".join(str(e).split())[:300]
        with contextlib.suppress(OSError):
            sys.stderr.write(f"retained hook {event}: skipped ({type(e).__name__}: {msg})\n")
    return 0
