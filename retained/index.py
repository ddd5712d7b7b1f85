"""The SQLite FTS5 index: derived from the log, caught up on every use, rebuildable at any time.

It stores where each record sits in the log (line, offset, length), the columns searches filter
on, the supersede links, and the problems (corrupt lines, chain breaks) it met while reading the
log. It never holds anything the log does not: delete it and it is rebuilt from the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

from .log import ChainState, Line, Log, Problem
from .records import FORGET_KIND, GENESIS, GLOBAL_SCOPE, BadLine, text_key
from .records import parse_line as records_parse

INDEX_NAME = "index.sqlite3"
_BATCH = 2000


def _run_script(db: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it commits first, which would break the migration's transaction.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m001_initial(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE records (
            line INTEGER PRIMARY KEY,      -- physical line number in log.jsonl (stable: the log only grows)
            seq INTEGER NOT NULL,
            id TEXT NOT NULL,
            offset INTEGER NOT NULL,
            length INTEGER NOT NULL,       -- bytes including the newline
            ts TEXT NOT NULL,
            kind TEXT NOT NULL,
            scope TEXT NOT NULL,
            source TEXT,
            supersedes TEXT,
            superseded_by TEXT,
            head INTEGER NOT NULL,         -- line of the current record of this supersede chain
            client_op_id TEXT,
            session TEXT,
            sha256 TEXT NOT NULL,
            text TEXT NOT NULL
        );
        CREATE UNIQUE INDEX records_id ON records(id);
        CREATE INDEX records_op ON records(client_op_id) WHERE client_op_id IS NOT NULL;
        CREATE INDEX records_head ON records(head);
        CREATE INDEX records_seq ON records(seq);
        CREATE INDEX records_scope ON records(scope, line);
        CREATE TABLE problems (
            line INTEGER PRIMARY KEY, offset INTEGER NOT NULL, seq INTEGER,
            kind TEXT NOT NULL, reason TEXT NOT NULL
        );
        CREATE VIRTUAL TABLE fts USING fts5(
            text, content='records', content_rowid='line',
            tokenize="porter unicode61 remove_diacritics 2"
        );
        """
    )


def _m002_scope_counts(db: sqlite3.Connection) -> None:
    """Current (not superseded) records per scope, kept up to date on insert, so the brief's and the
    list's totals cost a lookup instead of a count over the table."""
    _run_script(
        db,
        """
        CREATE TABLE scope_counts (scope TEXT PRIMARY KEY, current INTEGER NOT NULL);
        INSERT INTO scope_counts SELECT scope, COUNT(*) FROM records WHERE superseded_by IS NULL GROUP BY scope;
        CREATE INDEX records_kind ON records(kind, line)
        """,
    )


def _m003_vectors(db: sqlite3.Connection) -> None:
    """Embedding vectors (float16), one per record line, each tagged with the model that made it and the
    record's sha256, so a model change or a rewritten log never pairs a vector with the wrong text."""
    _run_script(
        db,
        """
        CREATE TABLE vectors (
            vid INTEGER PRIMARY KEY AUTOINCREMENT,  -- only grows: a process loads just the new vectors
            line INTEGER NOT NULL UNIQUE,
            model TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vec BLOB NOT NULL
        );
        CREATE INDEX vectors_model ON vectors(model, line)
        """,
    )


# A migration that adds columns filled from the log clears what was derived; catch-up then rebuilds it.
_CLEAR_DERIVED = """;
        INSERT INTO fts(fts) VALUES('delete-all');
        DELETE FROM records;
        DELETE FROM problems;
        DELETE FROM scope_counts;
        DELETE FROM meta
"""


def _m004_lifecycle(db: sqlite3.Connection) -> None:
    """Retraction and purge. `hidden` = 1 leaves a row out of search, list, brief and recall: a record of
    kind `forget`, a retracted or purged record, and every record of a chain whose head is one. Every
    read path filters on it (see `visible`), so the rule lives in one place. Cleared and rebuilt from
    the log: retraction records already in it are applied on the way."""
    _run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN retracted_by TEXT;
        ALTER TABLE records ADD COLUMN tomb INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
        """
        + _CLEAR_DERIVED,
    )


def _m005_text_keys(db: sqlite3.Connection) -> None:
    """The fingerprint of each record's normalised text, so that a write finds an exact duplicate among
    the current records of its scope with one lookup. Cleared and rebuilt from the log."""
    _run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN text_key TEXT;
        CREATE INDEX records_text_key ON records(text_key) WHERE text_key IS NOT NULL;
        """
        + _CLEAR_DERIVED,
    )


def _m006_kind_counts(db: sqlite3.Connection) -> None:
    """Current, visible records per (scope, kind), kept up to date like scope_counts, so the brief can
    say per kind what it left out at the cost of a lookup. Cleared and rebuilt from the log."""
    _run_script(
        db,
        """
        CREATE TABLE kind_counts (scope TEXT NOT NULL, kind TEXT NOT NULL, current INTEGER NOT NULL,
                                  PRIMARY KEY (scope, kind));
        """
        + _CLEAR_DERIVED,
    )


def _m007_scope_keys(db: sqlite3.Connection) -> None:
    """The project key (normalised origin URL, else git common dir) of every path scope, worked out
    once when the index first meets the scope: every worktree and clone of one repository on this
    machine then reads one memory, without rewriting the log."""
    _run_script(db, "CREATE TABLE scope_keys (scope TEXT PRIMARY KEY, key TEXT)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_m001_initial, _m002_scope_counts, _m003_vectors,
                                                          _m004_lifecycle, _m005_text_keys, _m006_kind_counts,
                                                          _m007_scope_keys]


def visible(alias: str = "") -> str:
    """The SQL condition every default read adds: the row is not retracted, purged or a forget record,
    and neither is the head of its chain. `alias` names the records table in the query."""
    return f"{alias + '.' if alias else ''}hidden = 0"

# Older SQLite (3.40.1, Debian 12's, does this) puts the segment an FTS5 'optimize' writes one level
# above the top every time and never drops the empty levels below it; past 2,000 levels the table
# reads as corrupt ("database disk image is malformed") and every write to the index fails. Each purge
# optimizes, and about 1,100 purges got there. Past this many levels, compact rebuilds the full-text
# table from the records table instead (newer SQLite keeps at most 64 levels: there it never happens).
FTS_LEVELS_MAX = 1000
_FTS_STRUCTURE_V2 = b"\xff\x00\x00\x01"
_FTS_EMPTY_STRUCTURE = b"\x00" * 7  # cookie 0, then 0 levels, 0 segments, write counter 0 (varints)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint at data[i]: (value, index after it). Big-endian 7-bit groups; a 9th byte has 8."""
    value = 0
    for n in range(9):
        c = data[i + n]
        if n == 8:
            return (value << 8) | c, i + 9
        value = (value << 7) | (c & 0x7F)
        if c < 0x80:
            return value, i + n + 1
    raise AssertionError("unreachable")


# Where the index stands in the log, saved as one JSON row so a catch-up costs one write.
# meta key: set when every byte the file freed was zeroed (made with secure_delete on, or VACUUMed since)
_ZEROED = "zeroed_since_created"
_EMPTY_STATE: dict[str, Any] = {"offset": 0, "line": 0, "seq": 0, "sha256": GENESIS, "after_bad": False,
                                "last_line_offset": -1, "last_line_sha": "", "log_ino": 0, "log_mtime": 0}

_WORD = re.compile(r"\w+", re.UNICODE)


# Words too common to narrow a search; dropped from a query unless it holds nothing else.
STOPWORDS = frozenset(
    "a an and are as at be but by for from had has have i if in into is it its of on or so than that the their "
    "then there these they this to was we were what when where which while who will with you your".split()
)


def query_terms(query: str) -> list[str]:
    """The searchable words of any user string, lower-cased, deduplicated, stopwords dropped."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:64]
    content = [w for w in words if w not in STOPWORDS]
    return content or words


def _prefixable(term: str) -> bool:
    # Words of four letters or more also match longer words (postgres → PostgreSQL); the porter
    # tokenizer stems both sides, so migrate → migrations as well. Numbers and short words stay exact.
    return len(term) >= 4 and not any(c.isdigit() for c in term)


def quote_query(terms: list[str], *, any_word: bool = False, prefix: bool = True) -> str | None:
    """A safe FTS5 query: each word quoted, so FTS5 operators in user input are plain text.

    All words must match (implicit AND) unless `any_word`; words of 4+ letters match as prefixes
    (after stemming) unless `prefix` is false. None when there is no word.
    """
    if not terms:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' + ("*" if prefix and _prefixable(w) else "") for w in terms]
    return (" OR " if any_word else " ").join(quoted)


def phrase_query(phrases: list[str]) -> str | None:
    """Each string as an exact FTS5 phrase (its words in order), OR'ed: for identifiers and paths."""
    quoted = []
    for p in phrases:
        words = _WORD.findall(p.lower())
        if words:
            quoted.append('"' + " ".join(words).replace('"', '""') + '"')
    return " OR ".join(quoted) if quoted else None


# Past this many full-text matches only the newest RANK_CAP are ranked, and the count they give is
# reported as a lower bound: ranking cost stays bounded however common a word is (measured here:
# bm25 ranking and the count cost a few µs a match each on an idle core, far more on a busy one).
RANK_CAP = 5_000


class Index:
    """One connection, guarded by a lock so that server worker threads can share it."""

    def __init__(self, directory: Path, log: Log, *, read_only: bool = False) -> None:
        self.path = directory / INDEX_NAME
        self.log = log
        self.read_only = read_only
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._ino: int | None = None
        # (log size, log inode, log mtime, index inode) when this process last caught up
        self._known: tuple[int, int, int, int | None] | None = None
        self.rebuilt: str | None = None  # why the index was found damaged and rebuilt, until a read says so
        self.rebuilt_in_place = False  # ... and whether only the full-text table was, from the records table

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        fresh = not self.path.exists()
        if fresh:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # The index is derived: losing its last transactions to a power cut costs a catch-up, not data.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            # Deleted and overwritten content is zeroed where it lay, so a purge need not VACUUM the whole
            # file (vectors make it large) to leave no byte of the text behind (see `compact`).
            db.execute("PRAGMA secure_delete=ON")
            self._migrate(db)
            if fresh:  # every byte this file will ever free is zeroed: it never needs a VACUUM
                db.execute(f"INSERT OR REPLACE INTO meta VALUES ('{_ZEROED}', '1')")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version >= len(MIGRATIONS):
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for i, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version={i}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _connect_read_only(self) -> sqlite3.Connection:
        """A private copy of the index in memory, which catches up there: no file is changed."""
        mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        # In a directory this user may write, a plain reader leaves no -wal/-shm behind when it closes.
        # Elsewhere (someone else's store, a read-only disk) mode=ro, or where even that needs a file
        # it cannot create, immutable=1: the last checkpoint, and catching up fills in the rest.
        writable = os.access(self.path.parent, os.W_OK)
        for query in ([None] if writable else ["mode=ro", "mode=ro&immutable=1"]):
            if not self.path.exists():
                break
            try:
                target = self.path if query is None else f"{self.path.absolute().as_uri()}?{query}"
                disk = sqlite3.connect(target, timeout=30, isolation_level=None, uri=query is not None)
                try:
                    if disk.execute("PRAGMA user_version").fetchone()[0] <= len(MIGRATIONS):
                        disk.backup(mem)
                finally:
                    disk.close()
                break
            except sqlite3.Error:  # unusable: start from nothing, as a normal open would
                mem.close()
                mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._migrate(mem)
        return mem

    def db(self) -> sqlite3.Connection:
        """The connection, reopened when the index file was deleted or replaced underneath us."""
        if self.read_only:
            if self._db is None:
                self._db = self._connect_read_only()
            return self._db
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        if self._db is None or ino != self._ino:
            if self._db is not None:
                self._db.close()
                self._db = None
            try:
                self._db = self._connect()
            except sqlite3.DatabaseError:
                # Not a database (or damaged beyond use): it is derived, so start it afresh.
                self._discard_files()
                self._db = self._connect()
            self._ino = os.stat(self.path).st_ino
            self._known = None  # a new file may reuse the old inode number
        return self._db

    def _discard_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(str(self.path) + suffix)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- catching up with the log -------------------------------------------------------------
    def _state(self, db: sqlite3.Connection) -> dict[str, Any]:
        row = db.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
        state = dict(_EMPTY_STATE)
        if row is not None:
            state.update(json.loads(row[0]))
        return state

    @staticmethod
    def _save_state(db: sqlite3.Connection, state: dict[str, Any]) -> None:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (json.dumps(state, sort_keys=True),))

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
            self._discard_files()  # db() sees the file gone and opens a new one
            self.rebuilt, self.rebuilt_in_place = damage, False
        return self._catch_up(progress)

    def _repair_fts(self) -> bool:
        """Rebuild the full-text table in place from the records table, in one transaction: its shadow
        tables emptied, a valid empty structure record put back, then FTS5's own 'rebuild'. False, with
        nothing changed, when that fails or the file does not check out after it."""
        try:
            if self._db is not None:  # a new connection: no full-text table cached from before
                self._db.close()
                self._db = None
            db = self.db()
            db.execute("BEGIN IMMEDIATE")
            try:
                for shadow in ("fts_data", "fts_idx", "fts_docsize"):
                    db.execute(f"DELETE FROM {shadow}")
                db.execute("INSERT INTO fts_data(id, block) VALUES (10, ?)", (_FTS_EMPTY_STRUCTURE,))
                db.execute("INSERT INTO fts(fts) VALUES('rebuild')")
                db.execute("INSERT INTO fts(fts, rank) VALUES('integrity-check', 0)")
                if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    raise sqlite3.DatabaseError("quick_check failed after the full-text rebuild")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError:
            return False
        self._known = None
        return True

    def _catch_up(self, progress: Callable[[int, int], None] | None) -> int:
        with self._lock:
            db = self.db()
            size, ino, mtime = self._stat_log()
            if self._known == (size, ino, mtime, self._ino):
                return 0
            state = self._state(db)
            if size == state["offset"] and ino == state["log_ino"] and mtime == state["log_mtime"]:
                if state.get("compact"):
                    self.compact()
                self._known = (size, ino, mtime, self._ino)
                return 0
            db.execute("BEGIN IMMEDIATE")
            try:
                state = self._state(db)  # another process may have caught up meanwhile
                replaced = not self._still_same_log(state, size, ino)
                if not replaced and size == state["offset"] and mtime != state["log_mtime"] and state["offset"]:
                    # Same size, same file, yet changed: bytes were edited in place (damage, or a repair
                    # from a backup). Compare the log with the index; rebuild when they disagree.
                    replaced = self._differs(db)
                if replaced:
                    self._clear(db)
                    state = dict(_EMPTY_STATE)
                n = self._index_from(db, state, progress, size)
                state["log_ino"] = ino
                after = self._stat_log()
                # An append during the catch-up leaves the saved time stale: the next call sees the size
                # grow and takes the incremental path, which never compares the whole log.
                state["log_mtime"] = after[2] if after[0] == state["offset"] else mtime
                self._save_state(db, state)
                db.execute("COMMIT")
            except BaseException:
                self._known = None
                if db.in_transaction:  # SQLite has already rolled back after some errors (damage)
                    db.execute("ROLLBACK")
                raise
            if state["offset"] == size:
                self._known = (size, ino, state["log_mtime"], self._ino)
            if replaced or state.get("compact"):
                # A replaced log (a purge, or a restored copy): the old text must not live on in
                # segments, free pages or the WAL.
                self.compact()
            return n

    def _stat_log(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self.log.path)
            return st.st_size, st.st_ino, st.st_mtime_ns
        except FileNotFoundError:
            return 0, 0, 0

    def _differs(self, db: sqlite3.Connection) -> bool:
        """Whether any line of the log now reads differently from what the index holds for it."""
        rows = db.execute("SELECT line, offset, sha256 FROM records ORDER BY line")
        problems = {r[0]: r[1] for r in db.execute("SELECT line, kind FROM problems")}
        pending = rows.fetchone()
        for line in self.log.lines():
            try:
                rec = records_parse(line.raw)
            except BadLine:
                rec = None
            if pending is not None and pending[0] == line.number:
                if rec is None or pending[1] != line.offset or pending[2] != rec["sha256"]:
                    return True
                pending = rows.fetchone()
            elif rec is None and problems.get(line.number) != "corrupt":
                return True
            elif rec is not None and problems.get(line.number) != "duplicate":
                return True  # a line once unreadable reads again: index it
        return pending is not None

    def _still_same_log(self, state: dict[str, Any], size: int, ino: int) -> bool:
        if state["offset"] == 0:
            return True
        if size < state["offset"] or ino != state["log_ino"]:
            return False
        start = state["last_line_offset"]
        if start < 0:
            return False
        raw = self.log.read_at(start, state["offset"] - start)
        return hashlib.sha256(raw).hexdigest() == state["last_line_sha"]

    def _clear(self, db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO fts(fts) VALUES('delete-all')")
        db.execute("DELETE FROM records")
        db.execute("DELETE FROM problems")
        db.execute("DELETE FROM scope_counts")
        db.execute("DELETE FROM kind_counts")
        db.execute("DELETE FROM scope_keys")
        self.__dict__.pop("_seen_scopes", None)
        db.execute("DELETE FROM vectors")
        db.execute(f"DELETE FROM meta WHERE key != '{_ZEROED}'")  # a fact about the file, not the log
        self._known = None

    def _index_from(
        self,
        db: sqlite3.Connection,
        state: dict[str, Any],
        progress: Callable[[int, int], None] | None,
        size: int,
    ) -> int:
        chain = ChainState(state["seq"], state["sha256"], state["after_bad"])
        last: Line | None = None
        rows: list[tuple[Any, ...]] = []
        n = 0
        for line in self.log.lines(state["offset"], state["line"]):
            rec, problem = chain.feed(line)
            if problem is not None:
                self._add_problem(db, problem)
            if rec is not None:
                rows.append(self._row(rec, line))
                if rec.get("supersedes") or len(rows) >= _BATCH:
                    self._flush(db, rows)
                    rows = []
            last = line
            n += 1
            if progress is not None and n % 5000 == 0:
                progress(line.end, size)
        self._flush(db, rows)
        if last is not None:
            state.update(offset=last.end, line=last.number, seq=chain.seq, sha256=chain.sha256,
                         after_bad=chain.after_bad, last_line_offset=last.offset,
                         last_line_sha=hashlib.sha256(last.raw + b"\n").hexdigest())
        if progress is not None:
            progress(size, size)
        return n

    @staticmethod
    def _row(rec: dict[str, Any], line: Line) -> tuple[Any, ...]:
        scope = rec.get("scope")
        session = rec.get("session_id")
        tomb = "text" not in rec
        forgotten = rec.get("forgotten") if tomb else None
        life = None
        if rec["kind"] == FORGET_KIND and not tomb and rec.get("action") in ("retract", "undo"):
            targets = rec.get("targets")
            if isinstance(targets, list):
                life = (rec["action"], [t for t in targets if isinstance(t, str)])
        base = (
            line.number,
            rec["seq"],
            rec["id"],
            line.offset,
            len(line.raw) + 1,
            rec["ts"],
            rec["kind"],
            scope if isinstance(scope, str) and scope else GLOBAL_SCOPE,
            rec.get("source") if isinstance(rec.get("source"), str) else None,
            rec.get("supersedes") if isinstance(rec.get("supersedes"), str) else None,
            rec.get("client_op_id") if isinstance(rec.get("client_op_id"), str) else None,
            session if isinstance(session, str) and not tomb else None,
            rec["sha256"],
            rec.get("text", ""),
        )
        by = forgotten.get("by") if isinstance(forgotten, dict) else None
        hidden = 1 if tomb or rec["kind"] == FORGET_KIND else 0
        key = None if tomb or hidden else text_key(rec["text"])
        return base + (by if isinstance(by, str) else ("?" if tomb else None), int(tomb), hidden, life, key)

    def _flush(self, db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            line, rid, supersedes = row[0], row[2], row[9]
            retracted_by, tomb, hidden, life, key = row[14:19]
            try:
                db.execute(
                    "INSERT INTO records (line, seq, id, offset, length, ts, kind, scope, source, supersedes,"
                    " client_op_id, session, sha256, text, head, retracted_by, tomb, hidden, text_key)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    row[:14] + (line, retracted_by, tomb, hidden, key),
                )
            except sqlite3.IntegrityError:
                self._add_problem(db, Problem(line, row[3], row[1], "duplicate", f"id {rid} already used by an earlier record"))
                continue
            if not tomb:
                db.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (line, row[13]))
            if not hidden:
                self._count(db, row[7], +1, row[6])
                self._note_scope(db, row[7])
            if supersedes:
                target = db.execute("SELECT head FROM records WHERE id = ? AND line < ?", (supersedes, line)).fetchone()
                if target is not None:
                    old_head = target[0]
                    old_scope, old_hidden, old_kind = db.execute(
                        "SELECT scope, hidden, kind FROM records WHERE line = ?", (old_head,)).fetchone()
                    db.execute("UPDATE records SET superseded_by = ? WHERE line = ?", (rid, old_head))
                    db.execute("UPDATE records SET head = ? WHERE head = ?", (line, old_head))
                    if not old_hidden:
                        self._count(db, old_scope, -1, old_kind)
                    self._rehide(db, line)
            if life is not None:
                self._apply_forget(db, line, rid, *life)

    def _note_scope(self, db: sqlite3.Connection, scope: str) -> None:
        seen = self.__dict__.setdefault("_seen_scopes", set())
        if scope in seen:
            return
        seen.add(scope)
        if db.execute("SELECT 1 FROM scope_keys WHERE scope = ?", (scope,)).fetchone() is not None:
            return
        key = None
        if os.path.isabs(scope) and os.path.isdir(scope):
            from .project import identity

            ident = identity(scope)
            key = ident["key"] if ident else None
        db.execute("INSERT OR IGNORE INTO scope_keys VALUES (?, ?)", (scope, key))

    def same_project(self, scopes: list[str] | None, keys: dict[str, str]) -> list[str] | None:
        """`scopes` plus every scope whose project key is one of theirs (`keys`: scope → key known by
        the caller, for scopes the index has not met yet)."""
        if not scopes:
            return scopes
        wanted = set(keys.values()) | set(scopes)  # a project's key is also the scope it files records under
        if len(scopes) <= 16:
            q = f"SELECT key FROM scope_keys WHERE key IS NOT NULL AND scope IN ({','.join('?' * len(scopes))})"
            wanted |= {r["key"] for r in self.query(q, scopes)}
        rows = self.query(f"SELECT scope FROM scope_keys WHERE key IN ({','.join('?' * len(wanted))})",
                          sorted(wanted))
        extra = [r["scope"] for r in rows if r["scope"] not in scopes]
        return list(scopes) + sorted(extra)

    def scope_table(self) -> list[dict[str, Any]]:
        """Every scope with its current records, total records and project key (for `retained scopes`)."""
        return self.query(
            "SELECT r.scope AS scope, COALESCE(c.current, 0) AS current, COUNT(*) AS records, k.key AS key"
            " FROM records r LEFT JOIN scope_counts c ON c.scope = r.scope LEFT JOIN scope_keys k ON k.scope = r.scope"
            " WHERE r.kind != ? GROUP BY r.scope ORDER BY current DESC, r.scope", (FORGET_KIND,))

    def _apply_forget(self, db: sqlite3.Connection, line: int, rid: str, action: str, targets: list[str]) -> None:
        """A retraction marks its targets (a retracted head hides its chain); an undo clears the mark.
        Purged records stay purged: their tombstones carry the mark themselves."""
        for target in targets:
            row = db.execute("SELECT line, head FROM records WHERE id = ? AND line < ? AND tomb = 0 AND kind != ?",
                             (target, line, FORGET_KIND)).fetchone()
            if row is None:
                continue
            db.execute("UPDATE records SET retracted_by = ? WHERE line = ?",
                       (rid if action == "retract" else None, row[0]))
            self._rehide(db, row[1])

    def _rehide(self, db: sqlite3.Connection, head: int) -> None:
        """Recompute `hidden` for the chain whose head is line `head`, keeping scope_counts in step."""
        scope, before, kind = db.execute("SELECT scope, hidden, kind FROM records WHERE line = ?", (head,)).fetchone()
        db.execute(
            "UPDATE records SET hidden = CASE WHEN kind = ? OR tomb = 1 OR retracted_by IS NOT NULL"
            " OR (SELECT h.retracted_by FROM records h WHERE h.line = ?) IS NOT NULL THEN 1 ELSE 0 END"
            " WHERE head = ?", (FORGET_KIND, head, head))
        after = db.execute("SELECT hidden FROM records WHERE line = ?", (head,)).fetchone()[0]
        if after != before:
            self._count(db, scope, before - after, kind)

    @staticmethod
    def _count(db: sqlite3.Connection, scope: str, delta: int, kind: str) -> None:
        db.execute(
            "INSERT INTO scope_counts VALUES (?, ?) ON CONFLICT(scope) DO UPDATE SET current = current + ?",
            (scope, delta, delta),
        )
        db.execute(
            "INSERT INTO kind_counts VALUES (?, ?, ?) ON CONFLICT(scope, kind) DO UPDATE SET current = current + ?",
            (scope, kind, delta, delta),
        )

    @staticmethod
    def _add_problem(db: sqlite3.Connection, p: Problem) -> None:
        db.execute("INSERT OR REPLACE INTO problems (line, offset, seq, kind, reason) VALUES (?,?,?,?,?)",
                   (p.line, p.offset, p.seq, p.kind, p.reason))

    # -- purging ------------------------------------------------------------------------------
    def apply_purge(self, purged: list[dict[str, Any]], by: str, new_stat: tuple[int, int],
                    install: Callable[[], None]) -> None:
        """Bring the index in line with a log whose purged lines became tombstones, and install that log.

        `purged` holds {line, length (of the tombstone line), sha (of the tombstone line)} per record.
        The index transaction stays open across `install` (the rename): other processes wait for it,
        and a crash before the commit leaves an index that no longer matches the log's inode, which the
        next catch-up rebuilds from the new log. Record text leaves the index here; `compact` then
        clears it from the FTS segments, free pages and the WAL.
        """
        with self._lock:
            db = self.db()
            db.execute("BEGIN IMMEDIATE")
            try:
                state = self._state(db)
                last = state["last_line_offset"]  # where the last indexed line started, before the shifts
                shift = 0
                order = sorted(purged, key=lambda p: p["line"])
                for i, p in enumerate(order):
                    line = p["line"]
                    row = db.execute("SELECT text, length, head FROM records WHERE line = ?", (line,)).fetchone()
                    db.execute("INSERT INTO fts(fts, rowid, text) VALUES('delete', ?, ?)", (line, row[0]))
                    for table in self._line_tables(db):
                        db.execute(f"DELETE FROM {table} WHERE line = ?", (line,))
                    db.execute("UPDATE records SET text = '', source = NULL, client_op_id = NULL, session = NULL,"
                               " text_key = NULL, length = ?, offset = offset - ?, tomb = 1, retracted_by = ?"
                               " WHERE line = ?",
                               (p["length"], shift, by, line))
                    self._rehide(db, row[2])
                    if last == p["offset"]:
                        state["last_line_sha"] = p["sha"]
                    shift += row[1] - p["length"]
                    # The lines up to the next purged one move back by the bytes removed so far.
                    upto = order[i + 1]["line"] if i + 1 < len(order) else None
                    bound, args = (" AND line < ?", (shift, line, upto)) if upto is not None else ("", (shift, line))
                    db.execute(f"UPDATE records SET offset = offset - ? WHERE line > ?{bound}", args)
                    db.execute(f"UPDATE problems SET offset = offset - ? WHERE line > ?{bound}", args)
                    if last > p["offset"]:
                        state["last_line_offset"] -= row[1] - p["length"]
                state["offset"] -= shift
                state["log_ino"], state["log_mtime"] = new_stat
                state["compact"] = True  # cleared by compact(): a purge killed before it still gets one
                self._save_state(db, state)
                install()
                db.execute("COMMIT")
            except BaseException:
                self._known = None
                db.execute("ROLLBACK")
                raise
            self._known = None

    def fts_levels(self) -> int:
        """How many levels the full-text table's segments are kept in (its structure record's nLevel:
        after a 4-byte cookie, and the 4-byte version mark newer SQLite writes, a varint)."""
        with self._lock:
            row = self.db().execute("SELECT block FROM fts_data WHERE id = 10").fetchone()
        if row is None or not isinstance(row[0], bytes) or len(row[0]) < 5:
            return 0
        block = row[0]
        start = 8 if block[4:8] == _FTS_STRUCTURE_V2 else 4
        try:
            return _varint(block, start)[0]
        except IndexError:
            return 0

    @staticmethod
    def _line_tables(db: sqlite3.Connection) -> list[str]:
        """Derived tables keyed by log line besides records and problems (vectors, ...): a purged line's
        rows go from all of them."""
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                          " AND name NOT IN ('records', 'problems') AND name NOT LIKE 'fts%'")]
        return [n for n in names if any(c[1] == "line" for c in db.execute(f'PRAGMA table_info("{n}")'))]

    def compact(self) -> None:
        """Leave no byte of deleted text in the index's files: merge the FTS5 segments (a deleted row
        stays in them until a merge) and truncate the WAL. The pages and cells that frees are zeroed
        (secure_delete); an index file made before that was on is VACUUMed once, for what it freed then."""
        with self._lock:
            db = self.db()
            if self.fts_levels() > FTS_LEVELS_MAX:
                db.execute("INSERT INTO fts(fts) VALUES('rebuild')")  # from the records table: one level
            else:
                db.execute("INSERT INTO fts(fts) VALUES('optimize')")
            state = self._state(db)
            if state.pop("compact", None):
                self._save_state(db, state)
            if db.execute(f"SELECT 1 FROM meta WHERE key = '{_ZEROED}'").fetchone() is None:
                db.execute("VACUUM")
                db.execute(f"INSERT OR REPLACE INTO meta VALUES ('{_ZEROED}', '1')")
            for _ in range(50):
                busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy:
                    return
                threading.Event().wait(0.05)

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Drop everything and index the whole log again."""
        with self._lock:
            db = self.db()
            db.execute("BEGIN IMMEDIATE")
            try:
                self._clear(db)
                size, ino, mtime = self._stat_log()
                state = dict(_EMPTY_STATE)
                n = self._index_from(db, state, progress, size)
                state["log_ino"], state["log_mtime"] = ino, mtime
                self._save_state(db, state)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("INSERT INTO fts(fts) VALUES('optimize')")
            return n

    # -- queries ------------------------------------------------------------------------------
    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            db = self.db()
            cur = db.execute(sql, params)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def by_id(self, rid: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM records WHERE id = ?", (rid,))
        return rows[0] if rows else None

    def by_op(self, op: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM records WHERE client_op_id = ? ORDER BY line LIMIT 1", (op,))
        return rows[0] if rows else None

    def head_of(self, rid: str) -> dict[str, Any] | None:
        rows = self.query("SELECT h.* FROM records r JOIN records h ON h.line = r.head WHERE r.id = ?", (rid,))
        return rows[0] if rows else None

    def duplicate_of(self, text: str, kind: str, scope: str) -> dict[str, Any] | None:
        """The oldest current record of this kind and scope whose normalised text equals `text`'s."""
        rows = self.query("SELECT * FROM records WHERE text_key = ? AND kind = ? AND scope = ? AND superseded_by IS NULL"
                          " AND " + visible() + " ORDER BY line LIMIT 1", (text_key(text), kind, scope))
        return rows[0] if rows else None

    def similar_candidates(self, match: str | None, scope: str, limit: int) -> list[dict[str, Any]]:
        """Current records of the scope holding every word of `match`, best first (for near-duplicates)."""
        if match is None:
            return []
        return self.query(
            "WITH m AS MATERIALIZED (SELECT rowid AS line, bm25(fts) AS rank FROM fts WHERE fts MATCH ?)"
            " SELECT r.id, r.kind, r.ts, r.text FROM m JOIN records r ON r.line = m.line"
            " WHERE r.scope = ? AND r.superseded_by IS NULL AND " + visible("r") + " ORDER BY m.rank LIMIT ?",
            (match, scope, limit))

    def unreadable(self) -> int:
        """How many lines of the log could not be read as records (corrupt), as of the last catch-up."""
        return int(self.query("SELECT COUNT(*) AS n FROM problems WHERE kind = 'corrupt'")[0]["n"])

    def current_count(self, scopes: list[str] | None) -> int:
        """How many current (not superseded) records the scopes hold (every scope when None)."""
        if scopes:
            sql, params = f"SELECT SUM(current) AS n FROM scope_counts WHERE scope IN ({','.join('?' * len(scopes))})", scopes
        else:
            sql, params = "SELECT SUM(current) AS n FROM scope_counts", []
        return int(self.query(sql, params)[0]["n"] or 0)

    def kind_counts(self, scopes: list[str] | None = None) -> dict[str, int]:
        """Current, visible records per kind in the scopes (every scope when None): one small lookup."""
        where, params = scope_clause(scopes, "scope")
        rows = self.query("SELECT kind, SUM(current) AS n FROM kind_counts WHERE 1=1" + where + " GROUP BY kind", params)
        return {r["kind"]: int(r["n"]) for r in rows if r["n"]}

    def newest_current(self, scopes: list[str] | None, limit: int, kind: str | None = None,
                       kinds: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The newest current records in the scopes, walking the table backwards and stopping at `limit`.

        The unary + keeps SQLite from sorting every record of the scope: records of the project and
        global scopes are common, so the walk ends early.
        """
        where, params = "superseded_by IS NULL AND " + visible(), []
        if scopes:
            where += f" AND +scope IN ({','.join('?' * len(scopes))})"
            params += scopes
        if kind is not None:
            where += " AND kind = ?"
            params.append(kind)
        if kinds:
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        order = "ORDER BY kind, line DESC" if kind is not None else "ORDER BY line DESC"
        return self.query(f"SELECT id, seq, ts, kind, scope, text FROM records WHERE {where} {order} LIMIT ?",
                          [*params, limit])

    def counts(self) -> dict[str, int]:
        row = self.query(
            "SELECT (SELECT COUNT(*) FROM records) AS records,"
            " (SELECT COUNT(*) FROM problems WHERE kind != 'break') AS corrupt,"
            " (SELECT COUNT(*) FROM problems WHERE kind = 'break') AS breaks"
        )[0]
        return {k: int(v) for k, v in row.items()}

    # -- vectors (the semantic tier) -------------------------------------------------------------
    def vectors_pending_count(self, model: str) -> int:
        """Records after the last one embedded by `model` (embedding runs in line order)."""
        return int(self.query("SELECT COUNT(*) AS n FROM records WHERE line >"
                              " (SELECT COALESCE(MAX(line), 0) FROM vectors WHERE model = ?)", (model,))[0]["n"])

    def vectors_missing_count(self, model: str) -> int:
        """Records that have no vector of `model` (doctor's count; exact, one index probe a record)."""
        return int(self.query("SELECT COUNT(*) AS n FROM records r WHERE NOT EXISTS"
                              " (SELECT 1 FROM vectors v WHERE v.line = r.line AND v.model = ?)", (model,))[0]["n"])

    def vectors_pending(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        rows = self.query("SELECT line, sha256, text FROM records WHERE line >"
                          " (SELECT COALESCE(MAX(line), 0) FROM vectors WHERE model = ?) ORDER BY line LIMIT ?",
                          (model, limit))
        return [(r["line"], r["sha256"], r["text"]) for r in rows]

    def drop_other_vectors(self, model: str) -> int:
        """Forget vectors of any other model (a model change re-embeds; spaces are never mixed)."""
        with self._lock:
            db = self.db()
            if db.execute("SELECT 1 FROM vectors WHERE model != ? LIMIT 1", (model,)).fetchone() is None:
                return 0
            return db.execute("DELETE FROM vectors WHERE model != ?", (model,)).rowcount

    def put_vectors(self, model: str, rows: list[tuple[int, str, Any]]) -> None:
        """Store (line, record sha256, vector) rows; a row whose record changed meanwhile is skipped."""
        from .embed import to_blob

        with self._lock:
            db = self.db()
            db.execute("BEGIN IMMEDIATE")
            try:
                for line, sha, vec in rows:
                    db.execute("INSERT OR REPLACE INTO vectors (line, model, sha256, dim, vec)"
                               " SELECT line, ?, sha256, ?, ? FROM records WHERE line = ? AND sha256 = ?",
                               (model, len(vec), to_blob(vec), line, sha))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def has_vectors(self, model: str) -> bool:
        return bool(self.query("SELECT EXISTS (SELECT 1 FROM vectors WHERE model = ?) AS x", (model,))[0]["x"])

    def vector_span(self) -> tuple[int, int, int | None]:
        """(lowest vid, highest vid, index inode): two rowid look-ups that tell a cache what changed."""
        row = self.query("SELECT COALESCE((SELECT vid FROM vectors ORDER BY vid LIMIT 1), 0) AS lo,"
                         " COALESCE((SELECT vid FROM vectors ORDER BY vid DESC LIMIT 1), 0) AS hi")[0]
        return int(row["lo"]), int(row["hi"]), self._ino

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        """(count, largest vid, index inode) of this model's vectors: tells a cache whether it is stale."""
        row = self.query("SELECT COUNT(*) AS n, COALESCE(MAX(vid), 0) AS v FROM vectors WHERE model = ?", (model,))[0]
        return int(row["n"]), int(row["v"]), self._ino

    def vectors_page(self, model: str, vid: int, limit: int) -> tuple[list[int], list[bytes], int, int]:
        """(lines, float16 blobs, dim, last vid) of up to `limit` vectors of `model` after `vid`, by vid;
        a page stops where the width changes (the reader then starts afresh)."""
        with self._lock:
            # `+model`: walk the table in vid order rather than the model index (which then needs a
            # sort of every row): half the time of a cold read, one model's vectors being nearly all.
            rows = self.db().execute("SELECT vid, line, vec, dim FROM vectors WHERE +model = ? AND vid > ?"
                                     " ORDER BY vid LIMIT ?", (model, vid, limit)).fetchall()
        lines: list[int] = []
        blobs: list[bytes] = []
        dim = rows[0][3] if rows else 0
        for v, line, vec, d in rows:
            if d != dim:
                break
            lines.append(line)
            blobs.append(vec)
            vid = v
        return lines, blobs, dim, vid

    # -- search ------------------------------------------------------------------------------
    def ranked(self, match: str, *, scopes: list[str] | None, kind: str | None, as_of: str | None,
               include_superseded: bool, limit: int, only: list[int] | None = None,
               cap: int | None = None, need: int | None = None) -> tuple[int, bool, list[dict[str, Any]]]:
        """Full-text matches, best bm25 first: (total, total is exact, rows with `rank` and `line`).

        Without include_superseded or as_of each match folds onto the current record of its supersede
        chain (the head). `only`: consider just these result lines. Past `cap` matches only the newest
        `cap` are ranked and counted, and the total is a lower bound; when filters leave fewer than
        `need` rows there, the window grows. bm25 is computed once, inside FTS5's own top-N sort; the
        count joins the matches without scoring them.
        """
        cap = RANK_CAP if cap is None else cap
        while True:
            total, exact, rows = self._ranked_window(match, scopes=scopes, kind=kind, as_of=as_of,
                                                     include_superseded=include_superseded, limit=limit,
                                                     only=only, cap=cap)
            # Filters (a rare scope or kind) left too few in the newest matches: look further back.
            if exact or len(rows) >= (limit if need is None else need) or cap >= 1 << 30:
                return total, exact, rows
            cap *= 8

    def _ranked_window(self, match: str, *, scopes: list[str] | None, kind: str | None, as_of: str | None,
                       include_superseded: bool, limit: int, only: list[int] | None,
                       cap: int) -> tuple[int, bool, list[dict[str, Any]]]:
        fold = not include_superseded and as_of is None
        window, wparams = "", []
        exact = True
        size = cap
        if only is not None:
            return self._ranked_only(match, only, fold, scopes=scopes, kind=kind, as_of=as_of,
                                     include_superseded=include_superseded, limit=limit)
        with self._lock:
            db = self.db()
            size = db.execute("SELECT COUNT(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)",
                              (match, cap + 1)).fetchone()[0]
            if size == 0:
                return 0, True, []
            if size > cap:
                bound = db.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                                   (match, cap - 1)).fetchone()[0]
                window, wparams, exact, size = " AND fts.rowid >= ?", [bound], False, cap
        target = "h" if fold else "r"
        where, params = filter_clause(target, scopes, kind, as_of, include_superseded)
        join = " CROSS JOIN records h ON h.line = r.head" if fold else ""  # matches drive the join
        count_sql = (f"SELECT COUNT({'DISTINCT r.head' if fold else '*'}) AS n FROM fts CROSS JOIN records r ON r.line = fts.rowid"
                     f"{join} WHERE fts MATCH ?{window}{where}")
        total = self.query(count_sql, [match, *wparams, *params])[0]["n"]
        if total == 0:
            return 0, exact, []
        cols = "h.*, MIN(m.rank) AS rank" if fold else "r.*, m.rank AS rank"
        tail = " GROUP BY r.head ORDER BY rank, h.seq DESC LIMIT ?" if fold else " ORDER BY rank, r.seq DESC LIMIT ?"
        n = max(limit * 4, 64)
        while True:
            # FTS5 keeps only the best n by bm25 while it scans; filters and folding come after, so when
            # they leave fewer than `limit`, look deeper.
            sql = (f"WITH m AS MATERIALIZED (SELECT rowid AS line, rank FROM fts WHERE fts MATCH ?"
                   f"{window.replace('fts.rowid', 'rowid')} ORDER BY rank LIMIT ?)"
                   f" SELECT {cols} FROM m CROSS JOIN records r ON r.line = m.line{join} WHERE 1=1{where}{tail}")
            rows = self.query(sql, [match, *wparams, n, *params, limit])
            if len(rows) >= min(limit, total) or n >= size:
                return int(total), exact, rows
            n *= 8

    def _ranked_only(self, match: str, only: list[int], fold: bool, *, scopes: list[str] | None, kind: str | None,
                     as_of: str | None, include_superseded: bool, limit: int) -> tuple[int, bool, list[dict[str, Any]]]:
        """`ranked` for just these result lines: which of them hold the words, with their bm25.

        `+rowid` keeps the line list away from FTS5, which otherwise may take it as equality
        constraints and run the whole (prefix) query once per line (measured at 100k for 256 lines
        and a common prefix: 2.4 s written as `rowid IN (SELECT value FROM json_each(?))`, 20 ms with
        `+rowid`); this way it walks the matches once and bm25 is computed for the kept lines only.
        The form this replaced did not hit that case in the bench: at 1M both took 0.30-0.33 s."""
        if not only:
            return 0, True, []
        marks = ",".join("?" * len(only))
        keep = f"SELECT line FROM records WHERE head IN ({marks})" if fold else "SELECT value FROM json_each(?)"
        keep_params: list[Any] = list(only) if fold else [json.dumps(list(only))]
        target = "h" if fold else "r"
        where, params = filter_clause(target, scopes, kind, as_of, include_superseded)
        join = " CROSS JOIN records h ON h.line = r.head" if fold else ""
        cols = "h.*, MIN(m.rank) AS rank" if fold else "r.*, m.rank AS rank"
        tail = " GROUP BY r.head ORDER BY rank, h.seq DESC LIMIT ?" if fold else " ORDER BY rank, r.seq DESC LIMIT ?"
        sql = (f"SELECT {cols} FROM (SELECT rowid AS line, rank FROM fts WHERE fts MATCH ? AND +rowid IN ({keep})) m"
               f" CROSS JOIN records r ON r.line = m.line{join} WHERE 1=1{where}{tail}")
        rows = self.query(sql, [match, *keep_params, *params, limit])
        return len(rows), True, rows

    def rows_for_lines(self, lines: list[int], *, scopes: list[str] | None, kind: str | None, as_of: str | None,
                       include_superseded: bool) -> list[dict[str, Any]]:
        """The records a read may show for these matched lines: each row is the record shown (the head
        of its chain unless include_superseded or as_of) plus `mline`, the line that matched."""
        if not lines:
            return []
        fold = not include_superseded and as_of is None
        target = "h" if fold else "r"
        where, params = filter_clause(target, scopes, kind, as_of, include_superseded)
        out: list[dict[str, Any]] = []
        for start in range(0, len(lines), 900):  # SQLite's bound-parameter limit
            chunk = lines[start:start + 900]
            marks = ",".join("?" * len(chunk))
            if fold:
                # CROSS JOIN: walk the given lines first (SQLite would otherwise start from a scope's rows).
                sql = (f"SELECT r.line AS mline, h.* FROM records r CROSS JOIN records h ON h.line = r.head"
                       f" WHERE r.line IN ({marks})" + where)
            else:
                sql = f"SELECT r.line AS mline, r.* FROM records r WHERE r.line IN ({marks})" + where
            out += self.query(sql, [*chunk, *params])
        return out

    def ts_of(self, ids: list[str]) -> dict[str, str]:
        if not ids:
            return {}
        rows = self.query(f"SELECT id, ts FROM records WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r["id"]: r["ts"] for r in rows}

    def iter_offsets(self) -> Iterator[tuple[int, str]]:
        """(offset, sha256) of every indexed record in log order, streamed for verify's merge."""
        with self._lock:
            db = self.db()
            cur = db.execute("SELECT offset, sha256 FROM records ORDER BY line")
            while True:
                batch = cur.fetchmany(1000)
                if not batch:
                    return
                yield from batch

    # -- export, import and the web page (retained/transfer.py, retained/ui.py) ------------------
    def export_rows(self, scopes: list[str] | None) -> list[dict[str, Any]]:
        """Where each record of the scopes sits in the log, in log order (export reads the bytes)."""
        where, params = scope_clause(scopes, "scope")
        return self.query(f"SELECT * FROM (SELECT line, id, kind, scope, offset, length, {_TOMB} AS tomb"
                          f" FROM records WHERE 1=1{where}) ORDER BY line", params)

    def markdown_rows(self, scopes: list[str] | None) -> list[dict[str, Any]]:
        """Every record of the scopes, grouped for a readable export: scope, kind, newest first."""
        where, params = scope_clause(scopes, "scope")
        return self.query(f"SELECT id, ts, kind, scope, text, superseded_by, {_TOMB} AS tomb FROM records"
                          f" WHERE 1=1{where} ORDER BY scope, kind, line DESC", params)

    def same_text(self, scope: str, text: str) -> dict[str, Any] | None:
        """A current record of the scope holding exactly this text."""
        rows = self.query("SELECT id FROM records WHERE scope = ? AND text = ? AND superseded_by IS NULL LIMIT 1",
                          (scope, text))
        return rows[0] if rows else None

    def scope_names(self) -> list[str]:
        return [r["scope"] for r in self.query("SELECT scope FROM scope_counts")]

    def retracted_ids(self) -> list[str]:
        """Records a retraction hides now (themselves, or through the head of their chain)."""
        return [r["id"] for r in self.query("SELECT id FROM records WHERE hidden = 1 AND tomb = 0 AND kind != ?",
                                            (FORGET_KIND,))]


    def browse(self, *, scopes: list[str] | None, kind: str | None, ts_from: str | None, ts_to: str | None,
               as_of: str | None, history: bool, before_line: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        """A page of records, newest first, and how many the filters select.

        Default: current memory (not superseded, retracted, purged, nor a forget record). `as_of`: what
        was current then: written by then, not yet superseded or retracted by then. `history`: every
        record, superseded, retracted and purged ones and forget records included."""
        where, params = scope_clause(scopes, "r.scope")
        if kind is not None:
            where += " AND r.kind = ?"
            params.append(kind)
        if ts_from is not None:
            where += " AND r.ts >= ?"
            params.append(ts_from)
        if ts_to is not None:
            where += " AND r.ts < ?"
            params.append(ts_to)
        if as_of is not None:
            where += (" AND r.ts <= ? AND r.tomb = 0 AND r.kind != ?"
                      " AND (r.superseded_by IS NULL OR (SELECT s.ts FROM records s WHERE s.id = r.superseded_by) > ?)"
                      " AND (r.retracted_by IS NULL OR (SELECT f.ts FROM records f WHERE f.id = r.retracted_by) > ?)")
            params += [as_of, FORGET_KIND, as_of, as_of]
        elif not history:
            where += " AND r.hidden = 0 AND r.superseded_by IS NULL"
        if as_of is None and not history and kind is None and ts_from is None and ts_to is None:
            total = self.current_count(scopes)  # a lookup, not a count over the table
        else:
            total = self.query(f"SELECT COUNT(*) AS n FROM records r WHERE 1=1{where}", params)[0]["n"]
        page, page_params = where, list(params)
        if before_line is not None:
            page += " AND r.line < ?"
            page_params.append(before_line)
        rows = self.query(f"SELECT r.line, r.seq, r.id, r.ts, r.kind, r.scope, r.source, r.supersedes, r.superseded_by,"
                          f" r.retracted_by, r.tomb, r.hidden, substr(r.text, 1, 400) AS text, length(r.text) AS chars"
                          f" FROM records r WHERE 1=1{page} ORDER BY r.line DESC LIMIT ?", [*page_params, limit])
        return rows, int(total)

    def facets(self) -> dict[str, Any]:
        """What the page's filters offer: current records per scope (kept up to date on insert), and the
        kinds in use. Cheap at any size; `kind_counts` adds the per-kind counts, which cost a scan."""
        scopes = self.query("SELECT scope, current AS n FROM scope_counts WHERE current > 0 ORDER BY current DESC")
        kinds = [r["kind"] for r in self.query("SELECT DISTINCT kind FROM records WHERE kind != ?", (FORGET_KIND,))]
        every = self.query("SELECT COUNT(*) AS n FROM records")[0]["n"]
        return {"scopes": scopes, "kinds": kinds, "current": sum(r["n"] for r in scopes), "records": int(every)}

    def chain(self, head: int) -> list[dict[str, Any]]:
        """Every version of one supersede chain, oldest first."""
        return self.query("SELECT line, seq, id, ts, kind, scope, supersedes, superseded_by, retracted_by, tomb, hidden,"
                          " substr(text, 1, 400) AS text FROM records WHERE head = ? ORDER BY line", (head,))

    def at_line(self, line: int) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM records WHERE line = ?", (line,))
        return rows[0] if rows else None

    def forget_records(self) -> list[dict[str, Any]]:
        """The retraction, undo and purge records, in log order (each names its targets in the log)."""
        return self.query("SELECT line, id, ts, offset, length FROM records WHERE kind = ? AND tomb = 0 ORDER BY line",
                          (FORGET_KIND,))

    def sources(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """id → its source and place in the log, for the brief's "does the host load this already?"."""
        if not ids:
            return {}
        rows = self.query(f"SELECT id, source, offset, length FROM records WHERE id IN ({','.join('?' * len(ids))})"
                          " AND source IS NOT NULL", list(ids))
        return {r["id"]: r for r in rows}

    def problems(self, limit: int = 100) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM problems ORDER BY line LIMIT ?", (limit,))


_TOMB = "tomb"  # a purged record's row: its tombstone


def filter_clause(alias: str, scopes: list[str] | None, kind: str | None, as_of: str | None,
                  include_superseded: bool) -> tuple[str, list[Any]]:
    """WHERE terms (each starting with AND) selecting the records a read may show.

    With `as_of`: records written at or before it, and (unless include_superseded) only those not
    superseded by a record written at or before it.
    """
    where, params = scope_clause(scopes, f"{alias}.scope")
    where += " AND " + visible(alias)
    if kind is not None:
        where += f" AND {alias}.kind = ?"
        params.append(kind)
    if as_of is not None:
        clause, more = as_of_clause(alias + ".", as_of, include_superseded)
        where += clause
        params += more
    elif not include_superseded and alias == "r":
        where += " AND r.superseded_by IS NULL"
    return where, params


def as_of_clause(prefix: str, as_of: str, include_superseded: bool) -> tuple[str, list[Any]]:
    """Records as they stood at `as_of` (a normalised UTC timestamp): written at or before it and,
    unless include_superseded, not yet superseded by a record written at or before it. `prefix` is
    the table alias with its dot, or ''."""
    where, params = f" AND {prefix}ts <= ?", [as_of]
    if not include_superseded:
        where += (f" AND ({prefix}superseded_by IS NULL OR NOT EXISTS (SELECT 1 FROM records s"
                  f" WHERE s.id = {prefix}superseded_by AND s.ts <= ?))")
        params.append(as_of)
    return where, params


def scope_clause(scopes: list[str] | None, column: str) -> tuple[str, list[Any]]:
    if not scopes:
        return "", []
    return f" AND {column} IN ({','.join('?' * len(scopes))})", list(scopes)
