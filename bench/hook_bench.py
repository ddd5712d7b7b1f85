"""Cold `retained hook session-start` as a fresh process, next to `python -c pass` in the same run.

    python bench/hook_bench.py [--runs 30]

Targets (issue 4): p50 <= 80 ms at 100k records, and <= 60 ms + the interpreter's start at 1k.
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

from store_bench import bulk_log  # noqa: E402

from retained.store import Store  # noqa: E402


def p50_ms(cmd: list[str], runs: int, stdin: str = "", env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def project_store(d: Path, n: int, project: Path) -> Path:
    """A store of `n` records (store_bench's mix) plus five of `project`'s own, indexed. Without vectors:
    the session-start hook reads none, and embedding 100k records would take the bench many minutes."""
    d.mkdir(mode=0o700)
    bulk_log(d, n, random.Random(n))
    saved = os.environ.get("RETAINED_EMBED")
    os.environ["RETAINED_EMBED"] = "off"
    try:
        with Store(d) as s:
            s.reindex()
            for i in range(5):
                s.write(f"project note {i}", scope=str(project))
    finally:
        if saved is None:
            os.environ.pop("RETAINED_EMBED")
        else:
            os.environ["RETAINED_EMBED"] = saved
    return d


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-hook-bench-"))
    project = base / "proj"
    (project / ".git").mkdir(parents=True)
    console = shutil.which("retained", path=str(Path(sys.executable).parent))
    cmd = [console] if console else [sys.executable, "-m", "retained"]
    floor = p50_ms([sys.executable, "-c", "pass"], args.runs)
    print(f"python -c pass p50: {floor:.1f} ms   (hook command: {' '.join(Path(c).name for c in cmd)} hook session-start)")
    for n in (1000, 100_000):
        d = project_store(base / f"store-{n}", n, project)
        env = dict(os.environ, RETAINED_DIR=str(d), CLAUDECODE="1")
        results = []
        for i in range(args.runs):  # a new session each run, so the duplicate guard never short-cuts
            payload = json.dumps({"session_id": f"bench-{n}-{i}", "cwd": str(project), "source": "startup",
                                  "hook_event_name": "SessionStart"})
            results.append(p50_ms(cmd + ["hook", "session-start"], 1, payload, env))
        hook = statistics.median(results)
        print(f"{n:>7} records: hook p50 {hook:.1f} ms ({hook - floor:.1f} ms over the interpreter)")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
