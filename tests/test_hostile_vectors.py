"""Issue 29 item 7: vectors from outside this process are checked (finite, the model's width, unit
length) before they are used or kept: an embedding server's replies (Ollama), the kept-vectors file and
the index's vectors table (another process wrote both). An unfit vector is never used nor kept, and is
counted; `--json` never prints a bare NaN.

The real local model; a fake Ollama answers what a squatter on its port would.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from retained.embed import LOCAL_DIM
from retained.index import kept as kept_module
from retained.index.kept import KEPT_NAME, text_hash, unit_rows
from retained.store import Store
from tests.conftest import run_cli
from tests.helpers import fake_ollama
from tests.helpers.fake_ollama import FakeOllama

TEAM = ["Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files.",
        "Deploys to production go out on Tuesdays after the release review.",
        "Error E4012 means the payment token expired: refresh the token and retry once."]

TOY = fake_ollama.toy_vector  # the fake's own vectors
SQUATTERS = {
    "NaN": lambda text: [float("nan")] * fake_ollama.DIM,
    "infinite": lambda text: [float("inf")] + TOY(text)[1:],
    "all zero": lambda text: [0.0] * fake_ollama.DIM,
    "one same vector for different texts": lambda text: TOY("the same for every text"),
}


@pytest.mark.parametrize("squatter", [None, *SQUATTERS])
def test_unfit_vectors_from_an_embedding_server_are_never_used_nor_kept(store_dir, monkeypatch, squatter):
    """None is the control: the fake's own vectors are used. A squatter's are refused: the search answers
    by words saying why, and no vector of theirs reaches the index."""
    fake = FakeOllama()
    if squatter is not None:
        monkeypatch.setattr(fake_ollama, "toy_vector", SQUATTERS[squatter])
    monkeypatch.setenv("RETAINED_EMBED", "ollama")
    monkeypatch.setenv("RETAINED_OLLAMA_URL", fake.url)
    monkeypatch.setenv("RETAINED_EMBED_MODEL", fake.model)
    try:
        with Store(store_dir) as store:
            for text in TEAM:
                store.write(text)
            res = store.search("when do deploys go out to production?")
            held = store.index.vectors_page(fake.key, -1, 100)[0]
    finally:
        fake.stop()
    if squatter is None:
        assert res["semantic"] == "on" and len(held) == len(TEAM)
        return
    assert res["semantic"].startswith(f"off: ollama at 127.0.0.1:{fake.url.rsplit(':', 1)[1]} answered ")
    assert res["semantic"].endswith(": not used") and "\n" not in res["semantic"]
    assert held == []
    assert res["hits"][0]["text"] == TEAM[1]  # by words


# -- vectors another process wrote into the store's files ------------------------------------------------------


def _seeded(store_dir: Path) -> None:
    with Store(store_dir) as store:
        for text in TEAM:
            store.write(text, scope="/p/a")
        assert store.search("which tool holds our passwords?", scopes=["/p/a"])["semantic"] == "on"


BAD_BLOBS = {
    "NaN": np.full(LOCAL_DIM, np.nan, dtype=np.float16).tobytes(),
    "of another width": np.ones(LOCAL_DIM // 2, dtype=np.float16).tobytes(),
    "not of unit length": np.ones(LOCAL_DIM, dtype=np.float16).tobytes(),
    "a blob of the wrong size": b"\x00" * 7,
}


@pytest.mark.parametrize("bad", list(BAD_BLOBS))
def test_an_unfit_kept_vector_is_embedded_again_and_replaced(store_dir, model_texts, bad):
    _seeded(store_dir)
    db = sqlite3.connect(store_dir / KEPT_NAME)
    with db:
        db.execute("UPDATE kept SET vec = ? WHERE sha = ?", (BAD_BLOBS[bad], text_hash(TEAM[1])))
    db.close()
    model_texts.clear()
    with Store(store_dir) as store:
        store.reindex()  # the index's vectors come from the kept file again
        sem = store.semantic()
        assert sem.reused == len(TEAM) - 1 and store.index.kept.bad == 1
        hit = store.search("what day of the week do we ship?", scopes=["/p/a"])["hits"][0]
        assert hit["text"] == TEAM[1]
    assert [t for t in model_texts if t in TEAM] == [TEAM[1]]  # the unfit one, and only it, embedded again
    db = sqlite3.connect(store_dir / KEPT_NAME)
    (blob,) = db.execute("SELECT vec FROM kept WHERE sha = ?", (text_hash(TEAM[1]),)).fetchone()
    db.close()
    assert bool(unit_rows([blob], LOCAL_DIM).all())  # replaced: the unfit one is not kept


@pytest.mark.parametrize("bad", list(BAD_BLOBS))
def test_an_unfit_vector_in_the_index_is_never_used_by_a_search(store_dir, model_texts, bad):
    _seeded(store_dir)
    db = sqlite3.connect(store_dir / "index.sqlite3")
    with db:
        db.execute("UPDATE vectors SET vec = ? WHERE line = (SELECT line FROM records WHERE text = ?)",
                   (BAD_BLOBS[bad], TEAM[1]))
    db.close()
    before = kept_module.UNFIT_READ[0]
    with Store(store_dir) as store:
        result, cosines = store.search_scored("what day of the week do we ship?", scopes=["/p/a"], k=8)
    assert kept_module.UNFIT_READ[0] == before + 1
    assert all(np.isfinite(c) for c in cosines.values()), cosines
    texts = {h["text"]: h for h in result["hits"]}
    assert TEAM[1] not in texts, texts  # it shares no word with the question: only its vector could find it
    proc = run_cli("search", "what day of the week do we ship", "--scope", "/p/a", "--json",
                   env={"RETAINED_DIR": str(store_dir)})
    assert "NaN" not in proc.stdout, proc.stdout
    assert TEAM[1] not in proc.stdout, proc.stdout
    found = json.loads(proc.stdout, parse_constant=lambda word: pytest.fail(f"bare {word}"))
    assert proc.returncode == (0 if found["hits"] else 1), proc.stderr  # exit 1: no hits (README)
