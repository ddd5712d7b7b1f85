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
