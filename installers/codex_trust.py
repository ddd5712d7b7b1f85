"""Codex hook trust: the `[hooks.state]` entries Codex needs before it runs a hook.

Codex silently skips a hook whose hash is not trusted in the user's config.toml. The hash covers the
hook's identity (event, matcher, normalised handler); see the hosts reference, section 3.6, verified on
Codex 0.171.0. Recompute whenever the hook entry changes: any change to command, timeout or matcher
invalidates it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EVENT_LABELS = {
    "SessionStart": "session_start", "SessionEnd": "session_end", "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop", "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use",
    "PermissionRequest": "permission_request", "PreCompact": "pre_compact", "PostCompact": "post_compact",
    "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop",
}
MATCHER_IGNORED = {"UserPromptSubmit", "Stop"}


def handler_identity(event: str, matcher: str | None, handler: dict[str, Any]) -> dict[str, Any]:
    if event == "SessionEnd":
        timeout = min(max(handler.get("timeout") or 1, 1), 3)
    else:
        timeout = max(handler.get("timeout") or 600, 1)
    normalised: dict[str, Any] = {"type": "command", "command": handler["command"], "timeout": timeout,
                                  "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalised]}
    if matcher is not None and event not in MATCHER_IGNORED:
        identity["matcher"] = matcher
    return identity


def trusted_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    blob = json.dumps(handler_identity(event, matcher, handler), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def trust_entries(hooks_json_path: str, hooks: dict[str, Any]) -> dict[str, str]:
    """{state key: trusted hash} for every command handler in a hooks.json document."""
    path = os.path.abspath(hooks_json_path)
    out: dict[str, str] = {}
    for event, groups in (hooks.get("hooks") or {}).items():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, dict):
                continue
            matcher = group.get("matcher")
            for hi, handler in enumerate(group.get("hooks") or []):
                if isinstance(handler, dict) and handler.get("type") == "command" and "command" in handler:
                    out[f"{path}:{EVENT_LABELS[event]}:{gi}:{hi}"] = trusted_hash(event, matcher, handler)
    return out
