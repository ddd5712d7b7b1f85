"""Spawn -> first tool call answered, for this tree beside a baseline tree and `python -c pass`, in one run.

    python bench/first_call_bench.py --baseline DIR [--runs 7] [--records 1000]

DIR is a checkout of the baseline (`git worktree add DIR main`). Each round spawns `retained serve` of
each tree in turn (PYTHONPATH = the tree) on a fresh copy of an indexed store of `--records` records,
sends `initialize`, `notifications/initialized` and then a `memory_write` (or a `memory_search`) as soon
as the initialize reply is in, as bench/issue18_bench.py's `mcp_writes` does, and times spawn -> the
call's reply. The load average is printed at the start and the end: on a shared machine the figures
move with it.
"""

from __future__ import annotations

import argparse
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

from semantic_bench import bulk, load_average  # noqa: E402
from store_bench import sentence  # noqa: E402

from tests.mcp_wire import WireServer  # noqa: E402

INDEX = "import sys; from retained.store import Store; s = Store(sys.argv[1]); s.reindex(); s.close()"


def template(tree: Path, base: Path, records: int) -> Path:
    """A store of `records` records, indexed by `tree`'s own code."""
    d = base / f"template-{tree.name}"
    d.mkdir()
    bulk(d, records, random.Random(3))
    subprocess.run([sys.executable, "-c", INDEX, str(d)], check=True, cwd=d,
                   env={"PYTHONPATH": str(tree), "RETAINED_EMBED": "off", "PATH": "/usr/bin:/bin"})
    return d


def first_call(tree: Path, store: Path, tool: str, rng: random.Random) -> float:
    """Seconds from spawning `retained serve` to the reply of its first tool call."""
    env = {"RETAINED_DIR": str(store), "RETAINED_EMBED": "off", "PYTHONPATH": str(tree)}
    arguments = ({"text": "first write " + sentence(rng), "scope": "/p/a"} if tool == "memory_write"
                 else {"query": "deploy staging", "scope": "*"})
    t0 = time.perf_counter()
    srv = WireServer(env=env, cwd=str(store))
    try:
        srv.initialize()
        reply = srv.call("c0", tool, arguments)
        took = time.perf_counter() - t0
        assert "result" in reply and not reply["result"].get("isError"), reply
        return took
    finally:
        srv.close()


def python_pass(runs: int) -> list[float]:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        ts.append(time.perf_counter() - t)
    return ts


def line(name: str, ts: list[float]) -> str:
    return f"{name:<40} p50 {statistics.median(ts) * 1000:7.0f} ms   min {min(ts) * 1000:7.0f} ms   (n={len(ts)})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline, e.g. main")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--records", type=int, default=1000)
    args = ap.parse_args()
    trees = {"this tree": ROOT, "baseline": args.baseline.resolve()}
    print(f"load average at start: {load_average()}")
    rng = random.Random(7)
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        templates = {name: template(tree, base, args.records) for name, tree in trees.items()}
        for r in range(args.runs):
            for tool in ("memory_write", "memory_search"):
                for name, tree in trees.items():
                    store = base / f"run-{r}-{tool}-{tree.name}"
                    shutil.copytree(templates[name], store)
                    times.setdefault(f"{name}: spawn -> first {tool.split('_')[1]}", []).append(
                        first_call(tree, store, tool, rng))
    times["python -c pass"] = python_pass(args.runs)
    print(f"{args.records} records, words only; spawn -> the reply of the first tool call after initialize")
    for name, ts in times.items():
        print(line(name, ts))
    print(f"load average at end: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
