"""Issue 17: the store survives what anyone can put in its files, and its commands keep their word.

Black-box: the CLI as a subprocess against real files. Each fault still present on main is marked
xfail(strict) with what is still wrong, so a fix turns its test red until the mark goes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from retained import records
from tests.helpers.hostile import (
    LEXICAL,
    append_line,
    cli,
    cli_json,
    every_file_bytes,
    file_size_limit,
    jsonl,
    no_crash,
    one_line_error,
    sealed_chain,
)


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _write(text: str, *extra: str, **kw) -> dict:
    return cli_json("write", text, *extra, **kw)


# -- item 1: one hostile line must not disable the store (the depth the issue names, and the rest of its class) ---
DEEP = {
    "arrays 5,000 deep": b"[" * 5000 + b"]" * 5000,
    "objects 5,000 deep": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "arrays 100,000 deep, unclosed": b"[" * 100_000,
    "a record whose field nests 3,000 deep": (b'{"id":"mem_x","kind":"note","prev":"' + b"0" * 64 + b'","seq":2,'
                                              b'"sha256":"' + b"1" * 64 + b'","text":"t","ts":"2026-01-01T00:00:00Z",'
                                              b'"f":' + b"[" * 3000 + b"]" * 3000 + b"}"),
    "300 deep (past the bound, within the parser's reach)": b'{"a":' + b"[" * 300 + b"]" * 300 + b"}",
    "an integer of 5,000 digits": b'{"seq":' + b"9" * 5000 + b"}",
    "a record-shaped line holding a lone surrogate escape": (b'{"id":"mem_s","kind":"note","prev":"' + b"0" * 64
                                                             + b'","seq":2,"sha256":"' + b"1" * 64
                                                             + b'","text":"\\ud800","ts":"2026-01-01T00:00:00Z"}'),
}


@pytest.mark.parametrize("shape", list(DEEP), ids=list(DEEP))
def test_a_deeply_nested_line_in_the_log_is_a_corrupt_line_that_is_skipped_and_counted(store_dir, shape):
    first = _write("the first record, before the hostile line")
    append_line(store_dir, DEEP[shape])
    second = cli("write", "a record after the hostile line")
    no_crash(second, "write")
    assert second.returncode == 0, second.stderr
    verify = cli("verify")
    no_crash(verify, "verify")
    assert verify.returncode == 1 and "corrupt line 2" in verify.stdout, verify.stdout  # names the line
    brief = cli("brief")
    no_crash(brief, "brief")
    assert brief.returncode == 0 and "could not be read" in brief.stdout and "retained verify" in brief.stdout
    reindex = cli("reindex")
    no_crash(reindex, "reindex")
    assert reindex.returncode == 0 and "1 corrupt line" in reindex.stdout, reindex.stdout
    found = cli_json("search", "hostile")
    assert found["total_matched"] == 2
    got = cli_json("get", first["id"])
    assert got["records"][0]["text"] == "the first record, before the hostile line"


def test_every_read_command_survives_a_deeply_nested_line(store_dir, tmp_path):
    _write("kept record one")
    append_line(store_dir, DEEP["arrays 5,000 deep"])
    _write("kept record two")
    for args in (["list"], ["scopes"], ["maintain"], ["export"], ["export", "--format", "markdown"],
                 ["search", "kept"], ["brief", "--scope", "*"], ["get", "mem_nothing"]):
        proc = cli(*args)
        no_crash(proc, " ".join(args))


def test_mcp_writes_keep_working_with_a_deeply_nested_line_in_the_log(store_dir):
    from tests.mcp_wire import WireServer

    _write("before")
    append_line(store_dir, DEEP["objects 5,000 deep"])
    server = WireServer(env=LEXICAL)
    try:
        server.initialize()
        reply = server.call(2, "memory_write", {"text": "written over MCP after the hostile line"})
        assert reply["result"]["structuredContent"]["durable"] is True, reply
        verify = server.call(3, "memory_verify", {})["result"]["structuredContent"]
        assert verify["chain_ok"] is False and verify["corrupt_lines"][0]["line"] == 2
    finally:
        assert server.close() == 0, server.stderr


def test_a_write_refuses_fields_nested_deeper_than_the_log_reads(store_dir):
    """The reader's bound, enforced before a line is written: never acknowledge a line that then reads as corrupt."""
    deep = "[" * 300 + "]" * 300
    proc = cli("write", "x", "--field", f"shape={deep}")
    assert "nested deeper" in one_line_error(proc, "deep --field")
    assert proc.returncode == 2
    assert not (store_dir / "log.jsonl").exists()  # refused before anything is written: no store is made


def test_a_field_value_nested_5000_deep_is_a_usage_error():
    proc = cli("write", "x", "--field", "shape=" + "[" * 5000 + "]" * 5000)
    one_line_error(proc, "--field 5,000 deep")
    assert proc.returncode == 2


def test_an_import_file_with_a_deeply_nested_line_imports_the_rest(tmp_path):
    path = tmp_path / "export.jsonl"
    path.write_bytes(jsonl(sealed_chain([{"text": "a good record from elsewhere"}])) + DEEP["arrays 5,000 deep"] + b"\n")
    proc = cli("import", str(path))
    no_crash(proc, "import")
    assert proc.returncode == 0 and "would add 1" in proc.stdout, proc.stdout


# -- item 3: no command writes over a file of a store --------------------------------------------------------
def _store_with_history(store_dir: Path) -> bytes:
    _write("one")
    two = _write("two")
    assert cli("forget", two["id"], "--reason", "history").returncode == 0
    _write("three")
    return (store_dir / "log.jsonl").read_bytes()


@pytest.mark.parametrize("target", ["log.jsonl", "index.sqlite3", "log.lock", "../store/./log.jsonl",
                                    "quarantine/out.jsonl", "export-inside-the-store.jsonl"])
def test_export_refuses_to_write_over_or_into_the_store(store_dir, target):
    before = _store_with_history(store_dir)
    (store_dir / "quarantine").mkdir(exist_ok=True)
    files = every_file_bytes(store_dir)
    proc = cli("export", "-o", str(store_dir / target))
    line = one_line_error(proc, f"export -o {target}")
    assert "store" in line
    assert (store_dir / "log.jsonl").read_bytes() == before
    assert every_file_bytes(store_dir).keys() == files.keys()
    assert cli("verify").returncode == 0


def test_markdown_export_refuses_the_store_folder(store_dir):
    _store_with_history(store_dir)
    names = set(every_file_bytes(store_dir))
    proc = cli("export", "--format", "markdown", "-o", str(store_dir))
    one_line_error(proc, "export markdown into the store")
    assert set(every_file_bytes(store_dir)) == names


def test_export_through_a_symlink_to_the_log_leaves_the_log_alone(store_dir, tmp_path):
    before = _store_with_history(store_dir)
    link = tmp_path / "link.jsonl"
    link.symlink_to(store_dir / "log.jsonl")
    proc = cli("export", "-o", str(link))
    no_crash(proc)
    assert (store_dir / "log.jsonl").read_bytes() == before
    assert cli("verify").returncode == 0


# -- item 4: imports may only add ----------------------------------------------------------------------------
def _import_file(tmp_path: Path, specs: list[dict]) -> Path:
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(jsonl(sealed_chain(specs)))
    return path


def _current_ids(scope: str = "*") -> set[str]:
    return {r["id"] for r in cli_json("list", "--scope", scope, "--limit", "500")["records"]}


@pytest.mark.parametrize("action", ["retract", "retract with a reason"])
def test_an_import_cannot_retract_a_local_record(tmp_path, action):
    local = _write("the deploy key lives in the vault")["id"]
    spec = {"kind": "forget", "text": "retract", "action": "retract", "targets": [local]}
    if action != "retract":
        spec["reason"] = "the attacker says so"
    path = _import_file(tmp_path, [spec])
    dry = cli("import", str(path))
    no_crash(dry)
    assert local in dry.stdout  # what it claims about a local record is shown, by id
    cli("import", str(path), "--apply")
    assert local in _current_ids()
    assert "retracted" not in cli_json("get", local)["records"][0]


def test_an_import_cannot_undo_a_local_retraction(tmp_path):
    local = _write("an old secret-free note someone retracted")["id"]
    assert cli("forget", local, "--reason", "wrong").returncode == 0
    path = _import_file(tmp_path, [{"kind": "forget", "text": "undo", "action": "undo", "targets": [local]}])
    dry = cli("import", str(path))
    assert local in dry.stdout
    cli("import", str(path), "--apply")
    assert local not in _current_ids()


def test_an_import_cannot_supersede_a_local_record(tmp_path):
    local = _write("the deploy key lives in the vault")["id"]
    path = _import_file(tmp_path, [{"text": "the deploy key lives in the attacker's bucket", "supersedes": local}])
    dry = cli("import", str(path))
    assert local in dry.stdout
    cli("import", str(path), "--apply")
    assert local in _current_ids()
    assert "superseded_by" not in cli_json("get", local)["records"][0]


def test_an_import_may_supersede_a_record_of_the_same_import(tmp_path):
    """What an import says about its own records stands: a chain imported whole stays a chain."""
    old, new = sealed_chain([{"text": "release on thursdays"}, {"text": "release on wednesdays"}])
    new = records.seal(dict(new, supersedes=old["id"]))
    path = tmp_path / "chain.jsonl"
    path.write_bytes(jsonl([old, new]))
    assert cli("import", str(path), "--apply").returncode == 0
    assert _current_ids() == {new["id"]}


def test_reserved_fields_in_an_import_are_not_shown_as_state(tmp_path):
    path = _import_file(tmp_path, [{"text": "claims to be retracted", "retracted": {"by": "mem_x", "reason": "r", "ts": "t"},
                                    "superseded_by": "mem_y"}])
    cli("import", str(path), "--apply")
    rid = json.loads(path.read_bytes())["id"]
    rec = cli_json("get", rid)["records"][0]
    assert "retracted" not in rec and "superseded_by" not in rec, rec


@pytest.mark.parametrize("scope", ["../../x", "a/../../etc", "line\nbreak", "nul\u0000byte", " padded ", "x" * 600])
def test_imported_scopes_are_checked_like_the_cli(tmp_path, scope):
    path = _import_file(tmp_path, [{"text": "a record with a bad scope", "scope": scope}])
    if "\0" not in scope:  # (no NUL can pass through argv)
        assert cli("write", "probe", "--scope", scope).returncode == 2  # the CLI refuses it
    dry = cli("import", str(path))
    no_crash(dry)
    cli("import", str(path), "--apply")
    assert scope not in {s["scope"] for s in cli_json("scopes")["scopes"]}


# -- item 5: a purge leaves no byte of what it purged, whatever its length --------------------------------------
def _torn_copy(store_dir: Path, text: str, cut_in_text: int | None) -> None:
    """A crashed append of `text` (as FORMAT.md's recipe writes it), cut inside the text or just after it."""
    tail = {"seq": 1, "sha256": records.GENESIS}
    lines = (store_dir / "log.jsonl").read_bytes().splitlines() if (store_dir / "log.jsonl").exists() else []
    if lines:
        tail = json.loads(lines[-1])
    rec = records.seal({"seq": tail["seq"] + 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "note",
                        "text": text, "prev": tail["sha256"]})
    line = records.format_line(rec)
    at = line.index(b'"text":"') + len(b'"text":"')
    cut = at + cut_in_text if cut_in_text is not None else at + len(text.encode()) + 5
    append_line(store_dir, line[:cut], newline=False)


def test_purge_removes_a_short_text_from_every_file_of_the_store(store_dir):
    secret = "Qx7Zk9W"
    _write("an unrelated record first")
    _torn_copy(store_dir, secret, None)  # the crashed first try ...
    rid = _write(secret)["id"]  # ... and the retry, which quarantines it
    assert any(secret.encode() in b for b in every_file_bytes(store_dir / "quarantine").values())
    proc = cli("forget", rid, "--purge", "--yes")
    assert proc.returncode == 0, proc.stderr
    left = [name for name, data in every_file_bytes(store_dir).items() if secret.encode() in data]
    assert left == []


def test_purge_removes_a_ten_character_fragment_of_a_longer_text(store_dir):
    text = "Zq8Wv3Ny1T and the rest of a longer purged record"
    _write("an unrelated record first")
    _torn_copy(store_dir, text, 10)
    rid = _write(text)["id"]
    proc = cli("forget", rid, "--purge", "--yes")
    assert proc.returncode == 0, proc.stderr
    left = [name for name, data in every_file_bytes(store_dir).items() if b"Zq8Wv3Ny1T" in data]
    assert left == []


# -- item 7: the same root, readable errors ------------------------------------------------------------------
@pytest.mark.parametrize("port", ["99999", "-1", "65536", "abc", "1e3", "9" * 5000])
def test_ui_port_out_of_range_is_a_usage_error(port):
    proc = cli("ui", "--no-open", "--port", port, timeout=30)
    assert one_line_error(proc, f"ui --port {port}") and proc.returncode == 2


def test_reindex_on_a_full_disk_says_so_and_leaves_no_growing_wal(store_dir):
    store_dir.mkdir()
    body = "lorem ipsum dolor sit amet " * 20
    (store_dir / "log.jsonl").write_bytes(jsonl(sealed_chain([{"text": f"record {i} {body}"} for i in range(3000)])))
    assert cli("verify").returncode == 0  # the index is built while there is room
    limit = (store_dir / "index.sqlite3").stat().st_size - 4096
    proc = subprocess.run([sys.executable, "-m", "retained", "reindex"], capture_output=True, text=True,
                          preexec_fn=file_size_limit(limit), env=dict(os.environ, **LEXICAL), timeout=300)
    line = one_line_error(proc, "reindex on a full disk")
    assert proc.returncode == 1
    assert "cannot rollback" not in line and "no space left" in line and "retained reindex" in line, line
    wal = store_dir / "index.sqlite3-wal"
    assert not wal.exists() or wal.stat().st_size <= limit


def test_an_instruction_file_over_8_mib_is_named_too_big(tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text("# Project\n\n## Conventions\n\n" + "- use tabs for indentation everywhere\n" * 250_000)
    assert path.stat().st_size > 8 * 1024 * 1024
    proc = cli("import", str(path))
    no_crash(proc)
    said = proc.stdout + proc.stderr
    assert "too big to read as memory (the limit is 8.0 MiB)" in said and "split it" in said, said[-400:]


def _big_markdown() -> str:
    return "# Notes\n\n" + "- a line of a note that goes on for a while\n" * 220_000  # over 8 MiB


def test_a_memory_file_over_8_mib_inside_a_folder_is_named_too_big_and_the_rest_is_taken(tmp_path):
    """The rest of the class: a topic file of a memory folder, and a host's own GEMINI.md via --from."""
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("- [Deploys](deploys.md) how we deploy\n")
    (folder / "deploys.md").write_text("---\nname: deploys\ntype: project\n---\nDeploys run from main only.\n")
    (folder / "huge.md").write_text(_big_markdown())
    proc = cli("import", str(folder))
    no_crash(proc)
    said = proc.stdout + proc.stderr
    assert "would add 1" in proc.stdout and "huge.md" in said and "too big" in said, said[-600:]

    gemini = tmp_path / "home"
    (gemini / ".gemini").mkdir(parents=True)
    (gemini / ".gemini" / "GEMINI.md").write_text(_big_markdown())
    proc = cli("import", "--from", "gemini", env={"HOME": str(gemini)})
    no_crash(proc)
    said = proc.stdout + proc.stderr
    assert "GEMINI.md" in said and "too big" in said and "reads as memory (no" not in said, said[-600:]


@pytest.mark.parametrize("cut", ["the newline only", "the last 40 bytes"])
def test_a_cut_acknowledged_record_is_not_called_never_acknowledged(store_dir, cut):
    _write("record one")
    two = _write("record two, acknowledged")
    assert cli("verify").returncode == 0  # the index has seen it
    path = store_dir / "log.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-1] if cut == "the newline only" else data[:-40])
    said = ""
    for args in (["verify"], ["write", "record three"]):
        proc = cli(*args)
        no_crash(proc)
        said += proc.stdout + proc.stderr
    assert "never acknowledged" not in said, said
    assert f"record seq {two['seq']} ({two['id']})" in said, said


def _cpu_limit(seconds: int):
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    return pre


def test_a_huge_hostile_last_line_costs_a_write_one_read_not_a_quadratic_copy(store_dir):
    """Measured in CPU seconds (a resource limit, not a clock): a linear read of 64 MiB takes about one;
    the quadratic copy took 26 on the machine this was written on."""
    _write("before")
    append_line(store_dir, b'{"x":"' + b"a" * (64 * 1024 * 1024) + b'"}')
    proc = subprocess.run([sys.executable, "-m", "retained", "write", "after"], capture_output=True, text=True,
                          preexec_fn=_cpu_limit(10), env=dict(os.environ, **LEXICAL), timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-300:])


# -- item 9: no purge without a person to confirm it ---------------------------------------------------------
@pytest.mark.parametrize("stdin", ["", "y\n", "yes\n"])
def test_purge_without_yes_refuses_when_there_is_no_terminal(store_dir, stdin):
    rid = _write("a record an agent wants gone for good")["id"]
    proc = cli("forget", rid, "--purge", input=stdin)
    line = one_line_error(proc, "purge without --yes, no terminal")
    assert "--yes" in line, line
    assert cli_json("get", rid)["records"][0]["text"] == "a record an agent wants gone for good"


# -- item 13: one resolver for every path --------------------------------------------------------------------
@pytest.fixture
def remote_project(tmp_path) -> Path:
    repo = tmp_path / "app"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://github.com/org/app.git"], check=True)
    return repo


def test_brief_scope_takes_the_project_short_name_like_list_and_search(remote_project):
    _write("app deploys on fridays", cwd=remote_project)
    assert cli_json("list", "--scope", "app", cwd=remote_project)["total"] == 1
    assert cli_json("search", "fridays", "--scope", "app", cwd=remote_project)["total_matched"] == 1
    brief = cli("brief", "--scope", "app", cwd=remote_project)
    assert "app deploys on fridays" in brief.stdout, brief.stdout


# -- item 21: reads name a missing store; hooks say nothing on one that cannot be opened ---------------------------

@pytest.mark.parametrize("command", [pytest.param(c, id=c[0]) for c in
                                     (["verify"], ["list"], ["search", "x"], ["brief"], ["get", "mem_x"], ["export"])]
                         + [pytest.param(["scopes"], id="scopes (as it already does)")])
def test_a_read_on_a_mistyped_dir_names_the_missing_store_and_creates_nothing(tmp_path, command):
    typo = tmp_path / "stroe"
    proc = cli("--dir", str(typo), *command)
    line = one_line_error(proc, " ".join(command))
    assert proc.returncode == 1 and str(typo) in line
    assert not typo.exists()


def test_session_start_on_a_store_that_cannot_be_opened_prints_nothing_and_says_why(tmp_path):
    not_a_dir = tmp_path / "store-file"
    not_a_dir.write_text("not a store")
    proc = cli("hook", "session-start", "--host", "claude", input=json.dumps({"session_id": "s1", "cwd": str(tmp_path)}),
               env={"RETAINED_DIR": str(not_a_dir)})
    assert proc.returncode == 0
    assert proc.stdout.strip() == "", proc.stdout
    assert proc.stderr.strip(), "the reason goes to stderr"


# -- item 22: exit codes follow the README's table -----------------------------------------------------------
@pytest.mark.parametrize("case", ["supersede a superseded record", "undo a record that is not retracted",
                                  "export into a missing folder", "supersede a retracted record"])
def test_a_valid_command_that_cannot_succeed_exits_1_not_2(tmp_path, case):
    old = _write("release on thursdays")["id"]
    if case == "supersede a superseded record":
        _write("release on wednesdays", "--supersedes", old)
        proc = cli("write", "release on tuesdays", "--supersedes", old)
    elif case == "undo a record that is not retracted":
        proc = cli("forget", "--undo", old)
    elif case == "supersede a retracted record":
        assert cli("forget", old, "--reason", "wrong day").returncode == 0
        proc = cli("write", "release on mondays", "--supersedes", old)
    else:
        proc = cli("export", "-o", str(tmp_path / "no-such-folder" / "out.jsonl"))
    one_line_error(proc, case)
    assert proc.returncode == 1


@pytest.mark.parametrize("args", [["search", "x", "-k", "0"], ["--dir", "", "list"], ["write", "x", "--field", "a=nope"],
                                  ["list", "--limit", "-3"], ["no-such-command"]])
def test_usage_errors_still_exit_2(args):
    proc = cli(*args)
    no_crash(proc)
    assert proc.returncode == 2


# -- items 15 and 20: imports say what they skipped, and take only what is memory ---------------------------
def test_an_import_names_the_sections_it_skipped_and_why(tmp_path):
    import shutil

    home = tmp_path / "codex"
    shutil.copytree(Path(__file__).parent / "fixtures" / "native" / "codex", home)
    proc = cli("import", "--from", "codex", env={"CODEX_HOME": str(home)})
    no_crash(proc)
    assert "would add 7" in proc.stdout, proc.stdout  # what it takes, as before
    said = proc.stdout + proc.stderr
    for section in ("What's in Memory", "Task 1"):
        assert section in said, f"{section!r} skipped without a word: {said}"
    assert "skip" in said.lower()


def test_a_fence_after_the_last_todo_item_is_not_part_of_it(tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text("# Shop\n\n## TODO\n\n- migrate the cart to the new API\n\n```sh\nmake migrate\n```\n")
    plan = cli_json("import", str(path))
    todos = [a["text"] for a in plan["actions"] if a["kind"] == "todo"]
    assert todos and all("```" not in t and "make migrate" not in t for t in todos), todos


@pytest.mark.parametrize("tail", ["\n```sh\nmake migrate\n```\n", "```\nmake migrate\n```\n",
                                  "\n~~~\nmake migrate\n~~~\n", "\nSome prose first.\n\n```sh\nmake migrate\n```\n"],
                         ids=["after a blank line", "right under the item", "a tilde fence", "after prose"])
def test_a_fence_that_is_not_indented_under_a_todo_item_is_not_part_of_it(tmp_path, tail):
    path = tmp_path / "CLAUDE.md"
    path.write_text("# Shop\n\n## TODO\n\n- migrate the cart to the new API\n" + tail)
    actions = cli_json("import", str(path))["actions"]
    item = [a["text"] for a in actions if a["text"].startswith("migrate the cart")]
    assert item == ["migrate the cart to the new API"], actions
    assert any("make migrate" in a["text"] for a in actions), "the code block is kept, not dropped"


def test_a_fence_indented_under_a_todo_item_stays_with_it(tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text("## TODO\n\n- run the migration:\n  ```sh\n  make migrate\n  ```\n- then the rest\n")
    todos = [a["text"] for a in cli_json("import", str(path))["actions"] if a["kind"] == "todo"]
    assert len(todos) == 2 and "make migrate" in todos[0] and "make migrate" not in todos[1], todos


def test_a_codex_memory_folder_named_by_path_says_what_it_skipped(tmp_path):
    import shutil

    home = tmp_path / "codex"
    shutil.copytree(Path(__file__).parent / "fixtures" / "native" / "codex", home)
    proc = cli("import", str(home / "memories"), env={"CODEX_HOME": str(home)})
    no_crash(proc)
    assert "would add 7" in proc.stdout, proc.stdout
    # issue 32: a task's bullet points import whatever heading holds them; its rollout files and keywords
    # (Codex's evidence, not memories) are what is skipped, and said
    assert "What's in Memory" in proc.stderr and "rollout_summary_files" in proc.stderr and "skipped" in proc.stderr, \
        proc.stderr


# -- issue 29 item 7: export -o refuses any store's own files --------------------------------------------------
@pytest.mark.parametrize("target", ["log.jsonl", "index.sqlite3", "vectors.sqlite3", "team/shared.json",
                                    "team/new-file.jsonl", "fresh.jsonl"])
def test_export_refuses_another_stores_files_recognised_by_its_files(store_dir, tmp_path, target):
    other = tmp_path / "elsewhere" / "other-store"
    assert cli("--dir", str(other), "write", "the other store's own record").returncode == 0
    (other / "team").mkdir(exist_ok=True)
    (other / "team" / "shared.json").write_text("{}")
    _write("a record of this store")
    files = every_file_bytes(other)
    proc = cli("export", "-o", str(other / target))
    line = one_line_error(proc, f"export -o {target} of another store")
    assert str(other) in line and "store" in line
    assert every_file_bytes(other) == files
    assert cli("--dir", str(other), "verify").returncode == 0


def test_export_through_a_symlinked_folder_into_another_store_is_refused(store_dir, tmp_path):
    other = tmp_path / "other-store"
    assert cli("--dir", str(other), "write", "kept as it is").returncode == 0
    _write("a record of this store")
    (tmp_path / "innocent").symlink_to(other)
    before = (other / "log.jsonl").read_bytes()
    one_line_error(cli("export", "-o", str(tmp_path / "innocent" / "log.jsonl")), "export through a symlinked folder")
    one_line_error(cli("export", "--format", "markdown", "-o", str(tmp_path / "innocent")), "markdown into it")
    assert (other / "log.jsonl").read_bytes() == before


def test_export_next_to_a_lone_log_named_file_still_writes(store_dir, tmp_path):
    """A folder with a file called log.jsonl and nothing else of a store is not a store."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "log.jsonl").write_text("not a store\n")
    _write("exported")
    assert cli("export", "-o", str(tmp_path / "plain" / "out.jsonl")).returncode == 0
    assert b"exported" in (tmp_path / "plain" / "out.jsonl").read_bytes()


def _strict(text: str):
    def refuse(word: str):
        raise AssertionError(f"bare {word} in --json output: {text[:300]}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", [["get", "--json"], ["get"]])
def test_json_output_never_prints_a_bare_nan(store_dir, command):
    """Issue 29 item 7: a line another program appended may hold NaN or Infinity (Python's json reads
    them); what retained prints as JSON stays strict JSON, with null in their place."""
    _write("first")
    (rec,) = sealed_chain([{"text": "a record with odd numbers", "fields": {"weight": float("nan"),
                                                                               "limit": float("inf")}}], start_seq=2,
                          prev=json.loads((store_dir / "log.jsonl").read_bytes().splitlines()[-1])["sha256"])
    append_line(store_dir, records.format_line(rec).rstrip(b"\n"))
    proc = cli(*command, rec["id"])
    no_crash(proc)
    out = proc.stdout
    docs = [line for line in out.splitlines() if line.startswith("{")] if command == ["get"] else [out]
    assert docs and "NaN" not in out and "Infinity" not in out, out
    for doc in docs:
        _strict(doc)
