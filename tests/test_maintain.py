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


def test_maintain_says_how_many_pairs_it_did_not_list_and_leaves_a_checkpoint_series_alone(store_dir):
    from retained import maintain

    with Store(store_dir) as store:
        store.write("release notes go in CHANGES.md", scope="/p")
    base = "the nightly export job writes the orders table to the warehouse bucket in region"
    for i in range(8):  # 8 near-identical facts: 28 pairs, 8 more than are listed
        _third_party_append(store_dir, f"{base} number {i}", kind="fact")
    series = {_third_party_append(store_dir, f"checkpoint: migrating the billing worker to the new queue, step {i} of 4",
                                  kind="checkpoint") for i in range(4)}  # a series of checkpoints of one piece of work
    report = cli_json("maintain")["report"]
    scope = next(e for e in report["scopes"] if e["scope"] == "/p")
    assert len(scope["near_duplicates"]) == 28
    human = run_cli("maintain").stdout
    assert human.count("near duplicates (") == maintain.LISTED
    assert f"{28 - maintain.LISTED} near-duplicate pair(s) more not listed here" in human
    assert not series & {i for p in scope["near_duplicates"] for i in p["ids"]}
