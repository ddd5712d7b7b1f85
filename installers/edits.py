"""The typed edits retained makes to a host's config file; each owns apply, present, strip and describe.

A host's template lists its edits by kind (`"op"`); `make` turns each into one of the classes below.
An edit changes only retained's own entries: a server entry (a member), items of a list (tool
approvals), hook entries (a matcher group or a flat entry), and hook trust entries. It can
say whether the parsed document holds it as this install would write it (`present`), and what the
document looks like without it (`strip`), so a read-back proves that nothing else changed.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from importlib import resources
from typing import TYPE_CHECKING

import tomlkit
from tomlkit.container import Container
from tomlkit.items import Comment, Table

from . import jsonc
from .safe_file import ConfigError

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, ClassVar

_OUR_HOOK = re.compile(r"\bretained\b[\"']?(?:\s+--dir\s+(?:'[^']*'|\"[^\"]*\"|\S+))?\s+hook\s+"
                       r"(?:session-start|stop|prompt|pre-compact)\b")


def is_our_command(command: Any) -> bool:
    """Whether a hook command is one of retained's (whatever interpreter or store it names)."""
    return isinstance(command, str) and bool(_OUR_HOOK.search(command))


def get(doc: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


class Edit:
    """One entry retained owns at `at` (a path of keys) in a parsed config document."""

    op: ClassVar[str] = ""
    is_hook: ClassVar[bool] = False
    is_server: ClassVar[bool] = False
    check: ClassVar[str] = ""  # doctor's name for "this entry is there as install writes it" ("": not checked)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.at: list[str] = list(spec["at"])
        self.when: str = spec.get("when", "")  # the install flag it needs: hooks, stop, approve, prompt, compact
        self.scope: str | None = spec.get("scope")

    @property
    def where(self) -> str:
        return ".".join(self.at)

    def describe(self, install: bool) -> str:
        raise NotImplementedError

    def present(self, doc: Any) -> dict[str, bool]:
        """{what: held exactly as this edit writes it} for the parsed document."""
        raise NotImplementedError

    def strip(self, doc: Any) -> None:
        """Remove retained's entry from the parsed document (in place)."""
        raise NotImplementedError

    def apply_json(self, path: Path, text: str, install: bool, kw: dict[str, Any], original: Any) -> str:
        raise ConfigError(f"{path}: {self.op} edits are not supported in JSON")

    def apply_toml(self, path: Path, doc: Any, install: bool, original: Any) -> None:
        raise ConfigError(f"{path}: {self.op} edits are not supported in TOML")

    def holder(self, doc: Any) -> Any:
        return get(doc, self.at[:-1]) if len(self.at) > 1 else doc


class ServerEntry(Edit):
    """`mcpServers.retained` and its kin: a whole member that is retained's."""

    op = "member"
    is_server = True

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.value: dict[str, Any] = spec["value"]

    def with_fields(self, extra: dict[str, Any]) -> ServerEntry:
        return ServerEntry({**self.spec, "value": {**self.value, **extra}})

    def describe(self, install: bool) -> str:
        return f"{'add' if install else 'remove'} the retained server entry at {self.where}"

    def present(self, doc: Any) -> dict[str, bool]:
        return {self.where: get(doc, self.at) == self.value}

    def found(self, doc: Any) -> Any:
        """The entry the document holds now at this place (whatever its contents), or None."""
        return get(doc, self.at)

    def strip(self, doc: Any) -> None:
        parent = self.holder(doc)
        if isinstance(parent, dict):
            parent.pop(self.at[-1], None)

    def apply_json(self, path: Path, text: str, install: bool, kw: dict[str, Any], original: Any) -> str:
        if install:
            return jsonc.set_value(text, self.at, self.value, **kw)
        return jsonc.remove_key(text, self.at, prune=prune_depth(original, self.at), **kw)

    def apply_toml(self, path: Path, doc: Any, install: bool, original: Any) -> None:
        parent = doc
        for depth, key in enumerate(self.at[:-1], 1):
            if key not in parent:
                if not install:
                    return
                parent[key] = tomlkit.table(is_super_table=True)
            parent = toml_table_at(path, parent[key], self.at[:depth])
        if install:
            if self.at[-1] not in parent or parent[self.at[-1]].unwrap() != self.value:
                table = toml_table(self.value)
                table.add(tomlkit.nl())  # a blank line before whatever table follows ours
                add_toml_table(parent, self.at[-1], table)
        elif self.at[-1] in parent:
            delete_toml_table(doc, self.at)
            prune_toml(doc, self.at[:-1], original)


class _ListEdit(Edit):
    """Entries retained owns inside a list that holds other programs' entries too."""

    def ours(self, item: Any) -> bool:
        raise NotImplementedError

    def strip(self, doc: Any) -> None:
        parent = self.holder(doc)
        if isinstance(parent, dict) and isinstance(parent.get(self.at[-1]), list):
            parent[self.at[-1]] = [x for x in parent[self.at[-1]] if not self.ours(x)]

    def apply_json(self, path: Path, text: str, install: bool, kw: dict[str, Any], original: Any) -> str:
        current = get(jsonc.loads(text, comments=kw["comments"]), self.at)
        if current is not None and not isinstance(current, list):
            raise ConfigError(f"{path}: {self.where} is not a list; retained did not touch the file",
                              hint=f"make {self.where} a list or remove it")
        items = current or []
        text = self.change_items(text, items, [i for i, x in enumerate(items) if self.ours(x)], install, kw)
        if not install and get(jsonc.loads(text, comments=kw["comments"]), self.at) == [] and (
                original is None or get(original, self.at) is None):
            text = jsonc.remove_key(text, self.at, prune=prune_depth(original, self.at), **kw)
        return text

    def change_items(self, text: str, items: list[Any], mine: list[int], install: bool, kw: dict[str, Any]) -> str:
        raise NotImplementedError


class ListItems(_ListEdit):
    """Strings retained adds to a list (tool approvals such as `permissions.allow`), by prefix."""

    op = "list-items"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.prefix: str = spec["prefix"]
        self.values: list[str] = list(spec["values"])

    def ours(self, item: Any) -> bool:
        return isinstance(item, str) and item.startswith(self.prefix)

    def change_items(self, text: str, items: list[Any], mine: list[int], install: bool, kw: dict[str, Any]) -> str:
        wanted = self.values if install else []
        for i in reversed(mine):
            if items[i] not in wanted:
                text = jsonc.remove_item(text, self.at, i, **kw)
        present = get(jsonc.loads(text, comments=kw["comments"]), self.at) or []
        for value in wanted:
            if value not in present:
                text = jsonc.append_item(text, self.at, value, **kw)
        return text

    def describe(self, install: bool) -> str:
        return (f"approve {len(self.values)} retained tools in " if install else
                "remove retained's tool approvals from ") + self.where

    def present(self, doc: Any) -> dict[str, bool]:
        got = get(doc, self.at)
        return {self.where: isinstance(got, list) and all(v in got for v in self.values)}


class _HookEdit(_ListEdit):
    is_hook = True
    check = "hook present"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.value: dict[str, Any] = spec["value"]

    @property
    def command(self) -> str:
        raise NotImplementedError

    @property
    def event(self) -> str:
        return self.at[-1]

    @property
    def hook_event(self) -> str:
        """retained's own name of what the hook runs: session-start, stop, prompt or pre-compact."""
        m = re.search(r"\bhook\s+([a-z-]+)", self.command)
        return m.group(1) if m else ""

    def change_items(self, text: str, items: list[Any], mine: list[int], install: bool, kw: dict[str, Any]) -> str:
        if not install:
            for i in reversed(mine):
                text = jsonc.remove_item(text, self.at, i, **kw)
        elif mine:  # keep our entry where it is (Codex's trust key names its position); drop repeats
            for i in reversed(mine[1:]):
                text = jsonc.remove_item(text, self.at, i, **kw)
            if items[mine[0]] != self.value:
                text = jsonc.replace_item(text, self.at, mine[0], self.value, **kw)
        else:
            text = jsonc.append_item(text, self.at, self.value, **kw)
        return text

    def describe(self, install: bool) -> str:
        return f"{'add' if install else 'remove'} hook `retained hook {self.hook_event}` " \
               f"{'to' if install else 'from'} {self.where}"

    def present(self, doc: Any) -> dict[str, bool]:
        got = get(doc, self.at)
        return {f"{self.where} ({self.command})": isinstance(got, list) and self.value in got}


class HookGroup(_HookEdit):
    """A matcher group holding one command hook (Claude Code, Codex, Gemini CLI)."""

    op = "hook-group"

    @property
    def command(self) -> str:
        return self.value["hooks"][0]["command"]

    def ours(self, item: Any) -> bool:
        hooks = item.get("hooks") if isinstance(item, dict) else None
        return isinstance(hooks, list) and any(isinstance(h, dict) and is_our_command(h.get("command")) for h in hooks)


class HookFlat(_HookEdit):
    """A flat hook entry (Cursor, VS Code's own hook files)."""

    op = "hook-flat"

    @property
    def command(self) -> str:
        return self.value["command"]

    def ours(self, item: Any) -> bool:
        return isinstance(item, dict) and is_our_command(item.get("command"))


class HookTrust(Edit):
    """Entries that trust retained's hooks by hash (Codex's `[hooks.state]`; the host module computes them)."""

    op = "hook-trust"
    check = "hook trusted"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.entries: dict[str, str] = dict(spec.get("entries") or {})  # key -> trusted hash, after install
        self.keys: list[str] = list(spec.get("keys") or [])  # every key of ours, now or after

    def describe(self, install: bool) -> str:
        if install and self.entries:
            return f"trust {len(self.entries)} retained hook(s) by hash in {self.where}"
        return f"remove retained's hook trust entries from {self.where}"

    def present(self, doc: Any) -> dict[str, bool]:
        got = get(doc, self.at)
        if not isinstance(got, dict):
            return {self.where: False}
        if not self.entries:  # nothing to trust (uninstall): "present" means any of ours is still there
            return {self.where: any(k in got for k in self.keys)}
        ok = all(isinstance(got.get(k), dict) and got[k].get("trusted_hash") == h and got[k].get("enabled", True)
                 for k, h in self.entries.items())
        return {self.where: ok}

    def strip(self, doc: Any) -> None:
        state = get(doc, self.at)
        if isinstance(state, dict):
            for key in [k for k in state if k in self.keys]:
                del state[key]

    def apply_toml(self, path: Path, doc: Any, install: bool, original: Any) -> None:
        wanted = self.entries if install else {}
        remove = set(self.keys) - set(wanted)
        holder = doc
        for depth, key in enumerate(self.at, 1):  # every table on the way is a table, or nothing is touched
            if key not in holder:
                break
            holder = toml_table_at(path, holder[key], self.at[:depth])
        state = get(doc, self.at)
        for key in remove:
            if state is not None and key in state:
                if hasattr(state[key], "value"):
                    delete_toml_table(doc, [*self.at, key])
                else:
                    del state[key]
        if wanted:
            holder = doc
            for key in self.at:
                if key not in holder:
                    holder[key] = tomlkit.table(is_super_table=True)
                holder = holder[key]
            for key, digest in wanted.items():
                value = {"enabled": True, "trusted_hash": digest}
                if key not in holder or holder[key].unwrap() != value:
                    add_toml_table(holder, key, toml_table(value))
        if not install or remove:
            prune_toml(doc, self.at, original)


class FileContent(Edit):
    """A whole file that is retained's (a host plugin), from a template file with placeholders filled."""

    op = "file-content"
    check = "plugin present"
    MARK = "Written by `retained install`"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)

        text = resources.files("retained.templates").joinpath(spec["source"]).read_text("utf-8")
        for key, value in (spec.get("fill") or {}).items():
            text = text.replace(key, value)
        self.content = text

    def describe(self, install: bool) -> str:
        return "write retained's plugin (the whole file is retained's)" if install else "remove retained's plugin"

    def present(self, doc: Any) -> dict[str, bool]:
        return {"plugin": isinstance(doc, dict) and doc.get("content") == self.content}

    def strip(self, doc: Any) -> None:
        if isinstance(doc, dict) and self.MARK in str(doc.get("content", "")):
            doc.pop("content", None)

    def apply_text(self, path: Path, text: str, install: bool) -> str:
        ours = self.MARK in text
        if text.strip() and not ours:
            raise ConfigError(f"{path} exists and is not retained's; retained did not touch it",
                              hint="move it aside, or name the host to leave out")
        if install:
            return self.content
        return "" if ours else text


KINDS: dict[str, type[Edit]] = {cls.op: cls for cls in (ServerEntry, ListItems, HookGroup, HookFlat, HookTrust,
                                                        FileContent)}


def make(spec: dict[str, Any]) -> Edit:
    return KINDS[spec["op"]](spec)


# -- helpers shared by the edits ---------------------------------------------------------------------
def prune_depth(original: Any, path: list[str]) -> int:
    """How many containers above `path` were absent before retained first wrote (so may go again)."""
    if original is None:
        return len(path) - 1
    n = 0
    for depth in range(len(path) - 1, 0, -1):
        if get(original, path[:depth]) is not None:
            break
        n += 1
    return n


# -- TOML tables and the comments that introduce them ---------------------------------------------------
# tomlkit keeps the comment lines right above a table header as the tail of the table before it. A
# table added after that one would come between the comment and the table it introduces; removed,
# it would take such a comment with it. These move those comment lines to stay where they belong.
def _last_leaf(table: Any) -> Any:
    """The table whose text ends where `table`'s does (its last sub-table, if it ends with one)."""
    while table.value.body and isinstance(table.value.body[-1][1], Table) and table.value.body[-1][0] is not None:
        table = table.value.body[-1][1]
    return table


def _take_trailing_comments(table: Any) -> list[Any]:
    """Detach the comment lines that end `table`'s text right before the next header (no blank line between)."""
    leaf = _last_leaf(table)
    body = leaf.value.body
    k = len(body)
    while k and body[k - 1][0] is None and isinstance(body[k - 1][1], Comment):
        k -= 1
    taken = [item for _key, item in body[k:]]
    del body[k:]  # key-less items at the end: the container's key map does not index them
    return taken


def _give_comments(table: Any, comments: list[Any]) -> None:
    leaf = _last_leaf(table)
    for c in comments:
        leaf.value.append(None, c)


def _body(holder: Any) -> list[tuple[Any, Any]]:
    """The (key, item) list of a table or of the document itself."""
    return holder.body if isinstance(holder, Container) else holder.value.body


def _table_before(holder: Any, key: str) -> Any:
    """The table that comes right before `holder[key]` among its siblings, or None."""
    before = None
    for k, item in _body(holder):
        if k is not None and k.key == key:
            return before
        if k is not None and isinstance(item, Table):
            before = item
    return None


def add_toml_table(parent: Any, key: str, table: Any) -> None:
    """`parent[key] = table`, after the last table of `parent`, keeping a comment above the table that
    follows with that table (it moves to the end of ours)."""
    if key in parent:  # in place: what ended the old table ends the new one
        comments = _take_trailing_comments(parent[key]) if isinstance(parent[key], Table) else []
    else:
        last = next((item for k, item in reversed(_body(parent)) if k is not None and isinstance(item, Table)), None)
        comments = _take_trailing_comments(last) if last is not None else []
    parent[key] = table
    _give_comments(parent[key], comments)


def delete_toml_table(doc: Any, at: list[str]) -> None:
    """Delete the table at `at`; comment lines at its end (they introduce what follows) go to the table
    before it, so the text reads as it did before the table was added."""
    holders = [doc]
    for key in at[:-1]:
        holders.append(holders[-1][key])
    comments = _take_trailing_comments(holders[-1][at[-1]])
    before = None
    for depth in range(len(at) - 1, -1, -1):  # the nearest table before ours, at any level
        before = _table_before(holders[depth], at[depth])
        if before is not None:
            break
    del holders[-1][at[-1]]
    if before is not None:
        _give_comments(before, comments)


def toml_table_at(path: Path, value: Any, at: list[str]) -> Any:
    """`value` when it is a TOML table; else the one-line refusal (`mcp_servers = 5` is no table to add to)."""
    if isinstance(value, MutableMapping):
        return value
    raise ConfigError(f"{path}: {'.'.join(at)} is {_toml_kind(value)}, not a table; retained did not touch it",
                      hint=f"make {'.'.join(at)} a table ([{'.'.join(at)}.NAME] sections) or remove it, and run again")


def _toml_kind(value: Any) -> str:
    unwrapped = value.unwrap() if hasattr(value, "unwrap") else value
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array"}
    return next((k for t, k in kinds.items() if isinstance(unwrapped, t)), f"a {type(unwrapped).__name__}")


def toml_table(value: dict[str, Any]) -> Any:
    table = tomlkit.table()
    for k, v in value.items():
        table[k] = toml_table(v) if isinstance(v, dict) else v
    return table


def prune_toml(doc: Any, path: list[str], original: Any = None) -> None:
    for depth in range(len(path), 0, -1):
        if original is not None and get(original, path[:depth]) is not None:
            return  # it was there before retained: keep it, even empty
        holder = doc
        for key in path[: depth - 1]:
            holder = holder.get(key) if holder is not None else None
        key = path[depth - 1]
        if holder is not None and key in holder and len(holder[key]) == 0:
            del holder[key]
        else:
            return
