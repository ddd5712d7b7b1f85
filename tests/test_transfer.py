"""Export and import through the real CLI: jsonl round trips without loss, Markdown reads well, every
native format in tests/fixtures/native imports, a second import adds nothing, a dry run writes nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from retained.installers.hosts.claude import project_dirname as claude_project_dirname
from retained.store import Store
from tests.conftest import cli_json, log_lines, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "native"


def _git_project(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path.resolve()


def _tree_digest(directory: Path) -> dict[str, str]:
    if not directory.exists():
        return {}
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _chains(store_dir: Path) -> dict[str, tuple]:
    with Store(store_dir) as s:
        rows = s.list(scopes=None, limit=500, include_superseded=True)["records"]
    return {r["id"]: (r["kind"], r["scope"], r["text"], r.get("supersedes"), r.get("superseded_by")) for r in rows}


def _current(store_dir: Path) -> list[tuple]:
    with Store(store_dir) as s:
        rows = s.list(scopes=None, limit=500)["records"]
    return sorted((r["id"], r["kind"], r["scope"], r["text"]) for r in rows)


@pytest.fixture
def filled(store_dir):
    with Store(store_dir) as s:
        a = s.write("the build uses make", kind="decision", scope="/src/app", fields={"ticket": "T-1", "nested": {"x": [1, 2]}})
        b = s.write("the build uses tox", kind="decision", scope="/src/app", supersedes=a["id"])
        s.write("the build uses nox", kind="decision", scope="/src/app", supersedes=b["id"])
        s.write("prefers short commit messages", kind="preference", scope="global", source="chat")
        s.write("<script>alert(1)</script> is stored as text", kind="note", scope="/src/app")
        for i in range(20):
            s.write(f"fact number {i} about the parser", kind="fact", scope="/src/lib")
    return store_dir


def test_jsonl_export_then_import_into_an_empty_store_keeps_current_memory_chains_and_verifies(filled, tmp_path):
    out = tmp_path / "export.jsonl"
    proc = run_cli("export", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "exported 25 records" in proc.stdout
    # Verbatim: the exported lines are the log's own bytes.
    assert out.read_bytes().splitlines(keepends=True) == log_lines(filled)

    other = tmp_path / "other"
    proc = run_cli("import", str(out), "--apply", "--dir", str(other))
    assert proc.returncode == 0, proc.stderr
    assert "added 25" in proc.stdout
    assert _current(other) == _current(filled)
    assert _chains(other) == _chains(filled)
    v = cli_json("verify", "--dir", str(other))
    assert v["intact"] is True and v["records"] == 25

    # Each record was re-appended to this chain and says where it came from.
    with Store(other) as s:
        original = {json.loads(line)["id"]: json.loads(line) for line in log_lines(filled)}
        for rec in s.get(None, limit=500)["records"]:
            src = original[rec["id"]]
            assert rec["imported"]["from"] == str(out)
            assert rec["imported"]["sha256"] == src["sha256"] and rec["imported"]["seq"] == src["seq"]
            assert rec["ts"] == src["ts"] and rec.get("supersedes") == src.get("supersedes")


def test_jsonl_round_trip_keeps_unknown_fields(filled, tmp_path):
    out = tmp_path / "export.jsonl"
    run_cli("export", "-o", str(out), "--scope", "/src/app")
    other = tmp_path / "other"
    run_cli("import", str(out), "--apply", "--dir", str(other))
    again = tmp_path / "again.jsonl"
    run_cli("export", "-o", str(again), "--dir", str(other))
    first = [json.loads(line) for line in out.read_text().splitlines()]
    second = [json.loads(line) for line in again.read_text().splitlines()]
    assert len(first) == len(second) == 4
    for a, b in zip(first, second, strict=True):
        for key in set(a) - {"seq", "prev", "sha256", "hlc"}:  # a place in this store: its chain and its clock
            assert b[key] == a[key], key
    assert second[0]["ticket"] == "T-1" and second[0]["nested"] == {"x": [1, 2]}


def test_second_import_of_an_export_adds_nothing(filled, tmp_path):
    out = tmp_path / "export.jsonl"
    run_cli("export", "-o", str(out))
    other = tmp_path / "other"
    run_cli("import", str(out), "--apply", "--dir", str(other))
    before = log_lines(other)
    data = cli_json("import", str(out), "--apply", "--dir", str(other))
    assert data["added"] == 0 and data["already"] == 25
    assert log_lines(other) == before


def test_dry_run_writes_nothing_not_even_a_store(tmp_path):
    target = tmp_path / "never"
    data = cli_json("import", str(FIXTURES / "CLAUDE.md"), "--dir", str(target))
    assert data["dry_run"] is True and data["would_add"] >= 5
    assert not target.exists()


def test_dry_run_on_an_existing_store_changes_no_file(filled, tmp_path):
    before = _tree_digest(filled)
    data = cli_json("import", str(FIXTURES / "AGENTS.md"))
    assert data["dry_run"] is True and data["would_add"] == 5
    assert [a["action"] for a in data["actions"]] == ["add"] * 5
    assert _tree_digest(filled) == before


def test_markdown_export_is_one_file_per_project_grouped_by_kind_with_ids_and_dates(filled, tmp_path):
    out = tmp_path / "md"
    proc = run_cli("export", "--format", "markdown", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["app.md", "global.md", "lib.md"]
    app = (out / "app.md").read_text()
    assert app.startswith("# Memory: app")
    assert "## Decisions (1)" in app and "the build uses nox" in app
    assert "the build uses make" not in app  # superseded: not current memory
    assert "## Notes (1)" in app
    # Stored markup is quoted, never live.
    assert "<script>" not in app and "&lt;script&gt;" in app
    with Store(filled) as s:
        rid = s.list(scopes=["global"])["records"][0]["id"]
    glob = (out / "global.md").read_text()
    assert f"`{rid}`" in glob and "## Preferences (1)" in glob
    assert "(`" in glob and ", 20" in glob  # id and date on the item


def test_markdown_export_of_one_scope_to_one_file(filled, tmp_path):
    out = tmp_path / "lib.md"
    proc = run_cli("export", "--format", "markdown", "--scope", "/src/lib", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "## Facts (20)" in text and text.count("\n- ") == 20
    proc = run_cli("export", "--format", "markdown", "-o", str(tmp_path / "all.md"))
    assert proc.returncode == 2 and "-o names one file" in proc.stderr


def test_claude_md_sections_and_bullets_become_records_of_fitting_kinds(tmp_path):
    project = _git_project(tmp_path / "proj")
    shutil.copy(FIXTURES / "CLAUDE.md", project / "CLAUDE.md")
    data = cli_json("import", str(project / "CLAUDE.md"), "--apply")
    assert data["added"] == 6  # not the sentence about the file itself ("This file gives Claude Code guidance...")
    assert not any(a["text"].startswith("This file") for a in data["actions"])
    by_text = {a["text"]: a for a in data["actions"]}
    assert by_text["Always write commit messages in the imperative mood."]["kind"] == "convention"
    assert by_text["We chose SQLite over Postgres for the local index (2026-10-02)."]["kind"] == "decision"
    assert "Use 4-space indentation in Python files.\nTabs are only allowed in Makefiles." in by_text
    prose = next(t for t in by_text if t.startswith("The server is a single process."))
    assert "make serve" in prose and by_text[prose]["section"].endswith("Architecture")
    assert not any("internal note" in t or t.startswith("@") for t in by_text)
    assert {a["scope"] for a in data["actions"]} == {str(project)}
    rec = cli_json("get", data["receipts"][0]["id"])["records"][0]
    assert rec["source"] == str(project / "CLAUDE.md")
    assert rec["imported"]["format"] == "claude-md" and rec["imported"]["host_loaded"] is True
    again = cli_json("import", str(project / "CLAUDE.md"), "--apply")
    assert again["added"] == 0 and again["already"] == 6


def test_agents_md_and_gemini_md_import(tmp_path):
    project = _git_project(tmp_path / "proj")
    for name in ("AGENTS.md", "GEMINI.md"):
        shutil.copy(FIXTURES / name, project / name)
    agents = cli_json("import", str(project / "AGENTS.md"), "--apply")
    assert agents["added"] == 5
    assert {a["kind"] for a in agents["actions"] if "Testing" in a.get("section", "")} == {"convention"}
    gemini = cli_json("import", str(project / "GEMINI.md"), "--apply")
    kinds = {a["text"]: a["kind"] for a in gemini["actions"]}
    assert kinds["The user's preferred test runner is vitest."] == "preference"
    assert kinds["Ensure all new functions and classes have JSDoc comments."] == "convention"


def test_claude_code_auto_memory_imports_topic_files_and_direct_index_entries(isolate_home, tmp_path):
    project = _git_project(tmp_path / "proj")
    folder = isolate_home / ".claude" / "projects" / claude_project_dirname(project)
    shutil.copytree(FIXTURES / "claude" / "projects" / "PROJECT", folder)
    data = cli_json("import", "--from", "claude", cwd=str(project))
    assert data["dry_run"] and data["would_add"] == 4
    kinds = {a["text"].split("\n")[0]: a["kind"] for a in data["actions"]}
    assert kinds["The user is a senior backend engineer who is new to the frontend code"] == "preference"
    assert kinds["Integration tests must hit a real database, not mocks."] == "convention"
    assert kinds["Merge freeze for the mobile release starting 2026-12-10"] == "fact"
    assert kinds["The CI runners have no network access after the setup step."] == "fact"
    assert not any(a["text"].startswith("[") for a in data["actions"])  # index pointers are not memories
    assert {a["scope"] for a in data["actions"]} == {str(project)}
    applied = cli_json("import", "--from", "claude", "--apply", cwd=str(project))
    assert applied["added"] == 4
    assert cli_json("import", "--from", "claude", "--apply", cwd=str(project))["added"] == 0
    hits = cli_json("search", "real database mocks", cwd=str(project))["hits"]
    assert hits and hits[0]["kind"] == "convention"


def test_codex_memories_import_summary_and_handbook_not_evidence(isolate_home):
    shutil.copytree(FIXTURES / "codex", isolate_home / ".codex")
    data = cli_json("import", "--from", "codex")
    texts = [a["text"] for a in data["actions"]]
    assert data["would_add"] == 7
    assert "Prefers small commits with a one-line summary and a why in the body." in texts
    assert not any("rollout_summaries/" in t or "thread 0190aaaa" in t or "clippy, needless_borrow" in t for t in texts)
    kinds = {a["text"][:20]: (a["kind"], a["scope"]) for a in data["actions"]}
    assert kinds["Prefers small commit"] == ("preference", "global")
    assert kinds["The parser's error e"] == ("fact", "/home/dev/src/cli")
    assert cli_json("import", "--from", "codex", "--apply")["added"] == 7
    assert cli_json("import", "--from", "codex", "--apply")["added"] == 0


def test_gemini_cli_memories_import_global_and_private_project_memory(isolate_home, tmp_path):
    project = _git_project(tmp_path / "proj")
    base = isolate_home / ".gemini"
    shutil.copytree(FIXTURES / "gemini", base)
    (base / "tmp" / "PROJECT" / ".project_root").write_text(str(project))
    (base / "projects.json").write_text(json.dumps({"projects": {str(project): "PROJECT"}}))
    data = cli_json("import", "--from", "gemini")
    got = {a["text"].split("\n")[0]: (a["kind"], a["scope"]) for a in data["actions"]}
    assert got["My preferred language for scripts is Python 3.12."] == ("preference", "global")
    assert got["I work in the Europe/Berlin time zone."] == ("fact", "global")
    assert got["My local Postgres runs on port 5433, not 5432."][1] == str(project)
    assert any(t.startswith("# Local setup") for t in got)
    assert data["would_add"] == 4
    assert cli_json("import", "--from", "gemini", "--apply")["added"] == 4
    assert cli_json("import", "--from", "gemini", "--apply")["added"] == 0


def test_imported_text_is_redacted_like_any_write(tmp_path):
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    md = tmp_path / "AGENTS.md"
    md.write_text(f"# Notes\n\n- The deploy token is {secret} for now.\n")
    data = cli_json("import", str(md), "--apply", "--scope", "global")
    assert data["added"] == 1
    rec = cli_json("get", data["receipts"][0]["id"])["records"][0]
    assert secret not in rec["text"] and "[REDACTED:github_token]" in rec["text"]
    assert any("redacted" in w for w in data["receipts"][0]["warnings"])

    export = tmp_path / "e.jsonl"
    line = {"id": "mem_X1", "kind": "note", "text": f"key {secret}", "ts": "2026-01-01T00:00:00.000000Z"}
    export.write_text(json.dumps(line) + "\n")
    data = cli_json("import", str(export), "--apply", "--dir", str(tmp_path / "s2"))
    assert data["added"] == 1
    stored = (tmp_path / "s2" / "log.jsonl").read_text()
    assert secret not in stored and "mem_X1" in stored


def test_import_scope_files_everything_under_it(tmp_path):
    data = cli_json("import", str(FIXTURES / "AGENTS.md"), "--scope", "/team/web", "--apply")
    assert {a["scope"] for a in data["actions"]} == {"/team/web"}


def test_import_needs_one_source(tmp_path):
    proc = run_cli("import")
    assert proc.returncode == 2 and "PATH or --from SOURCE" in proc.stderr
    proc = run_cli("import", str(tmp_path / "missing.md"))
    assert proc.returncode == 1 and "does not exist" in proc.stderr


def test_purged_records_export_as_tombstones_and_retracted_ones_only_with_history(store_dir, tmp_path):
    with Store(store_dir) as s:
        keep = s.write("kept fact", kind="fact", scope="global")
        gone = s.write("purged secret words here", kind="fact", scope="global")
        hide = s.write("retracted opinion", kind="note", scope="global")
        s.purge([gone["id"]], "leaked")
        s.forget([hide["id"]], "wrong")
    out = tmp_path / "plain.jsonl"
    run_cli("export", "-o", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    ids = [r["id"] for r in lines]
    assert keep["id"] in ids and hide["id"] not in ids
    tomb = next(r for r in lines if r["id"] == gone["id"])
    assert "text" not in tomb and tomb["forgotten"]["by"]
    assert "purged secret" not in out.read_text()
    assert not any(r["kind"] == "forget" for r in lines)

    full = tmp_path / "full.jsonl"
    data = cli_json("export", "-o", str(full), "--include-history")
    assert data["retracted"] == 1 and data["tombstones"] == 1
    lines = [json.loads(line) for line in full.read_text().splitlines()]
    assert hide["id"] in [r["id"] for r in lines] and sum(r["kind"] == "forget" for r in lines) == 2

    # Into an empty store: the retraction comes along (ids kept), the tombstone has nothing to bring.
    other = tmp_path / "other"
    result = cli_json("import", str(full), "--apply", "--dir", str(other))
    assert any("tombstone" in n for n in result["notes"])
    texts = [r["text"] for r in cli_json("list", "--scope", "*", "--dir", str(other))["records"]]
    assert texts == ["kept fact"]
    assert cli_json("get", hide["id"], "--dir", str(other))["records"][0]["retracted"]["reason"] == "wrong"
    assert cli_json("verify", "--dir", str(other))["intact"] is True

    md = run_cli("export", "--format", "markdown", "--include-history").stdout
    assert "purged, no content kept" in md and "retracted opinion" in md and "purged secret" not in md
    assert "retracted opinion" not in run_cli("export", "--format", "markdown").stdout


def test_a_codex_memory_folder_in_another_layout_imports_its_bullet_points(isolate_home):
    """Codex writes MEMORY.md from a template that changed many times: front matter, other headings, no
    task groups. Every bullet point is taken, less a task's evidence (rollout files, keywords)."""
    folder = isolate_home / ".codex" / "memories"
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(
        "---\ntitle: Codex memory\nupdated: 2026-11-30\n---\n\n# Learnings\n\n"
        "- The staging database is reset every Monday at 06:00 UTC.\n"
        "- Run `make lint` before pushing; CI rejects unformatted code.\n\n"
        "## Preferences\n\n- The user wants answers in British English.\n\n"
        "## Session 12\n\nSome prose about the session, not a memory.\n\n### keywords\n\n- lint, staging\n")
    data = cli_json("import", "--from", "codex")
    got = {a["text"]: a["kind"] for a in data["actions"]}
    assert set(got) == {"The staging database is reset every Monday at 06:00 UTC.",
                        "Run `make lint` before pushing; CI rejects unformatted code.",
                        "The user wants answers in British English."}, got
    assert got["The user wants answers in British English."] == "preference"
    assert any("keywords" in n for n in data["notes"])


def test_markdown_tables_titles_and_code_blocks_are_read_as_what_they_are(tmp_path):
    project = _git_project(tmp_path / "proj")
    (project / "CLAUDE.md").write_text(
        "# Shop backend\n\nThis file provides guidance to Claude Code when working with code in this repository.\n\n"
        "**Shop backend**\n\n## Decisions\n\nThe decisions so far:\n\n"
        "| Date | Decision | Why |\n|------|----------|-----|\n"
        "| 2026-10-02 | Use SQLite for the local index | one file, no server |\n"
        "| 2026-11-01 | Drop IE11 support | under 0.1% of visits |\n\n"
        "```bash\nmake migrate\n```\n")
    data = cli_json("import", str(project / "CLAUDE.md"))
    got = [(a["kind"], a["text"]) for a in data["actions"]]
    assert got == [("decision", "Date: 2026-10-02; Decision: Use SQLite for the local index; Why: one file, no server"),
                   ("decision", "Date: 2026-11-01; Decision: Drop IE11 support; Why: under 0.1% of visits"),
                   ("fact", "```bash\nmake migrate\n```")], got
