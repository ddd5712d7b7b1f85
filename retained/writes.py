"""What a write settles before it appends: its arguments, redaction, the scope the record goes to,
and whether it repeats a current record (an exact duplicate is not written again; a near duplicate
gets a warning naming the record it may replace).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from .appender import Appender
    from .index import Index

from . import records, redact
from .errors import NotFound, Refused, UsageError
from .index import query_terms, quote_query
from .project import nearest_scopes
from .switches import switch


def check_args(text: str, *, kind: str, scope: str | None, default_scope: str | None, source: str | None,
               client_op_id: str | None, supersedes: str | None,
               fields: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Refuse a malformed write with a clear error; returns the kind (lower case) and the extra fields, checked."""
    records.check_text(text)
    if isinstance(kind, str):
        check_kind_is_no_secret(kind.strip())  # as given: a key's case is part of its shape (AKIA...)
    kind = records.check_kind(kind)
    near = records.nearest_kind(kind, records.KNOWN_KINDS)
    if near is not None:
        raise UsageError(f"kind {kind!r} is not a kind retained knows; did you mean {near!r}?",
                         hint=f"pass kind {near!r}, or a new kind spelled apart from {', '.join(records.KNOWN_KINDS)}")
    check_kind_is_no_secret(kind)
    if scope is not None:
        records.check_scope(scope)
    if default_scope is not None:
        records.check_scope(default_scope)
    if source is not None:
        records.check_text(source, "source")
    if client_op_id is not None:
        records.check_text(client_op_id, "client_op_id")
    if supersedes is not None and (not isinstance(supersedes, str) or not supersedes.strip()):
        raise UsageError("supersedes must be a record id", hint="find it with search or list")
    if kind == records.FORGET_KIND:
        raise UsageError("kind 'forget' is kept for retractions",
                         hint="use memory_forget (or `retained forget`) to forget a record")
    return kind, records.check_fields(fields)


def redaction_enabled() -> bool:
    """RETAINED_REDACT=off keeps text verbatim (the README says what that risks)."""
    return switch("RETAINED_REDACT", True)


def redacted(text: str, source: str | None, extra: dict[str, Any], *, scope: str | None = None,
             client_op_id: str | None = None) -> tuple[str, str | None, dict[str, Any], str | None, str | None, Counter[str]]:
    """The write's text, source, fields (their names too), scope and client_op_id with secrets
    replaced (unless RETAINED_REDACT is off), and what was found. Returns (text, source, fields,
    scope, client_op_id, found)."""
    found: Counter[str] = Counter()
    if redaction_enabled():
        text = redact.redact_value(text, found)
        if source is not None:
            source = redact.redact_value(source, found)
        scope, client_op_id, cleaned = redact.redact_record_parts(found, scope=scope, client_op_id=client_op_id,
                                                                  fields=extra)
        extra = cleaned if cleaned is not None else extra
        if scope is not None:
            records.check_scope(scope)
    return text, source, extra, scope, client_op_id, found


def check_kind_is_no_secret(kind: str) -> None:
    """A kind is a short label every read shows: one that holds a credential is refused, not redacted
    (a redacted kind would be a label nobody chose)."""
    if not redaction_enabled():
        return

    found = redact.label_secrets(kind)
    if found:
        raise UsageError(f"kind looks like a credential ({', '.join(sorted(found))}); a kind is a short label",
                         hint="use a label such as note, decision or convention, and keep secrets out of memory")


def redaction_note(found: Counter[str]) -> list[str]:
    if not found:
        return []

    return [redact.describe(found)]


def settle(index: Index, app: Appender, text: str, kind: str, *, scope: str | None, default_scope: str | None,
           supersedes: str | None, client_op_id: str | None,
           warnings: list[str]) -> tuple[str | None, dict[str, Any] | None]:
    """Under the append lock: (the scope the record goes to, the receipt of the record that already
    holds this write, or None to append it). A repeated client_op_id, or an exact duplicate of a
    current record, is answered with the existing record's receipt. Adds warnings (a new scope, near
    duplicates) to `warnings`."""
    fresh = not app.index_notes  # duplicates are looked up among the current records
    prior = index.by_op(client_op_id) if client_op_id is not None else None
    if prior is not None:
        receipt = app.existing(prior, warnings)
        receipt["warnings"].append(f"client_op_id already used by {prior['id']}; nothing new was written")
        return scope, receipt
    scope = target_scope(index, scope, default_scope, supersedes, index_fresh=fresh, warnings=warnings)
    if supersedes is None and fresh:
        same, near = duplicates(index, text, kind, scope or records.GLOBAL_SCOPE)
        if same is not None:
            receipt = app.existing(same, warnings)
            how = ("to save a new checkpoint, change its label or summary" if kind == "checkpoint"
                   else "to correct it, write with supersedes")
            receipt["warnings"].append(
                f"an identical {kind} is already stored as {same['id']} (seq {same['seq']}); nothing new was "
                f"written ({how})")
            return scope, receipt
        warnings += near
    return scope, None


def target_scope(index: Index, scope: str | None, default_scope: str | None, supersedes: str | None, *,
                 index_fresh: bool, warnings: list[str]) -> str | None:
    """The scope the record goes to: a correction keeps its target's unless told otherwise, any other
    write goes to `default_scope`. A scope no read will see by default gets a warning."""
    if supersedes is not None:
        target = correctable(index, supersedes)
        if scope is not None and scope != target["scope"]:
            warnings.append(f"this correction moves {supersedes} from scope {target['scope']!r} to {scope!r}: reads of "
                            f"{target['scope']!r} no longer see it (omit scope to keep it in {target['scope']!r})")
        return target["scope"] if scope is None else scope
    if scope is None:
        return default_scope
    if scope not in (records.GLOBAL_SCOPE, default_scope) and index_fresh:
        warnings += _unknown_scope(index, scope, default_scope)
    return scope


def check_resolves(index: Index, supersedes: str | None, resolves: list[str]) -> list[str]:
    """The further versions a correction supersedes (a fork's resolution): each a current record."""
    if supersedes is None:
        raise UsageError("resolving several versions needs supersedes as well", hint="pass --supersedes once per version")
    out = []
    for rid in resolves:
        if not isinstance(rid, str) or not rid.strip():
            raise UsageError("supersedes must be a record id", hint="find it with search or list")
        if rid != supersedes and rid not in out:
            correctable(index, rid)
            out.append(rid)
    return out


def correctable(index: Index, supersedes: str) -> dict[str, Any]:
    """The record a correction names, refused unless it is the current record of its chain."""
    target = index.by_id(supersedes)
    if target is None:
        raise NotFound(f"supersedes names {supersedes!r}, which is not a record in this store",
                       hint="copy the id from `search` or `list`")
    if target["tomb"]:
        raise Refused(f"{supersedes} was purged; there is nothing left to correct", hint="write a new record instead")
    head = index.head_of(supersedes) or target
    if head["id"] != supersedes:
        raise Refused(f"{supersedes} was already corrected by {head['id']}, the current record; nothing was written",
                         hint=f"read {head['id']} first; if it still needs correcting, supersede {head['id']}")
    if target.get("retracted_by"):
        raise Refused(f"{supersedes} is retracted (by {target['retracted_by']}); a correction of it would bring "
                         "a retracted memory back, so nothing was written",
                         hint="write the memory as a new record, without supersedes")
    return target


def _unknown_scope(index: Index, scope: str, default_scope: str | None) -> list[str]:
    try:
        if index.has_scope(scope):
            return []
    except sqlite3.Error:
        return []
    here = (f"the current project ({default_scope}) plus global" if default_scope not in (None, records.GLOBAL_SCOPE)
            else "global only, outside a project")
    try:
        near = nearest_scopes(scope, index.scope_names())
    except sqlite3.Error:
        near = []
    spelled = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    return [f"scope {scope!r} is new: it is neither global, the current project nor a scope that holds "
            f"records, so default reads ({here}) will not see this record; read it with scope={scope!r}"
            f"{spelled} (see `retained scopes`)"]


def duplicates(index: Index, text: str, kind: str, scope: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(the current record of this kind and scope with the same normalised text, or None; warnings
    for near duplicates). The index is derived: a write never fails for its sake."""
    try:
        same = index.duplicate_of(text, kind, scope)
        return same, [] if same is not None else _near_duplicates(index, text, scope)
    except sqlite3.Error as e:
        return None, [f"duplicates not checked: the index is unusable ({e}); run `retained reindex`"]


def _near_duplicates(index: Index, text: str, scope: str) -> list[str]:
    """A warning per current record in the scope whose text closely matches this one."""
    words = sorted(set(query_terms(text)), key=lambda w: (-len(w), w))[:8]
    if len(words) < 3:
        return []
    mine = records.Near(records.near_form(text))
    seen: dict[str, dict[str, Any]] = {}
    for half in (words[0::2], words[1::2]):
        for row in index.similar_candidates(quote_query(half, prefix=False), scope, 20):
            seen.setdefault(row["id"], row)
    out = []
    for row in seen.values():
        if mine.closeness(records.near_form(row["text"])) is not None:
            out.append(f"this closely matches {row['id']} ({row['kind']}, {row['ts'][:10]}): "
                       f"\"{_snippet(row['text'])}\"; if it replaces that record, write it with "
                       f"supersedes={row['id']} instead")
        if len(out) == 3:
            break
    return out


def fields_of(extra: dict[str, Any], **named: str | None) -> dict[str, Any]:
    """The record's fields: the extra ones, then each named one that is set."""
    record = dict(extra)
    record.update({key: value for key, value in named.items() if value is not None})
    return record


def _snippet(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
