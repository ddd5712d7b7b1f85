"""A host's template turned into file plans: which files, which typed edits, applied safely.

The template (templates/<name>.json) says which files hold retained's entries, their format, and the
entries themselves with placeholders ({command}, {hook}, {store}, paths); this module fills them in,
makes the edit objects (installers/edits.py), applies them with safe_file.edit, and reads them back.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retained.paths import default_data_dir, home_of

from . import edits as edit_kinds
from . import formats, safe_file

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .edits import Edit, ServerEntry
    from .host import Host


def fill(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if value.startswith("{") and value.endswith("}") and value[1:-1] in ctx and not isinstance(ctx[value[1:-1]], str):
            return ctx[value[1:-1]]
        out = value
        for key, sub in ctx.items():
            if isinstance(sub, str):
                out = out.replace("{" + key + "}", sub)
        return out
    if isinstance(value, list):
        return [fill(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, ctx) for k, v in value.items()}
    return value


def retained_command(store: Path | None, *, portable: bool = False,
                     env: Mapping[str, str] | None = None) -> tuple[str, list[str], str]:
    """(command, args for serve, hook command prefix).

    Absolute paths, so hosts need nothing on PATH; the hook prefix names the store (`--dir`), so hooks
    open the store the server entry opens (None: the store each user's default resolves to). Portable
    (files a project commits): `retained` from PATH (the PATH of `env`), when it is there.
    """
    where = f" --dir {_quote(str(store))}" if store is not None else ""
    if portable and shutil.which("retained", path=(os.environ if env is None else env).get("PATH")):
        return "retained", ["serve"], f"retained{where} hook"
    script = Path(sys.executable).with_name("retained.exe" if os.name == "nt" else "retained")
    if script.exists() and os.access(script, os.X_OK):
        exe = str(script.absolute())
        return exe, ["serve"], f"{_quote(exe)}{where} hook"
    py = str(Path(sys.executable).absolute())
    return py, ["-m", "retained", "serve"], f"{_quote(py)} -m retained{where} hook"


def _argv(command: str) -> list[str]:
    """A command line retained wrote (with _quote) as its words, for hosts that start a program directly."""
    return shlex.split(command, posix=os.name != "nt") if os.name != "nt" else [
        w.strip('"') for w in shlex.split(command, posix=False)]


def _quote(path: str) -> str:
    if os.name == "nt":
        return f'"{path}"' if " " in path else path
    return shlex.quote(path)


# The placeholders every host's template may use (a host adds its own: `Host.context_vars`).
BASE_PLACEHOLDERS = ("home", "project", "store", "command", "serve_args", "serve_command", "hook", "hook_argv_json")


def base_context(store: Path, project: Path, scope: str = "user",
                 env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The placeholders every template may use (BASE_PLACEHOLDERS), from `env` (default: this process's).

    Project scope writes files a project usually commits: there the command is `retained` from PATH
    when it is on PATH, and the default store is left to each user's own default (no RETAINED_DIR, no
    --dir); what still names this machine's paths is said in the plan (`portable_notes`).
    """
    env = os.environ if env is None else env
    home = str(home_of(env))
    implicit = scope == "project" and Path(store) == default_data_dir(env).absolute()
    command, serve_args, hook = retained_command(None if implicit else store, portable=scope == "project", env=env)
    ctx: dict[str, Any] = {"home": home, "project": str(project), "store": str(store), "command": command,
                           "serve_args": serve_args, "serve_command": [command, *serve_args], "hook": hook,
                           "hook_argv_json": json.dumps(_argv(hook)), "store_implicit": implicit,
                           "portable_notes": []}
    if scope == "project":
        if Path(command).is_absolute():
            ctx["portable_notes"].append(f"the command is this machine's {command} (`retained` is not on PATH)")
        if not implicit:
            ctx["portable_notes"].append(f"the store is this machine's {store}: keep the file out of version "
                                         "control, or install without --dir / RETAINED_DIR")
    return ctx


class FilePlan:
    """One file and retained's edits to it (one host's, or several hosts' when they share the file)."""

    def __init__(self, hosts: list[Host], role: str, path: Path, fmt: str, edits: list[Edit],
                 defaults: dict[str, Any] | None, rewritten_by_host: bool = False) -> None:
        self.hosts = hosts
        self.rewritten_by_host = rewritten_by_host  # the host rewrites it while running (~/.claude.json)
        self.role = role
        self.path = path
        self.format = fmt
        self.edits = edits
        self.defaults = defaults
        self.notes: list[str] = []  # what the plan must say about this file (e.g. machine paths in a committed file)
        # which of the hosts reading this file each edit is for (several, when hosts share the file)
        self.wanted_by: dict[Edit, list[Host]] = {e: list(hosts) for e in edits}

    @property
    def host(self) -> Host:
        return self.hosts[0]

    def take(self, other: FilePlan, host: Host) -> None:
        """Another host's plan for this same file, merged in: an edit both make (same op, place and value)
        is kept once, for both; the other host's own edits are added."""
        if host not in self.hosts:
            self.hosts.append(host)
        known = {_same(e): e for e in self.edits}
        for e in other.edits:
            same = known.get(_same(e))
            if same is None:
                self.edits.append(e)
                self.wanted_by[e] = [host]
            elif host not in self.wanted_by[same]:
                self.wanted_by[same].append(host)

    @property
    def editor(self) -> Any:
        return formats.EDITORS[self.format]

    @property
    def server_edits(self) -> list[ServerEntry]:
        return [e for e in self.edits if e.is_server]  # type: ignore[misc]

    def describe(self, install: bool = True) -> list[str]:
        return [e.describe(install) for e in self.edits]

    def original(self) -> Any:
        """The document as it was before retained first changed it (from the backup), if known."""
        backup = safe_file.backup_path(Path(os.path.realpath(self.path)))
        try:
            return self.editor.load(self.path, backup.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, Exception):
            return None

    def change(self, install: bool) -> Any:
        original = None if install else self.original()

        def run(text: str) -> str:
            return self.editor.apply(self.path, text, self.edits, install=install, defaults=self.defaults,
                                     original=original)

        return run

    def verify(self, install: bool) -> Any:
        def check(old: str, new: str) -> None:
            before = self.editor.load(self.path, old) if old.strip() else {}
            after = self.editor.load(self.path, new)
            if formats.strip_ours(after, self.edits, self.defaults) != formats.strip_ours(before, self.edits, self.defaults):
                raise ValueError("something besides retained's entries changed")
            present = self.present(after)
            if install and not all(present.values()):
                raise ValueError("retained's entry is missing after the write")
            if not install and any(present.values()):
                raise ValueError("retained's entry is still there after removing it")

        return check

    def present(self, doc: Any) -> dict[str, bool]:
        """Which of retained's entries the parsed document holds, exactly as this plan would write them."""
        found: dict[str, bool] = {}
        for e in self.edits:
            found.update(e.present(doc))
        return found

    def apply(self, install: bool, dry_run: bool, defer_settle: bool = False) -> safe_file.Outcome:
        outcome = safe_file.edit(self.path, self.change(install), verify=self.verify(install),
                                 default_text=self.editor.default_text, dry_run=dry_run,
                                 settle=safe_file.SETTLE if self.rewritten_by_host else None,
                                 remove_if_empty=None if install else self._empty, defer_settle=defer_settle)
        if outcome.action == "removed":
            safe_file.remove_made_folders(outcome.target.parent)
        if not install and outcome.action == "updated":
            # Back to the very bytes from before retained: the backup has nothing left to keep.
            backup = safe_file.backup_path(outcome.target)
            try:
                if backup.read_bytes() == outcome.target.read_bytes():
                    backup.unlink()
                    outcome.backup = None
            except OSError:
                pass
        return outcome

    def _empty(self, text: str) -> bool:
        try:
            doc = self.editor.load(self.path, text)
        except Exception:
            return False
        return formats.strip_ours(doc, self.edits, self.defaults) in (None, {}, [])


def _same(e: Edit) -> str:
    """What makes two hosts' edits one edit of a shared file: the same op, place and value."""
    return repr((e.op, e.at, e.spec.get("value"), e.spec.get("values")))


def plans_from_template(host: Host, ctx: dict[str, Any], *, scope: str, flags: dict[str, bool],
                        install: bool) -> list[FilePlan]:
    """The host's files for this scope and the edits retained makes there (on install, those the flags allow)."""
    plans: list[FilePlan] = []
    for f in host.template["files"]:
        edits: list[Edit] = []
        for spec in f["edits"]:
            if spec.get("scope") not in (None, scope):
                continue
            if install and (spec.get("retired") or not flags.get(spec.get("when", ""), True)):
                continue  # a retired entry (one an earlier release wrote) is only ever taken out
            spec = fill(dict(spec), ctx)
            if spec["op"] == "member" and flags.get("approve", True) and install and spec.get("approve_fields"):
                spec["value"] = {**spec["value"], **spec["approve_fields"]}
            if spec["op"] == "member" and ctx.get("store_implicit"):
                spec["value"] = _without_store(spec["value"])
            edits.append(edit_kinds.make(spec))
        if edits:
            shared = (ctx.get("shared_paths") or {}).get(f["role"])  # another host's file (Host.shares)
            path = shared if shared is not None else Path(fill(f["path"][scope], ctx))
            plan = FilePlan([host], f["role"], path, f["format"], edits, f.get("defaults"),
                            f.get("rewritten_by_host", False))
            if scope == "project" and str(path).startswith(str(ctx["project"])):
                plan.notes = list(ctx.get("portable_notes") or [])
            plans.append(plan)
    return plans


def _without_store(value: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in (value["env"] if isinstance(value.get("env"), dict) else {}).items() if k != "RETAINED_DIR"}
    out = {k: v for k, v in value.items() if k != "env"}
    return {**out, "env": env} if env else out
