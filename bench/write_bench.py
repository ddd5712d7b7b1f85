"""Write latency (issue 18, item 4): in-process `Store.write` and MCP `memory_write` p50 and minimum at each
size, for this tree beside a same-run baseline (another checkout, e.g. main) and the append+fsync+read-back
floor.

    python bench/write_bench.py --baseline DIR [--sizes 1000,10000,100000] [--runs 60] [--rounds 3]

DIR is a checkout of the baseline (`git worktree add DIR main`). Both trees are laid out as installed
(issue18_bench.layout) and run by fresh processes whose PYTHONPATH is the tree; each tree indexes its own
copy of the same log (semantic_bench.bulk: three scopes, words of one vocabulary), words only
(RETAINED_EMBED=off). Every measurement starts from a fresh copy of that store, and within a round the
trees take turns (the order alternates between rounds), so that a busy moment of a shared machine falls
on both. Figures per measurement: `runs` writes of store_bench.sentence texts to one scope, after one
warm-up write:
* in-process: `Store.write` in a loop, as the CLI's store does it (the index catches up inline);
* in-process, as the MCP server's store does it (`Index.catch_up_in_background`), where the tree has it;
* MCP: a spawned `retained serve` over stdio (tests/mcp_wire.py), from sending the request to reading
  the reply, one call at a time;
* the floor: one record-sized line appended, fsynced and read back (issue18_bench.fsync_floor).
The summary gives, per figure, the median of the rounds' p50s and the smallest minimum.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from issue18_bench import fsync_floor, layout  # noqa: E402
from semantic_bench import bulk, load_average  # noqa: E402

# Run inside a tree's interpreter (PYTHONPATH = the tree): argv = [store dir, what, runs, seed].
CHILD = r"""
import json, os, random, statistics, sys, time
from pathlib import Path
os.environ["RETAINED_EMBED"] = "off"
sys.path.insert(0, os.environ["PYTHONPATH"] + "/bench")
from retained.store import Store
d, what = Path(sys.argv[1]), sys.argv[2]
if what == "index":
    with Store(d) as s:
        s.reindex()
else:
    from store_bench import sentence
    rng = random.Random(int(sys.argv[4]))
    texts = [sentence(rng) + f" {rng.random()}" for _ in range(int(sys.argv[3]))]
    with Store(d) as s:
        if what == "background":
            if not hasattr(s.index, "catch_up_in_background"):
                print(json.dumps({})); sys.exit(0)
            s.index.catch_up_in_background()
        s.write("warm " + sentence(rng), scope="/p/a")
        ts = []
        for text in texts:
            t = time.perf_counter(); r = s.write(text, scope="/p/a"); ts.append(time.perf_counter() - t)
            assert r["durable"], r
    print(json.dumps({"p50_ms": statistics.median(ts) * 1000, "min_ms": min(ts) * 1000}))
"""


def child(tree: Path, store: Path, *args: str) -> dict:
    # cwd: `python -c` puts the current directory first on sys.path; the store's, not a checkout.
    out = subprocess.run([sys.executable, "-c", CHILD, str(store), *args], capture_output=True, text=True, cwd=store,
                         env=dict(os.environ, PYTHONPATH=str(tree)), timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}


def mcp_writes(tree: Path, store: Path, runs: int, seed: int) -> dict[str, float]:
    """p50 and minimum of `runs` memory_write calls to a spawned `retained serve`, after a warm-up write and
    once the SDK is up (a session past its start)."""
    from store_bench import sentence

    from tests.mcp_wire import WireServer

    rng = random.Random(seed)
    texts = [sentence(rng) + f" {rng.random()}" for _ in range(runs)]
    env = {"RETAINED_DIR": str(store), "RETAINED_EMBED": "off", "PYTHONPATH": str(tree)}
    srv = WireServer(env=env, cwd=str(store))
    try:
        srv.initialize()
        reply = srv.call("w0", "memory_write", {"text": "warm " + sentence(rng), "scope": "/p/a"})
        assert "result" in reply and not reply["result"].get("isError"), reply
        assert "error" in srv.until_sdk()  # steady state: the SDK is up
        ts = []
        for i, text in enumerate(texts):
            t = time.perf_counter()
            reply = srv.call(f"w{i + 1}", "memory_write", {"text": text, "scope": "/p/a"})
            ts.append(time.perf_counter() - t)
            assert reply["result"]["structuredContent"]["durable"] is True, reply
        return {"p50_ms": statistics.median(ts) * 1000, "min_ms": min(ts) * 1000}
    finally:
        srv.close()


def prepared(base: Path, tree: Path, tag: str, n: int) -> Path:
    """This tree's indexed store of the `n`-record log (built once, copied for each measurement)."""
    src = base / f"log-{n}.jsonl"
    if not src.exists():
        tmp = base / f"gen-{n}"
        tmp.mkdir(mode=0o700)
        bulk(tmp, n, random.Random(n))
        (tmp / "log.jsonl").rename(src)
        shutil.rmtree(tmp)
    d = base / f"{tag}-{n}"
    d.mkdir(mode=0o700)
    shutil.copyfile(src, d / "log.jsonl")
    os.chmod(d / "log.jsonl", 0o600)
    child(tree, d, "index")
    return d


def fresh_copy(src: Path, base: Path) -> Path:
    d = Path(tempfile.mkdtemp(prefix="w-", dir=base))
    d.rmdir()
    shutil.copytree(src, d)
    os.chmod(d, 0o700)
    return d


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline (e.g. main)")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--runs", type=int, default=60, help="writes per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    base = Path(tempfile.mkdtemp(prefix="retained-write-"))
    trees = {"this tree": layout(ROOT, base, "this"), "baseline": layout(args.baseline.resolve(), base, "baseline")}
    figures: dict[tuple[str, int, str], list[dict[str, float]]] = {}
    floors: list[float] = []
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores); {args.runs} writes a measurement, "
          f"{args.rounds} rounds", flush=True)
    try:
        stores = {(name, n): prepared(base, tree, name.replace(" ", "-"), n) for n in sizes for name, tree in trees.items()}
        for rnd in range(args.rounds):
            floors.append(fsync_floor(base, 200))
            print(f"round {rnd + 1}: append+fsync+read-back floor p50 {floors[-1]:.3f} ms; load {load_average()}",
                  flush=True)
            for n in sizes:
                order = list(trees.items()) if rnd % 2 == 0 else list(trees.items())[::-1]
                for what in ("inline", "background", "mcp"):
                    for name, tree in order:
                        d = fresh_copy(stores[name, n], base)
                        try:
                            if what == "mcp":
                                got = mcp_writes(tree, d, args.runs, 100 + rnd)
                            else:
                                got = child(tree, d, what, str(args.runs), str(100 + rnd))
                        finally:
                            shutil.rmtree(d, ignore_errors=True)
                        if got:
                            figures.setdefault((name, n, what), []).append(got)
                            print(f"  [{name}] {n} records, {what}: p50 {got['p50_ms']:.3f} ms, min {got['min_ms']:.3f} ms",
                                  flush=True)
        print(f"\nsummary (median of the rounds' p50s / smallest minimum); floor p50 {statistics.median(floors):.3f} ms "
              f"(rounds: {', '.join(f'{f:.3f}' for f in floors)})")
        labels = {"inline": "in-process write", "background": "in-process write, index in the background",
                  "mcp": "MCP memory_write"}
        for what, label in labels.items():
            for n in sizes:
                parts = []
                for name in trees:
                    runs = figures.get((name, n, what))
                    if runs:
                        parts.append(f"{name} {statistics.median(r['p50_ms'] for r in runs):.3f} / "
                                     f"{min(r['min_ms'] for r in runs):.3f} ms")
                    else:
                        parts.append(f"{name} n/a")
                print(f"{label} at {n} records: " + "; ".join(parts))
        print(f"load average at the end: {load_average()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
