"""One durability module: every fsync, replace, rename and truncate is in retained/durable.py, and what
is written through it is whole or absent: the abortable temp file, the export, the hook's session note."""

from __future__ import annotations

import ast
import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retained import durable, transfer
from retained.errors import StoreError
from retained.store import Store

ROOT = Path(__file__).resolve().parents[1]
# What makes bytes durable or puts a file in another's place: only durable.py may call these.
FORBIDDEN_OS = {"fsync", "fdatasync", "replace", "rename", "renames", "ftruncate", "truncate"}


def durability_calls(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of a file-system durability primitive in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in FORBIDDEN_OS:
            found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [(node.lineno, f"from os import {a.name}") for a in node.names if a.name in FORBIDDEN_OS]
        elif isinstance(node, ast.Attribute) and node.attr in ("renameat2", "renameat"):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Name) and node.id in ("renameat2", "renameat"):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rename":
            found.append((node.lineno, ".rename()"))  # Path.rename: str has no rename
    return found


def test_fsync_replace_rename_and_truncate_appear_only_in_the_durability_module():
    offenders = []
    for folder in ("retained", "installers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "retained" / "durable.py" or ".venv" in path.parts:
                continue
            for line, what in durability_calls(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert offenders == [], "write through retained/durable.py instead:\n" + "\n".join(offenders)
    assert durability_calls((ROOT / "retained" / "durable.py").read_text(encoding="utf-8")), \
        "the check no longer sees the primitives it looks for"


@pytest.mark.parametrize("planted", [
    "import os\nos.replace(a, b)\n",
    "import os\ndef f(fd):\n    os.fsync(fd)\n",
    "from os import rename\n",
    "import os\nos.ftruncate(fd, 0)\n",
    "fn = libc.renameat2\n",
    "tmp.rename(target)\n",
])
def test_the_check_finds_a_planted_primitive(planted):
    assert durability_calls(planted)


# -- the abortable temp file ------------------------------------------------------------------------
@pytest.fixture
def folder(tmp_path) -> Path:
    """A folder of its own (tmp_path also holds the isolated home)."""
    path = tmp_path / "files"
    path.mkdir()
    return path


def test_an_exception_mid_write_leaves_the_target_byte_identical_and_no_temp_file(folder):
    target = folder / "notes.json"
    target.write_bytes(b'{"old": true}\n')
    with pytest.raises(RuntimeError, match="mid-write"), durable.atomic_file(target) as f:
        f.write(b'{"new": ')
        f.flush()
        raise RuntimeError("mid-write")
    assert target.read_bytes() == b'{"old": true}\n'
    assert [p.name for p in folder.iterdir()] == ["notes.json"]


def test_the_target_holds_the_old_bytes_until_the_block_ends_then_the_new_ones(folder):
    target = folder / "notes.json"
    target.write_bytes(b"old")
    with durable.atomic_file(target) as f:
        f.write(b"new")
        f.flush()
        assert target.read_bytes() == b"old"  # a reader meanwhile sees the whole old file
    assert target.read_bytes() == b"new"
    assert [p.name for p in folder.iterdir()] == ["notes.json"]


def test_the_mode_asked_for_is_the_mode_the_file_gets_whatever_the_umask(folder):
    old_umask = os.umask(0o027)
    try:
        durable.write_atomic(folder / "shared.txt", b"x", mode=0o664)
        durable.write_atomic(folder / "private.txt", b"x")
        durable.write_atomic(folder / "plain.txt", b"x", mode=None)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((folder / "shared.txt").stat().st_mode) == 0o664
    assert stat.S_IMODE((folder / "private.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "plain.txt").stat().st_mode) == 0o640  # None: the umask decides, as open does


def test_a_failed_fsync_leaves_the_old_file(folder, monkeypatch):
    target = folder / "f"
    target.write_bytes(b"old")

    def failing_fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(durable.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        durable.write_atomic(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and [p.name for p in folder.iterdir()] == ["f"]


def test_an_unsynced_replace_is_still_whole_or_nothing_and_costs_no_fsync(folder, monkeypatch):
    """sync=False (a cache such as a hook's session note): no fsync at all, yet a reader sees the old
    bytes or the new ones, and a failure mid-write leaves the old file and no temp file."""
    target = folder / "note.json"
    target.write_bytes(b"old")
    calls = []
    monkeypatch.setattr(durable.os, "fsync", lambda fd: calls.append(fd))
    with durable.atomic_file(target, sync=False) as f:
        f.write(b"new")
        f.flush()
        assert target.read_bytes() == b"old"
    assert target.read_bytes() == b"new" and calls == []
    with pytest.raises(RuntimeError, match="mid-write"), durable.atomic_file(target, sync=False) as f:
        f.write(b"ne")
        raise RuntimeError("mid-write")
    assert target.read_bytes() == b"new" and [p.name for p in folder.iterdir()] == ["note.json"]
    durable.write_atomic(target, b"newer")  # the default stays durable: the file and the directory
    assert target.read_bytes() == b"newer" and len(calls) == 2


def test_truncate_cuts_a_file_back(folder):
    path = folder / "log"
    path.write_bytes(b"whole line\ntorn")
    durable.truncate(path, 11)
    assert path.read_bytes() == b"whole line\n"


# -- the export -------------------------------------------------------------------------------------
@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """A real fault for every write of this process: past `limit` bytes a file cannot grow (EFBIG;
    Python ignores SIGXFSZ), as on a full disk or a quota. Whatever writes the file, it hits this."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.fixture
def memory(store_dir):
    with Store(store_dir) as s:
        for i in range(30):
            s.write(f"fact number {i} about the parser", kind="fact", scope="/src/lib")
        s.write("the build uses make", kind="decision", scope="/src/app")
    return store_dir


def test_jsonl_export_that_fails_mid_write_leaves_the_old_export_and_no_temp_file(memory, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "memory.jsonl"
    with Store(memory) as s:
        transfer.export(s, scopes=None, path=str(target))
        old = target.read_bytes()
        s.write("a record the old export lacks", scope="global")
        with file_size_limit(len(old) // 2), pytest.raises(StoreError, match=f"cannot write {target}: File too large"):
            transfer.export(s, scopes=None, path=str(target))
        assert target.read_bytes() == old
        assert [p.name for p in out.iterdir()] == ["memory.jsonl"]
        target.chmod(0o640)
        transfer.export(s, scopes=None, path=str(target))  # and with room, the new one, whole
    assert target.read_bytes().count(b"\n") == old.count(b"\n") + 1
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file it replaced kept its mode


def test_markdown_export_that_fails_mid_write_leaves_every_old_file_and_no_temp_file(memory, tmp_path):
    folder = tmp_path / "md"
    with Store(memory) as s:
        transfer.export(s, scopes=None, fmt="markdown", path=str(folder))
        old = {p.name: p.read_bytes() for p in folder.iterdir()}
        assert len(old) == 2
        s.write("a record the old export lacks", scope="/src/app")
        with file_size_limit(40), pytest.raises(OSError) as err:
            transfer.export(s, scopes=None, fmt="markdown", path=str(folder))
    assert err.value.errno == errno.EFBIG and Path(err.value.filename).parent == folder  # names the file, not a temp
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == old


def test_markdown_export_to_one_file_is_replaced_whole(memory, folder):
    target = folder / "app.md"
    with Store(memory) as s:
        transfer.export(s, scopes=["/src/app"], fmt="markdown", path=str(target))
        old = target.read_bytes()
        s.write("a record the old export lacks", scope="/src/app")
        with file_size_limit(len(old) - 1), pytest.raises(OSError):
            transfer.export(s, scopes=["/src/app"], fmt="markdown", path=str(target))
        assert target.read_bytes() == old and [p.name for p in folder.iterdir()] == ["app.md"]
        transfer.export(s, scopes=["/src/app"], fmt="markdown", path=str(target))
    assert b"a record the old export lacks" in target.read_bytes()


# -- the hook's session note ------------------------------------------------------------------------
CRASHING_HOOK = """
import os, sys
from retained import cli, durable

def crash(src, dst, **kw):  # the process dies after the new note is written, before the rename
    os._exit(137)

durable.replace = crash
sys.exit(cli.main(sys.argv[1:]))
"""


def _pre_compact(store_dir: Path, payload: dict, *python: str) -> subprocess.CompletedProcess[str]:
    """`retained hook pre-compact` in a fresh interpreter (`python`: what it runs instead of -m retained)."""
    return subprocess.run([sys.executable, *(python or ("-m", "retained")), "hook", "pre-compact", "--host", "claude"],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, RETAINED_DIR=str(store_dir)), cwd=ROOT)


def test_a_crash_between_writing_the_session_note_and_its_rename_leaves_the_old_note(store_dir, tmp_path):
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text('{"type": "user"}\n')
    payload = {"session_id": "crash-1", "transcript_path": str(transcript), "cwd": str(tmp_path),
               "hook_event_name": "PreCompact", "trigger": "auto"}
    assert _pre_compact(store_dir, payload).returncode == 0
    [note] = (store_dir / "sessions").iterdir()
    old = note.read_bytes()
    assert json.loads(old)["compactions"] == 1

    transcript.write_text('{"type": "user"}\n{"type": "assistant"}\n')  # the next compaction
    crashed = _pre_compact(store_dir, payload, "-c", CRASHING_HOOK)
    assert crashed.returncode == 137, crashed.stderr  # it died where the note goes through durable.py
    assert note.read_bytes() == old  # the old note, whole: the crash cost the new one only

    assert _pre_compact(store_dir, payload).returncode == 0  # the hook runs on after the crash
    assert json.loads(note.read_bytes())["compactions"] == 2
