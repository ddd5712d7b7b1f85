"""The local model computes on its int8 weights: the same vectors (within quantisation), vectors that do
not depend on their batch, an unknown graph loaded as it is, a model dropped after idle, and a server's
C heap kept in one arena (what makes a dropped model's memory go back).

These run the real packaged model with the real onnxruntime; resident memory itself is measured by
bench/rss_bench.py (a figure of a process, not something a unit test can hold steady).
"""

from __future__ import annotations

import platform
import subprocess
import sys

import numpy as np
import pytest

from retained import embed, onnxgraph

TEXTS = [
    "Run the test suite with `make check` before pushing; CI runs the same target.",
    "Database is PostgreSQL 16 with pgvector for the embeddings.",
    "how do we run the tests?",
    "Deploys to production go out on Tuesdays after the release review; no deploys on Fridays.",
    "ünïcødé, emoji 🎉 and CJK 数据库 in one line",
    "word " * 300,
]


def _float_session(data: bytes):
    ort = embed.onnxruntime_module()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _embed_with(session, texts: list[str]) -> np.ndarray:
    from retained.wordpiece import WordPiece

    tok = WordPiece.load()
    out = []
    for t in texts:
        ids = np.array([tok.encode(t)], dtype=np.int64)
        hidden = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                                     "token_type_ids": np.zeros_like(ids)})[0]
        v = hidden.mean(axis=1)[0]
        out.append(v / np.linalg.norm(v))
    return np.array(out)


def test_the_integer_graph_gives_the_float_graphs_vectors_within_quantisation():
    emb = embed.LocalEmbedder()
    data = emb.verified_bytes()
    reference = _embed_with(_float_session(data), TEXTS)
    mine = emb.embed(TEXTS)
    cos = (mine * reference).sum(axis=1)
    assert cos.min() > 0.99, cos
    # It really is the integer graph that ran: the file's float graph would give the same vectors.
    assert cos.max() < 0.99999


def test_a_texts_vector_does_not_depend_on_the_texts_batched_with_it():
    emb = embed.LocalEmbedder()
    alone = np.array([emb.embed([t])[0] for t in TEXTS])
    together = emb.embed(TEXTS)
    assert np.abs(alone - together).max() < 1e-4


def test_long_records_are_embedded_a_few_at_a_time():
    lengths = [3] * 40 + [256] * 9
    batches = embed._batches(list(range(len(lengths))), lengths)
    assert all(len(b) <= embed.BATCH for b in batches)
    assert all(len(b) * max(lengths[i] for i in b) <= embed.BATCH_TOKENS for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))


@pytest.mark.parametrize("blob", [b"", b"\x08\x07", b"not an onnx file at all", b"\x3a\x05\x0a\x03abc"])
def test_a_graph_the_rewrite_does_not_know_is_refused_not_guessed(blob):
    with pytest.raises(ValueError):
        onnxgraph.integer_model(blob)


def test_a_model_the_rewrite_refuses_is_loaded_as_the_file_stands(monkeypatch, tmp_path):
    def refuse(data):
        raise ValueError("unknown graph")

    monkeypatch.setenv("RETAINED_CACHE_DIR", str(tmp_path / "cache"))  # no rewritten model kept from before
    monkeypatch.setattr(onnxgraph, "integer_model", refuse)
    emb = embed.LocalEmbedder()
    reference = _embed_with(_float_session(emb.verified_bytes()), TEXTS[:2])
    assert np.abs(emb.embed(TEXTS[:2]) - reference).max() < 1e-4


def test_an_idle_model_is_dropped_and_loaded_again_by_the_next_search(monkeypatch):
    emb = embed.LocalEmbedder()
    first = emb.embed(["how do we run the tests?"])
    assert emb.release_if_idle(3600) is False  # just used
    assert emb.release_if_idle(0) is False     # 0 means never
    monkeypatch.setattr(embed.time, "monotonic", lambda: 1e12)
    assert emb.release_if_idle(60) is True and emb._session is None and emb._tok is None
    monkeypatch.undo()
    again = emb.embed(["how do we run the tests?"])
    assert emb._session is not None and np.abs(first - again).max() < 1e-5


HEAPS = r"""
import ctypes, re, sys, tempfile, threading
from retained.embed import one_heap
ok = one_heap() if sys.argv[1] == "one" else None
def work():  # what the warm-up, search and lender threads do: allocate and free
    bufs = [ctypes.create_string_buffer(200_000) for _ in range(50)]
t = threading.Thread(target=work)
t.start()
t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(ok, len(re.findall(r"<heap nr=", open(f.name).read())))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's arenas")
def test_a_servers_threads_allocate_in_the_one_arena_release_heap_can_give_back():
    def heaps(how: str) -> str:
        done = subprocess.run([sys.executable, "-c", HEAPS, how], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert heaps("default") == ["None", "2"]  # a thread that allocates gets an arena of its own ...
    assert heaps("one") == ["True", "1"]      # ... unless one_heap() was called first


def test_serve_keeps_one_heap_before_it_starts_a_thread(monkeypatch, tmp_path):
    """The model lives in the server: one heap, set before serve() starts a thread."""
    from retained import cli, transport

    calls = []
    monkeypatch.setattr(embed, "one_heap", lambda: calls.append("one_heap") or True)
    monkeypatch.setattr(transport, "serve", lambda directory: calls.append("serve") or 0)
    monkeypatch.setenv("RETAINED_DIR", str(tmp_path))
    assert cli.main(["serve"]) == 0
    assert calls == ["one_heap", "serve"]


class _PagedIndex:
    """The index's vector pages (`Index.vectors_page`) over a list of (line, float32 vector), vid = position."""

    def __init__(self, rows: list[tuple[int, np.ndarray]], miscount: int = 0) -> None:
        self.rows = rows
        self.miscount = miscount  # the count said before reading is off by this (rows added or gone meanwhile)

    def vectors_after(self, model: str, vid: int) -> int:
        return max(0, sum(1 for v in range(len(self.rows)) if v > vid) + self.miscount)

    def vectors_page(self, model: str, vid: int, limit: int):
        page = [(v, line, vec) for v, (line, vec) in enumerate(self.rows) if v > vid][:limit]
        if not page:
            return [], [], 0, vid
        return ([line for _, line, _ in page], [vec.astype(np.float16).tobytes() for _, _, vec in page], 8,
                page[-1][0])


def test_vectors_read_in_many_pages_are_the_ones_read_in_one_and_a_held_line_is_refused_whole(monkeypatch):
    """The in-memory vectors join the pages they were read in all at once (not page by page, which
    copied every array n/PAGE times): the same rows as one page, lines in order, cosines as computed;
    an incremental read that meets a line already held adds nothing and says so (the caller reads afresh)."""
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((10, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lines = [9, 2, 7, 4, 5, 0, 8, 1, 6, 3]  # vid order is not line order
    index = _PagedIndex(list(zip(lines, vecs, strict=True)))
    monkeypatch.setattr(embed, "PAGE", 3)
    paged = embed.Vectors()
    assert paged.add_from(index, "m", -1) is True
    monkeypatch.setattr(embed, "PAGE", 100)
    whole = embed.Vectors()
    assert whole.add_from(index, "m", -1) is True
    assert list(paged.lines) == sorted(lines) == list(whole.lines)
    assert np.array_equal(paged.q8, whole.q8) and np.array_equal(paged.scale, whole.scale)
    q = vecs[0]
    got_lines, cosines, approximate = paged.similarities(q)
    expected = {line: float(vec @ q) for line, vec in zip(lines, vecs, strict=True)}
    assert not approximate and all(abs(c - expected[int(line)]) < 0.01 for line, c in zip(got_lines, cosines, strict=True))

    for miscount in (-4, -10, 3):  # vectors added after the count (read past it), or gone before the read
        monkeypatch.setattr(embed, "PAGE", 3)
        odd = embed.Vectors()
        assert odd.add_from(_PagedIndex(index.rows, miscount), "m", -1) is True
        assert list(odd.lines) == sorted(lines) and np.array_equal(odd.q8, whole.q8), miscount

    monkeypatch.setattr(embed, "PAGE", 3)
    more = _PagedIndex(index.rows + [(10, vecs[1]), (11, vecs[2])])
    assert paged.add_from(more, "m", 9) is True and list(paged.lines) == list(range(12))
    again = _PagedIndex(more.rows + [(12, vecs[3]), (13, vecs[5]), (14, vecs[6]), (4, vecs[4])])  # 4 again, a page later
    assert paged.add_from(again, "m", 11) is False and len(paged) == 12  # nothing of that read was added


def test_sign_bits_made_a_chunk_at_a_time_are_those_of_all_rows_at_once(monkeypatch):
    """Past EXACT_MAX rows the sign bits pick the candidates; made CHUNK rows at a time (no temporary as
    large as the rows), they are the bits of every row, padded to whole 64-bit words."""
    rows = np.random.default_rng(3).integers(-127, 128, size=(1000, 384), dtype=np.int8)
    monkeypatch.setattr(embed, "CHUNK", 64)
    got = embed._sign_bits(np, rows)
    expected = np.ascontiguousarray(np.packbits(rows > 0, axis=1).view(np.uint64).T)
    assert got.shape == (6, 1000) and np.array_equal(got, expected)
    odd = embed._sign_bits(np, rows[:, :100])  # 100 bits: two words, the second padded with zeros
    assert odd.shape == (2, 1000)
    padded = np.zeros((1000, 16), dtype=np.uint8)
    padded[:, :13] = np.packbits(rows[:, :100] > 0, axis=1)
    assert np.array_equal(odd, np.ascontiguousarray(padded.view(np.uint64).T))
