"""Minimal, comment-preserving edits of JSON and JSONC text.

No well-kept comment-preserving JSONC library exists for Python's standard library or our dependency
list, so this module splices text: it parses the document into nodes that remember their byte spans,
changes only the span of the member or element being set or removed, and leaves every other byte
(comments, key order, indentation, newline style, trailing commas) as it was. Callers re-parse the
result before writing it.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # in the module, not in its stubs
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


#: Deeper than any host's config nests (a handful of levels), far below the interpreter's recursion
#: limit: the parser recurses once per level, so a file of thousands of `[` is refused, not a crash.
MAX_DEPTH = 256
#: Larger than any config file a host writes (Claude Code's ~/.claude.json, the largest, grows to
#: tens of MiB with its history), small enough that a file of another kind is refused unread.
MAX_BYTES = 256 * 1024 * 1024


class JSONCError(ValueError):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} at line {line}, column {column}")
        self.line = line
        self.column = column
        self.reason = message


class Node:
    """A value with its span. Nested containers that are plain JSON are decoded in one C call and
    broken into members only when an edit looks inside them (`members`, `items`)."""

    __slots__ = ("kind", "start", "end", "_members", "_items", "value", "depth", "_parser")

    def __init__(self, kind: str, start: int, depth: int) -> None:
        self.kind = kind  # "object", "array" or "scalar"
        self.start = start
        self.end = start
        self._members: list[Member] = []
        self._items: list[Node] = []
        self.value: Any = None
        self.depth = depth
        self._parser: _Parser | None = None  # set while the children are not parsed yet

    def _expand(self) -> None:
        parser, self._parser = self._parser, None
        if parser is not None:
            full = _Parser(parser.s, comments=parser.comments, trailing_commas=parser.trailing)
            full.i = self.start
            node = full.obj(self.depth) if self.kind == "object" else full.arr(self.depth)
            self._members, self._items = node._members, node._items

    @property
    def members(self) -> list[Member]:
        self._expand()
        return self._members

    @property
    def items(self) -> list[Node]:
        self._expand()
        return self._items


class Member:
    __slots__ = ("key", "start", "value")

    def __init__(self, key: str, start: int, value: Node) -> None:
        self.key = key
        self.start = start  # where the key's opening quote is
        self.value = value


_SPACE = re.compile(r"[ \t\r\n\ufeff]*")
_SCALAR = json.JSONDecoder()


class _Parser:
    def __init__(self, text: str, *, comments: bool, trailing_commas: bool) -> None:
        self.s = text
        self.i = 0
        self.comments = comments
        self.trailing = trailing_commas

    def error(self, message: str, at: int | None = None) -> JSONCError:
        pos = self.i if at is None else at
        line = self.s.count("\n", 0, pos) + 1
        col = pos - (self.s.rfind("\n", 0, pos) + 1) + 1
        return JSONCError(message, line, col)

    def skip(self) -> None:
        s, n = self.s, len(self.s)
        while True:
            found = _SPACE.match(s, self.i)  # it matches everywhere, if only the empty string
            self.i = found.end() if found else self.i
            if self.i + 1 < n and s[self.i] == "/" and s[self.i + 1] in "/*":
                if not self.comments:
                    raise self.error("comments are not allowed in this file")
                if s[self.i + 1] == "/":
                    end = s.find("\n", self.i)
                    self.i = n if end < 0 else end
                else:
                    end = s.find("*/", self.i + 2)
                    if end < 0:
                        raise self.error("unterminated /* comment")
                    self.i = end + 2
            else:
                return

    def parse(self) -> Node:
        self.skip()
        node = self.value(0)
        self.skip()
        if self.i != len(self.s):
            raise self.error("unexpected text after the JSON value")
        return node

    def value(self, depth: int) -> Node:
        if self.i >= len(self.s):
            raise self.error("unexpected end of file")
        c = self.s[self.i]
        if c in "{[":
            if depth >= MAX_DEPTH:
                raise self.error(f"nested deeper than {MAX_DEPTH} levels")
            if depth:  # plain JSON inside: decode it whole, split it up only if an edit needs to
                try:
                    value, end = _SCALAR.raw_decode(self.s, self.i)
                except (ValueError, RecursionError):  # comments, trailing commas, too deep for the C
                    pass  # decoder, or an error to report precisely: the parser below says which
                else:
                    node = Node("object" if c == "{" else "array", self.i, depth)
                    node.value, node.end, node._parser = value, end, self
                    self.i = end
                    return node
            return self.obj(depth) if c == "{" else self.arr(depth)
        node = Node("scalar", self.i, depth)
        if c == '"':
            node.value = self.string()
        else:
            try:
                node.value, end = _SCALAR.raw_decode(self.s, self.i)
            except ValueError:
                raise self.error("expected a value") from None
            if isinstance(node.value, (dict, list)):
                raise self.error("expected a value")
            self.i = end
        node.end = self.i
        return node

    def string(self) -> str:
        start = self.i
        try:
            value, self.i = scanstring(self.s, start + 1, True)
        except ValueError as e:
            if "Unterminated" in str(e):
                raise self.error("unterminated string", start) from None
            raise self.error("invalid string", getattr(e, "pos", start)) from None
        return value

    def obj(self, depth: int) -> Node:
        node = Node("object", self.i, depth)
        self.i += 1
        self.skip()
        seen: set[str] = set()
        while True:
            if self.i < len(self.s) and self.s[self.i] == "}":
                self.i += 1
                break
            if self.i >= len(self.s) or self.s[self.i] != '"':
                raise self.error("expected a string key or '}'")
            key_start = self.i
            key = self.string()
            if key in seen:
                raise self.error(f"duplicate key {key!r}", key_start)
            seen.add(key)
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] != ":":
                raise self.error("expected ':'")
            self.i += 1
            self.skip()
            node._members.append(Member(key, key_start, self.value(depth + 1)))
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == ",":
                self.i += 1
                self.skip()
                if self.i < len(self.s) and self.s[self.i] == "}" and not self.trailing:
                    raise self.error("trailing comma")
                continue
            if self.i < len(self.s) and self.s[self.i] == "}":
                self.i += 1
                break
            raise self.error("expected ',' or '}'")
        node.end = self.i
        node.value = {m.key: m.value.value for m in node._members}
        return node

    def arr(self, depth: int) -> Node:
        node = Node("array", self.i, depth)
        self.i += 1
        self.skip()
        while True:
            if self.i < len(self.s) and self.s[self.i] == "]":
                self.i += 1
                break
            node._items.append(self.value(depth + 1))
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == ",":
                self.i += 1
                self.skip()
                if self.i < len(self.s) and self.s[self.i] == "]" and not self.trailing:
                    raise self.error("trailing comma")
                continue
            if self.i < len(self.s) and self.s[self.i] == "]":
                self.i += 1
                break
            raise self.error("expected ',' or ']'")
        node.end = self.i
        node.value = [n.value for n in node._items]
        return node


def parse(text: str, *, comments: bool = True, trailing_commas: bool = True) -> Node:
    """Parse JSON (comments=False, trailing_commas=False) or JSONC into span-aware nodes; a file nested
    deeper than MAX_DEPTH or larger than MAX_BYTES is a JSONCError like any other bad file."""
    if len(text) > MAX_BYTES:
        raise JSONCError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB, not a config file", 1, 1)
    try:
        return _Parser(text, comments=comments, trailing_commas=trailing_commas).parse()
    except RecursionError:  # called with the stack already deep: still a bad file, not a crash
        raise JSONCError(f"nested deeper than this reader can follow (the limit is {MAX_DEPTH})", 1, 1) from None


def loads(text: str, **kw: Any) -> Any:
    return parse(text, **kw).value


# -- editing ---------------------------------------------------------------------------------------
class Style:
    """How the file is laid out, so inserted text looks like the rest of it."""

    def __init__(self, text: str) -> None:
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.unit = "  "
        for line in text.splitlines():
            stripped = line.lstrip(" \t")
            if stripped and stripped[0] in "\"{[" and len(stripped) < len(line):
                lead = line[: len(line) - len(stripped)]
                self.unit = "\t" if lead.startswith("\t") else lead
                break

    def dump(self, value: Any, indent: str) -> str:
        """`value` as JSON laid out for a line that starts with `indent`."""
        unit = "\t" if self.unit == "\t" else len(self.unit)
        text = json.dumps(value, indent=unit, ensure_ascii=False)
        return text.replace("\n", self.newline + indent)


def _line_start(s: str, i: int) -> int:
    return s.rfind("\n", 0, i) + 1


def _indent_of(s: str, i: int) -> str:
    start = _line_start(s, i)
    j = start
    while j < len(s) and s[j] in " \t":
        j += 1
    return s[start:j]


def _after_value(s: str, end: int) -> tuple[int, bool, int]:
    """From a value's end: (position of a following comma or -1, rest of line is blank/comment, end of line)."""
    j = end
    while j < len(s) and s[j] in " \t":
        j += 1
    comma = -1
    if j < len(s) and s[j] == ",":
        comma = j
        j += 1
        while j < len(s) and s[j] in " \t":
            j += 1
    eol = s.find("\n", j)
    eol = len(s) if eol < 0 else eol
    rest = s[j:eol].rstrip("\r")
    blank = rest == "" or rest.startswith("//")
    return comma, blank, eol if s[eol - 1:eol] != "\r" else eol - 1


def _insert(text: str, container: Node, make_entry: Any, style: Style) -> str:
    """Insert an entry (a member `"k": v` or an array element) as the last child of `container`.

    `make_entry(indent)` renders it for a line starting with `indent`.
    """
    children = container.members if container.kind == "object" else container.items
    close = container.end - 1
    if not children:
        inner = text[container.start + 1 : close]
        if "\n" in inner or "\n" in text[: container.start] or container.depth == 0:
            indent = _indent_of(text, container.start) if container.depth else ""
            body = style.newline + indent + style.unit + make_entry(indent + style.unit) + style.newline + indent
            # keep comments that sat inside the empty container
            kept = inner.strip()
            if kept:
                body = style.newline + indent + style.unit + kept + body
            return text[: container.start + 1] + body + text[close:]
        return text[: container.start + 1] + make_entry("") + text[close:]
    last = children[-1]
    last_start = last.start
    last_end = _end(last)
    comma, blank, eol = _after_value(text, last_end)
    if blank and eol < close and text.count("\n", last_end, close) >= 1:
        indent = _indent_of(text, last_start)
        entry = make_entry(indent)
        if comma >= 0:  # trailing-comma style: our entry goes after that line, with its own comma
            return text[:eol] + style.newline + indent + entry + "," + text[eol:]
        return text[:last_end] + "," + text[last_end:eol] + style.newline + indent + entry + text[eol:]
    entry = make_entry(_indent_of(text, last_start))
    if comma >= 0:
        return text[: comma + 1] + " " + entry + "," + text[comma + 1 :]
    return text[:last_end] + ", " + entry + text[last_end:]


def _end(child: Member | Node) -> int:
    """Where a child of a container ends: an object's member ends with its value."""
    return child.value.end if isinstance(child, Member) else child.end


def _remove(text: str, container: Node, index: int) -> str:
    """Remove child `index` of `container`, with its comma and, when it filled whole lines, those lines."""
    children = container.members if container.kind == "object" else container.items
    child = children[index]
    start = child.start
    end = _end(child)
    comma, blank, eol = _after_value(text, end)
    line_start = _line_start(text, start)
    whole_lines = text[line_start:start].strip(" \t") == "" and blank
    is_last = index == len(children) - 1
    if whole_lines:
        nl_end = text.find("\n", eol)
        cut_end = len(text) if nl_end < 0 else nl_end + 1
        new = text[:line_start] + text[cut_end:]
        if is_last and comma < 0 and index > 0:
            prev = children[index - 1]
            prev_end = _end(prev)
            p_comma, _, _ = _after_value(new, prev_end)
            if p_comma >= 0:
                new = new[:p_comma] + new[p_comma + 1 :]
        return new
    if comma >= 0:
        j = comma + 1
        while j < len(text) and text[j] in " \t":
            j += 1
        return text[:start] + text[j:]
    if index > 0:  # inline and last: take the comma before it
        prev = children[index - 1]
        prev_end = _end(prev)
        k = text.rfind(",", prev_end, start)
        return text[:k] + text[end:]
    return text[:start] + text[end:]


def get_node(root: Node, path: Sequence[str | int]) -> Node | None:
    node: Node | None = root
    for step in path:
        if node is None:
            return None
        if isinstance(step, int):
            node = node.items[step] if node.kind == "array" and 0 <= step < len(node.items) else None
        else:
            if node.kind != "object":
                return None
            node = next((m.value for m in node.members if m.key == step), None)
    return node


def set_value(text: str, path: list[str], value: Any, *, comments: bool = True) -> str:
    """Set the object member at `path` (creating parent objects) to `value`, touching nothing else."""
    style = Style(text)
    root = parse(text, comments=comments)
    if root.kind != "object":
        raise JSONCError("the top level is not an object", 1, 1)
    node = root
    for depth, key in enumerate(path):
        member = next((m for m in node.members if m.key == key), None) if node.kind == "object" else None
        if node.kind != "object":
            raise JSONCError(f"{'.'.join(path[:depth])} is not an object", 1, 1)
        if member is None:
            rest: Any = value
            for k in reversed(path[depth + 1 :]):
                rest = {k: rest}
            name = json.dumps(key, ensure_ascii=False)
            return _insert(text, node, lambda indent, name=name, rest=rest: name + ": " + style.dump(rest, indent), style)
        if depth == len(path) - 1:
            v = member.value
            if v.value == value and type(v.value) is type(value):
                return text
            return text[: v.start] + style.dump(value, _indent_of(text, member.start)) + text[v.end :]
        node = member.value
    return text


def remove_key(text: str, path: list[str], *, comments: bool = True, prune: int = 0) -> str:
    """Remove the member at `path`; then remove up to `prune` parents that this left empty."""
    root = parse(text, comments=comments)
    parent = get_node(root, path[:-1]) if len(path) > 1 else root
    if parent is None or parent.kind != "object":
        return text
    idx = next((i for i, m in enumerate(parent.members) if m.key == path[-1]), None)
    if idx is None:
        return text
    text = _remove(text, parent, idx)
    if not parent.members[:idx] + parent.members[idx + 1 :]:
        # Left empty: collapse the white space we leave behind back to `{}`.
        emptied = get_node(parse(text, comments=comments), path[:-1]) if len(path) > 1 else parse(text, comments=comments)
        if emptied is not None and text[emptied.start + 1 : emptied.end - 1].strip() == "":
            text = text[: emptied.start + 1] + text[emptied.end - 1 :]
    if prune and len(path) > 1:
        again = get_node(parse(text, comments=comments), path[:-1])
        if again is not None and again.kind in ("object", "array") and not (again.members or again.items):
            inner = text[again.start + 1 : again.end - 1]
            if "//" not in inner and "/*" not in inner:
                return remove_key(text, path[:-1], comments=comments, prune=prune - 1)
    return text


def append_item(text: str, path: list[str], value: Any, *, comments: bool = True) -> str:
    """Append `value` to the array at `path`, creating it (and parents) when missing."""
    style = Style(text)
    node = get_node(parse(text, comments=comments), path)
    if node is None:
        return set_value(text, path, [value], comments=comments)
    if node.kind != "array":
        raise JSONCError(f"{'.'.join(path)} is not a list", text.count("\n", 0, node.start) + 1, 1)
    return _insert(text, node, lambda indent: style.dump(value, indent), style)


def remove_item(text: str, path: list[str], index: int, *, comments: bool = True) -> str:
    node = get_node(parse(text, comments=comments), path)
    if node is None or node.kind != "array" or not 0 <= index < len(node.items):
        return text
    return _remove(text, node, index)


def replace_item(text: str, path: list[str], index: int, value: Any, *, comments: bool = True) -> str:
    style = Style(text)
    node = get_node(parse(text, comments=comments), path)
    if node is None or node.kind != "array" or not 0 <= index < len(node.items):
        raise JSONCError(f"no item {index} in {'.'.join(path)}", 1, 1)
    item = node.items[index]
    return text[: item.start] + style.dump(value, _indent_of(text, item.start)) + text[item.end :]
