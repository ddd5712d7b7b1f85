"""retained installed from a host's own plugin surface (issue 30), seen from `retained install` and doctor.

This repository is also a Claude Code plugin, a Codex plugin and a Gemini CLI extension. A host that has
retained as its plugin must not get a second copy from `retained install` (two servers, every hook twice),
so install skips it and doctor fails on a host wired both ways. Each host records an installed plugin in
a file of its own, which its module in installers/hosts/ reads (never writes): `Host.installed_plugin`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .host import LINK_ENTRY, PLUGIN_NAME, plugin_home, read_json
from .hosts import hosts

PLUGIN = PLUGIN_NAME
__all__ = ["LINK_ENTRY", "PLUGIN", "PLUGIN_NAME", "installed_plugin", "plugin_home", "read_json", "remove_command"]

if TYPE_CHECKING:
    from collections.abc import Mapping

def installed_plugin(host: str, env: Mapping[str, str] | None = None, project: Path | None = None) -> str | None:
    """How retained is installed as `host`'s own plugin or extension (a phrase naming where), or None:
    each host module knows where its host records one (`Host.installed_plugin`)."""
    found = hosts().get(host)
    return None if found is None else found.installed_plugin(os.environ if env is None else env, project)


def remove_command(host: str) -> str:
    """The host's own command that removes the plugin (the other way out of a double wiring)."""
    found = hosts().get(host)
    return found.plugin_remove if found is not None else ""


