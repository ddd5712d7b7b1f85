"""Change another program's config file without ever harming it.

Parse or refuse; change only our entries; keep the mode; refuse a read-only file (even as root, where
a rename would silently replace it); follow symlinks and write the target; one backup of the original
bytes; temp file in the same directory, fsync, re-check that nobody changed the file meanwhile, atomic
replace (a swap on Linux, which hands back what it replaced), fsync the directory; read back and check,
else restore and report; look again a moment later and start over if another program's write undid
ours. The edit's logic is here; the file-system steps it takes (the fsynced temp file, the
compare-before-swap, the removal that gives back a concurrent write) are retained/durable.py's.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from retained import durable
from retained.errors import RetainedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
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
        done = outcome.after is not None and durable.remove_if_unchanged(target, outcome.after)
    else:
        done = durable.replace_if_unchanged(target, outcome.after, outcome.before, mode)
    if done and outcome.made_backup:
        backup_path(target).unlink(missing_ok=True)
    if done and outcome.made_dirs:
        (outcome.made_dirs[0] / MADE_MARK).unlink(missing_ok=True)
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
        (folder / MADE_MARK).unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:
            return removed
        removed.append(folder)
    return removed


def _mark_made(made: list[Path]) -> None:
    if made:
        with contextlib.suppress(OSError):
            durable.write_new_file(made[0] / MADE_MARK,
                                   b"retained install created this folder; retained uninstall removes it once empty\n")


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders above and including `folder` that do not exist yet, outermost first."""
    out: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return list(reversed(out))


def _decode(path: Path, data: bytes) -> tuple[str, bool]:
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        return data[3:].decode("utf-8") if bom else data.decode("utf-8"), bom
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start})", hint="fix its encoding; nothing was changed") from None


def _encode(text: str, bom: bool) -> bytes:
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _changes_soon(target: Path, seen: bytes, st: os.stat_result | None, looks: Sequence[float] = (0.05,)) -> bool:
    """Whether, at any of `looks` (seconds from now), the file holds other bytes than `seen` or was
    written at all since `st` (a write that left the same bytes still shows in the times)."""
    start = time.monotonic()
    for at in looks:
        time.sleep(max(0.0, start + at - time.monotonic()))
        now, now_st = durable.read_with_stat(target)
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
        now, _ = durable.read_with_stat(target)
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
    job = _Edit(path, change, verify, default_text=default_text, dry_run=dry_run, new_mode=new_mode,
                settle=settle, remove_if_empty=remove_if_empty, defer_settle=defer_settle)
    for attempt in range(RETRIES):
        done = job.attempt(attempt)
        if done is not None:
            return done
    raise ConfigError(f"{path} kept changing while retained tried to edit it",
                      hint="close the program that is rewriting it (the host that owns the file, if it runs) and run again")


class _Edit:
    """One call of `edit`: what it was asked, and what it has learnt about the file across attempts."""

    def __init__(self, path: Path, change: Callable[[str], str], verify: Callable[[str, str], None], *,
                 default_text: str, dry_run: bool, new_mode: int, settle: Sequence[float] | None,
                 remove_if_empty: Callable[[str], bool] | None, defer_settle: bool) -> None:
        self.path, self.change, self.verify = path, change, verify
        self.default_text, self.dry_run, self.new_mode = default_text, dry_run, new_mode
        self.settle, self.remove_if_empty, self.defer_settle = settle, remove_if_empty, defer_settle
        self.target = Path(os.path.realpath(path))
        self.contended = False  # the file changed under us: a sign that something is writing it now
        self.seen_text = False  # this edit has seen the file hold text
        self.made_dirs: list[Path] = []  # folders this edit created, outermost first

    def attempt(self, n: int) -> Outcome | None:
        """One try at the edit; None: the file changed under us (or may be mid-write), try again."""
        self.contended = self.contended or n > 0
        original, st = self._look()
        if self._caught_empty(original, st):
            _pause(n)
            return None
        changed = self._changed(original, st)
        if changed is None:
            return None  # caught mid-write: it changes a moment later, look again now
        text, new_text, bom = changed
        if new_text == text:  # nothing to do; and a missing file stays missing (uninstall)
            return Outcome(self.path, self.target, "unchanged")
        if st is not None and (st.st_mode & 0o222 == 0 or not os.access(self.target, os.W_OK)):
            # refused only when it needs a change: a read-only file already as wanted is "unchanged"
            raise ConfigError(
                f"{self.path} is read-only; retained will not replace it",
                hint=f"make it writable (chmod u+w {self.target}) and run again",  # a dry run refuses it too
            )
        if original is not None and self._leaves_nothing(new_text):
            return self._remove(original, n)
        if self.dry_run:
            return self._preview(original, text, new_text)
        return self._write(original, st, text, new_text, _encode(new_text, bom), n)

    def _look(self) -> tuple[bytes | None, os.stat_result | None]:
        """Read the file; refuse one that must not be replaced; make the folders a new file needs."""
        original, st = durable.read_with_stat(self.target)
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"{self.path} is not a regular file", hint="nothing was changed")
        elif not self.target.parent.exists() and not self.dry_run:
            self.made_dirs = _missing_dirs(self.target.parent)
            self.target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _mark_made(self.made_dirs)
        return original, st

    def _caught_empty(self, original: bytes | None, st: os.stat_result | None) -> bool:
        """Whether an empty file must be read again rather than taken for an empty config.

        An empty file may be one caught between the truncate and the write of a program that
        rewrites it in place. Taken for an empty config, our entry alone would be written over
        everything in it. So once this edit has seen it hold text, empty is that moment; and an
        empty file we never saw full counts as empty only after it stays empty and unwritten.
        """
        if original:
            self.seen_text = True
            return False
        return original == b"" and (self.seen_text or _changes_soon(self.target, original, st, EMPTY_LOOKS))

    def _changed(self, original: bytes | None, st: os.stat_result | None) -> tuple[str, str, bool] | None:
        """(text, changed text, has a BOM); None when it does not parse but changes a moment later."""
        try:
            text, bom = _decode(self.path, original) if original is not None else (self.default_text, False)
            return text, self.change(text), bom
        except ConfigError:
            # Unparsable may also be a write caught halfway: then it changes a moment later.
            if original is not None and _changes_soon(self.target, original, st):
                return None
            raise  # still the same bytes: truly broken

    def _leaves_nothing(self, new_text: str) -> bool:
        """Uninstall: the change leaves nothing, in a file retained created (it has no backup, since
        every file that existed got one before its first change): remove it, not leave an empty shell."""
        return (self.remove_if_empty is not None and not backup_path(self.target).exists()
                and self.remove_if_empty(new_text))

    def _remove(self, original: bytes, n: int) -> Outcome | None:
        if self.dry_run:
            return Outcome(self.path, self.target, "would remove")
        if not durable.remove_if_unchanged(self.target, original):
            _pause(n)
            return None
        gone = Outcome(self.path, self.target, "removed")
        gone.before = original
        return gone

    def _preview(self, original: bytes | None, text: str, new_text: str) -> Outcome:
        """A dry run: the unified diff, once sure the real run can write here."""
        _check_writable(self.path, self.target)
        old_lines = text.splitlines(keepends=True) if original is not None else []
        diff = "".join(difflib.unified_diff(old_lines, new_text.splitlines(keepends=True),
                                            f"{self.path} (now)", f"{self.path} (after retained)"))
        return Outcome(self.path, self.target, "would update" if original is not None else "would create", diff)

    def _write(self, original: bytes | None, st: os.stat_result | None, text: str, new_text: str,
               new_bytes: bytes, n: int) -> Outcome | None:
        """Back up once, replace only over `original`, read back and check; None: start over."""
        if self.target.parent.exists() and not os.access(self.target.parent, os.W_OK):
            raise ConfigError(f"cannot write in {self.target.parent}", hint="fix the directory's permissions")
        mode = stat.S_IMODE(st.st_mode) if st is not None else self.new_mode
        made_backup = original is not None and _back_up(self.target, original, mode)
        # Replace only if nobody (Claude Code rewrites ~/.claude.json all the time) changed it meanwhile.
        if not durable.replace_if_unchanged(self.target, original, new_bytes, mode):
            _pause(n)
            return None
        if durable.read_with_stat(self.target)[0] != new_bytes:
            # Someone replaced the file right after us: start over from their version, keep both changes.
            _pause(n)
            return None
        with _undone_on_failure(self.path, self.target, original, new_bytes, mode):
            self.verify(text, new_text)
        return self._settle(original, new_bytes, made_backup)

    def _settle(self, original: bytes | None, new_bytes: bytes, made_backup: bool) -> Outcome | None:
        """Look again a moment later that our change holds (or leave that to the caller); None: start over."""
        pauses = self.settle if self.settle is not None else (SETTLE if self.contended else ())
        written_at = time.monotonic()
        target, change = self.target, self.change
        if pauses and not self.defer_settle and not _settled(target, new_bytes, change, pauses):
            return None
        done = Outcome(self.path, target, "updated" if original is not None else "created",
                       backup=backup_path(target) if original is not None else None)
        if pauses and self.defer_settle:
            # The caller looks again later (after its other files), over the same window from this write.
            done.settled = lambda: _settled_by(target, new_bytes, change, pauses, written_at)
        done.before, done.after, done.made_backup, done.made_dirs = original, new_bytes, made_backup, self.made_dirs
        return done


def _pause(attempt: int) -> None:
    """A little longer after each try that found the file changing."""
    time.sleep(0.01 * (attempt + 1))


def _back_up(target: Path, original: bytes, mode: int) -> bool:
    """Keep the bytes from before retained ever touched the file, once; True when this call did."""
    backup = backup_path(target)
    if backup.exists():
        return False
    durable.write_new_file(backup, original, mode & 0o666 or 0o600)
    return True


@contextlib.contextmanager
def _undone_on_failure(path: Path, target: Path, original: bytes | None, written: bytes, mode: int) -> Iterator[None]:
    """Around the check of what was written: when it fails, put the original back, but only over our
    own bytes (never over another program's write), and say which of the two happened."""
    try:
        yield
    except Exception as e:
        if original is not None:
            restored = durable.replace_if_unchanged(target, written, original, mode)
        else:
            restored = durable.remove_if_unchanged(target, written)
        undone = ("the original was restored" if restored else
                  "another program has written the file since, and its version was left in place")
        raise ConfigError(f"{path}: the change did not check out ({e}); {undone}",
                          hint="report this; nothing else was changed") from None


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
