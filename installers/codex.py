"""Codex CLI: config.toml (tomlkit keeps every comment), hooks.json, and the hook trust hashes.

Codex silently skips hooks that are not trusted by hash in the user config.toml, so the trust entries
are computed from hooks.json as it will be after the install (our handlers' positions), and rewritten
whenever the hook entries change.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from . import formats
from .base import FilePlan, Host
from .codex_trust import trust_entries

if TYPE_CHECKING:
    from typing import Any


class Codex(Host):
    template_name = "codex"

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        hooks_plan = next((p for p in plans if p.role == "hooks"), None)
        trust_plan = next((p for p in plans if p.role == "trust"), None)
        if trust_plan is None:
            return plans
        if hooks_plan is None:
            return [p for p in plans if p is not trust_plan]
        try:
            text = hooks_plan.path.read_text("utf-8")
        except FileNotFoundError:
            text = ""
        except (OSError, UnicodeDecodeError):
            return [p for p in plans if p is not trust_plan]  # hooks.json itself will report the problem
        try:
            current = formats.EDITORS["json"].load(hooks_plan.path, text) if text.strip() else {}
            after_text = hooks_plan.editor.apply(hooks_plan.path, text, hooks_plan.edits, install=True)
            after = json.loads(after_text)
        except Exception:  # noqa: BLE001 - an unparsable hooks.json is reported by its own plan
            return [p for p in plans if p is not trust_plan]
        path = str(hooks_plan.path.absolute())
        ours_now = _our_entries(path, current)
        ours_after = _our_entries(path, after)
        for edit in trust_plan.edits:
            edit["entries"] = ours_after if install else {}
            edit["keys"] = sorted(set(ours_now) | set(ours_after))
        return plans


def _our_entries(path: str, doc: dict[str, Any]) -> dict[str, str]:
    """Trust entries for retained's own handlers only (other hooks are the user's to trust)."""
    all_entries = trust_entries(path, doc)
    mine: dict[str, str] = {}
    for key, digest in all_entries.items():
        _, label, gi, hi = key.rsplit(":", 3)
        event = next((e for e, g in (doc.get("hooks") or {}).items() if _label(e) == label), None)
        try:
            handler = doc["hooks"][event][int(gi)]["hooks"][int(hi)]
        except (KeyError, IndexError, TypeError):
            continue
        if formats.is_our_command(handler.get("command")):
            mine[key] = digest
    return mine


def _label(event: str) -> str:
    from .codex_trust import EVENT_LABELS

    return EVENT_LABELS.get(event, "")
