"""Cursor: ~/.cursor/mcp.json and ~/.cursor/hooks.json (flat camelCase hooks, `version: 1`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..host import Host

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


class Cursor(Host):
    name = "cursor"
    title = "Cursor"
    order = 10  # Cursor also runs Claude Code's hooks: recognise its input before anything else
    session_keys = ("session_id", "conversation_id")

    def context_vars(self, home: str, env: dict[str, str]) -> dict[str, str]:
        return {}

    def recognises(self, data: dict[str, Any], env: dict[str, str]) -> bool:
        return ("cursor_version" in data or "workspace_roots" in data or "conversation_id" in data
                or bool(env.get("CURSOR_VERSION")))

    def project_start(self, data: dict[str, Any]) -> str | None:
        roots = data.get("workspace_roots")
        return roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None

    def session_start_output(self, text: str) -> dict[str, Any]:
        return {"continue": True, "additional_context": text}

    def stop_output(self, reason: str) -> dict[str, Any]:
        return {"followup_message": reason}

    def prompt_output(self, text: str) -> dict[str, Any] | None:
        # beforeSubmitPrompt is documented with `continue` and `user_message` only; `additional_context`
        # (its sessionStart field) is sent too, for the builds that read it, and `continue` lets the prompt go.
        return {"continue": True, "additional_context": text}

    def context_in(self, output: dict[str, Any]) -> str | None:
        return output.get("additional_context")

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        return {"hook_event_name": "sessionStart", "workspace_roots": [str(project)], "cursor_version": "doctor"}, {}


HOST = Cursor()
