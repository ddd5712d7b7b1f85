"""Assembling what reads return: hits from index rows, records read back from the log with what later
records say about them, and the limits every read enforces (whole numbers in range, a point in time,
a token budget). The store decides what to read; this module shapes the answer.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from datetime import datetime, time, timezone
from typing import TYPE_CHECKING, Any

from . import project as p
from . import records
from .errors import UsageError
from .index import Index
from .index.sources import KEY_BITS
from .log import Log
from .tokens import estimate_tokens

if TYPE_CHECKING:  # the type only: ranking and the model's module it imports cost the session-start hook +13 ms
    from .ranking import Found

MAX_K = 100
DEFAULT_K = 8
MAX_LIST = 500


def check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number from {lo} to {hi}",
                         hint=f"pass an integer, or omit {name} for the default")
    if not lo <= value <= hi:
        raise UsageError(f"{name} must be from {lo} to {hi} (got {value})", hint=f"pass an integer from {lo} to {hi}")
    return value


def check_ids(ids: Any) -> list[str]:
    """get's ids: a list of strings, at most MAX_LIST, repeats dropped."""
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise UsageError("ids must be a list of record ids", hint='e.g. ["mem_01J..."]')
    if len(ids) > MAX_LIST:
        raise UsageError(f"at most {MAX_LIST} ids per call", hint="split the ids over several calls")
    return list(dict.fromkeys(ids))


def parse_as_of(value: Any) -> str | None:
    """`as_of` (RFC 3339, or a date meaning the end of that day, UTC) as a UTC timestamp in the records'
    own format, so it compares with their `ts` as text. None stays None."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError("as_of must be an RFC 3339 time or a date", hint="e.g. 2026-11-30 or 2026-11-30T12:00:00Z")
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.combine(datetime.strptime(text, "%Y-%m-%d").date(), time.max, tzinfo=timezone.utc)
        else:
            iso = text[:-1] + "+00:00" if text[-1] in "Zz" else text
            moment = datetime.fromisoformat(iso.replace("t", "T").replace(" ", "T", 1))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
    except ValueError:
        raise UsageError(f"as_of {value!r} is not an RFC 3339 time or a date",
                         hint="e.g. 2026-11-30 or 2026-11-30T12:00:00Z") from None
    return records.rfc3339(moment)


def rebuilt_note(reason: str, *, in_place: bool) -> str:
    """What the first read after a repair of the index says: why, how, and that nothing was lost."""
    how = ("from its records; nothing stored was lost (the vectors were kept)" if in_place else
           "from the log; nothing stored was lost (with the semantic tier on, records are embedded again)")
    return f"the index was damaged ({reason}) and was rebuilt {how}"


def unreadable_note(n: int) -> str | None:
    """'2 records could not be read …: run `retained verify`', or None when every line reads (I2)."""
    if not n:
        return None
    return (f"{n} record{'s' if n != 1 else ''} could not be read (damaged line{'s' if n != 1 else ''} in the "
            f"log) and {'are' if n != 1 else 'is'} left out: run `retained verify`")


def hit(row: dict[str, Any], score: float | None = None) -> dict[str, Any]:
    """One search or list hit from an index row."""
    out = {"id": row["id"], "seq": row["seq"], "ts": row["ts"], "kind": row["kind"], "scope": row["scope"],
           "text": row["text"]}
    if score is not None:
        out["score"] = round(score, 6)
    if row.get("supersedes"):
        out["supersedes"] = row["supersedes"]
    if row.get("superseded_by"):
        out["superseded_by"] = row["superseded_by"]
    if row.get("writer"):  # a teammate's record (issue 19)
        out["writer"] = row["writer"]
        if row.get("author"):
            out["author"] = row["author"]
    return out


def kind_note(index: Index, kind: str | None) -> list[str]:
    """What a read filtered by a kind no record has says: the nearest kind that has records."""
    if kind is None:
        return []
    try:
        held = index.facets()["kinds"]
    except Exception:  # the derived index: a read goes on without the note
        return []
    if kind in held:
        return []
    near = records.nearest_kind(kind, [*held, *records.KNOWN_KINDS])
    known = ", ".join(sorted(set(held) - {records.FORGET_KIND})) or "none yet"
    return [f"no record is of kind {kind!r}" + (f"; did you mean {near!r}?" if near else "")
            + f" (kinds held: {known})"]


# -- search -----------------------------------------------------------------------------------------
def no_words(semantic: str, warnings: list[str]) -> dict[str, Any]:
    """The answer to a query that holds nothing to search for."""
    warnings.append("the query holds no searchable words")
    return {"hits": [], "total_matched": 0, "total_exact": True, "returned": 0, "truncated": False,
            "match": "all", "semantic": semantic, "warnings": warnings}


def search_result(found: Found, *, as_of: str | None, semantic: str, by_meaning: bool, max_tokens: int | None,
                  warnings: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """search()'s answer from the ranked candidates, and per hit id its cosine and tier (for recall)."""
    hits = []
    cosines: dict[str, dict[str, Any]] = {}
    for cand in found.hits:
        one = hit(cand.row, cand.score)
        one["match"] = cand.match
        if as_of is not None and one.get("superseded_by") and one["superseded_by"] not in found.known_before:
            del one["superseded_by"]
        hits.append(one)
        cosines[one["id"]] = {"cosine": cand.cosine, "tier": cand.tier, "lead": cand.lead, "bridge": cand.bridge}
    total = found.total
    truncated = total > len(hits) or not found.exact
    warnings += match_notes(found, by_meaning)
    if not found.exact:
        warnings.append(f"at least {total} records match; counting stopped there (total_matched is a lower bound)")
    if max_tokens is not None:
        hits, cut, trimmed = fit_tokens(hits, max_tokens, warnings)
        if cut or trimmed:
            truncated = True
            warnings.append(budget_note(max_tokens, cut, trimmed, "hit"))
    return ({"hits": hits, "total_matched": total, "total_exact": found.exact, "returned": len(hits),
             "truncated": truncated, "match": found.mode, "semantic": semantic, "warnings": warnings}, cosines)


def match_notes(found: Found, semantic: bool) -> list[str]:
    """What the reply says about how it matched, and that nothing did when no hit is worth reading."""
    meaning = " or are close in meaning" if semantic else ""
    if not found.hits:
        return ["no record holds the words of the query" + (" or is close to it in meaning" if semantic else "")
                + "; try other words, or scope '*'"]
    if found.mode == "any":
        return [f"no record holds every word of the query; showing records that hold any of them{meaning}"]
    return []


# -- list -------------------------------------------------------------------------------------------
CURSOR_HINT = "pass the next_cursor of the previous page as the cursor, or leave it out for the first page"


def cursor_of(row: dict[str, Any]) -> str:
    """An opaque, url-safe token for a record's place in the team order (ord_ms, ord_n, id): where the
    next page starts. The same record has the same place on every clone, so a cursor pages alike there."""
    import base64  # lazy: +0.8 ms on the session-start hook (measured), and only list pages

    raw = f"{int(row['ord_ms']):x}.{int(row['ord_n']):x}.{row['id']}".encode()
    return base64.b32encode(raw).decode().rstrip("=").lower()  # lower case: cheap in tokens, url-safe


def parse_cursor(value: Any) -> tuple[int, int, str]:
    """A cursor back as (ord_ms, ord_n, id); anything else is a one-line usage error."""
    import base64  # lazy, as in `cursor_of`
    import binascii

    bad = UsageError("cursor is not a cursor this store gave", hint=CURSOR_HINT)
    if not isinstance(value, str) or not re.fullmatch(r"[a-z2-7]{8,480}", value):
        raise bad
    try:
        raw = base64.b32decode(value.upper() + "=" * (-len(value) % 8)).decode("utf-8")
    except (binascii.Error, ValueError):
        raise bad from None
    found = re.fullmatch(r"(0|[1-9a-f][0-9a-f]{0,15})\.(0|[1-9a-f][0-9a-f]{0,15})\.([^\x00-\x20\x7f-\x9f]{1,256})", raw)
    if found is None:
        raise bad
    key = int(found[1], 16), int(found[2], 16), found[3]
    if cursor_of({"ord_ms": key[0], "ord_n": key[1], "id": key[2]}) != value:
        raise bad
    return key


def list_result(index: Index, found: list[dict[str, Any]], total: int, newer: int, *, as_of: str | None,
                max_tokens: int | None, warnings: list[str]) -> dict[str, Any]:
    """list()'s answer from a page of rows; `newer` counts the records on the pages before this one.
    `next_cursor`: where the next page starts (after the last record returned), None on the last page."""
    hits = [hit(row) for row in found]
    if as_of is not None:  # a correction written after as_of did not exist then
        known = index.ts_of([h["superseded_by"] for h in hits if h.get("superseded_by")])
        for h in hits:
            if h.get("superseded_by") and known.get(h["superseded_by"], "~") > as_of:
                del h["superseded_by"]
    returned_through = len(hits) + newer
    cut = 0
    trimmed = 0
    if max_tokens is not None:
        hits, cut, trimmed = fit_tokens(hits, max_tokens, warnings)
        if cut or trimmed:
            warnings.append(budget_note(max_tokens, cut, trimmed, "record")
                            + ("; page on with next_cursor" if cut else ""))
    returned_through -= cut
    more = returned_through < total and bool(hits)
    return {"records": hits, "total": total, "returned": len(hits),
            "truncated": returned_through < total or bool(cut or trimmed),
            "next_cursor": cursor_of(found[len(hits) - 1]) if more else None, "warnings": warnings}


# -- get --------------------------------------------------------------------------------------------
def read_back(index: Index, log: Log, found: list[dict[str, Any]],
              warnings: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of these index rows exactly as the log holds them, marked (see `marked`); and the
    ids whose line no longer reads as the record the index points at (each named in `warnings`).

    A row whose bytes are not its record (an index entry pointing at the wrong bytes) is said, and the
    index is healed once, from the logs, before the rest is read: the record is then found where it
    is, or named as damaged when its line is."""
    out: list[dict[str, Any]] = []
    damaged: list[str] = []
    healed = False
    for row in found:
        if healed:
            row = index.by_id(row["id"]) or row
        try:
            rec = read_row(index, log, row)
        except records.BadLine as bad:
            if healed or index.read_only or not _misplaced(index, log, row):
                damaged.append(row["id"])
                warnings.append(f"{row['id']}: its line in the log is damaged ({bad.reason}); run `retained verify`")
                continue
            healed = True
            warnings.append(f"{row['id']}: the index pointed at bytes that are not this record ({bad.reason}); "
                            "it was rebuilt from the logs")
            index.rebuild()
            again = index.by_id(row["id"])
            try:
                if again is None:
                    raise records.BadLine("no readable line holds it")
                rec, row = read_row(index, log, again), again
            except records.BadLine as still:
                damaged.append(row["id"])
                warnings.append(f"{row['id']}: its line in the log is damaged ({still.reason}); run `retained verify`")
                continue
        out.append(marked(index, log, rec, row))
    return out, damaged


def _misplaced(index: Index, log: Log, row: dict[str, Any]) -> bool:
    """Whether the index entry, not the line, is wrong: its span is not one whole line of its log, or
    that line is another record. A whole line that no longer reads as its record is damage (bit rot, an
    edit in place), which no rebuild mends: it is said as damage."""
    try:
        where = _log_of(index, log, row)
        start = row["offset"]
        raw = where.read_at(start - 1 if start else 0, row["length"] + (1 if start else 0))
    except (OSError, KeyError, TypeError):
        return True
    if (start and not raw.startswith(b"\n")) or not raw.endswith(b"\n") or raw[1 if start else 0:-1].count(b"\n"):
        return True
    try:
        return records.parse_line(raw[1 if start else 0:-1]).get("id") != row["id"]
    except records.BadLine:
        return False


def read_row(index: Index, log: Log, row: dict[str, Any]) -> dict[str, Any]:
    """The record an index row points at, read from its own log (the store's, or a teammate's) and
    checked against the row's hash; BadLine when those bytes are not that record."""
    try:
        raw = _log_of(index, log, row).read_at(row["offset"], row["length"])
    except OSError as e:  # an offset past the end of the file: the same fault, said the same way
        raise records.BadLine(f"its place is outside the log ({e.strerror or e})") from None
    rec = records.parse_line(raw[:-1])
    if rec["sha256"] != row["sha256"] or rec.get("id") != row["id"]:
        raise records.BadLine("the log no longer holds the record the index points at")
    return rec


def split_damaged(index: Index, log: Log, missing: list[str], damaged: list[str]) -> tuple[list[str], list[str]]:
    """(the ids truly missing, the damaged ones): an id the index lost because its line no longer reads is
    damaged, not missing."""
    rotten = damaged_ids(index, log, missing)
    return [m for m in missing if m not in rotten], damaged + rotten


def damaged_ids(index: Index, log: Log, ids: list[str]) -> list[str]:
    """Of `ids` the index does not hold, those on a line of this store's log that no longer reads as a
    record (a read says 'damaged', not 'not found')."""
    if not ids or not index.unreadable():
        return []
    found: list[str] = []
    for problem in index.problems():
        if problem["kind"] == "break" or problem["line"] >> KEY_BITS != 0:
            continue
        try:
            line = log.read_at(problem["offset"], 1024 * 1024).split(b"\n", 1)[0]
        except OSError:
            continue
        found += [rid for rid in ids if rid not in found and rid.encode("utf-8", "replace") in line]
    return found


def conflict_of(versions: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    """The `conflict` field of a current version of a fork: the other versions, and one line to show."""
    def who(v: dict[str, Any]) -> str:
        name = (v.get("author") or "").split(" <", 1)[0] or v.get("writer") or "you (this machine)"
        return f"by {name} ({v['id']}, {str(v['ts'])[:10]})"
    ids = [v["id"] for v in versions]
    summary = (f"{len(versions)} current versions: " + ", ".join(who(v) for v in versions)
               + "; write one that supersedes them all (`--supersedes " + " --supersedes ".join(ids) + "`) to resolve")
    return {"other_versions": [i for i in ids if i != rid], "versions": ids, "summary": summary}


def mark_conflicts(index: Index, items: list[dict[str, Any]], warnings: list[str]) -> None:
    """Give each read item that is one of several current versions (a fork, issue 19) its `conflict`,
    and say each fork once in `warnings`: a read never silently picks one version."""
    try:
        if not items or not index.has_forks():
            return
        found = index.conflicts([i["id"] for i in items if isinstance(i.get("id"), str)])
    except Exception:  # the derived index: a read still answers
        return
    said: set[tuple[str, ...]] = set()
    for item in items:
        versions = found.get(item.get("id"))  # type: ignore[arg-type]
        if versions:
            item["conflict"] = conflict_of(versions, item["id"])
            key = tuple(item["conflict"]["versions"])
            if key not in said:
                said.add(key)
                warnings.append(item["conflict"]["summary"])


def _log_of(index: Index, log: Log, row: dict[str, Any]) -> Log:
    """The log the row's bytes are in: the store's own, or a teammate's (issue 19)."""
    line = row.get("line")
    return log if not isinstance(line, int) or line >> KEY_BITS == 0 else index.log_of(line)


def marked(index: Index, log: Log, rec: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The record as stored, plus what later records say about it: `superseded_by`, and
    `retracted` {by, reason, ts, author} when a retraction (of it or of its chain's head) hides it; a
    purged record's tombstone (kept verbatim) gains who purged it and why (`purged_by`: by, reason,
    ts, author)."""
    if row.get("superseded_by"):
        rec["superseded_by"] = row["superseded_by"]
    if row.get("tomb"):
        forgotten = rec.get("forgotten")
        by = forgotten.get("by") if isinstance(forgotten, dict) else row.get("retracted_by")
        if isinstance(by, str):
            rec["purged_by"] = _attributed(index, log, {"by": by})
        return rec
    if not row.get("hidden") or row["kind"] == records.FORGET_KIND:
        return rec
    via = None
    by = row.get("retracted_by")
    if by is None:
        head = index.head_of(row["id"])
        if head is None or not head.get("retracted_by"):
            return rec
        by, via = head["retracted_by"], head["id"]
    mark = _attributed(index, log, {"by": by})
    if via is not None:
        mark["via"] = via
    rec["retracted"] = mark
    return rec


def _attributed(index: Index, log: Log, mark: dict[str, Any]) -> dict[str, Any]:
    """`mark` ({by: a forget record's id}) with that record's time, reason and author: a teammate's
    name as its writer log carries it, or this machine's (its author on the team, else "you")."""
    forget = index.by_id(mark["by"])
    if forget is None:
        return mark
    try:
        frec = read_row(index, log, forget)
    except records.BadLine:
        return mark
    mark["ts"] = frec["ts"]
    if isinstance(frec.get("reason"), str):
        mark["reason"] = frec["reason"]
    if forget.get("writer"):
        mark["author"] = forget.get("author") or forget["writer"]
    else:
        from .team.readable import own_author  # lazy: +0.9 ms on a hook that reads records, measured

        mark["author"] = own_author(log.directory, forget.get("scope")) or "you (this machine)"
    return mark


# -- token budgets ------------------------------------------------------------------------------------
HIT_OVERHEAD = 10  # tokens of a reply line besides its text and named fields: age, score, marks, punctuation
MIN_TRIMMED = 16  # a trimmed hit keeps at least this many tokens of its text: never a hit of nothing
CUT_MARK = 18  # what a reply line adds to a cut text: ' …[cut: 12,345 more characters; memory_get has it whole]'
#: What a reply spends besides its hits: its head line, the fence around the hits, the budget's own note,
#: the next page's cursor.
REPLY_FRAME = 120


def hit_cost(one: dict[str, Any]) -> int:
    """Estimated tokens of a hit as a reply shows it: its text and every field its line names."""
    named = " ".join(str(one.get(k) or "") for k in ("id", "kind", "scope", "author", "writer", "superseded_by"))
    return estimate_tokens(one["text"]) + estimate_tokens(named) + HIT_OVERHEAD


def fit_tokens(hits: list[dict[str, Any]], budget: int,
               warnings: list[str] | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """(the hits kept, best first, while the whole reply fits the budget; how many were left out; how many
    were trimmed). The budget covers the reply's frame and `warnings` too, and each hit's named fields
    besides its text. The first hit that does not fit is trimmed to the room left when that room is worth
    reading, and always when it is the first hit (a reply of nothing would say less than a part). A
    trimmed hit keeps `text_chars`, its whole text's length: the reply says how much was cut."""
    kept: list[dict[str, Any]] = []
    used = REPLY_FRAME + sum(estimate_tokens(w) for w in warnings or [])
    for i, one in enumerate(hits):
        cost = hit_cost(one)
        if used + cost <= budget:
            kept.append(one)
            used += cost
            continue
        room = budget - used - (cost - estimate_tokens(one["text"]))
        if kept and room < MIN_TRIMMED:
            return kept, len(hits) - i, 0
        trimmed = dict(one)
        room -= CUT_MARK  # the reply says what was cut
        trimmed["text"] = trim_to_tokens(one["text"], max(room, MIN_TRIMMED), marker="")
        cut_any = trimmed["text"] != one["text"]
        if cut_any:
            trimmed["text_truncated"] = True
            trimmed["text_chars"] = len(one["text"])
        kept.append(trimmed)
        return kept, len(hits) - i - 1, int(cut_any)
    return kept, 0, 0


def budget_note(max_tokens: int, left_out: int, trimmed: int, what: str) -> str:
    """'max_tokens=200: left out 3 hits, cut 1 text (text_truncated)'."""
    parts = [f"left out {left_out} {what}{'s' if left_out != 1 else ''}"] if left_out else []
    if trimmed:
        parts.append(f"cut {trimmed} text (text_truncated)")
    return f"max_tokens={max_tokens}: " + ", ".join(parts)


def trim_to_tokens(text: str, budget: int, marker: str = " […trimmed]") -> str:
    """The longest prefix of `text` (plus the marker) whose estimate fits `budget`."""
    if estimate_tokens(text) <= budget:
        return text
    room = max(budget - estimate_tokens(marker), 0)
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    kept = text[:lo].rstrip()
    if not kept.strip():  # never a text of nothing but the marker: at least its first word
        kept = (text.split() or [text])[0][:80]
    return kept + marker


def resolve_read_scopes(scope: str | None, project: str | None,
                        known_scopes: Callable[[], list[str]]) -> tuple[list[str] | None, list[str]]:
    """A read's `scope` argument as the scopes to read, and what the read must say of them: that outside
    a project only global records were read, or that a named scope holds nothing here (with the
    nearest known scopes). `known_scopes` is asked only when a scope is named."""
    if scope is None:
        note = p.default_note(scope, project)
        return p.default_read_scopes(project), [note] if note else []
    known = known_scopes() if not (isinstance(scope, str) and scope.strip() == p.ALL_SCOPES) else []
    scopes = p.read_scopes(scope, project, known)
    note = p.unknown_note(scope, scopes, project, known)
    return scopes, [note] if note else []


def with_other_checkouts(index: Index, scopes: list[str] | None) -> list[str] | None:
    """`scopes` plus the path scopes of other worktrees and clones of the same repositories (the same
    project key): one project, one memory."""
    if not scopes:
        return scopes
    keys = {}
    for scope in scopes:
        if os.path.isabs(scope) and os.path.isdir(scope):
            ident = p.identity(scope)
            if ident is not None:
                keys[scope] = ident["key"]
    try:
        return index.same_project(scopes, keys)
    except sqlite3.Error:
        return scopes
