"""`retained search` at a terminal as a fresh process, with no server running: by meaning (the default,
loading the model here) and `--words`, beside `python -c pass` and a same-run baseline checkout's
`search --meaning` (the same work before meaning was the default).

    python bench/cli_search_bench.py [--records 1000] [--runs 7] [--baseline /path/to/checkout]

Target (issue 32): by meaning <= 700 ms cold. The store's records are embedded before timing (a
server or an earlier search does that); the load average is printed, as a busy machine moves every
figure.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from semantic_bench import bulk  # noqa: E402

QUERY = "which region do the servers run in"


def timed(cmd: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", help="a checkout of the baseline commit (its retained is run from there)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = Path(tmp) / "store"
        store_dir.mkdir()
        bulk(store_dir, args.records, random.Random(7))
        from retained.store import Store

        with Store(store_dir) as store:
            store.embed_all()
        env = {**os.environ, "RETAINED_DIR": str(store_dir), "RETAINED_CACHE_DIR": str(Path(tmp) / "cache")}
        run = [sys.executable, "-m", "retained", "search", "--scope", "*", QUERY]
        subprocess.run(run, env=env, capture_output=True, check=False)  # the kept int8 model is made once
        rows = [("python -c pass", timed([sys.executable, "-c", "pass"], env, args.runs)),
                ("search --words", timed([*run[:4], "--words", *run[4:]], env, args.runs)),
                ("search (by meaning, default)", timed(run, env, args.runs))]
        if args.baseline:  # its own copy of the store, embedded by the baseline (its model key may differ)
            import shutil

            base_dir = Path(tmp) / "base-store"
            shutil.copytree(store_dir, base_dir)
            benv = {**env, "PYTHONPATH": args.baseline, "RETAINED_DIR": str(base_dir)}
            subprocess.run([sys.executable, "-c", "import os, pathlib; from retained.store import Store; "
                            "s = Store(pathlib.Path(os.environ['RETAINED_DIR'])); s.embed_all(); s.close()"],
                           env=benv, check=True, capture_output=True)
            rows.append(("baseline search --meaning", timed([*run[:4], "--meaning", *run[4:]], benv, args.runs)))
            rows.append(("baseline search (words)", timed(run, benv, args.runs)))
    print(f"retained search, fresh process, {args.records} records embedded, median of {args.runs} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for name, ms in rows:
        print(f"  {name:<32} {ms:7.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
