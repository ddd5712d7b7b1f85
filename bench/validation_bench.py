"""What checking every field of a teammate's line costs a sync (issue 29: ≤ 50 ms at 10k pulled lines).

A writer's log of N lines (default 10,000) is verified the way a sync verifies what it fetched
(`wlog.parse_log`), with every field checked (`fields.problem`) and, as the same-run baseline, with that
check replaced by one that passes everything: the difference is what validation costs. The index's
confinement check (`fields.confined`, once per teammate's line at catch-up) is timed on its own.

    python bench/validation_bench.py [--lines N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import time

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
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    data = writer_log(args.lines)
    checked = timed(lambda: wlog.parse_log("wbench0000", data), args.rounds)
    real = fields.problem
    fields.problem = lambda rec, writer, raw=None: None  # type: ignore[assignment]
    try:
        baseline = timed(lambda: wlog.parse_log("wbench0000", data), args.rounds)
    finally:
        fields.problem = real  # type: ignore[assignment]
    recs = [e.rec for e in wlog.parse_log("wbench0000", data).entries]
    confine = timed(lambda: [fields.confined(r, KEY) for r in recs], args.rounds)
    print(f"{args.lines:,} pulled lines, median of {args.rounds}:")
    print(f"  verify as a sync does, every field checked: {checked * 1000:8.1f} ms")
    print(f"  baseline, same run, field checks off:       {baseline * 1000:8.1f} ms")
    print(f"  => field validation costs                   {(checked - baseline) * 1000:8.1f} ms (target <= 50 ms)")
    print(f"  confinement at index catch-up:              {confine * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
