"""VS Code (Copilot agent mode): the profile's mcp.json (JSONC, key `servers`).

User-scope hooks are Claude Code's ~/.claude/settings.json entries, which VS Code reads by default
(`chat.hookFilesLocations`): that file is declared here as shared (`shares`), so it is Claude Code's
own path and placeholders that name it, and retained plans, shows and writes it once for both hosts
(the same entries; the hook tells the hosts apart by their input). Project hooks go to
`.github/hooks/retained.json` (flat entries).
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import quote

from ..host import LINK_ENTRY, PLUGIN_NAME, Host

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


class VSCode(Host):
    name = "vscode"
    title = "VS Code (Copilot agent mode)"
    order = 20
    session_keys = ("sessionId",)
    shares = {("hooks", "user"): "claude"}
    work_tools = ("runInTerminal", "editFiles", "createFile", "create_file", "str_replace_based_edit_tool")

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        if sys.platform == "win32":
            user = os.path.join(env.get("APPDATA") or os.path.join(home, "AppData", "Roaming"), "Code", "User")
        elif sys.platform == "darwin":
            user = os.path.join(home, "Library", "Application Support", "Code", "User")
        else:
            user = os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "Code", "User")
        return {"vscode_user": user}

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
        return "sessionId" in data or "hookEventName" in data

    def stop_output(self, reason: str) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "Stop", "decision": "block", "reason": reason}}

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        return {"cwd": str(project), "hookEventName": "SessionStart", "source": "new"}, {}


HOST = VSCode()


def install_link(entry: dict[str, object] | None = None) -> str:
    """VS Code's install link: the server entry with its name, URL-encoded JSON."""
    return "vscode:mcp/install?" + quote(json.dumps({"name": PLUGIN_NAME, **(entry or LINK_ENTRY)}, separators=(",", ":")),
                                         safe="")
