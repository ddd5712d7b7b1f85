"""Secrets the name-based patterns miss are redacted; hashes, ids and SHAs that look alike survive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retained.redact import redact_text

CORPUS = json.loads((Path(__file__).parent / "data" / "secrets_corpus.json").read_text())


@pytest.mark.parametrize("case", CORPUS["secrets"], ids=lambda c: c["text"][:40])
def test_a_credential_without_a_telling_name_is_redacted(case):
    clean, found = redact_text(case["text"])
    assert case["secret"] not in clean and "[REDACTED:" in clean, clean
    assert sum(found.values()) >= 1


@pytest.mark.parametrize("text", CORPUS["survivors"], ids=lambda t: t[:40])
def test_a_look_alike_survives_untouched(text):
    clean, found = redact_text(text)
    assert clean == text and not found, clean


def test_a_written_record_never_holds_the_secret(store, store_dir):
    for case in CORPUS["secrets"]:
        receipt = store.write(case["text"])
        assert any("redacted" in w for w in receipt["warnings"])
    data = (store_dir / "log.jsonl").read_bytes()
    for case in CORPUS["secrets"]:
        assert case["secret"].encode() not in data


def _every_test_string() -> list[str]:
    """Every string the corpora and the test modules hold: secrets of every shape, and text around them."""
    import ast

    texts = [c["text"] for c in CORPUS["secrets"]] + list(CORPUS["survivors"])
    hostile = json.loads((Path(__file__).parent / "data" / "secrets_hostile.json").read_text())
    texts += [c["text"] for c in hostile["secrets"]] + list(hostile["survivors"])
    for module in Path(__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and 3 <= len(node.value) <= 4000:
                texts.append(node.value)
    return texts


def _variants(text: str) -> list[str]:
    # Case changes, and the letters `(?i)` matches beyond ASCII (dotless i, long s, the Kelvin sign).
    exotic = text.replace("i", "\u0131").replace("s", "\u017f").replace("k", "\u212a")
    return [text, text.upper(), text.lower(), text.swapcase(), exotic, "x " + text + " y"]


def test_the_gates_skip_no_pattern_that_would_match():
    """Redaction skips a pattern when the text holds none of its gate's strings (a speed-up): over every
    string of the tests, in several cases, each pattern that matches passes its gate, and the gated
    result is the result of running every pattern."""
    import random

    from retained import redact

    texts = [v for t in _every_test_string() for v in _variants(t)]
    rng = random.Random(18)
    needles = [n for gate, _ in redact.GATES for n in gate] + ["=", ": ", "\"", " ", "Bearer ", "password="]
    for _ in range(3000):  # pieces of secrets glued together at random
        texts.append("".join(rng.choice(needles + [rng.choice(texts)[:40]]) for _ in range(rng.randint(1, 6))))
    assert len(redact.GATES) == len(redact.PATTERNS)
    for text in texts:
        for (kind, pattern, _), (gate, fold) in zip(redact.PATTERNS, redact.GATES, strict=True):
            if pattern.search(text):
                hay = redact._folded(text) if fold else text
                assert any(n in hay for n in gate), (kind, text)
        assert redact_text(text) == redact_text(text, gated=False), text
