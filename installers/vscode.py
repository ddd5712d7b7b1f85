"""VS Code (Copilot agent mode): the profile's mcp.json (JSONC, key `servers`); hooks via ~/.claude/settings.json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import FilePlan, Host, keep_shared_hooks

if TYPE_CHECKING:
    from typing import Any


class VSCode(Host):
    template_name = "vscode"

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        from .claude import ClaudeCode

        return keep_shared_hooks(plans, f"{ctx['claude_dir']}/settings.json", ClaudeCode(), ctx, install)
