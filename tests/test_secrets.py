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
