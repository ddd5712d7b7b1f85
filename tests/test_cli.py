"""The CLI through the real entry point: flags mirror the tools, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import cli_json, run_cli

COMMANDS = ["write", "search", "get", "list", "verify", "reindex", "checkpoint"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    proc = run_cli(command, "--help")
    assert proc.returncode == 0 and "--json" in proc.stdout and "--dir" in proc.stdout


def test_write_search_get_list_round_trip_with_json(store_dir):
    w = cli_json("write", "the build uses tox", "--kind", "decision", "--scope", "/repo/x", "--source", "README",
                 "--client-op-id", "op-7", "--field", "ticket=\"T-1\"", "--field", "n=3")
    assert w["durable"] is True and w["seq"] == 1
    assert set(w["checks"]) == {"append", "fsync", "readback_match", "chain"} and all(w["checks"].values())
    again = cli_json("write", "the build uses tox", "--client-op-id", "op-7")
    assert again["deduplicated"] is True and again["id"] == w["id"]

    s = cli_json("search", "tox", "--scope", "/repo/x", "-k", "5")
    assert s["returned"] == 1 and s["hits"][0]["id"] == w["id"] and s["hits"][0]["scope"] == "/repo/x"
    g = cli_json("get", w["id"])
    rec = g["records"][0]
    assert (rec["ticket"], rec["n"], rec["source"], rec["kind"]) == ("T-1", 3, "README", "decision")
    lst = cli_json("list", "--scope", "*")
    assert lst["total"] == 1 and lst["records"][0]["id"] == w["id"]

    fix = cli_json("write", "the build uses nox now", "--supersedes", w["id"], "--scope", "/repo/x")
    assert cli_json("search", "build", "--scope", "*")["hits"][0]["id"] == fix["id"]
    hist = cli_json("search", "build", "--scope", "*", "--include-superseded")
    assert hist["total_matched"] == 2


def test_human_output_is_readable(store_dir):
    out = run_cli("write", "remember the milk")
    assert out.returncode == 0 and out.stdout.startswith("wrote mem_") and "durable=true" in out.stdout
    out = run_cli("search", "milk")
    assert out.stdout.splitlines()[0] == "1 of 1 matching records" and "remember the milk" in out.stdout
    out = run_cli("verify")
    assert out.returncode == 0 and out.stdout.startswith("intact: 1 records") and out.stderr == ""


def test_checkpoint_writes_a_checkpoint_record(store_dir):
    c = cli_json("checkpoint", "auth refactor half done", "--summary", "tokens moved; next: tests")
    rec = cli_json("get", c["id"])["records"][0]
    assert rec["kind"] == "checkpoint" and rec["text"].startswith("auth refactor half done")


def test_exit_codes(store_dir):
    assert run_cli("get", "mem_MISSING").returncode == 1
    assert run_cli("search", "nothing-here").returncode == 1
    assert run_cli("write").returncode == 2
    assert run_cli("search", "x", "-k", "0").returncode == 2
    assert run_cli("bogus").returncode == 2
    assert not store_dir.exists()  # reads name a missing store and create none (issue 17 item 21)
    store_dir.mkdir()
    (store_dir / "log.jsonl").write_bytes(b"garbage\n")
    v = run_cli("verify")
    assert v.returncode == 1 and "NOT INTACT" in v.stdout and "corrupt line 1" in v.stdout


@pytest.mark.parametrize("args, needle, code", [
    (["write", "x", "--field", "nojson"], "not KEY=JSON", 2),
    (["write", "x", "--field", "k=notjson"], "is not JSON", 2),
    (["write", "x", "--field", "seq=1"], "reserved", 2),
    (["write", "x", "--supersedes", "mem_NOPE"], "not a record", 1),  # README: an id not found is 1
    (["write", "x", "--scope", "../up"], "'..'", 2),
    (["write", "x", "--kind", "bad kind!"], "invalid kind", 2),
    (["search", "x", "-k", "101"], "from 1 to 100", 2),
])
def test_errors_are_one_line_with_a_hint_and_no_traceback(store_dir, args, needle, code):
    proc = run_cli(*args)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "hint" in lines[0]


def test_unusable_store_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    proc = run_cli("--dir", str(blocker), "write", "x")
    assert proc.returncode == 1 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_dir_flag_and_env_precedence(tmp_path):
    flag_dir = tmp_path / "flagged"
    run_cli("write", "in the env store")
    run_cli("--dir", str(flag_dir), "write", "in the flag store")
    assert (flag_dir / "log.jsonl").read_bytes().count(b"\n") == 1
    assert json.loads(run_cli("list", "--json").stdout)["records"][0]["text"] == "in the env store"


def test_project_scope_defaults_follow_the_git_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    w = cli_json("write", "project fact", cwd=str(repo / "sub"))
    cli_json("write", "other project fact", "--scope", "/somewhere/else")
    rec = cli_json("get", w["id"])["records"][0]
    assert rec["scope"] == str(repo.resolve())
    seen = cli_json("search", "fact", cwd=str(repo))
    assert [h["id"] for h in seen["hits"]] == [w["id"]]
    assert cli_json("search", "fact", "--scope", "*", cwd=str(repo))["total_matched"] == 2


def test_reindex_reports_counts(store_dir):
    run_cli("write", "one")
    r = cli_json("reindex")
    assert r["records"] == 1 and r["lines_read"] == 1


def test_python_dash_m_and_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("retained ")


def _cli_bytes(*args: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "retained", *args], input=data, capture_output=True, timeout=60)


def test_write_dash_reads_the_text_from_stdin_byte_for_byte(store_dir):
    text = "line one\nline two \u00e9\u4e2d\U0001f600\r\n" + "x" * (1024 * 1024)  # more than argv can carry
    w = json.loads(_cli_bytes("write", "-", "--json", data=text.encode("utf-8")).stdout)
    assert w["durable"] is True
    got = json.loads(run_cli("get", w["id"], "--json").stdout)
    assert got["records"][0]["text"] == text


def test_write_dash_refuses_stdin_that_is_not_utf8(store_dir):
    proc = _cli_bytes("write", "-", data=b"caf\xe9")
    assert proc.returncode == 2 and b"not UTF-8" in proc.stderr and b"Traceback" not in proc.stderr


def test_with_json_an_error_is_a_json_object_on_stdout_and_a_line_on_stderr(store_dir):
    for args, code in ((["write", "x", "--supersedes", "mem_NOPE"], 1), (["search", "x", "-k", "0"], 2),
                       (["--dir", "", "list"], 2)):
        proc = run_cli(*args, "--json")
        assert proc.returncode == code, proc.stderr
        reply = json.loads(proc.stdout)
        assert set(reply) == {"error", "hint"} and reply["error"] and reply["hint"], reply
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and reply["error"] in lines[0]


@pytest.mark.parametrize("args", [["--dir", "", "list"], ["list", "--dir", ""], ["--dir", " ", "write", "x"],
                                  ["write", "x", "--dir="]])
def test_an_empty_dir_is_a_usage_error_not_the_default_store(store_dir, args):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "--dir is empty" in proc.stderr
    assert not (store_dir / "log.jsonl").exists()


def test_an_empty_dir_for_the_hook_prints_nothing_and_exits_zero():
    proc = run_cli("--dir", "", "hook", "session-start", input="{}")
    assert proc.returncode == 0 and proc.stdout == ""


def test_every_exit_code_the_cli_returns_is_in_the_readme():
    import re
    from pathlib import Path

    from retained import cli

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("#### Exit codes", 1)[1].split("\n\n", 2)[1]
    documented = {int(m) for m in re.findall(r"^\| `(\d+)` \|", table, re.M)}
    returned = {v for k, v in vars(cli).items() if k.startswith("EXIT_")}
    assert returned == documented, (returned, documented)


def test_a_full_disk_or_unreadable_file_is_one_line_not_an_internal_error(tmp_path):
    blocked = tmp_path / "store"
    blocked.mkdir()
    (blocked / "log.jsonl").mkdir()  # not a file: reading it fails with an OSError
    proc = run_cli("--dir", str(blocked), "list")
    assert proc.returncode == 1 and "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "log.jsonl is not a regular file" in proc.stderr and "hint:" in proc.stderr, proc.stderr


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_search_is_a_usage_error_as_an_empty_write_is(store_dir, query):
    write = run_cli("write", query)
    search = run_cli("search", query)
    assert write.returncode == search.returncode == 2
    assert "empty" in search.stderr and search.stdout == "" and "Traceback" not in search.stderr
    assert len(search.stderr.strip().splitlines()) == 1
