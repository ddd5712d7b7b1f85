"""Install + uninstall of every host, doctor of every host, and the session-start hook at 100k records.

    python bench/wiring_bench.py [--runs 15] [--baseline-rev REV]... [--baseline-python PATH]

Issue 8 targets: install and uninstall of every host together under 1 s wall time; doctor of every
host under 5 s; hook p50 at 100k records within 10% of the version before. Each figure is printed
beside a same-run baseline: `python -c pass` for the process floor, and each --baseline-rev (a commit
of this repository, run from a `git archive` of it with this interpreter) measured in the same loop,
interleaved, on its own sandbox and the same 100k store. --baseline-python runs an older checkout's
own interpreter instead, for the hook only.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from hook_bench import project_store  # noqa: E402

from retained.installers.hosts import hosts  # noqa: E402


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


def baseline_tree(rev: str, base: Path) -> Path:
    """An importable copy of retained as it was at `rev`, in the package layout pyproject.toml maps."""
    src, pkg = base / f"src-{rev}", base / f"pkg-{rev}"
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src)
    shutil.copytree(src / "retained", pkg / "retained")
    for folder in ("installers", "hooks", "templates"):
        if (src / folder).is_dir():
            shutil.copytree(src / folder, pkg / "retained" / folder)
    probe = subprocess.run([sys.executable, "-c", "import retained.installers; print(retained.installers.__file__)"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(pkg)), check=True)
    if not probe.stdout.startswith(str(pkg)):  # an installed copy would shadow the baseline
        raise SystemExit(f"baseline {rev} is not the code that runs: {probe.stdout.strip()}")
    return pkg


def same_hosts(version: tuple[str, list[str], dict[str, str]]) -> bool:
    """Whether a version knows this version's hosts (an older one is then measured for the hook only)."""
    name, cli, extra = version
    probe = subprocess.run([cli[0], "-c", "import retained.installers.hosts as h; print(h.__file__, *h.names())"],
                           capture_output=True, text=True, env=dict(os.environ, **extra))
    where, *names = probe.stdout.split() or [""]
    if names != list(hosts()) or not where.startswith(extra.get("PYTHONPATH", "")):  # not the tree's own
        print(f"{name}: hosts {probe.stdout.strip() or 'unknown'}; measured for the hook only")
        return False
    return True


def compiled(folders: list[Path]) -> None:
    """Bytecode for every module first, as `pip install` leaves it: with PYTHONDONTWRITEBYTECODE set
    (some shells and CI images set it) each process would compile every module it imports again."""
    import compileall

    for folder in folders:
        compileall.compile_dir(str(folder), quiet=1)


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:.0f} ms"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--baseline-rev", action="append", default=[], metavar="REV",
                    help="a commit to measure beside this version (repeatable)")
    ap.add_argument("--baseline-python", help="interpreter of an older retained checkout, for the hook baseline")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="retained-wiring-bench-"))
    project = base / "proj"
    compiled([ROOT / d for d in ("retained", "installers", "hooks", "templates")])
    (project / ".git").mkdir(parents=True)
    floor = statistics.median(timed([sys.executable, "-c", "pass"], os.environ.copy(), base) for _ in range(args.runs))
    print(f"python -c pass: {floor * 1000:.0f} ms (same run); every version's bytecode compiled first, as pip leaves it")
    # (name, command, extra environment) per version; the first is this one
    versions: list[tuple[str, list[str], dict[str, str]]] = [("this version", [sys.executable, "-m", "retained"], {})]
    for rev in args.baseline_rev:
        short = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True,
                               text=True, check=True).stdout.strip()
        tree = baseline_tree(rev, base)
        compiled([tree])
        versions.append((f"baseline {short}", [sys.executable, "-m", "retained"], {"PYTHONPATH": str(tree)}))
    if args.baseline_python:
        versions.append(("baseline python", [args.baseline_python, "-m", "retained"], {}))
    every = sum((["--host", h] for h in hosts()), [])

    wiring = [v for v in versions if v[0] != "baseline python" and same_hosts(v)]
    installs: dict[str, list[float]] = {v[0]: [] for v in wiring}
    uninstalls: dict[str, list[float]] = {v[0]: [] for v in wiring}
    doctors: dict[str, list[float]] = {v[0]: [] for v in wiring}
    sandboxes = {name: {**sandbox(base / f"sandbox-{i}"), **extra} for i, (name, _, extra) in enumerate(wiring)}
    for _ in range(max(3, args.runs // 3)):  # interleaved: the versions share whatever load the machine has
        for name, cli, _ in wiring:
            env = sandboxes[name]
            installs[name].append(timed(cli + ["install", "--yes", *every], env, project))
            doctors[name].append(timed(cli + ["doctor", *every], env, project))
            uninstalls[name].append(timed(cli + ["uninstall", "--yes", *every], env, project))
    for name, _, _ in wiring:
        both = [i + u for i, u in zip(installs[name], uninstalls[name], strict=False)]
        print(f"install + uninstall of all {len(hosts())} hosts, {name}: {median_ms(both)} median "
              f"(install {median_ms(installs[name])}, uninstall {median_ms(uninstalls[name])}; "
              f"target < 1000 ms; floor 2 x {floor * 1000:.0f} ms)")
    for name, _, _ in wiring:
        print(f"doctor of all {len(hosts())} hosts, {name}: {median_ms(doctors[name])} median, "
              f"max {max(doctors[name]) * 1000:.0f} ms (target < 5000 ms)")

    n = 100_000
    store = project_store(base / "store-100k", n, project)
    results: dict[str, list[float]] = {name: [] for name, _, _ in versions}
    for i in range(args.runs):  # interleaved, a new session each run (the duplicate guard never short-cuts)
        for name, cli, extra in versions:
            hook_env = dict(os.environ, RETAINED_DIR=str(store), CLAUDECODE="1", **extra)
            payload = json.dumps({"session_id": f"bench-{name}-{i}", "cwd": str(project), "source": "startup",
                                  "hook_event_name": "SessionStart"})
            results[name].append(timed(cli + ["hook", "session-start"], hook_env, project, payload))
    this = statistics.median(results["this version"])
    for name, times in results.items():
        ratio = "" if name == "this version" else f"; this/baseline {this / statistics.median(times):.2f} (target <= 1.10)"
        print(f"hook session-start at {n} records, {name}: p50 {median_ms(times)}{ratio}")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
