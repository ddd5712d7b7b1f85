"""The one place that locks files, writes their bytes, fsyncs, truncates and replaces them.

Every other module writes through here, so each promise is kept in one place:
- a write writes every byte (`write_all`), and is on the device before it counts (`fsync`);
- a file is replaced whole or not at all: the new bytes go to a temp file in the target's directory,
  fsynced, with the mode set before the rename, renamed over the target, and the directory fsynced so
  the new name survives a power cut (`atomic_file`, `write_atomic`, `replace`); on any error the temp
  file is removed and the target is untouched (dulwich's `GitFile` is the model);
  a note that is only a cache (a hook's session note) is replaced the same way without the two
  fsyncs (`sync=False`): readers still see the old file or the new one, never a part, and a power cut
  may lose the note, never the memory;
- another program's file is replaced only if it still holds what we read (`replace_if_unchanged`,
  `remove_if_unchanged`): on Linux by an atomic swap that hands back the file it replaced;
- a cut (`truncate`) is fsynced, so a torn tail moved to quarantine or a failed append stays cut.

Standard library only, and nothing heavy at import time: the hook path imports this.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from typing import BinaryIO

TEMP_SUFFIX = ".retained-tmp"
_BINARY = getattr(os, "O_BINARY", 0)  # Windows would otherwise turn b"\n" into b"\r\n"

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after ~10 s; keep waiting like flock does
                continue

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created 0600 if missing) across processes."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _lock(fd)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def try_locked(path: Path, wait: float) -> Iterator[bool]:
    """Hold an exclusive lock on `path` if it can be had within `wait` seconds; yields whether it was.

    For work that must give up rather than queue (a background sync when another one runs). The kernel
    drops the lock when its process dies, kill -9 included."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        held = _try_lock(fd)
        while not held and time.monotonic() < deadline:
            time.sleep(0.05)
            held = _try_lock(fd)
        yield held
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def append(path: Path, data: bytes) -> None:
    """Append `data` to `path` (created 0600) and fsync it. A crash mid-append can leave a torn last
    line: readers of such files must check what they read (the log quarantines it; mirrors re-verify)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


# -- bytes onto the device ------------------------------------------------------------------------
def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (os.write may write fewer than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync(fd: int) -> None:
    """Make what was written to `fd` durable."""
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make a new or renamed directory entry durable (a no-op where directories can't be opened)."""
    if sys.platform == "win32":  # pragma: no cover
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def truncate(file: int | Path, size: int) -> None:
    """Cut the file (an open descriptor, or a path) back to `size` bytes, durably."""
    if isinstance(file, int):
        os.ftruncate(file, size)
        os.fsync(file)
        return
    fd = os.open(file, os.O_WRONLY | _BINARY)
    try:
        truncate(fd, size)
    finally:
        os.close(fd)


def write_new_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Create `path` with `data` (`mode`, less the umask), durably; refuses to overwrite."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


# -- whole files, replaced atomically -------------------------------------------------------------
def replace(src: Path | str, dst: Path, *, sync: bool = True) -> None:
    """Atomically put `src` in `dst`'s place (same directory) and make the rename durable (unless not `sync`)."""
    os.replace(src, dst)
    if sync:
        fsync_dir(dst.parent)


@contextlib.contextmanager
def atomic_file(target: Path, mode: int | None = 0o600, *, sync: bool = True) -> Iterator[BinaryIO]:
    """Yield a binary file whose bytes become `target` when the block ends, all at once.

    The file is a temp file beside `target` (same directory, so the rename is atomic) with `mode`
    (None: what `open` would give a new file, under the umask), set before the rename so the file is
    never visible at `target` with the wrong permissions. On leaving the block it is fsynced, renamed
    over `target` and the directory fsynced. On any exception, in the block or in these steps, the
    temp file is removed and `target` is left as it was.

    `sync=False` skips both fsyncs, for a file that is only a cache: the swap stays atomic for every
    reader, but after a power cut the file may be the old one, or empty.
    """
    fd, tmp = _open_temp(target, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if sync:
                os.fsync(f.fileno())
        replace(tmp, target, sync=sync)
    except BaseException:
        _unlink(tmp)
        raise


def write_atomic(target: Path, data: bytes, mode: int | None = 0o600, *, sync: bool = True) -> None:
    """Replace `target` by `data` in one step that a crash cannot leave half done (`sync`: see
    `atomic_file`)."""
    with atomic_file(target, mode, sync=sync) as f:
        f.write(data)


def _open_temp(target: Path, mode: int | None) -> tuple[int, Path]:
    """Create a temp file beside `target` (never an existing name) and give it `mode`."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{os.urandom(4).hex()}{TEMP_SUFFIX}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o666 if mode is None else mode)
        except FileExistsError:
            continue
        if mode is None:
            return fd, tmp
        try:
            if hasattr(os, "fchmod"):  # exactly `mode`: os.open took the umask off it
                os.fchmod(fd, mode)
            else:  # pragma: no cover - Windows before Python 3.13
                os.chmod(tmp, mode)
        except BaseException:
            os.close(fd)
            _unlink(tmp)
            raise
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temp file name", str(target))


def _write_temp(target: Path, data: bytes, mode: int) -> Path:
    """Write `data` to a fsynced temp file beside `target`; return its path."""
    fd, tmp = _open_temp(target, mode)
    try:
        write_all(fd, data)
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


# -- another program's file: compare, then swap ---------------------------------------------------
def read_with_stat(path: Path) -> tuple[bytes | None, os.stat_result | None]:
    """The file's bytes and the stat of what was read; (None, None) when there is no such file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
            return data, os.fstat(f.fileno())
    except FileNotFoundError:
        return None, None


@functools.cache
def exchanger() -> Callable[[str, str], bool] | None:
    """Linux's atomic swap of two names (renameat2 RENAME_EXCHANGE), or None where there is none.

    Looked up on first use: loading ctypes costs the hook path time it does not need.
    """
    return _renameat2()


def _renameat2() -> Callable[[str, str], bool] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # lazy: +1.8 ms on every hook (measured); Linux only, at the first exclusive rename

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


def replace_if_unchanged(target: Path, expected: bytes | None, data: bytes, mode: int) -> bool:
    """Put `data` (with `mode`) at `target` only if `target` still holds `expected` (None: does not exist).

    Returns False, having changed nothing that anyone else wrote, when the file changed under us; the
    caller starts over from the new version. Where Linux can swap two names atomically, the swap hands
    back exactly the file we replaced, so a write that lands between our last look and the replace is
    noticed and given back rather than lost. Elsewhere the window is the few microseconds between the
    last look and the rename.
    """
    tmp = _write_temp(target, data, mode)
    try:
        if expected is None:
            try:
                os.link(tmp, target)  # creates the name only if nobody else created it meanwhile
            except FileExistsError:
                return False
            except OSError:  # no hard links here (some file systems, Windows shares)
                if os.path.lexists(target):
                    return False
                os.replace(tmp, target)
        elif not _swap_if_unchanged(target, str(tmp), expected, data):
            return False
        fsync_dir(target.parent)
        return True
    finally:
        _unlink(tmp)


def _swap_if_unchanged(target: Path, tmp: str, expected: bytes, data: bytes) -> bool:
    """Swap the written `tmp` into `target`'s place if `target` holds `expected` (a re-read just before)."""
    exchange = exchanger()  # first, not between the look and the swap: its first call loads ctypes
    now, _ = read_with_stat(target)
    if now != expected:
        return False
    if exchange is None or not exchange(tmp, str(target)):
        os.replace(tmp, target)
        return True
    pulled, _ = read_with_stat(Path(tmp))
    if pulled == expected:
        return True
    # Someone replaced the file between our look and the swap: give theirs back.
    exchange(tmp, str(target))
    again, _ = read_with_stat(Path(tmp))
    if again != data:  # and a third writer came in between: keep the newest
        exchange(tmp, str(target))
    return False


def remove_if_unchanged(target: Path, expected: bytes) -> bool:
    """Remove `target` only if it still holds `expected`; False (nothing lost) if it changed or is gone."""
    aside = f"{target.parent}{os.sep}.{target.name}.{os.getpid()}.retained-removing"
    try:
        os.rename(target, aside)  # atomic: from here nobody can write into the name we remove
    except FileNotFoundError:
        return False
    taken, _ = read_with_stat(Path(aside))
    if taken != expected:
        try:  # someone wrote it meanwhile: put their version back (unless a newer one is there)
            os.link(aside, target)
        except OSError:
            pass
        _unlink(aside)
        return False
    _unlink(aside)
    fsync_dir(target.parent)
    return True
