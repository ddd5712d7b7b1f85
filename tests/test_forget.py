"""Forgetting: a retraction hides and undo restores in every read path; a purge leaves no byte behind."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retained.brief import make_brief
from retained.errors import NotFound, Refused, UsageError
from retained.store import Store
from tests.conftest import cli_json, run_cli

ROOT = Path(__file__).resolve().parents[1]
HELPERS = Path(__file__).parent / "helpers"
# A credential no pattern catches (no telling variable name, no known prefix), and a unique phrase.
SECRET = "Zq8vT3kLm9Wx2RbN7cHd"
PLANTED = "the staging box answers to flamingo-quartz-lantern"


def _reads(store: Store, words: str) -> dict[str, set[str]]:
    """Which ids each default read path shows for these words."""
    return {
        "search": {h["id"] for h in store.search(words)["hits"]},
        "search_history": {h["id"] for h in store.search(words, include_superseded=True)["hits"]},
        "list": {r["id"] for r in store.list(limit=500)["records"]},
        "list_history": {r["id"] for r in store.list(limit=500, include_superseded=True)["records"]},
        "brief": {r["id"] for r in make_brief(store, None)["records"]},
    }


def _windows(text: str, n: int = 12) -> list[bytes]:
    return [text[i : i + n].encode("utf-8") for i in range(len(text) - n + 1)]


def _leaks(directory: Path, texts: list[str]) -> list[str]:
    """Every file under the store directory holding any 12-character window of the texts."""
    found = []
    windows = [w for t in texts for w in _windows(t)]
    for root, _dirs, files in os.walk(directory):
        for name in files:
            data = (Path(root) / name).read_bytes()
            hits = [w for w in windows if w in data]
            if hits:
                found.append(f"{Path(root, name).relative_to(directory)}: {hits[0]!r}")
    return found


# -- retract and undo ---------------------------------------------------------------------------
def test_retract_leaves_every_read_path_and_undo_brings_it_back(store):
    keep = store.write("we deploy with blue green switches", kind="decision")
    gone = store.write("we deploy with a big bang on fridays", kind="decision")
    assert all(gone["id"] in ids for ids in _reads(store, "deploy").values())

    receipt = store.forget([gone["id"]], "wrong: we never deploy on fridays")
    assert receipt["durable"] and receipt["action"] == "retract" and receipt["targets"] == [gone["id"]]
    for path, ids in _reads(store, "deploy").items():
        assert gone["id"] not in ids, path
        assert keep["id"] in ids, path
    assert store.list()["total"] == 1
    assert make_brief(store, None)["total"] == 1
    rec = store.get([gone["id"]])["records"][0]
    assert rec["text"] == "we deploy with a big bang on fridays"
    assert rec["retracted"]["by"] == receipt["id"]
    assert rec["retracted"]["reason"] == "wrong: we never deploy on fridays"

    back = store.unforget([gone["id"]])
    assert back["durable"] and back["action"] == "undo"
    assert all(gone["id"] in ids for ids in _reads(store, "deploy").values())
    assert "retracted" not in store.get([gone["id"]])["records"][0]
    assert store.verify()["intact"]


def test_retracting_the_current_record_hides_its_whole_chain(store):
    old = store.write("the cache lives in redis")
    new = store.write("the cache lives in memcached, not redis", supersedes=old["id"])
    store.forget([new["id"]], "no cache at all now")
    for path, ids in _reads(store, "cache").items():
        assert not ids & {old["id"], new["id"]}, path
    store.unforget([new["id"]])
    assert _reads(store, "cache")["search"] == {new["id"]}
    assert _reads(store, "cache")["search_history"] == {old["id"], new["id"]}


def test_retract_twice_writes_once_and_undo_of_a_live_record_is_refused(store):
    r = store.write("a fact")
    first = store.forget([r["id"]], "stale")
    again = store.forget([r["id"]], "stale")
    assert again["deduplicated"] is True and again["id"] == first["id"]
    store.unforget([r["id"]])
    with pytest.raises(Refused, match="not retracted"):
        store.unforget([r["id"]])
    with pytest.raises(NotFound):
        store.forget(["mem_NOSUCHRECORD"], "x")
    with pytest.raises(UsageError, match="forget"):
        store.write("sneaky", kind="forget")


def test_a_retraction_survives_a_reindex(store):
    r = store.write("temporary workaround for the flaky test")
    store.forget([r["id"]], "fixed upstream")
    store.reindex()
    assert store.search("workaround")["hits"] == []
    assert store.get([r["id"]])["records"][0]["retracted"]["reason"] == "fixed upstream"


# -- purge ----------------------------------------------------------------------------------------
def test_purge_leaves_no_12_character_window_in_any_file(store, store_dir):
    before = store.write("an unrelated record that stays")
    doomed = store.write(f"{PLANTED}; its password is {SECRET}", source="notes/flamingo-quartz-source.md",
                         fields={"ticket": "QUARTZ-LANTERN-4711", "nested": {"note": "lantern-flamingo-nest"}})
    after = store.write("another record after it")
    texts = [PLANTED, SECRET, "notes/flamingo-quartz-source.md", "QUARTZ-LANTERN-4711", "lantern-flamingo-nest"]
    assert store.search("flamingo")["hits"]  # indexed: the text is in the index's files now
    # A torn fragment holding the text, parked in quarantine by the next write, and a session note.
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(b'{"text":"' + PLANTED.encode() + b' retried')
    store.write("a write that quarantines the fragment")
    (store_dir / "sessions").mkdir()
    (store_dir / "sessions" / "s.json").write_text(json.dumps({"last_prompt": PLANTED}))
    assert _leaks(store_dir, texts)

    receipt = store.purge([doomed["id"]], "a secret the patterns missed")
    assert receipt["durable"], receipt
    assert receipt["purged"] == [{"id": doomed["id"], "seq": doomed["seq"], "sha256": doomed["sha256"]}]
    assert _leaks(store_dir, texts) == []
    assert store.verify()["intact"]
    assert store.search("flamingo")["hits"] == [] and store.search("lantern")["hits"] == []
    got = store.get([before["id"], after["id"]])
    assert [r["text"] for r in got["records"]] == ["an unrelated record that stays", "another record after it"]
    assert store.write("life goes on")["durable"]
    assert store.verify()["intact"]


def test_a_purged_line_is_a_tombstone_and_the_purge_record_lists_it(store, store_dir):
    store.write("first")
    doomed = store.write("second, to be purged", scope="/p/x", fields={"k": "v"})
    receipt = store.purge([doomed["id"]], "mistake")
    lines = [json.loads(raw) for raw in (store_dir / "log.jsonl").read_bytes().splitlines()]
    tomb = lines[1]
    assert tomb == {"seq": doomed["seq"], "id": doomed["id"], "ts": tomb["ts"], "kind": "note", "scope": "/p/x",
                    "prev": lines[0]["sha256"], "sha256": doomed["sha256"], "forgotten": {"by": receipt["id"]}}
    purge = lines[2]
    assert purge["kind"] == "forget" and purge["id"] == receipt["id"] and purge["action"] == "purge"
    assert purge["purged"] == [{"id": doomed["id"], "seq": doomed["seq"], "sha256": doomed["sha256"]}]
    assert purge["reason"] == "mistake" and "second" not in json.dumps(purge)
    assert store.get([doomed["id"]])["records"][0]["forgotten"] == {"by": receipt["id"]}


def _format_md_verifier():
    """The verifier exactly as docs/FORMAT.md prints it: an independent check written from the docs alone."""
    doc = (ROOT / "docs" / "FORMAT.md").read_text()
    section = doc[doc.index("## Verifying the chain"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope: dict = {}
    exec(code, scope)
    return scope["verify"]


def test_the_verifier_in_format_md_passes_after_purges_and_catches_a_forged_tombstone(store, store_dir):
    verify = _format_md_verifier()
    ids = [store.write(f"record {i} with words")["id"] for i in range(6)]
    store.purge([ids[1], ids[4]], "two at once")
    store.purge([ids[5]], None)
    store.write("after the purges")
    assert verify(store_dir / "log.jsonl") == "intact: 9 records"

    # Turning a live record into a tombstone without a purge record is caught, by both verifiers.
    path = store_dir / "log.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[2])
    fake = {k: rec[k] for k in ("seq", "id", "ts", "kind", "prev", "sha256")} | {"forgotten": {"by": "mem_X"}}
    lines[2] = json.dumps(fake).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    assert verify(path).startswith("tombstone at line 3")
    report = store.verify()
    assert not report["chain_ok"] and report["first_break"]["line"] == 3


def test_purge_is_not_offered_over_mcp():
    from retained.tools import TOOLS

    assert "purge" not in json.dumps(json.loads((ROOT / "tests" / "data" / "tools_list.json").read_text())
                                     [-1]["inputSchema"])
    assert "only a person can purge" in next(t.description for t in TOOLS if t.name == "memory_forget")


# -- the CLI ----------------------------------------------------------------------------------------
def test_cli_forget_undo_and_purge(store_dir):
    rid = cli_json("write", "the build uses make, not ninja")["id"]
    out = run_cli("forget", rid, "--reason", "we use ninja")
    assert out.returncode == 0, out.stderr
    assert f"retained forget --undo {rid}" in out.stdout
    assert cli_json("search", "make")["hits"] == []
    assert cli_json("get", rid)["records"][0]["retracted"]["reason"] == "we use ninja"
    assert cli_json("forget", "--undo", rid)["action"] == "undo"
    assert [h["id"] for h in cli_json("search", "make")["hits"]] == [rid]
    assert run_cli("forget", "--purge", rid).returncode == 2  # no terminal to confirm on: refused (issue 17 item 9)
    purged = cli_json("forget", "--purge", rid, "--reason", "gone", "--yes")
    assert purged["durable"] and purged["purged"][0]["id"] == rid
    assert b"uses make" not in (store_dir / "log.jsonl").read_bytes()
    assert run_cli("forget", "--purge", "--undo", rid).returncode == 2
    missing = run_cli("forget", "mem_NOPE")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1


# -- crashes and concurrency --------------------------------------------------------------------------
@pytest.mark.slow
def test_sigkill_at_random_moments_of_20_purges_loses_no_acknowledged_record(store_dir):
    rng = random.Random(20261201)
    kept: set[str] = set()
    purged: set[str] = set()
    for round_ in range(20):
        proc = subprocess.Popen([sys.executable, str(HELPERS / "purger.py"), str(store_dir), "1000", f"r{round_}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()  # purging from here on: the kill lands among purges, not in the start
        time.sleep(rng.random() * 0.4)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        out = first + out
        for line in out[: out.rfind("\n") + 1].splitlines():  # a line cut off by the kill was not acknowledged
            what, rid = line.split()
            (kept if what == "keep" else purged).add(rid)
    assert kept and purged, "the processes were killed before they acknowledged anything"
    with Store(store_dir) as store:
        assert store.write("after the crashes")["durable"]
        ids = sorted(kept | purged)
        by_id = {}
        for i in range(0, len(ids), 500):
            got = store.get(ids[i : i + 500])
            assert got["missing"] == []
            by_id.update({r["id"]: r for r in got["records"]})
        assert all("text" in by_id[rid] for rid in kept)
        assert all("forgotten" in by_id[rid] for rid in purged)
        report = store.verify()
    assert report["intact"], report
    assert not list(store_dir.glob(".log.jsonl.*"))  # a copy left by a killed purge is cleared by the next
    assert _format_md_verifier()(store_dir / "log.jsonl").startswith("intact")


def test_purges_over_many_sessions_keep_the_full_text_index_readable(store_dir):
    """Each purge compacts the full-text table. On older SQLite each compaction leaves one more level
    behind, and at 2,000 the table is corrupt: after about 1,100 purges every write to the index
    failed. Past FTS_LEVELS_MAX levels compaction rebuilds instead; here that limit is lowered to 40
    for the sessions (it reaches 210 without the rebuild), and it stays below that while every
    record is still found."""
    kept, purged, levels = [], [], []
    for session in range(4):
        proc = subprocess.run([sys.executable, str(HELPERS / "purger.py"), str(store_dir), "60", f"s{session}", "40"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        for line in proc.stdout.splitlines():
            what, rid = line.split()
            (kept if what == "keep" else purged).append(rid)
        with Store(store_dir) as store:
            levels.append(store.index.fts_levels())
    assert len(kept) == len(purged) == 240
    assert max(levels) <= 40 + 2, levels  # one compaction may add a level or two past the check
    with Store(store_dir) as store:
        found = store.search("keeps record", k=50)
        assert found["total_matched"] == 240
        assert not [w for w in found["warnings"] if "damaged" in w or "rebuilt" in w], found["warnings"]
        assert store.search("QuillWhisperMarmalade")["total_matched"] == 0
        assert store.write("after the sessions")["durable"] and store.verify()["intact"]
    for f in store_dir.iterdir():  # the rebuilds left no purged text in the index's files either
        assert not f.is_file() or b"QuillWhisperMarmalade" not in f.read_bytes(), f.name


@pytest.mark.slow
def test_four_writers_appending_during_purges_lose_nothing(store_dir):
    with Store(store_dir) as store:
        doomed = [store.write(f"doomed record {i} with a unique word pelicanmarmot{i}")["id"] for i in range(8)]
        procs = [subprocess.Popen([sys.executable, str(HELPERS / "writer.py"), str(store_dir), "100", f"w{i}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
        for rid in doomed:
            assert store.purge([rid], "concurrency test")["durable"]
        acked = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            acked += [line.split()[0] for line in out.splitlines()]
        assert len(acked) == 400
        got = store.get(acked)
        assert got["missing"] == [] and len(got["records"]) == 400
        assert store.verify()["intact"]
    seqs = [json.loads(raw)["seq"] for raw in (store_dir / "log.jsonl").read_bytes().splitlines()]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 8 + 400 + 8
    assert b"pelicanmarmot" not in (store_dir / "log.jsonl").read_bytes()


# -- over MCP -----------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_memory_forget_retracts_over_mcp_and_corrections_keep_their_scope(store, anyio_backend):
    pytest.importorskip("mcp")
    from mcp import Client

    from retained.server import build_server

    server = build_server(store, "/p/proj")
    async with Client(server) as c:
        pref = (await c.call_tool("memory_write", {"text": "the user likes terse answers", "kind": "preference",
                                                   "scope": "global"})).structured_content
        fix = (await c.call_tool("memory_write", {"text": "the user likes detailed answers", "kind": "preference",
                                                  "supersedes": pref["id"]})).structured_content
        assert store.get([fix["id"]])["records"][0]["scope"] == "global"  # not moved into /p/proj
        again = await c.call_tool("memory_write", {"text": "the user likes short answers", "supersedes": pref["id"]})
        assert again.is_error and fix["id"] in again.content[0].text
        r = (await c.call_tool("memory_forget", {"ids": [fix["id"]], "reason": "asked to forget"})).structured_content
        assert r["durable"] and r["targets"] == [fix["id"]]
        hits = (await c.call_tool("memory_search", {"query": "answers"})).structured_content["hits"]
        assert hits == []
        got = (await c.call_tool("memory_get", {"ids": [fix["id"]]})).structured_content["records"][0]
        assert got["retracted"]["reason"] == "asked to forget"
        tools = [t.name for t in (await c.list_tools()).tools]
        assert "memory_forget" in tools and not any("purge" in t for t in tools)


def test_an_index_made_before_secure_delete_is_vacuumed_by_the_first_purge(store, store_dir):
    """The index zeroes what it frees; a file from before that may hold freed text, so it is VACUUMed."""
    import sqlite3

    doomed = store.write(f"{PLANTED} kept in an old index", kind="decision")
    store.write("an unrelated record that stays")
    store.close()
    # What an older version left: pages that held the text, freed without secure_delete.
    db = sqlite3.connect(store_dir / "index.sqlite3", isolation_level=None)
    db.execute("PRAGMA secure_delete=OFF")
    db.execute("CREATE TABLE old_copy (text TEXT)")
    db.executemany("INSERT INTO old_copy VALUES (?)", [(f"{PLANTED} copy {i}",) for i in range(50)])
    db.execute("DROP TABLE old_copy")
    db.execute("DELETE FROM meta WHERE key = 'zeroed_since_created'")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert _leaks(store_dir, [PLANTED + " copy"])  # the freed pages still hold it
    with Store(store_dir) as again:
        assert again.purge([doomed["id"]], "gone")["durable"]
        assert _leaks(store_dir, [PLANTED + " copy"]) == []
        assert again.verify()["intact"]


def test_a_reindexed_store_still_purges_without_a_trace(store, store_dir):
    doomed = store.write(f"{PLANTED} before a reindex")
    store.reindex()
    store.write(f"{SECRET} after it", supersedes=doomed["id"])
    receipt = store.purge([doomed["id"]], "gone")
    assert receipt["durable"]
    assert not any(PLANTED[:12].encode() in (store_dir / n).read_bytes()
                   for n in os.listdir(store_dir) if (store_dir / n).is_file())


def test_a_repeated_retraction_answers_with_the_reason_it_stored_on_every_path(store):
    """Issue 17 item 11, for the store itself (the CLI's --json and the page read this receipt): a
    second forget writes nothing and reports the first retraction's reason, not the one just given."""
    rid = store.write("the staging host is alpha-3")["id"]
    first = store.forget([rid], "wrong: staging moved to beta-1")
    again = store.forget([rid], "a different reason")
    assert again["deduplicated"] and again["id"] == first["id"]
    assert again["reason"] == "wrong: staging moved to beta-1"
