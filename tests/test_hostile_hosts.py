"""Issue 17 at the hosts' edge: hooks never block a host (item 10), every `--json` is a JSON document
(item 16), Codex's config comes back byte for byte (item 17), and installer messages do not
contradict themselves (item 24). Real config files in an isolated HOME, the CLI as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.hostile import LEXICAL, cli, no_crash


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


# -- item 10: a hook exits 0 on everything and notes the problem on stderr -------------------------------------
HOOK_INPUT = json.dumps({"session_id": "s1", "prompt": "how do we deploy", "hook_event_name": "UserPromptSubmit"})


@pytest.mark.parametrize("args", [["prompt", "--bogus"], ["prompt", "--budget", "abc"], ["prompt", "--budget", "0"],
                                  ["prompt", "--host", "no-such-host"], ["session-start", "--future-flag", "x"],
                                  ["no-such-event"], ["stop", "--host"],
                                  # other members of the class: = forms, huge or negative numbers, no event,
                                  # a stray argument, a short flag, an empty --dir
                                  ["prompt", "--budget=abc"], ["prompt", "--budget", "9" * 5000],
                                  ["session-start", "--budget", "-5"], [], ["prompt", "extra-word"],
                                  ["session-start", "-x"], ["prompt", "--host=nope"], ["stop", "--dir", ""]])
def test_a_hook_exits_0_on_any_command_line_and_says_why_on_stderr(args):
    proc = cli("hook", *args, input=HOOK_INPUT)
    no_crash(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip(), "the problem is noted on stderr"
    assert not proc.stdout.strip() or json.loads(proc.stdout), "stdout is nothing or the host's JSON"


def test_a_hook_with_an_ignored_flag_still_does_its_work(store_dir):
    """A newer hook line (a flag this version does not know) still gets its brief: the rest is used."""
    assert cli("write", "deploys go through the blue-green script").returncode == 0
    start = json.dumps({"session_id": "s2", "hook_event_name": "SessionStart", "source": "startup"})
    proc = cli("hook", "session-start", "--host", "claude", "--flag-from-the-future", input=start)
    assert proc.returncode == 0 and "--flag-from-the-future" in proc.stderr, proc.stderr
    assert "blue-green" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("stdin", [b"", b"not json", b"[1, 2]", b"\xff\xfe\x00", b'{"session_id": ' + b"[" * 5000,
                                   json.dumps({"session_id": ["not", "a", "string"], "prompt": {"a": 1}}).encode()])
@pytest.mark.parametrize("event", ["session-start", "prompt", "pre-compact", "stop"])
def test_a_hook_exits_0_on_any_input(event, stdin):
    proc = cli("hook", event, "--host", "claude", input=stdin)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    if event != "pre-compact":  # Claude Code's PreCompact takes plain text (compaction instructions)
        assert not proc.stdout.strip() or json.loads(proc.stdout)


# -- item 16: every command's --json is a JSON document ----------------------------------------------------------
@pytest.fixture
def claude_home(isolate_home) -> Path:
    (isolate_home / ".claude").mkdir()
    (isolate_home / ".claude.json").write_text("{}\n")
    return isolate_home


@pytest.mark.parametrize("args", [["install", "--host", "claude", "--yes"], ["install", "--host", "claude", "--dry-run"],
                                  ["uninstall", "--host", "claude", "--yes"],
                                  # the rest of the class: nothing to do, an unknown host, a refused file
                                  ["uninstall", "--host", "claude", "--dry-run"], ["install", "--host", "nope", "--yes"],
                                  ["install", "--host", "claude", "--host", "cursor", "--yes"]])
def test_install_and_uninstall_json_is_a_json_document(claude_home, args):
    if args[0] == "uninstall":
        assert cli("install", "--host", "claude", "--yes").returncode == 0
    if "cursor" in args:
        (claude_home / ".cursor").mkdir()
        (claude_home / ".cursor" / "mcp.json").write_text("{ not json")
    proc = cli(*args, "--json")
    no_crash(proc)
    doc = json.loads(proc.stdout)
    if "nope" in args:
        assert proc.returncode == 2 and doc["error"]
        return
    assert doc["command"] == args[0] and doc["exit_code"] == proc.returncode
    states = {h["host"]: (h["ok"], h["state"]) for h in doc["hosts"]}
    assert states["claude"][0] is True, doc
    if "cursor" in args:
        assert states["cursor"] == (False, "not wired") and proc.returncode == 1
        assert "does not parse" in next(h["why"] for h in doc["hosts"] if h["host"] == "cursor")
    if "--dry-run" not in args and args[0] == "install":
        assert any(f["action"] in ("created", "updated") and "claude" in f["hosts"] for f in doc["files"]), doc


@pytest.mark.parametrize("args", [["verify"], ["list"], ["scopes"], ["maintain"], ["brief"], ["search", "x"],
                                  ["doctor", "--host", "claude"], ["get", "mem_x"], ["write", "x", "--field", "a=nope"]])
def test_other_commands_json_is_a_json_document(claude_home, args):
    proc = cli(*args, "--json")
    no_crash(proc)
    json.loads(proc.stdout)


# -- item 17: Codex's config.toml comes back byte for byte ---------------------------------------------------------
CODEX_CONFIG = ('model = "o3"\n\n# the servers I rely on\n[mcp_servers.other]\ncommand = "other-server"\n\n'
                '# profiles below: keep this comment with its table\n[profiles.fast]\nmodel = "o4-mini"\n')


@pytest.fixture
def codex_home(isolate_home) -> Path:
    (isolate_home / ".codex").mkdir()
    (isolate_home / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    return isolate_home / ".codex"


def test_codex_install_keeps_a_comment_with_the_table_below_it(codex_home):
    assert cli("install", "--host", "codex", "--yes").returncode == 0
    text = (codex_home / "config.toml").read_text()
    assert "# profiles below: keep this comment with its table\n[profiles.fast]\n" in text, text


def test_codex_uninstall_gives_back_the_config_byte_for_byte(codex_home):
    before = {p.name: p.read_bytes() for p in codex_home.iterdir()}
    assert cli("install", "--host", "codex", "--yes").returncode == 0
    assert cli("uninstall", "--host", "codex", "--yes").returncode == 0
    after = {p.name: p.read_bytes() for p in codex_home.iterdir()}
    assert after == before


CODEX_VARIANTS = {
    "several servers, a comment above the next table": (
        '[mcp_servers.a]\ncommand = "a"\n\n[mcp_servers.b]\ncommand = "b"\n# b\'s note, kept with b\n\n'
        '# the profiles\n# (two lines of them)\n[profiles.x]\nmodel = "m"\n'),
    "no mcp_servers yet, a comment at the end": '[profiles.x]\nmodel = "m"\n# the last word\n',
    "a comment above hooks": ('[mcp_servers.a]\ncommand = "a"\n# hooks follow\n[hooks.state."elsewhere:stop:0:0"]\n'
                              'enabled = true\ntrusted_hash = "sha256:00"\n# after the hooks\n[profiles.x]\nmodel = "m"\n'),
    "a sub-table before the comment": ('[mcp_servers.a]\ncommand = "a"\n\n[mcp_servers.a.env]\nX = "1"\n'
                                       '# introduces features\n[features]\nhooks = true\n'),
    "only top-level keys": 'model = "o3"\n# a closing comment\n',
}


@pytest.mark.parametrize("text", list(CODEX_VARIANTS.values()), ids=list(CODEX_VARIANTS))
def test_codex_install_and_uninstall_keep_every_comment_in_place(codex_home, text):
    """The rest of the class: comments above other tables, a table with sub-tables, a file with no
    mcp_servers yet, hooks.state tables of someone else's."""
    (codex_home / "config.toml").write_text(text)
    assert cli("install", "--host", "codex", "--yes").returncode == 0
    installed = (codex_home / "config.toml").read_text()
    lines = text.splitlines()
    for i, line in enumerate(lines):  # every comment right above a header still sits right above it
        if line.startswith("[") and i and lines[i - 1].startswith("#"):
            k = i
            while k and lines[k - 1].startswith("#"):
                k -= 1
            assert "\n".join(lines[k:i + 1]) in installed, (lines[k:i + 1], installed)
    assert cli("uninstall", "--host", "codex", "--yes").returncode == 0
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]
    assert (codex_home / "config.toml").read_text() == text


# -- item 24: installer messages that agree with themselves ---------------------------------------------------------
def test_cursor_uninstall_plan_names_no_hooks_it_never_installed(isolate_home):
    (isolate_home / ".cursor").mkdir()
    (isolate_home / ".cursor" / "mcp.json").write_text("{}\n")
    assert cli("install", "--host", "cursor", "--no-hooks", "--yes").returncode == 0
    plan = cli("uninstall", "--host", "cursor", "--dry-run")
    assert "hook" not in plan.stdout.lower() + plan.stderr.lower(), plan.stdout


def test_a_read_only_wired_host_is_reported_once_and_truthfully(claude_home):
    assert cli("install", "--host", "claude", "--yes").returncode == 0
    for path in (claude_home / ".claude.json", claude_home / ".claude" / "settings.json"):
        path.chmod(0o444)
    proc = cli("install", "--host", "claude", "--yes")
    said = proc.stdout + proc.stderr
    assert "add the retained server entry" not in said, said  # it is there already
    assert not ("nothing to change" in said and "not wired" in said), said


def test_a_dry_run_never_says_done(claude_home):
    (claude_home / ".cursor").mkdir()
    (claude_home / ".cursor" / "mcp.json").write_text("{ not json")
    proc = cli("install", "--host", "claude", "--host", "cursor", "--dry-run")
    no_crash(proc)
    assert "done" not in (proc.stdout + proc.stderr).splitlines()[-1], proc.stderr


def test_a_server_only_install_plan_of_cursor_names_nothing_it_leaves_out(isolate_home):
    """The rest of the class: the install plan of Cursor with --no-hooks says nothing about its hooks either."""
    (isolate_home / ".cursor").mkdir()
    (isolate_home / ".cursor" / "mcp.json").write_text("{}\n")
    plan = cli("install", "--host", "cursor", "--no-hooks", "--dry-run")
    assert plan.returncode == 0 and "hook" not in (plan.stdout + plan.stderr).lower(), plan.stdout


def test_a_read_only_file_that_needs_a_change_is_refused_with_a_hint_that_works(claude_home):
    """Its hint does not send the user to --dry-run, which refuses the same file."""
    (claude_home / ".claude.json").chmod(0o444)
    for extra in ([], ["--dry-run"]):
        proc = cli("install", "--host", "claude", "--yes", *extra)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 1 and "read-only" in said, said
        assert "--dry-run" not in said.split("read-only", 1)[1], said  # a dry run refuses it as well


def test_a_dry_run_over_a_failing_host_says_what_it_would_do(claude_home):
    (claude_home / ".cursor").mkdir()
    (claude_home / ".cursor" / "mcp.json").write_text("{ not json")
    proc = cli("uninstall", "--host", "claude", "--host", "cursor", "--dry-run")
    no_crash(proc)
    last = (proc.stdout + proc.stderr).splitlines()[-1]
    assert "done" not in last and "would" in last, last


@pytest.mark.parametrize("command", ["list", "search", "install", "export", "doctor", "verify", "import", "forget"])
def test_an_unknown_flag_points_to_the_commands_own_help(command):
    args = [command] + (["x"] if command in ("search", "forget") else []) + ["--no-such-flag"]
    proc = cli(*args)
    assert proc.returncode == 2
    assert f"retained {command} --help" in proc.stderr, proc.stderr
