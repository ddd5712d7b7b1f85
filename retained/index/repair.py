"""Keeping the index's files sound and clean: full-text damage repaired in place, compaction after a
purge (no byte of deleted text left in segments, free pages or the WAL), and the index side of a purge.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from .catchup import rehide
from .schema import is_zeroed, mark_zeroed
from .sources import KEY_BITS, Source, load_state, save_state

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


def repair_fts(db: sqlite3.Connection) -> None:
    """Rebuild the full-text table in place from the records table, in one transaction: its shadow
    tables emptied, a valid empty structure record put back, then FTS5's own 'rebuild'. Raises
    DatabaseError, with nothing changed, when that fails or the file does not check out after it."""
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


def fts_levels(db: sqlite3.Connection) -> int:
    """How many levels the full-text table's segments are kept in (its structure record's nLevel:
    after a 4-byte cookie, and the 4-byte version mark newer SQLite writes, a varint)."""
    row = db.execute("SELECT block FROM fts_data WHERE id = 10").fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) < 5:
        return 0
    block = row[0]
    start = 8 if block[4:8] == _FTS_STRUCTURE_V2 else 4
    try:
        return _varint(block, start)[0]
    except IndexError:
        return 0


def compact(db: sqlite3.Connection, source: Source) -> None:
    """Leave no byte of deleted text in the index's files: merge the FTS5 segments (a deleted row
    stays in them until a merge) and truncate the WAL. The pages and cells that frees are zeroed
    (secure_delete); an index file made before that was on is VACUUMed once, for what it freed then.
    Clears the source's 'compact' mark, which a purge sets so that one killed before this still gets it."""
    if fts_levels(db) > FTS_LEVELS_MAX:
        db.execute("INSERT INTO fts(fts) VALUES('rebuild')")  # from the records table: one level
    else:
        db.execute("INSERT INTO fts(fts) VALUES('optimize')")
    state = load_state(db, source)
    if state.pop("compact", None):
        save_state(db, source, state)
    if not is_zeroed(db):
        db.execute("VACUUM")
        mark_zeroed(db)
    for _ in range(50):
        busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if not busy:
            return
        threading.Event().wait(0.05)


def apply_purge(db: sqlite3.Connection, source: Source, purged: list[dict[str, Any]], by: str,
                new_stat: tuple[int, int], install: Callable[[], None]) -> None:
    """Bring the index in line with a log whose purged lines became tombstones, and install that log.

    `purged` holds {line, offset, length (of the tombstone line), sha (of the tombstone line)} per
    record. The transaction stays open across `install` (the rename): other processes wait for it,
    and a crash before the commit leaves an index that no longer matches the log's inode, which the
    next catch-up rebuilds from the new log. Record text leaves the index here; `compact` then clears
    it from the FTS segments, free pages and the WAL.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        state = load_state(db, source)
        _tombstones(db, source, state, sorted(purged, key=lambda p: p["line"]), by)
        state["log_ino"], state["log_mtime"] = new_stat
        state["compact"] = True  # cleared by compact(): a purge killed before it still gets one
        save_state(db, source, state)
        install()
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def texts_of(db: sqlite3.Connection, lines: list[int]) -> list[str]:
    """The texts the index holds for these lines (a purge's, whose kept vectors must go too)."""
    out = []
    for line in lines:
        row = db.execute("SELECT text FROM records WHERE line = ? AND tomb = 0", (line,)).fetchone()
        if row is not None and row[0]:
            out.append(row[0])
    return out


def _tombstones(db: sqlite3.Connection, source: Source, state: dict[str, Any], order: list[dict[str, Any]],
                by: str) -> None:
    """Turn each purged row into its tombstone's, moving every later row back by the bytes removed
    before it; the state's offsets and last-line fingerprint follow."""
    last = state["last_line_offset"]  # where the last indexed line started, before the shifts
    shift = 0
    for i, p in enumerate(order):
        freed = _tombstone(db, p, shift, by)
        if last == p["offset"]:
            state["last_line_sha"] = p["sha"]
        shift += freed
        # The lines up to the next purged one move back by the bytes removed so far; past the last
        # one, up to the end of this source's key range: another log's rows never move.
        end = order[i + 1]["line"] if i + 1 < len(order) else source.base + (1 << KEY_BITS) + 1
        _shift(db, p["line"], end, shift)
        if last > p["offset"]:
            state["last_line_offset"] -= freed
    state["offset"] -= shift


def _tombstone(db: sqlite3.Connection, p: dict[str, Any], shift: int, by: str) -> int:
    """One purged row: its text out of every table, its place now the tombstone's. Returns the bytes freed."""
    line = p["line"]
    text, length, head = db.execute("SELECT text, length, head FROM records WHERE line = ?", (line,)).fetchone()
    db.execute("INSERT INTO fts(fts, rowid, text) VALUES('delete', ?, ?)", (line, text))
    for table in _line_tables(db):
        db.execute(f"DELETE FROM {table} WHERE line = ?", (line,))
    db.execute("UPDATE records SET text = '', source = NULL, client_op_id = NULL, session = NULL,"
               " text_key = NULL, length = ?, offset = offset - ?, tomb = 1, retracted_by = ?"
               " WHERE line = ?", (p["length"], shift, by, line))
    rehide(db, head)
    return int(length) - int(p["length"])


def _shift(db: sqlite3.Connection, after: int, upto: int, shift: int) -> None:
    """Move the rows of lines after `after` and before `upto` (both of one source) back by `shift` bytes."""
    db.execute("UPDATE records SET offset = offset - ? WHERE line > ? AND line < ?", (shift, after, upto))
    db.execute("UPDATE problems SET offset = offset - ? WHERE line > ? AND line < ?", (shift, after, upto))


def _line_tables(db: sqlite3.Connection) -> list[str]:
    """Derived tables keyed by log line besides records and problems (vectors, ...): a purged line's
    rows go from all of them."""
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                      " AND name NOT IN ('records', 'problems') AND name NOT LIKE 'fts%'")]
    return [n for n in names if any(c[1] == "line" for c in db.execute(f'PRAGMA table_info("{n}")'))]
