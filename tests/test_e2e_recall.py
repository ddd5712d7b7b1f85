"""Recall at the prompt with real host CLIs (installed by `retained install`) against a fake model API:
a prompt that needs a stored decision carries it in the model request; an unrelated prompt carries
nothing extra. The decision is kept out of the session brief by newer records, so only the prompt
hook can bring it. Skipped, with the reason, where npm is unavailable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from retained.store import Store
from tests.conftest import host_env, require_npm_bin
from tests.fake_model import FakeModel

DECISION = "DECISION-R7: the orders service database is PostgreSQL 16, chosen for its JSONB indexes."
NEEDS_IT = "which database does the orders service use?"
UNRELATED = "write a haiku about autumn leaves"
RECALL_HEAD = "retained recalled"


def _setup(host: str, home: Path, store: Path, project: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "retained", "install", "--yes", "--host", host],
                          env=host_env(home, RETAINED_DIR=str(store)), cwd=project, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    with Store(store) as s:
        # A fact, not a decision: the brief lists decisions before notes (issue 10), facts among them.
        s.write(DECISION, kind="fact", scope=str(project))
        for i in range(80):  # newer records fill the brief, so the decision is not in it
            s.write(f"release note {i}: the footer colour and the newsletter layout were adjusted again", scope=str(project))
        s.search("warm the vectors")  # embeds everything, as a running server would have


def _texts(fm: FakeModel, api: str) -> str:
    return "\n".join(fm.text_of(b) for b in fm.conversation_requests(api))


def _run_claude(claude: str, home: Path, store: Path, project: Path, prompt: str) -> str:
    with FakeModel(lambda api, body: ("text", "ok")) as fm:
        env = host_env(home, ANTHROPIC_BASE_URL=fm.url, ANTHROPIC_API_KEY="sk-ant-fake", RETAINED_DIR=str(store),
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        proc = subprocess.run([claude, "-p", prompt], cwd=project, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _texts(fm, "anthropic")


def _run_codex(codex: str, home: Path, store: Path, project: Path, prompt: str) -> str:
    with FakeModel(lambda api, body: ("text", "ok")) as fm:
        config = home / ".codex" / "config.toml"
        base = config.read_text()
        config.write_text('model = "gpt-fake"\nmodel_provider = "fake"\n' + base
                          + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{fm.url}/v1"\n'
                            'env_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n')
        try:
            proc = subprocess.run([codex, "exec", "--skip-git-repo-check", prompt], cwd=project,
                                  env=host_env(home, RETAINED_DIR=str(store), FAKE_OPENAI_KEY="fake"),
                                  capture_output=True, text=True, timeout=240)
        finally:
            config.write_text(base)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _texts(fm, "openai")


# host: (its CLI, what to call it when it is missing, one offline turn that returns the model's request)
RUNS = {"claude": ("claude", "Claude Code CLI", _run_claude), "codex": ("codex", "Codex CLI", _run_codex)}


@pytest.mark.slow
@pytest.mark.parametrize("host", sorted(RUNS))
def test_a_prompt_that_needs_a_decision_carries_it_and_an_unrelated_one_nothing(host, isolate_home, store_dir,
                                                                                project):
    binary, what, run = RUNS[host]
    cli = require_npm_bin(binary, what)
    _setup(host, isolate_home, store_dir, project)
    needed = run(cli, isolate_home, store_dir, project, NEEDS_IT)
    assert "DECISION-R7" in needed and RECALL_HEAD in needed
    unrelated = run(cli, isolate_home, store_dir, project, UNRELATED)
    assert "DECISION-R7" not in unrelated and RECALL_HEAD not in unrelated
    assert "release note 79" in unrelated  # the brief itself still arrived
