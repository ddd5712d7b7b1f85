"""Claude Code: ~/.claude.json (strict JSON, rewritten constantly by Claude) and ~/.claude/settings.json.

Its hooks pass no --host: other hosts may run the hooks of settings.json too (their modules say so,
in `shares` or their docstring), and the input tells the hosts apart. `CLAUDE_CONFIG_DIR` moves both
files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..host import HOOK_OUTPUT_CHARS, PLUGIN_NAME, Check, Host, array, plugin_home, read_json, table

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class ClaudeCode(Host):
    name = "claude"
    title = "Claude Code"
    order = 30
    fallback = True
    max_chars = HOOK_OUTPUT_CHARS  # over 10,000 characters Claude Code saves the output to a file and shows 2 KB
    session_vars = ("CLAUDE_CODE_SESSION_ID",)
    project_vars = ("CLAUDE_PROJECT_DIR",)
    instructions_max_chars = 2_000  # Claude Code cuts server instructions at 2,048 characters (tested)
    memory_source = True  # auto memory
    instruction_files = {"CLAUDE.md": "claude-md", "CLAUDE.local.md": "claude-md"}
    memory_at_start = ("MEMORY.md",)  # the auto memory index
    memory_folder_format = "claude-auto-memory"
    user_instructions = "CLAUDE.md"
    work_tools = ("Edit", "MultiEdit", "Write", "NotebookEdit", "Bash")

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        claude_dir = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
        legacy = os.path.join(claude_dir, ".config.json")
        claude_json = legacy if os.path.exists(legacy) else os.path.join(env.get("CLAUDE_CONFIG_DIR") or home, ".claude.json")
        return {"claude_dir": claude_dir, "claude_json": claude_json}

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
        return env.get("CLAUDECODE") == "1"

    def pre_compact_output(self, text: str) -> str:
        return text  # PreCompact: plain stdout is appended to the compaction instructions

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        checks = []
        settings = docs.get("hooks") or {}
        off = settings.get("disableAllHooks") is True
        checks.append(Check(self.name, "hooks are not switched off", not off, "disableAllHooks is true" if off else "",
                            "remove disableAllHooks from Claude Code's settings.json" if off else ""))
        local = table(docs, "server", "projects", str(project)) if scope == "user" else {}
        disabled = array(local, "disabledMcpServers")
        if "retained" in disabled:
            checks.append(Check(self.name, "server is not disabled in this project", False,
                                f"projects[{project}].disabledMcpServers lists retained",
                                "enable it with /mcp in Claude Code, or remove it from that list"))
        return checks

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        payload, _ = super().doctor_input(project)
        return payload, {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project)}

    # -- its own memory: auto memory, ~/.claude/projects/<sanitised project path>/memory/ -------------
    # MEMORY.md there is an index loaded at every session start (`- [Title](file.md) — hook` lines, plus
    # any direct entries); each other *.md is one memory with front matter name, description and type
    # (or metadata.type): user, feedback, project or reference.
    def memory_items(self, env: Mapping[str, str], known_scopes: list[str], cwd: str | None = None,
                     project: str | None = None) -> tuple[list[Any], list[str]]:
        """Every project's auto memory under ~/.claude/projects, each filed under its project."""
        from ... import native  # lazy: +14 ms on a hook (measured)

        notes: list[str] = []
        root = claude_dir(env) / "projects"
        here = [project] if project else []
        here.append(str(Path(cwd or os.getcwd()).resolve()))
        names = _project_names(env, here + known_scopes)
        items: list[Any] = []
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
            items += native.memory_dir_items(folder / "memory", fmt=self.memory_folder_format, scope=scope,
                                             notes=notes)
        custom = _setting(env, "autoMemoryDirectory", project)
        if isinstance(custom, str) and custom.strip():
            d = Path(os.path.expanduser(custom.strip()))
            if d.is_dir() and not any(str(i.origin).startswith(str(d)) for i in items):
                items += native.memory_dir_items(d, fmt=self.memory_folder_format, scope=project or "global",
                                                 notes=notes)
        if not folders and not items:
            notes.append(f"no {self.title} auto memory under {root}")
        return items, notes

    def memory_root(self, env: Mapping[str, str]) -> Path | None:
        return claude_dir(env)

    def checkout(self, env: Mapping[str, str], cwd: str | None) -> Path:
        """The folder Claude Code works in here: the project's git root (or folder), else the cwd. Not the
        project's scope, which is its remote's URL when it has one."""
        from ...project import project_dir  # lazy: +7 ms on the stop hook (measured)

        return project_dir(cwd, env, self.project_vars) or Path(cwd or os.getcwd()).resolve()

    def memory_report(self, env: Mapping[str, str], cwd: str | None = None,
                      project: str | None = None) -> dict[str, Any] | None:
        from ... import native  # lazy: +14 ms on a hook (measured)

        flag = native.truthy(env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY"))
        setting = _setting(env, "autoMemoryEnabled", project)
        if flag is True:
            enabled, why = False, "CLAUDE_CODE_DISABLE_AUTO_MEMORY is set"
        elif flag is False:
            enabled, why = True, "CLAUDE_CODE_DISABLE_AUTO_MEMORY=0 forces it on"
        elif setting is False:
            enabled, why = False, f"autoMemoryEnabled is false in {self.title}'s settings"
        else:
            enabled, why = True, "on by default" if setting is None else "autoMemoryEnabled is true"
        custom = _setting(env, "autoMemoryDirectory", project)
        root = self.checkout(env, cwd)
        if isinstance(custom, str) and custom.strip():
            folder = Path(os.path.expanduser(custom.strip()))
        else:
            folder = claude_dir(env) / "projects" / project_dirname(memory_home(root)) / "memory"
        every = sorted((claude_dir(env) / "projects").glob("*/memory/*.md"))
        files, size = native.md_stats(every)
        here_files, here_size = native.md_stats(sorted(folder.glob("*.md")))
        loaded = [str(p) for p in (folder / "MEMORY.md", root / "CLAUDE.md", claude_dir(env) / "CLAUDE.md")
                  if p.is_file()]
        summary = (f"auto memory {'on' if enabled else 'off'} ({why}): {files} file(s), {native.human_size(size)} "
                   f"across projects; this project {here_files} file(s), {native.human_size(here_size)} in {folder}")
        return {"host": self.name, "feature": "auto memory", "enabled": enabled, "why": why, "location": str(folder),
                "files": files, "bytes": size, "project_files": here_files, "project_bytes": here_size,
                "loaded_at_start": loaded, "summary": summary,
                "fix": f"retained import --from {self.name} (dry run), then --apply; turn it off with "
                       "\"autoMemoryEnabled\": false in ~/.claude/settings.json if retained should be the one memory"}

    plugin_remove = "claude plugin uninstall retained@retained"

    def installed_plugin(self, env: Mapping[str, str], project: Path | None) -> str | None:
        """retained installed as claude's own plugin (issue 30), as installers/plugins.py describes."""
        claude_dir = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else plugin_home(env) / ".claude"
        files = [claude_dir / "settings.json"]
        if project is not None:
            files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
        for f in files:
            data = read_json(f)
            enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
            if isinstance(enabled, dict):
                for key, on in enabled.items():
                    if isinstance(key, str) and key.split("@")[0] == PLUGIN_NAME and on is True:
                        return f"plugin {key} (enabledPlugins in {f})"
        return None


NAME_MAX = 200  # Claude Code cuts sanitised project names here and appends a hash


def claude_dir(env: Mapping[str, str]) -> Path:
    from ... import native  # lazy: +14 ms on a hook (measured)

    return Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else native.home_of(env) / ".claude"


def project_dirname(project: str | os.PathLike[str]) -> str:
    """Claude Code's name for a project's folder under ~/.claude/projects: every character that is not
    an ASCII letter or digit becomes '-' (long names are cut and get a hash, which we cannot match)."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(project))[:NAME_MAX]


def memory_home(root: Path) -> Path:
    """The folder Claude Code files a project's auto memory under: one per repository, named after its
    main checkout, so a linked worktree's memory is its main checkout's (a folder outside git: itself)."""
    from ...project import git_common_dir  # lazy: +7 ms on the stop hook (measured)

    common = git_common_dir(root)
    return common.parent if common is not None and common.name == ".git" else root


def _project_names(env: Mapping[str, str], extra: list[str]) -> dict[str, str]:
    """Claude Code's project folder name → the project path, from every path we know of."""
    from ... import native  # lazy: +14 ms on a hook (measured)

    known: list[str] = list(extra)
    data = native.read_json(native.home_of(env) / ".claude.json")
    if isinstance(data, dict) and isinstance(data.get("projects"), dict):
        known += [p for p in data["projects"] if isinstance(p, str)]
    return {project_dirname(p): p for p in known}


def _setting(env: Mapping[str, str], key: str, project: str | None = None) -> Any:
    """A Claude Code setting from the user's, the project's and the local settings file (last wins)."""
    from ... import native  # lazy: +14 ms on a hook (measured)

    value = None
    files = [claude_dir(env) / "settings.json"]
    if project:
        files += [Path(project) / ".claude" / "settings.json", Path(project) / ".claude" / "settings.local.json"]
    for f in files:
        data = native.read_json(f)
        if isinstance(data, dict) and key in data:
            value = data[key]
    return value


HOST = ClaudeCode()
