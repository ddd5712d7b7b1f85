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
    import subprocess  # lazy: +3.6 ms on the session-start hook (-X importtime, measured), which starts one rarely

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
        from .. import durable  # lazy, as in `_save_probes` (team/state would cost the hook +15 ms, measured)

        _team(store_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        durable.write_atomic(_team(store_dir) / NOTE, json.dumps({"note": text, "at": int(time.time())}).encode() + b"\n")


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


# -- a fresh clone learns that its remote holds team memory ------------------------------------------------
PROBE = "probe.json"
#: How long a look at a project's remote is trusted before another is made (days are fine: a team's
#: memory ref, once there, stays).
PROBE_TTL_S = 3 * 24 * 3600
#: A look that found nothing, or could not reach the remote, is made again sooner.
PROBE_RETRY_S = 6 * 3600


def _probes(store_dir: Path) -> dict:
    try:
        data = json.loads((_team(store_dir) / PROBE).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_probes(store_dir: Path, data: dict) -> None:
    """Whole and atomic, not fsynced: a cache whose loss costs one more look at the remote."""
    with contextlib.suppress(OSError):
        from .. import durable  # lazy: +5 ms on the stop hook of a store that shares (-X importtime, measured)

        _team(store_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        durable.write_atomic(_team(store_dir) / PROBE, json.dumps(data, sort_keys=True).encode() + b"\n", sync=False)


def join_hint(store_dir: Path, key: str | None, root: str | None) -> str | None:
    """Once per project: the line a session-start brief adds when the project's remote holds team memory
    that this store does not read yet, with the one command that joins it. The look at the remote is
    never made here: a cached answer is read (a stat and a small file), and when there is none, or an
    old one, a look is started beside the hook (`retained sync --probe`), bounded, for a later session."""
    if not key or not root:
        return None
    team = _team(store_dir)
    try:
        shared = json.loads((team / "shared.json").read_bytes()).get("projects") or {}
    except (OSError, ValueError, AttributeError):
        shared = {}
    if key in shared:
        return None
    probes = _probes(store_dir)
    entry = probes.get(key) if isinstance(probes.get(key), dict) else None
    now = time.time()
    if entry is None or now - float(entry.get("at", 0)) > (PROBE_TTL_S if entry.get("memory") else PROBE_RETRY_S):
        if entry is None or now - float(entry.get("started", 0)) > 60:
            probes[key] = {**(entry or {}), "started": now}
            _save_probes(store_dir, probes)
            _start_probe(store_dir, key, root)
        return None
    if entry.get("memory") and not entry.get("told"):
        probes[key] = {**entry, "told": now}
        _save_probes(store_dir, probes)
        return ("this project's git remote holds team memory (refs/retained/memory) that this machine does not "
                "read yet; `retained share`, run in the project's checkout, joins it")
    return None


def _start_probe(store_dir: Path, key: str, root: str) -> None:
    import subprocess  # lazy, as in `kick`

    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-m", "retained", "--dir", str(store_dir), "sync", "--probe", root, key],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)


def probe(store_dir: Path, root: str, key: str, timeout: float = 15.0) -> bool | None:
    """Look whether the checkout's origin holds a memory ref (`git ls-remote`, bounded), and note the
    answer for `join_hint`. True or False; None when the remote could not be asked."""
    # lazy: the sync's process asks this; team/git costs the session-start hook +11 ms (-X importtime, measured)
    import subprocess

    from .git import MEMORY_REF, remote_url
    from .git import environment as git_env

    found: bool | None = None
    try:
        url = remote_url(root)
        if url:
            proc = subprocess.run(["git", "ls-remote", url, MEMORY_REF], capture_output=True, timeout=timeout,
                                  env=git_env(), stdin=subprocess.DEVNULL)
            found = MEMORY_REF.encode() in proc.stdout if proc.returncode == 0 else None
        else:
            found = False
    except Exception:  # git missing, a hung remote, a checkout gone: asked again later
        found = None
    probes = _probes(store_dir)
    entry = probes.get(key)
    probes[key] = {**(entry if isinstance(entry, dict) else {}), "at": time.time(), "memory": found}
    _save_probes(store_dir, probes)
    return found
