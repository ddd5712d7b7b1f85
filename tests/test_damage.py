"""Crashes and damage never brick the store: each is reported, nothing acknowledged is lost, writes go on."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from retained.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _fill(store, n=5):
    return [store.write(f"record number {i} about widgets") for i in range(1, n + 1)]


def _all_readable(store, receipts, skip=()):
    ids = [r["id"] for r in receipts if r["seq"] not in skip]
    got = store.get(ids)
    assert got["missing"] == [], got
    return got


def test_torn_last_line_is_reported_then_quarantined_and_writes_continue(store, store_dir):
    receipts = _fill(store, 3)
    fragment = b'{"id":"mem_half","kind":"note","prev":"' + b"a" * 20  # a crash mid-append, never acknowledged
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(fragment)
    report = store.verify()
    assert report["torn_tail"] == {"offset": (store_dir / "log.jsonl").stat().st_size - len(fragment),
                                   "bytes": len(fragment)}
    assert report["intact"] is False and report["chain_ok"] is True
    _all_readable(store, receipts)

    receipt = store.write("after the crash")
    assert receipt["durable"] and receipt["seq"] == 4
    assert any("torn line" in w and "quarantine" in w for w in receipt["warnings"])
    parked = list((store_dir / "quarantine").iterdir())
    assert len(parked) == 1 and parked[0].read_bytes() == fragment
    assert store.verify()["intact"] is True


@pytest.mark.parametrize("where", ["inside the text", "the opening brace", "its seq digit"])
def test_flipped_byte_in_record_3_is_named_by_verify(store, store_dir, where):
    receipts = _fill(store, 5)
    path = store_dir / "log.jsonl"
    lines = path.read_bytes().split(b"\n")
    target = bytearray(lines[2])
    pos = {"inside the text": target.index(b"widgets"), "the opening brace": 0,
           "its seq digit": target.index(b'"seq":3') + 6}[where]  # 3 -> 2: the line now claims seq 2
    target[pos] ^= 0x01
    lines[2] = bytes(target)
    path.write_bytes(b"\n".join(lines))

    fresh = Store(store_dir)  # a new process's view, as well as the open one
    for s in (store, fresh):
        report = s.verify()
        assert report["first_break"]["seq"] == 3 and report["first_break"]["line"] == 3
        assert report["chain_ok"] is False and report["intact"] is False
        assert [p["line"] for p in report["corrupt_lines"]] == [3]
        _all_readable(s, receipts, skip={3})
        assert s.get([receipts[2]["id"]])["chain_ok"] is False

    receipt = fresh.write("written after the damage")
    assert receipt["durable"] and receipt["seq"] == 6
    assert fresh.search("damage")["hits"][0]["id"] == receipt["id"]
    assert fresh.verify()["corrupt_count"] == 1  # still named, never hidden
    fresh.close()


def test_deleted_index_is_rebuilt_from_the_log(store, store_dir):
    receipts = _fill(store, 4)
    for suffix in ("", "-wal", "-shm"):
        Path(str(store_dir / "index.sqlite3") + suffix).unlink(missing_ok=True)
    # The already-open store notices the file is gone; a new one starts from scratch. Both find everything.
    assert store.search("widgets")["total_matched"] == 4
    with Store(store_dir) as other:
        assert other.search("widgets")["total_matched"] == 4
        assert other.verify()["intact"] is True
    _all_readable(store, receipts)


def _too_many_levels() -> bytes:
    """A full-text structure record of 2,001 empty levels: what older SQLite's FTS5 left after about
    1,100 purges, each 'optimize' adding a level, and what it then reads as corrupt."""
    return b"\x00\x00\x00\x00" + bytes([0x80 | (2001 >> 7), 2001 & 0x7F]) + b"\x00\x00" + b"\x00\x00" * 2001


@pytest.mark.parametrize("damage", ["zeroed", "too many levels"])
def test_a_damaged_full_text_table_is_rebuilt_in_place_and_the_read_says_so(store, store_dir, damage, monkeypatch):
    # Before, every later read warned and found nothing new, and every purge failed, until a manual
    # reindex. The full-text table is rebuilt from the records table: the same file (other processes
    # keep theirs), and the vectors kept.
    import numpy as np

    monkeypatch.setenv("RETAINED_EMBED", "off")  # nothing but the repair touches the vectors here
    receipts = _fill(store, 4)
    rows = store.index.vectors_pending("test-model", 100)  # (line, sha256, text) of every record
    store.index.put_vectors("test-model", [(line, sha, np.ones(8, dtype=np.float32)) for line, sha, _ in rows])
    store.close()
    index = store_dir / "index.sqlite3"
    db = sqlite3.connect(index)
    block = db.execute("SELECT zeroblob(4016)").fetchone()[0] if damage == "zeroed" else _too_many_levels()
    db.execute("UPDATE fts_data SET block = ? WHERE id = 10", (block,))
    db.commit()
    db.close()
    inode = index.stat().st_ino
    with Store(store_dir) as fresh:
        later = fresh.write("record number 5 about widgets, written after the damage")
        found = fresh.search("widgets")
        assert found["total_matched"] == 5, found
        said = later["warnings"] + found["warnings"]  # the first call that reads the index says it
        assert sum("index was damaged" in w and "rebuilt from its records" in w for w in said) == 1, said
        _all_readable(fresh, [*receipts, later])
        assert fresh.purge([later["id"]], "damage test")["durable"]
        assert not any("damaged" in w for w in fresh.search("widgets")["warnings"])  # said once
        assert fresh.verify()["intact"] is True
        kept = fresh.index.vector_stats("test-model")[0]
    assert kept == 4 and index.stat().st_ino == inode


def test_an_index_damaged_beyond_its_full_text_table_is_rebuilt_from_the_log(store, store_dir):
    receipts = _fill(store, 4)
    store.close()
    index = store_dir / "index.sqlite3"
    db = sqlite3.connect(index)
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(index, "r+b") as f:  # the records table's root page overwritten with garbage
        f.seek((root - 1) * page)
        f.write(bytes(range(256)) * (page // 256))
    with Store(store_dir) as fresh:
        later = fresh.write("record number 5 about widgets, written after the damage")
        found = fresh.search("widgets")
        said = later["warnings"] + found["warnings"]
        assert sum("index was damaged" in w and "rebuilt from the log" in w for w in said) == 1, said
        assert found["total_matched"] == 5, found
        _all_readable(fresh, [*receipts, later])
        assert fresh.verify()["intact"] is True


def test_deleted_index_row_is_reported_and_reindex_repairs_it(store, store_dir):
    receipts = _fill(store, 4)
    assert store.verify()["intact"] is True  # indexed
    db = sqlite3.connect(store_dir / "index.sqlite3")
    db.execute("DELETE FROM records WHERE seq = 2")
    db.commit()
    db.close()
    report = store.verify()
    assert report["missing_from_index"] == 1 and report["index_only"] == 0
    assert report["coverage"] == 0.75 and report["intact"] is False
    assert store.reindex()["records"] == 4
    assert store.verify()["intact"] is True
    _all_readable(store, receipts)


def _format_md_snippet(name):
    text = (ROOT / "docs" / "FORMAT.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if f"def {name}(" in b)


def test_foreign_record_appended_per_format_md_is_read_without_restart(store, store_dir):
    _fill(store, 2)
    # Another program, using only the documented recipe, appends a record with an extra field.
    program = _format_md_snippet("append") + (
        "\nimport sys\nrec = append(sys.argv[1], 'a foreign gadget note', origin={'tool': 'ext', 'n': 1})\n"
        "print(rec['id'])\n"
    )
    out = subprocess.run([sys.executable, "-c", program, str(store_dir)], capture_output=True, text=True, check=True)
    foreign_id = out.stdout.strip()

    hits = store.search("gadget")["hits"]
    # The only record holding the word; by meaning, "widgets" records may follow it.
    assert [h["id"] for h in hits if h["match"] != "meaning"] == [foreign_id] and hits[0]["id"] == foreign_id
    rec = store.get([foreign_id])["records"][0]
    assert rec["origin"] == {"tool": "ext", "n": 1} and rec["seq"] == 3
    assert store.verify()["intact"] is True
    # The documented verifier agrees with retained.
    check = _format_md_snippet("verify") + "\nimport sys\nprint(verify(sys.argv[1]))\n"
    out = subprocess.run([sys.executable, "-c", check, str(store_dir / "log.jsonl")], capture_output=True, text=True)
    assert out.stdout.strip() == "intact: 3 records"
    assert store.write("ours again")["seq"] == 4


def test_garbage_line_from_another_program_is_named_and_skipped(store, store_dir):
    receipts = _fill(store, 3)
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(b"this is not json at all\n")
    report = store.verify()
    assert report["corrupt_lines"][0]["line"] == 4 and report["corrupt_lines"][0]["reason"] == "not JSON"
    assert report["intact"] is False
    receipt = store.write("next write links past the garbage")
    assert receipt["durable"] is True and receipt["seq"] == 4
    assert any("not valid records" in w for w in receipt["warnings"])
    lines = (store_dir / "log.jsonl").read_bytes().split(b"\n")
    assert json.loads(lines[4])["prev"] == receipts[-1]["sha256"]
    _all_readable(store, receipts + [receipt])
    report = store.verify()
    assert report["records"] == 4 and report["corrupt_count"] == 1 and not report["chain_breaks"]


def test_a_failed_append_is_an_honest_receipt_and_leaves_no_partial_line(store_dir):
    """A real fault (the file-size limit, as on a full disk): durable false, the reason named, nothing
    half-written, and the next write goes on from the last good record."""
    import resource

    with Store(store_dir) as s:
        s.write("before the fault")
    before = (store_dir / "log.jsonl").read_bytes()
    limit = len(before) + 100

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "retained", "--dir", str(store_dir), "write", "--json",
                           "x" * 5000], capture_output=True, text=True, preexec_fn=small_files, timeout=60)
    receipt = json.loads(proc.stdout)
    assert proc.returncode == 1 and receipt["durable"] is False
    assert receipt["checks"] == {"append": False, "fsync": False, "readback_match": False, "chain": False}
    assert any("nothing was written" in w for w in receipt["warnings"])
    assert (store_dir / "log.jsonl").read_bytes() == before
    with Store(store_dir) as s:
        after = s.write("after the fault")
        assert after["durable"] is True and after["seq"] == 2
        assert s.verify()["intact"] is True


# -- reads never hide damage (I2), and a repair is picked up without a reindex --------------------------
def _flip(path: Path, needle: bytes) -> tuple[int, int]:
    data = bytearray(path.read_bytes())
    pos = data.index(needle)
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    return pos, data[pos] ^ 0x01


def _restore(path: Path, pos: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("indexed_first", [False, True], ids=["index built after the damage", "damaged in place"])
def test_a_flipped_byte_is_counted_by_every_read_and_a_restored_byte_is_searchable_again(store_dir, indexed_first):
    from retained.brief import make_brief
    from retained.recall import recall

    with Store(store_dir) as store:
        for i in range(5):
            store.write(f"record {i} about {'zeppelins' if i == 2 else 'widgets'}")
        if indexed_first:
            assert len(store.search("zeppelins")["hits"]) == 1
        else:
            store.close()
            for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
                (store_dir / name).unlink(missing_ok=True)
        pos, value = _flip(store_dir / "log.jsonl", b"zeppelins")
        for reply in (store.search("widgets"), store.list(), store.get(None)):
            assert any("1 record could not be read" in w and "retained verify" in w for w in reply["warnings"]), reply
        brief = make_brief(store, None)
        assert "1 record could not be read" in brief["text"] and "retained verify" in brief["text"]
        recalled = recall(store, "which widgets records are there?", project=None, shown=set())
        assert recalled is not None and "1 record could not be read" in recalled["text"]
        assert store.search("zeppelins")["hits"] == []
        assert store.verify()["intact"] is False

        _restore(store_dir / "log.jsonl", pos, value)  # e.g. from a backup; no reindex
        report = store.verify()
        assert report["intact"] is True, report
        assert len(store.search("zeppelins")["hits"]) == 1
        assert not any("could not be read" in w for w in store.list()["warnings"])
        assert "could not be read" not in make_brief(store, None)["text"]


def test_verify_reports_a_whole_record_moved_to_quarantine(store, store_dir):
    store.write("first record")
    lost = store.write("an acknowledged record whose newline the disk lost")
    path = store_dir / "log.jsonl"
    path.write_bytes(path.read_bytes()[:-1])  # damage: the last line is now a 'torn tail'
    after = store.write("the next write quarantines the tail")
    assert after["durable"]
    report = store.verify()
    assert report["quarantine"]["files"] == 1
    assert report["quarantine"]["records"] == [{"file": report["quarantine"]["records"][0]["file"],
                                                "id": lost["id"], "seq": lost["seq"]}]
    assert report["intact"] is False
    assert any(lost["id"] in w for w in report["warnings"])
    out = subprocess.run([sys.executable, "-m", "retained", "--dir", str(store_dir), "verify"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "quarantine/" in out.stdout


def test_a_reader_that_remembers_no_damage_hears_of_damage_another_reader_indexed_first(store_dir):
    """The questions every read asks (damaged lines, forks, a project's scopes) are remembered between
    reads; a garbage line that a second reader of the same store indexed first still reaches the first
    reader's next read."""
    with Store(store_dir) as first, Store(store_dir) as second:
        first.write("a record about widgets")
        assert not any("could not be read" in w for w in first.search("widgets")["warnings"])
        with open(store_dir / "log.jsonl", "ab") as f:
            f.write(b"not a record at all\n")
        assert any("1 record could not be read" in w for w in second.search("widgets")["warnings"])
        assert any("1 record could not be read" in w for w in first.search("widgets")["warnings"])
        assert any("1 record could not be read" in w for w in first.list()["warnings"])
