"""retained install / uninstall: exact bytes, idempotent, reversible, and never harmful to a config."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

FIX = Path(__file__).parent / "fixtures" / "installers"
ALL = ["claude", "codex", "cursor", "vscode", "gemini"]

# (fixture, path under HOME, expected fixture) for each file install edits
FILES = {
    "claude": [("claude.json", ".claude.json", "claude.json"),
               ("claude-settings.json", ".claude/settings.json", "claude-settings.json")],
    "codex": [("codex.toml", ".codex/config.toml", "codex.toml"), (None, ".codex/hooks.json", "codex-hooks.json")],
    "cursor": [("cursor-mcp.json", ".cursor/mcp.json", "cursor-mcp.json"), (None, ".cursor/hooks.json", "cursor-hooks.json")],
    "vscode": [("vscode-mcp.jsonc", ".config/Code/User/mcp.json", "vscode-mcp.jsonc"),
               ("claude-settings.json", ".claude/settings.json", "vscode-claude-settings.json")],
    "gemini": [("gemini-settings.json", ".gemini/settings.json", "gemini-settings.json")],
}


def reference_trust_hash(event, matcher, command, timeout):
    """The algorithm from the hosts reference (3.6), written out independently of installers/codex_trust.py."""
    label = {"SessionStart": "session_start", "Stop": "stop", "UserPromptSubmit": "user_prompt_submit",
             "PreCompact": "pre_compact"}[event]
    handler = {"type": "command", "command": command, "timeout": timeout, "async": False}
    ident = {"event_name": label, "hooks": [handler]}
    if matcher is not None and event not in ("Stop", "UserPromptSubmit"):
        ident["matcher"] = matcher
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def command_path() -> str:
    script = Path(sys.executable).with_name("retained")
    return str(script.absolute()) if script.exists() else str(Path(sys.executable).absolute())


def expected(name: str, home: Path, store: Path) -> bytes:
    cmd = command_path()
    text = (FIX / "expected" / name).read_bytes().decode()
    hook = cmd if cmd.endswith("retained") else f"{cmd} -m retained"
    hook = f"{hook} --dir {store}"  # every hook names the store it was installed with
    text = text.replace("@CMD@ hook", f"{hook} hook")
    if not cmd.endswith("retained"):
        text = text.replace('"args": [\n        "serve"', '"args": [\n        "-m",\n        "retained",\n        "serve"')
    text = text.replace("@CMD@", cmd).replace("@STORE@", str(store)).replace("@HOME@", str(home))
    text = text.replace("@HASH_SESSION_START@", reference_trust_hash(
        "SessionStart", "startup|resume|clear", f"{hook} hook session-start --host codex", 30))
    text = text.replace("@HASH_STOP@", reference_trust_hash("Stop", None, f"{hook} hook stop --host codex", 30))
    text = text.replace("@HASH_PROMPT@", reference_trust_hash(
        "UserPromptSubmit", None, f"{hook} hook prompt --host codex", 30))
    text = text.replace("@HASH_PRE_COMPACT@", reference_trust_hash(
        "PreCompact", None, f"{hook} hook pre-compact --host codex", 30))
    return text.encode()


@pytest.fixture
def home(isolate_home):
    return isolate_home


def seed(home: Path, hosts=ALL) -> None:
    for host in hosts:
        for fixture, rel, _ in FILES[host]:
            if fixture:
                target = home / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(FIX / fixture, target)


def snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def install(*args):
    return run_cli("install", "--yes", *args)


@pytest.mark.parametrize("host", ALL)
def test_golden_install_gives_exact_bytes_then_uninstall_restores_meaning(home, store_dir, host):
    seed(home, [host])
    originals = {rel: (home / rel).read_bytes() for fx, rel, _ in FILES[host] if fx}
    proc = install("--host", host)
    assert proc.returncode == 0, proc.stderr
    for _, rel, exp in FILES[host]:
        assert (home / rel).read_bytes() == expected(exp, home, store_dir), rel

    before = snapshot(home)
    again = install("--host", host)
    assert again.returncode == 0 and snapshot(home) == before  # idempotent: not one byte changes

    out = run_cli("uninstall", "--yes", "--host", host)
    assert out.returncode == 0, out.stderr
    from retained.installers import jsonc

    for rel, original in originals.items():
        now = (home / rel).read_bytes()
        if rel.endswith(".toml"):
            import tomlkit

            assert tomlkit.parse(now.decode()).unwrap() == tomlkit.parse(original.decode()).unwrap()
            assert b"# comment inside the server table" in now and b"# tui comment" in now
        else:
            assert jsonc.loads(now.decode()) == jsonc.loads(original.decode()), rel
            assert (b"//" in original) == (b"//" in now)  # comments kept
    after = snapshot(home)
    assert run_cli("uninstall", "--yes", "--host", host).returncode == 0
    assert snapshot(home) == after  # a second uninstall changes nothing


def test_uninstall_of_pretty_printed_claude_config_is_byte_exact(home):
    seed(home, ["claude"])
    original = (home / ".claude.json").read_bytes()
    install("--host", "claude")
    run_cli("uninstall", "--yes", "--host", "claude")
    assert (home / ".claude.json").read_bytes() == original


def test_dry_run_prints_a_diff_and_writes_nothing(home):
    seed(home)
    before = snapshot(home)
    proc = run_cli("install", "--dry-run", *sum((["--host", h] for h in ALL), []))
    assert proc.returncode == 0, proc.stderr
    assert snapshot(home) == before
    assert "(after retained)" in proc.stdout and '+    "retained": {' in proc.stdout
    assert not (home / ".codex" / "hooks.json").exists()


def test_unparsable_file_is_left_byte_identical_and_named_while_others_install(home, store_dir):
    seed(home, ["claude", "codex"])
    bad = b'{\n  // a comment is not allowed here\n  "numStartups": 1\n}\n'
    (home / ".claude.json").write_bytes(bad)
    proc = install("--host", "claude", "--host", "codex")
    assert proc.returncode == 1
    assert (home / ".claude.json").read_bytes() == bad
    assert ".claude.json does not parse at line 2" in proc.stderr
    assert (home / ".codex" / "config.toml").read_bytes() == expected("codex.toml", home, store_dir)


def test_unparsable_toml_is_named_with_its_line(home):
    (home / ".codex").mkdir()
    bad = b'model = "x"\n[mcp_servers.a\ncommand = "y"\n'
    (home / ".codex" / "config.toml").write_bytes(bad)
    proc = install("--host", "codex")
    assert proc.returncode == 1 and "config.toml does not parse at line 2" in proc.stderr
    assert (home / ".codex" / "config.toml").read_bytes() == bad


def test_read_only_file_is_refused_even_as_root(home, store_dir):
    seed(home, ["claude", "cursor"])
    target = home / ".claude.json"
    original = target.read_bytes()
    os.chmod(target, 0o444)
    try:
        proc = install("--host", "claude", "--host", "cursor")
        assert proc.returncode == 1 and "read-only" in proc.stderr and ".claude.json" in proc.stderr
        assert target.read_bytes() == original and stat.S_IMODE(target.stat().st_mode) == 0o444
        assert (home / ".cursor" / "mcp.json").read_bytes() == expected("cursor-mcp.json", home, store_dir)
    finally:
        os.chmod(target, 0o644)


def test_symlinked_dotfile_is_followed_and_the_target_written(home, store_dir, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    shutil.copyfile(FIX / "claude.json", dotfiles / "claude.json")
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    assert install("--host", "claude", "--no-hooks").returncode == 0
    assert (home / ".claude.json").is_symlink()
    assert (dotfiles / "claude.json").read_bytes() == expected("claude.json", home, store_dir)


def test_file_mode_is_kept(home):
    seed(home, ["claude"])
    os.chmod(home / ".claude.json", 0o640)
    install("--host", "claude")
    assert stat.S_IMODE((home / ".claude.json").stat().st_mode) == 0o640
    assert (home / ".claude.json.retained-backup").read_bytes() == (FIX / "claude.json").read_bytes()


def test_backup_holds_the_original_bytes_only_once(home):
    seed(home, ["codex"])
    install("--host", "codex")
    run_cli("uninstall", "--yes", "--host", "codex")
    install("--host", "codex")
    assert (home / ".codex" / "config.toml.retained-backup").read_bytes() == (FIX / "codex.toml").read_bytes()


def test_no_hooks_and_no_approve(home):
    seed(home, ["claude"])
    install("--host", "claude", "--no-hooks", "--no-approve")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings == json.loads((FIX / "claude-settings.json").read_text())
    assert "retained" in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_no_other_permission_is_widened(home):
    seed(home, ["claude"])
    install("--host", "claude")
    allow = json.loads((home / ".claude" / "settings.json").read_text())["permissions"]["allow"]
    assert [a for a in allow if not a.startswith("mcp__retained__")] == ["Bash(git status)"]


def test_codex_trust_is_regenerated_when_the_hook_entry_changes(home, store_dir):
    seed(home, ["codex"])
    install("--host", "codex")
    hooks_path = home / ".codex" / "hooks.json"
    doc = json.loads(hooks_path.read_text())
    doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] = 99  # an older install, say
    hooks_path.write_text(json.dumps(doc, indent=2) + "\n")
    install("--host", "codex")
    assert (home / ".codex" / "config.toml").read_bytes() == expected("codex.toml", home, store_dir)
    assert hooks_path.read_bytes() == expected("codex-hooks.json", home, store_dir)


def test_claude_config_dir_and_codex_home_are_honoured(home, tmp_path, store_dir):
    alt = tmp_path / "altcfg"
    alt.mkdir()
    ch = tmp_path / "codexhome"
    ch.mkdir()
    proc = run_cli("install", "--yes", "--host", "claude", "--host", "codex",
                   env={"CLAUDE_CONFIG_DIR": str(alt), "CODEX_HOME": str(ch)})
    assert proc.returncode == 0, proc.stderr
    assert "retained" in json.loads((alt / ".claude.json").read_text())["mcpServers"]
    assert (alt / "settings.json").exists() and (ch / "config.toml").exists() and (ch / "hooks.json").exists()
    assert not (home / ".claude.json").exists()
    assert f'[hooks.state."{ch}/hooks.json:session_start:0:0"]' in (ch / "config.toml").read_text()


def _rewrite_constantly(path, stop, written, in_place, empty_for=0.0):
    """Rewrite `path` like Claude Code does: read, add a key of our own, write it back, either with a
    temp file and a rename or in place (truncate, then write: what a plain writeFileSync does).
    `empty_for`: seconds the file stays empty between the truncate and the write (a writer the
    scheduler holds there, as happens on a loaded machine)."""
    n = 0
    while not stop.is_set():
        doc = json.loads(path.read_text())
        n += 1
        doc.setdefault("writer", {})[str(n)] = n
        if in_place:
            with open(path, "w") as f:
                time.sleep(empty_for)
                f.write(json.dumps(doc, indent=2))
        else:
            tmp = path.with_name(".claude.json.writer")
            tmp.write_text(json.dumps(doc, indent=2))
            os.replace(tmp, path)
        written.append(n)
        time.sleep(0.002)


@pytest.mark.parametrize("action, in_place", [("install", False), ("uninstall", False), ("install", True)])
def test_concurrent_writer_on_claude_json_loses_nothing(home, action, in_place):
    """Claude Code rewrites ~/.claude.json constantly; neither its changes nor ours may be lost."""
    seed(home, ["claude"])
    path = home / ".claude.json"
    if action == "uninstall":
        assert install("--host", "claude", "--no-hooks").returncode == 0
    stop = threading.Event()
    written: list[int] = []
    t = threading.Thread(target=_rewrite_constantly, args=(path, stop, written, in_place))
    t.start()
    try:
        for _ in range(5):
            args = ("--host", "claude", "--no-hooks") if action == "install" else ("--host", "claude")
            proc = install(*args) if action == "install" else run_cli("uninstall", "--yes", *args)
            assert proc.returncode in (0, 1), proc.stderr
            if proc.returncode == 0:
                break
        assert proc.returncode == 0, proc.stderr
    finally:
        time.sleep(0.05)
        stop.set()
        t.join()
    final = json.loads(path.read_text())
    assert written and sorted(map(int, final["writer"])) == written  # every one of the writer's changes
    assert ("retained" in final["mcpServers"]) == (action == "install")  # ours
    assert "other" in final["mcpServers"]  # and the user's


def test_file_caught_empty_mid_write_is_never_taken_for_an_empty_config(home):
    """A host that rewrites ~/.claude.json in place leaves it empty between its truncate and its write.
    Install must never read that moment as an empty config and write only its own entry over it:
    that would wipe the user's servers and every change the host made before."""
    seed(home, ["claude"])
    path = home / ".claude.json"
    stop = threading.Event()
    written: list[int] = []
    t = threading.Thread(target=_rewrite_constantly, args=(path, stop, written, True, 0.12))
    t.start()
    try:
        proc = install("--host", "claude", "--no-hooks")
    finally:
        time.sleep(0.3)
        stop.set()
        t.join()
    final = json.loads(path.read_text())
    assert "other" in final["mcpServers"]  # the user's server survives
    assert sorted(map(int, final["writer"])) == written  # and so does each of the host's writes
    backup = path.with_name(path.name + ".retained-backup")
    if proc.returncode == 0:  # the first change keeps one backup of the original bytes (README)
        assert "retained" in final["mcpServers"]
        assert json.loads(backup.read_text())["mcpServers"]["other"]
    else:  # or it says plainly that the file kept changing, having changed nothing
        assert "kept changing" in proc.stderr, proc.stderr
        assert not backup.exists() or json.loads(backup.read_text())["mcpServers"]["other"]


def test_unknown_host_is_a_usage_error(home):
    proc = install("--host", "notepad")
    assert proc.returncode == 2 and "unknown host notepad" in proc.stderr


def test_detects_installed_hosts_from_their_config_dirs(home):
    (home / ".cursor").mkdir()
    proc = run_cli("install", "--yes", env={"PATH": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    assert "Cursor" in proc.stdout and "Codex" not in proc.stdout


def test_project_scope_writes_project_files(home, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    proc = run_cli("install", "--yes", "--scope", "project", "--host", "claude", "--host", "vscode", cwd=str(repo))
    assert proc.returncode == 0, proc.stderr
    assert "retained" in json.loads((repo / ".mcp.json").read_text())["mcpServers"]
    assert (repo / ".claude" / "settings.json").exists()
    assert "retained" in json.loads((repo / ".vscode" / "mcp.json").read_text())["servers"]
    assert json.loads((repo / ".github" / "hooks" / "retained.json").read_text())["hooks"]["SessionStart"]


def test_uninstalling_one_host_keeps_hooks_another_installed_host_reads(home):
    """~/.claude/settings.json serves Claude Code and VS Code: removing VS Code must not unhook Claude."""
    install("--host", "claude", "--host", "vscode")
    run_cli("uninstall", "--yes", "--host", "vscode")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert any("hook session-start" in h["command"] for g in settings["hooks"]["SessionStart"] for h in g["hooks"])
    assert not (home / ".config" / "Code" / "User" / "mcp.json").exists()  # created by install, removed again
    run_cli("uninstall", "--yes", "--host", "claude")
    assert not (home / ".claude" / "settings.json").exists()  # retained created it; it goes again


def test_uninstalling_both_hosts_that_share_hooks_removes_them(home):
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{\n  "model": "opus"\n}\n')
    install("--host", "claude", "--host", "vscode")
    run_cli("uninstall", "--yes", "--host", "claude", "--host", "vscode")
    assert (home / ".claude" / "settings.json").read_text() == '{\n  "model": "opus"\n}\n'


def test_install_then_uninstall_leaves_the_same_files_and_bytes(home):
    """Files retained created are removed again; backups go once the file is back to its first bytes."""
    seed(home)
    (home / ".cursor").mkdir(exist_ok=True)
    (home / ".gemini").mkdir(exist_ok=True)
    before = snapshot(home)
    assert install().returncode == 0
    assert snapshot(home) != before
    dry = run_cli("uninstall", "--yes", "--dry-run")
    assert dry.returncode == 0 and snapshot(home) != before
    proc = run_cli("uninstall", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(home) == before
    assert "created" not in proc.stdout  # uninstall never creates a file
    again = run_cli("uninstall", "--yes")
    assert again.returncode == 0 and snapshot(home) == before


def test_uninstall_keeps_a_file_retained_created_once_the_user_added_to_it(home):
    assert install("--host", "claude").returncode == 0
    settings = home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    doc["model"] = "opus"
    settings.write_text(json.dumps(doc, indent=2))
    assert run_cli("uninstall", "--yes", "--host", "claude").returncode == 0
    assert json.loads(settings.read_text()) == {"model": "opus"}


@pytest.mark.parametrize("platform, expected", [
    ("linux", ".config/Code/User"),
    ("darwin", "Library/Application Support/Code/User"),
    ("win32", "roaming/Code/User"),
])
def test_vscode_user_folder_per_os(home, monkeypatch, tmp_path, platform, expected):
    """VS Code's user mcp.json: XDG_CONFIG_HOME on Linux, Application Support on macOS, APPDATA on Windows."""
    import sys

    from retained.installers.hosts import hosts

    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setenv("APPDATA", str(home / "roaming"))
    ctx = {name: h.context(tmp_path / "store", tmp_path) for name, h in hosts().items()}
    assert Path(ctx["vscode"]["vscode_user"]) == home / expected
    assert Path(ctx["claude"]["claude_json"]) == home / ".claude.json"
    assert Path(ctx["codex"]["codex_home"]) == home / ".codex"


def test_xdg_config_home_moves_the_vscode_folder_on_linux(home, monkeypatch, tmp_path):
    import sys

    from retained.installers.hosts import get

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    vscode = get("vscode")
    assert Path(vscode.context(tmp_path / "store", tmp_path)["vscode_user"]) == tmp_path / "xdg" / "Code" / "User"
