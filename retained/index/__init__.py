"""The index: a SQLite FTS5 database derived from the log, caught up on every use, rebuildable at any time.

It stores where each record sits in the log (line, offset, length), the columns searches filter
on, the supersede links, and the problems (corrupt lines, chain breaks) it met while reading the
log. It never holds anything the log does not: delete it and it is rebuilt from the log.

Every SQL statement of retained lives in this package, each in a named function:
  schema.py    the file: connect, the migrations (MIGRATIONS), the read-only copy in memory
  sources.py   the logs the index reads, where it stands in each, and how a second log is added
  catchup.py   log lines into the tables: rows, supersede links, retractions, counts, problems
  repair.py    full-text damage repaired in place, compaction, the index side of a purge
  filters.py   the conditions reads share (visible, scopes, kind, as of a time)
  queries.py   the named read queries
  search.py    query_terms / quote_query / phrase_query and the ranked full-text queries
  vectors.py   the vectors table (the semantic tier)
  kept.py      vectors kept by (model, text hash) in a file of their own, which outlives the index
`Index` below is what the rest of retained calls: one connection and one lock shared by a
server's threads, the catch-up and its fast path, and one method per named query.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from typing import Any

    from ..log import Log

import importlib

from ..errors import StoreError
from . import catchup, queries, schema, search
from .schema import INDEX_NAME
from .search import STOPWORDS, phrase_query, query_terms, quote_query
from .sources import KEY_BITS, Source, load_state, local, numbered, stale, unchanged

__all__ = ["INDEX_NAME", "STOPWORDS", "Index", "phrase_query", "query_terms", "quote_query"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Later:
    """A module of this package imported at the first call of one of its functions: repair, vectors
    and kept serve damage, purges and the semantic tier, which the hook and a server's opening replies
    never need. Only functions are reached through it (each attribute is a function called later)."""

    def __init__(self, name: str) -> None:
        self._module = f"{__name__}.{name}"

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        def later(*args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(self._module), attr)(*args, **kwargs)

        later.__name__ = attr
        return later


if TYPE_CHECKING:
    from . import repair, vectors
    from .background import Follower
    from .kept import Kept
else:
    repair, vectors = _Later("repair"), _Later("vectors")


def text_hash(text: str) -> bytes:
    """kept.text_hash, without importing kept."""
    from .kept import text_hash as of  # lazy: +1.9 ms on the session-start hook (measured), which keeps no vectors

    return of(text)


def _on_db(fn: Callable[Concatenate[sqlite3.Connection, _P], _T]) -> Callable[Concatenate[Index, _P], _T]:
    """A method of Index that runs `fn` (a named query of this package) on the connection, under the lock."""

    def method(self: Index, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with self._lock:
            return fn(self._conn(), *args, **kwargs)

    functools.update_wrapper(method, fn, assigned=("__name__", "__doc__"), updated=())
    return method


def _remembered(fn: Callable[Concatenate[sqlite3.Connection, _P], _T]) -> Callable[Concatenate[Index, _P], _T]:
    """`_on_db` for a question every read asks of tables only the logs fill (damaged lines, a project's
    other scopes, whether any fork exists): the answer is remembered while this process's catch-up
    found every log as it left it, on the same index file, and this connection changed nothing
    (`total_changes`). Before any catch-up nothing is remembered. Arguments must be lists, dicts or
    hashable; a list answer is returned as a copy."""

    def method(self: Index, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with self._lock:
            db = self._conn()
            if not self._known:
                return fn(db, *args, **kwargs)
            state = (id(db), self._ino, db.total_changes, tuple(self._known.items()))
            if state != self._memo_state:
                self._memo.clear()
                self._memo_state = state
            key = (fn.__name__, *(_frozen(a) for a in args), *((k, _frozen(v)) for k, v in sorted(kwargs.items())))
            if key not in self._memo:
                self._memo[key] = fn(db, *args, **kwargs)
            found = self._memo[key]
            return list(found) if isinstance(found, list) else found  # type: ignore[return-value]

    functools.update_wrapper(method, fn, assigned=("__name__", "__doc__"), updated=())
    return method


def _frozen(value: object) -> object:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return value


def _out_of_space(e: BaseException) -> bool:
    """A full disk (or a file-size limit) as SQLite reports it."""
    text = str(e).lower()
    return "full" in text or "too large" in text or getattr(e, "sqlite_errorname", "") in ("SQLITE_FULL", "SQLITE_IOERR_WRITE")


def _let_go_of_the_wal(db: sqlite3.Connection) -> None:
    """After a failed transaction, give the WAL's space back (its frames are of nothing committed)."""
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass


class Index:
    """One connection, guarded by a lock so that server worker threads can share it."""

    def __init__(self, directory: Path, log: Log, *, read_only: bool = False) -> None:
        self.path = directory / INDEX_NAME
        self.log_sources = [local(log)]  # the store's own log, then teammates' (see sources.py)
        # () -> [(source name, writer, Log, scope)] of teammates' logs to read beside the local one (Store sets it)
        self.team_logs: Callable[[], list[tuple[str, str, Log, str]]] | None = None
        self._team_names: tuple[str, ...] = ()
        self._replaced_one = False
        self._sources_ino: int | None = -1  # the index file whose sources were last checked
        self.read_only = read_only
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._ino: int | None = None
        # per source: (log size, log inode, log mtime, index inode) when this process last caught up
        self._known: dict[str, tuple[int, int, int, int | None]] = {}
        self._seen_scopes: set[str] = set()  # scopes already noted in scope_keys by this process
        self._memo: dict[tuple[object, ...], Any] = {}  # what `_remembered` queries answered, ...
        self._memo_state: tuple[object, ...] | None = None  # ... for the index as it stood then
        self.rebuilt: str | None = None  # why the index was found damaged and rebuilt, until a read says so
        self.rebuilt_in_place = False  # ... and whether only the full-text table was, from the records table
        self._directory = directory
        self._kept: Kept | None = None
        self._follower: Follower | None = None  # for a process that catches up before every read

    @property
    def kept(self) -> Kept:
        """Vectors by (model, text hash), which outlive a rebuild (kept.py): opened at first use."""
        if self._kept is None:
            from .kept import Kept  # lazy, as in `text_hash`

            self._kept = Kept(self._directory, read_only=self.read_only)
        return self._kept

    # -- connection ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        """The connection, reopened when the index file was deleted or replaced underneath us."""
        if self.read_only:
            if self._db is None:
                self._db = schema.connect_read_only(self.path)
            return self._db
        try:
            ino: int | None = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        if self._db is None or ino != self._ino:
            if self._db is not None:
                self._db.close()
                self._db = None
            try:
                self._db = schema.connect(self.path)
            except sqlite3.DatabaseError:
                # Not a database (or damaged beyond use): it is derived, so start it afresh.
                schema.discard_files(self.path)
                self._db = schema.connect(self.path)
            self._ino = os.stat(self.path).st_ino
            self._known = {}  # a new file may reuse the old inode number
            self._seen_scopes = set()
        return self._db

    def close(self) -> None:
        if self._follower is not None:
            self._follower.stop()  # a catch-up under way finishes first
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
        if self._kept is not None:
            self._kept.close()

    # -- catching up with the logs --------------------------------------------------------------
    def catch_up_in_background(self) -> None:
        """From now on `catch_up_later` leaves the catch-up to a thread (background.py): for a process
        whose every read and write catches up first, as the MCP server's tools do."""
        if self._follower is None and not self.read_only:
            from .background import Follower  # lazy: +0.4 ms on every hook that opens a store (measured)

            self._follower = Follower(self.catch_up)

    def catch_up_later(self) -> bool:
        """Have the background thread catch up now; False (nothing done) unless it is on."""
        if self._follower is None:
            return False
        self._follower.poke()
        return True

    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index every complete log line not yet indexed. Returns how many lines were read.

        Cheap when there is nothing new: two stats, and no query when this process indexed last.
        An index SQLite calls damaged ('database disk image is malformed', a full-text table that
        cannot be opened) is derived data. First the full-text table is rebuilt in place from the
        records table, which keeps the vectors and the files other processes have open; if the
        damage is elsewhere, the files are discarded and the index is rebuilt from the log. `rebuilt`
        and `rebuilt_in_place` say why and how (the next read reports it). Busy or locked is not damage.
        """
        try:
            return self._catch_up(progress)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as e:
            if self.read_only:
                raise
            damage = str(e)
        with self._lock:
            if self._repair_fts():
                try:
                    n = self._catch_up(progress)
                    self.rebuilt, self.rebuilt_in_place = damage, True
                    return n
                except sqlite3.OperationalError:
                    raise
                except sqlite3.DatabaseError:
                    pass
            schema.discard_files(self.path)  # _conn() sees the file gone and opens a new one
            self.rebuilt, self.rebuilt_in_place = damage, False
        return self._catch_up(progress)

    def _repair_fts(self) -> bool:
        """`repair.repair_fts` on a new connection (no full-text table cached from before); False,
        with nothing changed, when it fails."""
        try:
            if self._db is not None:
                self._db.close()
                self._db = None
            repair.repair_fts(self._conn())
        except sqlite3.DatabaseError:
            return False
        self._known = {}
        return True

    def _catch_up(self, progress: Callable[[int, int], None] | None) -> int:
        with self._lock:
            db = self._conn()
            if self._find_sources(db):
                self._known = {}
                return catchup.rebuild(db, self.log_sources, self._seen_scopes, progress)
            n = 0
            for _ in range(2):  # a log found replaced clears every log's rows: read them all again
                self._replaced_one = False
                n += sum(self._catch_up_source(db, source, progress) for source in self.log_sources)
                if not self._replaced_one or len(self.log_sources) == 1:
                    break
            return n

    def _find_sources(self, db: sqlite3.Connection) -> bool:
        """Bring `log_sources` in line with the teammates' logs there are now. True when the index holds
        rows of a log no longer read (sharing was turned off): then it is rebuilt from the rest."""
        logs = self.team_logs() if self.team_logs is not None else []
        names = tuple(f"{name}\0{scope}" for name, _, _, scope in logs)
        if names == self._team_names and len(self.log_sources) == len(names) + 1 and self._ino == self._sources_ino:
            return False  # as this process last found them (a new or replaced index file is looked at once)
        self._sources_ino = self._ino
        team = numbered(db, logs) if logs else []
        self.log_sources = [self.log_sources[0], *team]
        self._team_names = names
        return stale(db, self.log_sources)

    def log_of(self, line: int) -> Log:
        """The log a row's bytes are in (its offset and length point into it)."""
        base = (line >> KEY_BITS) << KEY_BITS
        for source in self.log_sources:
            if source.base == base:
                return source.log
        return self.log_sources[0].log

    def writer_of(self, line: int) -> str | None:
        """The teammate whose log holds this row (None: the store's own log)."""
        base = (line >> KEY_BITS) << KEY_BITS
        return next((s.writer for s in self.log_sources if s.base == base), None)

    def _catch_up_source(self, db: sqlite3.Connection, source: Source,
                         progress: Callable[[int, int], None] | None) -> int:
        stat = source.stat()
        if self._known.get(source.name) == (*stat, self._ino):
            return 0  # this process indexed last, and the log has not changed since: no query
        state = load_state(db, source)
        if unchanged(state, stat):
            if state.get("compact"):
                self._compact(source)
            self._known[source.name] = (*stat, self._ino)
            return 0
        try:
            n, state, replaced = catchup.advance(db, source, stat, self._seen_scopes, progress)
        except BaseException:
            self._known = {}
            raise
        if replaced:
            self._known = {}  # every source's rows went: each is read again
            self._replaced_one = True
        if state["offset"] == stat[0]:
            self._known[source.name] = (stat[0], stat[1], state["log_mtime"], self._ino)
        if replaced or state.get("compact"):
            # A replaced log (a purge, or a restored copy): the old text must not live on in
            # segments, free pages or the WAL.
            self._compact(source)
        return n

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Drop everything and index every log again."""
        with self._lock:
            self._known = {}
            db = self._conn()
            try:
                return catchup.rebuild(db, self.log_sources, self._seen_scopes, progress)
            except sqlite3.Error as e:
                if not _out_of_space(e):
                    raise
                _let_go_of_the_wal(db)
                raise StoreError(f"the index could not be rebuilt: no space left for it ({e})",
                                 hint="free disk space, then run `retained reindex` again; the log is untouched "
                                      "and every record in it is safe") from None

    # -- repair, compaction, purging (repair.py) ------------------------------------------------
    def _compact(self, source: Source) -> None:
        with self._lock:
            repair.compact(self._conn(), source)

    def apply_purge(self, purged: list[dict[str, Any]], by: str, new_stat: tuple[int, int],
                    install: Callable[[], None]) -> None:
        """Bring the index in line with the local log whose purged lines became tombstones, and
        install that log (see `repair.apply_purge`); the next catch-up compacts."""
        with self._lock:
            # The purged texts' kept vectors go first (a purge that fails after this only costs model
            # calls) and again after (a vector another process kept meanwhile).
            gone = [text_hash(t) for t in repair.texts_of(self._conn(), [p["line"] for p in purged])]
            self.kept.forget(gone)
            try:
                repair.apply_purge(self._conn(), self.log_sources[0], purged, by, new_stat, install)
            finally:
                self._known = {}
            self.kept.forget(gone)

    fts_levels = _on_db(repair.fts_levels)

    # -- verify -----------------------------------------------------------------------------------
    def iter_offsets(self, source: Source | None = None) -> Iterator[tuple[int, str]]:
        """(offset, sha256) of every indexed record of one log (default: the local one) in log order,
        streamed for verify's merge (the lock is held until the walk ends)."""
        own = source or self.log_sources[0]
        with self._lock:
            yield from queries.offsets(self._conn(), own.base, own.base + (1 << KEY_BITS))

    def refused_offsets(self, source: Source | None = None) -> set[int]:
        """Offsets of one log's lines (default: the local one) the index refused as records."""
        own = source or self.log_sources[0]
        with self._lock:
            return queries.refused_offsets(self._conn(), own.base, own.base + (1 << KEY_BITS))

    # -- named queries (queries.py) -------------------------------------------------------------
    by_id = _on_db(queries.by_id)
    by_op = _on_db(queries.by_op)
    head_of = _on_db(queries.head_of)
    at_line = _on_db(queries.at_line)
    duplicate_of = _on_db(queries.duplicate_of)
    same_text = _on_db(queries.same_text)
    older_versions = _on_db(queries.older_versions)
    ts_of = _on_db(queries.ts_of)
    sources = _on_db(queries.sources)
    counts = _on_db(queries.counts)
    unreadable = _remembered(queries.unreadable)
    current_count = _on_db(queries.current_count)
    kind_counts = _on_db(queries.kind_counts)
    has_scope = _on_db(queries.has_scope)
    max_seq = _on_db(queries.max_seq)
    written_in_session = _on_db(queries.written_in_session)
    newest_rows = _on_db(queries.newest_rows)
    list_page = _on_db(queries.list_page)
    newest_current = _on_db(queries.newest_current)
    last_clock = _on_db(queries.last_clock)
    scope_names = _on_db(queries.scope_names)
    scope_table = _on_db(queries.scope_table)
    same_project = _remembered(queries.same_project)
    retracted_ids = _on_db(queries.retracted_ids)
    problems = _on_db(queries.problems)
    refused = _on_db(queries.refused)
    export_rows = _on_db(queries.export_rows)
    markdown_rows = _on_db(queries.markdown_rows)
    browse = _on_db(queries.browse)
    facets = _on_db(queries.facets)
    chain = _on_db(queries.chain)
    forget_records = _on_db(queries.forget_records)
    scope_summary = _on_db(queries.scope_summary)
    exact_duplicate_groups = _on_db(queries.exact_duplicate_groups)
    long_chains = _on_db(queries.long_chains)
    old_counts = _on_db(queries.old_counts)
    in_log_order = _on_db(queries.in_log_order)
    current_texts = _on_db(queries.current_texts)
    team_ids = _on_db(queries.team_ids)
    has_forks = _remembered(queries.has_forks)
    conflicts = _on_db(queries.conflicts)
    open_forks = _on_db(queries.open_forks)

    # -- full-text search (search.py) -----------------------------------------------------------
    ranked = _on_db(search.ranked)
    rows_for_lines = _on_db(search.rows_for_lines)
    similar_candidates = _on_db(search.similar_candidates)
    known_texts = _on_db(search.known_texts)
    containing = _on_db(search.containing)

    # -- vectors (vectors.py) -------------------------------------------------------------------
    vectors_pending_count = _on_db(vectors.pending_count)
    vectors_missing_count = _on_db(vectors.missing_count)
    vectors_pending = _on_db(vectors.pending)
    drop_other_vectors = _on_db(vectors.drop_others)
    put_vectors = _on_db(vectors.put)
    has_vectors = _on_db(vectors.has_any)

    def vector_span(self) -> tuple[int, int, int | None]:
        """(lowest vid, highest vid, index inode): two rowid look-ups that tell a cache what changed."""
        with self._lock:
            return (*vectors.span(self._conn()), self._ino)

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        """(count, largest vid, index inode) of this model's vectors: tells a cache whether it is stale."""
        with self._lock:
            return (*vectors.stats(self._conn(), model), self._ino)

    def vectors_after(self, model: str, vid: int) -> int:
        """How many vectors of `model` have a vid past `vid` (what `vectors_page` will read from there)."""
        with self._lock:
            return vectors.count_after(self._conn(), model, vid)

    def vectors_page(self, model: str, vid: int, limit: int) -> tuple[list[int], list[bytes], int, int]:
        """(lines, float16 blobs, dim, last vid) of up to `limit` vectors of `model` after `vid`, by vid;
        a page stops where the width changes (the reader then starts afresh)."""
        with self._lock:
            found = vectors.page(self._conn(), model, vid, limit)
        return vectors.one_width(found, vid)
