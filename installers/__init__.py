"""Host adapters and safe config editing for `retained install`, `uninstall` and `doctor`.

Installed as `retained.installers` (the top-level folder `installers/` is mapped into the one import root).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Host


def hosts() -> dict[str, Host]:
    """Every supported host, by the name `--host` takes."""
    from .claude import ClaudeCode
    from .codex import Codex
    from .cursor import Cursor
    from .gemini import GeminiCLI
    from .vscode import VSCode

    return {h.name: h for h in (ClaudeCode(), Codex(), Cursor(), VSCode(), GeminiCLI())}
