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
import json
from pathlib import Path

from . import state, wlog


def blob_oid(data: bytes) -> str:
    """The git object id (SHA-1 object format) of a blob with these bytes, without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Mirror:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files: dict[str, list[wlog.Entry]] = {}
        self.data: dict[str, bytes] = {}  # what `files` encodes to
        self.exact: set[str] = set()  # writers whose file on disk holds exactly `data`

    def path(self, writer: str) -> Path:
        return self.directory / f"{writer}.jsonl"

    def load(self, trusted: dict[str, str]) -> list[str]:
        """Read every writer's file; `trusted`: {writer: sha256} of the files as this machine last wrote
        them. Returns one line per file that was damaged (its verified lines are kept)."""
        notes: list[str] = []
        parsed: dict[str, wlog.Parsed] = {}
        on_disk: dict[str, bytes] = {}
        for path in sorted(self.directory.glob("*.jsonl")) if self.directory.is_dir() else []:
            writer = path.stem
            if not wlog.WRITER_ID.match(writer):
                continue
            data = on_disk[writer] = path.read_bytes()
            if trusted.get(writer) == hashlib.sha256(data).hexdigest():
                parsed[writer] = wlog.Parsed(wlog.trusted(data), None)
            else:
                parsed[writer] = wlog.parse_log(writer, data)
        for writer, p in wlog.vouch(parsed).items():
            if p.problem:
                notes.append(f"this machine's copy of {p.problem}: kept the lines before it; the next fetch "
                             "brings the rest back")
            self.files[writer] = p.entries
            self.data[writer] = wlog.encode(p.entries)
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
            data, old = wlog.encode(entries), self.data.get(writer)
            if old != data or writer not in self.exact:  # a damaged file is written again too
                if writer in self.exact and old and data.startswith(old):
                    state.append_file(self.path(writer), data[len(old):])
                else:
                    state.replace_file(self.path(writer), data)
                written.append(writer)
            self.files[writer] = entries
            self.data[writer] = data
            self.exact.add(writer)
        return written

    def holding(self, ids: list[object], first: str) -> dict[str, tuple[str, wlog.Entry]]:
        """{id: (writer, line)} for those of `ids` some writer's file holds, looked up in `first`'s
        file line by line (this writer's own records are there), then, for the few left, by their bytes
        in the other files (lines are canonical JSON); past 64 left, line by line everywhere."""
        wanted = {i for i in ids if isinstance(i, str)}
        found = {e.rec["id"]: (first, e) for e in self.files.get(first, []) if e.rec["id"] in wanted}
        wanted -= set(found)
        others = {w: entries for w, entries in self.files.items() if w != first}
        if len(wanted) > 64:
            found.update({e.rec["id"]: (w, e) for w, entries in others.items() for e in entries if e.rec["id"] in wanted})
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

    def _line_with(self, writer: str, data: bytes, needle: bytes, rid: str) -> wlog.Entry | None:
        pos = data.find(needle)
        while pos >= 0:  # the needle may also sit inside a field of some other record: check the line
            entry = self.files[writer][data.count(b"\n", 0, pos)]
            if entry.rec["id"] == rid:
                return entry
            pos = data.find(needle, pos + 1)
        return None

    def digests(self) -> dict[str, str]:
        return {w: hashlib.sha256(d).hexdigest() for w, d in self.data.items()}

    def segments(self, writer: str, lines: int) -> list[bytes]:
        """The writer's log cut into pieces of `lines` lines each (the last one may hold fewer)."""
        entries = self.files.get(writer, [])
        return [wlog.encode(entries[i:i + lines]) for i in range(0, len(entries), lines)]
