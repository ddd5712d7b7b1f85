"""What doctor learns about each host's own memory: switched on or off, where, how big, what loads at start."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from retained.installers.hosts import native_memory
from retained.installers.hosts.claude import project_dirname as claude_project_dirname

FIXTURES = Path(__file__).parent / "fixtures" / "native"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), **extra}


def test_claude_auto_memory_is_on_by_default_and_measured(isolate_home, tmp_path):
    cwd = tmp_path / "work"
    folder = isolate_home / ".claude" / "projects" / claude_project_dirname(cwd.resolve())
    shutil.copytree(FIXTURES / "claude" / "projects" / "PROJECT", folder)
    report = native_memory("claude", _env(isolate_home), cwd=str(cwd))
    assert report["enabled"] is True and report["why"] == "on by default"
    assert report["files"] == 4 and report["project_files"] == 4
    assert report["bytes"] == sum(p.stat().st_size for p in (folder / "memory").glob("*.md"))
    assert report["location"] == str(folder / "memory")
    assert str(folder / "memory" / "MEMORY.md") in report["loaded_at_start"]
    assert "retained import --from claude" in report["fix"]


def test_claude_auto_memory_off_by_setting_or_environment(isolate_home):
    (isolate_home / ".claude").mkdir()
    (isolate_home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    report = native_memory("claude", _env(isolate_home))
    assert report["enabled"] is False and "autoMemoryEnabled" in report["why"]
    report = native_memory("claude", _env(isolate_home, CLAUDE_CODE_DISABLE_AUTO_MEMORY="0"))
    assert report["enabled"] is True
    (isolate_home / ".claude" / "settings.json").write_text("{}")
    report = native_memory("claude", _env(isolate_home, CLAUDE_CODE_DISABLE_AUTO_MEMORY="1"))
    assert report["enabled"] is False and "CLAUDE_CODE_DISABLE_AUTO_MEMORY" in report["why"]


def test_codex_memories_follow_the_feature_flag(isolate_home):
    shutil.copytree(FIXTURES / "codex", isolate_home / ".codex")
    report = native_memory("codex", _env(isolate_home))
    assert report["enabled"] is False and report["files"] == 4
    (isolate_home / ".codex" / "config.toml").write_text("[features]\nmemories = true\n")
    report = native_memory("codex", _env(isolate_home))
    assert report["enabled"] is True and report["loaded_at_start"][0].endswith("memory_summary.md")
    (isolate_home / ".codex" / "config.toml").write_text("[features]\nmemories = true\n[memories]\nuse_memories = false\n")
    assert native_memory("codex", _env(isolate_home))["enabled"] is False
    alt = isolate_home / "elsewhere"
    shutil.copytree(FIXTURES / "codex", alt)
    assert native_memory("codex", _env(isolate_home, CODEX_HOME=str(alt)))["location"] == str(alt / "memories")


def test_gemini_memory_files_are_counted(isolate_home):
    shutil.copytree(FIXTURES / "gemini", isolate_home / ".gemini")
    report = native_memory("gemini", _env(isolate_home))
    assert report["enabled"] is True and report["files"] == 3
    assert report["loaded_at_start"] == [str(isolate_home / ".gemini" / "GEMINI.md")]


def test_hosts_without_a_memory_of_their_own_report_none(isolate_home):
    assert native_memory("cursor", _env(isolate_home)) is None
    assert native_memory("vscode", dict(os.environ)) is None


def test_the_brief_leaves_out_what_the_host_loads_itself_while_the_file_still_holds_it(isolate_home, tmp_path):
    import subprocess

    from tests.conftest import cli_json, run_cli

    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    project = project.resolve()
    shutil.copy(FIXTURES / "CLAUDE.md", project / "CLAUDE.md")
    folder = isolate_home / ".claude" / "projects" / claude_project_dirname(project)
    shutil.copytree(FIXTURES / "claude" / "projects" / "PROJECT", folder)
    assert cli_json("import", str(project / "CLAUDE.md"), "--apply", cwd=str(project))["added"] == 6
    assert cli_json("import", "--from", "claude", "--apply", cwd=str(project))["added"] == 4
    run_cli("write", "the nightly job runs at 02:00", "--kind", "fact", cwd=str(project))

    claude = {"CLAUDECODE": "1"}
    brief = cli_json("brief", cwd=str(project), env=claude)
    text = brief["text"]
    assert brief["host_loaded"] == 7  # 6 from CLAUDE.md, 1 direct entry of MEMORY.md
    assert "7 already in the host's own memory files" in text.splitlines()[0]
    assert "imperative mood" not in text and "no network access after the setup step" not in text
    assert "the nightly job runs at 02:00" in text
    assert "real database, not mocks" in text  # a topic file: Claude Code does not load it at start

    # Once the file no longer holds the item, the brief carries it again.
    md = (project / "CLAUDE.md").read_text().replace("- Always write commit messages in the imperative mood.\n", "")
    (project / "CLAUDE.md").write_text(md)
    brief = cli_json("brief", cwd=str(project), env=claude)
    assert brief["host_loaded"] == 6 and "imperative mood" in brief["text"]


def test_a_hosts_own_memory_counts_as_already_loaded_only_for_the_host_that_loads_it(isolate_home, tmp_path):
    """CLAUDE.md and Claude Code's MEMORY.md are in Claude Code's sessions already; a Codex session loads
    neither, so its brief carries what was imported from them."""
    import subprocess

    from tests.conftest import cli_json, run_cli

    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    project = project.resolve()
    shutil.copy(FIXTURES / "CLAUDE.md", project / "CLAUDE.md")
    assert cli_json("import", str(project / "CLAUDE.md"), "--apply", cwd=str(project))["added"] == 6
    assert cli_json("brief", cwd=str(project), env={"CLAUDECODE": "1"})["host_loaded"] == 6
    codex = cli_json("brief", cwd=str(project), env={"CODEX_MANAGED_BY_NPM": "1"})
    assert codex["host_loaded"] == 0 and "imperative mood" in codex["text"]
    start = {"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    for host, held in (("codex", True), ("claude", False)):
        out = run_cli("hook", "session-start", "--host", host, input=json.dumps(start), cwd=str(project),
                      env={"CLAUDE_PROJECT_DIR": str(project)})
        assert out.returncode == 0 and ("imperative mood" in out.stdout) is held, (host, out.stdout)


def test_doctor_finds_claude_auto_memory_where_claude_code_keeps_it_for_a_repository_with_a_remote_and_its_worktree(
        isolate_home, tmp_path):
    """Claude Code names the folder after the repository's main checkout, not after retained's scope (the
    remote's URL) and not after a linked worktree."""
    import subprocess

    repo = (tmp_path / "shop").resolve()
    repo.mkdir()
    env = {**os.environ, "HOME": str(isolate_home), "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str, cwd: Path = repo) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    git("remote", "add", "origin", "git@github.com:acme/shop.git")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    git("worktree", "add", "-q", str(tmp_path / "shop-wt"))
    folder = isolate_home / ".claude" / "projects" / claude_project_dirname(repo)
    shutil.copytree(FIXTURES / "claude" / "projects" / "PROJECT", folder)
    for cwd in (repo, repo, tmp_path / "shop-wt"):
        report = native_memory("claude", _env(isolate_home), cwd=str(cwd))
        assert report["location"] == str(folder / "memory") and report["project_files"] == 4, report
