"""Where the store lives: --dir, else $RETAINED_DIR, else the platform's user data directory.

The default mirrors `platformdirs.user_data_dir("retained", appauthor=False)` using only the
standard library, so the hook path stays free of third-party imports (a test keeps the two equal).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP = "retained"


def default_data_dir() -> Path:
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / APP
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    return Path(xdg if xdg else Path.home() / ".local" / "share") / APP


def store_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the store directory by the documented precedence. An explicit empty one is refused."""
    if explicit is not None and not str(explicit).strip():
        from .errors import UsageError

        raise UsageError("--dir is empty", hint="give a directory, or leave --dir out for the default store")
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("RETAINED_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    return default_data_dir()


def read_only_requested() -> bool:
    """RETAINED_READ_ONLY=1: change no file in the store (doctor runs hooks and servers this way)."""
    return os.environ.get("RETAINED_READ_ONLY", "").strip().lower() in ("1", "true", "yes", "on")


# Files of a store this user must be able to change to write to it (named in log.py and index/schema.py).
_STORE_FILES = ("log.jsonl", "log.lock", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm")


def _owner(path: Path) -> str:
    try:
        uid = path.stat().st_uid
    except OSError:
        return "another user"
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _me() -> str:
    try:
        import getpass

        return getpass.getuser()
    except Exception:  # noqa: BLE001 - only for a message
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
    """Why this user cannot change the store at `directory` (an existing directory), or None."""
    if _read_only_fs(directory):
        return "it is on a read-only file system"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory belongs to {_owner(directory)}; running as {_me()}"
    for name in _STORE_FILES:
        path = directory / name
        if os.path.exists(path) and not os.access(path, os.W_OK):
            return f"{name} belongs to {_owner(path)}; running as {_me()}"
    return None
