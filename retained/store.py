"""The store: the one thing the edges (CLI, server, hooks) call for memory operations.

The log is written first and is the truth; the index is brought up to date from the log before
every read (and before a write that needs it), so records appended by this process, another process
or another program show up without a restart, and a write costs no index transaction.

Every append goes through `appending()` (retained/appender.py): the locks, the tail, the index caught
up, each record proven. What a write checks first lives in writes.py, how reads shape their answers in
reads.py, and verify's walk in verify.py; this class decides the order of the steps.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import reads, records
from .errors import StoreError, UsageError
from .index import Index, query_terms
from .log import LOG_NAME, Log
from .paths import has_team, read_only_requested, unreadable_reason, unwritable_reason
from .reads import DEFAULT_K, MAX_K, MAX_LIST, check_int, parse_as_of

# The session-start hook opens a Store and only reads: what writes, forgets, searches, verifies or
# embeds is imported where it is used. Measured as the median of 7 fresh processes, each import after
# what that hook loads: forget +15 ms (with writes and redact), the model's module +10 ms, writes +2.4 ms,
# ranking +3 ms, verify +1.4 ms, appender +1.2 ms. These types are for the hints only.
if TYPE_CHECKING:
    from .appender import Appender
    from .embed import Semantic

__all__ = ["DEFAULT_K", "INLINE_EMBED", "MAX_K", "MAX_LIST", "Store", "parse_as_of"]

INLINE_EMBED = 256  # a search embeds up to this many new records itself; more go to a background thread


def no_store_at(directory: object) -> StoreError:
    """The error of a read on a store that is not there (only a write creates one)."""
    return StoreError(f"no store at {directory}", hint="write a record first, or pass the right --dir")


class Store:
    """A store directory: log.jsonl (truth), index.sqlite3 (derived), quarantine/ (torn fragments)."""

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True,
                 read_only: bool | None = None) -> None:
        self.directory = Path(directory).expanduser().absolute()
        self._dir_name = str(self.directory)
        # Read-only: no directory, log, lock or index file is created or changed (the index is copied
        # into memory and catches up there), and writes are refused.
        self.read_only = read_only_requested() if read_only is None else read_only
        if not self.directory.exists():
            if not create or self.read_only:
                raise no_store_at(self.directory)
            try:
                # exist_ok: two processes (Claude Code and Codex starting their servers) may race here.
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create store directory {self.directory}: {e.strerror or e}",
                                 hint="pass --dir or set RETAINED_DIR to a writable place") from None
        elif not self.directory.is_dir():
            raise StoreError(f"{self.directory} is not a directory", hint="pass --dir pointing at a directory")
        self._open_as_this_user()
        self.log = Log(self.directory / LOG_NAME)
        self.log.check_safe()
        self.index = Index(self.directory, self.log, read_only=self.read_only)
        self.index.team_logs = self._team_logs  # issue 19: teammates' logs, read beside this one
        self._team_log_objects: dict[str, Log] = {}
        self._write_lock = threading.Lock()
        self._sem: Semantic | None = None

    def _team_logs(self) -> list[tuple[str, str, Log, str]]:
        if not has_team(self._dir_name):  # nothing shared: the hook and serve never import team/
            return []
        from .team.readable import readable_logs  # lazy: +0.9 ms, and only a store that shares needs it

        logs = self._team_log_objects
        return [(n, w, logs.get(n) or logs.setdefault(n, Log(path)), scope)
                for n, w, path, scope in readable_logs(self._dir_name)]

    def close(self) -> None:
        if self._sem is not None:
            self._sem.stop()
        self.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_as_this_user(self) -> None:
        """A store this user cannot write (someone else's, a read-only disk) is opened read-only: reads
        work, the first read's warnings say so once, writes are refused with the reason. A store this
        user cannot even read is a clear error, not a crash."""
        self.read_only_reason: str | None = None
        self._notice: str | None = None
        reason = unreadable_reason(self.directory)
        if reason is not None:
            raise StoreError(f"cannot read the store at {self.directory}: {reason}",
                             hint="run as the store's owner, or pass --dir for a store of your own")
        if not self.read_only:
            reason = unwritable_reason(self.directory)
            if reason is not None:
                self.read_only, self.read_only_reason = True, reason
                self._notice = (f"the store at {self.directory} is read-only for this user ({reason}): "
                                "opened read-only, so memory can be read but not written")

    def check_writable(self) -> None:
        """Raise the reason this store refuses writes (read-only for this user, or RETAINED_READ_ONLY)."""
        if self.read_only and self.read_only_reason:
            raise StoreError(f"cannot write: the store at {self.directory} is read-only for this user "
                             f"({self.read_only_reason})",
                             hint="run as the store's owner, or pass --dir for a store of your own")
        if self.read_only:
            raise StoreError(f"the store at {self.directory} is open read-only (RETAINED_READ_ONLY is set)",
                             hint="unset RETAINED_READ_ONLY to write")

    # -- keeping the index current ----------------------------------------------------------------
    def refresh(self) -> list[str]:
        """Bring the index up to date with the log. Returns what a read or write must say about it:
        the read-only notice (once), a repair of a damaged index, or a failure to catch up (which
        degrades to this warning, never to an error: the index is derived)."""
        return self._refresh()[0]

    def _refresh(self) -> tuple[list[str], Exception | None]:
        notice, self._notice = self._notice, None  # said once, with the first read
        said = [notice] if notice else []
        try:
            self.index.catch_up()
        except Exception as e:
            return [*said, f"index could not catch up with the log ({e}); run `retained reindex`"], e
        rebuilt, self.index.rebuilt = self.index.rebuilt, None
        if rebuilt:
            said.append(reads.rebuilt_note(rebuilt, in_place=self.index.rebuilt_in_place))
        return said, None

    def _refresh_read(self) -> list[str]:
        """`refresh`, plus what a read must never hide: how many records could not be read (I2)."""
        warnings = self.refresh()
        note = self.damage_note()
        return warnings + ([note] if note else [])

    def damage_note(self) -> str | None:
        """'2 records could not be read …: run `retained verify`', or None when every line reads."""
        try:
            return reads.unreadable_note(self.index.unreadable())
        except sqlite3.Error:
            return None

    def known_scopes(self) -> list[str]:
        """The scopes the index has met (they hold or held records); [] when the index cannot say."""
        try:
            self.index.catch_up()
            return self.index.scope_names()
        except Exception:  # the index is derived: a read goes on, and its refresh says what is wrong
            return []

    def read_scopes(self, scope: str | None, project: str | None) -> tuple[list[str] | None, list[str]]:
        """A read's `scope` argument (any edge's) as the scopes to read, and what the read must say of
        them (see reads.resolve_read_scopes). One resolver for the CLI, MCP, hooks and page."""
        return reads.resolve_read_scopes(scope, project, self.known_scopes)

    def project_scopes(self, scopes: list[str] | None) -> list[str] | None:
        """The scopes a read asked for, plus those of other worktrees and clones of the same project."""
        return reads.with_other_checkouts(self.index, scopes)

    # -- appending ----------------------------------------------------------------------------------
    @contextmanager
    def appending(self) -> Iterator[Appender]:
        """The one way to append: hold this store's thread lock and the log's file lock, with the tail
        read (a torn fragment quarantined) and the index caught up, and yield an `Appender` whose
        appends chain onto each other. Refuses a store that is read-only."""
        from .appender import Appender  # lazy: +1.2 ms on the session-start hook, measured (see the top)

        self.check_writable()
        self.log.check_safe()
        with self._write_lock, self.log.lock():
            tail = self.log.tail()
            notes, error = self._refresh()
            yield Appender(self.log, self.index, tail, notes, error)

    def wait_idle(self, timeout: float) -> bool:
        """Let a write under way finish (waiting up to `timeout` seconds) and keep any other from
        starting: for a process about to exit. False when the write still runs at the timeout."""
        return self._write_lock.acquire(timeout=timeout)

    # -- writing ------------------------------------------------------------------------------------
    def write(
        self,
        text: str,
        *,
        kind: str = "note",
        scope: str | None = None,
        source: str | None = None,
        supersedes: str | None = None,
        client_op_id: str | None = None,
        fields: dict[str, Any] | None = None,
        default_scope: str | None = None,
        resolves: list[str] | None = None,
    ) -> dict[str, Any]:
        """Append one record and prove it (I1). Returns the receipt.

        `resolves` (issue 19): further current versions this correction supersedes besides `supersedes`
        (the versions of a fork, which two writers made concurrently); the record keeps them in `resolves`.

        Without `scope`, a correction (`supersedes`) keeps the scope of the record it corrects, and any
        other write goes to `default_scope` (the edges pass the current project; None means global).
        An exact duplicate of a current record (same normalised text, kind and scope) is not written
        again: the receipt names the existing record with `deduplicated: true`.
        """
        from . import writes  # lazy: +2.4 ms on the session-start hook, measured (see the top)

        self.check_writable()
        kind, extra = writes.check_args(text, kind=kind, scope=scope, default_scope=default_scope, source=source,
                                  client_op_id=client_op_id, supersedes=supersedes, fields=fields)
        text, source, extra, scope, client_op_id, found = writes.redacted(text, source, extra, scope=scope,
                                                                          client_op_id=client_op_id)
        with self.appending() as app:
            warnings = app.warnings + app.index_notes
            scope, existing = writes.settle(self.index, app, text, kind, scope=scope, default_scope=default_scope,
                                            supersedes=supersedes, client_op_id=client_op_id, warnings=warnings)
            if existing is not None:
                return existing
            record = writes.fields_of(extra, scope=scope, source=source, supersedes=supersedes,
                                      client_op_id=client_op_id)
            if resolves:
                record["resolves"] = writes.check_resolves(self.index, supersedes, resolves)
            receipt = app.append(record, kind, text, warnings)
        # The index takes the new line at once (outside the lock): the next write's duplicate check
        # costs nothing more, and the index's note of the log (size, time) is exact, so that a byte
        # changed in place later is noticed by the next read (I2). The server's has a thread do it (background.py).
        receipt["warnings"] += ([] if self.index.catch_up_later() else self.refresh()) + writes.redaction_note(found)
        return receipt

    def checkpoint(self, label: str, summary: str | None = None, *, scope: str | None = None,
                   fields: dict[str, Any] | None = None, client_op_id: str | None = None,
                   default_scope: str | None = None) -> dict[str, Any]:
        """A checkpoint is a record of kind `checkpoint`: the label, then the summary."""
        records.check_text(label, "label")
        if "\n" in label.strip():
            raise UsageError("label must be one line", hint="put the details in the summary")
        text = label.strip() if not summary or not summary.strip() else f"{label.strip()}\n\n{summary.strip()}"
        extra = dict(fields or {})
        return self.write(text, kind="checkpoint", scope=scope, fields=extra, client_op_id=client_op_id,
                          default_scope=default_scope)

    # -- forgetting (retained/forget.py) ------------------------------------------------------------
    def forget(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Retract records: an appended `forget` record leaves them (and the chain they head) out of
        search, list, brief and recall; `get` still returns them, marked. Reversible with `unforget`."""
        from . import forget  # lazy: +15 ms on the session-start hook, measured (see the top)

        self.check_writable()
        return forget.retract(self.appending, ids, reason)

    def unforget(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Undo a retraction: an appended record brings the records back into every read."""
        from . import forget  # lazy, as in `forget`

        self.check_writable()
        return forget.retract(self.appending, ids, reason, undo=True)

    def purge(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Remove the records' bytes from every file of the store (irreversible; a person's call, never
        an agent's). Their lines become tombstones and the chain still verifies."""
        from . import forget  # lazy, as in `forget`

        self.check_writable()
        return forget.purge(self.appending, ids, reason)

    # -- reading ------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        scopes: list[str] | None = None,
        kind: str | None = None,
        k: int = DEFAULT_K,
        max_tokens: int | None = None,
        include_superseded: bool = False,
        as_of: str | None = None, notes: list[str] | None = None,  # notes: what the caller says first
    ) -> dict[str, Any]:
        """Search by words and, with the semantic tier on, by meaning; best first. Says what it did not
        return (I2) and whether meaning was used (`semantic`: "on" or "off: <reason>").

        Ranking: records holding an exact identifier, path, error code or version from the query come
        first; then a blend of meaning and words whose words' weight follows their evidence (retained/ranking.py).
        Each match resolves to the current record of its supersede chain unless `include_superseded`;
        `as_of` answers as the store stood then.
        """
        return self.search_scored(query, scopes=scopes, kind=kind, k=k, max_tokens=max_tokens,
                                  include_superseded=include_superseded, as_of=as_of, notes=notes)[0]

    def search_scored(self, query: str, *, scopes: list[str] | None = None, kind: str | None = None,
                      k: int = DEFAULT_K, max_tokens: int | None = None, include_superseded: bool = False,
                      as_of: str | None = None, inline_embed: int | None = None,
                      need_vectors: bool = False,
                      notes: list[str] | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """search(), plus per hit id its cosine to the query (None without a vector) and its tier (how many
        of the query's identifiers it holds verbatim): what recall's relevance bar needs. `inline_embed`:
        how many new records this search may embed itself; `need_vectors`: search by words alone
        rather than embed a store that has no vectors yet."""
        from . import ranking  # lazy: ranking and the model's module, +13 ms on the session-start hook, measured

        if not isinstance(query, str):
            raise UsageError("query must be a string", hint="pass the words to look for")
        k = check_int(k, "k", 1, MAX_K)
        if max_tokens is not None:
            max_tokens = check_int(max_tokens, "max_tokens", 1, 1_000_000)
        if kind is not None:
            kind = records.check_kind(kind)
        as_of = parse_as_of(as_of)
        warnings = list(notes or []) + self._refresh_read() + reads.kind_note(self.index, kind)
        scopes = self.project_scopes(scopes)
        terms = query_terms(query)
        filters = {"scopes": scopes, "kind": kind, "as_of": as_of, "include_superseded": include_superseded}
        sem = self.semantic()
        semantic, qvec = ranking.meaning_query(sem, query, INLINE_EMBED if inline_embed is None else inline_embed,
                                               warnings, need_vectors)
        if not terms and qvec is None:
            return reads.no_words(semantic, warnings), {}
        found = ranking.rank(self.index, sem, query, terms, qvec, filters, k)
        result, scored = reads.search_result(found, as_of=as_of, semantic=semantic, by_meaning=qvec is not None,
                                             max_tokens=max_tokens, warnings=warnings)
        reads.mark_conflicts(self.index, result["hits"], result["warnings"])  # issue 19: forks
        return result, scored

    def semantic(self) -> Semantic:
        """This store's semantic tier (created on first use; nothing is loaded until it must be)."""
        if self._sem is None:
            from .embed import Semantic  # lazy: +10 ms on the session-start hook, measured (see the top)

            self._sem = Semantic(self.index)
        return self._sem

    def get(self, ids: list[str] | None = None, *, limit: int = 20, scopes: list[str] | None = None) -> dict[str, Any]:
        """Records exactly as they stand in the log (unknown fields included), read from the log itself.
        Without ids: the newest records of `scopes` (every scope when None)."""
        warnings = self._refresh_read()
        missing: list[str] = []
        held = 0
        if ids is None:
            rows, held = self.index.newest_rows(check_int(limit, "limit", 1, MAX_LIST), self.project_scopes(scopes))
        else:
            rows = []
            for rid in reads.check_ids(ids):
                row = self.index.by_id(rid)
                if row is None:
                    missing.append(rid)
                else:
                    rows.append(row)
        out, damaged = reads.read_back(self.index, self.log, rows, warnings)
        missing, damaged = reads.split_damaged(self.index, self.log, missing, damaged)
        reads.mark_conflicts(self.index, out, warnings)  # issue 19: forks
        counts = self.index.counts()
        result = {"records": out, "missing": missing, "damaged": damaged, "corrupt_lines": counts["corrupt"] + len(damaged),
                  "chain_ok": counts["corrupt"] == 0 and counts["breaks"] == 0 and not damaged,
                  "warnings": warnings}
        if ids is None:  # browsing the newest: say how many were not returned
            result["total"] = held
            result["truncated"] = held > len(rows)
        return result

    def list(
        self,
        *,
        scopes: list[str] | None = None,
        kind: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        include_superseded: bool = False,
        as_of: str | None = None,
        max_tokens: int | None = None, notes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Browse newest first in the team order: `next_cursor` (opaque) is where the next page starts, for
        `cursor`. `as_of`: as the store stood then (records written by then, superseded only by records
        written by then). `max_tokens`: a budget for the whole reply (`notes` included; `truncated`)."""
        limit = check_int(limit, "limit", 1, MAX_LIST)
        if max_tokens is not None:
            max_tokens = check_int(max_tokens, "max_tokens", 1, 1_000_000)
        as_of, after = parse_as_of(as_of), None if cursor is None else reads.parse_cursor(cursor)
        kind = None if kind is None else records.check_kind(kind)
        warnings = list(notes or []) + self._refresh_read() + reads.kind_note(self.index, kind)
        rows, total, newer = self.index.list_page(scopes=self.project_scopes(scopes), kind=kind, as_of=as_of,
                                                  include_superseded=include_superseded, after=after, limit=limit)
        result = reads.list_result(self.index, rows, total, newer, as_of=as_of, max_tokens=max_tokens,
                                   warnings=warnings)
        reads.mark_conflicts(self.index, result["records"], result["warnings"])  # issue 19: forks
        return result

    def scopes(self, project: str | None = None) -> dict[str, Any]:
        """Every scope with its current and total records and project key; `current_project` marks the
        scopes default reads of `project` take in (its own and other checkouts of the same repository)."""
        warnings = self._refresh_read()
        rows = self.index.scope_table()
        mine = set(self.project_scopes([project]) or []) if project else set()
        table = [{**r, "current_project": r["scope"] in mine} for r in rows]
        return {"records": [], "total": len(table), "returned": len(table), "truncated": False, "next_cursor": None,
                "warnings": warnings, "scopes": table}

    # -- integrity ----------------------------------------------------------------------------------
    def verify(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Recompute the whole chain (streaming, constant memory) and reconcile it with the index."""
        from .verify import verify  # lazy: +1.4 ms on the session-start hook, measured (see the top)

        return verify(self.log, self.index, self.refresh(), progress)

    def reindex(self, progress: Callable[[int, int], None] | None = None,
                embed_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Rebuild the index from the log, then give every record a vector (`embed_progress`, else
        `progress`, follows that part)."""
        self.check_writable()
        lines = self.index.rebuild(progress)
        counts = self.index.counts()
        result = {"lines_read": lines, "records": counts["records"], "corrupt_lines": counts["corrupt"],
                  "chain_breaks": counts["breaks"]}
        result.update(self.embed_all(embed_progress or progress))
        return result

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Give every record a vector of the current model now (reindex does this after rebuilding)."""
        from .embed import Unavailable  # lazy, as in `semantic`

        self.refresh()
        sem = self.semantic()
        reason = sem.off_reason()
        if reason:
            return {"embedded": 0, "semantic": f"off: {reason}"}
        started, before = time.monotonic(), sem.embedded
        try:
            n = sem.catch_up(progress=progress)
        except Unavailable as e:
            return {"embedded": 0, "semantic": f"off: {e}"}
        took = time.monotonic() - started
        new = sem.embedded - before  # the rest took the vectors kept for their texts (index/kept.py)
        return {"embedded": n, "semantic": "on", "embed_seconds": round(took, 3),
                "embed_per_second": round(n / took, 1) if took > 0 and n else 0.0,
                "model_embedded": new, "vectors_reused": n - new}
