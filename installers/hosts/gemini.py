"""Gemini CLI: ~/.gemini/settings.json (comments allowed, trailing commas not; hook timeouts in ms).

`GEMINI_CLI_HOME` replaces the home directory. Servers and hooks run only in trusted folders
(`~/.gemini/trustedFolders.json`), which doctor checks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..host import Host

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


class GeminiCLI(Host):
    name = "gemini"
    title = "Gemini CLI"
    order = 40
    session_vars = ("GEMINI_SESSION_ID",)
    project_vars = ("GEMINI_PROJECT_DIR",)

    def context_vars(self, home: str, env: dict[str, str]) -> dict[str, str]:
        return {"gemini_home": env.get("GEMINI_CLI_HOME") or home}

    def recognises(self, data: dict[str, Any], env: dict[str, str]) -> bool:
        return bool(env.get("GEMINI_SESSION_ID") or env.get("GEMINI_CLI")) or data.get("hook_event_name") in (
            "AfterAgent", "BeforeAgent", "PreCompress")

    def stop_output(self, reason: str) -> dict[str, Any]:
        return {"decision": "deny", "reason": reason}  # AfterAgent: a new turn with the reason as its prompt

    def prompt_output(self, text: str) -> dict[str, Any] | None:
        return {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": text}}

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str) -> list[Any]:
        from ..doctor import Check

        settings = docs.get("server") or {}
        trusted, why = folder_trusted(project, settings, ctx["gemini_home"], dict(os.environ))
        fix = (f'add "{project}": "TRUST_FOLDER" to {trusted_folders_path(ctx["gemini_home"], dict(os.environ))}'
               " (or run gemini there once and trust the folder)")
        checks = [Check(self.name, "folder is trusted (else Gemini CLI disables the server and hooks)", trusted,
                        why, "" if trusted else fix)]
        hooks_config = settings.get("hooksConfig") if isinstance(settings.get("hooksConfig"), dict) else {}
        disabled = hooks_config.get("disabled") if isinstance(hooks_config.get("disabled"), list) else []
        ours = [n for n in disabled if isinstance(n, str) and n.startswith("retained-")]
        on = hooks_config.get("enabled", True) is not False and not ours
        checks.append(Check(self.name, "hooks are enabled", on,
                            "hooksConfig.enabled is false" if hooks_config.get("enabled") is False else
                            f"hooksConfig.disabled lists {', '.join(ours)}" if ours else "",
                            "" if on else "remove that setting from ~/.gemini/settings.json"))
        return checks


def trusted_folders_path(gemini_home: str, env: dict[str, str]) -> Path:
    from pathlib import Path

    return Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or Path(gemini_home) / ".gemini" / "trustedFolders.json")


def folder_trusted(project: Path, settings: dict[str, Any], gemini_home: str, env: dict[str, str]) -> tuple[bool, str]:
    """Gemini CLI's folder trust for `project` (its checkPathTrust, 0.61): env, the setting, the rules file."""
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return False, "the environment marks this workspace untrusted"
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True, "GEMINI_CLI_TRUST_WORKSPACE=true"
    security = settings.get("security") if isinstance(settings.get("security"), dict) else {}
    folder_trust = security.get("folderTrust") if isinstance(security.get("folderTrust"), dict) else {}
    if folder_trust.get("enabled", True) is False:
        return True, "folder trust is off in settings"
    from .. import jsonc

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
