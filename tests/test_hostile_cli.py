"""Issue 17 items 9, 21 and 22, the rest of their class: a purge needs a person, a read never creates
a store, and exit codes follow the README's table.

Black-box: the CLI as a subprocess; a real pseudo-terminal where a person's answer is the point.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest

from tests.helpers.hostile import LEXICAL, cli, cli_json, one_line_error


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
    assert "--yes" in line or "--yes" in proc.stderr
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
