"""The hosts' own memories: the generic readers, and what the brief leaves out because a host loads it.

Claude Code, Codex and Gemini CLI each keep a memory of their own beside retained's. Where each keeps
it, its exact formats and what it loads at start are facts about one host, so they live in that
host's registry module (`installers/hosts/<name>.py`: `memory_items`, `memory_report`, the
`instruction_files` and `memory_at_start` it declares; see README "Living beside the hosts' own
memory"). This module holds what those formats share: Markdown instruction files (every bullet, and
the prose of every section, is one item whose heading picks its kind), memory folders (a `MEMORY.md`
index plus one topic file each, front matter `name`, `description`, `type`), and the idempotency key of
an import. `retained import`, doctor and the brief (which runs in the session-start hook) ask it.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any



def _registry() -> dict[str, Any]:
    from .installers.hosts import hosts

    return hosts()


def sources() -> list[str]:
    """The hosts whose own memory `retained import --from` reads (the registry says which)."""
    return [name for name, host in _registry().items() if host.memory_source]


_LOADED: list[frozenset[str]] = []


def loaded_at_start() -> frozenset[str]:
    """File names some host loads into every session by itself (instruction files and memory indexes)."""
    if not _LOADED:
        names: set[str] = set()
        for host in _registry().values():
            names.update(host.instruction_files, host.memory_at_start)
        _LOADED.append(frozenset(names))
    return _LOADED[0]


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
    from .project import project_scope

    try:
        return project_scope(cwd=path, env={}) or str(path.resolve())
    except OSError:
        return str(path)


def current_project(cwd: str | os.PathLike[str] | None = None) -> str | None:
    from .project import project_scope

    try:
        return project_scope(cwd=cwd)
    except OSError:
        return None


def read_text(path: Path, limit: int = 8 * 1024 * 1024) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return None


def read_json(path: Path) -> Any:
    text = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text is None:
        return {}
    try:
        import tomllib  # Python 3.11+

        return tomllib.loads(text)
    except ImportError:  # pragma: no cover - Python 3.10
        import tomlkit

        try:
            return tomlkit.parse(text).unwrap()
        except Exception:  # noqa: BLE001 - an unreadable config counts as an empty one
            return {}
    except ValueError:
        return {}


def truthy(value: str | None) -> bool | None:
    if value is None or not value.strip():
        return None
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    return None


# -- Markdown into items -------------------------------------------------------------------------
# Patterns as text: `re` compiles each on first use, so the session-start hook, which imports this
# module for `leave_out_host_loaded`, pays for none of them.
_HEADING = r"^(#{1,6})\s+(.*?)\s*#*\s*$"
_BULLET = r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$"
_FENCE = r"^\s*(```|~~~)"
_LINK_ONLY = r"^\[[^\]]*\]\([^)\s]+\.md\)"

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
                   skip_pointers: bool = False, first_line: int = 0) -> list[Item]:
    """Every top-level bullet, and the prose of every section, as an item of a fitting kind."""
    items: list[Item] = []
    path: list[tuple[int, str]] = []
    prose: list[str] = []
    prose_line = 0
    bullet: list[str] = []
    bullet_line = 0
    bullet_indent = 0
    fenced = False
    in_comment = False

    def section() -> str:
        return " > ".join(title for _level, title in path)

    def skipped() -> bool:
        return any(s.lower() in section().lower() for s in skip_sections)

    def kind_of(body: str) -> str:
        if section_kinds:
            for level_title in reversed(path):
                for key, kind in section_kinds.items():
                    if key.lower() in level_title[1].lower():
                        return kind
        return kind_for(section(), body)

    def flush_bullet() -> None:
        nonlocal bullet
        body = "\n".join(bullet).strip()
        bullet = []
        if not body or skipped() or (skip_pointers and re.match(_LINK_ONLY, body)):
            return
        items.append(Item(body, kind_of(body), origin=origin, fmt=fmt, section=section(), line=bullet_line,
                          host_loaded=host_loaded, scope=scope))

    def flush_prose() -> None:
        nonlocal prose
        body = "\n".join(prose).strip()
        prose = []
        if not body or skipped():
            return
        items.append(Item(body, kind_of(body), origin=origin, fmt=fmt, section=section(), line=prose_line,
                          host_loaded=host_loaded, scope=scope))

    for n, raw in enumerate(text.split("\n"), first_line + 1):
        line = raw.rstrip()
        if in_comment:
            in_comment = "-->" not in line
            continue
        if not fenced and line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            continue
        if re.match(_FENCE, line):
            fenced = not fenced
            (bullet if bullet else prose).append(line)
            if not bullet and len(prose) == 1:
                prose_line = n
            continue
        if fenced:
            (bullet if bullet else prose).append(line)
            continue
        m = re.match(_HEADING, line)
        if m:
            flush_bullet()
            flush_prose()
            level = len(m.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, m.group(2).strip()))
            continue
        if re.match(r"^@\S+$", line.strip()):  # an import directive (`@docs/x.md`), not content
            continue
        b = re.match(_BULLET, line)
        if b and (not bullet or len(b.group(1)) <= bullet_indent):
            flush_bullet()
            bullet = [b.group(2)]
            bullet_line, bullet_indent = n, len(b.group(1))
            continue
        if bullet and (not line.strip() or line.startswith((" ", "\t")) or b):
            if line.strip():
                bullet.append(line.strip() if not b else line.strip())
            else:
                bullet.append("")
            continue
        if bullet:
            flush_bullet()
        if line.strip():
            if not prose:
                prose_line = n
            prose.append(line)
        elif prose:
            prose.append("")
    flush_bullet()
    flush_prose()
    for item in items:  # trailing blank lines kept for continuation are not content
        item.text = re.sub(r"\n{3,}", "\n\n", item.text).strip()
    return [i for i in items if i.text]


def instruction_items(path: Path, scope: str | None = None) -> list[Item]:
    """A CLAUDE.md / AGENTS.md / GEMINI.md (or any Markdown file of instructions)."""
    text = read_text(path)
    if text is None:
        return []
    meta, body, skip = strip_front_matter(text)
    fmt = next((h.instruction_files[path.name] for h in _registry().values() if path.name in h.instruction_files),
               "markdown")
    return markdown_items(body, path, fmt=fmt, host_loaded=path.name in loaded_at_start(), scope=scope,
                          first_line=skip)


_TYPE_KINDS = {"user": "preference", "feedback": "convention", "project": "fact", "reference": "fact"}


def memory_dir_items(directory: Path, *, fmt: str, scope: str | None) -> list[Item]:
    """A Claude Code auto memory or Gemini CLI project memory folder: the index's direct entries plus
    one item per topic file (front matter `name`, `description`, `type`)."""
    items: list[Item] = []
    index = directory / "MEMORY.md"
    text = read_text(index)
    if text is not None:
        items += markdown_items(text, index, fmt=fmt, host_loaded=True, scope=scope, skip_pointers=True)
    for path in sorted(directory.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        text = read_text(path)
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


# -- `retained import --from` and a path ------------------------------------------------------------


def source_items(source: str, env: Mapping[str, str], known_scopes: list[str],
                 cwd: str | None = None) -> tuple[list[Item], list[str]]:
    """Candidate records from one host's own memory (`retained import --from <source>`)."""
    host = _registry().get(source)
    if host is None or not host.memory_source:
        raise ValueError(source)
    return host.memory_items(env, known_scopes, cwd)


def path_items(path: Path, scope: str | None, env: Mapping[str, str]) -> list[Item]:
    """A file or folder given by path: an instruction file, or a memory folder (a host's, if it is one)."""
    hosts = [h for h in _registry().values() if h.memory_source]
    if path.is_dir():
        for host in hosts:
            found = host.memory_path_items(path, scope, env)
            if found is not None:
                return found
        inner = path / "memory" if (path / "memory").is_dir() else path
        return memory_dir_items(inner, fmt="memory-folder", scope=scope or project_of(path))
    if scope is None:
        user_level = {f.resolve() for f in (h.user_instruction_file(env) for h in hosts) if f is not None}
        scope = "global" if path.resolve() in user_level else project_of(path.parent)
    return instruction_items(path, scope)


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


def native_memory(host_name: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, Any] | None:
    """What native memory a host has, whether it is on, and how big it is; None for hosts without one.

    Keys: host, feature, enabled, why (what decided it), location, files, bytes, loaded_at_start (files
    the host injects at every session start), summary (one line), fix (how to move it into retained).
    """
    env = os.environ if env is None else env
    host = _registry().get(host_name)
    return host.memory_report(env, cwd) if host is not None else None


# -- what the brief leaves out --------------------------------------------------------------------
def _normal(text: str) -> str:
    return " ".join(text.split())


class HostLoaded:
    """Answers "does the host already inject this record?" for the brief, reading each file once."""

    def __init__(self) -> None:
        self._files: dict[str, str | None] = {}

    def holds(self, record: Mapping[str, Any]) -> bool:
        imported = record.get("imported")
        if not isinstance(imported, dict) or not imported.get("host_loaded"):
            return False
        origin = imported.get("from")
        if not isinstance(origin, str) or Path(origin).name not in loaded_at_start():
            return False
        if origin not in self._files:
            text = read_text(Path(origin))
            self._files[origin] = None if text is None else _normal(text)
        body = self._files[origin]
        text = record.get("text")
        return body is not None and isinstance(text, str) and bool(text.strip()) and _normal(text) in body


def leave_out_host_loaded(store: Any, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The brief's rows less those a host already loads from a file that still holds them."""
    from . import records

    places = store.index.sources([r["id"] for r in rows])
    candidates = {rid: p for rid, p in places.items() if Path(p["source"]).name in loaded_at_start()}
    if not candidates:
        return rows, 0
    check = HostLoaded()
    kept: list[dict[str, Any]] = []
    left = 0
    for row in rows:
        place = candidates.get(row["id"])
        if place is not None:
            try:
                rec = records.parse_line(store.log.read_at(place["offset"], place["length"])[:-1])
            except (records.BadLine, OSError):
                rec = None
            if rec is not None and check.holds(rec):
                left += 1
                continue
        kept.append(row)
    return kept, left
