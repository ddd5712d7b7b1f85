"""Reading log lines into the tables: one row per record, its full-text entry, supersede links,
retractions, per-scope counts and the problems (corrupt lines, chain breaks, reused ids) met on the way.

`advance` is one catch-up of one source in one transaction: it notices a log that was replaced or
edited in place (and then starts over), reads the lines after the saved state, and saves the new
state. Lines are read in log order, so a correction or a retraction always meets its target already
indexed. Nothing here decides when to catch up; the `Index` facade does (see its fast path).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from ..log import ChainState, Line, Problem
from ..records import FORGET_KIND, GLOBAL_SCOPE, BadLine, text_key
from ..records import parse_line as records_parse
from .schema import ZEROED
from .sources import EMPTY_STATE, KEY_BITS, Source, load_state, save_state

_BATCH = 2000
Progress = Callable[[int, int], None]


def advance(db: sqlite3.Connection, source: Source, stat: tuple[int, int, int], seen: set[str],
            progress: Progress | None) -> tuple[int, dict[str, Any], bool]:
    """Index what `source` holds past the saved state: (lines read, the new state, whether the log
    had been replaced and everything derived was cleared first). `stat` is the log's before reading."""
    size, ino, mtime = stat
    db.execute("BEGIN IMMEDIATE")
    try:
        state = load_state(db, source)  # another process may have caught up meanwhile
        replaced = _replaced(db, source, state, stat)
        if replaced:
            clear(db, seen)
            state = dict(EMPTY_STATE)
        n = index_from(db, source, state, progress, size, seen)
        state["log_ino"] = ino
        after = source.stat()
        # An append during the catch-up leaves the saved time stale: the next call sees the size
        # grow and takes the incremental path, which never compares the whole log.
        state["log_mtime"] = after[2] if after[0] == state["offset"] else mtime
        save_state(db, source, state)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite has already rolled back after some errors (damage)
            db.execute("ROLLBACK")
        raise
    return n, state, replaced


def rebuild(db: sqlite3.Connection, sources: list[Source], seen: set[str], progress: Progress | None) -> int:
    """Drop everything derived and index every source again from its first line."""
    db.execute("BEGIN IMMEDIATE")
    try:
        clear(db, seen)
        n = 0
        for source in sources:
            size, ino, mtime = source.stat()
            state = dict(EMPTY_STATE)
            n += index_from(db, source, state, progress, size, seen)
            state["log_ino"], state["log_mtime"] = ino, mtime
            save_state(db, source, state)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
            db.execute("ROLLBACK")
        raise
    db.execute("INSERT INTO fts(fts) VALUES('optimize')")
    return n


def _replaced(db: sqlite3.Connection, source: Source, state: dict[str, Any], stat: tuple[int, int, int]) -> bool:
    size, ino, mtime = stat
    if not _still_same_log(source, state, size, ino):
        return True
    if size == state["offset"] and mtime != state["log_mtime"] and state["offset"]:
        # Same size, same file, yet changed: bytes were edited in place (damage, or a repair from a
        # backup). Compare the log with the index; rebuild when they disagree.
        return _differs(db, source)
    return False


def _still_same_log(source: Source, state: dict[str, Any], size: int, ino: int) -> bool:
    if state["offset"] == 0:
        return True
    if size < state["offset"] or ino != state["log_ino"]:
        return False
    start = state["last_line_offset"]
    if start < 0:
        return False
    raw = source.log.read_at(start, state["offset"] - start)
    return hashlib.sha256(raw).hexdigest() == state["last_line_sha"]


def _differs(db: sqlite3.Connection, source: Source) -> bool:
    """Whether any line of the log now reads differently from what the index holds for it."""
    span = (source.base, source.base + (1 << KEY_BITS))
    rows = db.execute("SELECT line, offset, sha256 FROM records WHERE line > ? AND line <= ? ORDER BY line", span)
    problems = {r[0]: r[1] for r in db.execute("SELECT line, kind FROM problems WHERE line > ? AND line <= ?", span)}
    pending = rows.fetchone()
    for line in source.log.lines():
        key = source.key(line.number)
        try:
            rec = records_parse(line.raw)
        except BadLine:
            rec = None
        if pending is not None and pending[0] == key:
            if rec is None or pending[1] != line.offset or pending[2] != rec["sha256"]:
                return True
            pending = rows.fetchone()
        elif rec is None and problems.get(key) != "corrupt":
            return True
        elif rec is not None and problems.get(key) != "duplicate":
            return True  # a line once unreadable reads again: index it
    return pending is not None


def clear(db: sqlite3.Connection, seen: set[str]) -> None:
    """Empty every derived table (vectors too) and every source's state; `seen` is the caller's cache
    of scopes already noted in scope_keys."""
    db.execute("INSERT INTO fts(fts) VALUES('delete-all')")
    for table in ("records", "problems", "scope_counts", "kind_counts", "scope_keys", "vectors"):
        db.execute(f"DELETE FROM {table}")
    seen.clear()
    db.execute("DELETE FROM meta WHERE key != ?", (ZEROED,))  # a fact about the file, not the log


def index_from(db: sqlite3.Connection, source: Source, state: dict[str, Any], progress: Progress | None,
               size: int, seen: set[str]) -> int:
    """Index the complete lines after `state` (updated in place); returns how many were read."""
    chain = ChainState(state["seq"], state["sha256"], state["after_bad"])
    last: Line | None = None
    batch: list[tuple[Any, ...]] = []
    n = 0
    for line in source.log.lines(state["offset"], state["line"]):
        rec, problem = chain.feed(line)
        if problem is not None:
            add_problem(db, source.key(problem.line), problem)
        if rec is not None:
            batch.append(_row(rec, line, source.key(line.number)))
            if rec.get("supersedes") or len(batch) >= _BATCH:
                _flush(db, batch, seen)
                batch = []
        last = line
        n += 1
        if progress is not None and n % 5000 == 0:
            progress(line.end, size)
    _flush(db, batch, seen)
    if last is not None:
        state.update(offset=last.end, line=last.number, seq=chain.seq, sha256=chain.sha256,
                     after_bad=chain.after_bad, last_line_offset=last.offset,
                     last_line_sha=hashlib.sha256(last.raw + b"\n").hexdigest())
    if progress is not None:
        progress(size, size)
    return n


def _text(rec: dict[str, Any], name: str) -> str | None:
    value = rec.get(name)
    return value if isinstance(value, str) else None


def _row(rec: dict[str, Any], line: Line, key: int) -> tuple[Any, ...]:
    """The records row of one record (in _flush's column order), then its retraction action, if any."""
    scope = rec.get("scope")
    tomb = "text" not in rec
    forgotten = rec.get("forgotten") if tomb else None
    life = None
    if rec["kind"] == FORGET_KIND and not tomb and rec.get("action") in ("retract", "undo"):
        targets = rec.get("targets")
        if isinstance(targets, list):
            life = (rec["action"], [t for t in targets if isinstance(t, str)])
    by = forgotten.get("by") if isinstance(forgotten, dict) else None
    hidden = 1 if tomb or rec["kind"] == FORGET_KIND else 0
    return (
        key, rec["seq"], rec["id"], line.offset, len(line.raw) + 1, rec["ts"], rec["kind"],
        scope if isinstance(scope, str) and scope else GLOBAL_SCOPE,
        _text(rec, "source"), _text(rec, "supersedes"), _text(rec, "client_op_id"),
        None if tomb else _text(rec, "session_id"),
        rec["sha256"], rec.get("text", ""),
        key,  # head: a record heads its own chain until something supersedes it
        by if isinstance(by, str) else ("?" if tomb else None), int(tomb), hidden,
        None if tomb or hidden else text_key(rec["text"]),
        life,
    )


_INSERT = ("INSERT INTO records (line, seq, id, offset, length, ts, kind, scope, source, supersedes,"
           " client_op_id, session, sha256, text, head, retracted_by, tomb, hidden, text_key)"
           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _flush(db: sqlite3.Connection, batch: list[tuple[Any, ...]], seen: set[str]) -> None:
    for row in batch:
        key, rid, kind, scope, supersedes, text, tomb, hidden, life = (
            row[0], row[2], row[6], row[7], row[9], row[13], row[16], row[17], row[19])
        try:
            db.execute(_INSERT, row[:19])
        except sqlite3.IntegrityError:
            add_problem(db, key, Problem(key, row[3], row[1], "duplicate", f"id {rid} already used by an earlier record"))
            continue
        if not tomb:
            db.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (key, text))
        if not hidden:
            count(db, scope, +1, kind)
            _note_scope(db, scope, seen)
        if supersedes:
            _link(db, key, rid, supersedes)
        if life is not None:
            _apply_forget(db, key, rid, *life)


def _link(db: sqlite3.Connection, key: int, rid: str, supersedes: str) -> None:
    """Row `key` supersedes record `supersedes`: it becomes the head of that record's chain."""
    target = db.execute("SELECT head FROM records WHERE id = ? AND line < ?", (supersedes, key)).fetchone()
    if target is None:
        return
    old_head = target[0]
    old_scope, old_hidden, old_kind = db.execute(
        "SELECT scope, hidden, kind FROM records WHERE line = ?", (old_head,)).fetchone()
    db.execute("UPDATE records SET superseded_by = ? WHERE line = ?", (rid, old_head))
    db.execute("UPDATE records SET head = ? WHERE head = ?", (key, old_head))
    if not old_hidden:
        count(db, old_scope, -1, old_kind)
    rehide(db, key)


def _note_scope(db: sqlite3.Connection, scope: str, seen: set[str]) -> None:
    if scope in seen:
        return
    seen.add(scope)
    if db.execute("SELECT 1 FROM scope_keys WHERE scope = ?", (scope,)).fetchone() is not None:
        return
    key = None
    if os.path.isabs(scope) and os.path.isdir(scope):
        from ..project import identity

        ident = identity(scope)
        key = ident["key"] if ident else None
    db.execute("INSERT OR IGNORE INTO scope_keys VALUES (?, ?)", (scope, key))


def _apply_forget(db: sqlite3.Connection, key: int, rid: str, action: str, targets: list[str]) -> None:
    """A retraction marks its targets (a retracted head hides its chain); an undo clears the mark.
    Purged records stay purged: their tombstones carry the mark themselves."""
    for target in targets:
        row = db.execute("SELECT line, head FROM records WHERE id = ? AND line < ? AND tomb = 0 AND kind != ?",
                         (target, key, FORGET_KIND)).fetchone()
        if row is None:
            continue
        db.execute("UPDATE records SET retracted_by = ? WHERE line = ?",
                   (rid if action == "retract" else None, row[0]))
        rehide(db, row[1])


def rehide(db: sqlite3.Connection, head: int) -> None:
    """Recompute `hidden` for the chain whose head is line `head`, keeping scope_counts in step."""
    scope, before, kind = db.execute("SELECT scope, hidden, kind FROM records WHERE line = ?", (head,)).fetchone()
    db.execute(
        "UPDATE records SET hidden = CASE WHEN kind = ? OR tomb = 1 OR retracted_by IS NOT NULL"
        " OR (SELECT h.retracted_by FROM records h WHERE h.line = ?) IS NOT NULL THEN 1 ELSE 0 END"
        " WHERE head = ?", (FORGET_KIND, head, head))
    after = db.execute("SELECT hidden FROM records WHERE line = ?", (head,)).fetchone()[0]
    if after != before:
        count(db, scope, before - after, kind)


def count(db: sqlite3.Connection, scope: str, delta: int, kind: str) -> None:
    """Move the current-record counts of (scope, kind) by `delta`."""
    db.execute("INSERT INTO scope_counts VALUES (?, ?) ON CONFLICT(scope) DO UPDATE SET current = current + ?",
               (scope, delta, delta))
    db.execute("INSERT INTO kind_counts VALUES (?, ?, ?) ON CONFLICT(scope, kind) DO UPDATE SET current = current + ?",
               (scope, kind, delta, delta))


def add_problem(db: sqlite3.Connection, key: int, p: Problem) -> None:
    db.execute("INSERT OR REPLACE INTO problems (line, offset, seq, kind, reason) VALUES (?,?,?,?,?)",
               (key, p.offset, p.seq, p.kind, p.reason))
