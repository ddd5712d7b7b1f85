"""The hosts' own memories: where each host keeps them, how to read them, and what it loads at start.

Claude Code, Codex and Gemini CLI each have a memory of their own beside retained's. This module
knows their file formats (read from the hosts' own prompts and code, see README "Living beside the
hosts' own memory"), turns their files into candidate records for `retained import`, reports for
doctor which native memory a host has switched on, and tells the brief which records a host already
injects itself. Standard library only: the brief, which runs in the session-start hook, asks it.

Formats:
- Instruction files (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`): Markdown; every bullet, and the prose of
  every section, is one item; the heading it sits under picks its kind.
- Claude Code auto memory, `~/.claude/projects/<sanitised project path>/memory/`: `MEMORY.md` is an
  index loaded at every session start (`- [Title](file.md) — hook` lines, plus any direct entries);
  each other `*.md` is one memory with front matter `name`, `description` and `type` (or
  `metadata.type`): user, feedback, project or reference.
- Codex memories, `$CODEX_HOME/memories/` (on with `[features] memories = true`): `memory_summary.md`
  (first line `v1`, injected at every session start: User Profile, User preferences, General Tips,
  What's in Memory) and `MEMORY.md` (a searchable handbook of `# Task Group:` blocks with
  `## User preferences`, `## Reusable knowledge`, `## Failures and how to do differently`).
  `raw_memories.md` and `rollout_summaries/` are evidence the host consolidates, not memories.
- Gemini CLI: `~/.gemini/GEMINI.md` (global memory, loaded at start; older releases' `save_memory`
  appended to its `## Gemini Added Memories` section) and the private project memory
  `~/.gemini/tmp/<project slug>/memory/` (`MEMORY.md` index loaded at start, sibling notes on demand);
  `~/.gemini/projects.json` maps project paths to slugs, `.project_root` in the slug dir names its owner.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: File names hosts load into every session by themselves.
LOADED_AT_START = frozenset({"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md", "GEMINI.md",
                             "MEMORY.md", "memory_summary.md"})
INSTRUCTION_FILES = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md", "GEMINI.md")
SOURCES = ("claude", "codex", "gemini")
CLAUDE_NAME_MAX = 200  # Claude Code cuts sanitised project names here and appends a hash


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


# -- where the hosts keep things -----------------------------------------------------------------
def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def claude_dir(env: Mapping[str, str]) -> Path:
    return Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else _home(env) / ".claude"


def codex_home(env: Mapping[str, str]) -> Path:
    return Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else _home(env) / ".codex"


def gemini_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("GEMINI_CLI_HOME") or _home(env)) / ".gemini"


def claude_project_dirname(project: str | os.PathLike[str]) -> str:
    """Claude Code's name for a project's folder under ~/.claude/projects: every character that is not
    an ASCII letter or digit becomes '-' (long names are cut and get a hash, which we cannot match)."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(project))[:CLAUDE_NAME_MAX]


def _project_of(path: Path) -> str:
    """The scope a file belongs to: its project (git root), else its own directory."""
    from .project import project_scope

    try:
        return project_scope(cwd=path, env={}) or str(path.resolve())
    except OSError:
        return str(path)


def _current_project(cwd: str | os.PathLike[str] | None = None) -> str | None:
    from .project import project_scope

    try:
        return project_scope(cwd=cwd)
    except OSError:
        return None


def _read(path: Path, limit: int = 8 * 1024 * 1024) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return None


def _json(path: Path) -> Any:
    text = _read(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _toml(path: Path) -> dict[str, Any]:
    text = _read(path)
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


def _truthy(value: str | None) -> bool | None:
    if value is None or not value.strip():
        return None
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    return None


# -- Markdown into items -------------------------------------------------------------------------
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK_ONLY = re.compile(r"^\[[^\]]*\]\([^)\s]+\.md\)")

_HEADING_KINDS = (
    (re.compile(r"\b(decisions?|decided|adrs?|architecture decisions?)\b"), "decision"),
    (re.compile(r"\b(preferences?|prefer|user profile|about me|personal)\b"), "preference"),
    (re.compile(r"\b(todos?|to do|next steps|open questions|backlog|tasks?)\b"), "todo"),
    (re.compile(r"\b(conventions?|style|guidelines?|rules?|standards?|do'?s|don'?ts|workflow|"
                r"instructions?|code review|commits?|testing|lint\w*|formatting|naming|practices)\b"), "convention"),
    (re.compile(r"\b(facts?|context|overview|architecture|environment|setup|reference|knowledge|tips|"
                r"commands?|build|layout|structure|failures)\b"), "fact"),
)
_TEXT_KINDS = (
    (re.compile(r"^(todo|fixme)\b|^\[ \]", re.I), "todo"),
    (re.compile(r"\b(we decided|decided to|we chose|decision:)", re.I), "decision"),
    (re.compile(r"\b(i prefer|prefers?|preferred)\b", re.I), "preference"),
    (re.compile(r"^(always|never|use|don'?t|do not|must|should|avoid|run|keep|prefer)\b", re.I), "convention"),
)


def kind_for(section: str, text: str, default: str = "fact") -> str:
    """A fitting kind: the heading decides when it names one, else the wording of the item."""
    for pattern, kind in _TEXT_KINDS[:1]:
        if pattern.search(text):
            return kind
    heading = section.lower()
    for part in reversed([p for p in heading.split(" > ") if p]):
        for pattern, kind in _HEADING_KINDS:
            if pattern.search(part):
                return kind
    for pattern, kind in _TEXT_KINDS[1:]:
        if pattern.search(text):
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
        if not body or skipped() or (skip_pointers and _LINK_ONLY.match(body)):
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
        if _FENCE.match(line):
            fenced = not fenced
            (bullet if bullet else prose).append(line)
            if not bullet and len(prose) == 1:
                prose_line = n
            continue
        if fenced:
            (bullet if bullet else prose).append(line)
            continue
        m = _HEADING.match(line)
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
        b = _BULLET.match(line)
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
    text = _read(path)
    if text is None:
        return []
    meta, body, skip = strip_front_matter(text)
    fmt = {"CLAUDE.md": "claude-md", "CLAUDE.local.md": "claude-md", "AGENTS.md": "agents-md",
           "AGENTS.override.md": "agents-md", "GEMINI.md": "gemini-md"}.get(path.name, "markdown")
    return markdown_items(body, path, fmt=fmt, host_loaded=path.name in LOADED_AT_START, scope=scope,
                          first_line=skip)


_CLAUDE_TYPES = {"user": "preference", "feedback": "convention", "project": "fact", "reference": "fact"}


def memory_dir_items(directory: Path, *, fmt: str, scope: str | None) -> list[Item]:
    """A Claude Code auto memory or Gemini CLI project memory folder: the index's direct entries plus
    one item per topic file (front matter `name`, `description`, `type`)."""
    items: list[Item] = []
    index = directory / "MEMORY.md"
    text = _read(index)
    if text is not None:
        items += markdown_items(text, index, fmt=fmt, host_loaded=True, scope=scope, skip_pointers=True)
    for path in sorted(directory.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        text = _read(path)
        if text is None:
            continue
        meta, body, _skip = strip_front_matter(text)
        body = body.strip()
        description = str(meta.get("description") or "").strip()
        if description and description not in body:
            body = f"{description}\n\n{body}" if body else description
        if not body:
            continue
        kind = _CLAUDE_TYPES.get(str(meta.get("type") or meta.get("metadata.type") or "").strip().lower())
        items.append(Item(body, kind or kind_for("", body), origin=path, fmt=fmt, scope=scope,
                          name=str(meta.get("name") or path.stem), host_loaded=False))
    return items


_CODEX_SUMMARY_KINDS = {"user profile": "fact", "user preferences": "preference", "general tips": "fact"}
_CODEX_HANDBOOK_KINDS = {"user preferences": "preference", "reusable knowledge": "fact",
                         "failures and how to do differently": "fact"}


def codex_items(directory: Path, scope: str | None = None) -> list[Item]:
    """Codex's memories folder: memory_summary.md (loaded at start) and the MEMORY.md handbook."""
    items: list[Item] = []
    summary = directory / "memory_summary.md"
    text = _read(summary)
    if text is not None:
        lines = text.split("\n")
        first = 1 if lines and lines[0].strip() == "v1" else 0
        items += markdown_items("\n".join(lines[first:]), summary, fmt="codex-memories", host_loaded=True,
                                scope=scope or "global", skip_sections=("What's in Memory", "Older Memory Topics"),
                                section_kinds=_CODEX_SUMMARY_KINDS, first_line=first)
    handbook = directory / "MEMORY.md"
    text = _read(handbook)
    if text is not None:
        for block_scope, block, offset in _task_groups(text):
            found = markdown_items(block, handbook, fmt="codex-memories", host_loaded=False,
                                   scope=scope or block_scope, section_kinds=_CODEX_HANDBOOK_KINDS,
                                   first_line=offset)
            items += [i for i in found if any(k in i.section.lower() for k in _CODEX_HANDBOOK_KINDS)]
    return items


def _task_groups(text: str) -> Iterator[tuple[str, str, int]]:
    """(scope, block text, first line offset) for each `# Task Group:` block of Codex's handbook."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("# Task Group:")] or [0]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        block = lines[start:end]
        scope = "global"
        for line in block[:6]:
            m = re.match(r"^applies_to:\s*cwd=([^;]+)", line.strip())
            if m and os.path.isabs(m.group(1).strip()):
                cwd = Path(m.group(1).strip())
                scope = _project_of(cwd) if cwd.exists() else str(cwd)
        yield scope, "\n".join(block), start


# -- the sources `retained import --from` knows ---------------------------------------------------
def claude_scopes(env: Mapping[str, str], extra: list[str]) -> dict[str, str]:
    """Claude Code's project folder name → the project path, from every path we know of."""
    known: list[str] = list(extra)
    data = _json(_home(env) / ".claude.json")
    if isinstance(data, dict) and isinstance(data.get("projects"), dict):
        known += [p for p in data["projects"] if isinstance(p, str)]
    return {claude_project_dirname(p): p for p in known}


def claude_items(env: Mapping[str, str], known_scopes: list[str], cwd: str | None = None) -> tuple[list[Item], list[str]]:
    """Every project's auto memory under ~/.claude/projects, each filed under its project."""
    notes: list[str] = []
    root = claude_dir(env) / "projects"
    project = _current_project(cwd)
    here = [project] if project else []
    here.append(str(Path(cwd or os.getcwd()).resolve()))
    names = claude_scopes(env, here + known_scopes)
    items: list[Item] = []
    try:
        folders = sorted(p for p in root.iterdir() if (p / "memory").is_dir())
    except OSError:
        folders = []
    for folder in folders:
        scope = names.get(folder.name)
        if scope is None:
            guess = "/" + folder.name.lstrip("-").replace("-", "/")
            scope = guess if os.path.isdir(guess) else folder.name
            if scope == folder.name:
                notes.append(f"{folder.name}: no known project has this name; filed under scope {scope!r} "
                             "(pass --scope to choose one)")
        items += memory_dir_items(folder / "memory", fmt="claude-auto-memory", scope=scope)
    custom = _claude_setting(env, "autoMemoryDirectory", cwd)
    if isinstance(custom, str) and custom.strip():
        d = Path(os.path.expanduser(custom.strip()))
        if d.is_dir() and not any(str(i.origin).startswith(str(d)) for i in items):
            items += memory_dir_items(d, fmt="claude-auto-memory", scope=project or "global")
    if not folders and not items:
        notes.append(f"no Claude Code auto memory under {root}")
    return items, notes


def gemini_items(env: Mapping[str, str]) -> tuple[list[Item], list[str]]:
    """Gemini CLI's global GEMINI.md and every project's private memory folder."""
    notes: list[str] = []
    base = gemini_dir(env)
    items = instruction_items(base / "GEMINI.md", scope="global")
    for item in items:
        item.fmt = "gemini-memory"
    registry = _json(base / "projects.json")
    slugs = {}
    if isinstance(registry, dict) and isinstance(registry.get("projects"), dict):
        slugs = {v: k for k, v in registry["projects"].items() if isinstance(v, str) and isinstance(k, str)}
    try:
        folders = sorted(p for p in (base / "tmp").iterdir() if (p / "memory").is_dir())
    except OSError:
        folders = []
    for folder in folders:
        owner = _read(folder / ".project_root")
        scope = (owner or "").strip() or slugs.get(folder.name)
        if not scope:
            scope = folder.name
            notes.append(f"{folder.name}: the project it belongs to is not recorded; filed under scope {scope!r}")
        items += memory_dir_items(folder / "memory", fmt="gemini-memory", scope=scope)
    if not items:
        notes.append(f"no Gemini CLI memory in {base}")
    return items, notes


def source_items(source: str, env: Mapping[str, str], known_scopes: list[str],
                 cwd: str | None = None) -> tuple[list[Item], list[str]]:
    if source == "claude":
        return claude_items(env, known_scopes, cwd)
    if source == "codex":
        d = codex_home(env) / "memories"
        items = codex_items(d)
        return items, [] if items else [f"no Codex memories in {d}"]
    if source == "gemini":
        return gemini_items(env)
    raise ValueError(source)


def path_items(path: Path, scope: str | None, env: Mapping[str, str]) -> list[Item]:
    """A file or folder given by path: instruction file, memory folder, or Codex's memories folder."""
    if path.is_dir():
        if (path / "memory_summary.md").exists() or path.name == "memories" and (path / "MEMORY.md").exists() \
                and codex_home(env) in path.resolve().parents:
            return codex_items(path, scope)
        inner = path / "memory" if (path / "memory").is_dir() else path
        fmt = "gemini-memory" if gemini_dir(env) in inner.resolve().parents else "claude-auto-memory"
        return memory_dir_items(inner, fmt=fmt, scope=scope or _project_of(path))
    if scope is None:
        user_level = {claude_dir(env) / "CLAUDE.md", codex_home(env) / "AGENTS.md", gemini_dir(env) / "GEMINI.md"}
        scope = "global" if path.resolve() in {p.resolve() for p in user_level} else _project_of(path.parent)
    return instruction_items(path, scope)


def import_key(scope: str, text: str) -> str:
    """The idempotency key of an item: the same words in the same scope are one record."""
    norm = " ".join(text.split())
    return "import:" + hashlib.sha256(f"{scope}\0{norm}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


# -- what doctor reports ------------------------------------------------------------------------
def _md_stats(paths: list[Path]) -> tuple[int, int]:
    files = size = 0
    for p in paths:
        try:
            size += p.stat().st_size
            files += 1
        except OSError:
            pass
    return files, size


def _claude_setting(env: Mapping[str, str], key: str, cwd: str | None = None) -> Any:
    """A Claude Code setting from the user's, the project's and the local settings file (last wins)."""
    value = None
    project = _current_project(cwd)
    files = [claude_dir(env) / "settings.json"]
    if project:
        files += [Path(project) / ".claude" / "settings.json", Path(project) / ".claude" / "settings.local.json"]
    for f in files:
        data = _json(f)
        if isinstance(data, dict) and key in data:
            value = data[key]
    return value


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MiB"


def native_memory(host_name: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, Any] | None:
    """What native memory a host has, whether it is on, and how big it is; None for hosts without one.

    Keys: host, feature, enabled, why (what decided it), location, files, bytes, loaded_at_start (files
    the host injects at every session start), summary (one line), fix (how to move it into retained).
    """
    env = os.environ if env is None else env
    if host_name == "claude":
        return _claude_report(env, cwd)
    if host_name == "codex":
        return _codex_report(env)
    if host_name == "gemini":
        return _gemini_report(env, cwd)
    return None


def _claude_report(env: Mapping[str, str], cwd: str | None) -> dict[str, Any]:
    flag = _truthy(env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY"))
    setting = _claude_setting(env, "autoMemoryEnabled", cwd)
    if flag is True:
        enabled, why = False, "CLAUDE_CODE_DISABLE_AUTO_MEMORY is set"
    elif flag is False:
        enabled, why = True, "CLAUDE_CODE_DISABLE_AUTO_MEMORY=0 forces it on"
    elif setting is False:
        enabled, why = False, "autoMemoryEnabled is false in Claude Code's settings"
    else:
        enabled, why = True, "on by default" if setting is None else "autoMemoryEnabled is true"
    project = _current_project(cwd) or str(Path(cwd or os.getcwd()).resolve())
    custom = _claude_setting(env, "autoMemoryDirectory", cwd)
    if isinstance(custom, str) and custom.strip():
        folder = Path(os.path.expanduser(custom.strip()))
    else:
        folder = claude_dir(env) / "projects" / claude_project_dirname(project) / "memory"
    every = sorted((claude_dir(env) / "projects").glob("*/memory/*.md"))
    files, size = _md_stats(every)
    here_files, here_size = _md_stats(sorted(folder.glob("*.md")))
    loaded = [str(p) for p in (folder / "MEMORY.md", Path(project) / "CLAUDE.md", claude_dir(env) / "CLAUDE.md")
              if p.is_file()]
    summary = (f"auto memory {'on' if enabled else 'off'} ({why}): {files} file(s), {_size(size)} across projects; "
               f"this project {here_files} file(s), {_size(here_size)} in {folder}")
    return {"host": "claude", "feature": "auto memory", "enabled": enabled, "why": why, "location": str(folder),
            "files": files, "bytes": size, "project_files": here_files, "project_bytes": here_size,
            "loaded_at_start": loaded, "summary": summary,
            "fix": "retained import --from claude (dry run), then --apply; turn it off with "
                   "\"autoMemoryEnabled\": false in ~/.claude/settings.json if retained should be the one memory"}


def _codex_report(env: Mapping[str, str]) -> dict[str, Any]:
    config = _toml(codex_home(env) / "config.toml")
    features = config.get("features") if isinstance(config.get("features"), dict) else {}
    mem = config.get("memories") if isinstance(config.get("memories"), dict) else {}
    if features.get("memories") is True:
        enabled, why = True, "[features] memories = true"
        if mem.get("use_memories") is False:
            enabled, why = False, "[memories] use_memories = false (kept, not injected)"
    else:
        enabled, why = False, "off by default ([features] memories is not true)"
    folder = codex_home(env) / "memories"
    files, size = _md_stats(sorted(p for p in folder.rglob("*.md")) if folder.is_dir() else [])
    loaded = [str(folder / "memory_summary.md")] if enabled and (folder / "memory_summary.md").is_file() else []
    summary = f"memories {'on' if enabled else 'off'} ({why}): {files} file(s), {_size(size)} in {folder}"
    return {"host": "codex", "feature": "memories", "enabled": enabled, "why": why, "location": str(folder),
            "files": files, "bytes": size, "loaded_at_start": loaded, "summary": summary,
            "fix": "retained import --from codex (dry run), then --apply"}


def _gemini_report(env: Mapping[str, str], cwd: str | None) -> dict[str, Any]:
    base = gemini_dir(env)
    global_md = base / "GEMINI.md"
    folders = sorted((base / "tmp").glob("*/memory")) if (base / "tmp").is_dir() else []
    paths = ([global_md] if global_md.is_file() else []) + [p for f in folders for p in sorted(f.glob("*.md"))]
    files, size = _md_stats(paths)
    loaded = [str(global_md)] if global_md.is_file() else []
    project = _current_project(cwd)
    registry = _json(base / "projects.json")
    if project and isinstance(registry, dict) and isinstance(registry.get("projects"), dict):
        slug = registry["projects"].get(project)
        if isinstance(slug, str) and (base / "tmp" / slug / "memory" / "MEMORY.md").is_file():
            loaded.append(str(base / "tmp" / slug / "memory" / "MEMORY.md"))
    settings = _json(base / "settings.json")
    auto = isinstance(settings, dict) and isinstance(settings.get("experimental"), dict) \
        and settings["experimental"].get("autoMemory") is True
    why = "GEMINI.md and the private project memory are always loaded" + ("; experimental.autoMemory is on" if auto else "")
    summary = f"memory files on ({why}): {files} file(s), {_size(size)} in {base}"
    return {"host": "gemini", "feature": "memory files", "enabled": True, "why": why, "location": str(base),
            "files": files, "bytes": size, "loaded_at_start": loaded, "summary": summary, "auto_memory": auto,
            "fix": "retained import --from gemini (dry run), then --apply"}


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
        if not isinstance(origin, str) or Path(origin).name not in LOADED_AT_START:
            return False
        if origin not in self._files:
            text = _read(Path(origin))
            self._files[origin] = None if text is None else _normal(text)
        body = self._files[origin]
        text = record.get("text")
        return body is not None and isinstance(text, str) and bool(text.strip()) and _normal(text) in body


def leave_out_host_loaded(store: Any, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The brief's rows less those a host already loads from a file that still holds them."""
    from . import records

    places = store.index.sources([r["id"] for r in rows])
    candidates = {rid: p for rid, p in places.items() if Path(p["source"]).name in LOADED_AT_START}
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
