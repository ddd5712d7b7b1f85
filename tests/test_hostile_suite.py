"""Issue 17 item 19: the test suite starts nothing it does not stop. A pytest run in a subprocess,
with the browser made unavailable by a plugin (fault injection), must skip without leaving the page's
server behind; and the session-end check names and stops whatever a test did leave running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "bt"), *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def _processes_mentioning(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_a_browser_test_that_skips_leaves_no_page_server_running(tmp_path):
    (tmp_path / "no_browser.py").write_text(textwrap.dedent("""
        import tests.helpers.browser as browser
        browser.find_chromium = lambda: (None, None)  # as on a machine without Chromium
    """))
    proc = _pytest(tmp_path, "-p", "no_browser", "tests/test_ui.py::test_list_is_newest_first_paged_and_counted")
    left = _processes_mentioning(str(tmp_path / "bt"))
    for pid in left:  # started by this test's run: stop them, by pid
        os.kill(pid, signal.SIGKILL)
    assert "1 skipped" in proc.stdout, proc.stdout[-2000:]
    assert "Chromium and chromedriver not installed" in proc.stdout, proc.stdout[-2000:]  # the reason, named
    assert left == [], f"left running: {left}"
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_the_session_end_check_names_and_stops_what_a_test_left_running(tmp_path):
    pidfile = tmp_path / "pid"
    (tmp_path / "leaky").mkdir()
    (tmp_path / "leaky" / "test_leak.py").write_text(textwrap.dedent(f"""
        import subprocess
        def test_starts_and_forgets():
            p = subprocess.Popen(["sleep", "300"])
            open({str(pidfile)!r}, "w").write(str(p.pid))
    """))
    proc = _pytest(tmp_path, "-p", "tests.helpers.leaks", "--rootdir", str(tmp_path / "leaky"),
                   str(tmp_path / "leaky" / "test_leak.py"))
    pid = int(pidfile.read_text())
    alive = pid in _processes_mentioning("sleep")
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert "1 passed" in proc.stdout and proc.returncode == 1, proc.stdout[-2000:]
    assert "left 1 process(es) running" in proc.stdout and "sleep 300" in proc.stdout, proc.stdout[-2000:]
    assert not alive
