"""A writer's log on the memory ref, as bytes and records. Pure; no I/O.

Each writer (one machine + user) appends only to its own file `writers/<writer>.jsonl`, in the format
of `log.jsonl` (docs/FORMAT.md): canonical JSON lines, its own `seq`/`prev`/`sha256` chain, tombstones
for purged lines. A line keeps the shared record's `id`, `ts`, `kind`, `text`, `scope`, ... and adds

- `writer`: the id of the writer whose file it is in,
- `author`: `{"name", "email"}` from git's configuration when it was published (absent if unset),
- `hlc`: `[ms, n]`, the hybrid logical clock (`hlc.py`), strictly increasing along the file,
- `seen` (records that supersede or forget only): `{writer: seq}`, how far each teammate's log had
  been read on this machine when the record was written: what it saw, for delete-wins.

A purge record (kind `forget`, action `purge`) lists `{"writer", "id", "seq", "sha256"}` of each line
it purged, in any writer's file; every clone replaces those lines by `records.tombstone(line, by=<the
first purge in the team's order that lists it>)`, the same bytes everywhere. Two versions of one
writer's file merge by content (`merge`): the longer extension of the same lines wins, a line and its
tombstone count as the same line, and a version that changed a line already held is refused.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .. import records, redact
from ..errors import UsageError
from . import fields, hlc

#: Keys a shared copy gains; a local record that already has one as a field of its own is not shared
#: (but `hlc`, which every record carries from its write on: its shared copy keeps it).
TEAM_KEYS = ("writer", "author", "hlc", "seen")
#: Keys of a local record that never leave the machine: its place in the local chain, the writer's
#: idempotency key, and what reads add.
LOCAL_ONLY = frozenset(("seq", "prev", "sha256", "client_op_id") + records.LIFECYCLE_KEYS)
#: Values redaction leaves alone: ids, times and labels, never free text.
_NOT_TEXT = frozenset(("id", "ts", "kind", "scope", "supersedes", "action", "targets"))
WRITER_ID = re.compile(r"[a-z0-9][a-z0-9_-]{2,63}\Z")


class Entry:
    """One line of a writer's file: its bytes (without the newline) and the record they hold, parsed
    when first asked for: a sync holds every line of every writer but looks into few of them. Lines
    are canonical JSON (a writer-log rule), so a purge record or a tombstone shows in its bytes."""

    __slots__ = ("raw", "_rec", "_purge", "_tombstone")

    def __init__(self, raw: bytes, rec: dict[str, Any] | None = None) -> None:
        self.raw = raw
        self._rec = rec
        self._purge: bool | None = None
        self._tombstone: bool | None = None

    @property
    def rec(self) -> dict[str, Any]:
        if self._rec is None:
            self._rec = json.loads(self.raw)
        return self._rec

    @property
    def ident(self) -> tuple[int, str, str]:
        """What makes two lines the same line: seq, id and the original hash (a tombstone keeps all three)."""
        return self.rec["seq"], self.rec["id"], self.rec["sha256"]

    @property
    def purge(self) -> bool:
        if self._purge is None:
            self._purge = b'"action":"purge"' in self.raw and is_purge(self.rec)
        return self._purge

    @property
    def tombstone(self) -> bool:
        if self._tombstone is None:
            self._tombstone = b'"forgotten":' in self.raw and records.is_tombstone(self.rec)
        return self._tombstone

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"Entry({self.raw[:60]!r}...)"


class Parsed(NamedTuple):
    """A writer's file as read: the verified lines from the start, and the first problem (one line)."""

    entries: list[Entry]
    problem: str | None


class Merged(NamedTuple):
    entries: list[Entry]
    pulled: int  # lines the other version added
    refused: str | None  # one line when the other version rewrote a line this one holds


class Target(NamedTuple):
    writer: str
    id: str
    seq: int
    sha256: str


def encode(entries: Iterable[Entry]) -> bytes:
    return b"".join(e.raw + b"\n" for e in entries)


def is_purge(rec: Mapping[str, Any]) -> bool:
    return rec.get("kind") == records.FORGET_KIND and rec.get("action") == "purge" and "text" in rec


def purge_targets(rec: Mapping[str, Any]) -> list[Target]:
    """The lines a purge record lists (entries that are not well formed are left out)."""
    out = []
    for item in rec.get("purged") or []:
        if not isinstance(item, dict):
            continue
        w, rid, seq, sha = item.get("writer"), item.get("id"), item.get("seq"), item.get("sha256")
        if isinstance(w, str) and isinstance(rid, str) and isinstance(sha, str) and isinstance(seq, int) \
                and not isinstance(seq, bool):
            out.append(Target(w, rid, seq, sha))
    return out


def last_clock(entries: list[Entry]) -> hlc.HLC:
    """The clock of the last line that still has one (tombstones keep none)."""
    for e in reversed(entries):
        clock = hlc.parse(e.rec.get("hlc"))
        if clock is not None:
            return clock
    return hlc.ZERO


# -- reading and verifying ------------------------------------------------------------------------------
def _line_problem(writer: str, rec: dict[str, Any], clock: hlc.HLC, raw: bytes, new: hlc.HLC | None) -> str | None:
    """What the writer log adds to a valid record's checks (a tombstone has only the chain to keep):
    every field's shape (fields.problem), the writer's own name, a clock that moves forward. `new`:
    the line's clock, `hlc.parse(rec["hlc"])`."""
    if records.is_tombstone(rec):
        return None
    if rec.get("writer") != writer:
        return f"it names writer {str(rec.get('writer'))[:40]!r}, not the file's writer"
    if new is None:
        return "its hlc is not [ms, counter]"
    if new <= clock:
        return f"its hlc {new.as_json()} does not come after the line before it ({clock.as_json()})"
    why = fields.problem(rec, writer, raw)
    if why is not None:
        return why
    if rec.get("kind") == records.FORGET_KIND and rec.get("action") == "purge" and \
            len(purge_targets(rec)) != len(rec.get("purged") or []):
        return "its purged list is not {writer, id, seq, sha256} entries"
    return None


def parse_log(writer: str, data: bytes, base: list[Entry] | None = None) -> Parsed:
    """Verify a writer's file. `base`: lines already verified here whose bytes start `data` (only the
    rest is checked). Stops at the first line that is not valid, does not link, or breaks a writer
    rule; `problem` names the writer and the line. Tombstones are vouched for later (`vouch`)."""
    entries = list(base or [])
    start = len(encode(entries)) if entries else 0
    prev = entries[-1].rec["sha256"] if entries else records.GENESIS
    clock = last_clock(entries)
    pieces = data[start:].split(b"\n")
    torn = pieces.pop()
    for number, raw in enumerate(pieces, len(entries) + 1):
        try:
            rec, canonical = records.checked_line(raw)
        except records.BadLine as bad:
            return Parsed(entries, f"writer {writer}: line {number} is damaged ({bad.reason})")
        if rec["prev"] != prev or rec["seq"] != number:
            return Parsed(entries, f"writer {writer}: line {number} breaks the chain (seq {rec['seq']} "
                                   f"after {number - 1}, or prev is not the line before's sha256)")
        new = hlc.parse(rec.get("hlc"))
        why = _line_problem(writer, rec, clock, raw, new) or (
            None if canonical or records.format_line(rec)[:-1] == raw else "it is not written as canonical JSON")
        if why is not None:
            return Parsed(entries, f"writer {writer}: line {number} is not a valid writer record: {why}")
        entries.append(Entry(raw))  # not `rec`: parsed again when asked for (see Entry)
        prev, clock = rec["sha256"], new or clock
    if torn:
        return Parsed(entries, f"writer {writer}: line {len(entries) + 1} is incomplete (no newline at its end)")
    return Parsed(entries, None)


def trusted(data: bytes) -> list[Entry]:
    """Lines of a file this machine verified and wrote itself (its bytes unchanged since), not verified
    again. A file that was changed behind retained's back goes through `parse_log` instead."""
    return [Entry(raw) for raw in data.split(b"\n")[:-1]]


def _target(writer: str, e: Entry) -> Target:
    seq, rid, sha = e.ident
    return Target(writer, rid, seq, sha)


def listed(files: Mapping[str, list[Entry]]) -> set[Target]:
    """Every line some purge record of these files lists."""
    return {t for entries in files.values() for e in entries if e.purge for t in purge_targets(e.rec)}


def vouch(files: dict[str, Parsed], also: frozenset[Target] | set[Target] = frozenset()) -> dict[str, Parsed]:
    """Cut each file before its first tombstone that no purge record lists (here or in `also`). A cut
    may remove a purge record that vouched for another file's tombstone, so repeat until none moves."""
    while True:
        known = listed({w: p.entries for w, p in files.items()}) | set(also)
        moved = False
        for writer, parsed in files.items():
            for i, e in enumerate(parsed.entries):
                if e.tombstone and _target(writer, e) not in known:
                    files[writer] = Parsed(parsed.entries[:i], f"writer {writer}: line {i + 1} is a tombstone "
                                                               "that no purge record lists")
                    moved = True
                    break
        if not moved:
            return files


# -- merging ---------------------------------------------------------------------------------------------
def merge(writer: str, mine: list[Entry], theirs: list[Entry]) -> Merged:
    """Two verified versions of one writer's file: the longer extension of the same lines wins; where
    one holds a tombstone of the other's line, the tombstone. A version that differs in a line the
    other holds is refused and `mine` kept."""
    n = min(len(mine), len(theirs))
    for i in range(n):
        if mine[i] is not theirs[i] and mine[i].ident != theirs[i].ident:
            seq = mine[i].rec["seq"]
            return Merged(mine, 0, f"writer {writer}: the remote's line {i + 1} (seq {seq}) is not the one this "
                                   "machine already holds: kept this machine's copy of that log")
    picked = [b if a is not b and b.tombstone and not a.tombstone else a for a, b in zip(mine[:n], theirs[:n], strict=False)]
    if len(theirs) > n:
        return Merged(picked + theirs[n:], len(theirs) - n, None)
    return Merged(picked + mine[n:], 0, None)


def apply_purges(files: dict[str, list[Entry]]) -> list[Target]:
    """Replace every line some purge record lists by its tombstone, in place. The tombstone names the
    first purge in the team's order that lists the line, so every clone writes the same bytes. A listed
    line not held yet is tombstoned when it arrives (the purge stays). Returns the lines newly purged."""
    first: dict[Target, tuple[tuple[int, int, str, str], str]] = {}
    for writer, entries in files.items():
        for e in entries:
            if e.purge:
                key = hlc.order_key(writer, e.rec)
                for t in purge_targets(e.rec):
                    if t not in first or key < first[t][0]:
                        first[t] = (key, e.rec["id"])
    newly = []
    for t, (_key, by) in sorted(first.items()):
        held = files.get(t.writer)
        if held is None or not 1 <= t.seq <= len(held):
            continue
        e = held[t.seq - 1]
        if e.ident != (t.seq, t.id, t.sha256):
            continue
        tomb = records.tombstone(e.rec, by)
        raw = records.format_line(tomb)[:-1]
        if raw != e.raw:
            if not e.tombstone:
                newly.append(t)
            held[t.seq - 1] = Entry(raw, tomb)
    return newly


# -- writing ---------------------------------------------------------------------------------------------
def share_copy(rec: Mapping[str, Any], found: Counter[str]) -> tuple[dict[str, Any] | None, str | None]:
    """What of a local record may leave the machine: everything but LOCAL_ONLY, free text redacted again
    (whatever RETAINED_REDACT says: sharing is leaving the machine). (None, why) when it cannot go."""
    rid = rec.get("id")
    if records.is_tombstone(rec) or "forgotten" in rec:
        return None, f"{rid} was purged; nothing of it is shared"
    for key in ("id", "ts", "kind", "text"):
        if not isinstance(rec.get(key), str):
            return None, f"a record without a string {key!r} ({rid!r}) was not shared"
    if is_purge(rec):
        raise UsageError("a purge record is not shared as a record", hint="pass it to sync as a purge request")
    clash = [k for k in TEAM_KEYS if k in rec and not (k == "hlc" and hlc.parse(rec[k]) is not None)]
    if clash:
        return None, (f"{rid} has a field named {clash[0]!r}, which team memory uses itself: it stays on this "
                      "machine (write it again with another field name to share it)")
    body = {k: v for k, v in rec.items() if k not in LOCAL_ONLY}
    text = {k: v for k, v in body.items() if k not in _NOT_TEXT}
    body.update(redact.redact_value(text, found, keys=True))  # field names at any depth too
    return body, None


def needs_seen(rec: Mapping[str, Any]) -> bool:
    """Records whose meaning depends on what their writer had seen: corrections and forgetting."""
    return "supersedes" in rec or rec.get("kind") == records.FORGET_KIND


def saw(writer: str, rec: Mapping[str, Any], other_writer: str, other: Mapping[str, Any]) -> bool:
    """Whether `rec` (in `writer`'s log) was written having seen `other`: an earlier line of the same
    log, or a line its `seen` heads cover. A record without `seen` claims to have seen no teammate's
    line, so delete-wins never takes an edit for one that saw a retraction it did not."""
    if writer == other_writer:
        return other["seq"] < rec["seq"]
    heads = rec.get("seen")
    return isinstance(heads, dict) and isinstance(heads.get(other_writer), int) and heads[other_writer] >= other["seq"]


def seal_after(body: Mapping[str, Any], after: Entry | None, *, writer: str, clock: hlc.HLC,
               author: Mapping[str, str] | None, seen: Mapping[str, int] | None) -> Entry:
    """The next line of `writer`'s file after `after`: `body` with the writer fields, chained and sealed."""
    rec = dict(body)
    rec.update(writer=writer, hlc=clock.as_json(), seq=after.rec["seq"] + 1 if after else 1,
               prev=after.rec["sha256"] if after else records.GENESIS)
    if author:
        rec["author"] = dict(author)
    if seen is not None:
        rec["seen"] = dict(seen)
    rec = records.seal(rec)
    return Entry(records.format_line(rec)[:-1], rec)


def purge_body(purge_id: str, ts: str, targets: list[Target], reason: str | None,
               scope: str | None) -> dict[str, Any]:
    """The body of a purge record listing `targets` (their identity and original hash, never content)."""
    n = len(targets)
    body: dict[str, Any] = {
        "id": purge_id, "ts": ts, "kind": records.FORGET_KIND, "action": "purge",
        "purged": [t._asdict() for t in targets],
        "text": f"purged {n} record{'s' if n != 1 else ''}" + (f": {reason}" if reason else ""),
    }
    if reason:
        body["reason"] = reason
    if scope:
        body["scope"] = scope
    return body
