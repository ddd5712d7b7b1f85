"""Gemini CLI: ~/.gemini/settings.json (comments allowed, trailing commas not; hook timeouts in ms)."""

from __future__ import annotations

from .base import Host


class GeminiCLI(Host):
    template_name = "gemini"
