"""`retained install`, `retained uninstall` and `retained doctor`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from retained.errors import RetainedError, UsageError

from . import hosts as all_hosts
from .safe_file import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .base import FilePlan, Host


def _project_root() -> Path:
    from retained.project import find_root

    cwd = Path.cwd()
    return find_root(cwd) or cwd.resolve()


def _select(names: list[str] | None, ctx_for: Callable[[Host], dict[str, Any]]) -> list[Host]:
    available = all_hosts()
    if names:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise UsageError(f"unknown host {', '.join(unknown)}", hint=f"hosts: {', '.join(available)}")
        return [available[n] for n in dict.fromkeys(names)]
    found = [h for h in available.values() if h.detected(ctx_for(h))]
    if not found:
        raise UsageError("no agent host found on this machine",
                         hint=f"install one, or name it: --host {' --host '.join(available)}")
    return found


def _confirm(out: Callable[[str], None]) -> bool:
    if not sys.stdin.isatty():
        return True
    out("Proceed? [y/N] ")
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def install(*, host_names: list[str] | None, scope: str, dry_run: bool, hooks: bool, approve: bool, stop: bool,
            yes: bool, store: Path, out: Callable[[str], None], err: Callable[[str], None],
            uninstalling: bool = False) -> int:
    """Plan, show, then apply host by host. A file that cannot be changed safely is left alone and named."""
    project = _project_root()
    chosen = _select(host_names, lambda h: h.context(store, project))
    plans: list[tuple[Host, list[FilePlan]]] = []
    for h in chosen:
        ctx = h.context(store, project)
        if uninstalling:
            ctx["uninstalling"] = [c.name for c in chosen]  # hosts leaving together share nothing to keep
        plans.append((h, h.plans(ctx, scope=scope, hooks=hooks, approve=approve, stop=stop,
                                 install=not uninstalling)))
    verb = "remove" if uninstalling else "write"
    out(f"retained {'uninstall' if uninstalling else 'install'} ({scope} scope){' — dry run, nothing is written' if dry_run else ''}:")
    for h, file_plans in plans:
        out(f"  {h.title}:")
        for p in file_plans:
            out(f"    {p.path}")
            for line in p.describe():
                out(f"      {verb} {line}")
    if not dry_run and not yes and not _confirm(out):
        err("nothing was changed")
        return 1
    failures = 0
    for h, file_plans in plans:
        for p in file_plans:
            try:
                outcome = p.apply(install=not uninstalling, dry_run=dry_run)
            except RetainedError as e:
                failures += 1
                err(f"✗ {h.title}: {e.message}" + (f" (hint: {e.hint})" if e.hint else ""))
                continue
            except OSError as e:
                failures += 1
                err(f"✗ {h.title}: {p.path}: {e.strerror or e}; nothing was changed there")
                continue
            if dry_run:
                if outcome.diff:
                    out(outcome.diff.rstrip("\n"))
                elif outcome.action == "would remove":
                    out(f"  {p.path}: would remove the file (retained created it, and nothing else is in it)")
                else:
                    out(f"  {p.path}: no change")
            else:
                extra = f" (backup: {outcome.backup})" if outcome.backup and outcome.action == "updated" else ""
                out(f"✓ {h.title}: {outcome.action} {p.path}{extra}")
    if failures:
        err(f"{failures} file(s) were left untouched; the others are done")
        return 1
    return 0


# -- doctor ------------------------------------------------------------------------------------------
class Check:
    __slots__ = ("host", "name", "ok", "detail", "fix")

    def __init__(self, host: str, name: str, ok: bool, detail: str = "", fix: str = "") -> None:
        self.host, self.name, self.ok, self.detail, self.fix = host, name, ok, detail, fix

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def _rpc_session(command: list[str], env: dict[str, str], timeout: float) -> tuple[bool, str]:
    """Start the server as the host would, send initialize + tools/list, and read both answers."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "retained-doctor", "version": "1"}}},
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


def _host_hook_input(host: str, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
    base = {"cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    if host == "cursor":
        return {"hook_event_name": "sessionStart", "workspace_roots": [str(project)], "cursor_version": "doctor"}, {}
    if host == "vscode":
        return {"cwd": str(project), "hookEventName": "SessionStart", "source": "new"}, {}
    if host == "claude":
        return base, {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project)}
    return base, {}


def doctor_host(h: Host, store: Path, project: Path) -> list[Check]:
    """Read-only checks of one host's wiring. Never changes a config file."""
    checks: list[Check] = []
    ctx = h.context(store, project)
    plans = h.plans(ctx, scope="user", hooks=True, approve=False, stop=True)
    entry = None
    for p in plans:
        try:
            text = p.path.read_text("utf-8") if p.path.exists() else ""
            doc = p.editor.load(p.path, text)
        except (RetainedError, OSError, UnicodeDecodeError) as e:
            checks.append(Check(h.name, f"{p.path} parses", False, str(e), f"fix {p.path} (its line is named above)"))
            continue
        checks.append(Check(h.name, f"{p.path} parses", True))
        for edit in p.edits:
            if edit["op"] == "member":
                from .formats import _get

                got = _get(doc, edit["at"])
                ok = isinstance(got, dict) and bool(got.get("command"))
                checks.append(Check(h.name, "server entry present", ok, ".".join(edit["at"]),
                                    f"retained install --host {h.name}"))
                if ok:
                    entry = got
        if p.role in ("hooks", "trust") or any(e["op"].startswith("hook") for e in p.edits):
            found = {k: v for k, v in p.present(doc).items() if "hook" in k or "state" in k}
            for name, ok in found.items():
                what = "hook trusted" if "state" in name else "hook present"
                checks.append(Check(h.name, what, ok, name, f"retained install --host {h.name}"))
    if entry is not None:
        command = [entry["command"], *[str(a) for a in entry.get("args", [])]]
        exe = Path(entry["command"])
        runnable = exe.is_absolute() and exe.exists() and os.access(exe, os.X_OK)
        checks.append(Check(h.name, "server command exists and is executable", runnable, entry["command"],
                            f"retained install --host {h.name} (writes the current absolute path)"))
        if runnable:
            env = dict(os.environ)
            env.update({k: str(v) for k, v in (entry.get("env") or {}).items()})
            env["RETAINED_READ_ONLY"] = "1"  # the entry's env, plus: change no file of the store
            ok, detail = _rpc_session(command, env, 10)
            checks.append(Check(h.name, "server starts and answers", ok, detail,
                                "run the command by hand to see its error: " + shlex.join(command)))
    hook_cmd = next((e["value"]["hooks"][0]["command"] if e["op"] == "hook-group" else e["value"]["command"]
                     for p in plans for e in p.edits if e["op"].startswith("hook") and "session-start" in json.dumps(e)), None)
    if hook_cmd:
        payload, extra = _host_hook_input(h.name, project)
        env = dict(os.environ, **extra)
        env["RETAINED_DIR"] = str(store)
        env["RETAINED_READ_ONLY"] = "1"
        for var in ("CLAUDE_CODE_SESSION_ID", "GEMINI_SESSION_ID"):  # doctor run inside a session is not it
            env.pop(var, None)
        t = time.monotonic()
        try:
            proc = subprocess.run(hook_cmd, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                                  timeout=30, env=env)
            took = time.monotonic() - t
            data = json.loads(proc.stdout) if proc.stdout.strip() else None
            text = (data or {}).get("additional_context") or ((data or {}).get("hookSpecificOutput") or {}).get("additionalContext")
            ok = proc.returncode == 0 and bool(text) and len(proc.stdout) <= 9000 and took < 10
            detail = f"{len(proc.stdout)} chars in {took * 1000:.0f} ms" if ok else (proc.stderr.strip()[:200] or "no output")
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            ok, detail = False, str(e)[:200]
        checks.append(Check(h.name, "session-start hook prints the brief", ok, detail,
                            f"run: echo '{{}}' | {hook_cmd}"))
    return checks


def doctor_store(store: Path) -> list[Check]:
    from retained.store import Store

    checks: list[Check] = []
    # An existing store must be a writable directory; a missing one, creatable in its nearest parent.
    where = store if store.exists() else next((p for p in store.parents if p.exists()), store)
    if where.is_dir() and os.access(where, os.W_OK | os.X_OK):
        checks.append(Check("store", "store directory is writable", True, str(store)))
    else:
        checks.append(Check("store", "store directory is writable", False, f"{store} is not writable",
                            f"fix the permissions of {store}, or point RETAINED_DIR elsewhere"))
        return checks
    if not (store / "log.jsonl").exists():
        checks.append(Check("store", "log verifies", True, "no records yet"))
        return checks
    try:
        with Store(store, create=False, read_only=True) as s:
            report = s.verify()  # read-only: doctor changes no file, the derived index included
    except (RetainedError, OSError) as e:
        checks.append(Check("store", "log verifies", False, str(e), "retained verify"))
        return checks
    checks.append(Check("store", "log verifies", report["chain_ok"] and report["torn_tail"] is None,
                        f"{report['records']} records" + (f"; first break: {report['first_break']}" if report["first_break"] else ""),
                        "retained verify (names the damaged lines)"))
    covered = report["missing_from_index"] == 0 and report["index_only"] == 0
    detail = f"coverage {report['coverage'] * 100:.1f}%"
    checks.append(Check("store", "index covers the log", covered, detail, "retained reindex"))
    return checks


def doctor(*, host_names: list[str] | None, store: Path, as_json: bool, out: Callable[[str], None]) -> int:
    project = _project_root()
    try:
        chosen = _select(host_names, lambda h: h.context(store, project))
    except UsageError:
        if host_names:
            raise
        chosen = []
    checks: list[Check] = []
    for h in chosen:
        checks += doctor_host(h, store, project)
    checks += doctor_store(store)
    failed = [c for c in checks if not c.ok]
    if as_json:
        out(json.dumps({"ok": not failed, "checks": [c.as_dict() for c in checks]}, indent=2, ensure_ascii=False))
    else:
        for c in checks:
            mark = "✓" if c.ok else "✗"
            out(f"{mark} {c.host}: {c.name}" + (f" — {c.detail}" if c.detail else ""))
            if not c.ok and c.fix:
                out(f"    fix: {c.fix}")
        out(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


__all__ = ["ConfigError", "install", "doctor"]
