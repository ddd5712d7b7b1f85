"""Which teammates' logs the index reads: every writer's file in the mirror of every shared project,
less this store's own writer (its records are the local log's). Files only, standard library only:
the hook path pays a stat of `team/shared.json` when nothing is shared.

    readable_logs(store_dir) -> [(source name, writer, path, scope)]

A source name is `team:<project dir>:<writer>`: one writer's log of one shared project. `scope` is what
its records are filed under here: the project's key as this store shares it (the ref names the project,
whatever spelling of its URL the writer's clone has), or `global` for the personal remote.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

_cache: dict[str, tuple[tuple[int, ...], list[tuple[str, str, Path, str]]]] = {}
PERSONAL = "personal"  # state.PERSONAL: the key `retained share --personal` syncs under


def _stamp(path: str | Path) -> int:
    try:
        st = os.stat(path)
    except OSError:
        return -1
    return st.st_mtime_ns ^ (st.st_ino << 1) ^ st.st_size


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def project_dir_name(key: str) -> str:
    """A shared project's directory under team/: the first 16 hex digits of its key's SHA-256."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def own_writers(root: Path) -> set[str]:
    data = _load(root / "writer.json")
    mine = {data["writer"]} if isinstance(data.get("writer"), str) else set()
    return mine | {w for w in data.get("previous") or [] if isinstance(w, str)}


def readable_logs(store_dir: str | Path) -> list[tuple[str, str, Path, str]]:
    """(name, writer, path, scope) of every teammate's log this store's index reads, in a stable order."""
    shared = _stamp(os.path.join(store_dir, "team", "shared.json"))  # every read pays this stat: keep it bare
    if shared < 0:
        return []
    root = Path(store_dir) / "team"
    shared_file = root / "shared.json"
    top = (shared, _stamp(root / "writer.json"))
    key = str(root)
    projects = _load(shared_file).get("projects") or {}
    keys = {project_dir_name(k): k for k in projects if isinstance(k, str)}
    dirs = sorted(keys)
    stamp = top + tuple(_stamp(root / d / "writers") for d in dirs)
    cached = _cache.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    mine = own_writers(root)
    found = []
    for d in dirs:
        folder = root / d / "writers"
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            writer = name[:-len(".jsonl")] if name.endswith(".jsonl") else ""
            if writer and writer not in mine and not name.startswith("."):
                scope = "global" if keys[d] == PERSONAL else keys[d]
                found.append((f"team:{d}:{writer}", writer, folder / name, scope))
    _cache[key] = (stamp, found)
    return found


def own_author(store_dir: str | Path, key: str | None) -> str | None:
    """The name (else email) this writer's shared copies of project `key` carry, read from the last
    line of its own log in the mirror (one short read at its end); None when the project is not
    shared or this writer has published nothing yet. A brief shows it beside this machine's own
    records, so that a record reads the same on every clone."""
    if not key or _stamp(os.path.join(store_dir, "team", "shared.json")) < 0:
        return None
    root = Path(store_dir) / "team"
    if key not in (_load(root / "shared.json").get("projects") or {}):
        return None
    for writer in sorted(own_writers(root)):
        path = root / project_dir_name(key) / "writers" / f"{writer}.jsonl"
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 65536))
                tail = f.read()
        except OSError:
            continue
        for raw in reversed(tail.split(b"\n")[1:-1] if size > 65536 else tail.split(b"\n")[:-1]):
            try:
                author = json.loads(raw).get("author")
            except (ValueError, AttributeError):
                continue
            if isinstance(author, dict):
                name = author.get("name") or author.get("email")
                if isinstance(name, str) and name:
                    return name
    return None
