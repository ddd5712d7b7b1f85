"""What the machine pays in memory for retained's agent sessions: the sum of the PSS of every retained
process, for one and for three agent sessions of one user, beside a same-run baseline (another
checkout, e.g. issue 31's start).

    python bench/rss_bench.py --baseline DIR [--sizes 10000] [--counts 1,3] [--idle 600]

DIR is a checkout of the baseline (`git worktree add --detach DIR 7203e3e`). For each size, each tree's
servers share one store (random unit vectors stand in for embeddings, as in issue18_bench.py) and a
cache dir of their own, where one server run first has kept the model (as after a tree's first use).
Each `retained serve` is initialised,
lists its tools and runs one search by meaning; once every one has settled, every process that carries
this run's mark in its environment (the servers, and whatever they started: a model host, where a tree
has one) is measured from /proc/PID/smaps_rollup.

Beside them, in the same run, the floor under any server that answers through the SDK: that many bare
low-level Servers of the installed SDK (bench/bare_sdk_server.py), each with one tool that does nothing,
initialised, their tools listed and the tool called once; then the same with retained's model held after
that call embedded its text (no store, no index, no vectors).

PSS (proportional set size) splits each shared page between the processes that map it: the sum is what
the machine pays for them together (onnxruntime's library and a mapped model file counted once), which
the RSS of one process is not. RSS is printed beside it, and for this tree's first server what holds
its PSS (/proc/PID/smaps, by mapping). Memory does not depend on the machine's load; timings do.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from issue18_bench import layout, store_for  # noqa: E402
from semantic_bench import load_average  # noqa: E402

MARK = "RETAINED_RSS_BENCH"


def rollup(pid: int) -> dict[str, float]:
    """MB of /proc/PID/smaps_rollup (Rss, Pss, Pss_Anon, Pss_File, ...)."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) / 1024
    return out


def marked(mark: str) -> dict[int, str]:
    """{pid: what it runs} of every process with `MARK=mark` in its environment."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"{MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                found[int(entry.name)] = " ".join(a.decode(errors="replace") for a in argv[1:4] if a)
        except OSError:
            continue
    return found


def settle(pids: list[int], timeout: float = 120.0) -> None:
    """Wait until the summed PSS stays within 0.5 MB for a second (a warm-up under way grows it)."""
    end = time.monotonic() + timeout
    last = sum(rollup(p)["Pss"] for p in pids)
    while time.monotonic() < end:
        time.sleep(1.0)
        now = sum(rollup(p)["Pss"] for p in pids)
        if abs(now - last) < 0.5:
            return
        last = now


def breakdown(pid: int) -> str:
    """MB of PSS by what holds it: the heap, other anonymous memory, and the largest file mappings."""
    held: collections.Counter[str] = collections.Counter()
    name = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split()
            path = parts[5] if len(parts) > 5 else ""
            if path == "[heap]":
                name = "C heap (main arena)"
            elif not path or path.startswith("["):
                name = "other anonymous (Python's arenas, large blocks, stacks)"
            else:
                pkg = path.split("/site-packages/")[1].split("/")[0] if "/site-packages/" in path else ""
                name = f"file {pkg + ':' if pkg else ''}{os.path.basename(path)}"
        elif line.startswith("Pss:"):
            held[name] += int(line.split()[1]) / 1024
    files = sum(v for k, v in held.items() if k.startswith("file "))
    top = [f"{v:.1f} {k}" for k, v in held.most_common() if not k.startswith("file ")]
    top += [f"{v:.1f} {k}" for k, v in held.most_common(8) if k.startswith("file ")]
    return f"file-backed {files:.1f} MB in all; " + "; ".join(top)


def agents(tree: Path, store: Path, cache: Path, count: int, idle_s: float) -> tuple[dict[int, tuple[str, dict]], str]:
    """{pid: (what, smaps_rollup)} of every retained process with `count` servers of one user and store,
    each initialised, its tools listed and one search by meaning done; and the first server's breakdown."""
    from tests.mcp_wire import WireServer

    mark = uuid.uuid4().hex
    runtime = Path(tempfile.mkdtemp(prefix="rss-", dir="/tmp"))
    env = {"RETAINED_DIR": str(store), "PYTHONPATH": str(tree), "XDG_RUNTIME_DIR": str(runtime),
           "RETAINED_CACHE_DIR": str(cache), "RETAINED_EMBED_IDLE_S": str(idle_s), MARK: mark}
    servers = [WireServer(env=env, cwd=str(store)) for _ in range(count)]
    try:
        for i, srv in enumerate(servers):
            srv.initialize()
            srv.request("t", "tools/list", {})
            reply = srv.call(f"s{i}", "memory_search", {"query": "which tool holds our passwords?", "scope": "*"},
                             timeout=600)
            assert "result" in reply, reply
        time.sleep(1.0)
        settle(list(marked(mark)))
        procs = marked(mark)
        return {pid: (what, rollup(pid)) for pid, what in procs.items()}, breakdown(servers[0].proc.pid)
    finally:
        for srv in servers:
            srv.close()
        for pid in marked(mark):  # a model host (the baseline's) ends with its leases; not waited for
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        shutil.rmtree(runtime, ignore_errors=True)


def bare_sdk(count: int, env: dict[str, str] | None = None, model: bool = False) -> float:
    """Summed PSS (MB) of `count` bare SDK servers, each initialised, its tools listed and called once;
    `model`: the call also embeds its text with retained's model (of `env`'s tree and cache dir)."""
    from tests.mcp_wire import WireServer

    cmd = [sys.executable, str(ROOT / "bench" / "bare_sdk_server.py")] + (["model"] if model else [])
    servers = [WireServer(cmd=cmd, env=env) for _ in range(count)]
    try:
        for srv in servers:
            srv.initialize()
            srv.request("t", "tools/list", {})
            assert "result" in srv.call("n", "noop", {"text": "which tool holds our passwords?"}, timeout=600)
        time.sleep(1.0)
        pids = [srv.proc.pid for srv in servers]
        settle(pids)
        return sum(rollup(pid)["Pss"] for pid in pids)
    finally:
        for srv in servers:
            srv.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline (e.g. 7203e3e)")
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--counts", default="1,3", help="agent sessions measured together")
    ap.add_argument("--idle", type=float, default=600.0, help="RETAINED_EMBED_IDLE_S of the servers")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-rss-"))
    trees = {"this tree": layout(ROOT, base, "this"), "baseline": layout(args.baseline.resolve(), base, "baseline")}
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores)", flush=True)
    try:
        for n in (int(x) for x in args.sizes.split(",") if x):
            print(f"{n} records, after one search by meaning each (MB):", flush=True)
            sums: dict[str, list[str]] = {name: [] for name in trees}
            for name, tree in trees.items():
                tag = name.replace(" ", "-")
                d = store_for(base, tree, n, tag)
                cache = base / f"cache-{tag}"
                agents(tree, d, cache, 1, args.idle)  # the steady state: the kept model made by an earlier process
                for count in (int(c) for c in args.counts.split(",") if c):
                    procs, parts = agents(tree, d, cache, count, args.idle)
                    pss = sum(r["Pss"] for _, r in procs.values())
                    rss = sum(r["Rss"] for _, r in procs.values())
                    each = ", ".join(f"{what.split()[-1]} {r['Pss']:.0f}" for what, r in procs.values())
                    print(f"  [{name}] {count} agent(s): PSS sum {pss:.0f} (RSS sum {rss:.0f}); each process: {each}",
                          flush=True)
                    if name == "this tree" and count == 1:
                        print(f"  [{name}] the server's PSS by mapping: {parts}", flush=True)
                    sums[name].append(f"{count}: {pss:.0f}")
                shutil.rmtree(d, ignore_errors=True)
            print("  PSS sum by agents: " + "; ".join(f"{k} {', '.join(v)}" for k, v in sums.items()), flush=True)
        counts = [int(c) for c in args.counts.split(",") if c]
        floor_env = {"PYTHONPATH": str(trees["this tree"]), "RETAINED_CACHE_DIR": str(base / "cache-this-tree")}
        print("  floors, by agents: the SDK alone (bare servers, a tool that does nothing): "
              + ", ".join(f"{c}: {bare_sdk(c):.0f}" for c in counts)
              + "; the SDK and retained's model, its one call embedding a query (no store, no index, no vectors): "
              + ", ".join(f"{c}: {bare_sdk(c, floor_env, model=True):.0f}" for c in counts), flush=True)
        print(f"load average at the end: {load_average()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
