"""Issue 30, item 3: never wired twice. `retained install` sees retained installed as a host's own plugin
and says so instead of adding a second copy (--host still forces it), `retained doctor` fails on a host
wired both ways and names the fix, and the brief is never injected twice in one session.

The plugin state comes from the real host CLIs' own plugin commands where they are installed."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

from retained.store import Store
from tests.conftest import host_env, require_npm_bin, run_cli
from tests.helpers import plugin_checkout

checkout = plugin_checkout.checkout  # the fixture, by name


def _host(cmd: list[str], home, cwd) -> None:
    proc = subprocess.run(cmd, env=host_env(home), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_install_skips_a_host_that_has_the_plugin_and_doctor_fails_on_a_double_wiring(checkout, isolate_home,
                                                                                      project):
    claude = require_npm_bin("claude", "Claude Code CLI")
    _host([claude, "plugin", "marketplace", "add", str(checkout)], isolate_home, project)
    _host([claude, "plugin", "install", "retained@retained"], isolate_home, project)
    before = (isolate_home / ".claude" / "settings.json").read_text()

    proc = run_cli("install", "--yes", cwd=str(project))
    assert proc.returncode == 0, proc.stderr
    assert "Claude Code: retained is installed as its plugin retained@retained" in proc.stdout
    assert "not wiring it a second time (--host claude wires it anyway)" in proc.stdout
    assert (isolate_home / ".claude" / "settings.json").read_text() == before
    claude_json = isolate_home / ".claude.json"
    assert not claude_json.exists() or "mcpServers" not in json.loads(claude_json.read_text())

    doctor = run_cli("doctor", "--host", "claude", "--json", cwd=str(project), timeout=120)
    checks = json.loads(doctor.stdout)["checks"]
    assert any(c["check"] == "installed as its plugin" and c["ok"] for c in checks), checks
    assert not any(c["check"] == "wired once" for c in checks)

    forced = run_cli("install", "--yes", "--host", "claude", cwd=str(project))
    assert forced.returncode == 0 and "wiring it a second time as asked" in forced.stderr
    doctor = run_cli("doctor", "--host", "claude", cwd=str(project), timeout=120)
    assert doctor.returncode == 1
    assert "✗ claude: wired once — retained is wired twice: as its plugin retained@retained" in doctor.stdout
    assert "fix: retained uninstall --host claude (keeps the plugin), or claude plugin uninstall retained@retained" \
        in doctor.stdout

    run_cli("uninstall", "--yes", "--host", "claude", cwd=str(project))
    doctor = run_cli("doctor", "--host", "claude", "--json", cwd=str(project), timeout=120)
    assert not any(c["check"] == "wired once" for c in json.loads(doctor.stdout)["checks"])


def test_install_skips_codex_and_gemini_that_have_the_plugin(checkout, isolate_home, project):
    codex = require_npm_bin("codex", "Codex CLI")
    gemini = require_npm_bin("gemini", "Gemini CLI")
    (isolate_home / ".codex").mkdir()
    _host([codex, "plugin", "marketplace", "add", str(checkout)], isolate_home, project)
    _host([codex, "plugin", "add", "retained@retained"], isolate_home, project)
    (isolate_home / ".gemini").mkdir()
    (isolate_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(checkout): "TRUST_FOLDER"}))
    _host([gemini, "extensions", "install", str(checkout), "--consent"], isolate_home, project)

    proc = run_cli("install", "--yes", "--host", "codex", "--host", "gemini", "--dry-run", cwd=str(project))
    assert "Codex CLI: " not in proc.stdout  # named: forced, with the warning
    assert "retained is also installed as its plugin retained@retained" in proc.stderr
    assert "retained is also installed as its extension retained" in proc.stderr
    proc = run_cli("install", "--yes", cwd=str(project))
    assert proc.returncode == 0, proc.stderr
    assert "Codex CLI: retained is installed as its plugin retained@retained" in proc.stdout
    assert "Gemini CLI: retained is installed as its extension retained" in proc.stdout
    assert "[mcp_servers.retained]" not in (isolate_home / ".codex" / "config.toml").read_text()
    settings = isolate_home / ".gemini" / "settings.json"
    assert not settings.exists() or "retained" not in settings.read_text()


def test_the_brief_is_never_injected_twice_in_one_session(project, store_dir):
    """Two copies of the session-start hook for one session at the same moment (a plugin's hook and a
    settings.json hook, which Claude Code runs side by side): one brief between them."""
    with Store(store_dir) as s:
        s.write("BRIEF-ONCE the deploy key lives in the vault", scope=str(project))
    payload = json.dumps({"session_id": "twice-1", "transcript_path": "", "cwd": str(project),
                          "hook_event_name": "SessionStart", "source": "startup"})
    env = {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project)}

    def hook(_: int) -> str:
        return run_cli("hook", "session-start", input=payload, env=env, cwd=str(project)).stdout

    for attempt in range(3):  # three sessions, each started by two hooks at once
        payload = payload.replace(f"twice-{attempt}", f"twice-{attempt + 1}")
        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(hook, range(2)))
        assert sum("BRIEF-ONCE" in o for o in outs) == 1, outs
