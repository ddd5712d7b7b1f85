"""Install + uninstall of every host, doctor of every host, and the session-start hook at 100k records.

    python bench/wiring_bench.py [--runs 15] [--baseline-python PATH]

Issue 8 targets: install and uninstall of every host together under 1 s wall time; doctor of every
host under 5 s; hook p50 at 100k records within 10% of the version before the host registry. Each
figure is printed beside a same-run baseline: `python -c pass` for the process floor, and, with
--baseline-python (the interpreter of an older checkout), that version's hook on the same store.
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

from retained.installers.hosts import hosts  # noqa: E402
from retained.store import Store  # noqa: E402


def sandbox(base: Path) -> dict[str, str]:
    home = base / "home"
    for d in (".claude", ".codex", ".cursor", ".gemini", ".config/Code/User", ".config/opencode"):
        (home / d).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "GEMINI", "XDG", "RETAINED"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               RETAINED_DIR=str(base / "store"))
    return env


def timed(cmd: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> float:
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--baseline-python", help="interpreter of an older retained checkout, for the hook baseline")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-wiring-bench-"))
    project = base / "proj"
    (project / ".git").mkdir(parents=True)
    cli = [sys.executable, "-m", "retained"]
    every = sum((["--host", h] for h in hosts()), [])
    floor = statistics.median(timed([sys.executable, "-c", "pass"], os.environ.copy(), base) for _ in range(args.runs))
    print(f"python -c pass: {floor * 1000:.0f} ms (same run)")

    env = sandbox(base)
    installs, uninstalls, doctors = [], [], []
    for _ in range(max(3, args.runs // 3)):
        installs.append(timed(cli + ["install", "--yes", *every], env, project))
        doctors.append(timed(cli + ["doctor", *every], env, project))
        uninstalls.append(timed(cli + ["uninstall", "--yes", *every], env, project))
    both = statistics.median(i + u for i, u in zip(installs, uninstalls))
    print(f"install + uninstall of all {len(hosts())} hosts: {both * 1000:.0f} ms median "
          f"(install {statistics.median(installs) * 1000:.0f} ms, uninstall {statistics.median(uninstalls) * 1000:.0f} ms; "
          f"target < 1000 ms; floor 2 x {floor * 1000:.0f} ms)")
    print(f"doctor of all {len(hosts())} hosts: {statistics.median(doctors) * 1000:.0f} ms median (target < 5000 ms)")

    n = 100_000
    store = base / "store-100k"
    store.mkdir(mode=0o700)
    bulk_log(store, n, random.Random(n))
    with Store(store) as s:
        s.reindex()
        for i in range(5):
            s.write(f"project note {i}", scope=str(project))
    versions = [("this version", sys.executable)]
    if args.baseline_python:
        versions.append(("baseline", args.baseline_python))
    hook_env = dict(os.environ, RETAINED_DIR=str(store), CLAUDECODE="1")
    results: dict[str, list[float]] = {name: [] for name, _ in versions}
    for i in range(args.runs):  # interleaved, a new session each run (the duplicate guard never short-cuts)
        for name, py in versions:
            payload = json.dumps({"session_id": f"bench-{name}-{i}", "cwd": str(project), "source": "startup",
                                  "hook_event_name": "SessionStart"})
            results[name].append(timed([py, "-m", "retained", "hook", "session-start"], hook_env, project, payload))
    for name, times in results.items():
        print(f"hook session-start at {n} records, {name}: p50 {statistics.median(times) * 1000:.0f} ms")
    if args.baseline_python:
        ratio = statistics.median(results["this version"]) / statistics.median(results["baseline"])
        print(f"hook p50 ratio this/baseline: {ratio:.2f} (target <= 1.10)")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
