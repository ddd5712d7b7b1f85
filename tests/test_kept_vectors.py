"""Vectors are kept by (model, text hash) beside the index (issue 18 item 3): a reindex, a damaged index
rebuilt from the log and an import of records already seen never hand a known text to the model; a
purge takes the purged text's vector with it.

The model is the real default one; its embed method is wrapped to count the texts it is given.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

from retained.index.kept import KEPT_NAME, text_hash
from retained.store import Store
from tests.conftest import run_cli

TEAM = [
    "Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files.",
    "The orders service stores its data in PostgreSQL 16 on the managed cluster.",
    "Database migrations run with `make migrate`; never edit a migration that was applied.",
    "Deploys to production go out on Tuesdays after the release review.",
    "Error E4012 means the payment token expired: refresh the token and retry once.",
]


def _records_sent(seen: list[str]) -> list[str]:
    return [t for t in seen if t in TEAM]


def _seeded(store_dir) -> dict[str, str]:
    with Store(store_dir) as store:
        ids = {text: store.write(text, scope="/p/a")["id"] for text in TEAM}
        assert store.search("which tool holds our passwords?", scopes=["/p/a"])["semantic"] == "on"
    return ids


def _kept_rows(store_dir) -> list[bytes]:
    db = sqlite3.connect(store_dir / KEPT_NAME)
    try:
        return [r[0] for r in db.execute("SELECT sha FROM kept")]
    finally:
        db.close()


def test_reindex_hands_no_known_text_to_the_model(store_dir, model_texts):
    ids = _seeded(store_dir)
    assert sorted(_records_sent(model_texts)) == sorted(TEAM)  # each record embedded once
    model_texts.clear()
    with Store(store_dir) as store:
        receipt = store.reindex()
        assert receipt["semantic"] == "on" and receipt["embedded"] == len(TEAM)
        assert receipt["model_embedded"] == 0 and receipt["vectors_reused"] == len(TEAM)
        assert model_texts == []  # not one model call
        hit = store.search("which tool holds our passwords?", scopes=["/p/a"])["hits"][0]
        assert hit["id"] == ids[TEAM[0]] and hit.get("match") != "words"
    assert _records_sent(model_texts) == []


def test_a_deleted_or_damaged_index_is_rebuilt_without_embedding_known_texts(store_dir, model_texts):
    _seeded(store_dir)
    model_texts.clear()
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(store_dir / "index.sqlite3") + suffix)
    with Store(store_dir) as store:
        assert store.search("payment token expired", scopes=["/p/a"])["semantic"] == "on"
    (store_dir / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    with Store(store_dir) as store:
        assert store.search("how are deploys scheduled", scopes=["/p/a"])["semantic"] == "on"
        assert store.semantic().reused == len(TEAM)
    assert _records_sent(model_texts) == []


def test_a_new_text_is_embedded_once_and_the_known_ones_not_again(store_dir, model_texts):
    _seeded(store_dir)
    model_texts.clear()
    with Store(store_dir) as store:
        store.write("The web frontend is built with Vite and React 19.", scope="/p/a")
        store.reindex()
    assert [t for t in model_texts if "Vite" in t] == ["The web frontend is built with Vite and React 19."]
    assert _records_sent(model_texts) == []


def test_importing_records_already_seen_embeds_nothing(store_dir, tmp_path, model_texts):
    _seeded(store_dir)
    out = tmp_path / "export.jsonl"
    env = {"RETAINED_DIR": str(store_dir), "RETAINED_EMBED": "off"}
    assert run_cli("export", "--output", str(out), env=env).returncode == 0
    for name in ("log.jsonl", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(store_dir / name)
    res = run_cli("import", str(out), "--apply", env=env)
    assert res.returncode == 0, res.stderr
    model_texts.clear()
    with Store(store_dir) as store:
        assert store.search("which tool holds our passwords?", scopes=["/p/a"])["semantic"] == "on"
        assert store.semantic().reused == len(TEAM)
    assert _records_sent(model_texts) == []


def test_a_purge_deletes_the_purged_texts_kept_vector(store_dir, model_texts):
    ids = _seeded(store_dir)
    assert text_hash(TEAM[0]) in _kept_rows(store_dir)
    with Store(store_dir) as store:
        store.purge([ids[TEAM[0]]], reason="a secret's location")
        assert text_hash(TEAM[0]) not in _kept_rows(store_dir)
        assert len(_kept_rows(store_dir)) == len(TEAM) - 1
        model_texts.clear()
        store.reindex()
    assert _records_sent(model_texts) == []  # the others kept theirs
    assert text_hash(TEAM[0]) not in _kept_rows(store_dir)
    assert not os.path.exists(str(store_dir / KEPT_NAME) + "-wal") or os.path.getsize(str(store_dir / KEPT_NAME) + "-wal") == 0


def test_a_damaged_kept_file_is_started_afresh_and_costs_only_model_calls(store_dir, model_texts):
    _seeded(store_dir)
    (store_dir / KEPT_NAME).write_bytes(b"garbage" * 1000)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(store_dir / KEPT_NAME) + suffix)
    model_texts.clear()
    with Store(store_dir) as store:
        receipt = store.reindex()
        assert receipt["embedded"] == len(TEAM) and receipt["model_embedded"] == len(TEAM)
    assert sorted(_records_sent(model_texts)) == sorted(TEAM)
    assert len(_kept_rows(store_dir)) == len(TEAM)
    assert oct(os.stat(store_dir / KEPT_NAME).st_mode & 0o777) == "0o600"
