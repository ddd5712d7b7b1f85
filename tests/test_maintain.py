"""`retained maintain`: a dry run that changes no byte, and an --apply that does only the safe part."""

from __future__ import annotations

import json

from retained import records
from retained.store import Store
from tests.conftest import cli_json, run_cli


def _third_party_append(store_dir, text, kind="note", scope="/p"):
    """Duplicates only get in from outside now (retained's own writes deduplicate): append by FORMAT.md."""
    path = store_dir / "log.jsonl"
    last = json.loads(path.read_bytes().splitlines()[-1])
    rec = records.seal({"seq": last["seq"] + 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": kind,
                        "text": text, "prev": last["sha256"], "scope": scope})
    with open(path, "ab") as f:
        f.write(records.format_line(rec))
    return rec["id"]


def _snapshot(directory):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.rglob("*") if p.is_file()}


def test_dry_run_reports_and_changes_no_file_and_apply_retracts_exact_duplicates(store_dir):
    with Store(store_dir) as store:
        keep = store.write("tests run with pytest -q", kind="convention", scope="/p")["id"]
        store.write("the staging database runs postgres 15 on the shared cluster", kind="fact", scope="/p")
        store.write("the staging database runs postgres 16 on the shared cluster", kind="fact", scope="/p")
        a = store.write("deploys go through the release branch", scope="/p")["id"]
        b = store.write("deploys go through the release branch and tags", scope="/p", supersedes=a)["id"]
        store.write("deploys go through the release branch, tags and a review", scope="/p", supersedes=b)
        store.search("pytest")
    dup = _third_party_append(store_dir, "Tests run with   pytest -q", kind="convention")
    with Store(store_dir) as store:
        store.search("pytest")  # the index has caught up: now the dry run must change nothing at all
    before = _snapshot(store_dir)
    report = cli_json("maintain")
    assert _snapshot(store_dir) == before
    scope = next(e for e in report["report"]["scopes"] if e["scope"] == "/p")
    assert scope["exact_duplicates"] == [{"kind": "convention", "keep": keep, "duplicates": [dup]}]
    assert len(scope["near_duplicates"]) >= 1 and scope["collapsible_chains"][0]["records"] == 3
    assert scope["superseded"] == 2 and report["applied"] == []
    human = run_cli("maintain")
    assert human.returncode == 0 and "nothing was written" in human.stdout and dup in human.stdout

    applied = cli_json("maintain", "--apply")
    assert applied["applied"][0]["kept"] == keep and applied["applied"][0]["retracted"] == [dup]
    with Store(store_dir) as store:
        assert [h["id"] for h in store.search("pytest")["hits"]] == [keep]
        assert store.get([dup])["records"][0]["retracted"]["reason"].startswith("exact duplicate of")
    again = cli_json("maintain")
    assert next(e for e in again["report"]["scopes"] if e["scope"] == "/p")["exact_duplicates"] == []
