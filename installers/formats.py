"""Format editors: apply retained's edits to JSON, JSONC, TOML (tomlkit) and YAML (pyyaml) text.

Each editor changes only retained's own entries and can say, for verification, what a document looks
like without them (`strip`), so a read-back can prove that nothing else changed.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING

from . import jsonc
from .safe_file import ConfigError, describe_parse_error

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

_OUR_HOOK = re.compile(r"\bretained\b[\"']?\s+hook\s+(?:session-start|stop)\b")


def is_our_command(command: Any) -> bool:
    return isinstance(command, str) and bool(_OUR_HOOK.search(command))


def _is_our_group(item: Any) -> bool:
    return isinstance(item, dict) and any(
        isinstance(h, dict) and is_our_command(h.get("command")) for h in item.get("hooks") or [] if isinstance(item.get("hooks"), list)
    )


def _is_our_flat(item: Any) -> bool:
    return isinstance(item, dict) and is_our_command(item.get("command"))


def _ours(edit: dict[str, Any]) -> Any:
    op = edit["op"]
    if op == "hook-group":
        return _is_our_group
    if op == "hook-flat":
        return _is_our_flat
    if op == "list-items":
        prefix = edit["prefix"]
        return lambda item: isinstance(item, str) and item.startswith(prefix)
    raise ValueError(op)


def _get(doc: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def strip_ours(doc: Any, edits: list[dict[str, Any]], defaults: dict[str, Any] | None = None) -> Any:
    """The document without retained's entries (and without containers that only held them)."""
    doc = copy.deepcopy(doc)
    if not isinstance(doc, dict):
        return doc
    for edit in edits:
        at = edit["at"]
        parent = _get(doc, at[:-1]) if len(at) > 1 else doc
        if not isinstance(parent, dict):
            continue
        if at[-1] not in parent:
            pass
        elif edit["op"] in ("member", "codex-trust"):
            if edit["op"] == "member":
                del parent[at[-1]]
            else:
                state = parent[at[-1]]
                for key in [k for k in state if k in (edit.get("keys") or ())]:
                    del state[key]
        else:
            items = parent[at[-1]]
            if isinstance(items, list):
                parent[at[-1]] = [x for x in items if not _ours(edit)(x)]
        # prune containers left empty along the path
        for depth in range(len(at), 0, -1):
            holder = _get(doc, at[: depth - 1]) if depth > 1 else doc
            key = at[depth - 1]
            if not isinstance(holder, dict) or key not in holder:
                continue  # already gone (the member itself, just deleted)
            if holder[key] in ({}, []):
                del holder[key]
            else:
                break
    for key, value in (defaults or {}).items():
        if doc.get(key) == value:
            del doc[key]
    return doc


def prune_depth(original: Any, path: list[str]) -> int:
    """How many containers above `path` were absent before retained first wrote (so may go again)."""
    if original is None:
        return len(path) - 1
    n = 0
    for depth in range(len(path) - 1, 0, -1):
        if _get(original, path[:depth]) is not None:
            break
        n += 1
    return n


class JSONEditor:
    def __init__(self, *, comments: bool, trailing_commas: bool) -> None:
        self.comments = comments
        self.trailing = trailing_commas
        self.default_text = "{}\n"

    def load(self, path: Path, text: str) -> Any:
        if not text.strip():
            return {}
        try:
            doc = jsonc.loads(text, comments=self.comments, trailing_commas=self.trailing)
        except jsonc.JSONCError as e:
            raise describe_parse_error(path, e) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path} holds a JSON {type(doc).__name__}, not an object; retained did not touch it",
                              hint="it should start with {")
        return doc

    def apply(self, path: Path, text: str, edits: list[dict[str, Any]], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        self.load(path, text)
        if not text.strip():
            text = "{}\n"
        kw = {"comments": self.comments}
        if install:
            for key, value in (defaults or {}).items():
                doc = jsonc.loads(text, comments=self.comments)
                if key not in doc:
                    text = jsonc.set_value(text, [key], value, **kw)
        for edit in edits:
            at = edit["at"]
            if edit["op"] == "member":
                if install:
                    text = jsonc.set_value(text, at, edit["value"], **kw)
                else:
                    text = jsonc.remove_key(text, at, prune=prune_depth(original, at), **kw)
                continue
            ours = _ours(edit)
            current = _get(jsonc.loads(text, comments=self.comments), at)
            if current is not None and not isinstance(current, list):
                raise ConfigError(f"{path}: {'.'.join(at)} is not a list; retained did not touch the file",
                                  hint=f"make {'.'.join(at)} a list or remove it")
            items = current or []
            mine = [i for i, x in enumerate(items) if ours(x)]
            if edit["op"] == "list-items":
                wanted = edit["values"] if install else []
                for i in reversed(mine):
                    if items[i] not in wanted:
                        text = jsonc.remove_item(text, at, i, **kw)
                present = _get(jsonc.loads(text, comments=self.comments), at) or []
                for value in wanted:
                    if value not in present:
                        text = jsonc.append_item(text, at, value, **kw)
            elif install:
                value = edit["value"]
                if mine:
                    for i in reversed(mine[1:]):
                        text = jsonc.remove_item(text, at, i, **kw)
                    if items[mine[0]] != value:
                        text = jsonc.replace_item(text, at, mine[0], value, **kw)
                else:
                    text = jsonc.append_item(text, at, value, **kw)
            else:
                for i in reversed(mine):
                    text = jsonc.remove_item(text, at, i, **kw)
            if not install and _get(jsonc.loads(text, comments=self.comments), at) == [] and (
                    original is None or _get(original, at) is None):
                text = jsonc.remove_key(text, at, prune=prune_depth(original, at), **kw)
        return text


class TOMLEditor:
    default_text = ""

    def load(self, path: Path, text: str) -> Any:
        import tomlkit

        try:
            return tomlkit.parse(text).unwrap()
        except Exception as e:  # tomlkit raises several ParseError subclasses
            raise describe_parse_error(path, e) from None

    def apply(self, path: Path, text: str, edits: list[dict[str, Any]], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        import tomlkit

        try:
            doc = tomlkit.parse(text)
        except Exception as e:
            raise describe_parse_error(path, e) from None
        for edit in edits:
            at = edit["at"]
            if edit["op"] == "member":
                parent = doc
                for key in at[:-1]:
                    if key not in parent:
                        if not install:
                            break
                        parent[key] = tomlkit.table(is_super_table=True)
                    parent = parent[key]
                else:
                    if install:
                        if at[-1] not in parent or parent[at[-1]].unwrap() != edit["value"]:
                            table = _toml_table(edit["value"])
                            table.add(tomlkit.nl())  # a blank line before whatever table follows ours
                            parent[at[-1]] = table
                    elif at[-1] in parent:
                        del parent[at[-1]]
                        _prune_toml(doc, at[:-1], original)
            elif edit["op"] == "codex-trust":
                wanted: dict[str, str] = edit.get("entries", {}) if install else {}
                remove = set(edit.get("keys") or ()) - set(wanted)
                hooks = doc.get("hooks")
                state = hooks.get("state") if hooks is not None else None
                for key in remove:
                    if state is not None and key in state:
                        del state[key]
                if wanted:
                    if "hooks" not in doc:
                        doc["hooks"] = tomlkit.table(is_super_table=True)
                    if "state" not in doc["hooks"]:
                        doc["hooks"]["state"] = tomlkit.table(is_super_table=True)
                    state = doc["hooks"]["state"]
                    for key, digest in wanted.items():
                        value = {"enabled": True, "trusted_hash": digest}
                        if key not in state or state[key].unwrap() != value:
                            state[key] = _toml_table(value)
                if not install or remove:
                    _prune_toml(doc, ["hooks", "state"], original)
        out = tomlkit.dumps(doc)
        if not install and out.endswith("\n\n") and not text.endswith("\n\n"):
            out = out.rstrip("\n") + "\n"  # the blank line that stood before our table goes with it
        return out


def _toml_table(value: dict[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.table()
    for k, v in value.items():
        if isinstance(v, dict):
            table[k] = _toml_table(v)
        else:
            table[k] = v
    return table


def _prune_toml(doc: Any, path: list[str], original: Any = None) -> None:
    for depth in range(len(path), 0, -1):
        if original is not None and _get(original, path[:depth]) is not None:
            return  # it was there before retained: keep it, even empty
        holder = doc
        for key in path[: depth - 1]:
            holder = holder.get(key) if holder is not None else None
        key = path[depth - 1]
        if holder is not None and key in holder and len(holder[key]) == 0:
            del holder[key]
        else:
            return


class YAMLEditor:
    """YAML via pyyaml, which cannot keep comments: a file with comments is refused, never rewritten."""

    default_text = ""

    def load(self, path: Path, text: str) -> Any:
        import yaml

        try:
            doc = yaml.safe_load(text) if text.strip() else {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            err = ConfigError(f"{path} does not parse" + (f" at line {mark.line + 1}" if mark else "") +
                              "; retained did not touch it", hint="fix the YAML and run again")
            raise err from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path} is not a YAML mapping; retained did not touch it")
        return doc

    def apply(self, path: Path, text: str, edits: list[dict[str, Any]], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        import yaml

        doc = self.load(path, text)
        if re.search(r"(^|\s)#", text):
            raise ConfigError(f"{path} has comments, which retained cannot keep in YAML; it did not touch the file",
                              hint="add the entry shown by --dry-run by hand")
        for edit in edits:
            if edit["op"] != "member":
                raise ConfigError(f"{path}: {edit['op']} edits are not supported in YAML")
            at = edit["at"]
            parent = doc
            for key in at[:-1]:
                parent = parent.setdefault(key, {}) if install else parent.get(key, {})
            if install:
                parent[at[-1]] = edit["value"]
            else:
                parent.pop(at[-1], None)
        new = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)
        return text if yaml.safe_load(new) == self.load(path, text) and new.strip() == text.strip() else new


EDITORS: dict[str, Any] = {
    "json": JSONEditor(comments=False, trailing_commas=False),
    "jsonc": JSONEditor(comments=True, trailing_commas=True),
    "jsonc-strict-commas": JSONEditor(comments=True, trailing_commas=False),
    "toml": TOMLEditor(),
    "yaml": YAMLEditor(),
}
