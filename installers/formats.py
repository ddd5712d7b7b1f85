"""Format editors: apply retained's edits to JSON, JSONC and TOML (tomlkit) text.

No host retained wires keeps its config in YAML, so there is no YAML editor (and no pyyaml).

Each editor changes only retained's own entries and can say, for verification, what a document looks
like without them (`strip`), so a read-back can prove that nothing else changed.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING

import tomlkit

from . import jsonc
from .edits import get
from .safe_file import ConfigError, backup_path, describe_parse_error

if TYPE_CHECKING:
    from typing import Any

    from .edits import Edit


def strip_ours(doc: Any, edits: list[Edit], defaults: dict[str, Any] | None = None) -> Any:
    """The document without retained's entries (and without containers that only held them)."""
    doc = copy.deepcopy(doc)
    if not isinstance(doc, dict):
        return doc
    for edit in edits:
        at = edit.at
        edit.strip(doc)
        for depth in range(len(at), 0, -1):  # prune containers left empty along the path
            holder = get(doc, at[: depth - 1]) if depth > 1 else doc
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

    def apply(self, path: Path, text: str, edits: list[Edit], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        self.load(path, text)
        if not text.strip():
            text = "{}\n"
        kw = {"comments": self.comments}
        try:
            if install:
                for key, value in (defaults or {}).items():
                    doc = jsonc.loads(text, comments=self.comments)
                    if key not in doc:
                        text = jsonc.set_value(text, [key], value, **kw)
            for edit in edits:
                text = edit.apply_json(path, text, install, kw, original)
        except jsonc.JSONCError as e:  # a member of the wrong type where retained's entry goes
            raise ConfigError(f"{path}: {e.reason}; retained did not touch it",
                              hint=f"fix {path} (or remove that member) and run again") from None
        return text


class TOMLEditor:
    default_text = ""

    def load(self, path: Path, text: str) -> Any:
        try:
            return tomlkit.parse(text).unwrap()
        except Exception as e:  # tomlkit raises several ParseError subclasses
            raise describe_parse_error(path, e) from None

    def apply(self, path: Path, text: str, edits: list[Edit], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        try:
            doc = tomlkit.parse(text)
        except Exception as e:
            raise describe_parse_error(path, e) from None
        for edit in edits:
            edit.apply_toml(path, doc, install, original)
        out = tomlkit.dumps(doc)
        if out.endswith("\n\n") and not text.endswith("\n\n"):
            # The blank line our table keeps before whatever follows it: none when nothing follows
            # (install), and it goes with our table (uninstall).
            out = out.rstrip("\n") + "\n"
        if not install:
            out = _as_before(path, out)
        return out


def _as_before(path: Path, out: str) -> str:
    """Uninstall's result, or the file's bytes from before retained first changed it when the two
    differ in blank lines alone. tomlkit puts a blank line before a table it adds after one that ends
    without one, and on the next parse that line belongs to the table before; nothing in the file
    says any more whether it was there first. The backup does (issue 17 item 17)."""
    try:
        before = backup_path(Path(os.path.realpath(path))).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    def lines(t: str) -> list[str]:
        return [line for line in t.splitlines() if line.strip()]

    return before if before != out and lines(before) == lines(out) else out


class OwnedTextEditor:
    """A file that is wholly retained's (a plugin): its document is {"content": text}."""

    default_text = ""

    def load(self, path: Path, text: str) -> Any:
        return {"content": text} if text else {}

    def apply(self, path: Path, text: str, edits: list[Edit], *, install: bool,
              defaults: dict[str, Any] | None = None, original: Any = None) -> str:
        for edit in edits:
            text = edit.apply_text(path, text, install)  # type: ignore[attr-defined]
        return text


EDITORS: dict[str, Any] = {
    "owned-text": OwnedTextEditor(),
    "json": JSONEditor(comments=False, trailing_commas=False),
    "jsonc": JSONEditor(comments=True, trailing_commas=True),
    "jsonc-strict-commas": JSONEditor(comments=True, trailing_commas=False),
    "toml": TOMLEditor(),
}
