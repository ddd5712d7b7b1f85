"""The figures of issue 18, each beside a same-run baseline (another checkout, e.g. main) and `python -c pass`.

    python bench/issue18_bench.py --baseline DIR [--sizes 10000,100000] [--runs 20] [--skip-hook]

DIR is a checkout of the baseline (`git worktree add DIR main`, or `git archive main | tar -x -C DIR`).
Every figure is measured for both trees in one run, one after the other, by fresh processes whose
PYTHONPATH is the tree; the load average is printed at the start and the end. Figures:
* resident memory (VmRSS and VmHWM from /proc) of one `retained serve` with the model and the vectors
  loaded, after a search, at each size (random unit vectors stand in for embeddings, as in
  semantic_bench.py); and this tree's after the model was dropped for idleness;
* search p50 in process at 1k records with meaning (2-3 word queries);
* in-process write p50 at each size, beside the append+fsync+read-back floor;
* the CLI's cold `search` (a fresh process, no server running), p50;
* the prompt hook (semantic_bench.py --hook-only of each tree);
* the retrieval and recall eval (bench/eval/run_eval.py with this tree's sets).
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

from semantic_bench import bulk, load_average  # noqa: E402

# Run inside a tree's interpreter (PYTHONPATH = the tree): argv = [store dir, what, ...].
CHILD = r"""
import json, os, random, statistics, sys, time
from pathlib import Path
sys.path.insert(0, os.environ["PYTHONPATH"] + "/bench")
d, what = Path(sys.argv[1]), sys.argv[2]
from retained.store import Store
if what == "index":
    os.environ["RETAINED_EMBED"] = "off"
    with Store(d) as s:
        s.reindex()
    os.environ["RETAINED_EMBED"] = "local"
    from semantic_bench import fake_vectors
    with Store(d) as s:
        fake_vectors(s, 1)
elif what == "search":
    from store_bench import STOP
    rng = random.Random(2)
    texts = [json.loads(line)["text"] for line in open(d / "log.jsonl", encoding="utf-8")]
    qs = []  # two or three words of something that was written, as agents search
    for _ in range(int(sys.argv[3])):
        words = [w for w in rng.choice(texts).split() if w not in STOP]
        qs.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 3)))))
    with Store(d) as s:
        s.search("warm up the model and the vectors")
        ts = []
        for q in qs:
            t = time.perf_counter(); r = s.search(q, scopes=["/p/a", "global"]); ts.append(time.perf_counter() - t)
        print(json.dumps({"p50_ms": statistics.median(ts) * 1000, "semantic": r["semantic"]}))
elif what == "write":
    from store_bench import sentence
    os.environ["RETAINED_EMBED"] = "off"
    rng = random.Random(int(sys.argv[4]))
    with Store(d) as s:
        s.write("warm " + sentence(rng), scope="/p/a")
        ts = []
        for _ in range(int(sys.argv[3])):
            t = time.perf_counter(); s.write(sentence(rng) + f" {rng.random()}", scope="/p/a"); ts.append(time.perf_counter() - t)
        print(json.dumps({"p50_ms": statistics.median(ts) * 1000}))
"""


def child(tree: Path, store: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    # cwd: `python -c` puts the current directory first on sys.path, ahead of PYTHONPATH; run from the
    # bench's own checkout, every tree would import that checkout's retained.
    out = subprocess.run([sys.executable, "-c", CHILD, str(store), *args], capture_output=True, text=True, cwd=store,
                         env=dict(os.environ, PYTHONPATH=str(tree), **(env or {})), timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}


def store_for(base: Path, tree: Path, n: int, tag: str) -> Path:
    d = base / f"{tag}-{n}"
    d.mkdir(mode=0o700)
    src = base / f"log-{n}.jsonl"
    if not src.exists():
        tmp = base / f"gen-{n}"
        tmp.mkdir(mode=0o700)
        bulk(tmp, n, random.Random(n))
        (tmp / "log.jsonl").rename(src)
    shutil.copyfile(src, d / "log.jsonl")
    os.chmod(d / "log.jsonl", 0o600)
    child(tree, d, "index")
    return d


def _status(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def server_rss(tree: Path, store: Path, idle_s: float | None = None) -> dict[str, float]:
    """VmRSS/VmHWM of `retained serve` after a search by meaning; with idle_s, also after that idleness."""
    from tests.mcp_wire import WireServer

    env = {"RETAINED_DIR": str(store), "RETAINED_EMBED": "local", "PYTHONPATH": str(tree)}
    if idle_s is not None:
        env["RETAINED_EMBED_IDLE_S"] = str(idle_s)
    srv = WireServer(env=env, cwd=str(store))
    try:
        srv.initialize()
        srv.request("t", "tools/list", {})
        reply = srv.call("s", "memory_search", {"query": "which tool holds our passwords?", "scope": "*"}, timeout=600)
        assert "result" in reply, reply
        time.sleep(2)
        out = _status(srv.proc.pid)
        if idle_s is not None:
            time.sleep(idle_s * 2 + 3)
            out["VmRSS idle"] = _status(srv.proc.pid)["VmRSS"]
        return out
    finally:
        srv.close()


def fsync_floor(base: Path, runs: int) -> float:
    """p50 of append one record-sized line + fsync + read it back: what a durable write cannot beat."""
    f = base / "floor.jsonl"
    line = b'{"seq": 1, "text": "' + b"x" * 200 + b'"}\n'
    ts = []
    with open(f, "ab+") as fh:
        for _ in range(runs):
            t = time.perf_counter()
            at = fh.seek(0, 2)
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
            fh.seek(at)
            assert fh.read(len(line)) == line
            ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def cli_cold(tree: Path, store: Path, runs: int) -> float:
    env = dict(os.environ, RETAINED_DIR=str(store), PYTHONPATH=str(tree), RETAINED_EMBED="local")
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "retained", "search", "which tool holds our passwords?"], env=env,
                       capture_output=True, cwd=store, timeout=120)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def python_pass(runs: int) -> float:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def hook_line(tree: Path, runs: int) -> str:
    out = subprocess.run([sys.executable, str(tree / "bench" / "semantic_bench.py"), "--hook-only", "--runs", str(runs)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)), timeout=3600,
                         cwd=tempfile.gettempdir())
    return " / ".join(line for line in out.stdout.splitlines() if "prompt hook" in line or "RSS" in line) or out.stderr[-300:]


def eval_summary(tree: Path) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "eval" / "run_eval.py"), "--json"], capture_output=True,
                         text=True, env=dict(os.environ, RETAINED_EVAL_TREE=str(tree)), timeout=1200)
    if out.returncode != 0:
        return "eval failed: " + out.stderr[-300:]
    parts = []
    for s in json.loads(out.stdout)["sets"]:
        for split, kinds in sorted(s["results"]["blend"].items()):
            tot = [sum(c[i] for c in kinds.values()) for i in range(3)]
            parts.append(f"{s['set']} {split}: hit@1 {tot[0]}/{tot[2]}, hit@3 {tot[1]}/{tot[2]}")
        for split, c in sorted(s["prompts"].items()):
            parts.append(f"{s['set']} {split} prompt recall {c['answered']}/{c['answerable']}, "
                         f"abstention {c['silent']}/{c['unrelated']}")
        parts.append(f"{s['set']} ODR {s['odr'][0]}/{s['odr'][1]}")
    return "; ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline (e.g. main)")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip-hook", action="store_true")
    args = ap.parse_args()
    trees = {"this tree": ROOT, "baseline": args.baseline.resolve()}
    sizes = [int(x) for x in args.sizes.split(",") if x]
    base = Path(tempfile.mkdtemp(prefix="retained-i18-"))
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores); python -c pass p50 "
          f"{python_pass(args.runs):.1f} ms; append+fsync+read-back floor p50 {fsync_floor(base, 200):.2f} ms")
    try:
        for name, tree in trees.items():
            small = store_for(base, tree, 1000, name.replace(" ", "-"))
            s = child(tree, small, "search", str(args.runs * 3))
            w = child(tree, small, "write", str(args.runs * 3), "1")
            print(f"[{name}] 1k records: search p50 {s['p50_ms']:.1f} ms with semantic {s['semantic']}; "
                  f"in-process write p50 {w['p50_ms']:.2f} ms; CLI cold search p50 {cli_cold(tree, small, args.runs):.0f} ms",
                  flush=True)
            for n in sizes:
                d = store_for(base, tree, n, name.replace(" ", "-"))
                rss = server_rss(tree, d, idle_s=2 if name == "this tree" else None)
                w = child(tree, d, "write", str(args.runs * 3), "2")
                idle = f", {rss['VmRSS idle']:.0f} MB after the model was dropped for idleness" if "VmRSS idle" in rss else ""
                print(f"[{name}] {n} records: `retained serve` RSS {rss['VmRSS']:.0f} MB (peak {rss['VmHWM']:.0f}) with the "
                      f"model and vectors loaded{idle}; in-process write p50 {w['p50_ms']:.2f} ms", flush=True)
                shutil.rmtree(d, ignore_errors=True)
            if not args.skip_hook:
                print(f"[{name}] {hook_line(tree, args.runs)}", flush=True)
            print(f"[{name}] eval: {eval_summary(tree)}", flush=True)
        print(f"load average at the end: {load_average()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
