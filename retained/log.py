"""The append-only, hash-chained JSONL log: the store's single source of truth.

Nothing here rewrites a record, with one exception a person asks for: a purge (`rewrite`) replaces
the purged lines by tombstones, in a new copy of the file that atomically takes the old one's place.
Otherwise the only bytes ever removed are a torn last line (an append that crashed before it was
acknowledged), and those are copied to `quarantine/` first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

from . import durable, records
from .errors import StoreError
from .paths import LOG_NAME as LOG_NAME  # named in paths.py, where the hook reads it without this module

LOCK_NAME = "log.lock"
QUARANTINE = "quarantine"
_CHUNK = 1 << 16
_BINARY = getattr(os, "O_BINARY", 0)  # Windows would otherwise turn b"\n" into b"\r\n"


class Line:
    """One complete line of the log as read from disk."""

    __slots__ = ("number", "offset", "raw")

    def __init__(self, number: int, offset: int, raw: bytes) -> None:
        self.number = number  # 1-based physical line number
        self.offset = offset  # byte offset of its first byte
        self.raw = raw  # without the trailing newline

    @property
    def end(self) -> int:
        return self.offset + len(self.raw) + 1


class Problem:
    """A line that breaks the promise of the format, as named by verify."""

    __slots__ = ("line", "offset", "seq", "kind", "reason")

    def __init__(self, line: int, offset: int, seq: int | None, kind: str, reason: str) -> None:
        self.line = line
        self.offset = offset
        self.seq = seq  # the record's seq, or the seq expected at this place when unreadable
        self.kind = kind  # "corrupt" (not a valid record) or "break" (valid record, wrong link)
        self.reason = reason

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "offset": self.offset, "seq": self.seq, "kind": self.kind, "reason": self.reason}


class ChainState:
    """What the chain walk remembers between lines; persisted by the index so it can resume."""

    __slots__ = ("seq", "sha256", "after_bad")

    def __init__(self, seq: int = 0, sha256: str = records.GENESIS, after_bad: bool = False) -> None:
        self.seq = seq
        self.sha256 = sha256
        self.after_bad = after_bad

    def feed(self, line: Line) -> tuple[dict[str, Any] | None, Problem | None]:
        """Check one line against the chain so far. Returns (record or None, problem or None)."""
        try:
            rec = records.parse_line(line.raw)
        except records.BadLine as bad:
            # A damaged line's own seq cannot be trusted (the flipped byte may be in it): name the
            # seq expected at this place.
            self.seq += 1
            self.after_bad = True
            return None, Problem(line.number, line.offset, self.seq, "corrupt", bad.reason)
        return rec, self.link(rec, line)

    def link(self, rec: dict[str, Any], line: Line) -> Problem | None:
        """Advance the chain over a record already known to be valid on its own."""
        problem = None
        if self.after_bad:
            # The record before this one is unreadable, so its link cannot be checked; a valid record
            # re-anchors the chain. Only a seq that jumps backwards is named.
            if rec["seq"] <= self.seq - 1:
                problem = Problem(line.number, line.offset, rec["seq"], "break", "seq goes backwards")
        elif rec["prev"] != self.sha256:
            problem = Problem(line.number, line.offset, rec["seq"], "break", "prev does not match the previous record's sha256")
        elif rec["seq"] != self.seq + 1:
            problem = Problem(line.number, line.offset, rec["seq"], "break", f"seq {rec['seq']} follows seq {self.seq}")
        self.seq, self.sha256, self.after_bad = rec["seq"], rec["sha256"], False
        return problem


class Tail:
    """The end of the log as the next append must see it."""

    __slots__ = ("seq", "sha256", "end", "warnings")

    def __init__(self, seq: int, sha256: str, end: int, warnings: list[str] | None = None) -> None:
        self.seq = seq  # highest seq seen at the end (next is seq + 1)
        self.sha256 = sha256  # sha256 of the last valid record (the next record's prev)
        self.end = end  # byte size of the log's complete lines
        self.warnings = warnings if warnings is not None else []


class Log:
    """One log file. The store's own is `<store>/log.jsonl`, locked through `log.lock` beside it; a log
    the store only reads (a teammate's, issue 19) is never locked or written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.directory = path.parent  # where quarantine/ and a purge's temporary copy go
        self.lock_path = path.with_suffix(".lock")  # log.jsonl -> log.lock
        self._swept = False  # discard_rewrites done by this object's first tail (a purge sweeps again itself)

    # -- safety -----------------------------------------------------------------------------
    def check_safe(self) -> None:
        """Refuse a log that is a symlink, hard-linked elsewhere, or outside the store."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise StoreError(
                f"{self.path} is a symbolic link; retained will not write through it",
                hint="replace the link with the real file, or point --dir at the directory that holds it",
            )
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{self.path} is not a regular file", hint="move it aside and retry")
        if st.st_nlink > 1:
            raise StoreError(
                f"{self.path} has {st.st_nlink} hard links; another name could change it behind retained's back",
                hint="copy it to a file of its own (cp, then mv over the link)",
            )
        # Not a link and a regular file, so it lies in the store directory itself: the only way for
        # log.jsonl to resolve elsewhere is a symbolic link in its last component, refused above.

    def lock(self):
        return durable.locked(self.lock_path)

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    # -- reading ----------------------------------------------------------------------------
    def lines(self, offset: int = 0, number: int = 0) -> Iterator[Line]:
        """Stream the complete lines from `offset` (line `number` + 1 on). A torn tail is not yielded."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            f.seek(offset)
            for raw in f:
                if not raw.endswith(b"\n"):
                    return  # torn tail: an append still under way or one that crashed
                number += 1
                yield Line(number, offset, raw[:-1])
                offset += len(raw)

    def torn_tail(self) -> tuple[int, int] | None:
        """(offset, length) of bytes after the last newline, or None when the log ends cleanly."""
        try:
            with open(self.path, "rb") as f:
                return _torn_span(f, f.seek(0, os.SEEK_END))
        except FileNotFoundError:
            return None

    def read_at(self, offset: int, length: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    # -- the tail, for appending --------------------------------------------------------------
    def tail(self) -> Tail:
        """Find the last valid record by reading backwards; quarantine a torn fragment.

        Must be called with the lock held. Cost is proportional to the bytes at the end that are
        not a valid record (normally one record), never to the size of the log.
        """
        warnings: list[str] = []
        max_seq = 0
        skipped = 0
        if not self._swept:  # once per process, not per write: a directory scan was ~30% of finding the tail
            self.discard_rewrites()
            self._swept = True
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return Tail(0, records.GENESIS, 0, warnings)
        with f:
            end = f.seek(0, os.SEEK_END)
            torn = _torn_span(f, end)
            if torn is not None:
                warnings.append(self._quarantine(*torn))
                end = torn[0]
            for _offset, raw in _lines_backwards(f, end):
                try:
                    rec = records.parse_line(raw)
                except records.BadLine as bad:
                    skipped += 1
                    seen = bad.record.get("seq") if isinstance(bad.record, dict) else None
                    if isinstance(seen, int) and not isinstance(seen, bool):
                        max_seq = max(max_seq, seen)
                    continue
                if skipped:
                    warnings.append(
                        f"{skipped} line(s) at the end of the log are not valid records; "
                        f"the new record links to seq {rec['seq']} (run `retained verify`)"
                    )
                return Tail(max(max_seq, rec["seq"]), rec["sha256"], end, warnings)
        if skipped:
            warnings.append(f"the log holds {skipped} line(s) and none is a valid record (run `retained verify`)")
        return Tail(max_seq, records.GENESIS, end, warnings)

    def _quarantine(self, offset: int, length: int) -> str:
        qdir = self.directory / QUARANTINE
        qdir.mkdir(mode=0o700, exist_ok=True)
        fragment = self.read_at(offset, length)
        digest = hashlib.sha256(fragment).hexdigest()[:12]
        target = qdir / f"torn-{offset}-{digest}.part"
        if not target.exists():
            durable.write_new_file(target, fragment)
        durable.truncate(self.path, offset)
        return (f"the log ended in a torn line ({length} bytes{_torn_names(fragment)}): a write cut short, by a "
                "crash before it was acknowledged or by damage after; moved it to "
                f"{QUARANTINE}/{target.name} so the next record does not glue onto it (`retained verify` shows "
                "whether the log lacks a record it held)")

    # -- appending ----------------------------------------------------------------------------
    def append(self, record: dict[str, Any], tail: Tail) -> dict[str, Any]:
        """Append one sealed record and prove it. Must be called with the lock held.

        Returns {"offset", "line_bytes", "checks", "reasons"}; every check must be True for the
        write to count as durable.
        """
        line = records.format_line(record)
        checks = {"append": False, "fsync": False, "readback_match": False, "chain": False}
        reasons: list[str] = []
        offset = self._write_line(line, checks, reasons)
        if checks["append"]:
            self._prove(record, tail, line, offset, checks, reasons)
        return {"offset": offset, "line": line, "checks": checks, "reasons": reasons}

    def _write_line(self, line: bytes, checks: dict[str, bool], reasons: list[str]) -> int:
        """Write `line` at the end in one piece and fsync it; returns the offset it starts at.

        Sets checks["append"] and checks["fsync"]; a line that could not be written whole is cut
        back, so the next writer never glues onto a partial line.
        """
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
        try:
            offset = os.fstat(fd).st_size
            try:
                durable.write_all(fd, line)
            except OSError as e:
                with contextlib.suppress(OSError):
                    durable.truncate(fd, offset)
                reasons.append(f"could not append to {self.path}: {e.strerror or e}; nothing was written "
                               "(free disk space or fix permissions, then retry)")
                return offset
            checks["append"] = True
            try:
                durable.fsync(fd)
                if created:
                    durable.fsync_dir(self.directory)
                checks["fsync"] = True
            except OSError as e:
                reasons.append(f"fsync failed: {e.strerror or e}")
            return offset
        finally:
            os.close(fd)

    def _prove(self, record: dict[str, Any], tail: Tail, line: bytes, offset: int,
               checks: dict[str, bool], reasons: list[str]) -> None:
        """Read the line back from the device and check its bytes and its link to `tail`."""
        back = self._read_back(offset, len(line))
        if back == line:
            checks["readback_match"] = True
        else:
            reasons.append(f"the bytes read back at offset {offset} differ from the bytes written")
        if offset != tail.end:
            reasons.append(f"another program appended without the lock (expected offset {tail.end}, got {offset})")
        try:
            again = records.parse_line(back[:-1])
            linked = again["prev"] == tail.sha256 and again["seq"] == tail.seq + 1 and again["sha256"] == record["sha256"]
            checks["chain"] = linked and offset == tail.end
            if not linked:
                reasons.append("the record read back does not link to the previous record")
        except records.BadLine as bad:
            reasons.append(f"the record read back is not valid: {bad.reason}")

    def _read_back(self, offset: int, length: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY | _BINARY)
        try:
            if hasattr(os, "posix_fadvise"):
                # The pages are clean after fsync: dropping them makes the read come from the device,
                # not from the copy in memory we just wrote.
                os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
            chunks = []
            while length:
                if hasattr(os, "pread"):
                    chunk = os.pread(fd, length, offset)
                else:  # pragma: no cover - Windows
                    os.lseek(fd, offset, os.SEEK_SET)
                    chunk = os.read(fd, length)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += len(chunk)
                length -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


    # -- purging: the one rewrite -------------------------------------------------------------
    def rewrite(self, edits: list[tuple[int, int, bytes]], tail_line: bytes, size: int) -> tuple[Path, dict[str, bool]]:
        """Write a copy of the log's first `size` bytes with each (offset, length, replacement) applied
        and `tail_line` appended, fsync it and read it back. Must be called with the lock held.

        Returns the temporary file (in the store directory, so `install` is an atomic rename) and the
        checks. Nothing the log holds is changed until `install`.
        """
        self.discard_rewrites()
        tmp = self.directory / f".{LOG_NAME}.purge-{os.getpid()}.tmp"
        checks = {"append": False, "fsync": False, "readback_match": False}
        digest = hashlib.sha256()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o600)
        try:
            with open(self.path, "rb") as src:
                pos = 0
                for offset, length, replacement in sorted(edits):
                    _copy(src, fd, pos, offset - pos, digest)
                    _write_all(fd, replacement, digest)
                    pos = offset + length
                _copy(src, fd, pos, size - pos, digest)
            _write_all(fd, tail_line, digest)
            checks["append"] = True
            durable.fsync(fd)
            checks["fsync"] = True
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        back = hashlib.sha256()
        with open(tmp, "rb") as f:
            if hasattr(os, "posix_fadvise"):  # read from the device, not from the pages just written
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            while chunk := f.read(1 << 20):
                back.update(chunk)
        checks["readback_match"] = back.digest() == digest.digest()
        return tmp, checks

    def install(self, tmp: Path) -> None:
        """Atomically put a rewritten copy in the log's place and make the rename durable."""
        durable.replace(tmp, self.path)

    def discard_rewrites(self) -> None:
        """Remove copies left by a purge that was killed before its rename (the old log still stands)."""
        for left in self.directory.glob(f".{LOG_NAME}.purge-*.tmp"):
            left.unlink(missing_ok=True)


def _write_all(fd: int, data: bytes, digest: Any) -> None:
    digest.update(data)
    durable.write_all(fd, data)


def _copy(src: Any, fd: int, offset: int, length: int, digest: Any) -> None:
    src.seek(offset)
    while length > 0:
        chunk = src.read(min(length, 1 << 20))
        if not chunk:
            raise StoreError("the log shrank while it was being rewritten", hint="nothing was changed; retry")
        _write_all(fd, chunk, digest)
        length -= len(chunk)


_TORN_ID = re.compile(rb'"id":"([^"\\]{1,128})"')
_TORN_SEQ = re.compile(rb'"seq":(\d{1,19})[,}]')


def _torn_names(fragment: bytes) -> str:
    """', record seq 7 (mem_...)' when a torn fragment still names its record, else ''."""
    rid, seq = _TORN_ID.search(fragment), _TORN_SEQ.search(fragment)
    if rid is None and seq is None:
        return ""
    named = f"seq {int(seq.group(1))}" if seq else ""
    if rid:
        name = rid.group(1).decode("utf-8", "replace")
        named = f"{named} ({name})" if named else name
    return f", record {named}"


def _torn_span(f: Any, size: int) -> tuple[int, int] | None:
    """(offset, length) of the bytes after the last newline of a file of `size` bytes, if any."""
    if size == 0:
        return None
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return None
    start = _last_newline_end(f, size)
    return start, size - start


def _last_newline_end(f: Any, size: int) -> int:
    """Offset just past the last b"\\n" before `size` (0 if there is none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - _CHUNK)
        f.seek(start)
        chunk = f.read(pos - start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def _lines_backwards(f: Any, end: int) -> Iterator[tuple[int, bytes]]:
    """Yield (offset, line without newline) for the complete lines before `end`, last first.

    Linear in the bytes read: a line longer than one chunk is gathered as a list of chunks and joined
    once, never re-copied for each chunk read before it (a huge hostile last line made that quadratic)."""
    if end == 0:
        return
    # `end` sits just after a newline; drop it so every split piece is a whole line.
    f.seek(end - 1)
    if f.read(1) != b"\n":
        raise StoreError("internal: log does not end at a line boundary", hint="run `retained verify` and report it")
    pos = end - 1
    carry: list[bytes] = []  # the pieces of the line that ends at the last newline seen, right to left
    chunk = 4096  # most records are small: start small, grow for big ones
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        data = f.read(pos - start)
        pos = start
        chunk = min(chunk * 4, _CHUNK)
        i = data.rfind(b"\n")
        while i >= 0:
            carry.append(data[i + 1 :])
            yield start + i + 1, b"".join(reversed(carry))
            carry = []
            data = data[:i]
            i = data.rfind(b"\n")
        carry.append(data)
    yield 0, b"".join(reversed(carry))
