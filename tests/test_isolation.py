"""The suite tests the same thing inside an agent session as in a bare shell (review item 11)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What Claude Code, Codex and Gemini CLI put into the environment of the commands they run, plus
# retained's own switches: any of them left set would change host detection or the store's mode.
AGENT_ENV = {
    "RETAINED_READ_ONLY": "1", "RETAINED_EARLY_INITIALIZE": "off", "RETAINED_STOP_HOOK": "off",
    "RETAINED_REDACT": "off", "RETAINED_RECALL": "off", "RETAINED_EMBED": "off",
    "GEMINI_SESSION_ID": "g1", "GEMINI_PROJECT_DIR": "/elsewhere", "GEMINI_CLI": "1",
    "CODEX_MANAGED_BY_NPM": "1", "CODEX_THREAD_ID": "t1", "CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": "/elsewhere",
    "CLAUDE_CODE_SESSION_ID": "s1", "CURSOR_VERSION": "1.0", "ENABLE_TOOL_SEARCH": "false",
}


def test_no_agent_or_retained_variable_reaches_a_test(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import os\n"
        f"NAMES = {sorted(AGENT_ENV)!r}\n"
        "def test_probe():\n"
        "    assert [n for n in NAMES if n in os.environ] == []\n"
    )
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                                          "from tests.conftest import isolate_home  # noqa: F401\n")
    env = dict(os.environ, **AGENT_ENV)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
