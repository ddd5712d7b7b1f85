"""retained doctor: healthy wiring passes; each broken case fails, is named, and comes with a fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture
def installed(isolate_home, store_dir):
    proc = run_cli("install", "--yes", "--host", "claude", "--host", "codex")
    assert proc.returncode == 0, proc.stderr
    run_cli("write", "a healthy record")
    return isolate_home


def doctor(*args, env=None):
    return run_cli("doctor", "--host", "claude", "--host", "codex", *args, env=env)


def snapshot(*roots: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
            for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


def test_healthy_sandbox_passes_and_changes_no_file(installed, store_dir):
    """Doctor is read-only: no config, and no file of the store (not even the derived index)."""
    run_cli("search", "healthy")  # an index exists ...
    run_cli("write", "a record the index has not seen yet")  # ... and is one record behind
    before = snapshot(installed, store_dir)
    proc = doctor(env={"CLAUDE_CODE_SESSION_ID": "a-session-doctor-runs-inside"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✗" not in proc.stdout and "server starts and answers" in proc.stdout
    assert "hook trusted" in proc.stdout and "session-start hook prints the brief" in proc.stdout
    assert snapshot(installed, store_dir) == before


def test_doctor_creates_no_index_where_there_is_none(installed, store_dir):
    for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):  # writes index themselves now
        (store_dir / name).unlink(missing_ok=True)
    before = snapshot(installed, store_dir)
    assert doctor().returncode == 0
    assert snapshot(installed, store_dir) == before


def test_damaged_index_is_named(installed, store_dir):
    import sqlite3

    run_cli("search", "healthy")
    db = sqlite3.connect(store_dir / "index.sqlite3")
    db.execute("UPDATE records SET sha256 = ? WHERE seq = 1", ("0" * 64,))
    db.commit()
    db.close()
    _fails(doctor(), "index covers the log")


def test_json_output(installed):
    data = json.loads(doctor("--json").stdout)
    assert data["ok"] is True and all(c["ok"] for c in data["checks"])
    assert {c["host"] for c in data["checks"]} == {"claude", "codex", "store"}


def _fails(proc, needle):
    assert proc.returncode != 0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("✗") and needle in ln), None)
    assert line, proc.stdout
    after = proc.stdout.split(line + "\n", 1)[1].splitlines()
    assert after and after[0].strip().startswith("fix:"), proc.stdout


def test_missing_command_is_named(installed):
    path = installed / ".claude.json"
    doc = json.loads(path.read_text())
    doc["mcpServers"]["retained"]["command"] = "/nonexistent/bin/retained"
    path.write_text(json.dumps(doc))
    _fails(doctor(), "server command exists and is executable")


def test_missing_codex_trust_is_named(installed):
    config = installed / ".codex" / "config.toml"
    config.write_text(re.sub(r'trusted_hash = "sha256:[0-9a-f]+"', 'trusted_hash = "sha256:00"', config.read_text()))
    _fails(doctor(), "hook trusted")


def test_corrupt_log_is_named(installed, store_dir):
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(b"not a record\n")
    _fails(doctor(), "log verifies")


def test_unwritable_store_is_named(installed, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    _fails(doctor(env={"RETAINED_DIR": str(blocker / "store")}), "store directory is writable")


def test_unparsable_config_is_named(installed):
    (installed / ".claude.json").write_text("{ broken")
    _fails(doctor(), ".claude.json parses")
