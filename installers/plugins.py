"""retained installed from a host's own plugin surface (issue 30), seen from `retained install` and doctor.

This repository is also a Claude Code plugin, a Codex plugin and a Gemini CLI extension. A host that has
retained as its plugin must not get a second copy from `retained install` (two servers, every hook twice),
so install skips it and doctor fails on a host wired both ways. Each host records an installed plugin in
a file of its own (read here, never written):

- Claude Code: `enabledPlugins["retained@<marketplace>"]` in its settings.json (user, or the project's
  `.claude/settings.json` and `.claude/settings.local.json`);
- Codex: `[plugins."retained@<marketplace>"]` in `$CODEX_HOME/config.toml`, unless `enabled = false`;
- Gemini CLI: an extension folder `extensions/retained` with its `gemini-extension.json` under
  `$GEMINI_CLI_HOME/.gemini` (default: the home folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PLUGIN = "retained"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _claude(env: Mapping[str, str], project: Path | None) -> str | None:
    claude_dir = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else _home(env) / ".claude"
    files = [claude_dir / "settings.json"]
    if project is not None:
        files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
    for f in files:
        data = _json(f)
        enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(enabled, dict):
            for key, on in enabled.items():
                if isinstance(key, str) and key.split("@")[0] == PLUGIN and on is True:
                    return f"plugin {key} (enabledPlugins in {f})"
    return None


def _codex(env: Mapping[str, str]) -> str | None:
    codex_home = Path(env.get("CODEX_HOME") or _home(env) / ".codex")
    config = codex_home / "config.toml"
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10
        import tomlkit as tomllib  # type: ignore[no-redef,unused-ignore]
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except Exception:  # unreadable, or not TOML (tomlkit's parse errors are its own classes)
        return None
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if isinstance(plugins, dict):
        for key, entry in plugins.items():
            if isinstance(key, str) and key.split("@")[0] == PLUGIN and \
                    not (isinstance(entry, dict) and entry.get("enabled") is False):
                return f"plugin {key} ([plugins] in {config})"
    return None


def _gemini(env: Mapping[str, str]) -> str | None:
    base = Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else _home(env)
    manifest = base / ".gemini" / "extensions" / PLUGIN / "gemini-extension.json"
    data = _json(manifest)
    if isinstance(data, dict) and data.get("name") == PLUGIN:
        return f"extension {PLUGIN} ({manifest.parent})"
    return None


def installed_plugin(host: str, env: Mapping[str, str] | None = None, project: Path | None = None) -> str | None:
    """How retained is installed as `host`'s own plugin or extension (a phrase naming where), or None."""
    env = os.environ if env is None else env
    if host == "claude":
        return _claude(env, project)
    if host == "codex":
        return _codex(env)
    if host == "gemini":
        return _gemini(env)
    return None


def remove_command(host: str) -> str:
    """The host's own command that removes the plugin (the other way out of a double wiring)."""
    return {"claude": "claude plugin uninstall retained@retained",
            "codex": "codex plugin remove retained@retained",
            "gemini": "gemini extensions uninstall retained"}.get(host, "")


# -- one-click install links (Cursor, VS Code) ---------------------------------------------------------------
# The server entry `retained install --scope project` writes when `retained` is on PATH and the store is
# the default one: a link cannot carry a path of the machine it is clicked on.
LINK_ENTRY = {"type": "stdio", "command": "retained", "args": ["serve"]}


def cursor_link(entry: dict[str, object] | None = None) -> str:
    """Cursor's install link: the server entry as base64 JSON in `config`."""
    import base64

    blob = json.dumps(entry or LINK_ENTRY, separators=(",", ":")).encode("utf-8")
    return f"cursor://anysphere.cursor-deeplink/mcp/install?name={PLUGIN}&config={base64.b64encode(blob).decode()}"


def vscode_link(entry: dict[str, object] | None = None) -> str:
    """VS Code's install link: the server entry with its name, URL-encoded JSON."""
    from urllib.parse import quote

    return "vscode:mcp/install?" + quote(json.dumps({"name": PLUGIN, **(entry or LINK_ENTRY)}, separators=(",", ":")),
                                         safe="")
