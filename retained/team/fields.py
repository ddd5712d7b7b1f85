"""Every field of a line another writer pushed is data: its shape checked before anything reads it. Pure.

A teammate's line reaches this machine from a remote anyone with push access can write, so no field of
it is trusted: not its id, kind, author, writer, scope, clock or field names. Two checks:

- `problem(rec, writer)`: the line's shape. Ids, kinds, labels, authors and field names are short,
  one printable line, of the form retained writes; nesting is bounded. Free text is whatever a person
  may write (every path that shows it escapes it and neutralises markers). A line that fails is not
  a valid writer record: the sync takes in the lines before it and names it (writer, line, field).
- `confined(rec, personal)`: what a ref may carry. A project's ref carries that project's records,
  which every clone files under its own key for the project (the ref names the project, not the spelling
  of a clone's URL); the personal ref carries only `global` records. A line that claims another scope
  is not imported, and is named.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from ..project import same_project_key
from ..records import GLOBAL_SCOPE, MAX_SCOPE_CHARS

#: Record ids as retained makes them (mem_ + 26 Crockford characters), and the shapes other tools'
#: imports kept: letters, digits, `_ - . :`, at most 128 characters.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")
#: Kinds as records.check_kind lets a write name them.
KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
MAX_FIELD_NAME = 128
#: Control characters (C0 but tab and newline, DEL, C1), line and paragraph separators, and the
#: bidirectional overrides that make text read differently from what it is.
_CONTROL_IN_LABEL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_LABEL = 512
MAX_AUTHOR = 200
MAX_DEPTH = 8
#: Fields that hold a label, never free text: one printable line each.
LABELS = ("scope", "source", "session_id", "client_op_id", "action", "ts")
ID_LISTS = ("targets", "resolves")
_WRITER = re.compile(r"[a-z0-9][a-z0-9_-]{2,63}\Z")


def _label(value: object, name: str, limit: int = MAX_LABEL) -> str | None:
    if type(value) is not str:
        return f"its {name} is not a string"
    if not value or len(value) > limit:
        return f"its {name} is empty or longer than {limit} characters"
    if _CONTROL_IN_LABEL.search(value):
        return f"its {name} holds a control character"
    return None


def _name(key: object, clean: bool = False) -> str | None:
    if type(key) is not str or not key or len(key) > MAX_FIELD_NAME or (not clean and _CONTROL_IN_LABEL.search(key)):
        return f"has a field name that is empty, longer than {MAX_FIELD_NAME} characters or holds a control character"
    return None


def _value(value: Any, where: str, depth: int, clean: bool = False) -> str | None:
    """Free values at any depth: field names one printable line, nesting bounded."""
    if depth > MAX_DEPTH:
        return f"{where} is nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return None  # free text is anything a person may write: every path that shows it escapes it
    if isinstance(value, dict):
        for k, v in value.items():
            why = _name(k, clean)
            if why:
                return f"{where} {why}"
            why = _value(v, f"{where}.{k}", depth + 1, clean)
            if why:
                return why
        return None
    if isinstance(value, list):
        for i, v in enumerate(value):
            why = _value(v, f"{where}[{i}]", depth + 1, clean)
            if why:
                return why
        return None
    if isinstance(value, float) and value != value:  # NaN: not JSON a teammate's retained writes
        return f"{where} is not a number"
    return None


#: In a canonical line, a control character is written as an escape (a backslash) and the others above
#: as raw UTF-8: a line with neither holds none anywhere, and its labels need no character check.
_SUSPECT = re.compile(rb"\\|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _clean(raw: bytes) -> bool:
    """Whether a canonical line holds no escape and no suspect character (`_SUSPECT`): a byte search and
    an ASCII test rule most lines in (a regex over every line was a third of the checks' time)."""
    return (b"\\" not in raw and raw.isascii()) or _SUSPECT.search(raw) is None


_AUTHOR = frozenset(("name", "email"))
_LIMITS = tuple((name, MAX_SCOPE_CHARS if name == "scope" else MAX_LABEL) for name in LABELS)
#: Fields of retained's own whose values may nest (their field names are checked at any depth).
_NESTED = frozenset(("purged", "forgotten", "imported"))


def problem(rec: Mapping[str, Any], writer: str, raw: bytes | None = None) -> str | None:
    """Why a (chain-valid) line of `writer`'s file is not a record another retained wrote, or None.
    Tombstones keep only their chain fields and are vouched for elsewhere. `raw`: the line's canonical
    bytes, when at hand (a line with no escape and no suspect character skips the character checks)."""
    rid, kind = rec.get("id"), rec.get("kind")
    if type(rid) is not str or not ID.match(rid):
        return f"its id is not a record id ({str(rid)[:40]!r})"
    if type(kind) is not str or not KIND.match(kind):
        return f"its kind is not a plain word ({str(kind)[:40]!r})"
    if "writer" in rec and rec["writer"] != writer:
        return f"it names writer {str(rec.get('writer'))[:40]!r}, not the file's writer"
    clean = raw is not None and _clean(raw)
    keys = rec.keys()
    author = rec.get("author")
    if author is not None:
        if type(author) is not dict or not author.keys() <= _AUTHOR:
            return "its author is not {name, email}"
        for k, v in author.items():
            if not (type(v) is str and 0 < len(v) <= MAX_AUTHOR and (clean or not _CONTROL_IN_LABEL.search(v))):
                return _label(v, f"author's {k}", MAX_AUTHOR)
    for name, limit in _LIMITS:  # inline: _label's words only for a line that fails
        if name in rec:
            v = rec[name]
            if not (type(v) is str and 0 < len(v) <= limit and (clean or not _CONTROL_IN_LABEL.search(v))):
                return _label(v, name, limit)
    target = rec.get("supersedes")
    if target is not None and (type(target) is not str or not ID.match(target)):
        return "its supersedes is not a record id"
    for name in ID_LISTS:
        if name in rec and (type(rec[name]) is not list or len(rec[name]) > 500
                            or not all(type(t) is str and ID.match(t) for t in rec[name])):
            return f"its {name} is not a list of record ids"
    seen = rec.get("seen")
    if seen is not None and not (type(seen) is dict and all(type(k) is str and _WRITER.match(k) and type(v) is int
                                                            for k, v in seen.items())):
        return "its seen is not {writer: seq}"
    if keys <= _PLAIN:  # most lines hold only retained's own fields, none of them nested
        return None
    for key in keys - _KNOWN:
        why = _name(key, clean) or (_value(rec[key], key, 1, clean) if isinstance(rec[key], (dict, list)) else None)
        if why:
            return why if why.startswith(str(key)) else f"it {why}"
    for key in keys & _NESTED:
        if isinstance(rec[key], (dict, list)):
            why = _value(rec[key], key, 1, clean)
            if why:
                return why
    return None


#: Fields retained itself writes, whose names need no check (their values are checked above or are free text).
_KNOWN = frozenset(("seq", "id", "ts", "kind", "text", "prev", "sha256", "scope", "source", "supersedes",
                    "client_op_id", "resolves", "hlc", "writer", "author", "seen", "session_id", "action",
                    "targets", "purged", "reason", "forgotten", "private", "shared", "imported"))
_PLAIN = _KNOWN - _NESTED


@functools.lru_cache(maxsize=256)
def _same(scope: str, key: str) -> bool:
    """project.same_project_key, remembered: a log's lines name one scope, over and over."""
    return same_project_key(scope, key)


def confined(rec: Mapping[str, Any], key: str) -> str | None:
    """Why the ref of project `key` (or the personal ref, `key` global) may not carry this line; None
    when it may. A project's ref: records of that project, their `scope` the writer's spelling of its
    key (another protocol, case, host alias: `project.same_project_key`), or none; never `global`,
    another project or a path. The personal ref: `global` records only. Tombstones keep the scope of
    the line they replace and are held to the same rule."""
    scope = rec.get("scope")
    if scope is None:
        return None
    if key == GLOBAL_SCOPE:
        if scope != GLOBAL_SCOPE:
            return f"it claims scope {str(scope)[:60]!r}, and the personal ref carries only global memory"
        return None
    if scope == GLOBAL_SCOPE:
        return "it claims scope 'global', and a project's ref carries only that project's memory"
    if not isinstance(scope, str) or not _same(scope, key):
        return f"it claims scope {str(scope)[:60]!r}, another project than the one this ref is shared for"
    return None
