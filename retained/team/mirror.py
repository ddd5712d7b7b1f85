"""The verified local copy of every writer's log: `team/<dir>/writers/<writer>.jsonl`, plain files.

These are what the index reads as the team's logs, and they behave like `log.jsonl`: new verified lines
are appended (fsynced); only a purge, which replaces earlier lines by tombstones, rewrites a file, as a
whole and atomically. Each file's SHA-256 is noted in the sync state when it is written, so an
unchanged file is trusted on the next sync without being verified again, and a file changed behind
retained's back (or torn by a crash mid-append) is verified line by line: its verified lines are kept,
the rest is fetched again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from collections.abc import Mapping
from pathlib import Path

from . import state, wlog

#: Bytes every tombstone line and every purge record holds (lines are canonical JSON; `wlog.Entry`
#: looks for them first): a log without them holds none.
TOMBSTONE_MARK = b'"forgotten":'
PURGE_MARK = b'"action":"purge"'


def blob_oid(data: bytes) -> str:
    """The git object id (SHA-1 object format) of a blob with these bytes, without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Mirror:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files: dict[str, list[wlog.Entry]] = {}
        self.data: dict[str, bytes] = {}  # what `files` encodes to
        self.exact: set[str] = set()  # writers whose file on disk holds exactly `data`
        self._sha256: dict[str, str] = {}  # of `data`, per writer, once computed
        self._lines: dict[str, list[wlog.Entry]] = {}  # the line objects `data` was made of
        self._oids: dict[tuple[str, int], tuple[list[wlog.Entry], str]] = {}  # see `segments`
        self._ids: dict[str, tuple[list[wlog.Entry], dict[str, wlog.Entry]]] = {}  # see `_ids_of`
        self._marks: dict[tuple[str, bytes], tuple[bytes, bool]] = {}  # see `may_hold`

    def path(self, writer: str) -> Path:
        return self.directory / f"{writer}.jsonl"

    def load(self, trusted: dict[str, str], segments: Mapping[str, list[str]] | None = None, lines: int = 0) -> list[str]:
        """Read every writer's file; `trusted`: {writer: sha256} of the files as this machine last wrote
        them, `segments`: {writer: oids} of their pieces of `lines` lines as noted then (see `segments`).
        Returns one line per file that was damaged (its verified lines are kept)."""
        notes: list[str] = []
        parsed: dict[str, wlog.Parsed] = {}
        on_disk: dict[str, bytes] = {}
        for path in sorted(self.directory.glob("*.jsonl")) if self.directory.is_dir() else []:
            writer = path.stem
            if not wlog.WRITER_ID.match(writer):
                continue
            data = on_disk[writer] = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if trusted.get(writer) == digest:
                parsed[writer] = wlog.Parsed(wlog.trusted(data), None)
                self._sha256[writer] = digest
            else:
                parsed[writer] = wlog.parse_log(writer, data)
        if any(TOMBSTONE_MARK in data for data in on_disk.values()):  # else there is nothing to vouch for
            parsed = wlog.vouch(parsed)
        for writer, p in parsed.items():
            if p.problem:
                notes.append(f"this machine's copy of {p.problem}: kept the lines before it; the next fetch "
                             "brings the rest back")
                self._sha256.pop(writer, None)
            self.files[writer] = p.entries
            # A file taken whole is its own encoding; one cut short is encoded again.
            self.data[writer] = on_disk[writer] if p.problem is None else wlog.encode(p.entries)
            self._lines[writer] = list(p.entries)
            oids = (segments or {}).get(writer)
            if writer in self._sha256 and lines > 0 and oids and len(oids) == -(-len(p.entries) // lines):
                for n, oid in zip(range(0, len(p.entries), lines), oids, strict=True):
                    self._oids[(writer, n)] = (p.entries[n:n + lines], oid)
            if p.problem is None and self.data[writer] == on_disk[writer]:
                self.exact.add(writer)
        return notes

    def install(self, files: dict[str, list[wlog.Entry]]) -> list[str]:
        """Write each file whose content changed: its new lines appended when it only grew, else the
        whole new version in its place. Returns the writers written."""
        written = []
        for writer, entries in sorted(files.items()):
            if not entries and writer not in self.data:
                continue  # a writer with no line yet (this one, before its first record) has no file
            data, old = self._encoded(writer, entries), self.data.get(writer)
            if old != data or writer not in self.exact:  # a damaged file is written again too
                if writer in self.exact and old and data.startswith(old):
                    state.append_file(self.path(writer), data[len(old):])
                else:
                    state.replace_file(self.path(writer), data)
                written.append(writer)
                self._sha256.pop(writer, None)
            self.files[writer] = entries
            self.data[writer] = data
            self._lines[writer] = list(entries)
            self.exact.add(writer)
        return written

    def _encoded(self, writer: str, entries: list[wlog.Entry]) -> bytes:
        """What `entries` encode to; `data` serves for the line objects it was made of, when they start
        `entries` (a line's bytes never change: a tombstone is a new line)."""
        old, lines = self.data.get(writer), self._lines.get(writer)
        if old is None or lines is None or len(lines) > len(entries) or not _same(lines, entries):
            return _encode(entries)
        return old + _encode(entries[len(lines):]) if len(entries) > len(lines) else old

    def holding(self, ids: list[object], first: str) -> dict[str, tuple[str, wlog.Entry]]:
        """{id: (writer, line)} for those of `ids` some writer's file holds, looked up in `first`'s
        file line by line (this writer's own records are there), then, for the few left, by their bytes
        in the other files (lines are canonical JSON); past 64 left, line by line everywhere."""
        wanted = {i for i in ids if isinstance(i, str)}
        own = self._ids_of(first)
        found = {rid: (first, own[rid]) for rid in wanted if rid in own}
        wanted -= set(found)
        if not wanted:
            return found
        others = {w: entries for w, entries in self.files.items() if w != first}
        if len(wanted) > 64:
            found.update({rid: (w, e) for w, entries in others.items() for e in entries if (rid := _line_id(e)) in wanted})
            return found
        current = {w: wlog.encode(entries) for w, entries in others.items()}  # merged, maybe not written yet
        for rid in wanted:
            needle = b'"id":' + json.dumps(rid, ensure_ascii=False).encode("utf-8")
            for w, data in current.items():
                hit = self._line_with(w, data, needle, rid)
                if hit is not None:
                    found[rid] = (w, hit)
                    break
        return found

    def _ids_of(self, writer: str) -> dict[str, wlog.Entry]:
        """{record id: line} of the writer's log, kept for the line objects it was made of."""
        entries = self.files.get(writer, [])
        lines, ids = self._ids.get(writer, ([], {}))
        if len(lines) > len(entries) or not _same(lines, entries):
            lines, ids = [], {}
        for e in entries[len(lines):]:
            ids[_line_id(e)] = e
        self._ids[writer] = (list(entries), ids)
        return ids

    def _line_with(self, writer: str, data: bytes, needle: bytes, rid: str) -> wlog.Entry | None:
        pos = data.find(needle)
        while pos >= 0:  # the needle may also sit inside a field of some other record: check the line
            entry = self.files[writer][data.count(b"\n", 0, pos)]
            if entry.rec["id"] == rid:
                return entry
            pos = data.find(needle, pos + 1)
        return None

    def digests(self) -> dict[str, str]:
        for w, d in self.data.items():
            if w not in self._sha256:
                self._sha256[w] = hashlib.sha256(d).hexdigest()
        return {w: self._sha256[w] for w in self.data}

    def segments(self, writer: str, lines: int) -> list[tuple[str, list[wlog.Entry]]]:
        """(blob oid, lines) of each piece of `lines` lines of the writer's log, in order (the last one
        may hold fewer). An oid is remembered with the line objects it was computed from: a line's bytes
        never change (a tombstone is a new line), so a piece of the same objects has the same oid."""
        return self._pieces(writer, self.files.get(writer, []), lines)

    def may_hold(self, writer: str, mark: bytes) -> bool:
        """Whether a line of the writer's log may hold `mark`: False only when its lines are the ones on
        disk (`data`) and lines added since, and `mark` is in none of them (one search in `data` instead
        of a look at every line)."""
        lines, entries = self._lines.get(writer), self.files.get(writer, [])
        if not entries:
            return False
        if lines is None or len(lines) > len(entries) or not _same(lines, entries):
            return True
        data = self.data[writer]
        known = self._marks.get((writer, mark))
        if known is None or known[0] is not data:  # a sync asks the same of the same bytes a few times
            known = self._marks[(writer, mark)] = (data, mark in data)
        return known[1] or any(mark in e.raw for e in entries[len(lines):])

    def installed_segments(self, writer: str, lines: int) -> list[str]:
        """The oids of `segments` of the log as written to disk (what `data` holds), to note beside its digest."""
        return [oid for oid, _ in self._pieces(writer, self._lines.get(writer, []), lines)]

    def _pieces(self, writer: str, entries: list[wlog.Entry], lines: int) -> list[tuple[str, list[wlog.Entry]]]:
        out = []
        for n in range(0, len(entries), lines):
            piece = entries[n:n + lines]
            known = self._oids.get((writer, n))
            if known is None or len(known[0]) != len(piece) or not _same(known[0], piece):
                known = self._oids[(writer, n)] = (piece, blob_oid(wlog.encode(piece)))
            out.append((known[1], piece))
        return out


def _encode(entries: list[wlog.Entry]) -> bytes:
    """`wlog.encode`, without a copy of each line on the way (a first sync writes every writer's log)."""
    return b"".join(itertools.chain.from_iterable((e.raw, b"\n") for e in entries))


def _same(a: list[wlog.Entry], b: list[wlog.Entry]) -> bool:
    """Whether `b` starts with the very line objects of `a`."""
    return all(map(operator.is_, a, b))


def _line_id(entry: wlog.Entry) -> str:
    """A line's record id, without parsing the line when its bytes show it: `"id":"` can only be a key
    "id" with a string value (a quote inside a string is escaped), and every record has a string id at
    its top level, so a line with one such key and no escape in the value holds its id there."""
    raw = entry.raw
    at = raw.find(b'"id":"')
    if at >= 0 and raw.find(b'"id":"', at + 6) < 0:
        end = raw.find(b'"', at + 6)
        value = raw[at + 6:end]
        if end > 0 and b"\\" not in value:
            return value.decode("utf-8")
    return entry.rec["id"]
