"""retained installed from a host's own plugin surface (issue 30), seen from `retained install` and doctor.

This repository is also a Claude Code plugin, a Codex plugin and a Gemini CLI extension. A host that has
retained as its plugin must not get a second copy from `retained install` (two servers, every hook twice),
so install skips it and doctor fails on a host wired both ways. Each host records an installed plugin in
a file of its own, which its module in installers/hosts/ reads (never writes): `Host.installed_plugin`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PLUGIN = PLUGIN_NAME = "retained"


def plugin_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def installed_plugin(host: str, env: Mapping[str, str] | None = None, project: Path | None = None) -> str | None:
    """How retained is installed as `host`'s own plugin or extension (a phrase naming where), or None:
    each host module knows where its host records one (`Host.installed_plugin`)."""
    from .hosts import hosts

    found = hosts().get(host)
    return None if found is None else found.installed_plugin(os.environ if env is None else env, project)


def remove_command(host: str) -> str:
    """The host's own command that removes the plugin (the other way out of a double wiring)."""
    from .hosts import hosts

    found = hosts().get(host)
    return found.plugin_remove if found is not None else ""


# -- one-click install links (Cursor, VS Code) ---------------------------------------------------------------
# The server entry `retained install --scope project` writes when `retained` is on PATH and the store is
# the default one: a link cannot carry a path of the machine it is clicked on.
LINK_ENTRY = {"type": "stdio", "command": "retained", "args": ["serve"]}
