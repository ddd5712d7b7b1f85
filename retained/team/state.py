"""What team memory keeps on this machine, in the store directory under `team/`. Every file is written
whole and atomically (a temporary file, fsync, rename, directory fsync), so a crash leaves the old
version or the new one.

    team/writer.json            this machine+user's writer id (random, stable; a copied store gets a new one)
    team/shared.json            the shared projects: remote, ref, since when, their directory
    team/<dir>/sync.json        per project: last sync and its outcome, what the mirror holds, import history
    team/<dir>/sync.lock        one sync per project at a time
    team/<dir>/writers/*.jsonl  the verified mirror of every writer's log (the index reads them)
    team/<dir>/repo.git         retained's own bare repository for the project (not the project's .git)

`<dir>` is the first 16 hex digits of the SHA-256 of the project key, so a key never becomes a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
from pathlib import Path
from typing import Any, NamedTuple

from .. import durable, records
from ..errors import StoreError, UsageError
from .git import MEMORY_REF, public_url, remote_url
from .readable import project_dir_name

TEAM = "team"
WRITER_FILE = "writer.json"
SHARED_FILE = "shared.json"
SYNC_FILE = "sync.json"
SYNC_LOCK = "sync.lock"
MIRROR = "writers"
REPO = "repo.git"
#: The scope key `retained share --personal URL` syncs under: this user's own machines, never a project remote.
PERSONAL = "personal"


def team_root(store_dir: Path) -> Path:
    return Path(store_dir) / TEAM


def project_dir(store_dir: Path, key: str) -> Path:
    return team_root(store_dir) / project_dir_name(key)


# -- writing files ---------------------------------------------------------------------------------------
def replace_file(path: Path, data: bytes) -> None:
    """Put `data` at `path` atomically and durably (0600), making its folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    durable.write_atomic(path, data)


def append_file(path: Path, data: bytes) -> None:
    """Append `data` to `path` and fsync it. A crash mid-append leaves a torn last line, which the next
    read finds (the file no longer matches the digest noted for it) and cuts off."""
    durable.append(path, data)


def discard_temporaries(directory: Path) -> None:
    """Remove what a write killed before its rename left behind (the old file still stands)."""
    for left in [*directory.glob(f".*{durable.TEMP_SUFFIX}"), *directory.glob(".*.tmp")]:
        with contextlib.suppress(OSError):
            left.unlink()


def write_json(path: Path, data: dict[str, Any]) -> None:
    replace_file(path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's object; None when it is missing. A file that is not a JSON object raises StoreError."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StoreError(f"{path} cannot be read ({e})", hint=f"move {path.name} aside; retained writes it again") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path} is not a JSON object", hint=f"move {path.name} aside; retained writes it again")
    return data


# -- one sync at a time -----------------------------------------------------------------------------------
# A background sync must give up at once when another one runs, not queue behind it.
try_lock = durable.try_locked


# -- the writer -----------------------------------------------------------------------------------------
def _fingerprint(store_dir: Path) -> str:
    """This machine, this user and this store: a store copied elsewhere must not write as the original."""
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "")
    where = f"{socket.gethostname()}\0{uid}\0{Path(store_dir).resolve()}"
    return hashlib.sha256(where.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def writer_id(store_dir: Path) -> str:
    """This machine+user's writer id, made once (random) and kept in team/writer.json. A store that was
    copied to another machine, user or directory gets a new id (the old one is remembered as previous)."""
    path = team_root(store_dir) / WRITER_FILE
    data = read_json(path) or {}
    here = _fingerprint(store_dir)
    if isinstance(data.get("writer"), str) and data.get("machine") == here:
        return data["writer"]
    previous = [w for w in data.get("previous", []) if isinstance(w, str)]
    if isinstance(data.get("writer"), str):
        previous.append(data["writer"])
    new = "w" + secrets.token_hex(10)
    write_json(path, {"writer": new, "machine": here, "created": records.now_rfc3339(), "previous": previous})
    return new


# -- shared projects --------------------------------------------------------------------------------------
class Shared(NamedTuple):
    key: str  # the project key (or PERSONAL)
    remote: str  # the remote's URL as retained shows and stores it: never a password or token (git.public_url)
    ref: str
    dir: Path  # the project's team directory
    since: str
    checkout: str = ""  # the project's checkout and the name of its remote there, when shared by name:
    remote_name: str = ""  # git asks the checkout for the URL, so credentials stay in the checkout's own config


def git_url(s: Shared) -> str:
    """The URL git fetches from and pushes to: the checkout's own URL for the remote it was shared by
    (credentials and all, as the person configured them) while it still names the same remote; else
    the stored one."""
    if s.checkout and s.remote_name and os.path.isdir(s.checkout):
        with contextlib.suppress(Exception):
            url = remote_url(s.checkout, s.remote_name)
            if url and public_url(url) == s.remote:
                return url
    return s.remote


def shared(store_dir: Path) -> dict[str, Shared]:
    """Every project this store shares, by key."""
    data = read_json(team_root(store_dir) / SHARED_FILE) or {}
    out = {}
    for key, item in (data.get("projects") or {}).items():
        if isinstance(item, dict) and isinstance(item.get("remote"), str):
            out[key] = Shared(key, public_url(item["remote"]), item.get("ref") or MEMORY_REF,
                              project_dir(store_dir, key), item.get("since", ""), str(item.get("checkout") or ""),
                              str(item.get("remote_name") or ""))
    return out


def share(store_dir: Path, key: str, remote: str, *, ref: str = MEMORY_REF, checkout: str | None = None,
          remote_name: str | None = None) -> Shared:
    """Turn sharing on for `key` through `remote` (or change its remote). Idempotent. Credentials never
    leave the checkout's own git configuration: a URL that carries them is stored without them, and
    git asks the checkout for it (`checkout`, `remote_name`) at each sync."""
    if not key or not remote.strip():
        raise UsageError("sharing needs a project key and a remote URL", hint="run it inside the project's checkout")
    shown = public_url(remote.strip())
    if shown != remote.strip() and not (checkout and remote_name):
        raise UsageError(f"{shown} was given with a password or token in it, which retained never stores",
                         hint="add it as a remote of the checkout (`git remote add team URL`) or use a git credential "
                              "helper, then `retained share --remote team`")
    if not ref.startswith("refs/") or any(c in ref for c in " ~^:?*[\\") or ".." in ref:
        raise UsageError(f"{ref!r} is not a ref name retained can use", hint=f"use the default, {MEMORY_REF}")
    path = team_root(store_dir) / SHARED_FILE
    data = read_json(path) or {}
    projects = dict(data.get("projects") or {})
    since = (projects.get(key) or {}).get("since") or records.now_rfc3339()
    entry = {"remote": shown, "ref": ref, "since": since}
    if checkout and remote_name:
        entry.update(checkout=str(checkout), remote_name=remote_name)
    projects[key] = entry
    write_json(path, {"version": 1, "projects": projects})
    return Shared(key, shown, ref, project_dir(store_dir, key), since, str(checkout or ""), remote_name or "")


def unshare(store_dir: Path, key: str, *, wait: float = 30.0) -> Shared | None:
    """Stop sharing `key`: forget its remote and remove its team directory (mirror and bare repository;
    the local log keeps every record this machine wrote). None when it was not shared."""
    current = shared(store_dir).get(key)
    if current is None:
        return None
    with try_lock(current.dir / SYNC_LOCK, wait) as held:
        if not held:
            raise StoreError("a sync of this project is running", hint="run `retained unshare` again when it ends")
        path = team_root(store_dir) / SHARED_FILE
        data = read_json(path) or {}
        projects = dict(data.get("projects") or {})
        projects.pop(key, None)
        write_json(path, {"version": 1, "projects": projects})
        for child in sorted(current.dir.iterdir()):
            if child.name != SYNC_LOCK:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    with contextlib.suppress(OSError):
        (current.dir / SYNC_LOCK).unlink()
        current.dir.rmdir()
    return current
