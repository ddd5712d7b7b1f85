"""Claude Code: ~/.claude.json (strict JSON, rewritten constantly by Claude) and ~/.claude/settings.json."""

from __future__ import annotations

from .base import Host


class ClaudeCode(Host):
    template_name = "claude"
