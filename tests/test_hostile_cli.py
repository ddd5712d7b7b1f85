"""Issue 17 items 9, 21 and 22, the rest of their class: a purge needs a person, a read never creates
a store, and exit codes follow the README's table.

Black-box: the CLI as a subprocess; a real pseudo-terminal where a person's answer is the point.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from tests.helpers.hostile import LEXICAL, cli, cli_json, no_crash, one_line_error


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _on_a_terminal(args: list[str], answer: bytes, timeout: float = 60) -> tuple[int, bytes]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal, answer its question, return
    (exit code, everything it printed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "retained", *args], stdin=follower, stdout=follower,
                            stderr=follower, env=dict(os.environ, **LEXICAL), close_fds=True)
    os.close(follower)
    said, asked, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                said += chunk
                if not asked and b"[y/N]" in said:
                    os.write(leader, answer)
                    asked = True
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=timeout), said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


# -- item 9 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["stdin from /dev/null", "stdin a pipe with y", "--json"])
def test_every_way_without_a_terminal_refuses_a_purge_without_yes(store_dir, how):
    rid = cli_json("write", "a record an agent wants gone")["id"]
    if how == "stdin from /dev/null":
        with open(os.devnull, "rb") as null:
            raw = subprocess.run([sys.executable, "-m", "retained", "forget", rid, "--purge"], stdin=null,
                                 capture_output=True, text=True, env=dict(os.environ, **LEXICAL), timeout=120)
        proc = subprocess.CompletedProcess(raw.args, raw.returncode, raw.stdout, raw.stderr)
    elif how == "stdin a pipe with y":
        proc = cli("forget", rid, "--purge", "--reason", "r", input="y\n")
    else:
        proc = cli("forget", rid, "--purge", "--json", input="yes\n")
    line = one_line_error(proc, how)
    assert "--yes" in line, line
    assert "terminal" in proc.stderr
    assert cli_json("get", rid)["records"][0]["text"] == "a record an agent wants gone"


def test_a_person_on_a_terminal_confirms_a_purge(store_dir):
    rid = cli_json("write", "a record a person decides to purge")["id"]
    code, said = _on_a_terminal(["forget", rid, "--purge"], b"y\n")
    assert code == 0, said
    assert b"a record a person decides to purge" not in (store_dir / "log.jsonl").read_bytes()


def test_a_person_on_a_terminal_who_says_no_purges_nothing(store_dir):
    rid = cli_json("write", "a record a person keeps")["id"]
    code, said = _on_a_terminal(["forget", rid, "--purge"], b"n\n")
    assert code == 1, said
    assert cli_json("get", rid)["records"][0]["text"] == "a record a person keeps"


def test_a_retraction_without_a_terminal_still_needs_no_confirmation(store_dir):
    """Only the purge asks: a retraction is undoable, an agent may do it."""
    rid = cli_json("write", "a record to retract")["id"]
    assert cli("forget", rid, input="").returncode == 0


# -- item 21: only a write creates a store ----------------------------------------------------------------
@pytest.mark.parametrize("command", [["maintain"], ["reindex"], ["forget", "mem_x"], ["search", "x", "--json"],
                                     ["list", "--json"], ["export", "--format", "markdown"]])
def test_every_read_on_a_mistyped_store_names_it_and_creates_nothing(tmp_path, command):
    typo = tmp_path / "stroe"
    proc = cli(*command, env={"RETAINED_DIR": str(typo)})
    line = one_line_error(proc, " ".join(command))
    assert proc.returncode == 1 and str(typo) in line, line
    assert not typo.exists()


@pytest.mark.parametrize("command", [["search", "x", "-k", "0"], ["list", "--limit", "0"], ["search", "x", "-k", "101"]])
def test_a_bad_argument_on_a_missing_store_is_still_a_usage_error(tmp_path, command):
    typo = tmp_path / "stroe"
    proc = cli("--dir", str(typo), *command)
    no_crash(proc, " ".join(command))
    assert proc.returncode == 2 and "error:" in proc.stderr and str(typo) not in proc.stderr
    assert not typo.exists()


def test_a_write_creates_the_store_a_read_then_finds(tmp_path):
    new = tmp_path / "new-store"
    assert cli("--dir", str(new), "write", "the first record").returncode == 0
    assert cli_json("--dir", str(new), "list")["total"] == 1


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_hook_on_a_store_path_that_is_a_file_says_nothing_and_notes_why(tmp_path, event):
    not_a_dir = tmp_path / "store-file"
    not_a_dir.write_text("not a store")
    payload = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit", "prompt": "deploy?"}
    proc = cli("hook", event, "--host", "claude", input=json.dumps(payload), env={"RETAINED_DIR": str(not_a_dir)})
    assert proc.returncode == 0
    assert proc.stdout.strip() == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a directory" in proc.stderr


def test_session_start_with_no_store_yet_still_says_there_is_no_memory(tmp_path):
    """Nothing there yet is a store without memory (earlier issues' promise), not an error."""
    proc = cli("hook", "session-start", "--host", "claude", input=json.dumps({"session_id": "s1", "cwd": str(tmp_path)}),
               env={"RETAINED_DIR": str(tmp_path / "not-yet")})
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
    assert not (tmp_path / "not-yet" / "log.jsonl").exists()


# -- item 22: a valid command that cannot succeed exits 1 -------------------------------------------------
@pytest.mark.parametrize("case", ["supersede a purged record", "purge a purged record", "undo a purged record",
                                  "retract a forget record", "export under a file", "retract a retracted record twice"])
def test_a_refusal_of_a_valid_command_exits_1(store_dir, tmp_path, case):
    rid = cli_json("write", "release on thursdays")["id"]
    if case == "retract a retracted record twice":
        cli("forget", rid)
        proc = cli("forget", rid, "--undo")
        assert proc.returncode == 0
        proc = cli("forget", rid, "--undo")
    elif case == "retract a forget record":
        forget_id = cli_json("forget", rid)["id"]
        proc = cli("forget", forget_id)
    elif case == "export under a file":
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        proc = cli("export", "-o", str(blocker / "out.jsonl"))
    else:
        assert cli("forget", rid, "--purge", "--yes").returncode == 0
        proc = {"supersede a purged record": lambda: cli("write", "release on fridays", "--supersedes", rid),
                "purge a purged record": lambda: cli("forget", rid, "--purge", "--yes"),
                "undo a purged record": lambda: cli("forget", rid, "--undo")}[case]()
    one_line_error(proc, case)
    assert proc.returncode == 1, (case, proc.stderr)


def test_refusals_over_mcp_are_still_tool_errors_with_their_reason(store_dir):
    from tests.mcp_wire import WireServer

    rid = cli_json("write", "release on thursdays")["id"]
    cli_json("write", "release on wednesdays", "--supersedes", rid)
    server = WireServer(env=LEXICAL)
    try:
        server.initialize()
        reply = server.call(2, "memory_write", {"text": "release on tuesdays", "supersedes": rid})
        assert reply["result"]["isError"] is True
        assert "already corrected" in json.dumps(reply["result"]["content"])
    finally:
        assert server.close() == 0, server.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_an_export_of_a_missing_store_writes_no_file(tmp_path, fmt):
    out = tmp_path / ("out.jsonl" if fmt == "jsonl" else "md")
    proc = cli("--dir", str(tmp_path / "stroe"), "export", "--format", fmt, "-o", str(out))
    assert proc.returncode == 1 and str(tmp_path / "stroe") in one_line_error(proc, "export of a missing store")
    assert not out.exists() and not (tmp_path / "stroe").exists()
