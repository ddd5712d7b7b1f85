"""Resident memory of one `retained serve` with the semantic tier, stage by stage, beside a same-run
baseline (another checkout, e.g. main) and `python -c pass`.

    python bench/rss_bench.py --baseline DIR [--sizes 10000,100000] [--idle 10] [--rounds 1]

DIR is a checkout of the baseline (`git worktree add --detach DIR main`). For each size, each tree's
server is spawned on its own copy of one store (random unit vectors stand in for embeddings, as in
issue18_bench.py), and VmRSS (VmHWM: the peak so far) is read from /proc at each stage:
* `initialized`: after initialize (the SDK imported; nothing of the semantic tier yet);
* `warm`: after tools/list, once the warm-up is done (the model, the vectors and numpy/onnxruntime
  loaded: what lets the prompt hook borrow the model) and the RSS has settled;
* `searched`: one second after a memory_search by meaning;
* `idle`: after RETAINED_EMBED_IDLE_S (--idle) seconds without embedding, when the model was dropped.
For this tree, the `searched` stage is also broken down from /proc/PID/smaps (anonymous and
file-backed memory, and the mappings that hold most of it), and a words-only server
(RETAINED_EMBED=off) gives what the process holds without the semantic tier.

Then, for 1, 2 and 3 servers of one user on one store (each has warmed and searched by meaning), the
RSS of each server, of the model host (retained/model_host.py: this tree's servers share one; the
baseline has none) and the sum, per tree. Each tree's servers get a private XDG_RUNTIME_DIR, so their
host is their own, and the hosts are stopped at the end.

RSS does not depend on the machine's load; the timings issue18_bench.py prints do.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from issue18_bench import layout, store_for  # noqa: E402
from semantic_bench import load_average  # noqa: E402

STAGES = ("initialized", "warm", "searched", "idle")


def status(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads")):
            name, value = line.split(":")
            out[name] = int(value.split()[0]) / (1 if name == "Threads" else 1024)
    return out


def settle(pid: int, timeout: float = 90.0) -> None:
    """Wait until VmRSS stays within 0.5 MB for a second (a warm-up under way grows it)."""
    end = time.monotonic() + timeout
    last = status(pid)["VmRSS"]
    while time.monotonic() < end:
        time.sleep(1.0)
        now = status(pid)["VmRSS"]
        if abs(now - last) < 0.5:
            return
        last = now


def breakdown(pid: int) -> str:
    """MB resident by what holds it: the heap, other anonymous memory, and the largest file mappings."""
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
        elif line.startswith("Rss:"):
            held[name] += int(line.split()[1]) / 1024
    files = sum(v for k, v in held.items() if k.startswith("file "))
    top = [f"{v:.1f} {k}" for k, v in held.most_common() if not k.startswith("file ")]
    top += [f"{v:.1f} {k}" for k, v in held.most_common(8) if k.startswith("file ")]
    return f"file-backed {files:.1f} MB in all; " + "; ".join(top)


def hosts(runtime: Path) -> list[int]:
    """Pids of the model hosts started under this XDG_RUNTIME_DIR."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"retained.model_host" in (entry / "cmdline").read_bytes() and \
                    f"XDG_RUNTIME_DIR={runtime}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def stop_hosts(runtime: Path) -> None:
    for pid in hosts(runtime):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    shutil.rmtree(runtime, ignore_errors=True)


def fleet(tree: Path, store: Path, count: int) -> tuple[list[float], float]:
    """([VmRSS of each server], VmRSS of the model host or 0) with `count` servers of one user and
    store, each warmed and searched by meaning."""
    from tests.mcp_wire import WireServer

    runtime = Path(tempfile.mkdtemp(prefix="rss-", dir="/tmp"))
    env = {"RETAINED_DIR": str(store), "PYTHONPATH": str(tree), "XDG_RUNTIME_DIR": str(runtime),
           "RETAINED_EMBED_IDLE_S": "600"}
    servers = [WireServer(env=env, cwd=str(store)) for _ in range(count)]
    try:
        for i, srv in enumerate(servers):
            srv.initialize()
            srv.request("t", "tools/list", {})
            reply = srv.call(f"s{i}", "memory_search", {"query": "which tool holds our passwords?", "scope": "*"},
                             timeout=600)
            assert "result" in reply, reply
        time.sleep(1.0)
        for srv in servers:
            settle(srv.proc.pid)
        found = hosts(runtime)
        host = sum(status(pid)["VmRSS"] for pid in found)
        return [status(srv.proc.pid)["VmRSS"] for srv in servers], host
    finally:
        for srv in servers:
            srv.close()
        stop_hosts(runtime)


def server_stages(tree: Path, store: Path, idle_s: float, embed: str = "local") -> tuple[dict, str]:
    """{stage: status} of one `retained serve` of `store`, and the smaps breakdown after the search;
    "host" when a model host served it (its status after the search)."""
    from tests.mcp_wire import WireServer

    runtime = Path(tempfile.mkdtemp(prefix="rss-", dir="/tmp"))
    env = {"RETAINED_DIR": str(store), "RETAINED_EMBED": embed, "PYTHONPATH": str(tree),
           "RETAINED_EMBED_IDLE_S": str(idle_s), "XDG_RUNTIME_DIR": str(runtime)}
    srv = WireServer(env=env, cwd=str(store))
    pid = srv.proc.pid
    out: dict[str, dict] = {}
    try:
        srv.initialize()
        settle(pid)
        out["initialized"] = status(pid)
        srv.request("t", "tools/list", {})
        time.sleep(1.0)
        settle(pid)
        out["warm"] = status(pid)
        reply = srv.call("s", "memory_search", {"query": "which tool holds our passwords?", "scope": "*"}, timeout=600)
        assert "result" in reply, reply
        time.sleep(1.0)
        out["searched"] = status(pid)
        parts = breakdown(pid)
        for host in hosts(runtime):
            out["host"] = status(host)
        if embed != "off":
            time.sleep(idle_s * 2 + 3)  # the background thread looks every idle_s / 2
            out["idle"] = status(pid)
        return out, parts
    finally:
        srv.close()
        stop_hosts(runtime)


def python_pass_rss() -> float:
    script = "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])"
    return int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout) / 1024


def fmt(st: dict) -> str:
    return f"{st['VmRSS']:.0f} MB (peak {st['VmHWM']:.0f}; anon {st['RssAnon']:.0f}, file {st['RssFile']:.0f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline (e.g. main)")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--idle", type=float, default=10.0, help="RETAINED_EMBED_IDLE_S of the servers")
    ap.add_argument("--rounds", type=int, default=1, help="servers per tree and size (the figures are per round)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-rss-"))
    trees = {"this tree": layout(ROOT, base, "this"), "baseline": layout(args.baseline.resolve(), base, "baseline")}
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores); `python -c pass` VmRSS "
          f"{python_pass_rss():.1f} MB", flush=True)
    try:
        for n in (int(x) for x in args.sizes.split(",") if x):
            print(f"{n} records:", flush=True)
            # Each server gets a store indexed by its own tree (a copied index does not match its copied
            # log's file identity and would be rebuilt, vectors and all); the log itself is made once.
            for r in range(args.rounds):
                for name, tree in trees.items():
                    t = time.perf_counter()
                    d = store_for(base, tree, n, f"{name.replace(' ', '-')}-{r}")
                    built = time.perf_counter() - t
                    stages, parts = server_stages(tree, d, args.idle)
                    print(f"  [{name}] " + "; ".join(f"{s} {fmt(stages[s])}" for s in STAGES)
                          + (f"; model host after the search {fmt(stages['host'])}" if "host" in stages else "")
                          + f" (store indexed with vectors in {built:.0f} s)", flush=True)
                    if name == "this tree" and r == 0:
                        print(f"  [{name}] searched, by mapping (MB): {parts}", flush=True)
                    shutil.rmtree(d, ignore_errors=True)
            for name, tree in trees.items():
                d = store_for(base, tree, n, f"fleet-{name.replace(' ', '-')}")
                for count in (1, 2, 3):
                    each, host = fleet(tree, d, count)
                    print(f"  [{name}] {count} server(s) of one user: servers "
                          + ", ".join(f"{r:.0f}" for r in each) + f" MB; model host {host:.0f} MB; "
                          f"sum {sum(each) + host:.0f} MB", flush=True)
                shutil.rmtree(d, ignore_errors=True)
            d = store_for(base, trees["this tree"], n, "words")
            stages, _ = server_stages(trees["this tree"], d, args.idle, embed="off")
            print(f"  [this tree, RETAINED_EMBED=off] searched {fmt(stages['searched'])}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
        print(f"load average at the end: {load_average()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
