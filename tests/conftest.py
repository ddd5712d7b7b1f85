"""Every test runs with HOME, XDG dirs, host config dirs and the store pointed into tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# At the end of the session: no child process of the test run may still be running (issue 17 item 19).
from tests.helpers.leaks import pytest_sessionfinish  # noqa: F401 - a pytest hook, found by its name

# The team fixtures (remote_dir, machines) for every test file that asks for them by name.
pytest_plugins = ["tests.helpers.team"]

# Captured before any test isolates HOME: where .ci/run (or a developer) keeps the npm-installed tools.
NPM_CACHE = Path(os.environ.get("RETAINED_NPM_CACHE") or Path.home() / ".cache" / "retained-ci" / "npm")


def npm_bin(name: str) -> str | None:
    """Path of an npm-installed executable in the shared cache, or None when it is not installed."""
    import shutil

    path = NPM_CACHE / "node_modules" / ".bin" / name
    return str(path) if path.exists() and shutil.which("node") else None


def require_npm_bin(name: str, title: str) -> str:
    """The npm-installed executable, or skip the test saying why (.ci/run installs them all)."""
    import pytest

    path = npm_bin(name)
    if path is None:
        pytest.skip(f"{title} not installed (npm unavailable?); .ci/run installs it into the npm cache")
    return path


def host_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a real host CLI: this one, less any host's or model API's own variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "ANTHROPIC", "OPENAI"))}
    # Claude Code's tool deferral on, as users get it since 2.1.332 (a custom ANTHROPIC_BASE_URL
    # turned it off in 2.1.197): a test that finds retained's tools inline cannot pass by accident.
    env.update(HOME=str(home), ENABLE_TOOL_SEARCH="true", **extra)
    return env


ISOLATED_VARS = (
    "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA",
    "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "RETAINED_DIR",
)
# Variables an agent session (or a developer's shell) may have set that change what retained or a
# host does: host detection (GEMINI_*, CODEX_MANAGED_BY_NPM, CLAUDECODE, ...), read-only mode, the
# early initialize reply, tool deferral. Every one is cleared, by prefix, so that running the suite
# inside Claude Code, Codex or Gemini CLI tests the same thing as running it in a bare shell.
LEAKY_PREFIXES = ("RETAINED_", "CLAUDE", "CODEX_", "GEMINI_", "CURSOR_", "VSCODE_", "ANTHROPIC_", "OPENAI_",
                  "GOOGLE_GEMINI", "GOOGLE_GENAI", "MCP_")
LEAKY_VARS = ("ENABLE_TOOL_SEARCH", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "DISABLE_AUTOUPDATER")
KEPT_VARS = ("RETAINED_NPM_CACHE", "RETAINED_UPDATE_SNAPSHOT")  # test tooling, not settings of retained


_MODEL_CACHE: list[Path] = []


def _model_cache(factory: pytest.TempPathFactory) -> Path:
    if not _MODEL_CACHE:
        _MODEL_CACHE.append(factory.mktemp("model-cache"))
    return _MODEL_CACHE[0]


@pytest.fixture(autouse=True)
def isolate_home(tmp_path, tmp_path_factory, monkeypatch):
    yield isolate(monkeypatch, tmp_path, tmp_path_factory)


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME, the XDG dirs, host config dirs and the store under `tmp_path`; settings that leak from the
    shell cleared. Also for a module's shared server, under `pytest.MonkeyPatch.context()`."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ISOLATED_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in list(os.environ):
        if (var.startswith(LEAKY_PREFIXES) or var in LEAKY_VARS) and var not in KEPT_VARS:
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("RETAINED_DIR", str(tmp_path / "store"))
    # What retained keeps to load the model sooner (the rewritten model every process maps, ~23 MB, and
    # its stamp) is made once per run, not once per test: a test of that cache sets its own RETAINED_CACHE_DIR.
    monkeypatch.setenv("RETAINED_CACHE_DIR", str(_model_cache(tmp_path_factory)))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # not a git repository: default scopes are global / every scope
    return home


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder as hosts see one: a git root (no remote, so its scope is its resolved path)."""
    repo = tmp_path / "proj"
    (repo / ".git").mkdir(parents=True)
    return repo.resolve()


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_dir):
    from retained.store import Store

    s = Store(store_dir)
    yield s
    s.close()


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None, cwd: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The console entry point: in this process unless the call needs one of its own (its own
    environment or folder, or serve/ui/hook), then in a fresh interpreter."""
    from tests.helpers.hostile import cli_here, needs_its_own_process

    if not needs_its_own_process(args, env, cwd):
        return cli_here(*args, input=input, settings={})
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "retained", *args], input=input, capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout)


def cli_json(*args: str, **kw) -> dict:
    proc = run_cli(*args, "--json", **kw)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def log_lines(store_dir: Path) -> list[bytes]:
    return (store_dir / "log.jsonl").read_bytes().splitlines(keepends=True)


@pytest.fixture
def model_texts(monkeypatch):
    """Every text the local model is asked to embed, in order."""
    from retained import embed  # here: most tests never load the model's module

    seen: list[str] = []
    real = embed.LocalEmbedder.embed

    def counting(self, texts):
        seen.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(embed.LocalEmbedder, "embed", counting)
    return seen
