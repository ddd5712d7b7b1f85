"""Forgetting, two ways: retract (an appended record hides its targets; undo brings them back) and
purge (a person's decision: the bytes leave every file of the store, the chain still verifies).

Both are records of kind `forget` in the log (docs/FORMAT.md, "Forgetting"). The store calls these
with its `appending` (the log's locks, the tail, the index caught up): everything else they need, the
appender holds. `Store.forget`, `Store.unforget` and `Store.purge` are the API the edges use.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from . import records, redact
from .appender import Appender
from .errors import NotFound, Refused, StoreError, UsageError
from .index import Index
from .log import Log
from .paths import has_team
from .reads import read_row
from .writes import redaction_enabled

#: `Store.appending`: the one way to append, the appender yielded with the locks held.
Appending = Callable[[], AbstractContextManager[Appender]]

MAX_IDS = 500
WINDOW = 12  # a purge leaves no run of this many characters of purged content in any file
SESSIONS_DIR = "sessions"


def check_ids(ids: Any) -> list[str]:
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
        raise UsageError("ids must be a non-empty list of record ids", hint='e.g. ["mem_01J..."]; find them with search or list')
    if len(ids) > MAX_IDS:
        raise UsageError(f"at most {MAX_IDS} ids per call", hint="split the ids over several calls")
    return list(dict.fromkeys(i.strip() for i in ids))


def _check_reason(reason: Any) -> str | None:
    if reason is None or (isinstance(reason, str) and not reason.strip()):
        return None
    return records.check_text(reason, "reason").strip()


def _rows(index: Index, ids: list[str]) -> list[dict[str, Any]]:
    rows = []
    for rid in ids:
        row = index.by_id(rid)
        if row is None:
            raise NotFound(f"{rid!r} is not a record in this store", hint="copy the id from search, list or a receipt")
        if row["kind"] == records.FORGET_KIND:
            raise Refused(f"{rid} is itself a forget record", hint="to bring records back, use undo on their ids")
        rows.append(row)
    return rows


def _redacted(reason: str | None, found: Counter[str]) -> str | None:
    if reason is None or not redaction_enabled():
        return reason
    return redact.redact_value(reason, found)


def _plural(n: int) -> str:
    return f"{n} record{'s' if n != 1 else ''}"


class _Op:
    """A forget operation under way: its checked ids and redacted reason, the appender (locks held, tail
    read, index current), warnings so far."""

    def __init__(self, ids: list[str], reason: str | None, found: Counter[str], app: Appender) -> None:
        self.ids, self.reason, self.found, self.app = ids, reason, found, app
        self.warnings = app.warnings + app.index_notes

    def redaction_note(self) -> list[str]:
        return [redact.describe(self.found)] if self.found else []


@contextmanager
def _locked(appending: Appending, ids: Any, reason: Any) -> Iterator[_Op]:
    """What retract and purge do first: check the ids and the reason (redacted), then append under
    `appending()` for the whole operation, the index read current."""
    ids = check_ids(ids)
    found: Counter[str] = Counter()
    reason = _redacted(_check_reason(reason), found)
    with appending() as app:
        app.require_index()
        yield _Op(ids, reason, found, app)


def _targets(index: Index, rows: list[dict[str, Any]], undo: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows a retraction (or undo) changes, and why each other row is skipped."""
    targets, skipped = [], []
    for row in rows:
        if row["tomb"]:
            skipped.append(f"{row['id']} was purged; nothing is left to {'bring back' if undo else 'retract'}")
        elif undo and not row["retracted_by"]:
            head = index.head_of(row["id"])
            why = (f"; it is hidden because its current version {head['id']} is retracted: undo that one"
                   if head is not None and head["id"] != row["id"] and head["retracted_by"] else "")
            skipped.append(f"{row['id']} is not retracted{why}")
        elif not undo and row["retracted_by"]:
            skipped.append(f"{row['id']} is already retracted (by {row['retracted_by']})")
        else:
            targets.append(row)
    return targets, skipped


def retract(appending: Appending, ids: Any, reason: Any, *, undo: bool = False) -> dict[str, Any]:
    """Append a record that hides `ids` from default reads (or, with undo, shows them again). A
    retraction repeated writes nothing and answers with the first one's receipt and its reason."""
    with _locked(appending, ids, reason) as op:
        reason, warnings, index = op.reason, op.warnings, op.app.index
        rows = _rows(index, op.ids)
        targets, skipped = _targets(index, rows, undo)
        if not targets:
            if not undo and rows and all(r["retracted_by"] and not r["tomb"] for r in rows):
                prior = index.by_id(rows[0]["retracted_by"])
                if prior is not None:  # retracted already, by this record: its receipt, proven again
                    receipt = op.app.existing(prior, warnings + skipped[:1])
                    receipt["warnings"].append("nothing new was written")
                    # the reason that retraction stored, not the one just given
                    receipt.update(action="retract", targets=[], reason=_stored_reason(index, op.app.log, prior))
                    return receipt
            raise Refused("; ".join(skipped), hint="nothing was written")
        action = "undo" if undo else "retract"
        verb = "brought back" if undo else "retracted"
        text = f"{verb} {_plural(len(targets))}"  # the reason is kept once, in its own field
        fields: dict[str, Any] = {"action": action, "targets": [r["id"] for r in targets], "scope": targets[0]["scope"]}
        if reason is not None:
            fields["reason"] = reason
        receipt = op.app.append(fields, records.FORGET_KIND, text, warnings + skipped)
    receipt["warnings"] += op.redaction_note()
    receipt.update(action=action, targets=fields["targets"], reason=reason)
    return receipt


def _stored_reason(index: Index, log: Log, row: dict[str, Any]) -> str | None:
    """The reason a forget record holds, as its line in the log says (None when it gives none or its
    line no longer reads)."""
    try:
        stored = read_row(index, log, row).get("reason")
    except records.BadLine:
        return None
    return stored if isinstance(stored, str) else None


def purge(appending: Appending, ids: Any, reason: Any) -> dict[str, Any]:
    """Replace the records' lines by tombstones and append the purge record, in one atomic rewrite.

    A teammate's record (issue 28: anyone on the team can forget anything shared) lives in its
    writer's log, which only a sync rewrites: the purge record names it by writer, id, seq and hash;
    its text leaves this store's index and files now, and the next sync tombstones its line on every
    clone and rewrites the memory ref's history without it."""
    with _locked(appending, ids, reason) as op:
        index, log = op.app.index, op.app.log
        originals = _originals(index, log, _unpurged(index, op))
        own = [(row, rec) for row, rec in originals if not row.get("writer")]
        listed = [{"id": rec["id"], "seq": rec["seq"], "sha256": rec["sha256"]} for _, rec in own]
        listed += [{"id": rec["id"], "writer": row["writer"], "seq": rec["seq"], "sha256": rec["sha256"]}
                   for row, rec in originals if row.get("writer")]
        text = f"purged {_plural(len(listed))}"  # the reason is kept once, in its own field
        fields: dict[str, Any] = {"action": "purge", "purged": listed, "scope": originals[0][0]["scope"]}
        if op.reason is not None:
            fields["reason"] = op.reason
        record = op.app.seal(fields, records.FORGET_KIND, text)
        edits, index_edits, strings = _tombstones(own, record["id"])
        strings += [s for row, rec in originals if row.get("writer") for s in records.content_strings(rec)]
        chain_versions = _older_versions(index, [row for row, _ in originals])
        # Copies outside the log first: if the purge is killed after this, the old log still stands and
        # only unacknowledged fragments or session notes that held the text are gone.
        scrubbed = scrub_files(log.directory, strings, _own_strings(originals))
        # Teammates' records only: this log keeps every line, and gains the purge record.
        checks = op.app.rewrite(edits, record, index_edits) if edits else op.app.append_sealed(record)["checks"]
    index.catch_up()  # indexes the purge record, then compacts (the state asks for it)
    warnings = op.warnings + op.redaction_note()
    if chain_versions:
        warnings.append(f"{_plural(len(chain_versions))} corrected by a purged record still hold their own "
                        f"text, hidden from reads: {', '.join(chain_versions[:10])} (purge them too if they must go)")
    warnings += scrubbed
    if len(listed) > len(own) or has_team(log.directory):
        warnings.append(team_purge_note(len(listed) - len(own)))
    return {"id": record["id"], "seq": record["seq"], "sha256": record["sha256"], "durable": all(checks.values()),
            "checks": checks, "warnings": warnings, "deduplicated": False, "action": "purge", "purged": listed,
            "reason": op.reason}


def team_purge_note(teammates: int) -> str:
    """What happens next to a purge in a store that shares memory (said once, the same on every edge)."""
    whose = f"{_plural(teammates)} written by teammates" if teammates else "records this team may hold"
    return (f"team memory: the purge of {whose} travels with the next sync (`retained sync`, or the background "
            "sync at the next session): every clone replaces the line by a tombstone and the memory ref's history "
            "is rewritten without it; the git server keeps unreachable objects until its own gc; if it was a "
            "secret, rotate it now")


def _unpurged(index: Index, op: _Op) -> list[dict[str, Any]]:
    """The named records not purged yet (each one purged already is a warning); refused when none is left."""
    rows = []
    for row in _rows(index, op.ids):
        if row["tomb"]:
            op.warnings.append(f"{row['id']} was already purged")
        else:
            rows.append(row)
    if not rows:
        raise Refused("every record named was already purged", hint="nothing was written")
    return rows


def _originals(index: Index, log: Log, rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(index row, record read back from the log) per record to purge; refused, with nothing purged,
    when a line is damaged or no longer holds the record the index points at."""
    originals = []
    for row in rows:
        if row.get("writer"):  # a teammate's record: read from its writer's log in the mirror
            try:
                originals.append((row, read_row(index, log, row)))
            except records.BadLine as bad:
                raise StoreError(f"{row['id']}: its line in its writer's log does not read back ({bad.reason})",
                                 hint="run `retained sync`, then retry; nothing was purged") from None
            continue
        raw = log.read_at(row["offset"], row["length"])
        try:
            rec = records.parse_line(raw[:-1])
        except records.BadLine as bad:
            raise StoreError(f"{row['id']}: its line in the log is damaged ({bad.reason})",
                             hint="run `retained verify`; nothing was purged") from None
        if rec["id"] != row["id"] or rec["sha256"] != row["sha256"] or not raw.endswith(b"\n"):
            raise StoreError(f"{row['id']}: the log no longer holds the record the index points at",
                             hint="run `retained reindex`, then retry; nothing was purged")
        originals.append((row, rec))
    return originals


def _tombstones(originals: list[tuple[dict[str, Any], dict[str, Any]]],
                purge_id: str) -> tuple[list[tuple[int, int, bytes]], list[dict[str, Any]], list[str]]:
    """Per purged record: the log edit (offset, length, tombstone line), the index's edit, and the
    strings that must leave every other file too."""
    edits, index_edits, strings = [], [], []
    for row, rec in originals:
        line = records.format_line(records.tombstone(rec, purge_id))
        edits.append((row["offset"], row["length"], line))
        index_edits.append({"line": row["line"], "offset": row["offset"], "length": len(line),
                            "sha": hashlib.sha256(line).hexdigest()})
        strings += records.content_strings(rec)
    return edits, index_edits, strings


#: What retained adds to a record about where it came from: matched by its 12-character runs only
#: (a short provenance value, `"format": "jsonl"`, is in many an unrelated file).
_PROVENANCE = ("imported", "session_id")


def _own_strings(originals: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """The strings a writer put in the purged records (text, source, fields), provenance aside."""
    out: list[str] = []
    for _row, rec in originals:
        out += records.content_strings({k: v for k, v in rec.items() if k not in _PROVENANCE})
    return out


def _older_versions(index: Index, rows: list[dict[str, Any]]) -> list[str]:
    purged = {r["id"] for r in rows}
    out: list[str] = []
    for row in rows:
        if row["superseded_by"] is None:
            out += [rid for rid in index.older_versions(row["line"]) if rid not in purged]
    return out


class Purged:
    """What a purge looks for in a file: any WINDOW-character run of a purged string (raw or as written
    inside JSON), a shorter string whole (as a JSON string value, quotes included), and, at a file's
    end, any prefix of a purged string value (what a torn copy of the purged line holds, however short).
    """

    def __init__(self, strings: list[str], own: list[str] | None = None) -> None:
        self.windows: set[bytes] = set()
        self.whole: set[bytes] = set()
        self.prefixed: list[bytes] = []
        own_set = set(strings if own is None else own)  # the short and prefix rules: a writer's strings only
        for s in strings:
            if not s:
                continue
            inner = json.dumps(s, ensure_ascii=False)[1:-1]
            if s in own_set:
                self.prefixed.append(inner.encode("utf-8", "replace"))
            for form in {s, inner}:
                if len(form) < WINDOW and s in own_set:
                    self.whole.add(b'"' + inner.encode("utf-8", "replace") + b'"')
                    if len(form) >= 4 and form == s:  # raw, as a hook's note or a plain file holds it
                        self.whole.add(s.encode("utf-8", "replace"))
                for i in range(len(form) - WINDOW + 1):
                    self.windows.add(form[i : i + WINDOW].encode("utf-8", "replace"))
        self.starts = {w[:4] for w in self.windows}

    def __bool__(self) -> bool:
        return bool(self.windows or self.whole or self.prefixed)

    def held_by(self, data: bytes) -> bool:
        if holds_any(data, self.windows, self.starts) or any(w in data for w in self.whole):
            return True
        # A torn copy ends inside a string value: `..."text":"<the first bytes of a purged text>`.
        end = data.rstrip(b"\r\n")
        at = max(end.rfind(b':"'), end.rfind(b': "'))
        if at < 0:
            return False
        tail = end[at:].split(b'"', 1)[1]
        return bool(tail) and b'"' not in tail.replace(b'\\"', b"") and any(p.startswith(tail) for p in self.prefixed)


def holds_any(data: bytes, windows: set[bytes], starts: set[bytes]) -> bool:
    """Whether `data` holds any of the windows (each WINDOW characters of purged text, as UTF-8)."""
    if not windows:
        return False
    # Look only where the first 4 bytes of some window occur, then test the windows starting there.
    for prefix in starts:
        pos = data.find(prefix)
        while pos >= 0:
            if any(data.startswith(w, pos) for w in windows if w.startswith(prefix)):
                return True
            pos = data.find(prefix, pos + 1)
    return False


#: Files of a store a purge rewrites itself (the log) or compacts (the index): not scanned here.
MAX_SCAN_BYTES = 256 * 1024 * 1024
_REWRITTEN = ("log.jsonl", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm", "index.sqlite3-journal")


def scrub_files(directory: Path, strings: list[str], own: list[str] | None = None) -> list[str]:
    """Remove the files under quarantine/ and sessions/ that hold any of the purged content, and name
    every other file of the store that still holds some (a purge never deletes a file it does not own).

    Quarantine holds torn fragments of writes; session notes are a hook's short-lived state. Neither
    is a record, and a purge outranks both. Returns what was removed and what could not be.
    """
    purged = Purged(strings, own)
    if not purged:
        return []
    said = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        rel_root = Path(root).relative_to(directory)
        owned = rel_root.parts[:1] in (("quarantine",), (SESSIONS_DIR,))
        if rel_root.parts[:1] == ("team",):  # retained's own mirror and repository: the next sync rewrites them
            dirs.clear()
            continue
        for name in sorted(files):
            path = Path(root) / name
            rel = (rel_root / name).as_posix()
            if rel in _REWRITTEN or name == "log.lock":
                continue
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                if path.stat().st_size > MAX_SCAN_BYTES:
                    said.append(f"could not check {rel} for purged text: larger than {MAX_SCAN_BYTES >> 20} MiB")
                    continue
                if not purged.held_by(path.read_bytes()):
                    continue
                if not owned:
                    said.append(f"could not remove purged text from {rel}: retained does not own that file; "
                                "delete it or edit it by hand")
                    continue
                path.unlink()
                said.append(f"removed {rel}: it held purged text")
            except OSError as e:
                said.append(f"could not check or remove {rel}: {e.strerror or e}; delete it by hand")
    return said
