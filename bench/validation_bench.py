"""What checking every field of a teammate's line costs a sync (issue 29: ≤ 50 ms at 10k pulled lines).

A writer's log of N lines (default 10,000) is verified the way a sync verifies what it fetched
(`wlog.parse_log`), with every field checked (`fields.problem`) and, as the same-run baseline, with that
check replaced by one that passes everything: the difference is what validation costs. The index's
confinement check (`fields.confined`, once per teammate's line at catch-up) is timed on its own.

    python bench/validation_bench.py [--lines N] [--rounds R] [--baseline-rev 7203e3e]

Beside it, the same verify at the issue's start (`--baseline-rev`, a `git archive` of that commit run
by this interpreter on the same bytes): what a sync's verify step costs now against what it cost then,
every new check included (the start verified chain, hash and canonical form, but no field's shape).
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from retained import records
from retained.team import fields, hlc, wlog

KEY = "github.com/acme/shop"


def writer_log(n: int) -> bytes:
    entries: list[wlog.Entry] = []
    clock = hlc.HLC(1_790_000_000_000, 0)
    for i in range(n):
        body = {"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision", "scope": KEY,
                "text": f"decision {i}: keep the payment queue at-least-once and retry with backoff", "source": "docs/adr.md"}
        clock = hlc.tick(clock, clock.ms + 1)
        entries.append(wlog.seal_after(body, entries[-1] if entries else None, writer="wbench0000", clock=clock,
                                       author={"name": "Ann Tester", "email": "ann@example.com"}, seen=None))
    return wlog.encode(entries)


def timed(fn, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return statistics.median(out)


def no_check(rec, writer, raw=None):  # type: ignore[no-untyped-def]
    return None


def interleaved(data: bytes, rounds: int) -> tuple[float, float]:
    """Median verify time with every field checked and with the check off, the two taking turns
    (the first of a round alternating) so that they share whatever load the machine has."""
    real, times = fields.problem, {True: [], False: []}
    try:
        for r in range(rounds):
            for checked in ((True, False) if r % 2 else (False, True)):
                fields.problem = real if checked else no_check  # type: ignore[assignment]
                gc.collect()
                started = time.perf_counter()
                wlog.parse_log("wbench0000", data)
                times[checked].append(time.perf_counter() - started)
    finally:
        fields.problem = real  # type: ignore[assignment]
    return statistics.median(times[True]), statistics.median(times[False])


START_VERIFY = """
import gc, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from retained.team import wlog
data, out = open(sys.argv[2], "rb").read(), []
for _ in range(int(sys.argv[3])):
    gc.collect()
    t = time.perf_counter()
    p = wlog.parse_log("wbench0000", data)
    out.append(time.perf_counter() - t)
assert p.problem is None and len(p.entries) == data.count(b"\\n"), p.problem
print(statistics.median(out))
"""


def at_start(rev: str, data: bytes, rounds: int) -> float:
    """The median verify time of `data` by the package as it was at `rev`."""
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "retained"], capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="retained-validation-bench-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        (Path(tmp) / "log").write_bytes(data)
        done = subprocess.run([sys.executable, "-c", START_VERIFY, tmp, str(Path(tmp) / "log"), str(rounds)],
                              capture_output=True, text=True, check=True)
        return float(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--baseline-rev", default="7203e3e", help="the issue's start (default 7203e3e)")
    args = ap.parse_args()
    data = writer_log(args.lines)
    checked, baseline = interleaved(data, args.rounds)
    entries = wlog.parse_log("wbench0000", data).entries
    recs = [e.rec for e in entries]
    direct = timed(lambda: [fields.problem(e.rec, "wbench0000", e.raw) for e in entries], args.rounds)
    confine = timed(lambda: [fields.confined(r, KEY) for r in recs], args.rounds)
    print(f"{args.lines:,} pulled lines, median of {args.rounds}:")
    print(f"  verify as a sync does, every field checked: {checked * 1000:8.1f} ms")
    print(f"  baseline, same run, field checks off:       {baseline * 1000:8.1f} ms")
    print(f"  => field validation costs                   {(checked - baseline) * 1000:8.1f} ms (target <= 50 ms)")
    print(f"     (the field checks timed on their own:    {direct * 1000:8.1f} ms)")
    print(f"  confinement at index catch-up:              {confine * 1000:8.1f} ms")
    start = at_start(args.baseline_rev, data, args.rounds)
    print(f"  verify at the issue's start ({args.baseline_rev}):       {start * 1000:8.1f} ms (chain, hash, canonical form; "
          f"no field checks) => now {(checked - start) * 1000:+.1f} ms")


if __name__ == "__main__":
    main()
