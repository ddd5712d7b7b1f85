"""Where the store lives: --dir, else $RETAINED_DIR, else the platform's user data directory.

The default mirrors `platformdirs.user_data_dir("retained", appauthor=False)` using only the
standard library, so the hook path stays free of third-party imports (a test keeps the two equal).
Every answer is read from an environment passed in (default: this process's), never from a changed
`os.environ`: doctor asks what another program's environment resolves to while other threads run.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from .errors import UsageError
from .switches import switch

APP = "retained"


LOG_NAME = "log.jsonl"  # a store's one source of truth (retained/log.py); named here for the hook's path


def home_of(env: Mapping[str, str] = os.environ) -> Path:
    """The home directory `~` names in the environment `env` (as `Path.home()` reads it for this process)."""
    value = env.get("USERPROFILE" if os.name == "nt" else "HOME")
    if value:
        return Path(value)
    if os.name != "nt":
        try:
            import pwd  # POSIX only: here, so that ImportError on Windows falls back

            return Path(pwd.getpwuid(os.getuid()).pw_dir)
        except (ImportError, KeyError):
            pass
    return Path(os.path.expanduser("~"))


def expand_user(path: str | os.PathLike[str], env: Mapping[str, str] = os.environ) -> Path:
    """`path` with a leading `~` (or `~/`) made the home of `env` (`~user` as the system says)."""
    text = os.fspath(path)
    if text == "~" or text.startswith(("~/", "~" + os.sep)):
        return home_of(env) / text[2:] if len(text) > 1 else home_of(env)
    return Path(text).expanduser()


def default_data_dir(env: Mapping[str, str] = os.environ) -> Path:
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or str(home_of(env) / "AppData" / "Local")
        return Path(base) / APP
    if sys.platform == "darwin":
        return home_of(env) / "Library" / "Application Support" / APP
    xdg = env.get("XDG_DATA_HOME", "").strip()
    return Path(xdg if xdg else home_of(env) / ".local" / "share") / APP


def store_dir(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] = os.environ) -> Path:
    """Resolve the store directory by the documented precedence. An explicit empty one is refused."""
    if explicit is not None and not str(explicit).strip():
        raise UsageError("--dir is empty", hint="give a directory, or leave --dir out for the default store")
    if explicit:
        return expand_user(explicit, env)
    value = env.get("RETAINED_DIR", "").strip()
    if value:
        return expand_user(value, env)
    return default_data_dir(env)


def read_only_requested(env: Mapping[str, str] = os.environ) -> bool:
    """RETAINED_READ_ONLY=1: change no file in the store (doctor runs hooks and servers this way)."""
    return switch("RETAINED_READ_ONLY", False, env)


# Files of a store this user must be able to change to write to it (named in log.py and index/schema.py).
_STORE_FILES = ("log.jsonl", "log.lock", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm")


def _owner(path: Path) -> str:
    try:
        uid = path.stat().st_uid
    except OSError:
        return "another user"
    try:
        import pwd  # POSIX only, as in `home_of`

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _me() -> str:
    try:
        import getpass  # lazy: +0.5 ms on every hook (measured), for a message about a store we cannot write

        return getpass.getuser()
    except Exception:
        return "this user"


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # no statvfs on Windows
        return False


def unreadable_reason(directory: Path) -> str | None:
    """Why this user cannot read the store at `directory` (an existing directory), or None."""
    log = directory / "log.jsonl"
    if not os.access(directory, os.R_OK | os.X_OK):
        return f"permission denied (the directory belongs to {_owner(directory)}; running as {_me()})"
    if os.path.lexists(log) and not os.path.islink(log) and not os.access(log, os.R_OK):  # links: log.py says
        return f"permission denied on log.jsonl (it belongs to {_owner(log)}; running as {_me()})"
    return None


def unwritable_reason(directory: Path) -> str | None:
    """Why this user cannot (or, when another user could change it too, may not) change the store at
    `directory` (an existing directory), or None: the store is then opened read-only."""
    if _read_only_fs(directory):
        return "it is on a read-only file system"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory belongs to {_owner(directory)}; running as {_me()}"
    for name in _STORE_FILES:
        if _cannot_write(directory / name):
            return f"{name} belongs to {_owner(directory / name)}; running as {_me()}"
    foreign = others_can_write(directory)  # issue 29: then what it holds may be another user's doing
    if foreign is not None:
        return f"another user can change it: {foreign}; chmod go-w makes it this user's alone"
    return None


def _cannot_write(path: Path) -> bool:
    """Whether `path` is there and this user may not write it. Another process's SQLite connection
    makes and deletes the -wal and -shm files as it opens and closes, so a failed access counts only
    when the file is still there and a second look fails too (a racing creation once broke a write)."""
    return all(os.path.exists(path) and not os.access(path, os.W_OK) for _look in range(2))


def others_can_write(directory: str | os.PathLike[str], *, itself: bool = True) -> str | None:
    """Why a user other than this one (and root) could change what is in `directory` or put another
    folder in its place, or None: the folder (unless not `itself`) may not be writable by its group or
    by everyone, nor belong to another user; every folder above it (symlinks resolved) may not belong to
    another user, nor be writable by others without the sticky bit (`/tmp` is fine: nobody else may
    rename what is in it). A store folder, a socket's folder or the kept model's that fails this is not trusted
    (retained/store.py, retained/warm.py, retained/embed.py). A few stats, no import: the hook asks."""
    if not hasattr(os, "getuid"):
        return None  # Windows: folders are private by their ACLs, which this does not read
    me = os.getuid()
    real = os.path.realpath(directory)
    first = True
    while True:
        try:
            st = os.stat(real)
        except OSError:
            return None  # not there (yet): whoever makes it makes it 0700
        what = "the folder" if first else f"the folder above it, {real},"
        if st.st_uid not in (me, 0):
            return f"{what} belongs to {_name_of(st.st_uid)}"
        if not (first and not itself):
            if st.st_mode & stat.S_IWOTH and (first or not st.st_mode & stat.S_ISVTX):
                return f"{what} is writable by every user (mode {stat.S_IMODE(st.st_mode):o})"
            if st.st_mode & stat.S_IWGRP and (first or not st.st_mode & stat.S_ISVTX) and _group_shared(st.st_gid):
                return f"{what} is writable by group {_group_name(st.st_gid)} (mode {stat.S_IMODE(st.st_mode):o})"
        parent = os.path.dirname(real)
        if parent == real:
            return None
        real, first = parent, False


def _group_shared(gid: int) -> bool:
    """Whether users besides this one may be in group `gid` (not this user's own private group)."""
    try:
        import grp  # POSIX only, as in `home_of`
        import pwd

        group = grp.getgrgid(gid)
        me = pwd.getpwuid(os.getuid())
    except (ImportError, KeyError):
        return True
    return not (gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name})


def _name_of(uid: int) -> str:
    try:
        import pwd  # POSIX only, as in `home_of`

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        import grp  # POSIX only, as in `home_of`

        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):
        return f"gid {gid}"


# A folder holding the log and one of these is a store (retained's own, or another of this machine's).
_STORE_SIGNS = ("log.lock", "index.sqlite3", "vectors.sqlite3", os.path.join("team", "shared.json"))


def store_holding(path: str | os.PathLike[str]) -> Path | None:
    """The store folder that `path` (symlinks resolved) is or lies inside, recognised by its files, or None."""
    real = Path(os.path.realpath(path))
    for folder in (real, *real.parents):
        if os.path.isfile(folder / LOG_NAME) and any(os.path.exists(folder / sign) for sign in _STORE_SIGNS):
            return folder
    return None


def has_team(store_dir: str | os.PathLike[str]) -> bool:
    """Whether this store shares anything through git (issue 19): then it may hold teammates' records
    before a log of its own. Here, not in team/, so the hook and a server's opening ask without importing it."""
    return os.path.exists(os.path.join(store_dir, "team", "shared.json"))
