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


# -- doctor tells the truth ---------------------------------------------------------------------------
def test_a_corrupt_non_default_store_is_reported_by_plain_doctor(isolate_home, tmp_path, store_dir):
    """Installed with --dir X: plain `retained doctor` (the shell's store is healthy) checks X."""
    wired = tmp_path / "wired-store"
    assert run_cli("--dir", str(wired), "install", "--yes", "--host", "claude").returncode == 0
    run_cli("--dir", str(wired), "write", "a record in the wired store")
    run_cli("write", "the shell's store is healthy")
    with open(wired / "log.jsonl", "ab") as f:
        f.write(b"not a record\n")
    proc = doctor()
    _fails(proc, "log verifies")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("✗") and "log verifies" in ln)
    assert str(wired) in line and "claude" in line  # which store, and who opens it


def test_no_host_wired_is_a_failure_with_the_install_hint(isolate_home):
    (isolate_home / ".cursor").mkdir()  # a host is there, but retained is not wired into it
    proc = run_cli("doctor", env={"PATH": "/nonexistent"})
    assert proc.returncode == 1
    assert "✗ hosts: a host is wired" in proc.stdout and "fix: retained install" in proc.stdout


def test_nothing_at_all_is_a_failure_too(isolate_home):
    proc = run_cli("doctor", env={"PATH": "/nonexistent"})
    assert proc.returncode == 1 and "retained install" in proc.stdout


def test_project_scope_checks_the_project_files_and_hints_a_project_install(isolate_home, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert run_cli("install", "--yes", "--host", "claude").returncode == 0  # user scope only
    proc = run_cli("doctor", "--scope", "project", "--host", "claude", cwd=str(repo))
    assert proc.returncode == 1
    assert f"{repo}/.mcp.json" in proc.stdout and "fix: retained install --host claude --scope project" in proc.stdout
    assert run_cli("install", "--yes", "--scope", "project", "--host", "claude", cwd=str(repo)).returncode == 0
    ok = run_cli("doctor", "--scope", "project", "--host", "claude", cwd=str(repo))
    assert ok.returncode == 0, ok.stdout


def test_gemini_untrusted_folder_is_named_with_the_fix(isolate_home, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (isolate_home / ".gemini").mkdir()
    assert run_cli("install", "--yes", "--host", "gemini", cwd=str(repo)).returncode == 0
    proc = run_cli("doctor", "--host", "gemini", cwd=str(repo))
    _fails(proc, "folder is trusted")
    assert "TRUST_FOLDER" in proc.stdout
    (isolate_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))
    assert run_cli("doctor", "--host", "gemini", cwd=str(repo)).returncode == 0


def test_a_codex_hook_whose_trust_hash_no_longer_matches_is_named(installed):
    hooks = installed / ".codex" / "hooks.json"
    doc = json.loads(hooks.read_text())
    doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] = 31  # edited by hand after install
    hooks.write_text(json.dumps(doc, indent=2))
    _fails(doctor(), "hook trusted")


def test_a_disabled_codex_entry_is_named(installed):
    config = installed / ".codex" / "config.toml"
    config.write_text(config.read_text().replace('args = ["serve"]', 'args = ["serve"]\nenabled = false', 1))
    _fails(doctor(), "server entry is enabled")


def test_claude_entry_without_always_load_is_named(installed):
    path = installed / ".claude.json"
    doc = json.loads(path.read_text())
    del doc["mcpServers"]["retained"]["alwaysLoad"]
    path.write_text(json.dumps(doc))
    _fails(doctor(), "alwaysLoad")


def test_hosts_checked_side_by_side_each_use_their_own_environment(isolate_home, tmp_path, monkeypatch):
    """Doctor checks hosts in threads. Each check works with the environment it is given (here two
    users' data folders, which decide the store of a project install that names none) and reports the
    stores that environment opens; none of them writes to os.environ, during the checks or after."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from retained.installers.doctor import doctor_host
    from retained.installers.hosts import get
    from retained.paths import store_dir

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.delenv("RETAINED_DIR")
    proc = run_cli("install", "--yes", "--scope", "project", "--host", "claude", "--host", "cursor", cwd=str(repo))
    assert proc.returncode == 0, proc.stderr
    assert "RETAINED_DIR" not in (repo / ".mcp.json").read_text()  # each user's default store decides
    envs = {who: dict(os.environ, XDG_DATA_HOME=str(tmp_path / f"data-{who}")) for who in ("ann", "bob")}
    before = dict(os.environ)
    writes: list[str] = []  # every change of os.environ, from any thread, while the checks run
    environ = type(os.environ)
    real_set, real_del = environ.__setitem__, environ.__delitem__
    jobs = [(get(name), who) for name in ("claude", "cursor") for who in envs]
    with pytest.MonkeyPatch.context() as watch, ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        watch.setattr(environ, "__setitem__", lambda self, k, v: (writes.append(f"set {k}"), real_set(self, k, v)))
        watch.setattr(environ, "__delitem__", lambda self, k: (writes.append(f"del {k}"), real_del(self, k)))
        reports = list(pool.map(lambda job: doctor_host(job[0], store_dir(None, envs[job[1]]).absolute(), repo,
                                                        "project", envs[job[1]]), jobs))
    assert writes == [] and dict(os.environ) == before
    for (host, who), report in zip(jobs, reports, strict=False):
        assert set(report.stores) == {str(tmp_path / f"data-{who}" / "retained")}, (host.name, who, report.stores)
        failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
        assert not failed, (host.name, who, failed)
