"""OpenCode: `opencode.json` (JSONC; `mcp.<name>` with a command array and `environment`) and a plugin.

OpenCode (npm `opencode-ai`) has no command hooks. It loads every `*.js` in `plugin/` beside its
config, and a plugin's `experimental.chat.system.transform` adds to the system prompt of each model
request, `experimental.session.compacting` to the compaction prompt (read from its CLI 1.18.33). So
retained writes a small plugin that runs `retained hook session-start` once per session and puts the
brief in the system prompt (where compaction cannot drop it), and asks for memory_checkpoint when a
session is compacted. There is no stop reminder and no per-prompt recall: the plan and doctor say so.
Global config: `$XDG_CONFIG_HOME/opencode` (default `~/.config/opencode`), or `$OPENCODE_CONFIG_DIR`.
"""

from __future__ import annotations

import os
import re

from retained import safejson

from ..host import Check, Host, table

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


class OpenCode(Host):
    name = "opencode"
    title = "OpenCode"
    order = 60
    notes = ("OpenCode gets the brief in its system prompt and a checkpoint request at compaction, by a plugin; "
             "it has no stop reminder and no per-prompt recall (no command hooks)",)

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        base = env.get("OPENCODE_CONFIG_DIR") or os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                                                              "opencode")
        return {"opencode_config": base}

    def pre_compact_output(self, text: str) -> str:
        return text  # the plugin adds it to the compaction prompt

    def server_command(self, entry: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        command = entry.get("command")
        argv = [str(c) for c in command] if isinstance(command, list) else [str(command or "")]
        return argv, {k: str(v) for k, v in table(entry, "environment").items()}

    def hook_command_in(self, docs: dict[str, Any]) -> str | None:
        import shlex  # lazy: +0.4 ms on a hook (measured)

        content = table(docs, "plugin").get("content")
        found = re.search(r"^const HOOK = (\[.*\]);$", content, re.M) if isinstance(content, str) else None
        if not found:
            return None

        try:
            argv = safejson.loads(found.group(1))
        except ValueError:
            return None
        if not isinstance(argv, list):
            return None
        return shlex.join([*(str(a) for a in argv), "session-start", "--host", "opencode"])

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        entry = table(docs, "server", "mcp").get("retained")
        checks = []
        if isinstance(entry, dict):
            on = entry.get("enabled", True) is not False
            checks.append(Check(self.name, "server entry is enabled", on, "" if on else "enabled is false",
                                "" if on else "set mcp.retained.enabled to true"))
        checks.append(Check(self.name, "what OpenCode gets", True, self.notes[0]))
        return checks


HOST = OpenCode()
