"""Gemini CLI: ~/.gemini/settings.json (comments allowed, trailing commas not; hook timeouts in ms).

`GEMINI_CLI_HOME` replaces the home directory. Servers and hooks run only in trusted folders
(`~/.gemini/trustedFolders.json`), which doctor checks.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..host import PLUGIN_NAME, Check, Host, array, plugin_home, read_json, table

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class GeminiCLI(Host):
    name = "gemini"
    title = "Gemini CLI"
    order = 40
    session_vars = ("GEMINI_SESSION_ID",)
    project_vars = ("GEMINI_PROJECT_DIR",)
    memory_source = True  # memory files
    instruction_files = {"GEMINI.md": "gemini-md"}
    memory_at_start = ("MEMORY.md",)  # the private project memory's index
    memory_folder_format = "gemini-memory"
    user_instructions = "GEMINI.md"
    work_tools = ("write_file", "replace", "run_shell_command")

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        return {"gemini_home": env.get("GEMINI_CLI_HOME") or home}

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
        return bool(env.get("GEMINI_SESSION_ID") or env.get("GEMINI_CLI")) or data.get("hook_event_name") in (
            "AfterAgent", "BeforeAgent", "PreCompress")

    def stop_output(self, reason: str) -> dict[str, Any]:
        return {"decision": "deny", "reason": reason}  # AfterAgent: a new turn with the reason as its prompt

    def prompt_output(self, text: str) -> dict[str, Any] | None:
        return {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": text}}

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        settings = docs.get("server") or {}
        trusted, why = folder_trusted(project, settings, ctx["gemini_home"], env)
        fix = (f'add "{project}": "TRUST_FOLDER" to {trusted_folders_path(ctx["gemini_home"], env)}'
               " (or run gemini there once and trust the folder)")
        checks = [Check(self.name, "folder is trusted (else Gemini CLI disables the server and hooks)", trusted,
                        why, "" if trusted else fix)]
        hooks_config = table(settings, "hooksConfig")
        disabled = array(hooks_config, "disabled")
        ours = [n for n in disabled if isinstance(n, str) and n.startswith("retained-")]
        on = hooks_config.get("enabled", True) is not False and not ours
        checks.append(Check(self.name, "hooks are enabled", on,
                            "hooksConfig.enabled is false" if hooks_config.get("enabled") is False else
                            f"hooksConfig.disabled lists {', '.join(ours)}" if ours else "",
                            "" if on else "remove that setting from ~/.gemini/settings.json"))
        return checks

    # -- its own memory: ~/.gemini/GEMINI.md and the private project memory -------------------------
    # GEMINI.md is global memory, loaded at start (older releases' save_memory appended to its
    # `## Gemini Added Memories` section); ~/.gemini/tmp/<project slug>/memory/ holds a MEMORY.md index
    # loaded at start and sibling notes read on demand; ~/.gemini/projects.json maps project paths to
    # slugs, and `.project_root` in the slug dir names its owner.
    def memory_items(self, env: Mapping[str, str], known_scopes: list[str], cwd: str | None = None,
                     project: str | None = None) -> tuple[list[Any], list[str]]:
        from ... import native  # lazy: +14 ms on a hook (measured)

        notes: list[str] = []
        base = gemini_dir(env)
        items = native.instruction_items(base / self.user_instructions, scope="global", fmt=self.memory_folder_format,
                                         host_loaded=True, notes=notes)  # GEMINI.md: loaded at every start
        registry = native.read_json(base / "projects.json")
        slugs = {}
        if isinstance(registry, dict) and isinstance(registry.get("projects"), dict):
            slugs = {v: k for k, v in registry["projects"].items() if isinstance(v, str) and isinstance(k, str)}
        try:
            folders = sorted(p for p in (base / "tmp").iterdir() if (p / "memory").is_dir())
        except OSError:
            folders = []
        for folder in folders:
            owner = native.read_text(folder / ".project_root")
            scope = (owner or "").strip() or slugs.get(folder.name)
            if not scope:
                scope = folder.name
                notes.append(f"{folder.name}: the project it belongs to is not recorded; filed under scope {scope!r}")
            items += native.memory_dir_items(folder / "memory", fmt=self.memory_folder_format, scope=scope,
                                             notes=notes)
        if not items:
            notes.append(f"no {self.title} memory in {base}")
        return items, notes

    def memory_root(self, env: Mapping[str, str]) -> Path | None:
        return gemini_dir(env)

    def memory_report(self, env: Mapping[str, str], cwd: str | None = None,
                      project: str | None = None) -> dict[str, Any] | None:
        from ... import native  # lazy: +14 ms on a hook (measured)

        base = gemini_dir(env)
        global_md = base / "GEMINI.md"
        folders = sorted((base / "tmp").glob("*/memory")) if (base / "tmp").is_dir() else []
        paths = ([global_md] if global_md.is_file() else []) + [p for f in folders for p in sorted(f.glob("*.md"))]
        files, size = native.md_stats(paths)
        loaded = [str(global_md)] if global_md.is_file() else []
        registry = native.read_json(base / "projects.json")
        if project and isinstance(registry, dict) and isinstance(registry.get("projects"), dict):
            slug = registry["projects"].get(project)
            if isinstance(slug, str) and (base / "tmp" / slug / "memory" / "MEMORY.md").is_file():
                loaded.append(str(base / "tmp" / slug / "memory" / "MEMORY.md"))
        settings = native.read_json(base / "settings.json")
        auto = isinstance(settings, dict) and isinstance(settings.get("experimental"), dict) \
            and settings["experimental"].get("autoMemory") is True
        why = "GEMINI.md and the private project memory are always loaded" + (
            "; experimental.autoMemory is on" if auto else "")
        summary = f"memory files on ({why}): {files} file(s), {native.human_size(size)} in {base}"
        return {"host": self.name, "feature": "memory files", "enabled": True, "why": why, "location": str(base),
                "files": files, "bytes": size, "loaded_at_start": loaded, "summary": summary, "auto_memory": auto,
                "fix": f"retained import --from {self.name} (dry run), then --apply"}

    plugin_remove = "gemini extensions uninstall retained"

    def installed_plugin(self, env: Mapping[str, str], project: Path | None) -> str | None:
        """retained installed as gemini's own plugin (issue 30), as installers/plugins.py describes."""
        base = Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else plugin_home(env)
        manifest = base / ".gemini" / "extensions" / PLUGIN_NAME / "gemini-extension.json"
        data = read_json(manifest)
        if isinstance(data, dict) and data.get("name") == PLUGIN_NAME:
            return f"extension {PLUGIN_NAME} ({manifest.parent})"
        return None


def gemini_dir(env: Mapping[str, str]) -> Path:
    from ... import native  # lazy: +14 ms on a hook (measured)

    return Path(env.get("GEMINI_CLI_HOME") or native.home_of(env)) / ".gemini"


def trusted_folders_path(gemini_home: str, env: Mapping[str, str]) -> Path:
    return Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or Path(gemini_home) / ".gemini" / "trustedFolders.json")


def folder_trusted(project: Path, settings: dict[str, Any], gemini_home: str,
                   env: Mapping[str, str]) -> tuple[bool, str]:
    """Gemini CLI's folder trust for `project` (its checkPathTrust, 0.61): env, the setting, the rules file."""
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return False, "the environment marks this workspace untrusted"
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True, "GEMINI_CLI_TRUST_WORKSPACE=true"
    security = table(settings, "security")
    folder_trust = table(security, "folderTrust")
    if folder_trust.get("enabled", True) is False:
        return True, "folder trust is off in settings"
    from .. import jsonc  # lazy: +11 ms on a hook (measured)

    path = trusted_folders_path(gemini_home, env)
    try:
        rules = jsonc.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        rules = {}
    except (OSError, ValueError) as e:
        return False, f"{path} cannot be read ({e}); Gemini CLI refuses to start"
    here = os.path.realpath(project)
    best, level = -1, None
    for rule, trust in (rules.items() if isinstance(rules, dict) else []):
        effective = os.path.dirname(rule) if trust == "TRUST_PARENT" else rule
        root = os.path.realpath(effective)
        if (here == root or here.startswith(root.rstrip(os.sep) + os.sep)) and len(rule) > best:
            best, level = len(rule), trust
    if level in ("TRUST_FOLDER", "TRUST_PARENT"):
        return True, f"{project} is trusted ({level})"
    if level == "DO_NOT_TRUST":
        return False, f"{project} is marked DO_NOT_TRUST in {path}"
    return False, f"{project} is not in {path}: Gemini CLI shows retained as Disabled there"


HOST = GeminiCLI()
