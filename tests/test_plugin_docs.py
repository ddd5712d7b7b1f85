"""Issue 30, items 4 and 6: renamed tools still work, and the README starts where people start.

A plugin's tools reach the model under the host's names for plugin tools (Claude Code:
`mcp__plugin_retained_retained__memory_write`); everything of retained's that names its tools must work
with those names: the stop hook's notion of a session that saved nothing, the instructions and the
hooks' texts. The README's one-click links must decode to the very server entry `retained install`
writes, and its install section must name the host commands the manifests answer to."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from retained.hook import PRE_COMPACT_ASK, STOP_REASON
from retained.installers.hosts.cursor import install_link as cursor_link
from retained.installers.hosts.vscode import install_link as vscode_link
from retained.instructions import GUIDANCE
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The name each host gives retained's memory_write when retained is its plugin or extension.
PLUGIN_NAMES = {"claude": "mcp__plugin_retained_retained__{}", "gemini": "mcp_retained_{}", "codex": "{}"}


def _stop(project: Path, transcript: Path, sid: str) -> str:
    payload = {"session_id": sid, "transcript_path": str(transcript), "cwd": str(project), "hook_event_name": "Stop",
               "stop_hook_active": False}
    return run_cli("hook", "stop", input=json.dumps(payload),
                   env={"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project)}).stdout


def _turn(name: str, args: dict) -> str:
    return json.dumps({"type": "assistant", "timestamp": "2026-12-05T10:00:00Z", "message": {"content": [
        {"type": "tool_use", "id": f"t-{name}", "name": name, "input": args}]}}) + "\n"


@pytest.mark.parametrize("tool", ["memory_write", "memory_checkpoint"])
def test_a_session_that_saved_through_the_plugins_tool_names_is_not_asked_to_save(tmp_path, project, tool):
    worked = _turn("Bash", {"command": "make"})
    saved = tmp_path / "saved.jsonl"
    saved.write_text(worked + _turn(PLUGIN_NAMES["claude"].format(tool), {"text": "x"}))
    assert _stop(project, saved, f"renamed-{tool}") == ""
    # The same work, nothing saved, in a transcript that names the tools as a host copies them in (the
    # deferred tool list and the server's instructions, every session): asked.
    listed = json.dumps({"type": "attachment", "attachment": {"type": "deferred_tools_record", "entries": [
        {"name": PLUGIN_NAMES["claude"].format(t), "description": "..."} for t in ("memory_write", "memory_checkpoint")]}})
    told = json.dumps({"type": "attachment", "attachment": {"type": "mcp_instructions_delta", "addedBlocks": [GUIDANCE]}})
    unsaved = tmp_path / "unsaved.jsonl"
    unsaved.write_text(worked + listed + "\n" + told + "\n")
    assert STOP_REASON[:40] in _stop(project, unsaved, f"unsaved-{tool}")


def test_every_text_that_names_a_tool_names_it_as_every_host_can_call_it():
    """The model reads bare tool names (memory_checkpoint) in the instructions and the hooks' texts: each
    is the tail of the name every host gives it, plugin or not; a host-specific prefix would be wrong
    somewhere."""
    for text in (GUIDANCE, STOP_REASON, PRE_COMPACT_ASK):
        named = set(re.findall(r"\b(?:mcp_\w+?_)?memory_[a-z]+\b", text))
        assert named and all(n.startswith("memory_") for n in named), named


def test_one_click_links_decode_to_the_server_entry_retained_install_writes(tmp_path, project):
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""), "RETAINED_DIR": ""}
    proc = run_cli("install", "--yes", "--scope", "project", "--host", "cursor", "--host", "vscode", "--no-hooks",
                   env=env, cwd=str(project))
    assert proc.returncode == 0, proc.stderr
    cursor = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["retained"]
    vscode = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]["retained"]
    links = dict(re.findall(r"^- (Cursor|VS Code): `([^`]+)`$", README, re.M))
    assert links == {"Cursor": cursor_link(), "VS Code": vscode_link()}
    config = re.search(r"[?&]config=([^&]+)", links["Cursor"]).group(1)
    assert json.loads(base64.b64decode(config)) == cursor
    decoded = json.loads(unquote(links["VS Code"].split("?", 1)[1]))
    assert decoded.pop("name") == "retained" and decoded == vscode


def test_the_readme_starts_with_each_hosts_own_install_commands():
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    plugin = f"{market['plugins'][0]['name']}@{market['name']}"
    codex_market = json.loads((ROOT / ".agents" / "plugins" / "marketplace.json").read_text())
    codex_plugin = f"{codex_market['plugins'][0]['name']}@{codex_market['name']}"
    extension = json.loads((ROOT / "gemini-extension.json").read_text())["name"]
    top = README[:README.index("\n## Commands")]
    order = [f"claude plugin install {plugin}", f"codex plugin add {codex_plugin}",
             "gemini extensions install ", "cursor://", "vscode:mcp/install", "### Everything else: `retained install`"]
    at = [top.find(s) for s in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at, strict=True))
    for update, remove in ((f"claude plugin update {plugin}", f"claude plugin uninstall {plugin}"),
                           (f"codex plugin add {codex_plugin}", f"codex plugin remove {codex_plugin}"),
                           (f"gemini extensions update {extension}", f"gemini extensions uninstall {extension}")):
        assert update in top and remove in top


def test_agent_plugin_manifests_keep_the_specs_rules():
    """Agent Plugins 1.0.0 (read by Codex, Cursor and Copilot CLI): a root plugin.json and mcp.json, each
    naming its schema; a stdio server's command is one token and its paths start at ${PLUGIN_ROOT}."""
    manifest = json.loads((ROOT / "plugin.json").read_text())
    assert manifest["$schema"] == "https://open-plugins.com/schemas/1.0.0/plugin.schema.json"
    assert re.fullmatch(r"(?!.*(?:--|\.\.))[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", manifest["name"])
    allowed = {"$schema", "name", "version", "description", "author", "homepage", "repository", "license", "keywords",
               "extensions", "displayName"}
    assert set(manifest) <= allowed
    mcp = json.loads((ROOT / "mcp.json").read_text())
    assert mcp["$schema"] == "https://open-plugins.com/schemas/1.0.0/mcp.schema.json" and set(mcp) == {"$schema",
                                                                                                    "mcpServers"}
    server = mcp["mcpServers"]["retained"]
    assert set(server) <= {"type", "command", "args", "env", "cwd"} and server["type"] == "stdio"
    assert " " not in server["command"] and server["args"][0].startswith("${PLUGIN_ROOT}/")
    assert (ROOT / server["args"][0].replace("${PLUGIN_ROOT}/", "")).is_file()
