"""`retained install` and `retained uninstall`: plan, show, then wire each host all or nothing.

Which hosts exist, where their files are and what goes in them all comes from the host registry
(installers/hosts/). A file two hosts share (a host declares it in `Host.shares`) is planned, shown
and written once; on uninstall, entries another still-installed host reads stay.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retained.errors import RetainedError, UsageError
from retained.project import find_root

from .hosts import context
from .hosts import hosts as all_hosts
from .plugins import installed_plugin
from .safe_file import ConfigError, undo

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .base import FilePlan
    from .edits import Edit
    from .host import Host
    from .safe_file import Outcome

INSTALL_FLAGS = ("hooks", "stop", "approve", "prompt", "compact")


def project_root() -> Path:
    cwd = Path.cwd()
    return find_root(cwd) or cwd.resolve()


def select(names: list[str] | None, ctx_for: Callable[[Host], dict[str, Any]]) -> list[Host]:
    """The hosts named (checked against the registry), else every host found on this machine."""
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


def _key(path: Path) -> str:
    return os.path.realpath(path)


def merge_shared(plans: list[tuple[Host, list[FilePlan]]]) -> list[FilePlan]:
    """Every file once: plans of several hosts for the same file become one plan holding both's edits."""
    by_file: dict[str, FilePlan] = {}
    order: list[FilePlan] = []
    for host, file_plans in plans:
        for p in file_plans:
            seen = by_file.get(_key(p.path))
            if seen is None:
                by_file[_key(p.path)] = p
                order.append(p)
            else:
                seen.take(p, host)
    return order


def without_failed(p: FilePlan, failed: dict[str, str]) -> tuple[list[Edit], dict[str, str]]:
    """A shared file's edits less those a host that failed also wants, and for each host that loses
    some, what it loses. A hook in a file another host reads runs in that host too: written for VS Code
    in Claude Code's settings.json, it would run in a Claude Code that has no retained server."""
    out = [h for h in p.hosts if h.name in failed]
    if not out:
        return list(p.edits), {}
    kept = [e for e in p.edits if not set(p.wanted_by[e]) & set(out)]
    lost: dict[str, str] = {}
    for h in p.hosts:
        gone = [e for e in p.edits if e not in kept and h in p.wanted_by[e]]
        if h.name not in failed and gone:
            what = "hooks" if all(e.is_hook for e in gone) else "entries"
            lost[h.name] = f"its {what} in {p.path}, which {' and '.join(o.title for o in out)} also reads"
    return kept, lost


def _partial_notes(chosen: list[Host], partial: dict[str, str], failed: dict[str, str], err: Callable[[str], None],
                   *, uninstalling: bool) -> None:
    for h in chosen:
        if h.name in partial and h.name not in failed:
            if uninstalling:
                err(f"! {h.title}: uninstalled except {partial[h.name]}: that host was left as it was, so they stay")
            else:
                err(f"! {h.title}: wired without {partial[h.name]}: that host is not wired, so they were left out")


def keep_what_others_read(plans: list[tuple[Host, list[FilePlan]]], ctx_for: Callable[[Host], dict[str, Any]],
                          leaving: set[str], scope: str) -> None:
    """On uninstall, leave the hooks in a file another host that stays installed also reads."""
    staying = [h for h in all_hosts().values() if h.name not in leaving]
    for _host, file_plans in plans:
        for p in file_plans:
            for other in staying:
                ctx = ctx_for(other)
                theirs = other.plans(ctx, scope=scope, flags={}, install=False)
                if any(_key(q.path) == _key(p.path) and any(e.is_hook for e in q.edits) for q in theirs) and \
                        other.server_installed(ctx, scope):
                    p.edits = [e for e in p.edits if not e.is_hook]
                    break
        file_plans[:] = [p for p in file_plans if p.edits]


def _changes(result: Outcome | str) -> bool:
    """Whether a file's previewed change changes it (an error, a str, is no change)."""
    return not isinstance(result, str) and result.action != "unchanged"


class _Run:
    """One install or uninstall: the chosen hosts' plans, each file's preview, and what failed (by host)."""

    def __init__(self, chosen: list[Host], ctx_for: Callable[[Host], dict[str, Any]], *, scope: str,
                 install: bool) -> None:
        self.chosen, self.ctx_for, self.scope, self.install = chosen, ctx_for, scope, install
        self.files: list[FilePlan] = []
        self.changes: dict[FilePlan, Outcome | str] = {}
        self.failed: dict[str, str] = {}  # host name -> why none of its files were changed
        self.partial: dict[str, str] = {}  # host name -> what it goes without (see without_failed)
        self.applied: dict[str, list[tuple[FilePlan, Outcome]]] = {}

    def plan(self, flags: dict[str, bool]) -> None:
        """Every file once, previewed; a shared file read by a host that fails gets none of that host's edits."""
        per_host = [(h, h.plans(self.ctx_for(h), scope=self.scope, flags=flags, install=self.install))
                    for h in self.chosen]
        if not self.install:
            keep_what_others_read(per_host, self.ctx_for, {h.name for h in self.chosen}, self.scope)
        files = merge_shared(per_host)
        self.changes = _preview(files, install=self.install)
        for p, result in self.changes.items():
            if isinstance(result, str):
                for h in p.hosts:
                    self.failed.setdefault(h.name, result)
        for p in files:
            if len(p.hosts) > 1 and not isinstance(self.changes[p], str) and \
                    any(h.name in self.failed for h in p.hosts):
                p.edits, lost = without_failed(p, self.failed)
                self.partial.update(lost)
                self.changes.update(_preview([p], install=self.install))
        self.files = [p for p in files if p.edits]

    def apply(self) -> list[tuple[FilePlan, Outcome]]:
        """Each host's own files first, all or nothing per host; a file several hosts share is written
        last, with only the edits no failed host also wants (see without_failed). What was written, in order."""
        for h in self.chosen:
            if h.name not in self.failed:
                self._apply_own(h)
        for h in self.chosen:
            self._settle(h)
        shared = []
        for p in self.files:
            done = self._apply_shared(p)
            if done is not None:
                shared.append(done)
        return [pair for h in self.chosen for pair in self.applied.get(h.name, [])] + shared

    def _fail(self, h: Host, p: FilePlan, e: Exception) -> None:
        self.failed[h.name] = _reason(p, e)
        _undo_host(h, self.applied)

    def _apply_own(self, h: Host) -> None:
        mine = self.applied.setdefault(h.name, [])
        for p in self.files:
            if p.hosts == [h] and _changes(self.changes[p]):
                try:
                    mine.append((p, _apply(p, install=self.install)))
                except (RetainedError, OSError) as e:
                    self._fail(h, p, e)
                    return

    def _settle(self, h: Host) -> None:
        """A file its host rewrote without our change (while we waited): once more, now waiting it out."""
        for i, (p, outcome) in enumerate(self.applied.get(h.name, [])):
            if outcome.settled is not None and not outcome.settled():
                try:
                    self.applied[h.name][i] = (p, p.apply(install=self.install, dry_run=False))
                except (RetainedError, OSError) as e:
                    self._fail(h, p, e)
                    return

    def _apply_shared(self, p: FilePlan) -> tuple[FilePlan, Outcome] | None:
        if len(p.hosts) < 2 or all(h.name in self.failed for h in p.hosts) or not _changes(self.changes[p]):
            return None
        kept, lost = without_failed(p, self.failed)
        self.partial.update(lost)
        if not kept:
            return None
        p.edits = kept
        try:
            outcome = _apply(p, install=self.install)
            if outcome.settled is not None and not outcome.settled():
                outcome = p.apply(install=self.install, dry_run=False)
        except (RetainedError, OSError) as e:
            for h in p.hosts:
                if h.name not in self.failed:
                    self._fail(h, p, e)
            return None
        return p, outcome


def install(*, host_names: list[str] | None, scope: str, dry_run: bool, flags: dict[str, bool], yes: bool,
            store: Path, out: Callable[[str], None], err: Callable[[str], None], uninstalling: bool = False,
            report: dict[str, Any] | None = None) -> int:
    """Plan, show, then apply host by host; a host whose files cannot all be changed is left unchanged.

    `report` (for --json) is filled with what happened: per host its state and why, per file the change."""
    if report is None:
        report = {}
    code = _install(host_names=host_names, scope=scope, dry_run=dry_run, flags=flags, yes=yes, store=store, out=out,
                    err=err, uninstalling=uninstalling, report=report)
    report["exit_code"] = code
    return code


def _install(*, host_names: list[str] | None, scope: str, dry_run: bool, flags: dict[str, bool], yes: bool,
             store: Path, out: Callable[[str], None], err: Callable[[str], None], uninstalling: bool,
             report: dict[str, Any]) -> int:
    project = project_root()
    contexts: dict[str, dict[str, Any]] = {}

    def ctx_for(h: Host) -> dict[str, Any]:
        if h.name not in contexts:
            contexts[h.name] = context(h, store, project, scope)
        return dict(contexts[h.name])

    chosen = select(host_names, ctx_for)
    if not uninstalling:
        chosen = _not_as_plugins(chosen, forced=bool(host_names), project=project, out=out, err=err, report=report)
        if not chosen:
            out("nothing to change")
            return 0
    run = _Run(chosen, ctx_for, scope=scope, install=not uninstalling)
    run.plan(flags)
    report.update({"command": "uninstall" if uninstalling else "install", "scope": scope, "dry_run": dry_run,
                   "hosts": [], "files": [_file_report(p, run.changes[p], uninstalling) for p in run.files]})
    _show_plan(chosen, run.files, run.changes, scope=scope, dry_run=dry_run, uninstalling=uninstalling, out=out)
    if dry_run:
        for p in run.files:
            result = run.changes[p]
            if not isinstance(result, str):
                _show_dry(p, result, out)
        _partial_notes(chosen, run.partial, run.failed, err, uninstalling=uninstalling)
        _host_report(report, chosen, run.failed, uninstalling=uninstalling, dry_run=True)
        report["diffs"] = {str(p.path): run.changes[p].diff for p in run.files  # type: ignore[union-attr]
                           if not isinstance(run.changes[p], str) and run.changes[p].diff}  # type: ignore[union-attr]
        return _summary(chosen, run.failed, out, err, uninstalling=uninstalling, dry_run=True, scope=scope)
    _host_report(report, chosen, run.failed, uninstalling=uninstalling, dry_run=False)
    if not any(_changes(r) for r in run.changes.values()):
        out("nothing to change")
        return _summary(chosen, run.failed, out, err, uninstalling=uninstalling, dry_run=False, quiet=True,
                        scope=scope)
    if not yes and not _confirm(err if report.get("json") else out):
        err("nothing was changed")
        _host_report(report, chosen, run.failed, uninstalling=uninstalling, dry_run=False, declined=True)
        return 1
    done = run.apply()
    written = {id(p): outcome for p, outcome in done}
    for p, outcome in done:
        extra = f" (backup: {outcome.backup})" if outcome.backup and outcome.action == "updated" else ""
        out(f"✓ {_owners(p)}: {outcome.action} {p.path}{extra}")
    report["files"] = [_file_report(p, written.get(id(p), run.changes[p]), uninstalling, applied=id(p) in written)
                       for p in run.files]
    _partial_notes(chosen, run.partial, run.failed, err, uninstalling=uninstalling)
    _host_report(report, chosen, run.failed, uninstalling=uninstalling, dry_run=False)
    return _summary(chosen, run.failed, out, err, uninstalling=uninstalling, dry_run=False, scope=scope)


def _not_as_plugins(chosen: list[Host], *, forced: bool, project: Path, out: Callable[[str], None],
                    err: Callable[[str], None], report: dict[str, Any]) -> list[Host]:
    """The hosts to wire, less those that have retained as their own plugin or extension: never wired
    twice. A host named with --host is wired anyway (with a warning)."""
    kept = []
    for h in chosen:
        how = installed_plugin(h.name, project=project)
        if how is None:
            kept.append(h)
            continue
        report.setdefault("plugins", {})[h.name] = how
        if forced:
            err(f"! {h.title}: retained is also installed as its {how}; wiring it a second time as asked "
                "(retained doctor fails on this until one of them goes)")
            kept.append(h)
        else:
            out(f"{h.title}: retained is installed as its {how}; not wiring it a second time "
                f"(--host {h.name} wires it anyway)")
    return kept


def _file_report(p: FilePlan, result: Outcome | str, uninstalling: bool, applied: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": str(p.path), "hosts": [h.name for h in p.hosts],
                             "changes": p.describe(install=not uninstalling)}
    if isinstance(result, str):
        entry.update(action="refused", error=result)
    else:
        entry["action"] = result.action  # "would update" in a preview, "updated" once written
        if applied and result.backup and result.action == "updated":
            entry["backup"] = str(result.backup)
    return entry


def _host_report(report: dict[str, Any], chosen: list[Host], failed: dict[str, str], *, uninstalling: bool,
                 dry_run: bool, declined: bool = False) -> None:
    hosts = []
    for h in chosen:
        if h.name in failed:
            hosts.append({"host": h.name, "title": h.title, "ok": False,
                          "state": "left as it was" if uninstalling else "not wired", "why": failed[h.name]})
        elif declined:
            hosts.append({"host": h.name, "title": h.title, "ok": False, "state": "not changed (declined)"})
        else:
            state = ("would be uninstalled" if uninstalling else "would be wired") if dry_run else \
                ("uninstalled" if uninstalling else "wired")
            hosts.append({"host": h.name, "title": h.title, "ok": True, "state": state})
    report["hosts"] = hosts


def _undo_host(h: Host, applied: dict[str, list[tuple[FilePlan, Outcome]]]) -> None:
    """All or nothing: put back every file of this host's that was changed, newest first."""
    for _p, outcome in reversed(applied.pop(h.name, [])):
        undo(outcome)


def _apply(p: FilePlan, *, install: bool) -> Outcome:
    """Write one file; a file its host rewrites is looked at again after the others (one wait, not one each)."""
    return p.apply(install=install, dry_run=False, defer_settle=p.rewritten_by_host)


def _reason(p: FilePlan, e: Exception) -> str:
    if isinstance(e, RetainedError):
        return e.message + (f" (hint: {e.hint})" if e.hint else "")
    return f"{p.path}: {getattr(e, 'strerror', None) or e}"


def _preview(files: list[FilePlan], *, install: bool) -> dict[FilePlan, Outcome | str]:
    """What each file's change would be, or why it cannot be made (a dry run of every file first)."""
    result: dict[FilePlan, Outcome | str] = {}
    for p in files:
        try:
            result[p] = p.apply(install=install, dry_run=True)
        except (RetainedError, OSError) as e:
            result[p] = _reason(p, e)
    return result


def _owners(p: FilePlan) -> str:
    return " and ".join(h.title for h in p.hosts)


def _show_plan(chosen: list[Host], files: list[FilePlan], changes: dict[FilePlan, Outcome | str], *, scope: str,
               dry_run: bool, uninstalling: bool, out: Callable[[str], None]) -> None:
    pending = [p for p in files if isinstance(changes[p], str) or _changes(changes[p])]
    if not pending:
        return
    title = "uninstall" if uninstalling else "install"
    out(f"retained {title} ({scope} scope){' — dry run, nothing is written' if dry_run else ''}:")
    shown: set[int] = set()
    for h in chosen:
        mine = [p for p in pending if h in p.hosts and id(p) not in shown]
        if not mine:
            continue
        out(f"  {h.title}:")
        for p in mine:
            shown.add(id(p))
            shared = [o.title for o in p.hosts if o is not h]
            out(f"    {p.path}" + (f" (also read by {', '.join(shared)})" if shared else ""))
            for line in p.describe(install=not uninstalling):
                out(f"      {line}")
            if not uninstalling:
                for note in p.notes:
                    out(f"      note: {note}")
        if not uninstalling and any(e.is_hook for p in mine for e in p.edits):
            for note in h.notes:  # what the host makes of retained's hooks: only when they go in
                out(f"    note: {note}")


def _show_dry(p: FilePlan, outcome: Outcome, out: Callable[[str], None]) -> None:
    if outcome.diff:
        out(outcome.diff.rstrip("\n"))
    elif outcome.action == "would remove":
        out(f"  {p.path}: would remove the file (retained created it, and nothing else is in it)")


def _summary(chosen: list[Host], failed: dict[str, str], out: Callable[[str], None], err: Callable[[str], None], *,
             uninstalling: bool, dry_run: bool, quiet: bool = False, scope: str = "user") -> int:
    for h in chosen:
        if h.name in failed:
            state = "left as it was" if uninstalling else "not wired"
            err(f"✗ {h.title}: {state}, none of its files were changed: {failed[h.name]}")
    if failed:
        ok = [h.title for h in chosen if h.name not in failed]
        done = ("would uninstall" if uninstalling else "would wire") if dry_run else "done"
        err(f"{len(failed)} host(s) {'would be left' if dry_run else 'left'} unchanged"
            + (f"; {done}: {', '.join(ok)}" if ok else ""))
        return 1
    if not uninstalling and not dry_run and not quiet:
        out(f"next: run `retained doctor{' --scope project' if scope == 'project' else ''}` to check that every "
            "host starts the server and runs the hooks")
    return 0


__all__ = ["ConfigError", "install", "project_root", "select"]
