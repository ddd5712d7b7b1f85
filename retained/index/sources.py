"""The logs an index takes in, and where it stands in each (its saved state, one JSON row per log).

Today there is one source, the store's own log.jsonl (`LOCAL`). Its state lives in the meta row
'state', as it always has, so an index made by an earlier version keeps working without a rebuild.

How a second log is added (issue 19: one read-only log per teammate, beside log.jsonl):
- **Source.** `Source(name, Log(path), state_key="state:<name>", base=n << KEY_BITS)` appended to
  `Index.log_sources`. Catch-up already walks every source in turn, each with its own state row (offset,
  line, chain position, inode, mtime) and its own "nothing new" fast path, so nothing in
  `catchup.py` changes. A teammate's log is read-only here: it is never locked, appended or purged.
- **Row identity.** A row's key (records.line, fts rowid, vectors.line, problems.line) is
  `source.key(line number)` = base + line. The local log has base 0, so its keys stay its line
  numbers and no existing row, vector or full-text entry moves. Source n owns keys
  [n << 40, (n + 1) << 40): 2^40 lines per log. Record ids stay unique across sources (records_id);
  a second copy of an id is a 'duplicate' problem of the source that brought it, as within one log.
- **Reading bytes back.** A row's offset and length point into its own source's file: a reader
  (`Store.get`, verify, export, purge) picks the log by `key >> KEY_BITS` before `read_at`.
- **Ordering.** Within a source, key order is log order. Across sources it is not time order: the
  newest-first reads that order by `line` then order by the record's clock (issue 19's hybrid
  logical clock, a column added by a migration that fills it for the local rows in place), with
  the key as the tie-break so every clone agrees.
- **Replacement.** A source whose file was replaced (a purge elsewhere, a restored copy) today
  clears every derived table and every source's state, so each is read again; with several
  sources that stays correct, only slower than clearing the one key range.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from ..log import Log

from ..records import GENESIS

LOCAL = "local"
KEY_BITS = 40  # a source's row keys: base + line, base = source number << KEY_BITS
#: meta key: {source name: number}, each teammate's log numbered once, on first sight, and for good
SOURCES = "sources"

EMPTY_STATE: dict[str, Any] = {"offset": 0, "line": 0, "seq": 0, "sha256": GENESIS, "after_bad": False,
                               "last_line_offset": -1, "last_line_sha": "", "log_ino": 0, "log_mtime": 0}


class Source:
    """One log the index reads: its name, the Log, the meta key of its saved state, its first row key."""

    __slots__ = ("name", "log", "state_key", "base", "writer", "scope")

    def __init__(self, name: str, log: Log, *, state_key: str, base: int = 0, writer: str | None = None,
                 scope: str | None = None) -> None:
        self.name, self.log, self.state_key, self.base = name, log, state_key, base
        self.writer = writer  # a teammate's log: the writer whose file it is (None: the store's own log)
        # a teammate's log: the scope its records are filed under here, whatever each line claims (the
        # project the ref is shared for, or global for the personal ref); None: the store's own log
        self.scope = scope

    def key(self, line_number: int) -> int:
        """The row key of this source's line `line_number` (1-based)."""
        return self.base + line_number

    def stat(self) -> tuple[int, int, int]:
        """(size, inode, mtime in ns) of the log file; zeros when there is none yet."""
        try:
            st = os.stat(self.log.path)
            return st.st_size, st.st_ino, st.st_mtime_ns
        except FileNotFoundError:
            return 0, 0, 0


def local(log: Log) -> Source:
    """The store's own log.jsonl: row keys equal line numbers, state in the meta row 'state'."""
    return Source(LOCAL, log, state_key="state")


def numbered(db: sqlite3.Connection, logs: list[tuple[str, str, Log, str]]) -> list[Source]:
    """Sources for teammates' logs, given as (name, writer, Log, scope): each keeps the number it was
    given when the index first met it (new ones get the next free number), so no row key ever moves."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (SOURCES,)).fetchone()
    known: dict[str, int] = json.loads(row[0]) if row is not None else {}
    fresh = [name for name, _, _, _ in logs if name not in known]
    if fresh:
        nxt = max(known.values(), default=0) + 1
        for name in fresh:
            known[name], nxt = nxt, nxt + 1
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (SOURCES, json.dumps(known, sort_keys=True)))
    return [Source(name, log, state_key=f"state:{name}", base=known[name] << KEY_BITS, writer=writer, scope=scope)
            for name, writer, log, scope in logs]


def stale(db: sqlite3.Connection, present: list[Source]) -> bool:
    """Whether the index holds rows of a teammate's log that is no longer read (sharing turned off)."""
    names = {s.name for s in present}
    return any(key[len("state:"):] not in names
               for (key,) in db.execute("SELECT key FROM meta WHERE key LIKE 'state:%'"))


def load_state(db: sqlite3.Connection, source: Source) -> dict[str, Any]:
    """Where the index stands in this source (EMPTY_STATE when it has read nothing of it yet)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (source.state_key,)).fetchone()
    state = dict(EMPTY_STATE)
    if row is not None:
        state.update(json.loads(row[0]))
    return state


def save_state(db: sqlite3.Connection, source: Source, state: dict[str, Any]) -> None:
    """One write per catch-up: the whole state as one JSON row."""
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (source.state_key, json.dumps(state, sort_keys=True)))


def unchanged(state: dict[str, Any], stat: tuple[int, int, int]) -> bool:
    """Whether the log is exactly as the index last saw it (size, inode, mtime)."""
    size, ino, mtime = stat
    return size == state["offset"] and ino == state["log_ino"] and mtime == state["log_mtime"]
