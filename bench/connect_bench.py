"""How long a real Claude Code takes to connect to retained, read from its own debug log.

    python bench/connect_bench.py [--runs 5]

Claude Code connects MCP servers in the background while a session starts; a server not connected
about 1.2-2 s after start misses the session's first model request (no tools, no instructions).
Since 2.1.332 it opens with the 2026-07-28 protocol's `server/discover`, not `initialize`. This runs
`claude -p` against the fake model API (tests/fake_model.py) with retained as its only MCP server and
prints the p50 of the "Successfully connected ... in N ms" figure Claude Code logs, beside the same
run's retained with its early replies off (the SDK alone) and the reference server-memory.

Uses the Claude Code in the npm cache (`bash .ci/npm-tools.sh`; RETAINED_NPM_CACHE picks another, e.g.
the `--latest` one). Each run has its own empty HOME; nothing touches the real one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fake_model import FakeModel  # noqa: E402

CACHE = Path(os.environ.get("RETAINED_NPM_CACHE") or Path.home() / ".cache" / "retained-ci" / "npm")
CONNECTED = re.compile(r'MCP server "bench": Successfully connected .*? in (\d+)ms')


def claude_version() -> str:
    pkg = CACHE / "node_modules" / "@anthropic-ai" / "claude-code" / "package.json"
    try:
        return json.loads(pkg.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "?"


def connect_ms(claude: str, server: dict, runs: int) -> list[int]:
    out = []
    for _ in range(runs):
        home = Path(tempfile.mkdtemp(prefix="retained-connect-bench-"))
        try:
            project = home / "proj"
            (project / ".git").mkdir(parents=True)
            config = home / "mcp.json"
            config.write_text(json.dumps({"mcpServers": {"bench": server}}))
            debug = home / "debug.txt"
            with FakeModel(lambda api, body: ("text", "ok")) as fm:
                env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "ANTHROPIC_BASE_URL": fm.url,
                       "ANTHROPIC_API_KEY": "sk-ant-fake", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                       "DISABLE_AUTOUPDATER": "1", "RETAINED_DIR": str(home / "store"), "ENABLE_TOOL_SEARCH": "true"}
                subprocess.run([claude, "-p", "hi", "--mcp-config", str(config), "--strict-mcp-config",
                                "--debug-file", str(debug)], cwd=project, env=env, capture_output=True, text=True,
                               timeout=180)
            found = CONNECTED.search(debug.read_text(errors="replace")) if debug.exists() else None
            if found:
                out.append(int(found.group(1)))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    claude = CACHE / "node_modules" / ".bin" / "claude"
    if not claude.exists() or not shutil.which("node"):
        print(f"Claude Code not installed in {CACHE} (bash .ci/npm-tools.sh); nothing measured")
        return 0
    console = shutil.which("retained", path=str(Path(sys.executable).parent))
    retained = [console, "serve"] if console else [sys.executable, "-m", "retained", "serve"]
    servers = [("retained serve", {"command": retained[0], "args": retained[1:]}),
               ("retained serve, early replies off (the SDK alone)",
                {"command": retained[0], "args": retained[1:], "env": {"RETAINED_EARLY_INITIALIZE": "off"}})]
    ref = CACHE / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if ref.exists():
        servers.append(("reference server-memory (node)", {"command": shutil.which("node"), "args": [str(ref)]}))
    print(f"Claude Code {claude_version()}: start of connection to connected, p50 of {args.runs} sessions")
    for label, server in servers:
        times = connect_ms(str(claude), server, args.runs)
        if times:
            print(f"{label:<52} {statistics.median(times):>6.0f} ms   (all: {', '.join(map(str, times))})")
        else:
            print(f"{label:<52} no connection logged")
    print("a server not connected about 1.2-2 s after start misses the session's first request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
