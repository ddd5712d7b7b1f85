"""Sync in the background: at session start and after a session's writes, beside the hook, never in it.

`kick(store_dir)` starts `retained sync --background` as a detached process and returns at once (a
fork and an exec: the hook's own time does not include the sync). That process gives up at once when
another sync of the project runs, keeps git within `share.BACKGROUND_BUDGET` seconds, and, when it
fails, leaves one note (`team/background-note.json`) that the next brief shows once (`take_note`).
A kick within `MIN_INTERVAL` seconds of the last one does nothing. Standard library only: the hook
path imports this.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

NOTE = "background-note.json"
STAMP = "background.stamp"
MIN_INTERVAL = 20.0


def _team(store_dir: Path) -> Path:
    return Path(store_dir) / "team"


def kick(store_dir: Path, *, force: bool = False, if_written: bool = False) -> bool:
    """Start a background sync of every shared project of this store, unless one started moments
    ago (or, `if_written`, unless the log changed since the last one started). True when one was
    started. Never raises: the hook fails open."""
    team = _team(store_dir)
    if not (team / "shared.json").exists():
        return False
    stamp = team / STAMP
    try:
        last = stamp.stat().st_mtime
        if not force and time.time() - last < MIN_INTERVAL:
            return False
        if if_written and os.stat(Path(store_dir) / "log.jsonl").st_mtime <= last:
            return False
    except OSError:
        pass
    import subprocess  # here, not at the top: the brief imports this module on the hook's path

    try:
        stamp.touch()
        os.utime(stamp)
        subprocess.Popen([sys.executable, "-m", "retained", "--dir", str(store_dir), "sync", "--background"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True


def leave_note(store_dir: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        from . import state

        state.replace_file(_team(store_dir) / NOTE, json.dumps({"note": text, "at": int(time.time())}).encode() + b"\n")


def clear_note(store_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (_team(store_dir) / NOTE).unlink()


def take_note(store_dir: Path) -> str | None:
    """The note a failed background sync left, once: it is removed as it is read."""
    path = _team(store_dir) / NOTE
    try:
        data = json.loads(path.read_bytes())
        path.unlink()
    except (OSError, ValueError):
        return None
    note = data.get("note") if isinstance(data, dict) else None
    return note if isinstance(note, str) and note else None
