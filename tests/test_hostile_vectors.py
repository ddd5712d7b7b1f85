"""Issue 29 item 7: vectors from outside this process are checked (finite, the model's width, unit
length) before they are used or kept: the model host's replies, the kept-vectors file and the index's
vectors table (another process wrote both). An unfit vector is never used nor kept, and is counted;
`--json` never prints a bare NaN.

The real local model; a fake model host (a thread on this user's socket) answers what a squatter would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retained import embed, model_host
from retained.embed import LOCAL_DIM, LocalEmbedder
from retained.index import kept as kept_module
from retained.index.kept import KEPT_NAME, text_hash, unit_rows
from retained.store import Store
from tests.conftest import run_cli

TEXTS = ["Deploys go out on Tuesdays", "the cache is redis", "error E4012 means the token expired"]
TEAM = ["Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files.",
        "Deploys to production go out on Tuesdays after the release review.",
        "Error E4012 means the payment token expired: refresh the token and retry once."]


@pytest.fixture
def runtime(monkeypatch) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="rv-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("RETAINED_MODEL_HOST", "on")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _fake_host(path: Path, answer) -> Iterator[None]:
    """A model host at `path` that answers ping and lease as the real one does and each embed request
    with `answer(texts)`: the (n, dim) float32 rows it sends back."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            req = json.loads(conn.makefile("rb").readline())
            if req["op"] == "lease":
                conn.sendall(b'{"v": 1, "pid": 1, "leased": true}\n')
                held.append(conn)
                continue
            if req["op"] == "embed":
                rows = np.asarray(answer(req["texts"]), dtype="<f4")
                head = {"v": model_host.PROTOCOL, "n": rows.shape[0], "dim": rows.shape[1]}
                conn.sendall((json.dumps(head) + "\n").encode() + rows.tobytes())
            else:
                conn.sendall(b'{"v": 1, "pid": 1, "ready": true}\n')
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield
    finally:
        srv.close()
        for c in held:
            c.close()


def _local(texts: list[str]) -> np.ndarray:
    return LocalEmbedder(dict(os.environ)).embed(texts)


SQUATTERS = {
    "NaN": lambda texts: np.full((len(texts), LOCAL_DIM), np.nan),
    "not of unit length": lambda texts: _local(texts) * 3,
    "infinite": lambda texts: np.where(np.arange(LOCAL_DIM) == 0, np.inf, _local(texts)),
    "one same vector for different texts": lambda texts: np.repeat(_local(texts[:1]), len(texts), axis=0),
}


def test_a_model_host_answering_the_models_vectors_is_used(runtime):
    """The control: the fake host is believed when what it answers are the model's vectors."""
    env = dict(os.environ)
    path = model_host.socket_path(env)
    with _fake_host(path, _local):
        emb = model_host.HostedEmbedder(env, path)
        got = emb.embed(TEXTS)
    assert emb.host_reason is None and emb.bad_vectors == 0
    assert np.array_equal(got, _local(TEXTS))


@pytest.mark.parametrize("squatter", list(SQUATTERS))
def test_unfit_vectors_from_the_model_host_are_never_used_and_are_counted(runtime, squatter):
    env = dict(os.environ)
    path = model_host.socket_path(env)
    with _fake_host(path, SQUATTERS[squatter]):
        with pytest.raises(model_host.BadVectors):
            model_host.embed(path, env, TEXTS)
        emb = model_host.HostedEmbedder(env, path)
        got = emb.embed(TEXTS)  # embedded in this process instead
    assert np.allclose(got, _local(TEXTS), atol=1e-5)
    assert bool(unit_rows(got, LOCAL_DIM).all())
    assert emb.bad_vectors == len(TEXTS) and "unfit" in (emb.host_reason or "")


# -- vectors another process wrote into the store's files ------------------------------------------------------
@pytest.fixture
def model_texts(monkeypatch):
    seen: list[str] = []
    real = embed.LocalEmbedder.embed

    def counting(self, texts):
        seen.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(embed.LocalEmbedder, "embed", counting)
    monkeypatch.setenv("RETAINED_MODEL_HOST", "off")
    return seen


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
    assert TEAM[1] not in texts or texts[TEAM[1]].get("match") == "words"
    proc = run_cli("search", "what day of the week do we ship", "--scope", "/p/a", "--json",
                   env={"RETAINED_DIR": str(store_dir), "RETAINED_MODEL_HOST": "off"})
    assert proc.returncode in (0, 1) and "NaN" not in proc.stdout, proc.stdout
    json.loads(proc.stdout, parse_constant=lambda word: pytest.fail(f"bare {word}"))
