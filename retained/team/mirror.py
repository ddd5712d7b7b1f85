"""The verified local copy of every writer's log: `team/<dir>/writers/<writer>.jsonl`, plain files.

These are what the index reads as the team's logs. A file is only ever replaced whole by a version that
was verified (and merged) here; each file's SHA-256 is noted in the sync state when it is written, so
an unchanged file is trusted on the next sync without being verified again, and a file changed behind
retained's back is verified line by line (its verified lines kept, the rest fetched again).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import state, wlog


def blob_oid(data: bytes) -> str:
    """The git object id (SHA-1 object format) of a blob with these bytes, without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Mirror:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files: dict[str, list[wlog.Entry]] = {}
        self.data: dict[str, bytes] = {}  # each file's bytes as on disk (what `files` encodes to)

    def path(self, writer: str) -> Path:
        return self.directory / f"{writer}.jsonl"

    def load(self, trusted: dict[str, str]) -> list[str]:
        """Read every writer's file; `trusted`: {writer: sha256} of the files as this machine last wrote
        them. Returns one line per file that was damaged (its verified lines are kept)."""
        notes: list[str] = []
        parsed: dict[str, wlog.Parsed] = {}
        for path in sorted(self.directory.glob("*.jsonl")) if self.directory.is_dir() else []:
            writer = path.stem
            if not wlog.WRITER_ID.match(writer):
                continue
            data = path.read_bytes()
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
        return notes

    def install(self, files: dict[str, list[wlog.Entry]]) -> list[str]:
        """Replace each file whose content changed by its new version; returns the writers written."""
        written = []
        for writer, entries in sorted(files.items()):
            data = wlog.encode(entries)
            if self.data.get(writer) != data:
                state.replace_file(self.path(writer), data)
                written.append(writer)
            self.files[writer] = entries
            self.data[writer] = data
        return written

    def digests(self) -> dict[str, str]:
        return {w: hashlib.sha256(d).hexdigest() for w, d in self.data.items()}

    def oids(self) -> dict[str, str]:
        return {w: blob_oid(d) for w, d in self.data.items()}
