"""The index file itself: opening it, evolving its schema by named migrations, and the read-only copy.

`connect` opens (and on first use creates, mode 0600) index.sqlite3 with the settings every
connection needs and brings its schema up to the last migration. `connect_read_only` makes a private
copy in memory instead, for a store this process must not change. `rows` and `first` run one
statement of this package and return dicts: the only way the package's modules read rows.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .clock import advance, ts_ms

INDEX_NAME = "index.sqlite3"
# meta key: set when every byte the file freed was zeroed (made with secure_delete on, or VACUUMed since)
ZEROED = "zeroed_since_created"

Params = Sequence[Any]


def rows(db: sqlite3.Connection, sql: str, params: Params = ()) -> list[dict[str, Any]]:
    """Every row of one statement, as column → value."""
    cur = db.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def first(db: sqlite3.Connection, sql: str, params: Params = ()) -> dict[str, Any] | None:
    """The first row of one statement, or None."""
    found = rows(db, sql, params)
    return found[0] if found else None


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
    read path filters on it (see `filters.visible`), so the rule lives in one place. Cleared and
    rebuilt from the log: retraction records already in it are applied on the way."""
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


def _m008_team(db: sqlite3.Connection) -> None:
    """Issue 19: teammates' logs beside the local one. `writer` and `author` (name <email>) of a row
    read from a teammate's log (NULL for the local log); `ord_ms`, `ord_n`: the row's place in the
    team's total order (its hybrid logical clock; for the local log a clock advanced along the log
    from each record's `ts`, so that newest-first over the local log alone stays log order); `seen`
    (a teammate's record: how far it had read each writer's log, for delete-wins). `also_supersedes`:
    the further versions a record resolves (`resolves`); `forks`: records two writers superseded
    concurrently, with each version that did. Filled in place for the local rows: no rebuild."""
    _run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN writer TEXT;
        ALTER TABLE records ADD COLUMN author TEXT;
        ALTER TABLE records ADD COLUMN ord_ms INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN ord_n INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN seen TEXT;
        CREATE TABLE also_supersedes (line INTEGER NOT NULL, target TEXT NOT NULL);
        CREATE INDEX also_supersedes_target ON also_supersedes(target);
        CREATE TABLE forks (target TEXT NOT NULL, line INTEGER NOT NULL, PRIMARY KEY (target, line));
        CREATE INDEX forks_line ON forks(line);
        CREATE INDEX records_supersedes ON records(supersedes) WHERE supersedes IS NOT NULL;
        CREATE INDEX records_order ON records(ord_ms, ord_n, line);
        CREATE TABLE forget_targets (target TEXT NOT NULL, line INTEGER NOT NULL, forget TEXT NOT NULL,
                                     action TEXT NOT NULL, ord_ms INTEGER NOT NULL, ord_n INTEGER NOT NULL);
        CREATE INDEX forget_targets_target ON forget_targets(target)
        """,
    )

    last = (0, 0)
    updates = []
    for line, ts in db.execute("SELECT line, ts FROM records ORDER BY line").fetchall():
        last = advance(last, ts_ms(ts))
        updates.append((last[0], last[1], line))
    db.executemany("UPDATE records SET ord_ms = ?, ord_n = ? WHERE line = ?", updates)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_m001_initial, _m002_scope_counts, _m003_vectors,
                                                          _m004_lifecycle, _m005_text_keys, _m006_kind_counts,
                                                          _m007_scope_keys, _m008_team]


def migrate(db: sqlite3.Connection) -> None:
    """Run the migrations this file has not had yet, in one transaction (all or none)."""
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


def connect(path: Path) -> sqlite3.Connection:
    """The index at `path`, created (0600) when missing, migrated; raises DatabaseError when unusable."""
    fresh = not path.exists()
    if fresh:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # The index is derived: losing its last transactions to a power cut costs a catch-up, not data.
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=30000")
        # Deleted and overwritten content is zeroed where it lay, so a purge need not VACUUM the whole
        # file (vectors make it large) to leave no byte of the text behind (see `repair.compact`).
        db.execute("PRAGMA secure_delete=ON")
        migrate(db)
        if fresh:  # every byte this file will ever free is zeroed: it never needs a VACUUM
            mark_zeroed(db)
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A private copy of the index in memory, which catches up there: no file is changed."""
    mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    # In a directory this user may write, a plain reader leaves no -wal/-shm behind when it closes.
    # Elsewhere (someone else's store, a read-only disk) mode=ro, or where even that needs a file
    # it cannot create, immutable=1: the last checkpoint, and catching up fills in the rest.
    writable = os.access(path.parent, os.W_OK)
    for query in ([None] if writable else ["mode=ro", "mode=ro&immutable=1"]):
        if not path.exists():
            break
        try:
            target = path if query is None else f"{path.absolute().as_uri()}?{query}"
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
    migrate(mem)
    return mem


def discard_files(path: Path) -> None:
    """Remove the index and its -wal/-shm: it is derived, and the next open starts it afresh."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass


def is_zeroed(db: sqlite3.Connection) -> bool:
    """Whether every byte this file ever freed was zeroed (see `connect`)."""
    return db.execute("SELECT 1 FROM meta WHERE key = ?", (ZEROED,)).fetchone() is not None


def mark_zeroed(db: sqlite3.Connection) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (ZEROED,))
