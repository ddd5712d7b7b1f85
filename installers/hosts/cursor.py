"""Cursor: ~/.cursor/mcp.json and ~/.cursor/hooks.json (flat camelCase hooks, `version: 1`).

With third-party skills on, Cursor also runs the hooks in Claude Code's settings.json, next to its
own: that is why its input is recognised before any other host's (`order`), and why the hooks that
file holds for Claude Code answer Cursor in Cursor's shapes. Retained writes nothing there for Cursor.
"""

from __future__ import annotations

import json

from ..host import LINK_ENTRY, PLUGIN_NAME, Check, Host

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


class Cursor(Host):
    name = "cursor"
    title = "Cursor"
    order = 10  # Cursor also runs Claude Code's hooks: recognise its input before anything else
    session_keys = ("session_id", "conversation_id")
    # beforeSubmitPrompt takes `continue` and `user_message` only: nothing it prints reaches the model
    # (Cursor's hooks docs; cupcake's harness reference: "does NOT support context injection"), and
    # its preCompact has no output that does. So retained installs neither; when Claude Code's prompt
    # hook runs inside Cursor (third-party hooks), it lets the prompt through and adds nothing.
    prompt_reaches_model = False
    notes = ("Cursor gets the brief at session start and the stop reminder; its beforeSubmitPrompt and "
             "preCompact hooks cannot put text before the model, so there is no per-prompt recall and no "
             "brief again after a compaction (the server's instructions still carry a short brief)",)
    work_tools = ("edit_file", "create_file", "run_terminal_cmd", "str_replace_based_edit_tool")

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
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
        return {"continue": True}  # the one shape beforeSubmitPrompt takes that lets the prompt go

    def context_in(self, output: dict[str, Any]) -> str | None:
        return output.get("additional_context")

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        return {"hook_event_name": "sessionStart", "workspace_roots": [str(project)], "cursor_version": "doctor"}, {}

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        return [Check(self.name, "what Cursor gets", True, self.notes[0])]


HOST = Cursor()


def install_link(entry: dict[str, object] | None = None) -> str:
    """Cursor's install link: the server entry as base64 JSON in `config`."""
    import base64  # lazy: +0.9 ms on a hook (measured)

    blob = json.dumps(entry or LINK_ENTRY, separators=(",", ":")).encode("utf-8")
    return f"cursor://anysphere.cursor-deeplink/mcp/install?name={PLUGIN_NAME}&config={base64.b64encode(blob).decode()}"
