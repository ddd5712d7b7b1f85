"""MCP server benchmark over real stdio, side by side with the reference memory server.

    python bench/server_bench.py [--sizes 1000,10000,100000] [--calls 100]

For each size, both servers start on a store already holding that many records (retained) or
entities (@modelcontextprotocol/server-memory, from npm), then answer sequential round trips:
memory_write vs create_entities (one entity with one observation), and memory_search vs search_nodes.
Also: server start to `initialize` reply, next to `python -c "import mcp.types"` in the same run.
Goal (issue 3): faster than the reference at every size, flat in log size; start <= 0.7 s.
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

from store_bench import a_query, bulk_log, sentence  # noqa: E402
from tests.mcp_wire import WireServer  # noqa: E402

from retained.store import Store  # noqa: E402


def reference_cmd() -> list[str] | None:
    cache = Path(os.environ.get("RETAINED_NPM_CACHE") or Path.home() / ".cache" / "retained-ci" / "npm")
    entry = cache / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    node = shutil.which("node")
    return [node, str(entry)] if entry.exists() and node else None


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def timed_calls(srv: WireServer, calls: list[tuple[str, dict]]) -> float:
    times = []
    for i, (tool, args) in enumerate(calls):
        t = time.perf_counter()
        reply = srv.call(f"{tool}-{i}", tool, args, timeout=600)  # ids unique per server: replies never mix
        times.append(time.perf_counter() - t)
        assert "result" in reply and not reply["result"].get("isError"), reply
    return p50(times)


def bench_retained(base: Path, n: int, calls: int, rng: random.Random) -> tuple[float, float]:
    d = base / f"retained-{n}"
    d.mkdir(mode=0o700)
    bulk_log(d, n, rng)
    with Store(d) as s:
        s.reindex()
    srv = WireServer(env={"RETAINED_DIR": str(d)}, cwd=str(base))
    srv.initialize()
    w = timed_calls(srv, [("memory_write", {"text": sentence(rng), "scope": "/p/a"}) for _ in range(calls)])
    q = timed_calls(srv, [("memory_search", {"query": a_query(rng), "scope": "*"}) for _ in range(calls)])
    srv.close()
    return w, q


def bench_reference(base: Path, n: int, calls: int, rng: random.Random, cmd: list[str]) -> tuple[float, float]:
    path = base / f"reference-{n}.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"type": "entity", "name": f"e{i}", "entityType": "note",
                                "observations": [sentence(rng)]}) + "\n")
    srv = WireServer(env={"MEMORY_FILE_PATH": str(path)}, cmd=cmd)
    srv.initialize()
    w = timed_calls(srv, [("create_entities", {"entities": [{"name": f"new{n}-{i}", "entityType": "note",
                                                            "observations": [sentence(rng)]}]})
                          for i in range(calls)])
    q = timed_calls(srv, [("search_nodes", {"query": a_query(rng).split()[0]}) for _ in range(calls)])
    srv.close()
    return w, q


def startup(base: Path, runs: int = 10) -> tuple[float, float, float]:
    """p50 of start -> initialize reply, start -> first tools/list reply, and the SDK import alone."""
    d = base / "startup"
    d.mkdir(exist_ok=True)
    times, ready = [], []
    for _ in range(runs):
        t = time.perf_counter()
        srv = WireServer(env={"RETAINED_DIR": str(d)}, cwd=str(base))
        srv.initialize()
        times.append(time.perf_counter() - t)
        srv.request("tools", "tools/list")
        ready.append(time.perf_counter() - t)
        srv.close()
    imports = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.types"], check=True)
        imports.append(time.perf_counter() - t)
    return p50(times), p50(ready), p50(imports)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--reference-calls", type=int, default=20, help="calls per size for the reference server")
    args = ap.parse_args()
    rng = random.Random(11)
    base = Path(tempfile.mkdtemp(prefix="retained-server-bench-"))
    start, ready, imp = startup(base)
    print(f"start to initialize reply p50: {start:.0f} ms; to the first tools/list reply: {ready:.0f} ms "
          f"(same run: python -c 'import mcp.types' {imp:.0f} ms)")
    cmd = reference_cmd()
    if cmd is None:
        print("reference server not installed (bash .ci/npm-tools.sh DIR); retained figures only")
    print(f"{'records':>8} | {'retained write':>14} | {'reference write':>15} | {'retained search':>15} | {'reference search':>16}")
    for n in (int(x) for x in args.sizes.split(",")):
        rw, rq = bench_retained(base, n, args.calls, rng)
        fw, fq = bench_reference(base, n, args.reference_calls, rng, cmd) if cmd else (float("nan"), float("nan"))
        print(f"{n:>8} | {rw:>11.2f} ms | {fw:>12.2f} ms | {rq:>12.2f} ms | {fq:>13.2f} ms")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
