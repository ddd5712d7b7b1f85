"""Claude Code: ~/.claude.json (strict JSON, rewritten constantly by Claude) and ~/.claude/settings.json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import FilePlan, Host, keep_shared_hooks

if TYPE_CHECKING:
    from typing import Any


class ClaudeCode(Host):
    template_name = "claude"

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        from .vscode import VSCode

        return keep_shared_hooks(plans, f"{ctx['claude_dir']}/settings.json", VSCode(), ctx, install)
