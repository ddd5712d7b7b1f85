"""Change another program's config file without ever harming it.

Parse or refuse; change only our entries; keep the mode; refuse a read-only file (even as root, where
a rename would silently replace it); follow symlinks and write the target; one backup of the original
bytes; temp file in the same directory, fsync, re-check that nobody changed the file meanwhile, atomic
replace (a swap on Linux, which hands back what it replaced), fsync the directory; read back and check,
else restore and report; look again a moment later and start over if another program's write undid
ours.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from retained.errors import RetainedError
from retained.durable import fsync_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

BACKUP_SUFFIX = ".retained-backup"
MADE_MARK = ".retained-made-this-folder"  # in the outermost folder install created, so uninstall may remove it
RETRIES = 8
EMPTY_LOOKS = (0.05, 0.12, 0.25)  # seconds: an empty file must stay empty and unwritten this long to count as empty
SETTLE = (0.02, 0.05, 0.13)  # seconds between looks after writing a file its host rewrites; 0.2 s in all


class ConfigError(RetainedError):
    """A config file that cannot be changed safely; it was left exactly as it was."""


class Outcome:
    __slots__ = ("path", "target", "action", "diff", "backup", "before", "after", "made_backup", "made_dirs",
                 "settled")

    def __init__(self, path: Path, target: Path, action: str, diff: str = "", backup: Path | None = None) -> None:
        self.path = path
        self.target = target
        self.action = action  # created, updated, removed, unchanged, would create, would update, would remove
        self.diff = diff
        self.backup = backup
        self.before: bytes | None = None  # the file's bytes before this edit (None: it did not exist)
        self.after: bytes | None = None  # ... and after it (None: removed)
        self.made_backup = False  # this edit wrote the backup
        self.made_dirs: list[Path] = []  # folders this edit created, outermost first
        self.settled: Callable[[], bool] | None = None  # with defer_settle: "is our change still in effect?"


def undo(outcome: Outcome) -> bool:
    """Put a file back as it was before `outcome`'s edit, only over our own bytes (never over another
    program's later write); drop the backup and folders that edit created. False: left as it is."""
    if outcome.action not in ("created", "updated", "removed"):
        return True
    target = outcome.target
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o600
    if outcome.before is None:
        done = outcome.after is not None and _remove(target, outcome.after)
    elif outcome.after is None:
        done = _commit(target, None, outcome.before, mode)
    else:
        done = _commit(target, outcome.after, outcome.before, mode)
    if done and outcome.made_backup:
        _unlink(backup_path(target))
    if done and outcome.made_dirs:
        _unlink(outcome.made_dirs[0] / MADE_MARK)
        for folder in reversed(outcome.made_dirs):
            try:
                folder.rmdir()
            except OSError:
                break
    return done


def remove_made_folders(start: Path) -> list[Path]:
    """After removing a file retained created: remove the folders install created for it, once empty."""
    chain: list[Path] = []
    folder = start
    for _ in range(6):
        chain.append(folder)
        if (folder / MADE_MARK).exists():
            break
        folder = folder.parent
    else:
        return []
    removed: list[Path] = []
    for folder in chain:
        try:
            left = [p.name for p in folder.iterdir()]
        except OSError:
            return removed
        if left and left != [MADE_MARK]:
            return removed
        _unlink(folder / MADE_MARK)
        try:
            folder.rmdir()
        except OSError:
            return removed
        removed.append(folder)
    return removed


def _mark_made(made: list[Path]) -> None:
    if made:
        try:
            with open(made[0] / MADE_MARK, "x", encoding="utf-8") as f:
                f.write("retained install created this folder; retained uninstall removes it once empty\n")
        except OSError:
            pass


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders above and including `folder` that do not exist yet, outermost first."""
    out: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return list(reversed(out))


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


def _temp_copy(target: Path, data: bytes, mode: int) -> str:
    """Write `data` to a fsynced temp file beside `target`; return its path."""
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
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _unlink(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _renameat2() -> Callable[[str, str], bool] | None:
    """Linux's atomic swap of two names (renameat2 RENAME_EXCHANGE), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def exchange(a: str, b: str) -> bool:
        """Swap a and b; False when this file system cannot (the caller falls back to a rename)."""
        if fn(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
            return True
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
            return False
        raise OSError(err, os.strerror(err), b)

    return exchange


_exchange = _renameat2()


def _commit(target: Path, original: bytes | None, data: bytes, mode: int) -> bool:
    """Put `data` at `target` only if `target` still holds `original` (None: does not exist).

    Returns False, having changed nothing that anyone else wrote, when the file changed under us; the
    caller starts over from the new version. Where Linux can swap two names atomically, the swap hands
    back exactly the file we replaced, so a write that lands between our last look and the replace is
    noticed and given back rather than lost. Elsewhere the window is the few microseconds between the
    last look and the rename.
    """
    tmp = _temp_copy(target, data, mode)
    try:
        if original is None:
            try:
                os.link(tmp, target)  # creates the name only if nobody else created it meanwhile
            except FileExistsError:
                return False
            except OSError:  # no hard links here (some file systems, Windows shares)
                if os.path.lexists(target):
                    return False
                os.replace(tmp, target)
        else:
            now, _ = _read(target)
            if now != original:
                return False
            if _exchange is not None and _exchange(tmp, str(target)):
                pulled, _ = _read(Path(tmp))
                if pulled != original:
                    # Someone replaced the file between our look and the swap: give theirs back.
                    _exchange(tmp, str(target))
                    again, _ = _read(Path(tmp))
                    if again != data:  # and a third writer came in between: keep the newest
                        _exchange(tmp, str(target))
                    return False
            else:
                os.replace(tmp, target)
        fsync_dir(target.parent)
        return True
    finally:
        _unlink(tmp)


def _remove(target: Path, original: bytes) -> bool:
    """Remove `target` only if it still holds `original`; False (nothing lost) if it changed."""
    aside = f"{target.parent}{os.sep}.{target.name}.{os.getpid()}.retained-removing"
    try:
        os.rename(target, aside)  # atomic: from here nobody can write into the name we remove
    except FileNotFoundError:
        return False
    taken, _ = _read(Path(aside))
    if taken != original:
        try:  # someone wrote it meanwhile: put their version back (unless a newer one is there)
            os.link(aside, target)
        except OSError:
            pass
        _unlink(aside)
        return False
    _unlink(aside)
    fsync_dir(target.parent)
    return True


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _changes_soon(target: Path, seen: bytes, st: os.stat_result | None, looks: Sequence[float] = (0.05,)) -> bool:
    """Whether, at any of `looks` (seconds from now), the file holds other bytes than `seen` or was
    written at all since `st` (a write that left the same bytes still shows in the times)."""
    start = time.monotonic()
    for at in looks:
        time.sleep(max(0.0, start + at - time.monotonic()))
        now, now_st = _read(target)
        if now != seen or now_st is None or st is None or _signature(now_st) != _signature(st):
            return True
    return False


def backup_path(target: Path) -> Path:
    """Where the one backup of `target`'s bytes from before retained first changed it is kept."""
    return target.with_name(target.name + BACKUP_SUFFIX)


def _settled(target: Path, data: bytes, change: Callable[[str], str], pauses: Sequence[float]) -> bool:
    """Whether our change is still in effect a moment later.

    A program that read the file before our replace and writes it back after (Claude Code does this
    with ~/.claude.json) silently undoes our change; its write lands within milliseconds of its read,
    so we look again over a short window and start over on its version if our change is gone.
    """
    return _settled_by(target, data, change, pauses, time.monotonic())


def _settled_by(target: Path, data: bytes, change: Callable[[str], str], pauses: Sequence[float],
                since: float) -> bool:
    """`_settled`, with the looks at `since` + the running sum of `pauses` (a look already due is taken now)."""
    due = since
    for pause in pauses:
        due += pause
        time.sleep(max(0.0, due - time.monotonic()))
        now, _ = _read(target)
        if now == data:
            continue
        if now is None:
            return False
        try:
            text, _ = _decode(target, now)
            if change(text) != text:
                return False
        except Exception:  # unparsable now: the next attempt reports it properly
            return False
    return True


def edit(
    path: Path,
    change: Callable[[str], str],
    *,
    verify: Callable[[str, str], None],
    default_text: str = "",
    dry_run: bool = False,
    new_mode: int = 0o600,
    settle: Sequence[float] | None = None,
    remove_if_empty: Callable[[str], bool] | None = None,
    defer_settle: bool = False,
) -> Outcome:
    """Apply `change` (text -> text) to the file at `path` safely.

    `change` raises ConfigError when the text does not parse (naming file and line). `verify(old, new)`
    raises when the new text lacks our entry or changed anything else; it runs on what was read back
    from disk, and a failure restores the original bytes.

    `settle`: pauses after which to look again that our change is still in effect (SETTLE for a file
    its host rewrites while running, like ~/.claude.json). None: look again only when the file
    changed under us during this edit, a sign that something is writing it right now.

    `defer_settle`: do not wait for the settle window here; the outcome's `settled()` looks later,
    over the same window from the write (so a caller editing several files waits once, not per file).

    `remove_if_empty(new_text)` (uninstall): when it says the changed text holds nothing, and the file
    has no backup (so retained created it: every file that existed got one before its first change),
    the file is removed instead of being left as an empty shell.
    """
    target = Path(os.path.realpath(path))
    contended = False
    seen_text = False
    made_dirs: list[Path] = []
    for attempt in range(RETRIES):
        if attempt:
            contended = True
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
            made_dirs = _missing_dirs(target.parent)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _mark_made(made_dirs)
        # An empty file may be one caught between the truncate and the write of a program that
        # rewrites it in place. Taken for an empty config, our entry alone would be written over
        # everything in it. So once this edit has seen it hold text, empty is that moment; and an
        # empty file we never saw full counts as empty only after it stays empty and unwritten.
        if original:
            seen_text = True
        elif original == b"" and (seen_text or _changes_soon(target, original, st, EMPTY_LOOKS)):
            time.sleep(0.01 * (attempt + 1))
            continue
        try:
            text, bom = _decode(path, original) if original is not None else (default_text, False)
            new_text = change(text)
        except ConfigError:
            # Unparsable may also be a write caught halfway: then it changes a moment later.
            if original is not None and _changes_soon(target, original, st):
                continue
            raise  # still the same bytes: truly broken
        if new_text == text:  # nothing to do; and a missing file stays missing (uninstall)
            return Outcome(path, target, "unchanged")
        backup = backup_path(target)
        if (remove_if_empty is not None and original is not None and not backup.exists()
                and remove_if_empty(new_text)):
            if dry_run:
                return Outcome(path, target, "would remove")
            if _remove(target, original):
                gone = Outcome(path, target, "removed")
                gone.before = original
                return gone
            time.sleep(0.01 * (attempt + 1))
            continue
        if dry_run:
            _check_writable(path, target)
            old_lines = text.splitlines(keepends=True) if original is not None else []
            diff = "".join(difflib.unified_diff(old_lines, new_text.splitlines(keepends=True),
                                                f"{path} (now)", f"{path} (after retained)"))
            return Outcome(path, target, "would update" if original is not None else "would create", diff)
        if target.parent.exists() and not os.access(target.parent, os.W_OK):
            raise ConfigError(f"cannot write in {target.parent}", hint="fix the directory's permissions")
        new_bytes = _encode(new_text, bom)
        made_backup = False
        if original is None:
            backup = None
        elif not backup.exists():
            made_backup = True  # one backup: the bytes from before retained ever touched the file
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         stat.S_IMODE(st.st_mode) & 0o666 or 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(original)
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(target.parent)
        mode = stat.S_IMODE(st.st_mode) if st is not None else new_mode
        # Replace only if nobody (Claude Code rewrites ~/.claude.json all the time) changed it meanwhile.
        if not _commit(target, original, new_bytes, mode):
            time.sleep(0.01 * (attempt + 1))
            continue
        back, _ = _read(target)
        if back != new_bytes:
            # Someone replaced the file right after us: start over from their version, keep both changes.
            time.sleep(0.01 * (attempt + 1))
            continue
        try:
            verify(text, new_text)
        except Exception as e:
            # Put the original back, but only over our own bytes: never over another program's write.
            if original is not None:
                restored = _commit(target, new_bytes, original, mode)
            elif _read(target)[0] == new_bytes:
                target.unlink(missing_ok=True)
                restored = True
            else:
                restored = False
            undone = ("the original was restored" if restored else
                      "another program has written the file since, and its version was left in place")
            raise ConfigError(f"{path}: the change did not check out ({e}); {undone}",
                              hint="report this; nothing else was changed") from None
        pauses = settle if settle is not None else (SETTLE if contended else ())
        written_at = time.monotonic()
        if pauses and not defer_settle and not _settled(target, new_bytes, change, pauses):
            continue
        done = Outcome(path, target, "updated" if original is not None else "created", backup=backup)
        if pauses and defer_settle:
            # The caller looks again later (after its other files), over the same window from this write.
            done.settled = lambda: _settled_by(target, new_bytes, change, pauses, written_at)
        done.before, done.after, done.made_backup, done.made_dirs = original, new_bytes, made_backup, made_dirs
        return done
    raise ConfigError(f"{path} kept changing while retained tried to edit it",
                      hint="close the program that is rewriting it (the host that owns the file, if it runs) and run again")


def _check_writable(path: Path, target: Path) -> None:
    """A dry run's promise that the real run can write here: the folder it writes in (or would create)."""
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write in {folder}", hint="fix the directory's permissions")


def describe_parse_error(path: Path, err: Any) -> ConfigError:
    line = getattr(err, "line", None) or getattr(err, "lineno", None)
    col = getattr(err, "column", None) or getattr(err, "colno", None) or getattr(err, "col", None)
    where = f" at line {line}" + (f", column {col}" if col else "") if line else ""
    reason = getattr(err, "reason", None) or getattr(err, "msg", None) or str(err)
    return ConfigError(f"{path} does not parse{where}: {reason}; retained did not touch it",
                       hint=f"fix {path}{' line ' + str(line) if line else ''} and run again")
