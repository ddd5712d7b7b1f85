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


HOST = GeminiCLI()
