"""Cursor: ~/.cursor/mcp.json and ~/.cursor/hooks.json (flat camelCase hooks, `version: 1`)."""

from __future__ import annotations

from .base import Host


class Cursor(Host):
    template_name = "cursor"
