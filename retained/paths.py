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
    """Resolve the store directory by the documented precedence."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("RETAINED_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    return default_data_dir()


def read_only_requested() -> bool:
    """RETAINED_READ_ONLY=1: change no file in the store (doctor runs hooks and servers this way)."""
    return os.environ.get("RETAINED_READ_ONLY", "").strip().lower() in ("1", "true", "yes", "on")
