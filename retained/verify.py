"""`retained verify`: the whole chain recomputed from the log (streaming, constant memory), reconciled
line by line with what the index holds, and what quarantine/ keeps that the log lacks.

The report never calls a store intact while a line is corrupt, a link is broken, a tombstone is
vouched for by no purge record, the log ends in a torn line, the index misses a record or holds one
the log does not, or quarantine/ holds a whole record the log no longer has.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from . import records
from .index import Index
from .index.sources import Source
from .log import QUARANTINE, ChainState, Line, Log, Problem


class _Walk:
    """One pass over the log beside the index's (offset, sha256) rows, both in log order. `vouching`:
    tombstones must be listed by a later purge record of the same log (a teammate's log has its
    tombstones vouched for by purge records of any writer, which the sync checked)."""

    def __init__(self, offsets: Iterator[tuple[int, str]], refused: set[int], vouching: bool = True) -> None:
        self.vouching = vouching
        # Offsets of the lines the index rightly leaves out and names: a scope the ref may not carry,
        # an id another line holds.
        self.refused = refused
        self.chain = ChainState()
        self.corrupt: list[dict[str, Any]] = []
        self.breaks: list[dict[str, Any]] = []
        self.first_break: dict[str, Any] | None = None
        self.valid = self.missing_from_index = self.index_only = 0
        self.tombstones: dict[tuple[Any, ...], Line] = {}  # until a later purge record lists them
        self._offsets = offsets
        self._pending = next(offsets, None)

    def feed(self, line: Line) -> None:
        rec, problem = self.chain.feed(line)
        if problem is not None:
            self._problem(problem)
        while self._pending is not None and self._pending[0] < line.offset:
            self._index_only()
        at_line = self._pending is not None and self._pending[0] == line.offset
        if rec is None:
            if at_line:
                self._index_only()
            return
        if not at_line and line.offset in self.refused:
            return
        self.valid += 1
        if self.vouching:
            self._vouch(rec, line)
        if not at_line:
            self.missing_from_index += 1
            return
        if self._pending is not None and self._pending[1] != rec["sha256"]:
            self.missing_from_index += 1
            self.index_only += 1
        self._pending = next(self._offsets, None)

    def finish(self) -> None:
        while self._pending is not None:
            self._index_only()
        for (_rid, seq, _sha), line in self.tombstones.items():
            item = {"line": line.number, "offset": line.offset, "seq": seq, "kind": "break",
                    "reason": "tombstone that no purge record lists"}
            self.breaks.append(item)
            if self.first_break is None or line.number < self.first_break["line"]:
                self.first_break = {"seq": seq, "line": line.number, "reason": item["reason"]}

    def _index_only(self) -> None:
        self.index_only += 1
        self._pending = next(self._offsets, None)

    def _problem(self, problem: Problem) -> None:
        (self.corrupt if problem.kind == "corrupt" else self.breaks).append(problem.as_dict())
        if self.first_break is None:
            self.first_break = {"seq": problem.seq, "line": problem.line, "reason": problem.reason}

    def _vouch(self, rec: dict[str, Any], line: Line) -> None:
        """Track tombstones until a later purge record lists them ({id, seq, sha256})."""
        if records.is_tombstone(rec):
            self.tombstones[(rec["id"], rec["seq"], rec["sha256"])] = line
        elif rec["kind"] == records.FORGET_KIND and rec.get("action") == "purge" and isinstance(rec.get("purged"), list):
            for p in rec["purged"]:
                if isinstance(p, dict):
                    self.tombstones.pop((p.get("id"), p.get("seq"), p.get("sha256")), None)


def verify(log: Log, index: Index, warnings: list[str],
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The verify report (see `Store.verify`); `warnings` are what catching the index up said."""
    size = log.size()
    walk = _Walk(index.iter_offsets(), index.refused_offsets())
    for n, line in enumerate(log.lines(), 1):
        walk.feed(line)
        if progress is not None and n % 5000 == 0:
            progress(line.end, size)
    walk.finish()
    if progress is not None:
        progress(size, size)
    team = [_team_log(index, source) for source in index.log_sources[1:]]
    torn = log.torn_tail()
    chain_ok = not walk.corrupt and not walk.breaks
    quarantine = quarantine_report(log, index)
    if quarantine["records"]:
        warnings.append(f"quarantine/ holds {len(quarantine['records'])} whole record(s) the log no longer has "
                        "(an acknowledged write cut off by damage?): " +
                        ", ".join(f"{q['id']} in {q['file']}" for q in quarantine["records"][:5]))
    return {
        "records": walk.valid,
        "chain_ok": chain_ok,
        "corrupt_lines": walk.corrupt[:100],
        "corrupt_count": len(walk.corrupt),
        "chain_breaks": walk.breaks[:100],
        "torn_tail": None if torn is None else {"offset": torn[0], "bytes": torn[1]},
        "missing_from_index": walk.missing_from_index,
        "index_only": walk.index_only,
        "coverage": 1.0 if walk.valid == 0 else round((walk.valid - walk.missing_from_index) / walk.valid, 6),
        "intact": (chain_ok and torn is None and walk.missing_from_index == 0 and walk.index_only == 0
                   and not quarantine["records"] and all(t["intact"] for t in team)),
        "team_logs": team,
        "first_break": walk.first_break,
        "last_seq": walk.chain.seq,
        "quarantine": quarantine,
        "warnings": warnings,
    }


def _team_log(index: Index, source: Source) -> dict[str, Any]:
    """One teammate's log the index reads, reconciled with its rows as the local log is: an index
    entry that points at the wrong bytes, or a line the index lacks, makes the store NOT INTACT."""
    walk = _Walk(index.iter_offsets(source), index.refused_offsets(source), vouching=False)
    for line in source.log.lines():
        walk.feed(line)
    walk.finish()
    intact = not walk.corrupt and not walk.breaks and walk.missing_from_index == 0 and walk.index_only == 0
    return {"writer": source.writer, "records": walk.valid, "missing_from_index": walk.missing_from_index,
            "index_only": walk.index_only, "corrupt_count": len(walk.corrupt), "chain_breaks": len(walk.breaks),
            "intact": intact}


def quarantine_report(log: Log, index: Index) -> dict[str, Any]:
    """What quarantine/ holds: torn fragments of unacknowledged writes, and (never to be reported as
    intact) whole valid records that the log lacks, e.g. a last line whose newline was lost."""
    files, size, found = 0, 0, []
    try:
        entries = sorted(p for p in (log.directory / QUARANTINE).iterdir() if p.is_file())
    except OSError:
        entries = []
    for path in entries:
        files += 1
        try:
            data = path.read_bytes()
        except OSError:
            continue
        size += len(data)
        try:
            rec = records.parse_line(data.rstrip(b"\n"))
        except records.BadLine:
            continue
        if records.is_tombstone(rec):
            continue
        try:
            known = index.by_id(rec["id"])
        except sqlite3.Error:
            known = None
        if known is None or known["sha256"] != rec["sha256"]:
            found.append({"file": path.name, "id": rec["id"], "seq": rec["seq"]})
    return {"files": files, "bytes": size, "records": found}
