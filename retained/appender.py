"""Appending under the log's locks: the one way records are added (write, checkpoint, forget, purge,
import), each append proven and answered with a receipt.

`Store.appending()` takes the store's thread lock and the log's file lock, reads the tail (a torn
fragment is quarantined first), catches the index up, and yields an `Appender`. `append` seals a
record onto the tail and appends it; the log writes it, fsyncs it, reads it back and checks its
link (`Log.append`), and the receipt says which of those held. Successive appends chain onto each
other. `existing` proves a record already in the log (a repeated client_op_id, an exact duplicate),
and `rewrite` is a purge's one atomic replacement of the log, under the same locks.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from . import records
from .errors import StoreError
from .index import Index
from .log import Log, Tail

Receipt = dict[str, Any]


class Appender:
    """The log's end while the locks are held: `tail`, what reading it said (`warnings`), and what
    catching the index up said (`index_notes`; empty when the index is current and sound)."""

    def __init__(self, log: Log, index: Index, tail: Tail, index_notes: list[str],
                 index_error: Exception | None) -> None:
        self.log, self.index, self.tail = log, index, tail
        self.warnings = list(tail.warnings)
        self.index_notes = index_notes
        self._index_error = index_error
        self._clock: tuple[int, int] = (0, 0)

    def require_index(self) -> None:
        """Raise what kept the index from catching up: an operation that must read it current
        (forget, purge) stops here, before anything is written."""
        if self._index_error is not None:
            raise self._index_error

    def seal(self, fields: dict[str, Any], kind: str, text: str) -> dict[str, Any]:
        """A new record of `kind` holding `fields` and `text`, sealed onto the tail (not yet written)."""
        record = dict(fields)
        record.update(seq=self.tail.seq + 1, id=records.new_id(), ts=records.now_rfc3339(), kind=kind, text=text,
                      prev=self.tail.sha256, hlc=self.next_clock())
        return records.seal(record)

    def next_clock(self) -> list[int]:
        """The team clock of the record about to be sealed: past the wall clock, every clock the index
        holds (this log's and the teammates' it has read, less those running more than a day ahead),
        and the last record this appender sealed. It orders the record the same on every clone."""
        now = int(time.time() * 1000)
        last = self._clock
        if self._index_error is None:
            try:
                last = max(last, self.index.last_clock(now + records.MAX_CLOCK_DRIFT_MS))
            except sqlite3.Error:  # the derived index: the wall clock and this appender's last still order it
                pass
        self._clock = records.next_clock(last, now)
        return list(self._clock)

    def append(self, fields: dict[str, Any], kind: str, text: str, warnings: list[str] | None = None) -> Receipt:
        """Seal and append one new record; its receipt carries `warnings` after any failed check's reasons."""
        return self._put(self.seal(fields, kind, text), warnings or [])

    def append_sealed(self, record: dict[str, Any]) -> Receipt:
        """Append a record already sealed onto the tail (`seal`), as it is."""
        return self._put(record, [])

    def append_record(self, record: dict[str, Any], *, keep_clock: bool = False) -> Receipt:
        """Append a record that brings its own id, ts and kind (an import): seq and prev are set here,
        so it chains onto this log, and its clock, so it takes its place in this store's order (a
        clock from elsewhere is not trusted). `keep_clock`: the record keeps the `hlc` it brings (this
        machine's own record taken back from the team, whose clock orders it on every clone)."""
        rec = dict(record)
        rec.update(seq=self.tail.seq + 1, prev=self.tail.sha256)
        if not (keep_clock and isinstance(rec.get("hlc"), list)):
            rec["hlc"] = self.next_clock()
        return self._put(records.seal(rec), [])

    def _put(self, record: dict[str, Any], warnings: list[str]) -> Receipt:
        result = self.log.append(record, self.tail)
        durable = all(result["checks"].values())
        if result["checks"]["append"]:  # the next record links to this one, wherever it landed
            self.tail = Tail(record["seq"], record["sha256"], result["offset"] + len(result["line"]))
        return {
            "id": record["id"],
            "seq": record["seq"],
            "sha256": record["sha256"],
            "durable": durable,
            "checks": result["checks"],
            "warnings": (result["reasons"] if not durable else []) + list(warnings),
            "deduplicated": False,
        }

    def existing(self, row: dict[str, Any], warnings: list[str]) -> Receipt:
        """The receipt of a record already in the log (index `row`), proven by reading its line back:
        nothing is appended. The caller adds why nothing new was written."""
        warnings = list(warnings)
        raw = self.log.read_at(row["offset"], row["length"])
        ok = raw.endswith(b"\n")
        try:
            rec = records.parse_line(raw[:-1])
            ok = ok and rec["sha256"] == row["sha256"]
        except records.BadLine:
            ok = False
        checks = {"append": ok, "fsync": ok, "readback_match": ok, "chain": ok}
        if not ok:
            warnings.append(f"the record {row['id']} no longer reads back intact; run `retained verify`")
        return {"id": row["id"], "seq": row["seq"], "sha256": row["sha256"], "durable": ok,
                "checks": checks, "warnings": warnings, "deduplicated": True}

    def rewrite(self, edits: list[tuple[int, int, bytes]], record: dict[str, Any],
                index_edits: list[dict[str, Any]]) -> dict[str, bool]:
        """A purge's one rewrite: a copy of the log with each (offset, length, replacement) of `edits`
        applied and the sealed `record` appended, read back, then installed in the log's place inside
        the index's transaction that applies `index_edits` (see `Index.apply_purge`). Raises
        StoreError, with nothing changed, when another program appended meanwhile or the copy did not
        read back as written. Returns the checks (append, fsync, readback_match, chain)."""
        if self.log.size() != self.tail.end:
            raise StoreError("another program appended to the log without its lock during the purge",
                             hint="nothing was purged; retry")
        line = records.format_line(record)
        tmp, checks = self.log.rewrite(edits, line, self.tail.end)
        if not checks["readback_match"]:
            tmp.unlink(missing_ok=True)
            raise StoreError("the rewritten log did not read back as written; nothing was purged",
                             hint="check the disk (`retained verify`), then retry")
        st = os.stat(tmp)
        try:
            self.index.apply_purge(index_edits, record["id"], (st.st_ino, st.st_mtime_ns),
                                   lambda: self.log.install(tmp))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        checks["chain"] = self._ends_with(line)
        self.tail = Tail(record["seq"], record["sha256"], self.log.size())
        return checks

    def _ends_with(self, line: bytes) -> bool:
        """The installed log ends with `line`, which links to the record before it."""
        size = self.log.size()
        back = self.log.read_at(size - len(line), len(line))
        if back != line:
            return False
        again = records.parse_line(back[:-1])
        return again["prev"] == self.tail.sha256 and again["seq"] == self.tail.seq + 1
