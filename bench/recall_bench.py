"""The prompt hook's recall search in process (what a warm server answers the hook with, and what a hook
without a server runs after loading the model), timed beside a same-run baseline checkout.

    python bench/recall_bench.py [--sizes 10000,100000] [--runs 20] [--baseline /path/to/checkout]

Each tree runs in its own process on its own copy of the same store (random sentences, random unit
vectors under that tree's model key, as bench/semantic_bench.py makes them); prompts are embedded by
the real model. Issue 32: the vocabulary, the every-word fallback and the source spread must keep the
hook as fast as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["when do we ship to production?", "roll out the new build to the container orchestrator",
           "why did the pipeline on my pull request fail?", "add a cache for the user profile lookups",
           "explain what a monad is", "deploy the service and check the logs"]


def child(tree: str, size: int, runs: int, base: str) -> None:
    sys.path.insert(0, tree)
    sys.path.insert(1, str(ROOT / "bench"))
    os.environ["RETAINED_EMBED"] = "off"
    from semantic_bench import bulk, fake_vectors

    from retained.recall import candidates, pick
    from retained.store import Store

    d = Path(base) / f"store-{size}"
    d.mkdir()
    bulk(d, size, random.Random(size), scope_of=lambda seq: "/p" if seq % 2 else "global")
    with Store(d) as s:
        s.reindex()
    os.environ["RETAINED_EMBED"] = "local"
    with Store(d) as s:
        fake_vectors(s, size)
        for p in PROMPTS:  # warm: the model, the vectors, the query cache is then bypassed per run
            candidates(s, p, "/p")
        times = []
        for i in range(runs):
            for p in PROMPTS:
                q = f"{p} {i}"  # a new prompt each time: no cached query vector
                t = time.perf_counter()
                found = candidates(s, q, "/p")
                if found is not None:
                    pick(s, q, *found, project="/p", shown=set())
                times.append(time.perf_counter() - t)
    print(json.dumps({"p50_ms": statistics.median(times) * 1000,
                      "p95_ms": sorted(times)[int(len(times) * 0.95)] * 1000}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--baseline", help="a checkout of the baseline commit")
    ap.add_argument("--child", nargs=3, metavar=("TREE", "SIZE", "BASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.runs, args.child[2])
        return 0
    trees = [("this tree", str(ROOT))] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"recall search in process, p50 / p95 of {args.runs} x {len(PROMPTS)} prompts "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for size in (int(s) for s in args.sizes.split(",")):
        for name, tree in trees * 2:  # twice, alternating: a busy machine's drift falls on both
            with tempfile.TemporaryDirectory() as base:
                out = subprocess.run([sys.executable, __file__, "--runs", str(args.runs), "--child", tree, str(size), base],
                                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": tree})
                if out.returncode:
                    print(f"  {size:>7} {name}: failed: {out.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"  {size:>7} records, {name:<10} {r['p50_ms']:7.1f} / {r['p95_ms']:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
