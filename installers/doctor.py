"""`retained doctor`: prove, read-only, that each host's wiring works, and say what stops it.

Per host: its files parse, retained's server entry and hooks are there, the server starts with the
entry's exact environment and answers, the session-start hook (the command in the file, run as the
host runs it) prints a brief that fits the host's cap, and host-side conditions that silently stop a
wired server or hook (folder trust, hook trust, a disabled entry) are not in the way. Then every store
those entries and hooks actually open is verified, and named. Never changes a file.

Hosts are checked side by side, in threads. Each check is given the environment it works out paths
and runs programs with (an argument, default this process's); none changes `os.environ` or any other
state the others read.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from retained.embed import tier_report
from retained.errors import RetainedError, UsageError
from retained.paths import expand_user, store_dir
from retained.store import Store
from retained.team.share import team_status

from .commands import project_root, select
from .edits import ServerEntry, get
from .host import Check
from .hosts import context, native_memory, session_vars
from .hosts import hosts as all_hosts
from .plugins import installed_plugin, remove_command

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from .base import FilePlan
    from .host import Host


_SESSIONS: dict[str, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def rpc_session(command: list[str], env: dict[str, str], timeout: float) -> tuple[bool, str]:
    """`_rpc_session`, once per distinct command and environment (hosts wired alike start the same server)."""
    key = json.dumps([command, sorted(env.items())])
    with _SESSIONS_LOCK:
        found = _SESSIONS.get(key)
        owner = found is None
        pending = _SESSIONS[key] = Future() if found is None else found
    if owner:
        try:
            pending.set_result(_rpc_session(command, env, timeout))
        except BaseException as e:
            pending.set_exception(e)
    return pending.result()


def _rpc_session(command: list[str], env: dict[str, str], timeout: float) -> tuple[bool, str]:
    """Start the server as the host would, send initialize + tools/list, and read both answers."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "retained-doctor", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        return False, f"cannot start: {e.strerror or e}"
    try:
        out, errs = proc.communicate("".join(json.dumps(m) + "\n" for m in msgs).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return False, f"no answer within {timeout:.0f} s"
    replies = {}
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            return False, f"wrote something that is not JSON-RPC on stdout: {line[:80]!r}"
        replies[msg.get("id")] = msg
    tools = replies.get(2, {}).get("result", {}).get("tools")
    if 1 not in replies or "result" not in replies[1] or not tools:
        tail = errs.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return False, f"did not answer initialize and tools/list ({tail[0][:200]})"
    return True, f"answered initialize and tools/list ({len(tools)} tools)"


def store_of_command(command: str, env: Mapping[str, str]) -> Path:
    """The store a hook command opens: its --dir, else RETAINED_DIR of its environment, else the default
    (which follows XDG_DATA_HOME / LOCALAPPDATA of that environment)."""
    try:
        words = shlex.split(command, posix=os.name != "nt")
    except ValueError:
        words = command.split()
    for i, word in enumerate(words[:-1]):
        if word == "--dir" and words[i + 1]:
            return expand_user(words[i + 1], env)
    return store_dir(None, env)


class HostReport:
    """One host's checks, and the stores its entry and hooks open."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.checks: list[Check] = []
        self.stores: dict[str, str] = {}  # store path -> what opens it

    def add(self, name: str, ok: bool, detail: str = "", fix: str = "") -> None:
        self.checks.append(Check(self.host.name, name, ok, detail, fix))


def doctor_host(h: Host, store: Path, project: Path, scope: str = "user",
                env: Mapping[str, str] | None = None) -> HostReport:
    """Read-only checks of one host's wiring, run with the environment `env` (default: this process's).
    Never changes a config file, nor any state another check reads."""
    env = dict(os.environ if env is None else env)
    report = HostReport(h)
    plans = h.plans(context(h, store, project, scope, env), scope=scope, flags={})
    wired = _wired_store(h, plans, env)
    if wired is not None and wired != store:  # check the entries as installed with the store they name
        store = wired
        plans = h.plans(context(h, store, project, scope, env), scope=scope, flags={})
    ctx = context(h, store, project, scope, env)
    fix = f"retained install --host {h.name}" + (" --scope project" if scope == "project" else "")
    docs, entry, hook_command = _read_files(report, plans, fix)
    report.checks += h.doctor_conditions(ctx, docs, project, scope, env)
    hook_command = hook_command or h.hook_command_in(docs)
    hook_report = HostReport(h)
    hook_run = threading.Thread(target=_check_hook, args=(hook_report, hook_command, project, env)) \
        if hook_command else None
    if hook_run is not None:
        hook_run.start()  # the hook and the server start side by side
    if entry is not None:
        _check_server(report, *h.server_command(entry), fix, env)
    if hook_run is not None:
        hook_run.join()
        report.checks += hook_report.checks
        for path, what in hook_report.stores.items():
            report.stores[path] = f"{report.stores[path]} and {what}" if path in report.stores else what
    return report


def _read_files(report: HostReport, plans: list[FilePlan],
                fix: str) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """Each planned file parses and holds retained's entries: (the parsed files by role, the server
    entry as the file holds it, the session-start hook command in the files)."""
    h = report.host
    docs: dict[str, Any] = {}
    entry = None
    hook_command = None
    for p in plans:
        try:
            text = p.path.read_text("utf-8") if p.path.exists() else ""
            doc = p.editor.load(p.path, text)
        except (RetainedError, OSError, UnicodeDecodeError) as e:
            report.add(f"{p.path} parses", False, str(e), f"fix {p.path} (its line is named above)")
            continue
        report.add(f"{p.path} parses", True)
        docs[p.role] = doc
        for server in p.server_edits:
            got = server.found(doc)
            ok = isinstance(got, dict) and bool(h.server_command(got)[0][0])
            report.add("server entry present", ok, server.where, fix)
            if ok:
                entry = got
                _entry_fields(report, server, got, fix)
        for edit in p.edits:
            if edit.check:
                for name, ok in edit.present(doc).items():
                    report.add(edit.check, ok, name, fix)
        hook_command = hook_command or _installed_hook(p, doc, "session-start")
    return docs, entry, hook_command


def _wired_store(h: Host, plans: list[FilePlan], env: Mapping[str, str]) -> Path | None:
    """The store retained's server entry names (its env's RETAINED_DIR), if the entry is there."""
    for p in plans:
        for edit in p.server_edits:
            try:
                doc = p.editor.load(p.path, p.path.read_text("utf-8"))
            except Exception:
                continue
            got = edit.found(doc)
            value = h.server_command(got)[1].get("RETAINED_DIR") if isinstance(got, dict) else None
            if isinstance(value, str) and value.strip():
                return expand_user(value, env)
    return None


def _entry_fields(report: HostReport, edit: ServerEntry, got: dict[str, Any], fix: str) -> None:
    """Fields of the entry this install writes that change whether the host can reach the tools."""
    for key in ("alwaysLoad",):
        if key in edit.value and got.get(key) != edit.value[key]:
            report.add(f"server entry sets {key}", False, f"{edit.where}.{key} is {got.get(key)!r}, not "
                       f"{edit.value[key]!r}", fix)


def _installed_hook(p: FilePlan, doc: Any, event: str) -> str | None:
    """The command of retained's hook for `event` as the file holds it now (not as this install would write it)."""
    for edit in p.edits:
        if not edit.is_hook or edit.hook_event != event:  # type: ignore[attr-defined]
            continue
        for item in get(doc, edit.at) or []:
            if edit.ours(item):  # type: ignore[attr-defined]
                found = item.get("command") if "command" in item else next(
                    (x.get("command") for x in item.get("hooks", []) if isinstance(x, dict)), None)
                if found and f"hook {event}" in found:
                    return found
    return None


def _check_server(report: HostReport, argv: list[str], entry_env: dict[str, str], fix: str,
                  base_env: Mapping[str, str]) -> None:
    found = argv[0] if Path(argv[0]).is_absolute() else shutil.which(argv[0])
    command = [found or argv[0], *argv[1:]]
    exe = Path(command[0])
    runnable = exe.is_absolute() and exe.exists() and os.access(exe, os.X_OK)
    report.add("server command exists and is executable", runnable, argv[0],
               f"{fix} (writes the current absolute path)")
    env = dict(base_env)
    env.update(entry_env)
    report.stores.setdefault(str(store_dir(None, env)), "server")
    if runnable:
        env["RETAINED_READ_ONLY"] = "1"  # the entry's env, plus: change no file of the store
        ok, detail = rpc_session(command, env, 10)
        report.add("server starts and answers", ok, detail,
                   "run the command by hand to see its error: " + shlex.join(command))


def _check_hook(report: HostReport, command: str, project: Path, base_env: Mapping[str, str]) -> None:
    h = report.host
    payload, extra = h.doctor_input(project)
    env = dict(base_env, **extra)
    env["RETAINED_READ_ONLY"] = "1"
    for var in session_vars():  # doctor run inside a host's session is not that session
        env.pop(var, None)
    store = store_of_command(command, env)
    report.stores[str(store)] = "hooks"
    t = time.monotonic()
    try:
        proc = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                              timeout=30, env=env)
        took = time.monotonic() - t
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
        text = h.context_in(data) if isinstance(data, dict) else None
        cap = h.max_chars or len(proc.stdout)
        ok = proc.returncode == 0 and bool(text) and len(proc.stdout) <= cap and took < 10
        detail = (f"{len(proc.stdout)} chars in {took * 1000:.0f} ms, from {store}" if ok else
                  (proc.stderr.strip()[:200] or f"no brief (printed {len(proc.stdout)} chars)"))
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        ok, detail = False, str(e)[:200]
    report.add("session-start hook prints the brief", ok, detail, f"run: echo '{{}}' | {command}")


def doctor_store(store: Path, opened_by: str = "") -> list[Check]:
    checks: list[Check] = []
    label = f"store {store}" + (f" ({opened_by})" if opened_by else "")
    # An existing store must be a writable directory; a missing one, creatable in its nearest parent.
    where = store if store.exists() else next((p for p in store.parents if p.exists()), store)
    if where.is_dir() and os.access(where, os.W_OK | os.X_OK):
        checks.append(Check("store", "store directory is writable", True, label))
    else:
        checks.append(Check("store", "store directory is writable", False, f"{store} is not writable",
                            f"fix the permissions of {store}, or point RETAINED_DIR elsewhere"))
        return checks
    if not (store / "log.jsonl").exists():
        checks.append(Check("store", "log verifies", True, f"{label}: no records yet"))
        return checks + team_checks(store, None)
    try:
        with Store(store, create=False, read_only=True) as s:
            report = s.verify()  # read-only: doctor changes no file, the derived index included

            semantic = tier_report(s.index)  # the semantic tier: loads no model, writes no file
            team = team_checks(store, s)
    except (RetainedError, OSError) as e:
        checks.append(Check("store", "log verifies", False, f"{label}: {e}", f"retained --dir {store} verify"))
        return checks
    checks.append(Check("store", "log verifies", report["chain_ok"] and report["torn_tail"] is None,
                        f"{label}: {report['records']} records" +
                        (f"; first break: {report['first_break']}" if report["first_break"] else ""),
                        f"retained --dir {store} verify (names the damaged lines)"))
    covered = report["missing_from_index"] == 0 and report["index_only"] == 0
    detail = f"{label}: coverage {report['coverage'] * 100:.1f}%"
    checks.append(Check("store", "index covers the log", covered, detail, f"retained --dir {store} reindex"))
    # The semantic tier: on, or off and why (off by RETAINED_EMBED=off is a choice, not a failure); records
    # still without a vector are embedded in the background by the next search or server.
    sem_ok = semantic["state"] == "on" or semantic["state"] == "off: RETAINED_EMBED=off"
    waiting = (f"; {semantic['missing']} of {semantic['records']} records have no vector of {semantic['model']} yet"
               if semantic["model"] else "")
    checks.append(Check("store", "semantic search", sem_ok, f"{label}: semantic {semantic['state']}{waiting}",
                        "reinstall retained, or set RETAINED_EMBED=off for words only"))
    return checks + team


def team_checks(store: Path, opened: Store | None) -> list[Check]:
    """Per shared project (issue 19): its remote, the last sync and its outcome, the writers seen, this
    machine's records pending push, open conflicts. Reads files and the open index only."""
    out = []
    for t in team_status(store, opened):
        name = "personal memory" if t["project"] == "personal" else t["project"]
        last = ("never synced" if not t["last_sync"] else
                f"last sync {t['last_sync']} " + ("ok" if t["last_ok"] else f"failed: {t['last_error']}"))
        detail = (f"{name} through {t['remote']}: {last}; {len(t['writers'])} writer(s) seen; "
                  f"{t['pending']} pending push; {t['conflicts']} open conflict(s)")
        if t.get("pull_only"):
            detail += "; pull-only (the remote does not take this machine's pushes)"
        signed = t.get("signed") or {}
        status = {w: (signed.get(w) or {}).get("status", "unsigned") for w in t["writers"]}
        if status:
            detail += "; " + ", ".join(f"{w} {status[w]}" for w in sorted(status))
        out.append(Check("team", "team memory syncs", t["last_ok"] is not False, detail,
                         "retained sync (it says what failed); `retained maintain` lists open conflicts"))
        refused = {w: (signed.get(w) or {}).get("problem") for w, s in status.items() if s == "refused"}
        if refused:
            out.append(Check("team", "teammates' heads are signed by their pinned keys", False,
                             "; ".join(str(refused[w] or f"writer {w}: refused") for w in sorted(refused)),
                             "ask that teammate which key they sign with; the refused lines were not taken in"))
        if t.get("filed_apart"):
            out.append(Check("team", "pulled records are read here", False, t["filed_apart"],
                             "run `retained share` in the project's checkout again"))
    return out


def native_memory_checks(h: Host, project: Path, env: Mapping[str, str]) -> list[Check]:
    """The host's own memory, as its registry module reports it (informational: never a failure)."""
    try:
        found = native_memory(h.name, env, str(project))
    except Exception as e:
        return [Check(h.name, "native memory", True, f"could not be read ({type(e).__name__})")]
    if not isinstance(found, dict):
        return []
    return [Check(h.name, "native memory", True, str(found.get("summary") or ""), str(found.get("fix") or ""))]


def doctor(*, host_names: list[str] | None, store: Path, as_json: bool, out: Callable[[str], None],
           scope: str = "user", env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)  # one copy, read by every check
    project = project_root()
    try:
        chosen = select(host_names, lambda h: context(h, store, project, scope, env))
    except UsageError:
        if host_names:
            raise
        chosen = []
    checks: list[Check] = []
    stores: dict[str, list[str]] = {}
    wired = []

    # Hosts are checked side by side (each waits on a server or hook process); the reports keep their order.
    with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
        reports = list(pool.map(lambda h: doctor_host(h, store, project, scope, env), chosen))

    for h, report in zip(chosen, reports, strict=False):
        entry = any(c.name == "server entry present" and c.ok for c in report.checks)
        plugin = installed_plugin(h.name, env, project)
        if plugin is not None and not entry:
            # Wired by the host's own plugin surface: retained install's entries are not expected there.
            checks.append(Check(h.name, "installed as its plugin", True, plugin))
            checks += native_memory_checks(h, project, env)
            wired.append(h)
            continue
        checks += report.checks
        if plugin is not None:
            checks.append(Check(h.name, "wired once", False,
                                f"retained is wired twice: as its {plugin}, and by retained install "
                                "(two servers, every hook twice)",
                                f"retained uninstall --host {h.name} (keeps the plugin), or {remove_command(h.name)}"))
        checks += native_memory_checks(h, project, env)
        if entry:
            wired.append(h)
        for path, what in report.stores.items():
            stores.setdefault(path, []).append(f"{h.name} {what}")
    if not wired and not host_names:
        every = " ".join(f"--host {n}" for n in all_hosts())
        checks.append(Check("hosts", "a host is wired", False,
                            "no agent host has retained's server entry" + (" in this project" if scope == "project" else ""),
                            "retained install" + (" --scope project" if scope == "project" else "") +
                            f" (or name hosts: {every})"))
    stores.setdefault(str(store), []).append("retained commands in this shell")
    for path, who in stores.items():
        checks += doctor_store(Path(path), ", ".join(who))
    failed = [c for c in checks if not c.ok]
    if as_json:
        out(json.dumps({"ok": not failed, "scope": scope, "stores": {p: w for p, w in stores.items()},
                        "checks": [c.as_dict() for c in checks]}, indent=2, ensure_ascii=False))
    else:
        for c in checks:
            mark = "✓" if c.ok else "✗"
            out(f"{mark} {c.host}: {c.name}" + (f" — {c.detail}" if c.detail else ""))
            if not c.ok and c.fix:
                out(f"    fix: {c.fix}")
        out(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0
