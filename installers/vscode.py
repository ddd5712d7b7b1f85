"""VS Code (Copilot agent mode): the profile's mcp.json (JSONC, key `servers`); hooks via ~/.claude/settings.json."""

from __future__ import annotations

from .base import Host


class VSCode(Host):
    template_name = "vscode"
