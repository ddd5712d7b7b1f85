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
* MCP write p50 (words only) at 1k and each size, and spawn -> first write acknowledged;
* embedding records/s one record a call beside one call of 512 (sorted by length inside);
* reindex: at 1k with the model (twice: the second finds the vectors kept, where the tree keeps them);
  at each size words only, and (this tree) with every text's vector kept;
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
elif what == "reindex":
    # argv[3]: "words" (RETAINED_EMBED=off), "twice" (reindex, then the figure is the second one), or
    # "kept" (random vectors put in the kept file for every text first, where the tree has one)
    how = sys.argv[3]
    if how == "words":
        os.environ["RETAINED_EMBED"] = "off"
    with Store(d) as s:
        if how == "kept":
            import numpy as np
            from retained.embed import LOCAL_DIM, LOCAL_KEY
            from retained.index.kept import text_hash
            texts = list(dict.fromkeys(json.loads(line)["text"] for line in open(d / "log.jsonl", encoding="utf-8")))
            mat = np.random.default_rng(3).standard_normal((len(texts), LOCAL_DIM)).astype(np.float32)
            mat /= np.linalg.norm(mat, axis=1, keepdims=True)
            s.index.kept.put(LOCAL_KEY, [(text_hash(t), LOCAL_DIM, mat[i].astype(np.float16).tobytes())
                                         for i, t in enumerate(texts)])
        first = None
        if how == "twice":
            t = time.perf_counter(); first = s.reindex(); first["seconds"] = time.perf_counter() - t
        t = time.perf_counter(); r = s.reindex(); r["seconds"] = time.perf_counter() - t
    print(json.dumps({"first": first, "last": r}))
elif what == "embedrate":
    # records/s of the tree's local embedder: one record a call, and the store's records in one call
    from retained.embed import embedder
    texts = [json.loads(line)["text"] for line in open(d / "log.jsonl", encoding="utf-8")][: int(sys.argv[3])]
    e = embedder()
    e.embed(["warm up"])
    t = time.perf_counter()
    for x in texts[:100]:
        e.embed([x])
    single = 100 / (time.perf_counter() - t)
    t = time.perf_counter(); e.embed(texts); batched = len(texts) / (time.perf_counter() - t)
    print(json.dumps({"single": single, "batched": batched}))
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


def mcp_writes(tree: Path, store: Path, runs: int, embed: str = "off") -> dict[str, float]:
    """Seconds from spawning `retained serve` to its first write's receipt, then, once the SDK serves, the
    p50 of `runs` more memory_write calls (MCP, incl. the ack), words only unless `embed`."""
    from store_bench import sentence

    from tests.mcp_wire import WireServer

    rng = random.Random(7)
    env = {"RETAINED_DIR": str(store), "RETAINED_EMBED": embed, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    srv = WireServer(env=env, cwd=str(store))
    try:
        srv.initialize()
        reply = srv.call("w0", "memory_write", {"text": "first write " + sentence(rng), "scope": "/p/a"})
        first = time.perf_counter() - t0
        assert "result" in reply and not reply["result"].get("isError"), reply
        assert "error" in srv.until_sdk()  # the p50 is of a session past its start: the SDK is up
        ts = []
        for i in range(runs):
            t = time.perf_counter()
            reply = srv.call(f"w{i + 1}", "memory_write", {"text": sentence(rng) + f" {rng.random()}", "scope": "/p/a"})
            ts.append(time.perf_counter() - t)
            assert "result" in reply, reply
        return {"first_s": first, "p50_ms": statistics.median(ts) * 1000}
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


def layout(tree: Path, base: Path, tag: str) -> Path:
    """A copy of `tree` in the installed layout (installers/, hooks/, templates/ inside retained/, as
    pyproject.toml maps them), so that PYTHONPATH alone selects the tree: with the source layout,
    `retained.installers` would be found through whatever editable install the interpreter has."""
    dest = base / f"tree-{tag}"
    skip = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.pyc", ".pytest_cache")
    for part in ("retained", "bench", "tests"):
        if (tree / part).is_dir():
            shutil.copytree(tree / part, dest / part, ignore=skip)
    for part in ("installers", "hooks", "templates"):
        if (tree / part).is_dir() and not (dest / "retained" / part).exists():
            shutil.copytree(tree / part, dest / "retained" / part, ignore=skip)
    # Bytecode, as an install has it: without it (PYTHONDONTWRITEBYTECODE, an editable checkout) every
    # fresh process compiles retained's modules again, ~0.2 s idle and 0.6 s on a loaded machine.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest / "retained")], check=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the baseline (e.g. main)")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip-hook", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    base = Path(tempfile.mkdtemp(prefix="retained-i18-"))
    trees = {"this tree": layout(ROOT, base, "this"), "baseline": layout(args.baseline.resolve(), base, "baseline")}
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores); python -c pass p50 "
          f"{python_pass(args.runs):.1f} ms; append+fsync+read-back floor p50 {fsync_floor(base, 200):.2f} ms")
    try:
        for name, tree in trees.items():
            small = store_for(base, tree, 1000, name.replace(" ", "-"))
            s = child(tree, small, "search", str(args.runs * 3))
            w = child(tree, small, "write", str(args.runs * 3), "1")
            m = mcp_writes(tree, small, args.runs * 3)
            spawn = mcp_writes(tree, small, 1, embed="local")
            print(f"[{name}] 1k records: search p50 {s['p50_ms']:.1f} ms with semantic {s['semantic']}; "
                  f"in-process write p50 {w['p50_ms']:.2f} ms; MCP write p50 {m['p50_ms']:.2f} ms; spawn -> first write "
                  f"acknowledged {spawn['first_s']:.2f} s (semantic on), {m['first_s']:.2f} s (off); "
                  f"CLI cold search p50 {cli_cold(tree, small, args.runs):.0f} ms", flush=True)
            rate = child(tree, small, "embedrate", "512")
            r = child(tree, small, "reindex", "twice")
            print(f"[{name}] 1k records: embedding {rate['single']:.0f} records/s one at a time, {rate['batched']:.0f} "
                  f"records/s as one call (sorted by length); reindex with the model: first {r['first']['seconds']:.1f} s "
                  f"({r['first'].get('embed_per_second')} records/s), again {r['last']['seconds']:.2f} s "
                  f"(model embedded {r['last'].get('model_embedded', r['last'].get('embedded'))} of "
                  f"{r['last'].get('embedded')})", flush=True)
            for n in sizes:
                d = store_for(base, tree, n, name.replace(" ", "-"))
                rss = server_rss(tree, d, idle_s=2 if name == "this tree" else None)
                w = child(tree, d, "write", str(args.runs * 3), "2")
                m = mcp_writes(tree, d, args.runs * 3)
                idle = f", {rss['VmRSS idle']:.0f} MB after the model was dropped for idleness" if "VmRSS idle" in rss else ""
                print(f"[{name}] {n} records: `retained serve` RSS {rss['VmRSS']:.0f} MB (peak {rss['VmHWM']:.0f}) with the "
                      f"model and vectors loaded{idle}; in-process write p50 {w['p50_ms']:.2f} ms; MCP write p50 "
                      f"{m['p50_ms']:.2f} ms", flush=True)
                words = child(tree, d, "reindex", "words")["last"]
                line = f"[{name}] {n} records: reindex words only {words['seconds']:.1f} s"
                if name == "this tree":
                    kept = child(tree, d, "reindex", "kept")["last"]
                    line += (f"; reindex with every text's vector kept {kept['seconds']:.1f} s (model embedded "
                             f"{kept.get('model_embedded')}, reused {kept.get('vectors_reused')})")
                print(line, flush=True)
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
