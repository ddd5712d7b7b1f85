"""Claude Code: ~/.claude.json (strict JSON, rewritten constantly by Claude) and ~/.claude/settings.json.

Its hooks file is also read by VS Code (always) and Cursor (with third-party skills on), so those
hooks pass no --host and the input tells the hosts apart. `CLAUDE_CONFIG_DIR` moves both files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..host import Host

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


class ClaudeCode(Host):
    name = "claude"
    title = "Claude Code"
    order = 30
    fallback = True
    max_chars = 9_000  # over 10,000 characters Claude Code saves the output to a file and shows 2 KB
    session_vars = ("CLAUDE_CODE_SESSION_ID",)
    project_vars = ("CLAUDE_PROJECT_DIR",)

    def context_vars(self, home: str, env: dict[str, str]) -> dict[str, str]:
        claude_dir = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
        legacy = os.path.join(claude_dir, ".config.json")
        claude_json = legacy if os.path.exists(legacy) else os.path.join(env.get("CLAUDE_CONFIG_DIR") or home, ".claude.json")
        return {"claude_dir": claude_dir, "claude_json": claude_json}

    def recognises(self, data: dict[str, Any], env: dict[str, str]) -> bool:
        return env.get("CLAUDECODE") == "1"

    def pre_compact_output(self, text: str) -> str:
        return text  # PreCompact: plain stdout is appended to the compaction instructions

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str) -> list[Any]:
        from ..doctor import Check

        checks = []
        settings = docs.get("hooks") or {}
        off = settings.get("disableAllHooks") is True
        checks.append(Check(self.name, "hooks are not switched off", not off, "disableAllHooks is true" if off else "",
                            "remove disableAllHooks from Claude Code's settings.json" if off else ""))
        config = docs.get("server") or {}
        local = ((config.get("projects") or {}).get(str(project)) or {}) if scope == "user" else {}
        disabled = local.get("disabledMcpServers") if isinstance(local.get("disabledMcpServers"), list) else []
        if "retained" in disabled:
            checks.append(Check(self.name, "server is not disabled in this project", False,
                                f"projects[{project}].disabledMcpServers lists retained",
                                "enable it with /mcp in Claude Code, or remove it from that list"))
        return checks

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        payload, _ = super().doctor_input(project)
        return payload, {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project)}


HOST = ClaudeCode()
