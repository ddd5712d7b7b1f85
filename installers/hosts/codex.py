"""Codex CLI: config.toml (tomlkit keeps every comment), hooks.json, and the hook trust hashes.

Codex silently skips hooks that are not trusted by hash in the user config.toml, so the trust entries
are computed from hooks.json as it will be after the install (our handlers' positions), and rewritten
whenever the hook entries change. The hash (hosts reference, section 3.6, verified on Codex 0.171.0)
covers the hook's identity: event, matcher, normalised handler. Any change to command, timeout or
matcher invalidates it. Codex passes almost no environment to servers, so RETAINED_DIR sits in the
entry's env. `CODEX_HOME` moves everything.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from retained import safejson

from ..host import PLUGIN_NAME, Check, Host, plugin_home, table

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from ..base import FilePlan

EVENT_LABELS = {
    "SessionStart": "session_start", "SessionEnd": "session_end", "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop", "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use",
    "PermissionRequest": "permission_request", "PreCompact": "pre_compact", "PostCompact": "post_compact",
    "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop",
}
MATCHER_IGNORED = {"UserPromptSubmit", "Stop"}


def handler_identity(event: str, matcher: str | None, handler: dict[str, Any]) -> dict[str, Any]:
    timeout = (min(max(handler.get("timeout") or 1, 1), 3) if event == "SessionEnd"
               else max(handler.get("timeout") or 600, 1))
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
    import hashlib  # lazy: ~8 ms on every hook (measured), which loads this module to recognise its input

    return "sha256:" + hashlib.sha256(blob).hexdigest()


def trust_entries(hooks_json_path: str, hooks: dict[str, Any]) -> dict[str, str]:
    """{state key: trusted hash} for every command handler in a hooks.json document."""
    path = os.path.abspath(hooks_json_path)
    out: dict[str, str] = {}
    for event, groups in table(hooks, "hooks").items():
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


def our_entries(path: str, doc: dict[str, Any]) -> dict[str, str]:
    """Trust entries for retained's own handlers only (other hooks are the user's to trust)."""
    from ..edits import is_our_command  # lazy: the installer side, +83 ms on a hook (measured)

    labels = {label: event for event, label in EVENT_LABELS.items()}
    mine: dict[str, str] = {}
    for key, digest in trust_entries(path, doc).items():
        _, label, gi, hi = key.rsplit(":", 3)
        try:
            handler = doc["hooks"][labels[label]][int(gi)]["hooks"][int(hi)]
        except (KeyError, IndexError, TypeError):
            continue
        if is_our_command(handler.get("command")):
            mine[key] = digest
    return mine


class Codex(Host):
    """Codex CLI."""

    name = "codex"
    title = "Codex CLI"
    order = 50
    max_tokens = 2_000  # Codex cuts hook output at about 2,500 tokens (estimated here on the high side)
    memory_source = True  # memories
    instruction_files = {"AGENTS.md": "agents-md", "AGENTS.override.md": "agents-md"}
    memory_at_start = ("memory_summary.md",)
    user_instructions = "AGENTS.md"
    # its rollout transcripts: function calls by name, and local shell calls as items of their own type
    work_tools = ("shell", "exec_command", "apply_patch", "local_shell")
    work_item_types = ("local_shell_call",)

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        return {"codex_home": env.get("CODEX_HOME") or os.path.join(home, ".codex")}

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
        return bool(env.get("CODEX_MANAGED_BY_NPM")) or "turn_id" in data or ("model" in data and "permission_mode" in data)

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        config = table(docs, "server")
        checks = []
        entry = table(config, "mcp_servers").get("retained")
        if isinstance(entry, dict):
            on = entry.get("enabled", True) is not False
            checks.append(Check(self.name, "server entry is enabled", on, "" if on else "enabled = false",
                                "" if on else "remove `enabled = false` from [mcp_servers.retained]"))
        features = table(config, "features")
        off = [k for k in ("hooks", "codex_hooks") if features.get(k) is False]
        checks.append(Check(self.name, "hooks feature is on", not off, f"[features] {off[0]} = false" if off else "",
                            f"remove `{off[0]} = false` from [features]" if off else ""))
        checks += self._trust_as_it_stands(ctx, scope, project)
        if scope == "project":
            user = _user_config(ctx)
            trust = table(user, "projects", str(project)).get("trust_level")
            ok = trust == "trusted"
            checks.append(Check(self.name, "project is trusted (else Codex ignores .codex/)", ok,
                                f"trust_level = {trust!r}" if trust else f"{project} has no trust_level",
                                "" if ok else f'add [projects."{project}"] trust_level = "trusted" to '
                                              f'{ctx["codex_home"]}/config.toml (or run codex there and trust it)'))
        return checks

    def _trust_as_it_stands(self, ctx: dict[str, Any], scope: str, project: Path) -> list[Check]:
        """Codex checks each hook's hash against hooks.json as it is now: so does doctor."""
        path = os.path.join(ctx["codex_home"], "hooks.json") if scope == "user" else os.path.join(
            str(project), ".codex", "hooks.json")

        try:
            with open(path, "rb") as f:
                doc = safejson.loads(f.read())  # bounded: nested thousands deep is broken, not a crash
        except (OSError, ValueError):
            return []  # absent or broken: the file's own checks say so
        state = table(_user_config(ctx), "hooks", "state")
        checks = []
        for key, digest in our_entries(path, doc if isinstance(doc, dict) else {}).items():
            held = state.get(key) if isinstance(state, dict) else None
            ok = isinstance(held, dict) and held.get("trusted_hash") == digest and held.get("enabled", True) is not False
            why = ("" if ok else "no trust entry" if not isinstance(held, dict) else
                   "disabled" if held.get("enabled") is False else "its trusted_hash no longer matches the hook")
            checks.append(Check(self.name, "hook trusted", ok, f"{key.rsplit(':', 3)[1]}: {why or 'hash matches'}",
                                "" if ok else f"retained install --host {self.name} (rewrites the trust entries)"))
        return checks

    # -- its own memory: $CODEX_HOME/memories/ (on with `[features] memories = true`) ----------------
    # memory_summary.md (first line `v1`, injected at every session start: User Profile, User
    # preferences, General Tips, What's in Memory) and MEMORY.md (a searchable handbook of `# Task Group:`
    # blocks with `## User preferences`, `## Reusable knowledge`, `## Failures and how to do differently`).
    # raw_memories.md and rollout_summaries/ are evidence Codex consolidates, not memories.
    def memory_items(self, env: Mapping[str, str], known_scopes: list[str], cwd: str | None = None,
                     project: str | None = None) -> tuple[list[Any], list[str]]:
        d = codex_home(env) / "memories"
        notes: list[str] = []
        items = memories_items(d, notes=notes)
        return items, notes if items else [f"no {self.title} memories in {d}", *notes]

    def memory_path_items(self, path: Path, scope: str | None, env: Mapping[str, str],
                          notes: list[str] | None = None) -> list[Any] | None:
        if (path / "memory_summary.md").exists() or path.name == "memories" and (path / "MEMORY.md").exists() \
                and codex_home(env) in path.resolve().parents:
            return memories_items(path, scope, notes=notes)
        return None

    def memory_root(self, env: Mapping[str, str]) -> Path | None:
        return codex_home(env)  # its memories folder is recognised by its files (memory_path_items)

    def memory_report(self, env: Mapping[str, str], cwd: str | None = None,
                      project: str | None = None) -> dict[str, Any] | None:
        from ... import native  # lazy: +14 ms on a hook (measured)

        config = native.read_toml(codex_home(env) / "config.toml")
        features = table(config, "features")
        mem = table(config, "memories")
        if features.get("memories") is True:
            enabled, why = True, "[features] memories = true"
            if mem.get("use_memories") is False:
                enabled, why = False, "[memories] use_memories = false (kept, not injected)"
        else:
            enabled, why = False, "off by default ([features] memories is not true)"
        folder = codex_home(env) / "memories"
        files, size = native.md_stats(sorted(p for p in folder.rglob("*.md")) if folder.is_dir() else [])
        loaded = [str(folder / "memory_summary.md")] if enabled and (folder / "memory_summary.md").is_file() else []
        summary = f"memories {'on' if enabled else 'off'} ({why}): {files} file(s), {native.human_size(size)} in {folder}"
        return {"host": self.name, "feature": "memories", "enabled": enabled, "why": why, "location": str(folder),
                "files": files, "bytes": size, "loaded_at_start": loaded, "summary": summary,
                "fix": f"retained import --from {self.name} (dry run), then --apply"}

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        from .. import formats  # lazy: the installer side, +72 ms on a hook (measured)

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
            after = json.loads(hooks_plan.editor.apply(hooks_plan.path, text, hooks_plan.edits, install=True))
        except Exception:
            return [p for p in plans if p is not trust_plan]
        path = str(hooks_plan.path.absolute())
        ours_now = our_entries(path, current)
        ours_after = our_entries(path, after)
        for edit in trust_plan.edits:
            edit.entries = ours_after if install else {}  # type: ignore[attr-defined]
            edit.keys = sorted(set(ours_now) | set(ours_after))  # type: ignore[attr-defined]
        return plans

    plugin_remove = "codex plugin remove retained@retained"

    def installed_plugin(self, env: Mapping[str, str], project: Path | None) -> str | None:
        """retained installed as codex's own plugin (issue 30), as installers/plugins.py describes."""
        codex_home = Path(env.get("CODEX_HOME") or plugin_home(env) / ".codex")
        config = codex_home / "config.toml"
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]  # lazy: +18 ms on a hook (measured)
        except ImportError:  # Python 3.10
            import tomlkit as tomllib  # type: ignore[no-redef,unused-ignore]
        try:
            data = tomllib.loads(config.read_text(encoding="utf-8"))
        except Exception:  # unreadable, or not TOML (tomlkit's parse errors are its own classes)
            return None
        plugins = data.get("plugins") if isinstance(data, dict) else None
        if isinstance(plugins, dict):
            for key, entry in plugins.items():
                if isinstance(key, str) and key.split("@")[0] == PLUGIN_NAME and \
                        not (isinstance(entry, dict) and entry.get("enabled") is False):
                    return f"plugin {key} ([plugins] in {config})"
        return None


def _user_config(ctx: dict[str, Any]) -> dict[str, Any]:
    import tomlkit  # lazy: +16 ms on a hook (measured)

    try:
        with open(os.path.join(ctx["codex_home"], "config.toml"), encoding="utf-8") as f:
            return tomlkit.parse(f.read()).unwrap()
    except Exception:
        return {}


def codex_home(env: Mapping[str, str]) -> Path:
    from ... import native  # lazy: +14 ms on a hook (measured)

    return Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else native.home_of(env) / ".codex"


_SUMMARY_KINDS = {"user profile": "fact", "user preferences": "preference", "general tips": "fact"}
_HANDBOOK_KINDS = {"user preferences": "preference", "preferences": "preference", "reusable knowledge": "fact",
                   "failures and how to do differently": "fact"}
_EVIDENCE = ("rollout_summary", "rollout summar", "rollout files", "keywords", "evidence")


def memories_items(directory: Path, scope: str | None = None, notes: list[str] | None = None) -> list[Any]:
    """Codex's memories folder: memory_summary.md (loaded at start) and the MEMORY.md handbook.

    What it leaves out is said in `notes`, by section and why: the summary's index of rollout files
    and the handbook's per-task evidence are Codex's bookkeeping, not memories."""
    from ... import native  # lazy: +14 ms on a hook (measured)

    items: list[Any] = []
    summary = directory / "memory_summary.md"
    text = native.read_text(summary, notes=notes)
    if text is not None:
        lines = text.split("\n")
        first = 1 if lines and lines[0].strip() == "v1" else 0
        left_out: dict[str, None] = {}
        items += native.markdown_items("\n".join(lines[first:]), summary, fmt="codex-memories", host_loaded=True,
                                       scope=scope or "global",
                                       skip_sections=("What's in Memory", "Older Memory Topics"),
                                       section_kinds=_SUMMARY_KINDS, first_line=first, skipped=left_out)
        _note_skipped(notes, summary, left_out, "an index of Codex's rollout files, not memories")
    handbook = directory / "MEMORY.md"
    text = native.read_text(handbook, notes=notes)
    if text is not None:
        # Codex writes this file from a template that has changed many times: take its bullet points
        # under whatever headings (or front matter) hold them, less the evidence sections of a task.
        _meta, body, skip = native.strip_front_matter(text)
        evidence: dict[str, None] = {}
        for block_scope, block, offset in _task_groups(body):
            items += native.markdown_items(block, handbook, fmt="codex-memories", host_loaded=False,
                                           scope=scope or block_scope, section_kinds=_HANDBOOK_KINDS,
                                           skip_sections=_EVIDENCE, first_line=offset + skip, skipped=evidence,
                                           bullets_only=True)
        _note_skipped(notes, handbook, evidence, "Codex's evidence of a task (its rollout files and keywords), "
                      "not memories")
    return items


def _note_skipped(notes: list[str] | None, path: Path, sections: dict[str, None], why: str) -> None:
    if notes is not None and sections:
        shown = list(sections)[:8]
        more = f" and {len(sections) - len(shown)} more" if len(sections) > len(shown) else ""
        notes.append(f"{path.name}: skipped section{'s' if len(sections) > 1 else ''} "
                     f"{', '.join(repr(s) for s in shown)}{more} ({why})")


def _task_groups(text: str) -> Iterator[tuple[str, str, int]]:
    """(scope, block text, first line offset) for each `# Task Group:` block of Codex's handbook."""
    from ... import native  # lazy: +14 ms on a hook (measured)

    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("# Task Group:")] or [0]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        block = lines[start:end]
        scope = "global"
        for line in block[:6]:
            m = re.match(r"^applies_to:\s*cwd=([^;]+)", line.strip())
            if m and os.path.isabs(m.group(1).strip()):
                cwd = Path(m.group(1).strip())
                scope = native.project_of(cwd) if cwd.exists() else str(cwd)
        yield scope, "\n".join(block), start


HOST = Codex()
