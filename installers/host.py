"""What retained knows about one agent host; `installers/hosts/<name>.py` declares one subclass each.

A host says where its config files are and which edits retained makes there (its template,
`templates/<name>.json`), how to recognise its hook input, the shapes its hooks must print and how
much of that it keeps, what doctor feeds its hook, and which host-side conditions stop a wired server
or hook from running. The hook runner imports this module on every session start: it uses the
standard library only, and the installer side (plans, edits, formats) is imported when first used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .base import FilePlan


class Host:
    name: str = ""
    title: str = ""
    order: int = 100  # which host's input is recognised first (lower first)
    fallback: bool = False  # the host assumed when the input and the environment say nothing
    max_chars: int | None = 9_000  # hook stdout the host keeps whole, in characters
    max_tokens: int | None = None  # ... and in tokens, where the host cuts by tokens
    # what the user gets when a host has no hook for something (said in the plan and by doctor)
    notes: tuple[str, ...] = ()
    session_keys: tuple[str, ...] = ("session_id",)  # hook input keys holding the session id
    session_vars: tuple[str, ...] = ()  # environment variables holding it
    project_vars: tuple[str, ...] = ()  # environment variables holding the project directory
    instructions_max_chars: int | None = None  # where the host cuts a server's `instructions`
    prompt_reaches_model: bool = True  # whether the prompt-submit hook's output is put before the model
    # The host's own memory (`retained import --from <name>`, doctor's "native memory", the brief):
    memory_source: bool = False  # whether `retained import --from <name>` reads one
    instruction_files: dict[str, str] = {}  # instruction file the host loads itself → the format imports record
    memory_at_start: tuple[str, ...] = ()  # other memory file names the host injects into every session

    def __init__(self) -> None:
        self._template: dict[str, Any] | None = None

    @property
    def template(self) -> dict[str, Any]:
        if self._template is None:
            from importlib import resources  # not at import: the hook path never reads a template

            text = resources.files("retained.templates").joinpath(f"{self.name}.json").read_text("utf-8")
            self._template = json.loads(text)
        return self._template

    def __repr__(self) -> str:
        return f"<host {self.name}>"

    # -- the hook side -------------------------------------------------------------------------------
    def recognises(self, data: dict[str, Any], env: dict[str, str]) -> bool:
        """Whether this hook input (and environment) comes from this host."""
        return False

    def session_start_output(self, text: str) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}

    def stop_output(self, reason: str) -> dict[str, Any]:
        return {"decision": "block", "reason": reason}

    def prompt_output(self, text: str) -> dict[str, Any] | None:
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}}

    def pre_compact_output(self, text: str) -> dict[str, Any] | str | None:
        """What the pre-compaction hook prints, when this host puts it in front of the model (None: nothing)."""
        return None

    def context_in(self, output: dict[str, Any]) -> str | None:
        """The text a session-start output carries (doctor reads back what the hook printed)."""
        inner = output.get("hookSpecificOutput")
        return inner.get("additionalContext") if isinstance(inner, dict) else None

    def is_compaction(self, data: dict[str, Any]) -> bool:
        """Whether this session-start input follows a compaction of the conversation."""
        return data.get("source") == "compact"

    def project_start(self, data: dict[str, Any]) -> str | None:
        """Where this host's input says the session works (None: it does not say)."""
        cwd = data.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else None

    def prompt_of(self, data: dict[str, Any]) -> str | None:
        value = data.get("prompt")
        return value if isinstance(value, str) else None

    # -- the host's own memory (read by retained/native.py's generic readers) --------------------------
    def memory_items(self, env: Mapping[str, str], known_scopes: list[str],
                     cwd: str | None = None) -> tuple[list[Any], list[str]]:
        """(candidate records, notes) from the host's own memory, for `retained import --from <name>`."""
        return [], []

    memory_folder_format: str = ""  # the format imports record for a memory folder under memory_root

    def memory_root(self, env: Mapping[str, str]) -> Path | None:
        """The folder under which this host keeps its memory folders (None: it keeps none)."""
        return None

    def memory_path_items(self, path: Path, scope: str | None, env: Mapping[str, str]) -> list[Any] | None:
        """Items of `path` when it is one of this host's memory folders (None: not this host's)."""
        from .. import native

        root = self.memory_root(env)
        inner = path / "memory" if (path / "memory").is_dir() else path
        if root is None or root.resolve() not in inner.resolve().parents:
            return None
        return native.memory_dir_items(inner, fmt=self.memory_folder_format, scope=scope or native.project_of(path))

    user_instructions: str = ""  # the instruction file in memory_root the host loads in every project

    def user_instruction_file(self, env: Mapping[str, str]) -> Path | None:
        """The user-level instruction file the host loads in every project (its items are global)."""
        root = self.memory_root(env)
        return root / self.user_instructions if root is not None and self.user_instructions else None

    def memory_report(self, env: Mapping[str, str], cwd: str | None = None) -> dict[str, Any] | None:
        """What native memory the host has, whether it is on, and how big it is (native.native_memory)."""
        return None

    # -- what doctor sends --------------------------------------------------------------------------
    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        """A session-start input and environment as this host would give its hook."""
        return {"cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}, {}

    def server_command(self, entry: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        """(argv, env) retained's server entry makes the host start."""
        argv = [str(entry.get("command") or ""), *[str(a) for a in entry.get("args") or []]]
        return argv, {k: str(v) for k, v in (entry.get("env") or {}).items()}

    def hook_command_in(self, docs: dict[str, Any]) -> str | None:
        """The session-start command this host runs, when it is not in a hooks file (a plugin's)."""
        return None

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str) -> list[Any]:
        """Checks of host-side conditions that stop a wired server or hook from running."""
        return []

    # -- the installer side ------------------------------------------------------------------------
    def context(self, store: Path, project: Path, scope: str = "user") -> dict[str, Any]:
        from .base import base_context

        return base_context(store, project, scope)

    def detected(self, ctx: dict[str, Any]) -> bool:
        import shutil

        from .base import fill

        det = self.template.get("detect", {})
        if any(shutil.which(c) for c in det.get("commands", [])):
            return True
        return any(Path(fill(p, ctx)).exists() for p in det.get("paths", []))

    def plans(self, ctx: dict[str, Any], *, scope: str, flags: dict[str, bool], install: bool = True) -> list[FilePlan]:
        from .base import plans_from_template

        return self.finish(plans_from_template(self, ctx, scope=scope, flags=flags, install=install), ctx,
                           install=install)

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        """Edits that depend on the others (Codex: trust hashes of the hooks as they will be)."""
        return plans

    def server_installed(self, ctx: dict[str, Any], scope: str = "user") -> bool:
        """Whether this host's config still holds retained's server entry."""
        for plan in self.plans(ctx, scope=scope, flags={}):
            for edit in plan.server_edits:
                try:
                    doc = plan.editor.load(plan.path, plan.path.read_text("utf-8"))
                except Exception:  # noqa: BLE001 - unreadable or absent: not installed as far as we can tell
                    continue
                if edit.found(doc):
                    return True
        return False
