"""The hosts' own memories: the generic readers, and what the brief leaves out because a host loads it.

Claude Code, Codex and Gemini CLI each keep a memory of their own beside retained's. Where each keeps
it, its exact formats and what it loads at start are facts about one host, so they live in that
host's registry module (`installers/hosts/<name>.py`: `memory_items`, `memory_report`, the
`instruction_files` and `memory_at_start` it declares; see README "Living beside the hosts' own
memory"). This module holds what those formats share: Markdown instruction files (every bullet, and
the prose of every section, is one item whose heading picks its kind), memory folders (a `MEMORY.md`
index plus one topic file each, front matter `name`, `description`, `type`), and the idempotency key of
an import. It never asks the registry: the registry calls these readers, and what the core needs of
it (which files hosts load at start, which hosts have a memory to import) comes in as arguments.
Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

from . import safejson
from .errors import RetainedError
from .project import project_scope
from .switches import parse


class HostMemories(Protocol):
    """What `retained import` needs of the host registry (which passes one in): the hosts whose own
    memory it reads, that memory's items, and the items of a path (a host's memory folder, if it is one)."""

    def sources(self) -> list[str]: ...

    def source_items(self, source: str, env: Mapping[str, str],
                     known_scopes: list[str]) -> tuple[list[Item], list[str]]: ...

    def path_items(self, path: Path, scope: str | None, env: Mapping[str, str],
                   notes: list[str] | None = None) -> list[Item]: ...


class Item:
    """One candidate record read from a host's file."""

    __slots__ = ("text", "kind", "scope", "origin", "section", "line", "host_loaded", "fmt", "name")

    def __init__(self, text: str, kind: str, *, origin: Path, fmt: str, section: str = "", line: int = 0,
                 host_loaded: bool = False, scope: str | None = None, name: str | None = None) -> None:
        self.text, self.kind, self.scope, self.origin = text, kind, scope, origin
        self.section, self.line, self.host_loaded, self.fmt, self.name = section, line, host_loaded, fmt, name

    def provenance(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": str(self.origin), "format": self.fmt}
        if self.section:
            out["section"] = self.section
        if self.line:
            out["line"] = self.line
        if self.name:
            out["name"] = self.name
        if self.host_loaded:
            out["host_loaded"] = True
        return out


# -- small readers the host modules share ----------------------------------------------------------
def home_of(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def project_of(path: Path) -> str:
    """The scope a file belongs to: its project (git root), else its own directory."""
    try:
        return project_scope(cwd=path, env={}) or str(path.resolve())
    except OSError:
        return str(path)


#: The largest file read as memory: instruction files and memory notes are a few KiB; past this a
#: file is something else (a log, a dump) and reading it would hold it whole.
READ_LIMIT = 8 * 1024 * 1024


def read_text(path: Path, limit: int = READ_LIMIT, notes: list[str] | None = None) -> str | None:
    """A file's text, or None (missing, unreadable, or larger than `limit`: then, with `notes`, a
    note says so, since a file skipped for its size is not the same as an empty one)."""
    try:
        if not path.is_file():
            return None
        size = path.stat().st_size
        if size > limit:
            if notes is not None:
                notes.append(too_big(path, size, limit) + ": skipped; split it into smaller files to import it")
            return None
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return None


def too_big(path: Path, size: int, limit: int = READ_LIMIT) -> str:
    return f"{path} is {human_size(size)}, too big to read as memory (the limit is {human_size(limit)})"


class TooBig(RetainedError):
    """A file named for import that is larger than anything read as memory."""


def read_json(path: Path) -> Any:
    text = read_text(path)
    if text is None:
        return None

    try:
        return safejson.loads(text)  # bounded: a host's file nested thousands deep is unreadable, not a crash
    except ValueError:
        return None


def read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text is None:
        return {}
    try:
        import tomllib  # Python 3.11+; lazy: +18 ms (measured) on the session-start hook, which reads no TOML

        return tomllib.loads(text)
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion
        return {}
    except ImportError:  # pragma: no cover - Python 3.10
        import tomlkit  # Python 3.10 has no tomllib

        try:
            return tomlkit.parse(text).unwrap()
        except Exception:
            return {}
    except ValueError:
        return {}


def truthy(value: str | None) -> bool | None:
    """A host's own on/off variable, read as retained reads its own (None: unset or another word)."""
    return parse(value)


# -- Markdown into items -------------------------------------------------------------------------
# Patterns as text: `re` compiles each on first use, so the session-start hook, which imports this
# module for the brief's `HostLoaded`, pays for none of them.
_HEADING = r"^(#{1,6})\s+(.*?)\s*#*\s*$"
_BULLET = r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$"
_FENCE = r"^\s*(```|~~~)"
_LINK_ONLY = r"^\[[^\]]*\]\([^)\s]+\.md\)"
_TABLE_ROW = r"^\s*\|.*\|\s*$"
_TABLE_RULE = r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$"
# Prose that is a title, not a memory: a line of emphasis alone ('**Shop backend**'), or a sentence
# about the file itself ('This file provides guidance to Claude Code when working with code here.').
_TITLE_LINE = r"^\s*(\*\*|__)[^*_\n]+(\*\*|__)\s*$"
_ABOUT_FILE = (r"^\s*(this|the)\s+(file|document|guide|readme)\b[^\n]{0,80}\b(provides|gives|contains|describes|"
               r"holds|is)\b")

_HEADING_KINDS = (
    (r"\b(decisions?|decided|adrs?|architecture decisions?)\b", "decision"),
    (r"\b(preferences?|prefer|user profile|about me|personal)\b", "preference"),
    (r"\b(todos?|to do|next steps|open questions|backlog|tasks?)\b", "todo"),
    (r"\b(conventions?|style|guidelines?|rules?|standards?|do'?s|don'?ts|workflow|"
     r"instructions?|code review|commits?|testing|lint\w*|formatting|naming|practices)\b", "convention"),
    (r"\b(facts?|context|overview|architecture|environment|setup|reference|knowledge|tips|"
     r"commands?|build|layout|structure|failures)\b", "fact"),
)
_TEXT_KINDS = (  # matched ignoring case
    (r"^(todo|fixme)\b|^\[ \]", "todo"),
    (r"\b(we decided|decided to|we chose|decision:)", "decision"),
    (r"\b(i prefer|prefers?|preferred)\b", "preference"),
    (r"^(always|never|use|don'?t|do not|must|should|avoid|run|keep|prefer)\b", "convention"),
)


def kind_for(section: str, text: str, default: str = "fact") -> str:
    """A fitting kind: the heading decides when it names one, else the wording of the item."""
    for pattern, kind in _TEXT_KINDS[:1]:
        if re.search(pattern, text, re.I):
            return kind
    heading = section.lower()
    for part in reversed([p for p in heading.split(" > ") if p]):
        for pattern, kind in _HEADING_KINDS:
            if re.search(pattern, part):
                return kind
    for pattern, kind in _TEXT_KINDS[1:]:
        if re.search(pattern, text, re.I):
            return kind
    return default


def strip_front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """(front matter as a flat dict, the body, how many lines the front matter took)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text, 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            meta: dict[str, Any] = {}
            parent = None
            for raw in lines[1:i]:
                m = re.match(r"^(\s*)([A-Za-z0-9_-]+):\s*(.*)$", raw)
                if not m:
                    continue
                value = m.group(3).strip().strip("'\"")
                if m.group(1) and parent is not None:
                    meta[f"{parent}.{m.group(2)}"] = value
                else:
                    parent = m.group(2) if not value else None
                    meta[m.group(2)] = value
            return meta, "\n".join(lines[i + 1:]), i + 1
    return {}, text, 0


def markdown_items(text: str, origin: Path, *, fmt: str, host_loaded: bool, scope: str | None = None,
                   skip_sections: tuple[str, ...] = (), section_kinds: Mapping[str, str] | None = None,
                   skip_pointers: bool = False, first_line: int = 0,
                   skipped: dict[str, None] | None = None, bullets_only: bool = False) -> list[Item]:
    """Every top-level bullet, every row of a table (its cells named by the header), and the prose of
    every section (not a title or a sentence about the file itself), as an item of a fitting kind; a
    code block is reference, never a decision or a task. `bullets_only`: bullets and table rows alone.

    `skipped` (insertion-ordered, for the dry run's notes) gathers the sections of `skip_sections`
    that held text this left out."""
    reader = _MarkdownReader(origin, fmt=fmt, host_loaded=host_loaded, scope=scope, skip_sections=skip_sections,
                             section_kinds=section_kinds, skip_pointers=skip_pointers)
    reader.bullets_only = bullets_only
    if skipped is not None:
        reader.skipped = skipped
    for n, raw in enumerate(text.split("\n"), first_line + 1):
        reader.read(n, raw.rstrip())
    reader.flush_bullet()
    reader.flush_table()
    reader.flush_prose()
    for item in reader.items:  # trailing blank lines kept for continuation are not content
        item.text = re.sub(r"\n{3,}", "\n\n", item.text).strip()
    return [i for i in reader.items if i.text]


class _MarkdownReader:
    """Markdown read line by line: the heading path, the bullet and the prose being gathered, and the
    items they became. A fence or an HTML comment hides headings and bullets until it closes."""

    def __init__(self, origin: Path, *, fmt: str, host_loaded: bool, scope: str | None,
                 skip_sections: tuple[str, ...], section_kinds: Mapping[str, str] | None, skip_pointers: bool) -> None:
        self.origin, self.fmt, self.host_loaded, self.scope = origin, fmt, host_loaded, scope
        self.skip_sections, self.section_kinds, self.skip_pointers = skip_sections, section_kinds, skip_pointers
        self.items: list[Item] = []
        self.path: list[tuple[int, str]] = []  # (level, title) of the headings above this line
        self.prose: list[str] = []
        self.prose_line = 0
        self.bullet: list[str] = []
        self.bullet_line = 0
        self.bullet_indent = 0
        self.fenced = False
        self.in_comment = False
        self.skipped: dict[str, None] = {}
        self.table: list[tuple[int, str]] = []  # (line number, line) of the table being read
        self.bullets_only = False

    def section(self) -> str:
        return " > ".join(title for _level, title in self.path)

    def _kind_of(self, body: str) -> str:
        if re.match(_FENCE, body) and body.rstrip().endswith(("```", "~~~")):
            # a code block on its own is reference (a command, a snippet), whatever the heading: a
            # fence that follows the last item of a `## TODO` list is not a task
            return "fact"
        kind = None
        if self.section_kinds:
            for _level, title in reversed(self.path):
                for key, k in self.section_kinds.items():
                    if kind is None and key.lower() in title.lower():
                        kind = k
        kind = kind or kind_for(self.section(), body)
        if (kind == "decision" or (kind == "todo" and re.match(_FENCE, body))) and re.search(_FENCE, body, re.M) \
                and kind_for("", body, "fact") != kind:
            # a snippet under '## Decisions' is reference, unless its words decide; a task whose words
            # come first keeps the code indented under it (the command it asks to run)
            return "fact"
        return kind

    def _add(self, lines: list[str], line: int, *, pointer: bool = False) -> None:
        body = "\n".join(lines).strip()
        if not body:
            return
        skip = next((s for s in self.skip_sections if s.lower() in self.section().lower()), None)
        if skip is not None:
            self.skipped[next(t for _level, t in self.path if skip.lower() in t.lower())] = None
            return
        if pointer and self.skip_pointers and re.match(_LINK_ONLY, body):
            return  # an index line that only links to a topic file: the file is read on its own
        self.items.append(Item(body, self._kind_of(body), origin=self.origin, fmt=self.fmt, section=self.section(),
                               line=line, host_loaded=self.host_loaded, scope=self.scope))

    def flush_bullet(self) -> None:
        lines, self.bullet = self.bullet, []
        self._add(lines, self.bullet_line, pointer=True)

    def flush_prose(self) -> None:
        lines, self.prose = self.prose, []
        body = "\n".join(lines).strip()
        if self.bullets_only or re.match(_TITLE_LINE, body) or re.match(_ABOUT_FILE, body, re.I):
            return
        self._add(lines, self.prose_line)

    def flush_table(self) -> None:
        """A table: each row below the header one item, 'Header: cell; ...' (a table of decisions is that
        many decisions, not one); lines that only look like a table (no rule below the first) are prose."""
        rows, self.table = self.table, []
        if not rows:
            return
        if len(rows) < 2 or not re.match(_TABLE_RULE, rows[1][1]):
            for n, line in rows:
                self._prose(n, line)
            return
        header = _cells(rows[0][1])
        for n, line in rows[2:]:
            cells = _cells(line)
            pairs = [f"{header[i]}: {c}" if i < len(header) and header[i] else c for i, c in enumerate(cells) if c]
            if pairs:
                self._add(["; ".join(pairs)], n)

    def _prose(self, n: int, line: str) -> None:
        if line.strip():
            if not self.prose:
                self.prose_line = n
            self.prose.append(line)
        elif self.prose:
            self.prose.append("")

    def read(self, n: int, line: str) -> None:
        """One line (line number `n`, trailing space gone)."""
        if self._hidden(n, line):
            return
        if self.table and not re.match(_TABLE_ROW, line):
            self.flush_table()
        m = re.match(_HEADING, line)
        if m:
            self.flush_bullet()
            self.flush_prose()
            level = len(m.group(1))
            while self.path and self.path[-1][0] >= level:
                self.path.pop()
            self.path.append((level, m.group(2).strip()))
        elif not re.match(r"^@\S+$", line.strip()):  # an import directive (`@docs/x.md`) is not content
            self._text(n, line)

    def _hidden(self, n: int, line: str) -> bool:
        """Whether the line is a comment's, or a fence's (kept verbatim in the item it belongs to)."""
        if self.in_comment:
            self.in_comment = "-->" not in line
            return True
        if not self.fenced and line.lstrip().startswith("<!--"):
            self.in_comment = "-->" not in line
            return True
        fence = bool(re.match(_FENCE, line))
        if not fence and not self.fenced:
            return False
        if fence and not self.fenced and self.bullet and len(line) - len(line.lstrip()) <= self.bullet_indent:
            self.flush_bullet()  # a fence not indented under the open bullet ends it (CommonMark),
            self.flush_prose()  # and stands as an item of its own
        self.fenced = self.fenced != fence
        (self.bullet if self.bullet else self.prose).append(line)
        if fence and not self.bullet and len(self.prose) == 1:
            self.prose_line = n
        return True

    def _text(self, n: int, line: str) -> None:
        """A line outside fences and headings: a new bullet, the open bullet's continuation, or prose."""
        b = re.match(_BULLET, line)
        if b and (not self.bullet or len(b.group(1)) <= self.bullet_indent):
            self.flush_bullet()
            self.bullet = [b.group(2)]
            self.bullet_line, self.bullet_indent = n, len(b.group(1))
            return
        if self.bullet and (not line.strip() or line.startswith((" ", "\t")) or b):
            self.bullet.append(line.strip())  # a blank line stays (as "") until the bullet ends
            return
        if self.bullet:
            self.flush_bullet()
        if re.match(_TABLE_ROW, line):
            if not self.table:
                if self.prose and "\n".join(self.prose).rstrip().endswith(":"):
                    self.prose = []  # 'The decisions so far:' introduces the table, says nothing itself
                self.flush_prose()
            self.table.append((n, line))
            return
        self._prose(n, line)


def _cells(row: str) -> list[str]:
    """A table row's cells, trimmed (an escaped pipe stays inside its cell)."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def instruction_items(path: Path, scope: str | None = None, *, fmt: str = "markdown",
                      host_loaded: bool = False, notes: list[str] | None = None) -> list[Item]:
    """A CLAUDE.md / AGENTS.md / GEMINI.md (or any Markdown file of instructions); `fmt` is the format
    imports record, `host_loaded` whether a host loads the file into every session itself.

    A file over READ_LIMIT is a note in `notes`, or without `notes` (the file was named on its own)
    a TooBig refusal: either way it is named as too big, never as holding nothing."""
    if notes is None:
        try:
            size = path.stat().st_size if path.is_file() else 0
        except OSError:
            size = 0
        if size > READ_LIMIT:
            raise TooBig(too_big(path, size), hint="split it into smaller files and "
                         "import each, or import a copy that holds only the sections you need")
    text = read_text(path, notes=notes)
    if text is None:
        return []
    meta, body, skip = strip_front_matter(text)
    return markdown_items(body, path, fmt=fmt, host_loaded=host_loaded, scope=scope, first_line=skip)


_TYPE_KINDS = {"user": "preference", "feedback": "convention", "project": "fact", "reference": "fact"}


def memory_dir_items(directory: Path, *, fmt: str, scope: str | None, notes: list[str] | None = None) -> list[Item]:
    """A Claude Code auto memory or Gemini CLI project memory folder: the index's direct entries plus
    one item per topic file (front matter `name`, `description`, `type`). A file too big to read is
    a note in `notes`."""
    items: list[Item] = []
    index = directory / "MEMORY.md"
    text = read_text(index, notes=notes)
    if text is not None:
        items += markdown_items(text, index, fmt=fmt, host_loaded=True, scope=scope, skip_pointers=True)
    for path in sorted(directory.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        text = read_text(path, notes=notes)
        if text is None:
            continue
        meta, body, _skip = strip_front_matter(text)
        body = body.strip()
        description = str(meta.get("description") or "").strip()
        if description and description not in body:
            body = f"{description}\n\n{body}" if body else description
        if not body:
            continue
        kind = _TYPE_KINDS.get(str(meta.get("type") or meta.get("metadata.type") or "").strip().lower())
        items.append(Item(body, kind or kind_for("", body), origin=path, fmt=fmt, scope=scope,
                          name=str(meta.get("name") or path.stem), host_loaded=False))
    return items


# -- `retained import` ------------------------------------------------------------------------
def import_key(scope: str, text: str) -> str:
    """The idempotency key of an item: the same words in the same scope are one record."""
    norm = " ".join(text.split())
    return "import:" + hashlib.sha256(f"{scope}\0{norm}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


# -- what doctor reports ------------------------------------------------------------------------
def md_stats(paths: list[Path]) -> tuple[int, int]:
    files = size = 0
    for p in paths:
        try:
            size += p.stat().st_size
            files += 1
        except OSError:
            pass
    return files, size


def human_size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MiB"


# -- what the brief leaves out --------------------------------------------------------------------
def _normal(text: str) -> str:
    return " ".join(text.split())


class HostLoaded:
    """Answers "does the host already inject this record?" for the brief, reading each file once.

    `loaded`: the names of the files some host loads into every session by itself (its instruction
    files and memory indexes; the registry's `loaded_at_start`)."""

    def __init__(self, loaded: Collection[str]) -> None:
        self.loaded = loaded
        self._files: dict[str, str | None] = {}

    def holds(self, record: Mapping[str, Any]) -> bool:
        imported = record.get("imported")
        if not isinstance(imported, dict) or not imported.get("host_loaded"):
            return False
        origin = imported.get("from")
        if not isinstance(origin, str) or Path(origin).name not in self.loaded:
            return False
        if origin not in self._files:
            text = read_text(Path(origin))
            self._files[origin] = None if text is None else _normal(text)
        body = self._files[origin]
        text = record.get("text")
        return body is not None and isinstance(text, str) and bool(text.strip()) and _normal(text) in body
