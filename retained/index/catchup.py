"""Reading log lines into the tables: one row per record, its full-text entry, supersede links,
retractions, per-scope counts and the problems (corrupt lines, chain breaks, reused ids) met on the way.

`advance` is one catch-up of one source in one transaction: it notices a log that was replaced or
edited in place (and then starts over), reads the lines after the saved state, and saves the new
state. Lines are read in log order, so a correction or a retraction always meets its target already
indexed. Nothing here decides when to catch up; the `Index` facade does (see its fast path).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from ..log import ChainState, Line, Problem
from ..records import FORGET_KIND, GLOBAL_SCOPE, BadLine, text_key
from ..records import parse_line as records_parse
from ..team.fields import confined
from .clock import of_record
from .schema import ZEROED
from .sources import EMPTY_STATE, KEY_BITS, SOURCES, Source, load_state, save_state

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
        elif rec is not None and problems.get(key) not in ("duplicate", "refused"):
            return True  # a line once unreadable reads again: index it
    return pending is not None


def clear(db: sqlite3.Connection, seen: set[str]) -> None:
    """Empty every derived table (vectors too) and every source's state; `seen` is the caller's cache
    of scopes already noted in scope_keys."""
    db.execute("INSERT INTO fts(fts) VALUES('delete-all')")
    for table in ("records", "problems", "scope_counts", "kind_counts", "scope_keys", "vectors", "forget_targets",
                  "also_supersedes", "forks"):
        db.execute(f"DELETE FROM {table}")
    seen.clear()
    # ZEROED is a fact about the file, not the logs; SOURCES keeps each log's row keys where they were.
    db.execute("DELETE FROM meta WHERE key NOT IN (?, ?)", (ZEROED, SOURCES))


def index_from(db: sqlite3.Connection, source: Source, state: dict[str, Any], progress: Progress | None,
               size: int, seen: set[str]) -> int:
    """Index the complete lines after `state` (updated in place); returns how many were read."""
    chain = ChainState(state["seq"], state["sha256"], state["after_bad"])
    last: Line | None = None
    batch: list[tuple[Any, ...]] = []
    clock = _local_clock(db, source, state)
    n = 0
    for line in source.log.lines(state["offset"], state["line"]):
        rec, problem = chain.feed(line)
        if problem is not None:
            add_problem(db, source.key(problem.line), problem)
        if rec is not None and source.writer is not None:
            why = None if source.scope is None else confined(rec, source.scope)
            if why is not None:  # kept in the chain, never read as memory
                add_problem(db, source.key(line.number), Problem(line.number, line.offset, rec["seq"], "refused",
                                                                 f"writer {source.writer}: line {line.number}: {why}"))
                rec = None
        if rec is not None:
            order = of_record(rec, clock)
            if clock is not None:
                clock = order
            batch.append(_row(rec, line, source.key(line.number), source, order))
            if rec.get("supersedes") or len(batch) >= _BATCH:
                _flush(db, batch, seen, source)
                batch = []
        last = line
        n += 1
        if progress is not None and n % 5000 == 0:
            progress(line.end, size)
    _flush(db, batch, seen, source)
    if last is not None:
        state.update(offset=last.end, line=last.number, seq=chain.seq, sha256=chain.sha256,
                     after_bad=chain.after_bad, last_line_offset=last.offset,
                     last_line_sha=hashlib.sha256(last.raw + b"\n").hexdigest())
    if clock is not None:
        state["clock"] = list(clock)
    if progress is not None:
        progress(size, size)
    return n


def _local_clock(db: sqlite3.Connection, source: Source, state: dict[str, Any]) -> tuple[int, int] | None:
    """The clock of the last row of the local log (None for a teammate's log, whose rows carry theirs)."""
    if source.writer is not None:
        return None
    saved = state.get("clock")
    if isinstance(saved, list) and len(saved) == 2:
        return int(saved[0]), int(saved[1])
    if not state["line"]:
        return 0, 0
    row = db.execute("SELECT ord_ms, ord_n FROM records WHERE line > ? AND line <= ? ORDER BY line DESC LIMIT 1",
                     (source.base, source.base + (1 << KEY_BITS))).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _text(rec: dict[str, Any], name: str) -> str | None:
    value = rec.get(name)
    return value if isinstance(value, str) else None


def _author(rec: dict[str, Any]) -> str | None:
    author = rec.get("author")
    if not isinstance(author, dict):
        return None
    name, email = author.get("name"), author.get("email")
    name = name if isinstance(name, str) and name else None
    email = email if isinstance(email, str) and email else None
    if name and email:
        return f"{name} <{email}>"
    return name or email


def _row(rec: dict[str, Any], line: Line, key: int, source: Source, order: tuple[int, int]) -> tuple[Any, ...]:
    """The records row of one record (in _flush's column order), then its retraction action, if any."""
    scope = rec.get("scope") if source.scope is None else source.scope
    tomb = "text" not in rec
    forgotten = rec.get("forgotten") if tomb else None
    life = None
    if rec["kind"] == FORGET_KIND and not tomb and rec.get("action") in ("retract", "undo"):
        targets = rec.get("targets")
        if isinstance(targets, list):
            life = (rec["action"], [t for t in targets if isinstance(t, str)])
    elif rec["kind"] == FORGET_KIND and not tomb and rec.get("action") == "purge" and source.writer is None:
        # This machine's purge of teammates' records (they live in writer logs, which only a sync
        # rewrites): their text leaves the index now, and a row that arrives later arrives purged.
        theirs = [p.get("id") for p in rec.get("purged") or [] if isinstance(p, dict) and p.get("writer")]
        if theirs:
            life = ("purge", [t for t in theirs if isinstance(t, str)])
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
        source.writer, None if tomb else _author(rec), order[0], order[1],
        _seen(rec) if source.writer is not None else None,
        life, _resolves(rec),
    )


def _seen(rec: dict[str, Any]) -> str | None:
    seen = rec.get("seen")
    if not isinstance(seen, dict):
        return None
    return json.dumps({w: n for w, n in seen.items() if isinstance(n, int)}, sort_keys=True)


def _resolves(rec: dict[str, Any]) -> list[str]:
    more = rec.get("resolves")
    return [t for t in more if isinstance(t, str)] if isinstance(more, list) and "text" in rec else []


_INSERT = ("INSERT INTO records (line, seq, id, offset, length, ts, kind, scope, source, supersedes,"
           " client_op_id, session, sha256, text, head, retracted_by, tomb, hidden, text_key,"
           " writer, author, ord_ms, ord_n, seen)"
           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _flush(db: sqlite3.Connection, batch: list[tuple[Any, ...]], seen: set[str], source: Source) -> None:
    if not batch:
        return
    # Rows of other logs that name a record before it arrives (a correction, a retraction): only then
    # does each new row look for them.
    several = (source.writer is not None or not _single_log(db)) and _any_refs(db)
    added: Counter[tuple[str, str]] = Counter()  # counted once a batch: two upserts a row were a third of its cost
    for row in batch:
        key, rid, kind, scope, supersedes, text, tomb, hidden, life, resolves = (
            row[0], row[2], row[6], row[7], row[9], row[13], row[16], row[17], row[24], row[25])
        try:
            db.execute(_INSERT, row[:24])
        except sqlite3.IntegrityError:
            if not _displaces(db, row):
                continue
            db.execute(_INSERT, row[:24])
        if not tomb:
            db.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (key, text))
        if not hidden:
            added[scope, kind] += 1
            _note_scope(db, scope, seen, team=source.writer is not None)
        if supersedes:
            _link(db, key, rid, supersedes)
        for other in resolves:  # a write that supersedes several versions (a fork's resolution)
            db.execute("INSERT INTO also_supersedes VALUES (?, ?)", (key, other))
            _link(db, key, rid, other)
        if life is not None:
            _apply_forget(db, key, rid, *life)
        if several:
            _late(db, key, rid)
    for (scope, kind), n in added.items():
        count(db, scope, n, kind)


def _claimant(writer: str | None, seq: int) -> str:
    return f"writer {writer} line {seq}" if writer else f"this store's log line {seq}"


def _displaces(db: sqlite3.Connection, row: tuple[Any, ...]) -> bool:
    """A row whose id another row holds (issue 29 item 4): the clash is a 'duplicate' problem naming
    both claims, whatever order the sources were read in. The row kept is the same on every clone: a
    record of this store's own log first, then the lower team clock (ord_ms, ord_n), then the writer
    id; within one log, the line first in it. True when `row` wins and the row it displaces is gone
    (only a plain record is displaced: one that nothing links to and that links to nothing; else the row
    indexed first stays)."""
    key, rid, writer = row[0], row[2], row[19]
    old = db.execute("SELECT line, seq, offset, writer, ord_ms, ord_n, kind, scope, hidden, tomb, text, supersedes,"
                     " retracted_by FROM records WHERE id = ?", (rid,)).fetchone()
    if old is None:  # not an id clash: let the error say what it is
        raise sqlite3.IntegrityError(f"record row {key} could not be indexed")
    line, seq, offset, owner, ms, n, kind, scope, hidden, tomb, text, supersedes, retracted = old
    mine, theirs = (writer is not None, row[21] or 0, row[22] or 0, writer or ""), \
        (owner is not None, ms or 0, n or 0, owner or "")
    plain = not supersedes and not retracted and not tomb and kind != FORGET_KIND and db.execute(
        "SELECT 1 FROM records WHERE supersedes = ? UNION ALL SELECT 1 FROM also_supersedes WHERE target = ? OR line = ?"
        " LIMIT 1", (rid, rid, line)).fetchone() is None
    wins = writer != owner and mine < theirs and plain  # within one log, the first line keeps its id
    kept, lost = (_claimant(writer, row[1]), _claimant(owner, seq)) if wins else \
        (_claimant(owner, seq), _claimant(writer, row[1]))
    reason = f"id {rid} is claimed by {lost} and {kept}: kept {kept}, published first"
    if not wins:
        add_problem(db, key, Problem(key, row[3], row[1], "duplicate", reason))
        return False
    db.execute("INSERT INTO fts(fts, rowid, text) VALUES('delete', ?, ?)", (line, text))
    db.execute("DELETE FROM vectors WHERE line = ?", (line,))
    if not hidden:
        count(db, scope, -1, kind)
    db.execute("DELETE FROM records WHERE line = ?", (line,))
    add_problem(db, line, Problem(line, offset, seq, "duplicate", reason))
    return True


def _single_log(db: sqlite3.Connection) -> bool:
    """Whether the index holds rows of the local log only (then no record can arrive after a row that
    names it, and the late links below cost nothing)."""
    return db.execute("SELECT 1 FROM records WHERE line > ? LIMIT 1", (1 << KEY_BITS,)).fetchone() is None


def _any_refs(db: sqlite3.Connection) -> bool:
    return any(db.execute(q).fetchone() is not None for q in (
        "SELECT 1 FROM records WHERE supersedes IS NOT NULL LIMIT 1", "SELECT 1 FROM forget_targets LIMIT 1",
        "SELECT 1 FROM also_supersedes LIMIT 1"))


def _same_log(a: int, b: int) -> bool:
    return a >> KEY_BITS == b >> KEY_BITS


def _link(db: sqlite3.Connection, key: int, rid: str, supersedes: str) -> None:
    """Row `key` supersedes record `supersedes`: it becomes the head of that record's chain. Within one
    log the target is an earlier line; across logs (a teammate's correction) it may sit anywhere. A
    target another log's record already superseded, by a version this one did not see, is a fork:
    both versions stay current (`forks`), the target in the chain of the first in the team's order."""
    target = db.execute("SELECT line, head, superseded_by, retracted_by FROM records WHERE id = ?",
                        (supersedes,)).fetchone()
    if target is None or (_same_log(target[0], key) and target[0] >= key):
        return
    if target[2] is not None and target[2] != rid:
        other = db.execute("SELECT line FROM records WHERE id = ?", (target[2],)).fetchone()
        if other is not None and not _all_local(key, target[0], other[0]) and not _saw(db, key, other[0]):
            _fork(db, supersedes, target[0], other[0], key)
            return
    old_head = target[1]
    new_head = db.execute("SELECT head FROM records WHERE line = ?", (key,)).fetchone()[0]
    if old_head == new_head:
        return
    old_scope, old_hidden, old_kind = db.execute(
        "SELECT scope, hidden, kind FROM records WHERE line = ?", (old_head,)).fetchone()
    db.execute("UPDATE records SET superseded_by = ? WHERE line = ?", (rid, old_head))
    db.execute("UPDATE records SET head = ? WHERE head = ?", (new_head, old_head))
    if not old_hidden:
        count(db, old_scope, -1, old_kind)
    if target[3] is not None and not _saw_line(db, key, target[3]):
        # delete wins: a retraction this correction did not see hides the correction too
        db.execute("UPDATE records SET retracted_by = ? WHERE line = ? AND retracted_by IS NULL", (target[3], key))
    rehide(db, new_head)


def _all_local(*keys: int) -> bool:
    return all(k >> KEY_BITS == 0 for k in keys)


def _saw(db: sqlite3.Connection, key: int, other: int) -> bool:
    """Whether row `key`'s record was written having seen row `other`'s: an earlier line of the same log,
    or a line its `seen` heads cover. A record without `seen` (a local one, or a teammate's that saw no
    one) is taken not to have seen another log's line: a fork is shown, never a silent pick."""
    if _same_log(key, other):
        return other < key
    mine = db.execute("SELECT seen FROM records WHERE line = ?", (key,)).fetchone()
    theirs = db.execute("SELECT writer, seq FROM records WHERE line = ?", (other,)).fetchone()
    if mine is None or mine[0] is None or theirs is None or theirs[0] is None:
        return False
    heads = json.loads(mine[0])
    return isinstance(heads.get(theirs[0]), int) and heads[theirs[0]] >= theirs[1]


def _saw_line(db: sqlite3.Connection, key: int, forget_id: str) -> bool:
    row = db.execute("SELECT line FROM records WHERE id = ?", (forget_id,)).fetchone()
    return row is not None and _saw(db, key, row[0])


def _order(db: sqlite3.Connection, line: int) -> tuple[Any, ...]:
    """The order of a fork's versions: (ts, id), what the record itself carries, so that every clone
    agrees (a local row's clock is not the one its writer log gives it)."""
    return tuple(db.execute("SELECT ts, id FROM records WHERE line = ?", (line,)).fetchone())


def _fork(db: sqlite3.Connection, target_id: str, target: int, first: int, second: int) -> None:
    """Two versions superseded `target_id` concurrently: note the fork. The target (and the versions
    before it) sit in the chain of whichever version comes first in the team's order, the same on
    every clone whatever order the logs arrived in."""
    db.execute("INSERT OR IGNORE INTO forks VALUES (?, ?)", (target_id, first))
    db.execute("INSERT OR IGNORE INTO forks VALUES (?, ?)", (target_id, second))
    if _order(db, second) >= _order(db, first):
        return
    # The new version comes first: move the target and the versions before it into its chain.
    old_head = db.execute("SELECT head FROM records WHERE line = ?", (first,)).fetchone()[0]
    new_head = db.execute("SELECT head FROM records WHERE line = ?", (second,)).fetchone()[0]
    sid = db.execute("SELECT id FROM records WHERE line = ?", (second,)).fetchone()[0]
    before, cur = [target], target
    while True:
        prev = db.execute("SELECT p.line FROM records r JOIN records p ON p.id = r.supersedes WHERE r.line = ?"
                          " AND p.head = ?", (cur, old_head)).fetchone()
        if prev is None or prev[0] in before:
            break
        before.append(prev[0])
        cur = prev[0]
    db.execute(f"UPDATE records SET head = ? WHERE line IN ({','.join('?' * len(before))})", (new_head, *before))
    db.execute("UPDATE records SET superseded_by = ? WHERE line = ?", (sid, target))
    rehide(db, old_head)
    rehide(db, new_head)


def _late(db: sqlite3.Connection, key: int, rid: str) -> None:
    """Row `key` (record `rid`) arrived after rows of other logs that name it: a correction of it, a
    retraction of it. Apply them now, as if they had come after it."""
    for skey, sid in db.execute("SELECT line, id FROM records WHERE (supersedes = ? OR line IN (SELECT line FROM"
                                " also_supersedes WHERE target = ?)) AND line != ? ORDER BY ord_ms, ord_n, line",
                                (rid, rid, key)).fetchall():
        if not _same_log(skey, key):
            _link(db, skey, sid, rid)
    for fkey, fid, action in db.execute("SELECT line, forget, action FROM forget_targets WHERE target = ? ORDER BY"
                                        " ord_ms, ord_n, line", (rid,)).fetchall():
        if not _same_log(fkey, key):
            _apply_forget(db, fkey, fid, action, [rid], late=True)


def _note_scope(db: sqlite3.Connection, scope: str, seen: set[str], team: bool = False) -> None:
    if scope in seen:
        return
    seen.add(scope)
    if db.execute("SELECT 1 FROM scope_keys WHERE scope = ?", (scope,)).fetchone() is not None:
        return
    key = None
    if team and scope != GLOBAL_SCOPE:
        key = scope  # a teammate's record is filed under the project key itself
    elif os.path.isabs(scope) and os.path.isdir(scope):
        from ..project import identity

        ident = identity(scope)
        key = ident["key"] if ident else None
    db.execute("INSERT OR IGNORE INTO scope_keys VALUES (?, ?)", (scope, key))


def _apply_forget(db: sqlite3.Connection, key: int, rid: str, action: str, targets: list[str],
                  late: bool = False) -> None:
    """A retraction marks its targets (a retracted head hides its chain); an undo clears the mark.
    Purged records stay purged: their tombstones carry the mark themselves. Each target is noted in
    forget_targets, so that a target from another log that arrives later is marked then."""
    for target in targets:
        if not late:
            db.execute("INSERT INTO forget_targets (target, line, forget, action, ord_ms, ord_n)"
                       " SELECT ?, line, id, ?, ord_ms, ord_n FROM records WHERE line = ?", (target, action, key))
        row = db.execute("SELECT line, head FROM records WHERE id = ? AND tomb = 0 AND kind != ?",
                         (target, FORGET_KIND)).fetchone()
        if row is None or (_same_log(row[0], key) and row[0] >= key):
            continue
        if action == "purge":
            if row[0] >> KEY_BITS:  # a teammate's row: its text goes; the sync tombstones its line
                _purged_here(db, row[0], row[1], rid)
            continue
        before = db.execute("SELECT retracted_by FROM records WHERE line = ?", (row[0],)).fetchone()[0]
        db.execute("UPDATE records SET retracted_by = ? WHERE line = ?",
                   (rid if action == "retract" else None, row[0]))
        heads = {row[1]}
        for succ, head in _successors(db, target):
            if action == "retract" and not _all_local(key, succ) and not _saw(db, succ, key):
                # delete wins: a correction written without seeing this retraction goes with it
                db.execute("UPDATE records SET retracted_by = ? WHERE line = ? AND retracted_by IS NULL", (rid, succ))
                heads.add(head)
            elif action != "retract" and before is not None:
                db.execute("UPDATE records SET retracted_by = NULL WHERE line = ? AND retracted_by = ?", (succ, before))
                heads.add(head)
        for head in heads:
            rehide(db, head)


def _purged_here(db: sqlite3.Connection, line: int, head: int, by: str) -> None:
    """A teammate's row that a purge of this machine names: its text out of the full-text table, the
    vectors and the row, marked purged by `by`, until a sync replaces its line by the tombstone."""
    text = db.execute("SELECT text FROM records WHERE line = ?", (line,)).fetchone()[0]
    db.execute("INSERT INTO fts(fts, rowid, text) VALUES('delete', ?, ?)", (line, text))
    db.execute("DELETE FROM vectors WHERE line = ?", (line,))
    db.execute("UPDATE records SET text = '', source = NULL, session = NULL, text_key = NULL, tomb = 1,"
               " retracted_by = ? WHERE line = ?", (by, line))
    rehide(db, head)


def _successors(db: sqlite3.Connection, rid: str) -> list[tuple[int, int]]:
    """(line, head) of every record that supersedes `rid`, directly or through others (any log)."""
    found: list[tuple[int, int]] = []
    frontier, seen = [rid], {rid}
    while frontier:
        marks = ",".join("?" * len(frontier))
        rows = db.execute(f"SELECT line, head, id FROM records WHERE supersedes IN ({marks}) OR line IN (SELECT line"
                          f" FROM also_supersedes WHERE target IN ({marks}))", (*frontier, *frontier)).fetchall()
        frontier = [r[2] for r in rows if r[2] not in seen]
        seen.update(frontier)
        found += [(r[0], r[1]) for r in rows if r[2] in frontier]
    return found


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
