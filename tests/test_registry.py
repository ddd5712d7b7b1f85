"""The host registry end to end: every host it lists installs, checks out, briefs from the store it was
installed with, and uninstalls to the very bytes it found; all or nothing per host."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from retained.installers.hosts import hosts
from retained.store import Store
from tests.conftest import run_cli
from tests.test_installers import FILES, seed, snapshot

ROOT = Path(__file__).resolve().parents[1]


def host_input(name: str, project: Path) -> tuple[dict, dict]:
    """A session-start input and environment as each host gives its hook (hosts reference)."""
    p = str(project)
    return {
        "claude": ({"session_id": "reg-claude", "cwd": p, "hook_event_name": "SessionStart", "source": "startup"},
                   {"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": p}),
        "codex": ({"session_id": "reg-codex", "cwd": p, "hook_event_name": "SessionStart", "model": "gpt-fake",
                   "permission_mode": "default", "source": "startup"}, {"CODEX_MANAGED_BY_NPM": "1"}),
        "cursor": ({"conversation_id": "reg-cursor", "hook_event_name": "sessionStart", "workspace_roots": [p],
                    "cursor_version": "2.1.0"}, {"CURSOR_VERSION": "2.1.0"}),
        "vscode": ({"sessionId": "reg-vscode", "cwd": p, "hookEventName": "SessionStart", "source": "new"}, {}),
        "gemini": ({"session_id": "reg-gemini", "cwd": p, "hook_event_name": "SessionStart", "source": "startup"},
                   {"GEMINI_SESSION_ID": "reg-gemini", "GEMINI_PROJECT_DIR": p}),
        # what retained's OpenCode plugin sends (OpenCode has no command hooks of its own)
        "opencode": ({"session_id": "reg-opencode", "cwd": p, "hook_event_name": "SessionStart", "source": "startup"}, {}),
    }[name]


def context_of(output: str) -> str:
    data = json.loads(output)
    return data.get("additional_context") or data["hookSpecificOutput"]["additionalContext"]


def installed_commands(home: Path, event: str) -> list[str]:
    """Every retained hook command for `event` in the config files under `home`."""
    import shlex

    found: list[str] = []
    for path in home.rglob("*"):
        if path.is_file() and not path.name.endswith(".retained-backup"):
            text = path.read_text(errors="replace")
            found += re.findall(rf'"([^"\n]*\bhook {event}\b[^"\n]*)"', text)
            plugin = re.search(r"^const HOOK = (\[.*\]);$", text, re.M)  # a plugin runs the hook itself
            if plugin:
                found.append(shlex.join([*json.loads(plugin.group(1)), event, "--host", path.parent.parent.name]))
    return sorted(set(found))


@pytest.fixture
def elsewhere(tmp_path):
    """A non-default store, holding one record for the project; the default store holds another."""
    return tmp_path / "elsewhere-store"


@pytest.mark.parametrize("name", sorted(hosts()))
def test_every_registered_host_installs_checks_briefs_from_its_store_and_uninstalls(
        isolate_home, project, elsewhere, name, store_dir):
    home = isolate_home
    if name in FILES:
        seed(home, [name])
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode" / "opencode.json").write_text('{\n  // mine\n  "theme": "system",\n}\n')
    with Store(elsewhere) as s:
        s.write("REGISTRY-MARKER from the installed store", scope=str(project))
    with Store(store_dir) as s:
        s.write("DEFAULT-STORE-MARKER must not appear", scope=str(project))
    before = snapshot(home)
    proc = run_cli("--dir", str(elsewhere), "install", "--yes", "--host", name, cwd=str(project))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "retained doctor" in proc.stdout  # install ends with the next step

    # plain doctor (the shell's store is the default one) checks the store the host opens
    doc = run_cli("doctor", "--host", name, "--json", cwd=str(project))
    data = json.loads(doc.stdout)
    assert data["ok"], doc.stdout
    assert str(elsewhere) in data["stores"] and any(name in w for w in data["stores"][str(elsewhere)])

    commands = installed_commands(home, "session-start")
    assert commands, "no session-start hook was installed"
    payload, env = host_input(name, project)
    for command in commands:
        out = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                             cwd=project, env=dict(os.environ, **env), timeout=60)
        assert out.returncode == 0, out.stderr
        text = context_of(out.stdout)
        assert "REGISTRY-MARKER" in text and "DEFAULT-STORE-MARKER" not in text

    out = run_cli("--dir", str(elsewhere), "uninstall", "--yes", "--host", name, cwd=str(project))
    assert out.returncode == 0, out.stdout + out.stderr
    assert snapshot(home) == before


def test_every_host_module_has_a_template_and_names_itself(isolate_home):
    names = sorted(p.stem for p in (ROOT / "installers" / "hosts").glob("*.py") if not p.stem.startswith("_"))
    assert names == sorted(hosts())
    for name, host in hosts().items():
        assert host.name == name and host.title and host.template["files"]
        assert (ROOT / "templates" / f"{name}.json").exists()


# Where a host's name may appear outside installers/hosts/ and templates/, and why. Everything else asks
# the registry. (Comments and docstrings may name hosts to explain why; code and messages may not.)
NAME_ALLOWED = {
    ("retained/stdio_guard.py", "cursor"): "MCP's pagination cursor, not the host",
    ("retained/ui_static/app.css", "cursor"): "CSS's cursor property",
    ("retained/data/vocab.txt", "*"): "the embedding model's word list",
    # list paging takes an opaque cursor (issue 28), a word that is also a host's name
    **{(f, "cursor"): "a list page's cursor, not the host" for f in (
        "retained/cli.py", "retained/reads.py", "retained/replies.py", "retained/results.py", "retained/store.py",
        "retained/tools.py", "retained/ui.py", "retained/ui_static/app.js", "retained/handshake.json",
        "retained/index/queries.py", "retained/server.py")},
    # the plugin surface (issue 30): files the hosts read themselves, keyed by their own event names
    ("hooks/hooks.json", "*"): "the hooks file Claude Code's plugin and Gemini CLI's extension read",
    ("hooks/launch.sh", "*"): "the plugin's launcher, run by every host's plugin manifest",
}
# Numbers equal to a host's cap that are retained's own (a batch size, a candidate count, a prompt cut).
CAP_ALLOWED = {("retained/index/catchup.py", "_BATCH"), ("retained/ranking.py", "ALL_VECTORS"),
               ("retained/recall.py", "PROMPT_CHARS")}


def _host_words() -> dict[str, str]:
    """Every spelling of a registered host: its name, the distinctive words of its title, and the
    distinctive names of the tools its transcripts record as real work (`work_tools`, `work_item_types`:
    those spelled with an underscore or a capital inside, such as apply_patch or runInTerminal; a plain
    word such as Bash or replace names no host)."""
    words: dict[str, str] = {}
    for name, host in hosts().items():
        words[name] = name
        for word in re.findall(r"[A-Z][A-Za-z]+", host.title):
            if word.lower() not in {"code", "cli", "agent", "mode"}:  # "Claude Code": Claude names it
                words[word.lower()] = name
        for tool in (*host.work_tools, *host.work_item_types):
            if "_" in tool or re.search(r"[a-z][A-Z]", tool):
                words.setdefault(tool.lower(), name)
    return words


def _code_tokens(path: Path):
    """(line, kind, text) of every identifier, string (not docstring) and number in a module."""
    import ast
    import io
    import tokenize

    src = path.read_text("utf-8")
    docstrings = {node.body[0].lineno for node in ast.walk(ast.parse(src))
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    last_name = ""
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.NAME:
            yield tok.start[0], "name", tok.string, last_name
            last_name = tok.string
        elif tok.type == tokenize.STRING and tok.start[0] not in docstrings:
            yield tok.start[0], "string", tok.string, last_name
        elif tok.type == tokenize.NUMBER:
            yield tok.start[0], "number", tok.string, last_name


def test_no_module_outside_the_registry_names_a_host_or_a_hosts_cap():
    """Host names, their environment variables, file names, work tools and caps live in installers/hosts/
    (and templates/): every other module of the package, hook scripts and static files included, asks
    the registry. The names come from the registry itself, so a new host is covered the day it is added."""
    words = _host_words()
    assert {"claude", "codex", "cursor", "gemini", "vscode", "opencode"} <= set(words.values())
    assert {"apply_patch", "runinterminal", "run_shell_command"} <= set(words)
    spelled = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(sorted(words, key=len, reverse=True)) + r")(?![A-Za-z0-9])",
                         re.I)
    caps = {v for h in hosts().values() for v in (h.max_chars, h.max_tokens, h.instructions_max_chars) if v}
    registry = {ROOT / "installers" / "host.py", *(ROOT / "installers" / "hosts").glob("*.py")}
    files = [p for p in [*(ROOT / "retained").rglob("*"), *(ROOT / "installers").rglob("*"), *(ROOT / "hooks").glob("*")]
             if p.is_file() and p not in registry and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert len(files) > 30
    offenders = []
    for path in files:
        rel = str(path.relative_to(ROOT))
        if (rel, "*") in NAME_ALLOWED:
            continue
        if path.suffix == ".py":
            for line, kind, text, before in _code_tokens(path):
                if kind == "number":
                    value = int(text.replace("_", "")) if text.replace("_", "").isdigit() else None
                    if value in caps and (rel, before) not in CAP_ALLOWED:
                        offenders.append(f"{rel}:{line}: a host's cap {text} (after {before})")
                    continue
                for m in spelled.finditer(text):
                    if (rel, m.group(1).lower()) not in NAME_ALLOWED:
                        offenders.append(f"{rel}:{line}: {words[m.group(1).lower()]} in {kind} {text[:80]}")
        else:
            for line, text in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
                for m in spelled.finditer(text):
                    if (rel, m.group(1).lower()) not in NAME_ALLOWED:
                        offenders.append(f"{rel}:{line}: {words[m.group(1).lower()]} in {text.strip()[:80]}")
    assert not offenders, "\n".join(offenders)


def _undeclared(host, text: str, home: Path) -> set[str]:
    """Placeholders `text` uses that `host` does not declare (its own, plus the base ones)."""
    from retained.installers.base import BASE_PLACEHOLDERS

    declared = set(BASE_PLACEHOLDERS) | set(host.context_vars(str(home), {}))
    return set(re.findall(r"\{([a-z_]+)\}", text)) - declared


def test_each_template_fills_only_its_own_hosts_placeholders(isolate_home, tmp_path):
    """A template is read by its host alone, so every {placeholder} in it is one its host declares (its
    `context_vars`) or one every template has (base.BASE_PLACEHOLDERS); another host's file is named by a
    declaration (`Host.shares`), never by that host's placeholder."""
    from retained.installers.base import BASE_PLACEHOLDERS

    for name, host in hosts().items():
        ctx = host.context(tmp_path / "store", tmp_path / "project", "user", {"HOME": str(isolate_home)})
        assert set(BASE_PLACEHOLDERS) <= set(ctx), f"{name}: a base placeholder is not filled"
        text = (ROOT / "templates" / f"{name}.json").read_text("utf-8")
        assert re.search(r"\{[a-z_]+\}", text), name
        bad = _undeclared(host, text, isolate_home)
        assert not bad, f"templates/{name}.json uses {sorted(bad)}, which {name} does not declare"
    # and the check sees one: VS Code's template naming Claude Code's folder by Claude Code's placeholder
    planted = (ROOT / "templates" / "vscode.json").read_text("utf-8").replace(
        '"project": "{project}/.github/hooks/retained.json"', '"user": "{claude_dir}/settings.json"')
    assert _undeclared(hosts()["vscode"], planted, isolate_home) == {"claude_dir"}


def test_a_shared_file_is_declared_and_named_by_its_owner(isolate_home, project):
    """A file two hosts read (`Host.shares`) has its path in its owner's template only; the registry
    gives the reader that very path, so install writes it once for both."""
    from retained.installers.hosts import context

    shared = [(host, role, scope, owner) for host in hosts().values()
              for (role, scope), owner in host.shares.items()]
    assert shared, "no host declares a shared file (VS Code reads Claude Code's settings.json)"
    for host, role, scope, owner_name in shared:
        owner = hosts()[owner_name]
        mine = next(f for f in host.template["files"] if f["role"] == role)
        assert scope not in mine["path"], f"{host.name} names {owner_name}'s {role} file itself"
        ctx = context(host, isolate_home / "store", project, scope)
        owners = owner.file_path(role, scope, owner.context(isolate_home / "store", project, scope))
        assert ctx["shared_paths"][role] == owners
        planned = [p.path for p in host.plans(ctx, scope=scope, flags={}) if p.role == role]
        assert planned == [owners]


# -- all or nothing per host -----------------------------------------------------------------------
def _host_files(name: str, home: Path) -> list[Path]:
    return [home / rel for _, rel, _ in FILES[name]]


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("damage", ["read-only", "unparsable"])
def test_a_host_whose_file_cannot_change_is_left_unchanged_and_the_others_are_wired(
        isolate_home, name, damage):
    home = isolate_home
    seed(home)
    for d in (".cursor", ".gemini", ".codex"):
        (home / d).mkdir(exist_ok=True)
    for index, target in enumerate(_host_files(name, home)):
        if name == "vscode" and index == 1:
            continue  # ~/.claude/settings.json is Claude Code's too: covered by the claude case
        for other in _host_files(name, home):
            if not other.exists():
                other.parent.mkdir(parents=True, exist_ok=True)
                other.write_text("{}\n" if other.suffix == ".json" else "")
        before = {str(p): p.read_bytes() for p in _host_files(name, home)}
        original = target.read_bytes()
        if damage == "read-only":
            os.chmod(target, 0o444)
        else:
            target.write_bytes(b"[[[ not a config\n" if target.suffix == ".toml" else b'{"broken": \n')
            before[str(target)] = target.read_bytes()
        try:
            proc = run_cli("install", "--yes", *sum((["--host", h] for h in FILES), []))
            assert proc.returncode == 1
            title = hosts()[name].title
            assert f"✗ {title}: not wired" in proc.stderr, proc.stderr
            for p in _host_files(name, home):
                if name == "vscode" and p.name == "settings.json":
                    continue  # Claude Code's too, and Claude Code is wired: its hooks are there (see below)
                assert p.read_bytes() == before[str(p)], f"{p} changed although {title} is not wired"
            for other in FILES:
                if other == name or (name == "claude" and other == "vscode") or (name == "vscode" and other == "claude"):
                    continue
                server = _host_files(other, home)[0]
                assert "retained" in server.read_text(), f"{other} was not wired"
        finally:
            os.chmod(target, 0o644)
            target.write_bytes(original)
            run_cli("uninstall", "--yes", *sum((["--host", h] for h in FILES), []))


@pytest.mark.parametrize("damage", ["read-only", "unparsable"])
def test_a_shared_file_gets_no_hooks_for_a_host_that_failed(isolate_home, damage):
    """Claude Code's ~/.claude.json cannot change while VS Code is wired too: the settings.json both read
    gets no hooks (Claude Code would run them for a server that is not wired), VS Code is wired without
    them and says so, and doctor then reports VS Code's hooks missing."""
    home = isolate_home
    seed(home, ["claude", "vscode"])
    claude_json, settings = home / ".claude.json", home / ".claude" / "settings.json"
    vscode_mcp = home / ".config" / "Code" / "User" / "mcp.json"
    if damage == "read-only":
        os.chmod(claude_json, 0o444)
    else:
        claude_json.write_bytes(b'{"broken": \n')
    before = {p: p.read_bytes() for p in (claude_json, settings)}
    try:
        dry = run_cli("install", "--dry-run", "--host", "claude", "--host", "vscode")
        assert dry.returncode == 1 and "session-start" not in dry.stdout, dry.stdout
        proc = run_cli("install", "--yes", "--host", "claude", "--host", "vscode")
        assert proc.returncode == 1
        assert "✗ Claude Code: not wired" in proc.stderr, proc.stderr
        assert f"! VS Code (Copilot agent mode): wired without its hooks in {settings}" in proc.stderr, proc.stderr
        assert {p: p.read_bytes() for p in before} == before, "Claude Code's files changed although it is not wired"
        assert '"retained"' in vscode_mcp.read_text()
        doctor = run_cli("doctor", "--host", "vscode")
        assert doctor.returncode == 1 and "✗ vscode: hook present" in doctor.stdout, doctor.stdout
    finally:
        os.chmod(claude_json, 0o644)


def test_uninstall_keeps_the_shared_hooks_of_a_host_that_stays_wired(isolate_home):
    """Both wired; uninstalling both while ~/.claude.json cannot change leaves Claude Code wired, so the
    hooks it reads in settings.json stay, while VS Code's own file is cleaned."""
    home = isolate_home
    seed(home, ["claude", "vscode"])
    assert run_cli("install", "--yes", "--host", "claude", "--host", "vscode").returncode == 0
    claude_json, settings = home / ".claude.json", home / ".claude" / "settings.json"
    vscode_mcp = home / ".config" / "Code" / "User" / "mcp.json"
    wired = settings.read_bytes()
    os.chmod(claude_json, 0o444)
    try:
        proc = run_cli("uninstall", "--yes", "--host", "claude", "--host", "vscode")
        assert proc.returncode == 1 and "✗ Claude Code: left as it was" in proc.stderr, proc.stderr
        assert "! VS Code (Copilot agent mode): uninstalled except its hooks" in proc.stderr, proc.stderr
        assert settings.read_bytes() == wired
        assert '"retained"' not in vscode_mcp.read_text()
    finally:
        os.chmod(claude_json, 0o644)


def test_a_failing_second_file_puts_the_first_back(isolate_home):
    """Codex: config.toml changes first; when hooks.json is refused, config.toml is restored and no
    backup or folder retained made is left behind."""
    home = isolate_home
    seed(home, ["codex"])
    hooks = home / ".codex" / "hooks.json"
    hooks.mkdir()  # not a regular file: refused at write time, after the preview passed for config.toml
    before = snapshot(home)
    proc = run_cli("install", "--yes", "--host", "codex")
    assert proc.returncode == 1 and "Codex CLI: not wired" in proc.stderr
    assert snapshot(home) == before


# -- Codex edge cases -------------------------------------------------------------------------------
FOREIGN_HOOKS = {"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [
    {"type": "command", "command": "/opt/other-tool/bin/hook start", "timeout": 10}]}]}}


def _foreign_trust(home: Path) -> str:
    from retained.installers.hosts.codex import trust_entries

    entries = trust_entries(str(home / ".codex" / "hooks.json"), FOREIGN_HOOKS)
    return "".join(f'\n[hooks.state."{k}"]\nenabled = true\ntrusted_hash = "{v}"\n' for k, v in entries.items())


def test_codex_foreign_trust_entry_survives_install_and_uninstall(isolate_home):
    home = isolate_home
    (home / ".codex").mkdir()
    (home / ".codex" / "hooks.json").write_text(json.dumps(FOREIGN_HOOKS, indent=2) + "\n")
    config = home / ".codex" / "config.toml"
    config.write_text('# my codex\nmodel = "o4"\n' + _foreign_trust(home))
    before = snapshot(home)
    assert run_cli("install", "--yes", "--host", "codex").returncode == 0
    import tomlkit

    from retained.installers.hosts.codex import trust_entries

    doc = json.loads((home / ".codex" / "hooks.json").read_text())
    state = tomlkit.parse(config.read_text()).unwrap()["hooks"]["state"]
    for key, digest in trust_entries(str(home / ".codex" / "hooks.json"), doc).items():
        assert state[key]["trusted_hash"] == digest  # the foreign hook's too: still valid after install
    proc = run_cli("uninstall", "--yes", "--host", "codex")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(home) == before


def test_codex_home_without_config_toml_leaves_no_trace(isolate_home):
    home = isolate_home
    (home / ".codex").mkdir()
    assert run_cli("install", "--yes", "--host", "codex").returncode == 0
    assert not (home / ".codex" / "config.toml.retained-backup").exists()
    assert run_cli("uninstall", "--yes", "--host", "codex").returncode == 0
    assert sorted(p.name for p in (home / ".codex").iterdir()) == []


# -- plans -------------------------------------------------------------------------------------------
def test_second_install_says_nothing_to_change(isolate_home):
    assert run_cli("install", "--yes", "--host", "claude").returncode == 0
    again = run_cli("install", "--yes", "--host", "claude")
    assert again.returncode == 0 and again.stdout.strip() == "nothing to change"


def test_uninstall_plan_says_remove_from(isolate_home):
    run_cli("install", "--yes", "--host", "claude")
    out = run_cli("uninstall", "--dry-run", "--host", "claude").stdout
    assert "remove hook `retained hook session-start` from hooks.SessionStart" in out


def test_a_file_two_hosts_share_appears_once_in_the_plan_and_the_diff(isolate_home):
    out = run_cli("install", "--dry-run", "--host", "claude", "--host", "vscode").stdout
    settings = str(isolate_home / ".claude" / "settings.json")
    assert out.count(f"    {settings}") == 1 and "also read by" in out
    assert out.count(f"+++ {settings} (after retained)") == 1


def test_uninstall_removes_folders_install_created(isolate_home):
    before = snapshot(isolate_home)
    dirs = sorted(str(p) for p in isolate_home.rglob("*") if p.is_dir())
    assert run_cli("install", "--yes", "--host", "cursor", "--host", "codex").returncode == 0
    assert run_cli("uninstall", "--yes", "--host", "cursor", "--host", "codex").returncode == 0
    assert snapshot(isolate_home) == before
    assert sorted(str(p) for p in isolate_home.rglob("*") if p.is_dir()) == dirs


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_hook_commands_name_the_store_they_were_installed_with(isolate_home, tmp_path):
    store = tmp_path / "my store"
    assert run_cli("--dir", str(store), "install", "--yes", "--host", "claude").returncode == 0
    for cmd in installed_commands(isolate_home, "session-start") + installed_commands(isolate_home, "stop"):
        assert f"--dir '{store}'" in cmd, cmd
    entry = json.loads((isolate_home / ".claude.json").read_text())["mcpServers"]["retained"]
    assert entry["env"]["RETAINED_DIR"] == str(store) and entry["alwaysLoad"] is True
    assert stat.S_ISREG((isolate_home / ".claude" / "settings.json").stat().st_mode)


def _opencode_env(project: Path) -> dict[str, str]:
    """This environment less any OpenCode or model API settings, in `project` (OpenCode takes its folder
    from PWD, which a child's cwd does not change), without OpenCode's fetch of its model catalogue
    (models.dev) and of its default plugins: with no network each waits out a timeout (10-50 s a run
    here) before going on without them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "ANTHROPIC", "OPENAI"))}
    return dict(env, PWD=str(project), OPENCODE_DISABLE_MODELS_FETCH="true", OPENCODE_DISABLE_DEFAULT_PLUGINS="true")


def test_opencode_lists_the_installed_server(isolate_home, project, tmp_path):
    """The real `opencode mcp list` in a sandboxed HOME sees retained connected after install."""
    from tests.conftest import require_npm_bin

    opencode = require_npm_bin("opencode", "OpenCode")
    cfg = isolate_home / ".config" / "opencode"
    cfg.mkdir(parents=True)
    (cfg / "opencode.json").write_text('{\n  // the user\'s own\n  "$schema": "https://opencode.ai/config.json",\n}\n')
    assert run_cli("install", "--yes", "--host", "opencode", cwd=str(project)).returncode == 0
    env = _opencode_env(project)
    proc = subprocess.run([opencode, "mcp", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=180)
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    assert re.search(r"✓ retained\s+connected", out), out
    assert run_cli("uninstall", "--yes", "--host", "opencode", cwd=str(project)).returncode == 0
    assert not (cfg / "plugin").exists()


@pytest.mark.slow
def test_opencode_plugin_puts_the_brief_in_the_model_request(isolate_home, tmp_path):
    """The real `opencode run` against the fake model API: the system prompt carries the brief of the
    store retained was installed with, for the project OpenCode runs in."""
    from tests.conftest import require_npm_bin
    from tests.fake_model import FakeModel

    opencode = require_npm_bin("opencode", "OpenCode")
    project = tmp_path / "ocproj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    store = tmp_path / "oc-store"
    with Store(store) as s:
        s.write("OPENCODE-BRIEF-MARKER releases are cut on Thursdays", scope=str(project.resolve()))
    (isolate_home / ".config" / "opencode").mkdir(parents=True)
    assert run_cli("--dir", str(store), "install", "--yes", "--host", "opencode", cwd=str(project)).returncode == 0
    cfg = isolate_home / ".config" / "opencode" / "opencode.json"
    env = _opencode_env(project)
    with FakeModel() as fm:
        doc = json.loads(cfg.read_text())
        doc["model"] = "anthropic/claude-sonnet-4-5"
        doc["provider"] = {"anthropic": {"options": {"baseURL": fm.url + "/v1", "apiKey": "sk-ant-fake"}}}
        cfg.write_text(json.dumps(doc, indent=2))
        proc = subprocess.run([opencode, "run", "hello"], cwd=project, env=env, capture_output=True, text=True,
                              timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    systems = [" ".join(p.get("text", "") for p in body.get("system") or []) for _, body in fm.requests]
    assert any(f"retained memory for {project.resolve()}" in s and "OPENCODE-BRIEF-MARKER" in s for s in systems)
