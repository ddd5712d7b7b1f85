"""Recall at the prompt: relevant records arrive once, within budget; unrelated prompts get nothing."""

from __future__ import annotations

from retained.brief import BEGIN, END, make_brief
from retained.recall import recall
from retained.tokens import estimate_tokens

PROJECT = "/src/shop"


def _seed(store):
    ids = {}
    ids["migrate"] = store.write("Database migrations run with `make migrate`; never edit an applied migration, "
                                 "add a new one.", kind="decision", scope=PROJECT)["id"]
    ids["secrets"] = store.write("Secrets live in 1Password, vault 'shop-prod'; never commit .env files.",
                                 kind="fact", scope=PROJECT)["id"]
    ids["deploy"] = store.write("Deploys go out on Tuesdays after the release train review.",
                                kind="decision", scope=PROJECT)["id"]
    return ids


def test_recall_relevant_prompt_injects_the_record_fenced_as_data(store):
    ids = _seed(store)
    got = recall(store, "how do I run the database migrations?", project=PROJECT, shown=set())
    assert got is not None
    assert ids["migrate"] in got["ids"]
    assert got["ids"][0] == ids["migrate"]
    assert BEGIN in got["text"] and END in got["text"] and "make migrate" in got["text"]


def test_recall_unrelated_prompt_injects_nothing(store):
    _seed(store)
    assert recall(store, "please fix the typo in the footer colour", project=PROJECT, shown=set()) is None
    assert recall(store, "hello", project=PROJECT, shown=set()) is None


def test_recall_skips_records_already_shown_by_the_brief(store):
    ids = _seed(store)
    brief = make_brief(store, PROJECT)
    shown = {r["id"] for r in brief["records"]}
    assert ids["migrate"] in shown
    assert recall(store, "how do I run the database migrations?", project=PROJECT, shown=shown) is None


def test_recall_budget_and_record_cap_are_never_exceeded(store):
    for i in range(10):
        store.write(f"Database migrations note {i}: " + "the migrations runner needs care with locks " * 8,
                    scope=PROJECT)
    got = recall(store, "database migrations runner", project=PROJECT, shown=set())
    assert got is not None and 1 <= len(got["ids"]) <= 3
    assert estimate_tokens(got["text"]) <= 250
    small = recall(store, "database migrations runner", project=PROJECT, shown=set(), budget_tokens=120,
                   max_records=2)
    assert small is None or (estimate_tokens(small["text"]) <= 120 and len(small["ids"]) <= 2)


def test_recall_off_switch(store, monkeypatch):
    _seed(store)
    monkeypatch.setenv("RETAINED_RECALL", "off")
    assert recall(store, "how do I run the database migrations?", project=PROJECT, shown=set()) is None


def test_recall_garbage_prompt_prints_nothing(store):
    _seed(store)
    for junk in ("", "   ", "!!! ??? ---", "\x00\x01", '" OR * NEAR(', "🙂🙂"):
        assert recall(store, junk, project=PROJECT, shown=set()) is None


# -- through the prompt hook, in every host's shape ----------------------------------------------------
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

SHAPES = {  # host: (event name the host sends, where its output carries the context)
    "claude": ("UserPromptSubmit", lambda o: o["hookSpecificOutput"]["additionalContext"]),
    "codex": ("UserPromptSubmit", lambda o: o["hookSpecificOutput"]["additionalContext"]),
    "vscode": ("UserPromptSubmit", lambda o: o["hookSpecificOutput"]["additionalContext"]),
    "gemini": ("BeforeAgent", lambda o: o["hookSpecificOutput"]["additionalContext"]),
}  # Cursor's beforeSubmitPrompt cannot carry context: test_hooks.py checks it only lets the prompt through


@pytest.mark.parametrize("host", sorted(SHAPES))
def test_prompt_hook_injects_a_relevant_record_once_in_each_hosts_shape(store_dir, tmp_path, host):
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    with __import__("retained.store", fromlist=["Store"]).Store(store_dir) as s:
        for i in range(40):  # newer records, so the decision is not in a brief
            s.write(f"release note {i}: the footer colour changed again", scope=str(project.resolve()))
        rid = s.write("Database migrations run with `make migrate`; never edit an applied migration.",
                      kind="decision", scope=str(project.resolve()))["id"]
    event, carried = SHAPES[host]
    env = dict(os.environ, RETAINED_DIR=str(store_dir))

    def ask(prompt: str, session: str) -> str:
        data = {"session_id": session, "conversation_id": session, "cwd": str(project), "hook_event_name": event,
                "prompt": prompt, "workspace_roots": [str(project)]}
        out = subprocess.run([sys.executable, "-m", "retained", "hook", "prompt", "--host", host], cwd=project,
                             input=json.dumps(data), capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    first = ask("how do I run the database migrations?", f"s-{host}")
    assert first, f"{host}: nothing injected"
    text = carried(json.loads(first))
    assert rid in text and "make migrate" in text and BEGIN in text
    assert estimate_tokens(text) <= 250
    assert ask("how do I run the database migrations?", f"s-{host}") == ""  # already shown in this session
    assert ask("write a haiku about autumn leaves", f"other-{host}") == ""  # nothing relevant: nothing at all
