"""Issue 17 items 1 and 4, the rest of their class: an import only adds, whatever its lines claim,
and an import file is read within the JSON reader's bounds.

Black-box: import files written as FORMAT.md describes (any program can), the CLI as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retained import records
from tests.helpers.hostile import LEXICAL, cli, cli_json, jsonl, no_crash, sealed_chain


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _file(tmp_path: Path, recs: list[dict], name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(jsonl(recs))
    return path


def _current() -> set[str]:
    return {r["id"] for r in cli_json("list", "--scope", "*", "--limit", "500")["records"]}


def _local_copy(rid: str) -> dict:
    """A line restating a record of this store (same id, kind and text), as an attacker who read it can."""
    rec = cli_json("get", rid)["records"][0]
    return {k: rec[k] for k in ("id", "ts", "kind", "text")}


def test_a_retraction_of_a_local_record_restated_in_the_file_is_still_refused(store_dir, tmp_path):
    """Restating a local record in the file does not make it part of the import: it adds nothing."""
    local = cli_json("write", "the staging password rotates monthly")["id"]
    copy, forget = sealed_chain([_local_copy(local), {"kind": "forget", "text": "retract", "action": "retract",
                                                      "targets": [local]}])
    path = _file(tmp_path, [copy, forget])
    dry = cli_json("import", str(path))
    refused = [a for a in dry["actions"] if a.get("id") == forget["id"]]
    assert refused and refused[0]["action"] == "skip" and local in refused[0]["why"], dry["actions"]
    assert cli("import", str(path), "--apply").returncode == 0
    assert local in _current()


def test_a_retraction_naming_a_local_record_and_an_imported_one_is_refused_whole(store_dir, tmp_path):
    local = cli_json("write", "keep me")["id"]
    mine, forget = sealed_chain([{"text": "an imported record"}, {"kind": "forget", "text": "retract",
                                                                  "action": "retract", "targets": []}])
    forget = records.seal(dict(forget, targets=[mine["id"], local]))
    path = _file(tmp_path, [mine, forget])
    acts = {a["id"]: a for a in cli_json("import", str(path))["actions"]}
    assert acts[mine["id"]]["action"] == "add"
    assert acts[forget["id"]]["action"] == "skip" and local in acts[forget["id"]]["why"], acts
    assert cli("import", str(path), "--apply").returncode == 0
    assert {local, mine["id"]} <= _current()


def test_an_import_may_retract_and_undo_records_it_brings(store_dir, tmp_path):
    """An export with its history (--include-history) keeps its own retractions when imported."""
    a, b, forget = sealed_chain([{"text": "record a"}, {"text": "record b"},
                                 {"kind": "forget", "text": "retract", "action": "retract", "targets": []}])
    forget = records.seal(dict(forget, targets=[a["id"]]))
    path = _file(tmp_path, [a, b, forget])
    assert cli("import", str(path), "--apply").returncode == 0
    assert _current() == {b["id"]}


def test_a_supersede_of_a_local_record_is_added_without_the_link_and_named(store_dir, tmp_path):
    local = cli_json("write", "deploys go through the release branch")["id"]
    (new,) = sealed_chain([{"text": "deploys go straight to main", "supersedes": local}])
    path = _file(tmp_path, [new])
    dry = cli_json("import", str(path))
    (act,) = dry["actions"]
    assert act["action"] == "add" and local in act["why"], act
    cli("import", str(path), "--apply")
    assert {local, new["id"]} <= _current()
    got = cli_json("get", new["id"])["records"][0]
    assert "supersedes" not in got


def test_a_later_export_of_the_same_store_keeps_its_supersede_links(store_dir, tmp_path):
    """The one claim about a record already here that stands: one an earlier import brought."""
    old, new = sealed_chain([{"text": "release on thursdays"}, {"text": "release on wednesdays"}])
    new = records.seal(dict(new, supersedes=old["id"]))
    assert cli("import", str(_file(tmp_path, [old], "first.jsonl")), "--apply").returncode == 0
    assert cli("import", str(_file(tmp_path, [old, new], "second.jsonl")), "--apply").returncode == 0
    assert _current() == {new["id"]}


@pytest.mark.parametrize("key,value", [("retracted", {"by": "mem_x", "reason": "r", "ts": "t"}),
                                       ("superseded_by", "mem_y"), ("forgotten", {"by": "mem_z"})])
def test_each_reserved_state_field_of_an_import_is_left_out_and_said(store_dir, tmp_path, key, value):
    (rec,) = sealed_chain([{"text": f"claims {key}", key: value}])
    path = _file(tmp_path, [rec])
    dry = cli("import", str(path))
    assert key in dry.stderr, dry.stderr  # the dry run says it is left out
    assert cli("import", str(path), "--apply").returncode == 0
    assert rec["id"] in _current()
    assert key not in cli_json("get", rec["id"])["records"][0]
    assert f'"{key}"'.encode() not in (store_dir / "log.jsonl").read_bytes()


def test_a_bad_scope_is_named_in_the_dry_run_and_the_rest_imports(store_dir, tmp_path):
    bad, good = sealed_chain([{"text": "bad scope", "scope": "../../etc"}, {"text": "good scope", "scope": "proj"}])
    path = _file(tmp_path, [bad, good])
    dry = cli_json("import", str(path))
    by_id = {a["id"]: a for a in dry["actions"]}
    assert by_id[bad["id"]]["action"] == "skip" and ".." in by_id[bad["id"]]["why"]
    assert by_id[good["id"]]["action"] == "add"
    cli("import", str(path), "--apply")
    assert _current() == {good["id"]}


def test_a_scope_named_on_the_command_line_replaces_a_bad_one(store_dir, tmp_path):
    (rec,) = sealed_chain([{"text": "bad scope", "scope": "a/../../b"}])
    assert cli("import", str(_file(tmp_path, [rec])), "--scope", "mine", "--apply").returncode == 0
    assert cli_json("get", rec["id"])["records"][0]["scope"] == "mine"


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"id":"mem_q","text":' + b"[" * 3000 + b"]" * 3000 + b"}",
                                  b'{"id":"mem_q","text":"t","n":' + b"9" * 6000 + b"}", b'{"id":"mem_q","text":"\xff\xfe"}',
                                  b"\xef\xbb\xbf" + b'{"id":"mem_q","text":"bom"}', b'"just a string"', b"null"],
                         ids=["unclosed 100,000 deep", "text nested 3,000 deep", "6,000-digit number", "not UTF-8",
                              "a BOM", "a JSON string", "null"])
def test_a_hostile_line_in_an_import_is_skipped_and_the_rest_imports(store_dir, tmp_path, line):
    (good,) = sealed_chain([{"text": "a good record from elsewhere"}])
    path = tmp_path / "in.jsonl"
    path.write_bytes(line + b"\n" + jsonl([good]))
    for extra in ((), ("--apply",)):
        proc = cli("import", str(path), *extra)
        no_crash(proc, "import")
        assert proc.returncode == 0, proc.stderr
    assert good["id"] in _current()
    assert json.loads(cli("verify", "--json").stdout)["chain_ok"] is True


def test_an_imported_client_op_id_never_answers_a_later_local_write(store_dir, tmp_path):
    """An idempotency key names a write of the other store; here it would swallow a local write."""
    (rec,) = sealed_chain([{"text": "from elsewhere", "client_op_id": "op-1"}])
    assert cli("import", str(_file(tmp_path, [rec])), "--apply").returncode == 0
    mine = cli_json("write", "my own first write", "--client-op-id", "op-1")
    assert mine["id"] != rec["id"] and not mine["deduplicated"], mine
    assert cli_json("get", rec["id"])["records"][0]["imported"]["client_op_id"] == "op-1"


@pytest.mark.parametrize("ts", ["yesterday", "ghp_R4nd0mT0k3nV4lu3ThatIsLongEnough12345", 12345, None])
def test_an_imported_record_with_a_ts_that_is_no_timestamp_is_skipped_and_named(store_dir, tmp_path, ts):
    bad, good = sealed_chain([{"text": "bad ts", "ts": ts}, {"text": "good ts"}])
    path = _file(tmp_path, [bad, good])
    dry = cli("import", str(path))
    assert "line 1:" in dry.stderr and "skipped" in dry.stderr, dry.stderr  # named, with why
    assert isinstance(ts, str) is ("ts is not a timestamp" in dry.stderr)  # (others fail the record's own check)
    assert cli("import", str(path), "--apply").returncode == 0
    assert _current() == {good["id"]}


def test_a_resolves_link_to_a_local_record_is_dropped_so_an_import_never_resolves_it(store_dir, tmp_path):
    """Issue 29 item 7: `resolves` (a fork's resolution: more records superseded) is a lifecycle claim
    too; naming a record of this store, it is left out and named, and the local record stays current."""
    local = cli_json("write", "the cache lives in redis")["id"]
    (new,) = sealed_chain([{"text": "the cache lives in memcached", "resolves": [local]}])
    path = _file(tmp_path, [new])
    (act,) = cli_json("import", str(path))["actions"]
    assert act["action"] == "add" and "resolves" in act["why"] and local in act["why"], act
    assert cli("import", str(path), "--apply").returncode == 0
    assert {local, new["id"]} <= _current()
    assert "resolves" not in cli_json("get", new["id"])["records"][0]
    assert b'"resolves"' not in (store_dir / "log.jsonl").read_bytes()


def test_a_resolves_link_to_a_record_the_import_brings_stands(store_dir, tmp_path):
    a, b, fix = sealed_chain([{"text": "port 8080"}, {"text": "port 9090"}, {"text": "port 7070"}])
    fix = records.seal(dict(fix, supersedes=a["id"], resolves=[b["id"]]))
    assert cli("import", str(_file(tmp_path, [a, b, fix])), "--apply").returncode == 0
    assert _current() == {fix["id"]}
