"""This tree beside an earlier commit, in one interleaved run: write, search, the session-start hook and
the server's tools/list, the four figures a restructuring must not slow down.

    python bench/arch_bench.py [--baseline-rev REV]... [--records 10000] [--hook-records 100000] [--rounds 5]

Issue 16's target: each figure of this tree within 1.10x of the commit the issue started from
(a0e29c5, the default baseline), on the same machine in the same run. Every version runs from its own
copy of the package (a `git archive` of REV, or this working tree), bytecode compiled first as pip
leaves it, on its own copy of the same log (each version builds its own index, untimed), and the
versions take turns round by round, the first of a round alternating, so that they share whatever
load the machine has.

- write: in-process `Store.write` of a new sentence, p50 (words only: RETAINED_EMBED=off)
- search: in-process `Store.search` of 1-3 content words of a stored sentence, p50 (words only)
- hook: a fresh `retained hook session-start` process on a project store of --hook-records, p50
- tools/list: a fresh `retained serve`, start to the tools/list reply (initialize, initialized,
  tools/list, as Codex and Gemini CLI open), p50
- mcp write, mcp search: memory_write and memory_search over MCP in a `retained serve` past its start
  (the SDK up), request line to reply, p50 (a server per version per round)
- the SDK alone: the same calls to a bare low-level Server of the installed SDK whose one tool does
  nothing (bench/bare_sdk_server.py: no store, no guard), p50: the floor under any tool call that takes
  the SDK's path (issue 31, item 1)

And two figures of structure, for each version (issue 31: fewer moving parts):
- package: lines and modules of `retained/` and `installers/` (every .py file, as installed)
- one memory_write: the retained modules it runs in and the hops between them, from the MCP line to the
  fsync and back, in a `retained serve` past its start (a profiler on every thread counts each call
  from one retained module into another; two warm-up writes first)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from hook_bench import project_store  # noqa: E402
from store_bench import a_query, bulk_log, sentence  # noqa: E402
from wiring_bench import baseline_tree, compiled  # noqa: E402

ISSUE_START = "a0e29c5"

# Run inside each version's own interpreter: times `n` writes then `n` searches on the store at argv[1].
_IN_PROCESS = r"""
import json, sys, time
from retained.store import Store
directory, texts, queries = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
store = Store(directory)
store.search("warm up")
writes, searches = [], []
for text in texts:
    t = time.perf_counter()
    receipt = store.write(text, scope="/p/a")
    writes.append(time.perf_counter() - t)
    assert receipt["durable"], receipt
for q in queries:
    t = time.perf_counter()
    store.search(q, scopes=["/p/a", "global"])
    searches.append(time.perf_counter() - t)
store.close()
print(json.dumps({"write": writes, "search": searches}))
"""


# Run inside each version's own interpreter: `retained serve` with a profiler that counts, between
# SIGUSR1 and SIGUSR2, the retained modules run and the calls that cross from one of them into another.
_TRACED_SERVE = r"""
import json, signal, sys, threading
from retained.cli import main
on = [False]
modules, hops = set(), [0]

def module_of(frame):
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name if name == "retained" or name.startswith("retained.") else None

def prof(frame, event, arg):
    if not on[0] or event != "call":
        return
    here = module_of(frame)
    if here is None:
        return
    modules.add(here)
    caller = frame.f_back
    while caller is not None and module_of(caller) is None:
        caller = caller.f_back
    there = module_of(caller)
    if there is not None and there != here:
        hops[0] += 1

def start(*_):
    on[0] = True

def stop(*_):
    on[0] = False
    sys.stderr.write("TRACE " + json.dumps({"modules": sorted(modules), "hops": hops[0]}) + "\n")
    sys.stderr.flush()

signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
threading.setprofile(prof)
sys.setprofile(prof)
raise SystemExit(main(["serve"]))
"""


def mcp_calls(env: dict[str, str], cwd: Path, texts: list[str], queries: list[str],
              tools: tuple[str, str] = ("memory_write", "memory_search"),
              cmd: list[str] | None = None) -> tuple[list[float], list[float]]:
    """A write then a search of each over MCP (`tools`), each timed from the request line to its reply,
    in a `retained serve` past its start (the SDK up, a first write and search done untimed); `cmd`:
    another stdio server instead (the bare SDK's, whose one tool takes both calls' arguments)."""
    sys.path.insert(0, str(ROOT))
    from tests.mcp_wire import WireServer

    write, search = tools
    server = WireServer(env=env, cwd=str(cwd), cmd=cmd)
    try:
        server.initialize()
        server.until_sdk()
        server.call("w0", write, {"text": "a first write, untimed", "scope": "/p/a"})
        server.call("s0", search, {"query": "first write"})
        writes, searches = [], []
        for i, text in enumerate(texts):
            t = time.perf_counter()
            reply = server.call(f"w{i + 1}", write, {"text": text, "scope": "/p/a"})
            writes.append(time.perf_counter() - t)
            assert not reply["result"].get("isError"), reply
        for i, q in enumerate(queries):
            t = time.perf_counter()
            server.call(f"s{i + 1}", search, {"query": q, "scope": "*"})
            searches.append(time.perf_counter() - t)
        return writes, searches
    finally:
        server.proc.stdin.close()
        server.proc.wait(30)


BARE_SDK = [sys.executable, str(ROOT / "bench" / "bare_sdk_server.py")]


def package_size(pkg: Path) -> tuple[int, int]:
    """Lines and modules of every .py file of the package copy (retained/ with installers/ inside)."""
    files = [f for f in (pkg / "retained").rglob("*.py")
             if f.relative_to(pkg / "retained").parts[0] not in ("hooks", "templates")]  # data folders
    return sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files), len(files)


def write_path(env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """The retained modules one memory_write runs in, and the hops between them (see _TRACED_SERVE)."""
    sys.path.insert(0, str(ROOT))
    from tests.mcp_wire import WireServer

    server = WireServer(env=env, cwd=str(cwd), cmd=[sys.executable, "-c", _TRACED_SERVE])
    try:
        server.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "bench", "version": "1"}})
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.request(1, "tools/list")
        for i in (2, 3):  # past the start: the SDK up, a first write's imports done
            server.request(i, "tools/call", {"name": "memory_write", "arguments": {"text": f"warm-up write {i}"}})
        time.sleep(1.0)  # the index's background catch-up of the warm-up writes is over
        server.proc.send_signal(signal.SIGUSR1)
        time.sleep(0.3)
        reply = server.request(4, "tools/call", {"name": "memory_write",
                                                 "arguments": {"text": "the traced write of the structure bench"}})
        assert not reply["result"].get("isError"), reply
        time.sleep(0.5)  # what the write left to a background thread (the index's catch-up) is part of it
        server.proc.send_signal(signal.SIGUSR2)
        deadline = time.time() + 30
        while time.time() < deadline:
            for line in b"".join(server._stderr).decode(errors="replace").splitlines():
                if line.startswith("TRACE "):
                    got = json.loads(line[6:])
                    return len(got["modules"]), got["hops"]
            time.sleep(0.1)
        raise SystemExit("the traced server said nothing")
    finally:
        server.proc.stdin.close()
        server.proc.wait(30)


def this_tree(base: Path) -> Path:
    """An importable copy of the working tree in the package layout pyproject.toml maps."""
    pkg = base / "pkg-this"
    shutil.copytree(ROOT / "retained", pkg / "retained", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("installers", "hooks", "templates"):
        shutil.copytree(ROOT / folder, pkg / "retained" / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def version_env(pkg: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "GEMINI", "RETAINED"))}
    env.update(PYTHONPATH=str(pkg), RETAINED_EMBED="off", **extra)
    return env


def tools_list_seconds(env: dict[str, str], cwd: Path) -> float:
    """Spawn `retained serve`, open as Codex does, and time start -> the tools/list reply."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "retained", "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    opening = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in opening))
    proc.stdin.flush()
    took = None
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == 1:
            took = time.perf_counter() - started
            assert "tools" in msg.get("result", {}), msg
            break
    proc.stdin.close()
    proc.wait(30)
    if took is None:
        raise SystemExit("retained serve gave no tools/list reply")
    return took


def hook_seconds(env: dict[str, str], project: Path, session: str) -> float:
    payload = json.dumps({"session_id": session, "cwd": str(project), "source": "startup",
                          "hook_event_name": "SessionStart"})
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "retained", "hook", "session-start"], input=payload, text=True,
                   capture_output=True, env=env, cwd=project, check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-rev", action="append", default=[], metavar="REV",
                    help=f"a commit to measure beside this tree (repeatable; default {ISSUE_START})")
    ap.add_argument("--records", type=int, default=10_000, help="log size for write and search")
    ap.add_argument("--hook-records", type=int, default=100_000, help="log size for the session-start hook")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=40, help="writes and searches per version per round")
    ap.add_argument("--spawns-per-round", type=int, default=6,
                    help="session-start hooks and server starts per version per round (each a new process)")
    ap.add_argument("--structure-only", action="store_true", help="only the package and memory_write figures")
    args = ap.parse_args()
    if args.structure_only:
        args.rounds, args.hook_records = 0, 10
    base = Path(tempfile.mkdtemp(prefix="retained-arch-bench-"))
    os.chdir(base)  # `python -c` puts the working directory first on sys.path: never this checkout's
    rng = random.Random(16)
    versions: list[tuple[str, Path]] = [("this tree", this_tree(base))]
    for rev in args.baseline_rev or [ISSUE_START]:
        short = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True,
                               text=True, check=True).stdout.strip()
        versions.append((f"baseline {short}", baseline_tree(rev, base)))
    compiled([pkg for _, pkg in versions])

    seed = base / "seed"
    seed.mkdir(mode=0o700)
    bulk_log(seed, args.records, rng)
    project = base / "proj"
    (project / ".git").mkdir(parents=True)
    hook_seed = project_store(base / "hook-seed", args.hook_records, project)
    stores, hook_stores = {}, {}
    for i, (name, pkg) in enumerate(versions):  # each version's own copy, indexed by itself (untimed)
        stores[name] = base / f"store-{i}"
        shutil.copytree(seed, stores[name])
        hook_stores[name] = base / f"hook-{i}"
        shutil.copytree(hook_seed, hook_stores[name], ignore=shutil.ignore_patterns("index.sqlite3*", "sessions"))
        for d in (stores[name], hook_stores[name]):
            subprocess.run([sys.executable, "-m", "retained", "--dir", str(d), "reindex"], env=version_env(pkg),
                           capture_output=True, check=True)

    figures: dict[str, dict[str, list[float]]] = {
        n: {"write": [], "search": [], "hook": [], "tools/list": [], "mcp write": [], "mcp search": []}
        for n, _ in versions}
    bare: list[float] = []
    for r in range(args.rounds):
        texts = [sentence(rng) for _ in range(args.per_round)]
        queries = [a_query(rng) for _ in range(args.per_round)]
        # Turns alternate (ABBA…): no version always runs right after the other's writes and spawns.
        for name, pkg in (versions if r % 2 == 0 else versions[::-1]):
            out = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(stores[name]), json.dumps(texts),
                                  json.dumps(queries)], env=version_env(pkg), capture_output=True, text=True, check=True)
            got = json.loads(out.stdout)
            figures[name]["write"] += got["write"]
            figures[name]["search"] += got["search"]
            hook_env = version_env(pkg, RETAINED_DIR=str(hook_stores[name]), CLAUDECODE="1")
            for i in range(args.spawns_per_round):
                figures[name]["hook"].append(hook_seconds(hook_env, project, f"bench-{name}-{r}-{i}"))
            serve_env = version_env(pkg, RETAINED_DIR=str(stores[name]))
            for _ in range(args.spawns_per_round):
                figures[name]["tools/list"].append(tools_list_seconds(serve_env, project))
            writes, searches = mcp_calls(serve_env, project, texts, queries)
            figures[name]["mcp write"] += writes
            figures[name]["mcp search"] += searches
        writes, searches = mcp_calls({}, project, texts, queries, tools=("noop", "noop"), cmd=BARE_SDK)
        bare += writes + searches

    floor = []
    for _ in range(10 if args.rounds else 0):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        floor.append(time.perf_counter() - t)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"python -c pass p50 {statistics.median(floor or [0]) * 1000:.1f} ms (same run)")
    mine = figures["this tree"]
    timed = (("write", args.records), ("search", args.records), ("hook", args.hook_records), ("tools/list", 0),
             ("mcp write", args.records), ("mcp search", args.records))
    for what, size in timed if args.rounds else ():
        at = f" at {size} records" if size else ""
        parts = [f"this tree {statistics.median(mine[what]) * 1000:.2f} ms (min {min(mine[what]) * 1000:.2f})"]
        for name, _ in versions[1:]:
            theirs = statistics.median(figures[name][what])
            parts.append(f"{name} {theirs * 1000:.2f} ms (min {min(figures[name][what]) * 1000:.2f}; ratio "
                         f"{statistics.median(mine[what]) / theirs:.2f}, target <= 1.10)")
        print(f"{what} p50{at}: " + "; ".join(parts))
    if bare:
        print(f"the SDK alone (a no-op tool, same calls) p50: {statistics.median(bare) * 1000:.2f} ms "
              f"(min {min(bare) * 1000:.2f})")
    for name, pkg in versions:
        lines, modules = package_size(pkg)
        store = base / f"trace-{name.replace(' ', '-')}"
        shutil.copytree(seed, store)
        used, hops = write_path(version_env(pkg, RETAINED_DIR=str(store)), project)
        print(f"{name}: package {lines:,} lines in {modules} modules; one memory_write over MCP runs in "
              f"{used} retained modules with {hops} hops between them")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
