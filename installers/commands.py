"""`retained install` and `retained uninstall`: plan, show, then wire each host all or nothing.

Which hosts exist, where their files are and what goes in them all comes from the host registry
(installers/hosts/). A file two hosts share (Claude Code and VS Code both read ~/.claude/settings.json)
is planned, shown and written once; on uninstall, entries another still-installed host reads stay.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retained.errors import RetainedError, UsageError

from .hosts import hosts as all_hosts
from .safe_file import ConfigError, undo

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .base import FilePlan
    from .host import Host
    from .safe_file import Outcome

INSTALL_FLAGS = ("hooks", "stop", "approve", "prompt", "compact")


def project_root() -> Path:
    from retained.project import find_root

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
            for e in p.edits:
                e.wanted_by = [host]  # type: ignore[attr-defined]
            seen = by_file.get(_key(p.path))
            if seen is None:
                by_file[_key(p.path)] = p
                order.append(p)
                continue
            if host not in seen.hosts:
                seen.hosts.append(host)
            known = {_same(e): e for e in seen.edits}
            for e in p.edits:
                same = known.get(_same(e))
                if same is None:
                    seen.edits.append(e)
                elif host not in same.wanted_by:  # type: ignore[attr-defined]
                    same.wanted_by.append(host)  # type: ignore[attr-defined]
    return order


def _same(e: Any) -> str:
    """Two hosts' edits that are one edit of the shared file (same op, place and value)."""
    return repr((e.op, e.at, e.spec.get("value"), e.spec.get("values")))


def without_failed(p: FilePlan, failed: dict[str, str]) -> tuple[list[Any], dict[str, str]]:
    """A shared file's edits less those a host that failed also wants, and for each host that loses
    some, what it loses. A hook in a file another host reads runs in that host too: written for VS Code
    in Claude Code's settings.json, it would run in a Claude Code that has no retained server."""
    out = [h for h in p.hosts if h.name in failed]
    if not out:
        return list(p.edits), {}
    kept = [e for e in p.edits if not set(e.wanted_by) & set(out)]  # type: ignore[attr-defined]
    lost: dict[str, str] = {}
    for h in p.hosts:
        gone = [e for e in p.edits if e not in kept and h in e.wanted_by]  # type: ignore[attr-defined]
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


def install(*, host_names: list[str] | None, scope: str, dry_run: bool, flags: dict[str, bool], yes: bool,
            store: Path, out: Callable[[str], None], err: Callable[[str], None], uninstalling: bool = False) -> int:
    """Plan, show, then apply host by host; a host whose files cannot all be changed is left unchanged."""
    project = project_root()
    contexts: dict[str, dict[str, Any]] = {}

    def ctx_for(h: Host) -> dict[str, Any]:
        if h.name not in contexts:
            contexts[h.name] = h.context(store, project, scope)
        return dict(contexts[h.name])

    chosen = select(host_names, ctx_for)
    per_host = [(h, h.plans(ctx_for(h), scope=scope, flags=flags, install=not uninstalling)) for h in chosen]
    if uninstalling:
        keep_what_others_read(per_host, ctx_for, {h.name for h in chosen}, scope)
    files = merge_shared(per_host)
    changes = _preview(files, install=not uninstalling)
    failed: dict[str, str] = {}
    for p, result in changes.items():
        if isinstance(result, str):
            for h in p.hosts:
                failed.setdefault(h.name, result)
    partial: dict[str, str] = {}
    for p in files:  # a shared file read by a host that fails gets none of that host's edits (without_failed)
        if len(p.hosts) > 1 and not isinstance(changes[p], str) and any(h.name in failed for h in p.hosts):
            p.edits, lost = without_failed(p, failed)
            partial.update(lost)
            changes.update(_preview([p], install=not uninstalling))
    files = [p for p in files if p.edits]
    _show_plan(chosen, files, changes, scope=scope, dry_run=dry_run, uninstalling=uninstalling, out=out)
    if dry_run:
        for p in files:
            result = changes[p]
            if not isinstance(result, str):
                _show_dry(p, result, out)
        _partial_notes(chosen, partial, failed, err, uninstalling=uninstalling)
        return _summary(chosen, failed, out, err, uninstalling=uninstalling, dry_run=True, scope=scope)
    if not any(not isinstance(r, str) and r.action != "unchanged" for r in changes.values()):
        out("nothing to change")
        return _summary(chosen, failed, out, err, uninstalling=uninstalling, dry_run=False, quiet=True, scope=scope)
    if not yes and not _confirm(out):
        err("nothing was changed")
        return 1
    # Each host's own files first, all or nothing per host; a file several hosts share is written last,
    # with only the edits no failed host also wants (see without_failed).
    applied: dict[str, list[tuple[FilePlan, Outcome]]] = {}
    for h in chosen:
        if h.name in failed:
            continue
        mine = applied.setdefault(h.name, [])
        for p in files:
            if p.hosts == [h] and changes[p].action != "unchanged":  # type: ignore[union-attr]
                try:
                    mine.append((p, _apply(p, install=not uninstalling)))
                except (RetainedError, OSError) as e:
                    failed[h.name] = _reason(p, e)
                    _undo_host(h, applied)
                    break
    for h in chosen:
        for i, (p, outcome) in enumerate(applied.get(h.name, [])):
            if outcome.settled is not None and not outcome.settled():
                try:  # the host wrote the file back without our change: once more, now waiting it out
                    applied[h.name][i] = (p, p.apply(install=not uninstalling, dry_run=False))
                except (RetainedError, OSError) as e:
                    failed[h.name] = _reason(p, e)
                    _undo_host(h, applied)
                    break
    shared_done: list[tuple[FilePlan, Outcome]] = []
    for p in files:
        if len(p.hosts) < 2 or all(h.name in failed for h in p.hosts) or changes[p].action == "unchanged":  # type: ignore[union-attr]
            continue
        kept, lost = without_failed(p, failed)
        partial.update(lost)
        if not kept:
            continue
        p.edits = kept
        try:
            outcome = _apply(p, install=not uninstalling)
            if outcome.settled is not None and not outcome.settled():
                outcome = p.apply(install=not uninstalling, dry_run=False)
        except (RetainedError, OSError) as e:
            for h in p.hosts:
                if h.name not in failed:
                    failed[h.name] = _reason(p, e)
                    _undo_host(h, applied)
            continue
        shared_done.append((p, outcome))
    for p, outcome in [pair for h in chosen for pair in applied.get(h.name, [])] + shared_done:
        extra = f" (backup: {outcome.backup})" if outcome.backup and outcome.action == "updated" else ""
        out(f"✓ {_owners(p)}: {outcome.action} {p.path}{extra}")
    _partial_notes(chosen, partial, failed, err, uninstalling=uninstalling)
    return _summary(chosen, failed, out, err, uninstalling=uninstalling, dry_run=False, scope=scope)


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
    pending = [p for p in files if isinstance(changes[p], str) or changes[p].action != "unchanged"]  # type: ignore[union-attr]
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
        for note in h.notes:
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
        err(f"{len(failed)} host(s) left unchanged" + (f"; done: {', '.join(ok)}" if ok else ""))
        return 1
    if not uninstalling and not dry_run and not quiet:
        out(f"next: run `retained doctor{' --scope project' if scope == 'project' else ''}` to check that every "
            "host starts the server and runs the hooks")
    return 0


__all__ = ["ConfigError", "install", "project_root", "select"]
