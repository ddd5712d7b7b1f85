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
ID_FIELDS = ("supersedes",)
ID_LISTS = ("targets", "resolves")


def _label(value: object, name: str, limit: int = MAX_LABEL) -> str | None:
    if not isinstance(value, str):
        return f"its {name} is not a string"
    if not value or len(value) > limit:
        return f"its {name} is empty or longer than {limit} characters"
    if _CONTROL_IN_LABEL.search(value):
        return f"its {name} holds a control character"
    return None


def _name(key: object) -> str | None:
    if not isinstance(key, str) or not key or len(key) > MAX_FIELD_NAME or _CONTROL_IN_LABEL.search(key):
        return f"has a field name that is empty, longer than {MAX_FIELD_NAME} characters or holds a control character"
    return None


def _value(value: Any, where: str, depth: int) -> str | None:
    """Free values at any depth: field names one printable line, nesting bounded."""
    if depth > MAX_DEPTH:
        return f"{where} is nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return None  # free text is anything a person may write: every path that shows it escapes it
    if isinstance(value, dict):
        for k, v in value.items():
            why = _name(k)
            if why:
                return f"{where} {why}"
            why = _value(v, f"{where}.{k}", depth + 1)
            if why:
                return why
        return None
    if isinstance(value, list):
        for i, v in enumerate(value):
            why = _value(v, f"{where}[{i}]", depth + 1)
            if why:
                return why
        return None
    if isinstance(value, float) and value != value:  # NaN: not JSON a teammate's retained writes
        return f"{where} is not a number"
    return None


def problem(rec: Mapping[str, Any], writer: str) -> str | None:
    """Why a (chain-valid) line of `writer`'s file is not a record another retained wrote, or None.
    Tombstones keep only their chain fields and are vouched for elsewhere."""
    for name in ("id",):
        if not isinstance(rec.get(name), str) or not ID.match(rec[name]):
            return f"its {name} is not a record id ({str(rec.get(name))[:40]!r})"
    if not isinstance(rec.get("kind"), str) or not KIND.match(rec["kind"]):
        return f"its kind is not a plain word ({str(rec.get('kind'))[:40]!r})"
    if "writer" in rec and rec["writer"] != writer:
        return f"it names writer {str(rec.get('writer'))[:40]!r}, not the file's writer"
    author = rec.get("author")
    if author is not None:
        if not isinstance(author, dict) or not set(author) <= {"name", "email"}:
            return "its author is not {name, email}"
        for k, v in author.items():
            why = _label(v, f"author's {k}", MAX_AUTHOR)
            if why:
                return why
    for name in LABELS:
        if name in rec:
            why = _label(rec[name], name, MAX_SCOPE_CHARS if name == "scope" else MAX_LABEL)
            if why:
                return why
    for name in ID_FIELDS:
        if name in rec and (not isinstance(rec[name], str) or not ID.match(rec[name])):
            return f"its {name} is not a record id"
    for name in ID_LISTS:
        if name in rec and (not isinstance(rec[name], list) or len(rec[name]) > 500
                            or not all(isinstance(t, str) and ID.match(t) for t in rec[name])):
            return f"its {name} is not a list of record ids"
    seen = rec.get("seen")
    if seen is not None and not (isinstance(seen, dict) and all(isinstance(k, str) and re.match(r"[a-z0-9][a-z0-9_-]{2,63}\Z", k)
                                                                and isinstance(v, int) and not isinstance(v, bool)
                                                                for k, v in seen.items())):
        return "its seen is not {writer: seq}"
    for key, value in rec.items():
        why = _name(key)
        if why:
            return f"it {why}"
        why = _value(value, key, 1)
        if why:
            return why
    return None


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
    if not isinstance(scope, str) or not same_project_key(scope, key):
        return f"it claims scope {str(scope)[:60]!r}, another project than the one this ref is shared for"
    return None
