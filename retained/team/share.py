"""Team memory as the store sees it: which local records leave the machine, and one sync of a shared
project (issue 19). The CLI's `share`, `unshare`, `sync` and the background sync call this.

What is shared (`select`), a hard boundary checked here and nowhere else:
- **A project** (its key, `retained share` inside its checkout): records filed under the project's
  scopes (its key, and every path scope of the same repository) of kind decision, convention, fact or
  todo, or of any kind written with `--shared` (field `shared: true`), corrections included when they
  qualify themselves; retractions and undos filed in the project that name a shared record (naming
  only those). Never: a record written with `--private` (field `private: true`), a note, checkpoint or
  preference (unless `--shared`), anything in `global` or another project's scope.
- **Personal** (`retained share --personal URL`, this user's own machines): records in `global` (any
  kind but checkpoint, preferences included); nothing of any project.
- A purge of a shared record becomes a purge request: the team tombstones the lines everywhere.
A shared copy is filed under the project's key (a path means nothing on a teammate's machine), and
wlog.share_copy redacts its free text again before it is sealed into the writer log.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import records
from ..errors import UsageError
from ..project import canonical_key, find_root, identity
from . import git as team_git
from . import state

# The sync and what only it needs (signing, the writer logs, the mirror) are imported in the functions
# that sync: every command of the CLI imports this module (through team_cli), and they cost each one
# +24 ms (`retained search --words`, median of 15 fresh processes, measured) that only share, sync and
# status use.
if TYPE_CHECKING:
    from ..log import Log
    from .sync import PurgeRequest, SyncResult


SHARED_KINDS = ("decision", "convention", "fact", "todo")
#: Fields a write sets with --private / --shared (MCP: private / shared).
PRIVATE_FIELD, SHARED_FIELD = "private", "shared"
#: Seconds a background sync may spend in git in all.
BACKGROUND_BUDGET = 20.0


# -- what of the store team memory uses --------------------------------------------------------------------
# The index and the appender sit in layers above team memory (docs/ARCHITECTURE.md): this module names them
# only by the calls it makes of them, so that even its type hints point down. retained.store.Store is a SharingStore.
class TeamIndex(Protocol):
    def team_ids(self) -> list[str]: ...  # records that came from a writer log
    def refused(self) -> dict[int, str]: ...  # lines their ref may not carry, by offset
    def open_forks(self) -> list[dict[str, Any]]: ...  # conflicts no correction settled yet


class RecordAppender(Protocol):
    def append_record(self, record: dict[str, Any], *, keep_clock: bool = False) -> dict[str, Any]: ...


class SharingStore(Protocol):
    """A store's folder, its log and index, its refresh of the index, the scopes of a project's checkouts,
    and its one way to append."""

    @property
    def directory(self) -> Path: ...
    @property
    def log(self) -> Log: ...
    @property
    def index(self) -> TeamIndex: ...
    def refresh(self) -> list[str]: ...
    def project_scopes(self, scopes: list[str] | None) -> list[str] | None: ...
    def appending(self) -> AbstractContextManager[RecordAppender]: ...


# -- which project, which remote ----------------------------------------------------------------------
def project_here(cwd: str | os.PathLike[str] | None = None) -> tuple[str, Path]:
    """(project key, checkout root) of the git checkout at `cwd`; a UsageError outside one."""
    root = find_root(str(cwd or os.getcwd()))
    ident = identity(root) if root is not None else None
    if root is None or ident is None:
        raise UsageError("not inside a git checkout: team memory is shared per project, through its git remote",
                         hint="cd into the project's checkout, or use `retained share --personal URL` for your own machines")
    return ident["key"], Path(root)


def is_url(name: str) -> bool:
    """Whether `--remote` names a URL or a path rather than a remote of the checkout."""
    return "://" in name or name.startswith(("/", "~", ".")) or (":" in name and "@" in name.split(":", 1)[0])


def remote_url(root: Path, remote: str | None) -> str:
    """The URL of `remote` (a remote's name in the checkout, default origin, or a URL or path)."""
    name = remote or "origin"
    if is_url(name):
        return os.path.expanduser(name) if name.startswith("~") else name
    try:
        proc = subprocess.run(["git", "-C", str(root), "remote", "get-url", name], capture_output=True, text=True,
                              timeout=10, env=team_git.environment())
    except (OSError, subprocess.SubprocessError) as e:
        raise UsageError(f"git could not be run: {e}", hint="install git, then run `retained share` again") from None
    url = proc.stdout.strip()
    if proc.returncode != 0 or not url:
        raise UsageError(f"this checkout has no git remote named {name!r}",
                         hint="pass --remote NAME (a remote of this checkout) or --remote URL")
    return url


# -- the boundary -------------------------------------------------------------------------------------
def _local_records(store: SharingStore) -> Iterator[dict[str, Any]]:
    """Every readable record of the store's own log, in log order (tombstones left out)."""
    for line in store.log.lines():
        try:
            rec = records.parse_line(line.raw)
        except records.BadLine:
            continue
        if not records.is_tombstone(rec):
            yield rec


def _is_private(rec: dict[str, Any]) -> bool:
    return rec.get(PRIVATE_FIELD) is True


def select(store: SharingStore, key: str) -> tuple[list[dict[str, Any]], list[PurgeRequest]]:
    """The local records that leave the machine for `key` (a project key, or state.PERSONAL), as the
    copies a sync publishes, and the purges of shared records as requests. Log order.

    Whether a record leaves follows the record itself, never what it corrects or retracts: its own
    scope (the project's scopes; `global` for personal) and flags (`private`) decide, whatever its
    target. A correction of a shared record filed in `global` stays here; one filed in the project is
    shared as its target was; a retraction leaves when it is filed in the project and names shared
    records (only those)."""
    from .sync import PurgeRequest  # lazy: +24 ms on every CLI command (see the top)

    store.refresh()
    personal = key == state.PERSONAL
    scopes = {records.GLOBAL_SCOPE} if personal else set(store.project_scopes([key]) or []) | {key}
    teammates = set(store.index.team_ids())  # records that came from a writer log: shared already
    shared: set[str] = set()
    out: list[dict[str, Any]] = []
    purges: list[PurgeRequest] = []
    for rec in _local_records(store):
        kind, rid = rec["kind"], rec["id"]
        mine = rec.get("scope", records.GLOBAL_SCOPE) in scopes
        if kind == records.FORGET_KIND:
            if rec.get("action") == "purge":
                # Every id it purged (their lines are tombstones here now): the sync lists only those a
                # writer's log holds, so an id the team never had does not leave the machine. A purge
                # carries ids and hashes, never content: a purge of a shared record goes wherever it is.
                purged = [p.get("id") for p in rec.get("purged") or [] if isinstance(p, dict)]
                hit = tuple(t for t in purged if isinstance(t, str))
                if hit:
                    purges.append(PurgeRequest(rid, hit, rec["ts"], rec.get("reason")))
                continue
            targets = [t for t in rec.get("targets") or [] if isinstance(t, str) and (t in shared or t in teammates)]
            if targets and mine and not _is_private(rec):
                copy = dict(rec, targets=targets)
                copy["scope"] = records.GLOBAL_SCOPE if personal else key
                out.append(copy)
            continue
        if _is_private(rec) or not mine:
            continue
        # Within the boundary, a new version of a shared record is shared as that record was: a
        # correction written without a kind of its own (a note) of a shared decision is the decision now.
        target = rec.get("supersedes")
        if _wanted(rec, personal) or (isinstance(target, str) and (target in shared or target in teammates)):
            shared.add(rid)
            out.append(dict(rec, scope=records.GLOBAL_SCOPE if personal else key))
    return out, purges


def _wanted(rec: dict[str, Any], personal: bool) -> bool:
    if rec.get(SHARED_FIELD) is True:
        return True
    if personal:
        return rec["kind"] != "checkpoint"
    return rec["kind"] in SHARED_KINDS


def leaving(store: SharingStore, shared: state.Shared) -> list[dict[str, Any]]:
    """What a sync would publish now (`retained share --dry-run`): the selected records no writer's
    log holds yet, as the copies that would leave (redacted)."""
    from . import wlog  # lazy, as the sync (see the top)
    from .mirror import Mirror

    outgoing, purges = select(store, shared.key)
    mirror = Mirror(shared.dir / state.MIRROR)
    saved = state.read_json(shared.dir / state.SYNC_FILE) or {}
    mirror.load({w: v["sha256"] for w, v in (saved.get("files") or {}).items()
                 if isinstance(v, dict) and isinstance(v.get("sha256"), str)})
    writer = state.writer_id(store.directory)
    held = mirror.holding([r["id"] for r in outgoing] + [p.id for p in purges]
                          + [t for p in purges for t in p.targets], writer)
    out = []
    for rec in outgoing:
        where = held.get(rec["id"])
        if where is not None and where[0] == writer:
            continue
        body, _ = wlog.share_copy(rec, Counter())
        # as the sync decides: a line of another writer that claims this id only stops it when it is this
        # record (published under a writer id this store had before)
        if body is not None and not (where is not None and all(where[1].rec.get(k) == body.get(k)
                                                                for k in ("ts", "kind", "text"))):
            out.append(body)
    for p in purges:
        # As the sync publishes it: only a purge of lines some writer's log holds (not tombstoned yet).
        targets = [t for t in p.targets if t in held and not held[t][1].tombstone]
        if p.id not in held and targets:
            out.append({"id": p.id, "kind": records.FORGET_KIND, "action": "purge", "targets": targets, "ts": p.ts})
    return out


# -- one sync -----------------------------------------------------------------------------------------
def sync_one(store: SharingStore, shared: state.Shared, *, budget: float | None = None, wait: float = 30.0) -> SyncResult:
    """Sync one shared project (or the personal remote) and bring the index up to date with it."""
    from . import signing  # lazy, as the sync (see the top)
    from .sync import sync

    outgoing, purges = select(store, shared.key)
    writer = state.writer_id(store.directory)
    cwd = os.getcwd() if shared.key != state.PERSONAL else None
    found = team_git.config(cwd)  # one git call: the author, and the key its head is signed with
    author = team_git.author(cwd, found)
    before = _refused(store)
    signatures = signing.Signatures(shared.dir, writer, cwd=cwd, store_dir=store.directory, git_config=found)
    result = sync(shared.dir, state.git_url(shared), writer, outgoing, purges, author=author, ref=shared.ref,
                  budget=budget, wait=wait, signatures=signatures)
    if result.restored:
        _take_back(store, result)
    store.refresh()
    # Lines a ref may not carry (fields.confined) stay in their writer's chain but are never read as
    # memory: the index leaves them out, and the sync that brought them names each once.
    for key, why in sorted(_refused(store).items()):
        if key not in before:
            result.refused.append(f"{why}: not imported")
    apart = filed_apart(shared)
    if apart and result.pulled:
        result.notes.append(apart)
    return result


def _take_back(store: SharingStore, result: SyncResult) -> None:
    """A store restored from a backup: append this machine's own records that the sync took back from
    the remote (their lines signed with this user's key) to the store's log, each keeping its id, ts,
    kind, text, scope and team clock; ids the log holds already are skipped. Says how many."""
    held = {rec["id"] for rec in _local_records(store)}
    wanted = [rec for rec in result.restored if rec.get("id") not in held]
    taken = 0
    if wanted:
        with store.appending() as app:
            for rec in wanted:
                receipt = app.append_record(rec, keep_clock=True)
                if not receipt["checks"]["append"]:
                    break
                taken += 1
    if taken:  # else its mirror only lost lines its log holds
        result.notes.append(f"took back {taken} of this machine's own records from the remote (a store restored "
                            "from a backup)")


def filed_apart(shared: state.Shared) -> str | None:
    """One line when the checkout this project was shared from now reads memory under another key than
    the one its team's records are filed under (its origin moved to another URL): what a sync pulls
    would not be shown there. None when they agree, or when there is no checkout to ask."""
    if shared.key == state.PERSONAL or not shared.checkout or not os.path.isdir(shared.checkout):
        return None
    try:
        ident = identity(shared.checkout)
    except Exception:
        return None
    here = ident["key"] if ident else None
    if here is None or canonical_key(here) == canonical_key(shared.key):
        return None
    return (f"the team's records are filed under {shared.key}, but the checkout {shared.checkout} reads memory as "
            f"{here} (its remote changed?), so its sessions do not show them: run `retained share` in it again")


def _refused(store: SharingStore) -> dict[int, str]:
    """What the index left out as lines their ref may not carry, as it stands (the caller refreshed it)."""
    try:
        return store.index.refused()
    except Exception:  # the derived index: the sync's own outcome still stands
        return {}


def sync_all(store: SharingStore, *, budget: float | None = None, wait: float = 30.0) -> list[tuple[state.Shared, SyncResult]]:
    return [(s, sync_one(store, s, budget=budget, wait=wait)) for _, s in sorted(state.shared(store.directory).items())]


def status(store_dir: Path) -> list[dict[str, Any]]:
    """Per shared project (and the personal remote): what doctor and the page show. Files only."""
    from .sync import status as sync_status  # lazy, as the sync (see the top)

    out = []
    for key, s in sorted(state.shared(store_dir).items()):
        try:
            writer = state.writer_id(store_dir)
            found = sync_status(s.dir, writer)
        except Exception as e:  # a damaged state file: say so, never fail doctor
            found = {"last": None, "writers": [], "pending": 0, "error": str(e)}
        last = found.get("last") or {}
        out.append({"project": key, "remote": s.remote, "ref": s.ref, "since": s.since,
                    "last_sync": last.get("at"), "last_ok": last.get("ok"), "last_error": last.get("error"),
                    "writers": found.get("writers", []), "pending": found.get("pending", 0),
                    "pull_only": bool(last.get("pull_only")), "filed_apart": filed_apart(s),
                    "signed": _signed(s.dir)})
    return out


def _signed(team_dir: Path) -> dict[str, dict[str, Any]]:
    """signing.status of a project's team directory; {} when its pin file cannot be read."""
    from . import signing  # lazy, as the sync (see the top)

    try:
        return signing.status(team_dir)
    except Exception:
        return {}


def team_status(store_dir: Path, store: SharingStore | None) -> list[dict[str, Any]]:
    """`status` plus each project's open conflicts (forks) from the index of an open store."""
    out = status(store_dir)
    forks: list[dict[str, Any]] = []
    if store is not None and out:
        try:
            forks = store.index.open_forks()
        except Exception:
            forks = []
    shared = state.shared(store_dir)
    for t in out:
        if store is not None and t["project"] in shared:
            # records selected for sharing that no sync has published yet count as pending too
            with contextlib.suppress(Exception):
                t["pending"] += sum(1 for r in leaving(store, shared[t["project"]]) if r.get("action") != "purge")
        t["conflicts"] = sum(1 for f in forks if t["project"] == state.PERSONAL and f["scope"] == records.GLOBAL_SCOPE
                             or f["scope"] == t["project"])
    return out
