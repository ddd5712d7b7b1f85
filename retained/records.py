"""The bytes of the log: canonical JSON, the hash chain, one record per line. Pure; no I/O.

The format is specified in docs/FORMAT.md; this module is its reference implementation.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable

from . import safejson
from .errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime
    from typing import Any

GENESIS = "0" * 64

#: Top-level keys retained gives meaning to. Anything else on a record is kept verbatim.
CORE_KEYS = ("seq", "id", "ts", "kind", "text", "prev", "sha256")
OPTIONAL_KEYS = ("scope", "source", "supersedes", "client_op_id", "resolves", "hlc")
#: Keys with a meaning on lifecycle records (kind `forget`) and tombstones, or added to records by reads.
LIFECYCLE_KEYS = ("forgotten", "retracted", "superseded_by", "purged_by")
RESERVED_KEYS = frozenset(CORE_KEYS + OPTIONAL_KEYS + LIFECYCLE_KEYS + ("fields",))

#: The kind of retraction, undo and purge records; written by `Store.forget/unforget/purge` only.
FORGET_KIND = "forget"
#: What a tombstone keeps of the record it replaces (plus `forgotten`, and `supersedes` when present,
#: so that a purged correction still closes the chain it belongs to).
TOMBSTONE_KEYS = ("seq", "id", "ts", "kind", "scope", "prev", "sha256", "supersedes")

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

MAX_TEXT_BYTES = 16 * 1024 * 1024
#: A longer line is a corrupt line, not read into a record. No write makes one: text and source are
#: bound to MAX_TEXT_BYTES each and fields to MAX_FIELDS_BYTES, and escaping at most sextuples a character.
MAX_LINE_BYTES = 256 * 1024 * 1024
MAX_FIELDS_BYTES = MAX_TEXT_BYTES
MAX_SCOPE_CHARS = 512
GLOBAL_SCOPE = "global"


def canonical_json(obj: dict[str, Any]) -> bytes:
    """The one serialisation the hash is computed over (and the one retained writes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def compute_sha256(record: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the record without its own `sha256` field."""
    import hashlib  # lazy: ~8 ms on the prompt hook (measured), which imports this module and hashes nothing

    body = {k: v for k, v in record.items() if k != "sha256"}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def seal(record: dict[str, Any]) -> dict[str, Any]:
    """Return the record with its `sha256` filled in."""
    sealed = dict(record)
    sealed.pop("sha256", None)
    sealed["sha256"] = compute_sha256(sealed)
    return sealed


def format_line(record: dict[str, Any]) -> bytes:
    """One sealed record as one physical line. json escapes every newline inside strings."""
    line = canonical_json(record) + b"\n"
    # Defensive: a raw newline inside the line would split one record into two.
    assert line.count(b"\n") == 1
    return line


class BadLine(ValueError):
    """A line of the log that is not a valid record; `reason` says why in a few words."""

    def __init__(self, reason: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.record = record


def parse_line(line: bytes) -> dict[str, Any]:
    """Parse and self-check one line (without its newline). Raises BadLine.

    Checks the record's own hash and the types of the core fields; the chain link (`prev`)
    is the caller's business because it needs the previous record.
    """
    return checked_line(line)[0]


def checked_line(line: bytes) -> tuple[dict[str, Any], bool]:
    """parse_line, and whether `line` is the record's canonical spelling (as retained writes it; a
    writer's log on a team ref must be). A tombstone is never called canonical here: its caller
    compares it."""
    # Bounded: one line nested a few thousand levels deep (anyone can append one) must be a corrupt
    # line that is skipped and counted, not a RecursionError that stops every command.
    try:
        record = safejson.loads(line, max_bytes=MAX_LINE_BYTES)
    except safejson.JSONError as e:
        raise BadLine("not UTF-8" if e.msg.startswith("not UTF-8") else
                      e.msg if e.msg.startswith(("nested", "larger")) else "not JSON") from None
    if not isinstance(record, dict):
        raise BadLine("not a JSON object")
    # JSON may spell a lone surrogate (\ud800), which no UTF-8 can hold: hashing or indexing such a
    # record would fail in every reader. A surrogate pair (an emoji) is fine and never matches here.
    if _SURROGATE_ESCAPE.search(line) and has_lone_surrogate(record):
        raise BadLine("holds a lone surrogate escape (not valid Unicode)", record)
    if "text" not in record and "forgotten" in record:
        return _parse_tombstone(record), False
    for key in CORE_KEYS:
        if key not in record:
            raise BadLine(f"missing field {key!r}", record)
    seq = record["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise BadLine("seq is not a positive integer", record)
    for key in ("id", "ts", "kind", "text", "prev", "sha256"):
        if not isinstance(record[key], str):
            raise BadLine(f"{key} is not a string", record)
    if not _HEX64.match(record["sha256"]) or not _HEX64.match(record["prev"]):
        raise BadLine("sha256/prev is not 64 lowercase hex digits", record)
    canonical = canonical_json(record) == line
    if not (canonical and _hashes_to(line, record["sha256"])) and compute_sha256(record) != record["sha256"]:
        raise BadLine("sha256 does not match the record's content", record)
    return record, canonical


def _hashes_to(line: bytes, sha: str) -> bool:
    """Whether a canonical line's content hashes to `sha`. The content's canonical JSON is the line
    without its `"sha256"` member, which is never the first (`id`, `kind`, `prev` and `seq` sort before
    it): one serialisation a line instead of two, on every scan of a log. False only sends the caller
    to the slow check."""
    import hashlib  # lazy, as in `compute_sha256`

    member = b',"sha256":"' + sha.encode("ascii") + b'"'
    at = line.rfind(member)
    return at > 0 and hashlib.sha256(line[:at] + line[at + len(member):]).hexdigest() == sha


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in `value` (keys included, at any depth, without recursion) holds a lone
    surrogate, which no UTF-8 can carry."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def is_tombstone(record: Mapping[str, Any]) -> bool:
    """A purged record: what is left of it in the log (see docs/FORMAT.md, "Tombstones")."""
    return "text" not in record and isinstance(record.get("forgotten"), dict)


def _parse_tombstone(record: dict[str, Any]) -> dict[str, Any]:
    """A tombstone's own hash cannot be recomputed (its content is gone): check its shape here; the
    chain (the next record's `prev`) and the purge record that lists it vouch for its `sha256`."""
    for key in ("seq", "id", "ts", "kind", "prev", "sha256"):
        if key not in record:
            raise BadLine(f"tombstone without {key!r}", record)
    seq = record["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise BadLine("seq is not a positive integer", record)
    for key in ("id", "ts", "kind", "prev", "sha256"):
        if not isinstance(record[key], str):
            raise BadLine(f"{key} is not a string", record)
    if not _HEX64.match(record["sha256"]) or not _HEX64.match(record["prev"]):
        raise BadLine("sha256/prev is not 64 lowercase hex digits", record)
    by = record["forgotten"].get("by") if isinstance(record["forgotten"], dict) else None
    if not isinstance(by, str) or set(record) - set(TOMBSTONE_KEYS) - {"forgotten"}:
        raise BadLine("tombstone with content or without forgotten.by", record)
    return record


def tombstone(record: dict[str, Any], by: str) -> dict[str, Any]:
    """What a purge leaves of `record`: position, identity and original hash; no content."""
    kept = {k: record[k] for k in TOMBSTONE_KEYS if k in record}
    kept["forgotten"] = {"by": by}
    return kept


def content_strings(record: dict[str, Any]) -> list[str]:
    """Every string a purge must remove: text, source and every field value (keys left out)."""
    out: list[str] = []
    stack: list[Any] = [v for k, v in record.items() if k not in ("seq", "id", "ts", "kind", "scope", "prev",
                                                                  "sha256", "supersedes")]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def defang_markers(text: str) -> str:
    """`text` as a line of data between the fence markers (MCP search/list/get text; the brief's own
    `_flat` does the same and folds white space too): `<<<` and `>>>` made lookalikes (‹‹‹ ›››), so it can
    never close the block or open a fake one, and every character that is not printable (a newline, a
    terminal escape, a line separator) a space, so it stays one line."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return text.replace("<<<", "‹‹‹").replace(">>>", "›››")


def normalise_text(text: str) -> str:
    """What makes two texts the same memory: case and runs of white space do not count."""
    return " ".join(text.split()).casefold()


NEAR_RATIO = 0.85  # how alike two texts must be to count as near duplicates
# Texts are compared by characters up to NEAR_CHARS (normalised); a longer one by its first NEAR_WORDS
# words instead: by characters, a match costs the product of the two lengths (two 300 kB records
# took over a minute).
NEAR_CHARS = 1000
NEAR_WORDS = 400


def _near_words(norm: str) -> list[str]:
    return re.findall(r"\w+", norm)[:NEAR_WORDS]


def near_form(text: str) -> str | list[str]:
    """What the near-duplicate measure compares: the normalised text, or its words when it is long."""
    norm = normalise_text(text)
    return norm if len(norm) <= NEAR_CHARS else _near_words(norm)


def closeness(mine: str | list[str], theirs: str | list[str], min_length_ratio: float = 0.0) -> float | None:
    """The similarity (0..1) of two `near_form`s when it reaches NEAR_RATIO, else None. A long text
    is compared with a short one by words. `min_length_ratio`: None at once when the shorter is
    below that fraction of the longer. To compare one text with many, prepare it once (`Near`)."""
    return Near(mine).closeness(theirs, min_length_ratio)


class Near:
    """A `near_form` prepared for comparing with many others: what `closeness` needs of it, computed once.

    The measure is difflib's ratio (2·M/T: M the items of its matching blocks, T both lengths), which
    costs about the product of the lengths (~1 ms for two 200-character notes). Three bounds, each at
    least the ratio, turn most pairs away first, so that a pair is never judged other than by the
    ratio itself: the lengths (difflib's real_quick_ratio), the items both hold (its quick_ratio),
    and the longest common subsequence (its matching blocks are one, so M can be no more), computed
    bit-parallel in ~50 us."""

    __slots__ = ("form", "_counts", "_masks", "_words")

    def __init__(self, form: str | list[str]) -> None:
        self.form = form
        self._counts = Counter(form)
        masks: dict[str, int] = {}
        for i, item in enumerate(form):
            masks[item] = masks.get(item, 0) | (1 << i)
        self._masks = masks
        self._words: Near | None = None

    def _as_words(self) -> Near:
        if self._words is None:
            self._words = self if not isinstance(self.form, str) else Near(_near_words(self.form))
        return self._words

    def closeness(self, theirs: str | list[str], min_length_ratio: float = 0.0) -> float | None:
        """`closeness(self.form, theirs, min_length_ratio)`."""
        import difflib  # lazy: +1.1 ms on the prompt hook (measured), which compares no texts

        mine: Near = self
        if isinstance(self.form, str) != isinstance(theirs, str):
            mine = self._as_words()
            theirs = _near_words(theirs) if isinstance(theirs, str) else theirs
        la, lb = len(mine.form), len(theirs)
        if not la or not lb or min(la, lb) / max(la, lb) < min_length_ratio:
            return None
        if 2.0 * min(la, lb) / (la + lb) < NEAR_RATIO:  # difflib's real_quick_ratio
            return None
        counts = mine._counts
        if 2.0 * _shared(counts, theirs) / (la + lb) < NEAR_RATIO:  # its quick_ratio
            return None
        if 2.0 * mine._common_subsequence(theirs) / (la + lb) < NEAR_RATIO:
            return None
        ratio = difflib.SequenceMatcher(None, mine.form, theirs, autojunk=False).ratio()
        return ratio if ratio >= NEAR_RATIO else None

    def _common_subsequence(self, theirs: str | list[str]) -> int:
        """The length of the longest common subsequence of this form and `theirs` (Allison-Dix,
        Hyyrö: one pass over `theirs`, this form's positions as the bits of one integer)."""
        masks = self._masks
        full = (1 << len(self.form)) - 1
        row = full
        for item in theirs:
            match = masks.get(item)
            if match:
                low = row & match
                row = ((row + low) | (row - low)) & full
        return len(self.form) - row.bit_count()


def _shared(counts: Counter[str], theirs: str | list[str]) -> int:
    """How many items `theirs` and the multiset `counts` hold in common (multiset intersection)."""
    return sum((counts & Counter(theirs)).values())


def text_key(text: str) -> str:
    """A short fingerprint of the normalised text (the index looks exact duplicates up by it)."""
    import hashlib  # lazy, as in `compute_sha256`

    return hashlib.sha256(normalise_text(text).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def rfc3339(moment: datetime | None = None) -> str:
    """`moment` (default: now) in UTC as the log writes times: RFC 3339 with microseconds and a Z. A
    moment without a zone is taken as UTC."""
    from datetime import datetime, timezone  # lazy: +2.3 ms on a hook that writes no time (measured)

    if moment is None:
        moment = datetime.now(timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ts_ms(ts: object) -> int | None:
    """Milliseconds since the epoch of an RFC 3339 `ts` (as retained writes it), or None. A time with
    no zone is UTC."""
    from datetime import datetime, timezone  # lazy, as in `rfc3339`

    if not isinstance(ts, str):
        return None
    text = ts.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def now_rfc3339() -> str:
    """Current UTC time, RFC 3339 with microseconds and a Z suffix."""
    return rfc3339()


#: A clock this far ahead of the wall clock (a teammate's wrong or forged one) is not followed: one bad
#: clock would otherwise drag every later record of the team along.
MAX_CLOCK_DRIFT_MS = 24 * 3600 * 1000


def next_clock(last: tuple[int, int], wall_ms: int) -> tuple[int, int]:
    """The team clock `[ms, n]` of a record written at `wall_ms` after every clock up to `last`:
    strictly after `last` (docs/FORMAT.md, "The clock and the order")."""
    if wall_ms > last[0]:
        return wall_ms, 0
    return last[0], last[1] + 1


def new_id() -> str:
    """A ULID-style id: 48 bits of milliseconds then 80 random bits, Crockford base32."""
    n = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[n & 31])
        n >>= 5
    return "mem_" + "".join(reversed(chars))


#: The kinds retained names (others are accepted; a near miss of one of these is refused on a write).
KNOWN_KINDS = ("decision", "preference", "convention", "fact", "todo", "note", "checkpoint")


def check_kind(kind: str) -> str:
    """A kind, lower-cased: kinds are matched without regard to case ('Decision' is 'decision')."""
    if not isinstance(kind, str) or not _KIND.match(kind.strip()):
        raise UsageError(
            f"invalid kind {kind!r}",
            hint="use 1-64 letters, digits, '_', '-' or '.', e.g. note, decision, checkpoint",
        )
    return kind.strip().lower()


def nearest_kind(kind: str, known: Iterable[str]) -> str | None:
    """The known kind `kind` most likely misspells ('decisions' → 'decision'), or None."""
    import difflib  # lazy, as in `closeness`

    names = list(known)
    if kind in names:
        return None
    if kind.endswith("s") and kind[:-1] in names:
        return kind[:-1]
    close = difflib.get_close_matches(kind, names, n=1, cutoff=0.75)
    return close[0] if close else None


def check_scope(scope: str) -> str:
    """A scope is a label (often a project path). Refuse what would be a trap downstream."""
    if not isinstance(scope, str) or not scope.strip():
        raise UsageError("scope must be a non-empty string", hint="omit it to use the default scope")
    if len(scope) > MAX_SCOPE_CHARS:
        raise UsageError(f"scope is longer than {MAX_SCOPE_CHARS} characters", hint="use a shorter label")
    if any(ord(c) < 32 or ord(c) == 127 for c in scope):
        raise UsageError("scope contains a control character (NUL, newline, ...)", hint="use printable text")
    parts = re.split(r"[\\/]", scope)
    if ".." in parts:
        raise UsageError("scope must not contain a '..' path segment", hint="name the project by its real path")
    if scope != scope.strip():
        raise UsageError("scope must not start or end with white space", hint="strip the spaces")
    return scope


def check_text(text: str, what: str = "text") -> str:
    if not isinstance(text, str):
        raise UsageError(f"{what} must be a string", hint=f"pass {what} as text")
    if not text.strip():
        raise UsageError(f"{what} is empty", hint="write something worth remembering")
    if len(text) * 4 > MAX_TEXT_BYTES and len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise UsageError(f"{what} is larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB", hint="store a summary")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} contains a lone surrogate and is not valid Unicode",
                         hint="send well-formed UTF-8 text") from None
    return text


def check_fields(fields: dict[str, Any] | None) -> dict[str, Any]:
    """Extra top-level fields: any JSON value under a name retained does not reserve."""
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise UsageError("fields must be a JSON object", hint='e.g. {"ticket": "ABC-1"}')
    for key in fields:
        if not isinstance(key, str) or not key:
            raise UsageError("field names must be non-empty strings", hint='e.g. {"ticket": "ABC-1"}')
        if key in RESERVED_KEYS:
            raise UsageError(
                f"field {key!r} is reserved",
                hint=f"reserved names: {', '.join(sorted(RESERVED_KEYS))}; pick another name",
            )
    try:
        # The log's reader refuses lines nested too deep or too long (parse_line): refuse them here,
        # before they are written, rather than acknowledge a line that then reads as corrupt.
        safejson.check_depth(fields, safejson.MAX_DEPTH - 1, "fields")
        # NaN and Infinity have no JSON spelling: Python would write them, and every other reader
        # of the log (FORMAT.md) would find a line it cannot parse.
        size = len(json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode("utf-8"))
    except safejson.JSONError as e:
        raise UsageError(e.msg, hint="store a flatter value") from None
    except UnicodeEncodeError:
        raise UsageError("fields contain a lone surrogate and are not valid Unicode",
                         hint="send well-formed UTF-8 text") from None
    except (TypeError, ValueError) as e:
        if "Out of range float" in str(e):
            raise UsageError("fields hold NaN or Infinity, which JSON cannot represent",
                             hint="store the number as a string, or null") from None
        raise UsageError(f"fields are not JSON-serialisable: {e}",
                         hint="use strings, numbers, booleans, null, lists and objects") from None
    if size > MAX_FIELDS_BYTES:
        raise UsageError(f"fields are larger than {MAX_FIELDS_BYTES // (1024 * 1024)} MiB", hint="store a summary")
    return fields
