"""`retained share`, `unshare` and `sync`: team memory at the command line (issue 19). cli.py registers
these; the work is retained/team/share.py's. Errors are one line with a hint (cli.main renders them):
exit 0 ok, 1 a sync that did not finish, 2 usage (not in a checkout, no such remote).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .paths import store_dir
from .project import canonical_key
from .store import Store
from .team import background, share, state
from .team.git import public_url

if TYPE_CHECKING:
    from collections.abc import Callable

    from .team.state import Shared
    from .team.sync import SyncResult

EXIT_OK, EXIT_FAIL = 0, 1


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _oneline(text: str, width: int = 100) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _store(args: argparse.Namespace) -> Store:
    return Store(store_dir(args.dir))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary(shared: Shared, r: SyncResult) -> str:
    """One line: what a sync pulled, pushed, which writers it saw, what it refused."""
    name = "personal memory" if shared.key == "personal" else shared.key
    if not r.ok:
        return f"{name}: sync failed: {r.error}"
    pulled = sum(r.pulled.values())
    got = f"pulled {_plural(pulled, 'record')}" + (f" from {_plural(len(r.pulled), 'writer')}" if r.pulled else "")
    line = (f"{name}: {got}, pushed {r.pushed}, {_plural(len(r.writers), 'writer')} seen, "
            f"{'nothing' if not r.refused else len(r.refused)} refused")
    if r.pending:
        line += f", {r.pending} pending push"
    if r.pull_only:
        line += ", pull-only (the remote does not take this machine's pushes)"
    return line + f" ({r.seconds:.2f} s, git {r.git_seconds:.2f} s)"


def as_json(shared: Shared, r: SyncResult) -> dict[str, Any]:
    out = {"project": shared.key, "remote": shared.remote, "ref": shared.ref}
    out.update({k: v for k, v in r.as_dict().items() if k != "git_calls"})
    return out


def _report(args: argparse.Namespace, results: list[tuple[Shared, SyncResult]], extra: dict[str, Any] | None = None) -> int:
    ok = all(r.ok for _, r in results)
    if getattr(args, "json", False):
        print(json.dumps({**(extra or {}), "ok": ok, "projects": [as_json(s, r) for s, r in results]},
                         ensure_ascii=False, indent=2))
    else:
        for s, r in results:
            (_out if r.ok else _err)(("" if r.ok else "error: ") + summary(s, r)
                                     + (f" (hint: {r.hint})" if not r.ok and r.hint else ""))
            for line in r.refused:
                _err(f"refused: {line}")
            for p in r.purged:  # what this clone tombstoned, and who asked
                _err(f"purged: {p['id']} of writer {p['writer']}, asked by {_oneline(p.get('author') or '?', 80)} "
                     f"(writer {p.get('purged_by') or '?'}, purge {p['by']})")
            for line in r.notes:
                _err(f"note: {line}")
    return EXIT_OK if ok else EXIT_FAIL


def _target(args: argparse.Namespace, store_dir: Path) -> tuple[str, str, str | None, str | None]:
    """(key, remote URL, checkout, remote name) that `share` works on: the personal remote, or this
    checkout's project (the checkout and the remote's name there when it was named, not a URL)."""
    if args.personal is not None:
        if args.remote is not None:
            raise UsageError("--personal takes the private remote's URL itself; --remote is for a project",
                             hint="retained share --personal URL")
        if not args.personal.strip():
            raise UsageError("--personal needs the URL of a private remote", hint="retained share --personal URL")
        return state.PERSONAL, share.remote_url(store_dir, args.personal.strip()), None, None
    key, root = share.project_here()
    name = args.remote or "origin"
    return key, share.remote_url(root, args.remote), (None if share.is_url(name) else str(root)), \
        (None if share.is_url(name) else name)


def cmd_share(args: argparse.Namespace) -> int:
    with _store(args) as store:
        key, url, checkout, name = _target(args, store.directory)
        _check_boundary(store.directory, key, url)
        url_shown = public_url(url)
        if args.dry_run:
            shared = state.Shared(key, url_shown, state.MEMORY_REF, state.project_dir(store.directory, key), "")
            leaving = share.leaving(store, shared)
            if args.json:
                print(json.dumps({"project": key, "remote": url_shown, "would_share": len(leaving), "records": leaving},
                                 ensure_ascii=False, indent=2))
            else:
                _out(f"would share {_plural(len(leaving), 'record')} of {key} through {url_shown} (nothing was sent):")
                for rec in leaving:
                    _out(f"  {rec['id']}  {rec['kind']}  {_oneline(rec.get('text', ''))}")
            return EXIT_OK
        shared = state.share(store.directory, key, url, checkout=checkout, remote_name=name)
        if not args.json:
            _out(f"sharing {'your personal memory' if key == state.PERSONAL else key} through {url_shown} ({shared.ref})")
        result = share.sync_one(store, shared)
    return _report(args, [(shared, result)], {"shared": key, "remote": url_shown})


def _check_boundary(store_dir: Path, key: str, url: str) -> None:
    """A project's remote is never the personal one, and the personal remote is never a shared
    project's, however each URL is spelled: nothing personal may reach a project's remote, and nothing
    of a project the personal one."""

    def same(a: str, b: str) -> bool:
        return canonical_key(public_url(a)) == canonical_key(public_url(b))

    everything = state.shared(store_dir)
    if key == state.PERSONAL:
        for other in everything.values():
            if other.key != state.PERSONAL and same(other.remote, url):
                raise UsageError(f"{public_url(url)} is the remote of the shared project {other.key}: your personal "
                                 "memory does not go there", hint="use a private remote of your own for --personal")
        return
    personal = everything.get(state.PERSONAL)
    if personal is not None and same(personal.remote, url):
        raise UsageError(f"{public_url(url)} is your personal remote: a project's memory does not go there",
                         hint="share the project through its own remote (--remote NAME|URL)")


def cmd_unshare(args: argparse.Namespace) -> int:
    with _store(args) as store:
        key = state.PERSONAL if args.personal else share.project_here()[0]
        gone = state.unshare(store.directory, key)
        store.refresh()
    name = "your personal memory" if key == state.PERSONAL else key
    if args.json:
        print(json.dumps({"unshared": key if gone else None, "remote": gone.remote if gone else None},
                         ensure_ascii=False, indent=2))
    elif gone is None:
        _out(f"{name} was not shared; nothing changed")
    else:
        _out(f"stopped sharing {name} (through {gone.remote}); records already pushed stay on that remote, "
             "teammates' records left this machine's index; your own records stay in your log")
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    if getattr(args, "background", False):
        return _background(args)
    if getattr(args, "probe", None):
        root, key = args.probe
        background.probe(store_dir(args.dir), root, key)
        return EXIT_OK
    with _store(args) as store:
        results = share.sync_all(store)
    if not results:
        if args.json:
            print(json.dumps({"ok": True, "projects": []}, ensure_ascii=False, indent=2))
        else:
            _out("nothing is shared on this machine: run `retained share` inside a project's checkout")
        return EXIT_OK
    return _report(args, results)


def _background(args: argparse.Namespace) -> int:
    """What a hook starts: every shared project, bounded, waiting for no other sync; silent. A failure
    leaves one note the next brief shows (team/background.py)."""
    try:
        with _store(args) as store:
            results = share.sync_all(store, budget=share.BACKGROUND_BUDGET, wait=0)
            failed = [summary(s, r) + (f" (hint: {r.hint})" if r.hint else "") for s, r in results
                      if not r.ok and "another sync" not in (r.error or "")]
            if failed:
                background.leave_note(store.directory, "the background team sync failed: " + "; ".join(failed))
            elif results:
                background.clear_note(store.directory)
    except Exception as e:  # a background process has no one to tell but the next brief

        background.leave_note(store_dir(args.dir), f"the background team sync failed: {e}")
        return EXIT_FAIL
    return EXIT_OK if not failed else EXIT_FAIL


def add_commands(add: Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]) -> None:
    """share, unshare, sync."""
    p = add("share", cmd_share, "share this project's decisions, conventions, facts and todos with the team through "
            "its git remote (a ref of its own; never the project's branches)")
    p.add_argument("--remote", metavar="NAME|URL", help="a remote of this checkout, or a URL (default: origin)")
    p.add_argument("--dry-run", action="store_true", help="list exactly which records would leave this machine; send nothing")
    p.add_argument("--personal", metavar="URL",
                   help="share your personal memory (global scope) between your own machines through this private remote")
    p = add("unshare", cmd_unshare, "stop sharing this project (records already pushed stay on the remote)")
    p.add_argument("--personal", action="store_true", help="stop sharing your personal memory")
    p = add("sync", cmd_sync, "fetch teammates' records, verify every writer's chain, push this machine's shared records")
    p.add_argument("--background", action="store_true", help=argparse.SUPPRESS)  # what hooks start
    p.add_argument("--probe", nargs=2, metavar=("CHECKOUT", "KEY"), help=argparse.SUPPRESS)  # a look at a remote
