"""A host described by data (templates/<name>.json) plus, at most, a small adapter.

The template says which files hold retained's entries, their format, and the entries themselves with
placeholders ({command}, {hook}, {store}, paths); this module fills them in, plans the edits, applies
them with safe_file.edit, and reads them back for doctor.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from . import formats, safe_file

if TYPE_CHECKING:
    from typing import Any


def load_template(name: str) -> dict[str, Any]:
    return json.loads(resources.files("retained.templates").joinpath(f"{name}.json").read_text("utf-8"))


def _fill(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if value.startswith("{") and value.endswith("}") and value[1:-1] in ctx and not isinstance(ctx[value[1:-1]], str):
            return ctx[value[1:-1]]
        out = value
        for key, sub in ctx.items():
            if isinstance(sub, str):
                out = out.replace("{" + key + "}", sub)
        return out
    if isinstance(value, list):
        return [_fill(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ctx) for k, v in value.items()}
    return value


def retained_command() -> tuple[str, list[str], str]:
    """(command, args for serve, hook command prefix): absolute paths, so hosts need nothing on PATH."""
    script = Path(sys.executable).with_name("retained.exe" if os.name == "nt" else "retained")
    if script.exists() and os.access(script, os.X_OK):
        exe = str(script.absolute())
        return exe, ["serve"], f"{_quote(exe)} hook"
    py = str(Path(sys.executable).absolute())
    return py, ["-m", "retained", "serve"], f"{_quote(py)} -m retained hook"


def _quote(path: str) -> str:
    if os.name == "nt":
        return f'"{path}"' if " " in path else path
    return shlex.quote(path)


def base_context(store: Path, project: Path) -> dict[str, Any]:
    home = Path.home()
    claude_dir = Path(os.environ["CLAUDE_CONFIG_DIR"]) if os.environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    legacy = claude_dir / ".config.json"
    claude_json = legacy if legacy.exists() else (
        Path(os.environ["CLAUDE_CONFIG_DIR"]) if os.environ.get("CLAUDE_CONFIG_DIR") else home) / ".claude.json"
    if sys.platform == "win32":
        vscode_user = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / "Code" / "User"
    elif sys.platform == "darwin":
        vscode_user = home / "Library" / "Application Support" / "Code" / "User"
    else:
        vscode_user = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Code" / "User"
    command, serve_args, hook = retained_command()
    return {
        "home": str(home),
        "claude_dir": str(claude_dir),
        "claude_json": str(claude_json),
        "codex_home": os.environ.get("CODEX_HOME") or str(home / ".codex"),
        "gemini_home": os.environ.get("GEMINI_CLI_HOME") or str(home),
        "vscode_user": str(vscode_user),
        "project": str(project),
        "store": str(store),
        "command": command,
        "serve_args": serve_args,
        "hook": hook,
    }


class FilePlan:
    """One file and retained's edits to it."""

    def __init__(self, host: Host, role: str, path: Path, fmt: str, edits: list[dict[str, Any]],
                 defaults: dict[str, Any] | None, rewritten_by_host: bool = False) -> None:
        self.host = host
        self.rewritten_by_host = rewritten_by_host  # the host rewrites it while running (~/.claude.json)
        self.role = role
        self.path = path
        self.format = fmt
        self.edits = edits
        self.defaults = defaults

    @property
    def editor(self) -> Any:
        return formats.EDITORS[self.format]

    def describe(self) -> list[str]:
        out = []
        for e in self.edits:
            if e["op"] == "member":
                out.append(f"{'.'.join(e['at'])} = retained server entry")
            elif e["op"] == "list-items":
                out.append(f"{'.'.join(e['at'])} += {', '.join(e['values'])}")
            elif e["op"] == "codex-trust":
                n = len(e.get("entries", {}))
                out.append(f"{'.'.join(e['at'])}: trust {n} retained hook(s) by hash" if n else
                           f"{'.'.join(e['at'])}: retained's hook trust entries")
            else:
                out.append(f"{'.'.join(e['at'])} += {e['value'].get('command') or e['value']['hooks'][0]['command']}")
        return out

    def original(self) -> Any:
        """The document as it was before retained first changed it (from the backup), if known."""
        backup = safe_file.backup_path(Path(os.path.realpath(self.path)))
        try:
            return self.editor.load(self.path, backup.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, Exception):  # noqa: BLE001 - no usable backup: prune freely
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
            name = ".".join(e["at"])
            got = formats._get(doc, e["at"])
            if e["op"] == "member":
                found[name] = got == e["value"]
            elif e["op"] == "list-items":
                found[name] = isinstance(got, list) and all(v in got for v in e["values"])
            elif e["op"] == "codex-trust":
                found[name] = isinstance(got, dict) and all(
                    isinstance(got.get(k), dict) and got[k].get("trusted_hash") == h and got[k].get("enabled", True)
                    for k, h in e.get("entries", {}).items())
            else:
                found[name + f" ({e['value'].get('command') or e['value']['hooks'][0]['command']})"] = (
                    isinstance(got, list) and e["value"] in got)
        return found

    def apply(self, install: bool, dry_run: bool) -> safe_file.Outcome:
        outcome = safe_file.edit(self.path, self.change(install), verify=self.verify(install),
                                 default_text=self.editor.default_text, dry_run=dry_run,
                                 settle=safe_file.SETTLE if self.rewritten_by_host else None,
                                 remove_if_empty=None if install else self._empty)
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
        except Exception:  # noqa: BLE001 - not parsable: certainly not "empty"
            return False
        return formats.strip_ours(doc, self.edits, self.defaults) in (None, {}, [])


class Host:
    """A host from its template; adapters override `context` or `plans` for what data cannot say."""

    template_name = ""

    def __init__(self) -> None:
        self.template = load_template(self.template_name)
        self.name: str = self.template["name"]
        self.title: str = self.template["title"]

    def context(self, store: Path, project: Path) -> dict[str, Any]:
        return base_context(store, project)

    def detected(self, ctx: dict[str, Any]) -> bool:
        det = self.template.get("detect", {})
        if any(shutil.which(c) for c in det.get("commands", [])):
            return True
        return any(Path(_fill(p, ctx)).exists() for p in det.get("paths", []))

    def plans(self, ctx: dict[str, Any], *, scope: str, hooks: bool, approve: bool, stop: bool,
              install: bool = True) -> list[FilePlan]:
        plans: list[FilePlan] = []
        flags = {"hooks": hooks, "approve": approve, "stop": hooks and stop}
        for f in self.template["files"]:
            edits = []
            for e in f["edits"]:
                if e.get("scope") not in (None, scope):
                    continue
                if install and not flags.get(e.get("when", ""), True):
                    continue
                e = _fill(dict(e), ctx)
                if e["op"] == "member" and approve and e.get("approve_fields"):
                    e["value"] = {**e["value"], **e["approve_fields"]}
                edits.append(e)
            if edits:
                path = Path(_fill(f["path"][scope], ctx))
                plans.append(FilePlan(self, f["role"], path, f["format"], edits, f.get("defaults"),
                                      f.get("rewritten_by_host", False)))
        return self.finish(plans, ctx, install=install)

    def finish(self, plans: list[FilePlan], ctx: dict[str, Any], *, install: bool) -> list[FilePlan]:
        return plans

    def server_installed(self, ctx: dict[str, Any], scope: str = "user") -> bool:
        """Whether this host's config still holds retained's server entry."""
        for plan in self.plans(ctx, scope=scope, hooks=False, approve=False, stop=False):
            if plan.role != "server":
                continue
            try:
                doc = plan.editor.load(plan.path, plan.path.read_text("utf-8"))
            except Exception:  # noqa: BLE001 - unreadable or absent: not installed as far as we can tell
                continue
            if any(formats._get(doc, e["at"]) for e in plan.edits if e["op"] == "member"):
                return True
        return False


def keep_shared_hooks(plans: list[FilePlan], shared_path: str, other: Host, ctx: dict[str, Any],
                      install: bool) -> list[FilePlan]:
    """On uninstall, leave the hooks in a file another installed host also reads (~/.claude/settings.json
    serves Claude Code and VS Code); only retained's other entries there are removed."""
    if install or other.name in ctx.get("uninstalling", ()) or not other.server_installed(ctx):
        return plans
    kept = []
    for plan in plans:
        if str(plan.path) == shared_path:
            plan.edits = [e for e in plan.edits if not e["op"].startswith("hook")]
            if not plan.edits:
                continue
        kept.append(plan)
    return kept
