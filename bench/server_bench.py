"""MCP server benchmark over real stdio, side by side with the reference memory server.

    python bench/server_bench.py [--sizes 1000,10000,100000] [--calls 100]

For each size, both servers start on a store already holding that many records (retained) or
entities (@modelcontextprotocol/server-memory, from npm), then answer sequential round trips:
memory_write vs create_entities (one entity with one observation), and memory_search vs search_nodes.
Also: server start to the first reply and to the `tools/list` reply for every opening hosts use
(the handshake era's `initialize`; Claude Code 2.1.332's `server/discover`), beside the reference
server, `python -c pass` and `python -c "import mcp.types"` in the same run (`--startup-only`).
Goals: faster than the reference at every size, flat in log size (issue 3); <= 100 ms to the first
reply and <= 200 ms to tools/list (issue 9).
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

from retained.store import Store  # noqa: E402
from tests.mcp_wire import WireServer  # noqa: E402


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


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
               "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}}


def _legacy_opening(srv: WireServer) -> tuple[float, float]:
    """Codex / Claude Code 2.1.197 / Gemini: initialize, initialized, tools/list. Seconds to each reply."""
    t = srv.started
    srv.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "bench", "version": "1"}})
    first = time.perf_counter() - t
    srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    srv.request(1, "tools/list", {"_meta": {"progressToken": 0}})
    return first, time.perf_counter() - t


def _modern_opening(srv: WireServer) -> tuple[float, float]:
    """Claude Code 2.1.332: server/discover, subscriptions/listen (waits for the ack), discover, tools/list."""
    t = srv.started
    srv.request("probe", "server/discover", {"_meta": MODERN_META})
    first = time.perf_counter() - t
    srv.send({"jsonrpc": "2.0", "id": "listen:0", "method": "subscriptions/listen",
              "params": {"_meta": MODERN_META, "notifications": {"toolsListChanged": True}}})
    with srv._cond:
        srv._cond.wait_for(lambda: any(b"subscriptions/acknowledged" in x for x in srv.lines), 60)
    srv.request(0, "server/discover", {"_meta": MODERN_META})
    srv.request(1, "tools/list", {"_meta": MODERN_META})
    return first, time.perf_counter() - t


def startup(base: Path, runs: int = 10) -> list[tuple[str, float, float]]:
    """p50 of start -> first reply and start -> tools/list reply for each opening, beside the baselines."""
    d = base / "startup"
    d.mkdir(exist_ok=True)
    cases: list[tuple[str, list[str] | None, dict[str, str], object]] = [
        ("retained, handshake (Codex, Claude Code 2.1.197, Gemini)", None, {}, _legacy_opening),
        ("retained, 2026-07-28 discover (Claude Code 2.1.332)", None, {}, _modern_opening),
        ("retained, SDK only (RETAINED_EARLY_INITIALIZE=off)", None, {"RETAINED_EARLY_INITIALIZE": "off"},
         _legacy_opening),
    ]
    ref = reference_cmd()
    if ref:
        cases.append(("reference server-memory (node), handshake", ref, {"MEMORY_FILE_PATH": str(d / "ref.jsonl")},
                      _legacy_opening))
    rows = []
    for label, cmd, env, opening in cases:
        firsts, lists = [], []
        for _ in range(runs):
            t = time.perf_counter()
            srv = WireServer(env={"RETAINED_DIR": str(d), **env}, cwd=str(base), cmd=cmd)
            srv.started = t  # type: ignore[attr-defined]
            a, b = opening(srv)  # type: ignore[operator]
            srv.close()
            firsts.append(a)
            lists.append(b)
        rows.append((label, p50(firsts), p50(lists)))
    for label, code in (("python -c pass", "pass"), ("python -c 'import mcp.types'", "import mcp.types")):
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - t)
        rows.append((label, p50(times), float("nan")))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--reference-calls", type=int, default=20, help="calls per size for the reference server")
    ap.add_argument("--startup-runs", type=int, default=10, help="server starts per opening")
    ap.add_argument("--startup-only", action="store_true", help="only the start-up figures")
    args = ap.parse_args()
    rng = random.Random(11)
    base = Path(tempfile.mkdtemp(prefix="retained-server-bench-"))
    print(f"{'start to (p50, ' + str(args.startup_runs) + ' runs)':<58} | {'first reply':>11} | {'tools/list':>10}")
    for label, first, listed in startup(base, args.startup_runs):
        print(f"{label:<58} | {first:>8.0f} ms | " + (f"{listed:>7.0f} ms" if listed == listed else f"{'':>10}"))
    print("goal: <= 100 ms to the first reply and <= 200 ms to tools/list, for every opening")
    if args.startup_only:
        shutil.rmtree(base, ignore_errors=True)
        return 0
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
