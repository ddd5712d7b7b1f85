"""The test run starts nothing it does not stop: at the end of the session, any child process of the
test run still alive (a `retained ui` left by a fixture that skipped, a server a failed test never
closed) is named, stopped, and fails the run.

Linux only (it reads /proc); elsewhere the check is silent. conftest.py imports the hook.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def live_children(pid: int | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of each child of `pid` (default: this process) that has not exited."""
    parent = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ")".
            state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
            if int(ppid) != parent or state == "Z":  # a zombie has exited; it holds nothing
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            continue  # gone meanwhile
        found.append((int(entry.name), cmd))
    return found


def stop(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM each (by pid: only what this run started), then SIGKILL what is still there."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid in {p for p, _ in live_children()} for pid in pids):
        time.sleep(0.1)
    for pid, _cmd in live_children():
        if pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def pytest_sessionfinish(session, exitstatus) -> None:
    left = live_children()
    if not left:
        return
    lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"the test run left {len(left)} process(es) running; stopping them:\n{lines}"
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line(message, red=True)
    else:
        print(message)
    stop([pid for pid, _ in left])
    session.exitstatus = 1
