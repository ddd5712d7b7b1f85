"""What retained knows about one agent host; `installers/hosts/<name>.py` declares one subclass each.

`Host` is four concerns, one class each, so that a host module overrides what it needs and a reader
finds each kind of fact in one place:

- `HookShapes`: how to recognise the host's hook input, the shapes its hooks must print and how much
  of that it keeps, and the tool names in its transcripts that mean the session did real work;
- `OwnMemory`: the host's own memory (read with retained/native.py's readers, for `retained import
  --from`, doctor's "native memory" and the brief);
- `DoctorProbe`: what doctor feeds the host's hook and server, and which host-side conditions stop a
  wired server or hook from running;
- `ConfigFiles`: where its config files are and which edits retained makes there (its template,
  `templates/<name>.json`, read by this host only, with this host's own placeholders), and which of
  them is another host's file that it reads too (`shares`).

The hook runner imports this module on every session start: it uses the standard library only, and
the installer side (plans, edits, formats) is imported when first used: base.py brings tomlkit, the
JSONC editor and safe_file, +103 ms on a hook (measured as the median of 7 fresh processes after what
the stop hook loads); native +14 ms, importlib.resources +9 ms, typing +7 ms (no hook imports it), shutil +6 ms.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from retained import safejson

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ClassVar

    from .base import FilePlan

# Hook output every host keeps whole, unless its module says otherwise: the tightest cut known (over
# 10,000 characters Claude Code saves the output to a file and shows 2 KB of it).
HOOK_OUTPUT_CHARS = 9_000


def table(doc: Any, *path: str) -> dict[str, Any]:
    """The object (table) at `path` in a host's config, or {} when it is missing or of another type:
    what a check reads from a file it does not own must not crash on `mcp_servers = 5`."""
    for key in path:
        if not isinstance(doc, dict):
            return {}
        doc = doc.get(key)
    return doc if isinstance(doc, dict) else {}


def array(doc: Any, *path: str) -> list[Any]:
    """The list at `path`, or [] when it is missing or of another type (see `table`)."""
    for key in path[:-1]:
        doc = doc.get(key) if isinstance(doc, dict) else None
    found = doc.get(path[-1]) if isinstance(doc, dict) and path else None
    return found if isinstance(found, list) else []



#: retained as a host's own plugin or extension (issue 30): its name there, and the server entry a
#: one-click link carries (what `retained install --scope project` writes when `retained` is on PATH and the
#: store is the default one: a link cannot carry a path of the machine it is clicked on).
PLUGIN_NAME = "retained"
LINK_ENTRY = {"type": "stdio", "command": "retained", "args": ["serve"]}


def plugin_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def read_json(path: Path) -> object:
    """A host's file as JSON, within bounds (a config nested a thousand levels deep is not one), or None."""
    try:
        return safejson.loads(path.read_bytes())
    except (OSError, safejson.JSONError):
        return None


class Check:
    """One line of doctor's report: which host, what was checked, whether it holds, why, and the fix."""

    __slots__ = ("host", "name", "ok", "detail", "fix")

    def __init__(self, host: str, name: str, ok: bool, detail: str = "", fix: str = "") -> None:
        self.host, self.name, self.ok, self.detail, self.fix = host, name, ok, detail, fix

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


class _Named:
    name: str = ""  # what `--host` takes; also the module's and the template's name
    title: str = ""


class HookShapes(_Named):
    """The hook runner's side: recognising the host, and what its hooks print."""

    order: int = 100  # which host's input is recognised first (lower first)
    fallback: bool = False  # the host assumed when the input and the environment say nothing
    max_chars: int | None = HOOK_OUTPUT_CHARS  # hook stdout the host keeps whole, in characters
    max_tokens: int | None = None  # ... and in tokens, where the host cuts by tokens
    session_keys: tuple[str, ...] = ("session_id",)  # hook input keys holding the session id
    session_vars: tuple[str, ...] = ()  # environment variables holding it
    project_vars: tuple[str, ...] = ()  # environment variables holding the project directory
    instructions_max_chars: int | None = None  # where the host cuts a server's `instructions`
    prompt_reaches_model: bool = True  # whether the prompt-submit hook's output is put before the model
    # The stop hook asks for a checkpoint only after real work: a call of one of these tools in the
    # transcript (a `name`, `tool_name` or `toolName` field), or an item of one of these types.
    work_tools: tuple[str, ...] = ()
    work_item_types: tuple[str, ...] = ()

    def recognises(self, data: dict[str, Any], env: Mapping[str, str]) -> bool:
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


class OwnMemory(_Named):
    """The host's own memory, read by retained/native.py's generic readers."""

    memory_source: bool = False  # whether `retained import --from <name>` reads one
    instruction_files: ClassVar[dict[str, str]] = {}  # file the host loads itself → the format imports record
    memory_at_start: tuple[str, ...] = ()  # other memory file names the host injects into every session
    memory_folder_format: str = ""  # the format imports record for a memory folder under memory_root
    user_instructions: str = ""  # the instruction file in memory_root the host loads in every project

    def memory_items(self, env: Mapping[str, str], known_scopes: list[str], cwd: str | None = None,
                     project: str | None = None) -> tuple[list[Any], list[str]]:
        """(candidate records, notes) from the host's own memory, for `retained import --from <name>`;
        `project` is the current project's scope (the caller works it out)."""
        return [], []

    def memory_root(self, env: Mapping[str, str]) -> Path | None:
        """The folder under which this host keeps its memory folders (None: it keeps none)."""
        return None

    def memory_path_items(self, path: Path, scope: str | None, env: Mapping[str, str],
                          notes: list[str] | None = None) -> list[Any] | None:
        """Items of `path` when it is one of this host's memory folders (None: not this host's); what it
        recognised but left out goes to `notes`."""
        from .. import native  # lazy: +14 ms on a hook (see the top)

        root = self.memory_root(env)
        inner = path / "memory" if (path / "memory").is_dir() else path
        if root is None or root.resolve() not in inner.resolve().parents:
            return None
        return native.memory_dir_items(inner, fmt=self.memory_folder_format, scope=scope or native.project_of(path),
                                       notes=notes)

    def user_instruction_file(self, env: Mapping[str, str]) -> Path | None:
        """The user-level instruction file the host loads in every project (its items are global)."""
        root = self.memory_root(env)
        return root / self.user_instructions if root is not None and self.user_instructions else None

    def memory_report(self, env: Mapping[str, str], cwd: str | None = None,
                      project: str | None = None) -> dict[str, Any] | None:
        """What native memory the host has, whether it is on, and how big it is (the registry's native_memory)."""
        return None


class DoctorProbe(_Named):
    """What doctor runs as this host would, and the host-side conditions it checks."""

    def doctor_input(self, project: Path) -> tuple[dict[str, Any], dict[str, str]]:
        """A session-start input and environment as this host would give its hook."""
        return {"cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}, {}

    def server_command(self, entry: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        """(argv, env) retained's server entry makes the host start."""
        args = entry.get("args")
        argv = [str(entry.get("command") or ""), *[str(a) for a in (args if isinstance(args, list) else [])]]
        return argv, {k: str(v) for k, v in table(entry, "env").items()}

    def hook_command_in(self, docs: dict[str, Any]) -> str | None:
        """The session-start command this host runs, when it is not in a hooks file (a plugin's)."""
        return None

    def doctor_conditions(self, ctx: dict[str, Any], docs: dict[str, Any], project: Path, scope: str,
                          env: Mapping[str, str]) -> list[Check]:
        """Checks of host-side conditions that stop a wired server or hook from running (`env`: the
        environment the host's programs get)."""
        return []


class ConfigFiles(_Named):
    """The installer's side: the host's config files and retained's edits there."""

    # what the user gets when a host has no hook for something (said in the plan and by doctor)
    notes: tuple[str, ...] = ()
    # retained installed as this host's own plugin or extension (issue 30): the host's command that removes
    # it ("" when the host has no plugin surface retained ships for), and where it records the install.
    plugin_remove: str = ""

    def installed_plugin(self, env: Mapping[str, str], project: Path | None) -> str | None:
        """How retained is installed as this host's plugin (a phrase naming where), or None. Reads only."""
        return None

    # Files of this host's template that are another host's file, which this host reads too:
    # (role, scope) → that host's name. Retained plans, shows and writes such a file once, for both.
    shares: ClassVar[dict[tuple[str, str], str]] = {}

    def __init__(self) -> None:
        self._template: dict[str, Any] | None = None

    @property
    def template(self) -> dict[str, Any]:
        if self._template is None:
            from importlib import resources  # lazy: +9 ms (see the top), and the hook path never reads a template

            text = resources.files("retained.templates").joinpath(f"{self.name}.json").read_text("utf-8")
            self._template = json.loads(text)
        return self._template

    def context_vars(self, home: str, env: Mapping[str, str]) -> dict[str, str]:
        """This host's own placeholders for its template (its config folders, from `env`)."""
        return {}

    def context(self, store: Path, project: Path, scope: str = "user",
                env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The placeholders this host's template may use: the common ones and the host's own."""
        from .base import base_context  # lazy: the installer side (see the top)

        env = os.environ if env is None else env
        ctx = base_context(store, project, scope, env)
        ctx.update(self.context_vars(ctx["home"], env))
        return ctx

    def file_path(self, role: str, scope: str, ctx: dict[str, Any]) -> Path | None:
        """Where this host's file of `role` is at `scope` (None: the template has none there)."""
        from .base import fill  # lazy: the installer side (see the top)

        for f in self.template["files"]:
            if f["role"] == role and scope in f["path"]:
                return Path(fill(f["path"][scope], ctx))
        return None

    def detected(self, ctx: dict[str, Any]) -> bool:
        import shutil  # lazy: +6 ms on a hook (see the top)

        from .base import fill  # lazy: the installer side (see the top)

        det = self.template.get("detect", {})
        if any(shutil.which(c) for c in det.get("commands", [])):
            return True
        return any(Path(fill(p, ctx)).exists() for p in det.get("paths", []))

    def plans(self, ctx: dict[str, Any], *, scope: str, flags: dict[str, bool], install: bool = True) -> list[FilePlan]:
        from typing import cast  # lazy: no hook imports typing (see the top)

        from .base import plans_from_template  # lazy: the installer side (see the top)

        host = cast("Host", self)  # every host is a Host; this class is only its config part
        return self.finish(plans_from_template(host, ctx, scope=scope, flags=flags, install=install), ctx,
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
                except Exception:
                    continue
                if edit.found(doc):
                    return True
        return False


class Host(HookShapes, OwnMemory, DoctorProbe, ConfigFiles):
    """One agent host: every concern above, each overridable by the host's module."""

    def __repr__(self) -> str:
        return f"<host {self.name}>"
