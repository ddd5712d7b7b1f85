"""What the plugin launcher (hooks/launch.sh) adds to a hook once retained is ready, beside the same hook
run directly, in turns in the same run; and, with --first-run, the first run's build of the private environment.

    python bench/plugin_bench.py [--runs 40] [--first-run]

Target (issue 30): the launcher adds <= 20 ms (p50) to a hook when retained is ready. Both ways of being
ready are measured: a `retained` of the plugin's version on PATH (noted by an earlier run), and the
private environment in the data folder (here: a folder whose bin/retained is this run's own retained).
--first-run makes a real private environment from this checkout in a fresh HOME (dependencies from the
package index) and prints how long it took.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retained import __version__  # noqa: E402
from retained.store import Store  # noqa: E402

RETAINED = Path(sys.executable).parent / "retained"


def p50s_ms(cmds: list[tuple[list[str], dict[str, str]]], runs: int, stdin: str, cwd: Path) -> list[tuple[float, str]]:
    """p50 of each command, run in turns (a, b, c, a, b, c, ...) so that a busy moment of the machine falls
    on all of them alike."""
    times: list[list[float]] = [[] for _ in cmds]
    outs = [""] * len(cmds)
    for _ in range(runs):
        for i, (cmd, env) in enumerate(cmds):
            t = time.perf_counter()
            proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, check=True)
            times[i].append(time.perf_counter() - t)
            outs[i] = proc.stdout
    return [(statistics.median(ts) * 1000, out) for ts, out in zip(times, outs, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--first-run", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project = base / "proj"
        (project / ".git").mkdir(parents=True)
        store = base / "store"
        with Store(store) as s:
            for i in range(20):
                s.write(f"bench decision {i}: the build uses ninja", scope=str(project))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "PLUGIN_", "RETAINED_"))}
        # Read-only (as doctor's trial run): no session note, so every run gives the whole brief.
        env.update(HOME=str(base), RETAINED_DIR=str(store), CLAUDECODE="1", CLAUDE_PROJECT_DIR=str(project),
                   RETAINED_READ_ONLY="1", PATH=f"{RETAINED.parent}:/usr/bin:/bin")
        hook_input = json.dumps({"session_id": "bench", "transcript_path": "", "cwd": str(project),
                                 "hook_event_name": "SessionStart", "source": "startup"})
        launcher = ["sh", str(ROOT / "hooks" / "launch.sh"), "hook", "session-start"]
        direct = [str(RETAINED), "hook", "session-start"]
        # warm the OS caches and the launcher's note of the retained on PATH
        on_path = dict(env, CLAUDE_PLUGIN_DATA=str(base / "data-on-path"))
        subprocess.run(launcher, input=hook_input, env=on_path, cwd=project, capture_output=True, text=True, check=True)
        assert (base / "data-on-path" / f"on-path-{__version__}").is_file(), "the launcher did not take PATH's retained"
        private = base / "data-env"
        (private / f"env-{__version__}" / "bin").mkdir(parents=True)
        os.symlink(RETAINED, private / f"env-{__version__}" / "bin" / "retained")
        (private / f"env-{__version__}" / "ready").write_text(__version__)
        in_env = dict(env, CLAUDE_PLUGIN_DATA=str(private), PATH="/usr/bin:/bin")
        labels = ["direct: retained hook session-start", "launcher, retained on PATH", "launcher, private environment"]
        measured = p50s_ms([(direct, env), (launcher, on_path), (launcher, in_env)], args.runs, hook_input, project)
        print(f"session-start hook, {args.runs} runs each in turns, p50 (store of 20 records, brief of all)")
        for label, (ms, out) in zip(labels, measured, strict=True):
            extra = "" if label.startswith("direct") else f"   +{ms - measured[0][0]:.1f} ms over direct"
            print(f"  {label:40s} {ms:7.1f} ms{extra}   ({len(out)} bytes out)")
        assert measured[0][1] and all(out == measured[0][1] for _, out in measured), "the launcher changed the answer"
        # The launcher alone: its private environment's retained is `true`, so only the launcher's own work
        # (finding its root, version and data folder, then exec) is left to time.
        bare = base / "data-true"
        (bare / f"env-{__version__}" / "bin").mkdir(parents=True)
        os.symlink(shutil.which("true") or "/bin/true", bare / f"env-{__version__}" / "bin" / "retained")
        (bare / f"env-{__version__}" / "ready").write_text(__version__)
        alone = p50s_ms([([shutil.which("true") or "/bin/true"], env), (launcher, dict(in_env, CLAUDE_PLUGIN_DATA=str(bare)))],
                        args.runs, hook_input, project)
        print(f"  {'the launcher alone (exec of `true`)':40s} {alone[1][0]:7.1f} ms   "
              f"+{alone[1][0] - alone[0][0]:.1f} ms over `true` itself ({alone[0][0]:.1f} ms)")
        if args.first_run:
            home = base / "fresh-home"
            home.mkdir()
            fresh = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": env.get("LANG", "C.UTF-8")}
            t = time.perf_counter()
            proc = subprocess.run(["sh", str(ROOT / "hooks" / "launch.sh"), "--version"], env=fresh, cwd=project,
                                  capture_output=True, text=True)
            took = time.perf_counter() - t
            print(f"first run in a HOME with no retained: {took:.1f} s to make the private environment and run "
                  f"`retained --version` -> {proc.stdout.strip()!r}")
            for line in proc.stderr.splitlines():
                if "made the private environment" in line:
                    print("  launcher said:", line)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
