"""Change another program's config file without ever harming it.

Parse or refuse; change only our entries; keep the mode; refuse a read-only file (even as root, where
a rename would silently replace it); follow symlinks and write the target; one backup of the original
bytes; temp file in the same directory, fsync, re-check that nobody changed the file meanwhile, atomic
replace, fsync the directory; read back and check, else restore and report.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from retained.errors import RetainedError
from retained.fsutil import fsync_dir

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

BACKUP_SUFFIX = ".retained-backup"
RETRIES = 8


class ConfigError(RetainedError):
    """A config file that cannot be changed safely; it was left exactly as it was."""


class Outcome:
    __slots__ = ("path", "target", "action", "diff", "backup")

    def __init__(self, path: Path, target: Path, action: str, diff: str = "", backup: Path | None = None) -> None:
        self.path = path
        self.target = target
        self.action = action  # created, updated, unchanged, would create, would update
        self.diff = diff
        self.backup = backup


def _read(target: Path) -> tuple[bytes | None, os.stat_result | None]:
    try:
        with open(target, "rb") as f:
            data = f.read()
            return data, os.fstat(f.fileno())
    except FileNotFoundError:
        return None, None


def _decode(path: Path, data: bytes) -> tuple[str, bool]:
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        return data[3:].decode("utf-8") if bom else data.decode("utf-8"), bom
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start})", hint="fix its encoding; nothing was changed") from None


def _encode(text: str, bom: bool) -> bytes:
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


def _atomic_write(target: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".retained-tmp")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        else:  # pragma: no cover - Windows before Python 3.13
            os.chmod(tmp, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def edit(
    path: Path,
    change: Callable[[str], str],
    *,
    verify: Callable[[str, str], None],
    default_text: str = "",
    dry_run: bool = False,
    new_mode: int = 0o600,
) -> Outcome:
    """Apply `change` (text -> text) to the file at `path` safely.

    `change` raises ConfigError when the text does not parse (naming file and line). `verify(old, new)`
    raises when the new text lacks our entry or changed anything else; it runs on what was read back
    from disk, and a failure restores the original bytes.
    """
    target = Path(os.path.realpath(path))
    for attempt in range(RETRIES):
        original, st = _read(target)
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"{path} is not a regular file", hint="nothing was changed")
            if st.st_mode & 0o222 == 0 or not os.access(target, os.W_OK):
                raise ConfigError(
                    f"{path} is read-only; retained will not replace it",
                    hint=f"make it writable (chmod u+w {target}) and run again, or pass --dry-run to see the change",
                )
        elif not target.parent.exists() and not dry_run:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        text, bom = _decode(path, original) if original is not None else (default_text, False)
        new_text = change(text)
        if new_text == text and original is not None:
            return Outcome(path, target, "unchanged")
        if dry_run:
            old_lines = text.splitlines(keepends=True) if original is not None else []
            diff = "".join(difflib.unified_diff(old_lines, new_text.splitlines(keepends=True),
                                                f"{path} (now)", f"{path} (after retained)"))
            return Outcome(path, target, "would update" if original is not None else "would create", diff)
        if target.parent.exists() and not os.access(target.parent, os.W_OK):
            raise ConfigError(f"cannot write in {target.parent}", hint="fix the directory's permissions")
        new_bytes = _encode(new_text, bom)
        backup = None
        if original is not None:
            backup = target.with_name(target.name + BACKUP_SUFFIX)
            if not backup.exists():  # one backup: the bytes from before retained ever touched the file
                fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                             stat.S_IMODE(st.st_mode) & 0o666 or 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(original)
                    f.flush()
                    os.fsync(f.fileno())
                fsync_dir(target.parent)
        # Just before replacing: has anyone (Claude Code rewrites ~/.claude.json all the time) changed it?
        now, _ = _read(target)
        if now != original:
            time.sleep(0.01 * (attempt + 1))
            continue
        mode = stat.S_IMODE(st.st_mode) if st is not None else new_mode
        _atomic_write(target, new_bytes, mode)
        back, _ = _read(target)
        if back != new_bytes:
            # Someone replaced the file right after us: start over from their version, keep both changes.
            time.sleep(0.01 * (attempt + 1))
            continue
        try:
            verify(text, new_text)
        except Exception as e:
            if original is not None:
                _atomic_write(target, original, mode)
            else:
                target.unlink(missing_ok=True)
            raise ConfigError(f"{path}: the change did not check out ({e}); the original was restored",
                              hint="report this; nothing else was changed") from None
        return Outcome(path, target, "updated" if original is not None else "created", backup=backup)
    raise ConfigError(f"{path} kept changing while retained tried to edit it",
                      hint="close the program that is rewriting it (e.g. Claude Code) and run again")


def describe_parse_error(path: Path, err: Any) -> ConfigError:
    line = getattr(err, "line", None) or getattr(err, "lineno", None)
    col = getattr(err, "column", None) or getattr(err, "colno", None) or getattr(err, "col", None)
    where = f" at line {line}" + (f", column {col}" if col else "") if line else ""
    reason = getattr(err, "reason", None) or getattr(err, "msg", None) or str(err)
    return ConfigError(f"{path} does not parse{where}: {reason}; retained did not touch it",
                       hint=f"fix {path}{' line ' + str(line) if line else ''} and run again")
