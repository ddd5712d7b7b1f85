"""I1 under real faults: killed writers and concurrent processes never lose an acknowledged record."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retained.store import Store

WRITER = str(Path(__file__).parent / "helpers" / "writer.py")


def _spawn(store_dir, count, prefix, big=False):
    args = [sys.executable, WRITER, str(store_dir), str(count), prefix] + (["big"] if big else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_record(store_dir):
    rng = random.Random(20261129)
    acknowledged: dict[str, int] = {}
    for round_ in range(20):
        proc = _spawn(store_dir, 10_000, f"r{round_}", big=round_ % 2 == 0)
        time.sleep(0.15 + rng.random() * 0.35)  # past interpreter start, into the write loop
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        for line in out[: out.rfind("\n") + 1].splitlines():  # a line cut off by the kill was not acknowledged
            rid, seq = line.split()
            acknowledged[rid] = int(seq)
    assert len(acknowledged) > 20, "the writers were killed before acknowledging anything"

    with Store(store_dir) as store:
        # Writes resume: the next write quarantines any torn fragment and links to the last record.
        receipt = store.write("after the crashes")
        assert receipt["durable"], receipt
        ids = list(acknowledged)
        found = {}
        for i in range(0, len(ids), 500):
            got = store.get(ids[i : i + 500])
            assert got["missing"] == []
            found.update({r["id"]: r["seq"] for r in got["records"]})
        assert found == acknowledged
        report = store.verify()
    assert report["chain_ok"] and report["intact"], report
    assert report["corrupt_count"] == 0


@pytest.mark.slow
def test_four_processes_times_100_writes_give_400_contiguous_records(store_dir):
    Store(store_dir).close()
    procs = [_spawn(store_dir, 100, f"p{i}") for i in range(4)]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        acked += out.split("\n")[:-1]
    assert len(acked) == 400
    with Store(store_dir) as store:
        report = store.verify()
        assert report["records"] == 400 and report["intact"], report
    seqs = []
    with open(store_dir / "log.jsonl", "rb") as f:
        import json

        prev = "0" * 64
        for raw in f:
            rec = json.loads(raw)
            assert rec["prev"] == prev
            prev = rec["sha256"]
            seqs.append(rec["seq"])
    assert seqs == list(range(1, 401))


def test_idempotency_holds_across_processes(store_dir):
    first = subprocess.run([sys.executable, WRITER, str(store_dir), "3", "same"], capture_output=True, text=True)
    second = subprocess.run([sys.executable, WRITER, str(store_dir), "3", "same"], capture_output=True, text=True)
    assert first.stdout == second.stdout  # same ids and seqs: the repeat returned the first receipts
    with Store(store_dir) as store:
        assert store.verify()["records"] == 3
        again = store.write("whatever", client_op_id="same-1")
    assert again["deduplicated"] is True and again["durable"] is True
    assert again["id"] == first.stdout.splitlines()[1].split()[0]
