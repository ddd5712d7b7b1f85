"""The semantic tier's promises: meaning found, exact words still first, honest fallbacks, vectors derived.

These use the real default model (one onnxruntime session shared by the whole test process) and, for
the Ollama path, a loopback stand-in for Ollama's embed API.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retained.index import search as index_search
from retained.records import now_rfc3339
from retained.store import Store
from tests.helpers.fake_ollama import FakeOllama

TEAM = [
    ("secrets", "Secrets live in 1Password, in the vault 'shop-prod'; never commit .env files."),
    ("db", "The orders service stores its data in PostgreSQL 16 on the managed cluster."),
    ("migrate", "Database migrations run with `make migrate`; never edit a migration that was applied."),
    ("deploy", "Deploys to production go out on Tuesdays after the release review."),
    ("error", "Error E4012 means the payment token expired: refresh the token and retry once."),
    ("path", "ledger/migrate.py holds the one-off script that moved the ledger to the new schema."),
    ("frontend", "The web frontend is built with Vite and React 19."),
]


def _seed(store: Store) -> dict[str, str]:
    return {name: store.write(text)["id"] for name, text in TEAM}


def _vectors(store_dir) -> list[tuple[int, str]]:
    db = sqlite3.connect(store_dir / "index.sqlite3")
    try:
        return db.execute("SELECT line, model FROM vectors ORDER BY line").fetchall()
    finally:
        db.close()


def test_paraphrase_is_found_by_the_default_install(store):
    ids = _seed(store)
    res = store.search("which tool holds our passwords?")
    assert res["semantic"] == "on"
    assert res["hits"][0]["id"] == ids["secrets"]
    assert res["hits"][0]["match"] == "meaning"
    res = store.search("when do we ship releases to prod?")
    assert ids["deploy"] in [h["id"] for h in res["hits"][:3]]


def test_exact_identifier_beats_a_semantic_neighbour(store):
    ids = _seed(store)
    near = store.write("Payment errors: a token that has run out must be refreshed before retrying.")["id"]
    res = store.search("what does E4012 mean for an expired payment token")
    assert res["hits"][0]["id"] == ids["error"]
    assert near in [h["id"] for h in res["hits"]]
    res = store.search("ledger/migrate.py")
    assert res["hits"][0]["id"] == ids["path"]
    assert res["hits"][0]["match"] == "both", res["hits"][0]  # its words, and its meaning too
    scores = [h["score"] for h in res["hits"]]
    assert scores == sorted(scores, reverse=True)  # comparable within one reply: falls with rank


def test_hits_carry_match_and_a_score_that_falls_with_rank(store):
    _seed(store)
    res = store.search("database migrations")
    assert res["hits"]
    assert all(h["match"] in ("words", "meaning", "both") for h in res["hits"])
    assert res["hits"][0]["match"] == "both"
    scores = [h["score"] for h in res["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert {"id", "kind", "scope", "ts", "text", "score", "match"} <= set(res["hits"][0])


@pytest.mark.parametrize("bad", ["missing", "hash"])
def test_model_missing_or_hash_mismatch_answers_lexically_with_the_reason(store_dir, tmp_path, monkeypatch, bad):
    path = tmp_path / "model.onnx"
    if bad == "hash":
        path.write_bytes(b"\0" * 1000)
    monkeypatch.setenv("RETAINED_EMBED_MODEL_PATH", str(path))
    with Store(store_dir) as store:
        ids = _seed(store)
        res = store.search("PostgreSQL")
        assert res["semantic"].startswith("off: ")
        assert ("missing" if bad == "missing" else "sha256") in res["semantic"]
        assert [h["id"] for h in res["hits"]] == [ids["db"]]
        assert res["hits"][0]["match"] == "words"
        # (no word of it is held, and no tool's kind is named: 'passwords' would find 1Password by the vocabulary)
        assert ids["secrets"] not in [h["id"] for h in store.search("where do we stash confidential values?")["hits"]]


@pytest.mark.parametrize("broken", ["numpy", "onnxruntime"])
def test_model_present_but_its_runtime_unimportable_answers_lexically_and_hooks_fail_open(store_dir, tmp_path, broken):
    """The model file is there and intact, but a library it runs on does not import: a real process."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / f"{broken}.py").write_text(f"raise ImportError('{broken} is broken in this install')\n")
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = dict(os.environ, RETAINED_DIR=str(store_dir), PYTHONPATH=str(shim))
    code = (
        "import json, sys\n"
        "from retained.store import Store\n"
        f"s = Store({str(store_dir)!r})\n"
        f"w = s.write('Database migrations run with make migrate.', scope={str(project.resolve())!r})\n"
        "r = s.search('database migrations')\n"
        "v = s.verify()\n"
        "print(json.dumps([w['durable'], r['semantic'], [h['match'] for h in r['hits']], v['intact'],"
        " s.reindex()['semantic']]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    durable, semantic, matches, intact, reindexed = json.loads(out.stdout)
    assert durable is True and intact is True
    assert semantic.startswith(f"off: {broken} cannot be imported (") and "is broken in this install" in semantic
    assert matches == ["words"]
    assert reindexed == semantic
    cli = subprocess.run([sys.executable, "-m", "retained", "search", "--meaning", "database migrations", "--scope", "*"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert "make migrate" in cli.stdout and f"semantic off: {broken} cannot be imported" in cli.stdout
    payload = json.dumps({"session_id": "s-broken", "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                          "prompt": "how do I run the database migrations?"})
    hook = subprocess.run([sys.executable, "-m", "retained", "hook", "prompt", "--host", "claude"], input=payload,
                          env=dict(env, CLAUDECODE="1"), capture_output=True, text=True, cwd=project, timeout=60)
    assert hook.returncode == 0 and "Traceback" not in hook.stderr, hook.stderr
    assert "make migrate" in hook.stdout  # still recalled, by its words


def test_embed_off_is_lexical_only_and_loads_nothing(store_dir):
    code = (
        "import sys, json\n"
        "from retained.store import Store\n"
        f"s = Store({str(store_dir)!r})\n"
        "s.write('Deploys go out on Tuesdays')\n"
        "r = s.search('deploys')\n"
        "print(json.dumps([r['semantic'], len(r['hits']), 'numpy' in sys.modules, 'onnxruntime' in sys.modules]))\n"
    )
    env = dict(os.environ, RETAINED_EMBED="off")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["off: RETAINED_EMBED=off", 1, False, False]


def test_ollama_down_mid_session_writes_stay_durable_and_search_goes_lexical(store_dir, monkeypatch):
    fake = FakeOllama()
    monkeypatch.setenv("RETAINED_EMBED", "ollama")
    monkeypatch.setenv("RETAINED_OLLAMA_URL", fake.url)
    monkeypatch.setenv("RETAINED_EMBED_MODEL", fake.model)
    with Store(store_dir) as store:
        _seed(store)
        res = store.search("token expired")
        assert res["semantic"] == "on"
        assert {m for _, m in _vectors(store_dir)} == {fake.key}
        fake.stop()
        receipt = store.write("After the outage the team moved the token cache to Redis.")
        assert receipt["durable"] is True
        res = store.search("token cache Redis")
        assert res["semantic"].startswith("off: ollama unreachable at 127.0.0.1:")
        assert [h["id"] for h in res["hits"]][0] == receipt["id"]  # then records holding some of the words
        assert store.verify()["intact"] is True


def test_ollama_is_loopback_only_by_default_and_never_uses_a_proxy(monkeypatch):
    from retained.embed import OllamaEmbedder

    assert OllamaEmbedder({}).url == "http://127.0.0.1:11434"
    with FakeOllama() as fake:
        # A proxy set for other traffic must not see memory text.
        env = {"RETAINED_OLLAMA_URL": fake.url, "RETAINED_EMBED_MODEL": fake.model,
               "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        vecs = OllamaEmbedder(env).embed(["hello world"])
        assert vecs.shape == (1, 64)
        assert fake.requests and fake.requests[0]["input"] == ["hello world"]


def test_model_change_re_embeds_instead_of_mixing_spaces(store_dir, monkeypatch):
    with Store(store_dir) as store:
        _seed(store)
        assert store.search("passwords")["semantic"] == "on"
    local = _vectors(store_dir)
    assert len(local) == len(TEAM) and {m for _, m in local} == {index_mod_model()}
    with FakeOllama() as fake:
        monkeypatch.setenv("RETAINED_EMBED", "ollama")
        monkeypatch.setenv("RETAINED_OLLAMA_URL", fake.url)
        monkeypatch.setenv("RETAINED_EMBED_MODEL", fake.model)
        with Store(store_dir) as store:
            res = store.search("payment token expired")
            assert res["semantic"] == "on"
        assert {m for _, m in _vectors(store_dir)} == {fake.key}
        assert len(_vectors(store_dir)) == len(TEAM)
    monkeypatch.delenv("RETAINED_EMBED")
    with Store(store_dir) as store:
        store.search("passwords")
    assert {m for _, m in _vectors(store_dir)} == {index_mod_model()}


def test_a_re_pulled_ollama_model_re_embeds(store_dir, monkeypatch):
    """The digest Ollama lists for the model is part of the vectors' identity: same name, new weights."""
    from retained import embed

    monkeypatch.setattr(embed, "DIGEST_TTL_S", 0.0)  # ask /api/tags on every search
    with FakeOllama() as fake:
        monkeypatch.setenv("RETAINED_EMBED", "ollama")
        monkeypatch.setenv("RETAINED_OLLAMA_URL", fake.url)
        monkeypatch.setenv("RETAINED_EMBED_MODEL", fake.model)
        with Store(store_dir) as store:
            _seed(store)
            assert store.search("payment token expired")["semantic"] == "on"
            first = fake.key
            assert {m for _, m in _vectors(store_dir)} == {first} and first.startswith("ollama:toy-embed@")
            embedded = sum(len(r["input"]) for r in fake.requests if "input" in r)
            fake.digest = "0f" * 32  # `ollama pull` fetched new weights under the same name
            assert store.search("payment token expired")["semantic"] == "on"
            assert {m for _, m in _vectors(store_dir)} == {fake.key} != {first}
            assert len(_vectors(store_dir)) == len(TEAM)
            again = sum(len(r["input"]) for r in fake.requests if "input" in r) - embedded
            assert again == len(TEAM) + 1  # every record embedded again, plus the query


def index_mod_model() -> str:
    from retained.embed import LOCAL_KEY

    return LOCAL_KEY


def test_vectors_are_rebuilt_after_the_index_is_deleted_and_by_reindex(store_dir):
    with Store(store_dir) as store:
        ids = _seed(store)
        store.search("passwords")
    assert len(_vectors(store_dir)) == len(TEAM)
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(str(store_dir / "index.sqlite3") + suffix)
        except FileNotFoundError:
            pass
    with Store(store_dir) as store:
        res = store.search("which tool holds our passwords?")
        assert res["hits"][0]["id"] == ids["secrets"]
        assert len(_vectors(store_dir)) == len(TEAM)
        receipt = store.reindex()
        assert receipt["embedded"] == len(TEAM) and receipt["semantic"] == "on"
    assert len(_vectors(store_dir)) == len(TEAM)


def test_vectors_never_enter_the_log(store, store_dir):
    _seed(store)
    store.search("passwords")
    for line in (store_dir / "log.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert not any(isinstance(v, list) and len(v) > 50 for v in rec.values())


def test_many_new_records_are_embedded_in_batches_without_blocking_writes(store, store_dir, monkeypatch):
    from retained import store as store_mod

    monkeypatch.setattr(store_mod, "INLINE_EMBED", 8)
    started = time.monotonic()
    for i in range(60):
        assert store.write(f"note {i} about the build cache and flaky tests")["durable"]
    assert time.monotonic() - started < 10
    res = store.search("build cache")
    assert res["semantic"] == "on"
    assert any("not embedded yet" in w for w in res["warnings"])
    deadline = time.monotonic() + 60
    while len(_vectors(store_dir)) < 60 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_vectors(store_dir)) == 60


# -- search semantics --------------------------------------------------------------------------------
def test_prefix_and_stem_matching(store, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")  # the words alone must do it
    ids = _seed(store)
    assert [h["id"] for h in store.search("postgres")["hits"]] == [ids["db"]]
    assert ids["migrate"] in [h["id"] for h in store.search("migrate")["hits"]]
    assert ids["migrate"] in [h["id"] for h in store.search("migrations")["hits"]]


def test_punctuation_and_fts_syntax_are_plain_text(store):
    ids = _seed(store)
    for q in ['"ledger/migrate.py"', "ledger/migrate.py OR *", "NEAR(token expired)", "E4012:", "col:value AND",
              "a\"b", "(((", "-E4012", "^token"]:
        res = store.search(q)
        assert isinstance(res["hits"], list), q
    assert store.search("ledger/migrate.py OR *")["hits"][0]["id"] == ids["path"]


def test_any_word_fallback_is_stated_in_json_and_text(store_dir, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")
    with Store(store_dir) as store:
        _seed(store)
        res = store.search("postgres zebra")
        assert res["match"] == "any" and res["hits"]
        assert any("no record holds every word" in w for w in res["warnings"])
    env = dict(os.environ, RETAINED_DIR=str(store_dir))
    out = subprocess.run([sys.executable, "-m", "retained", "search", "postgres zebra"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "no record holds every word" in out.stdout
    assert "words only (semantic off: RETAINED_EMBED=off)" in out.stdout


def test_total_matched_is_exact_or_marked_a_lower_bound(store, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")
    for i in range(30):
        store.write(f"common word number {i}")
    res = store.search("common", k=5)
    assert res["total_matched"] == 30 and res["total_exact"] is True and res["truncated"] is True
    monkeypatch.setattr(index_search, "RANK_CAP", 10)
    res = store.search("common", k=5)
    assert res["total_exact"] is False and res["total_matched"] >= 10 and res["truncated"] is True
    assert any("lower bound" in w for w in res["warnings"])
    # The newest matches are the ones ranked past the cap.
    assert all(int(h["text"].split()[-1]) >= 20 for h in res["hits"])


# -- point in time -----------------------------------------------------------------------------------
def _supersede_timeline(store):
    old = store.write("The API listens on port 8080.")
    time.sleep(0.01)
    between = now_rfc3339()
    time.sleep(0.01)
    new = store.write("The API listens on port 9090 since the proxy change.", supersedes=old["id"])
    return old, new, between


def test_as_of_before_and_after_a_supersede(store):
    old, new, between = _supersede_timeline(store)
    ids = lambda res, key="hits": [h["id"] for h in res[key]]  # noqa: E731
    assert ids(store.search("API port")) == [new["id"]]
    assert ids(store.search("API port", as_of=between)) == [old["id"]]
    assert "superseded_by" not in store.search("API port", as_of=between)["hits"][0]
    assert ids(store.search("API port", as_of=now_rfc3339())) == [new["id"]]
    assert ids(store.list(as_of=between), "records") == [old["id"]]
    assert ids(store.list(), "records") == [new["id"]]
    assert ids(store.list(as_of="2000-01-01"), "records") == []
    history = store.list(as_of=now_rfc3339(), include_superseded=True)
    assert set(ids(history, "records")) == {old["id"], new["id"]}
    past_history = store.list(as_of=between, include_superseded=True)["records"]
    assert [h["id"] for h in past_history] == [old["id"]] and "superseded_by" not in past_history[0]


def test_as_of_accepts_rfc3339_and_dates_and_refuses_the_rest(store):
    from retained.errors import UsageError

    store.write("hello there")
    for good in ("2999-01-01", "2999-01-01T00:00:00Z", "2999-01-01T00:00:00+02:00", "2999-01-01T00:00:00.5Z"):
        assert store.list(as_of=good)["total"] == 1
    for bad in ("yesterday", "2026-13-01", "", "12:00"):
        with pytest.raises(UsageError, match="as_of"):
            store.list(as_of=bad)


def test_cli_as_of_for_search_list_and_brief(store_dir):
    with Store(store_dir) as store:
        old, new, between = _supersede_timeline(store)
    env = dict(os.environ, RETAINED_DIR=str(store_dir))

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "retained", *args], env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert old["id"] in run("search", "API port", "--as-of", between, "--scope", "*")
    assert new["id"] not in run("search", "API port", "--as-of", between, "--scope", "*")
    listed = json.loads(run("list", "--as-of", between, "--json", "--scope", "*"))
    assert [r["id"] for r in listed["records"]] == [old["id"]]
    brief = run("brief", "--as-of", between, "--scope", "*")
    assert "8080" in brief and "9090" not in brief
    assert "9090" in run("brief", "--scope", "*")


# -- scale -------------------------------------------------------------------------------------------
def test_past_the_exact_size_sign_bits_pick_candidates_and_counts_say_lower_bound(store, monkeypatch):
    from retained import embed

    ids = _seed(store)
    for i in range(40):
        store.write(f"filler note {i} about the office plants and the coffee machine")
    monkeypatch.setattr(embed, "EXACT_MAX", 10)
    monkeypatch.setattr(embed, "APPROX_CANDIDATES", 24)
    res = store.search("which tool holds our passwords?")
    assert res["semantic"] == "on"
    assert res["hits"][0]["id"] == ids["secrets"]
    assert res["total_exact"] is False
    assert store.semantic()._codes is not None  # the sign-bit stage was used


def test_the_vector_cache_grows_past_the_exact_size_and_keeps_cosines_within_int8_error(store, monkeypatch):
    import numpy as np

    from retained import embed

    ids = _seed(store)
    monkeypatch.setattr(embed, "EXACT_MAX", len(TEAM) + 2)
    monkeypatch.setattr(embed, "APPROX_CANDIDATES", 1000)  # rescore them all: compare every cosine
    sem = store.semantic()
    q = sem.query_vector("which tool holds our passwords?")
    assert store.search("which tool holds our passwords?")["hits"][0]["id"] == ids["secrets"]
    exact_lines, exact, approx = sem.similarities(q)
    assert approx is False and sem._codes is None and len(exact_lines) == len(TEAM)
    for i in range(5):  # the cache grows past EXACT_MAX between searches: rows convert to int8 + sign bits
        store.write(f"filler note {i} about the office plants")
    res = store.search("which tool holds our passwords?")
    assert res["hits"][0]["id"] == ids["secrets"] and res["total_exact"] is False
    lines, sims, approx = sem.similarities(q)
    assert approx is True and sem._codes is not None
    assert list(lines) == sorted(lines) and len(lines) == len(TEAM) + 5
    assert np.abs(sims[: len(TEAM)] - exact).max() < 0.01


def test_prompt_hook_with_semantic_off_imports_no_numpy_onnxruntime_or_mcp(store_dir, tmp_path):
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    with Store(store_dir) as store:
        store.write("Database migrations run with make migrate.", scope=str(project.resolve()))
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('numpy', 'onnxruntime', 'mcp'))) + '\\n'))\n"
        "sys.argv = ['retained', 'hook', 'prompt', '--host', 'claude']\n"
        "from retained.entry import main\n"
        "sys.exit(main())\n"
    )
    payload = json.dumps({"session_id": "s-imports", "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                          "prompt": "how do I run the database migrations?"})
    env = dict(os.environ, RETAINED_DIR=str(store_dir), RETAINED_EMBED="off", CLAUDECODE="1")
    out = subprocess.run([sys.executable, "-c", code], input=payload, env=env, capture_output=True, text=True,
                         cwd=project, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "make migrate" in out.stdout
    assert "MODULES \n" in out.stderr, out.stderr


def test_a_model_file_changed_after_it_was_verified_is_hashed_again_and_refused(tmp_path, monkeypatch):
    """The sha256 check is skipped only for the very file state it passed in (inode, size, mtime, ctime)."""
    import shutil

    from retained import embed

    good = tmp_path / "model.onnx"
    shutil.copyfile(embed.LocalEmbedder({}).model_path(), good)
    first = embed.LocalEmbedder({"RETAINED_EMBED_MODEL_PATH": str(good)})
    assert first.embed(["hello"]).shape == (1, embed.LOCAL_DIM)
    stamp_file = embed._stamp_file()
    assert stamp_file is not None and stamp_file.exists()
    with open(good, "r+b") as f:  # same size, one byte different
        f.seek(embed.MODEL_SIZE // 2)
        byte = f.read(1)
        f.seek(embed.MODEL_SIZE // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    second = embed.LocalEmbedder({"RETAINED_EMBED_MODEL_PATH": str(good)})
    with pytest.raises(embed.Unavailable, match="sha256"):
        second.embed(["hello"])


def _rewrites(monkeypatch) -> list[int]:
    """Counts the model's rewrites to int8 compute (retained/onnxgraph.py) in this process."""
    from retained import onnxgraph

    made: list[int] = []
    real = onnxgraph.integer_model

    def counted(data):
        made.append(1)
        return real(data)

    monkeypatch.setattr(onnxgraph, "integer_model", counted)
    return made


def test_the_rewritten_model_is_kept_and_a_fresh_load_maps_it_with_the_same_vectors(tmp_path, monkeypatch):
    """The first load rewrites the model and keeps the result (0600, in the cache dir); the next load (a
    fresh process's) maps it as it is, without reading or rewriting the model, and embeds the same."""
    from retained import embed

    monkeypatch.setenv("RETAINED_CACHE_DIR", str(tmp_path / "cache"))
    earlier = tmp_path / "cache" / "model-int8-8199be6f699a-c7f722d45386.onnx"  # what an earlier version kept
    earlier.parent.mkdir()
    earlier.write_bytes(b"\0" * 1000)
    made = _rewrites(monkeypatch)
    first = embed.LocalEmbedder({}).embed(["when do we ship to production?"])
    assert made == [1]
    kept = embed._mapped_model_file(embed.onnxruntime_module())
    assert kept is not None and kept.exists() and (kept.stat().st_mode & 0o777) == 0o600
    assert not earlier.exists()  # nothing maps that form: its 23 MB are given back
    monkeypatch.setattr(embed.LocalEmbedder, "verified_bytes", lambda self, remember=True: pytest.fail("read the model"))
    fresh = embed.LocalEmbedder({})
    again = fresh.embed(["when do we ship to production?"])
    assert made == [1]
    assert (again == first).all()
    if sys.platform.startswith("linux"):  # mapped, not copied: one copy in the page cache for every process
        assert str(kept.parent / embed.WEIGHTS) in Path("/proc/self/maps").read_text()


def test_a_kept_model_that_changed_is_not_used_and_is_made_again(tmp_path, monkeypatch):
    """The kept model is trusted only in the state it was written in: one byte changed (same size) and it
    is made again from the checked model file; the vectors are the model's."""
    from retained import embed

    monkeypatch.setenv("RETAINED_CACHE_DIR", str(tmp_path / "cache"))
    made = _rewrites(monkeypatch)
    first = embed.LocalEmbedder({}).embed(["which database holds the vectors?"])
    kept = embed._mapped_model_file(embed.onnxruntime_module())
    assert kept is not None
    with open(kept, "r+b") as f:
        f.seek(kept.stat().st_size // 2)
        byte = f.read(1)
        f.seek(kept.stat().st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    embed._GOOD.clear()  # as in a fresh process: only the stamp files say what was checked
    again = embed.LocalEmbedder({}).embed(["which database holds the vectors?"])
    assert made == [1, 1]
    assert (again == first).all()
    assert embed._kept_mapped_model(embed.LocalEmbedder({}).model_path(), embed.onnxruntime_module()) == kept  # made again, trusted again


def test_a_forgotten_record_is_not_found_by_meaning_either(store):
    ids = _seed(store)
    assert store.search("which tool holds our passwords?")["hits"][0]["id"] == ids["secrets"]
    store.forget([ids["secrets"]], "moved to the vault")
    hits = store.search("which tool holds our passwords?")["hits"]
    assert ids["secrets"] not in [h["id"] for h in hits]


def test_an_ollama_model_that_is_not_pulled_answers_lexically_saying_so(store_dir, monkeypatch):
    with FakeOllama(model="toy-embed") as fake:
        monkeypatch.setenv("RETAINED_EMBED", "ollama")
        monkeypatch.setenv("RETAINED_OLLAMA_URL", fake.url)
        monkeypatch.setenv("RETAINED_EMBED_MODEL", "nomic-embed-text")
        with Store(store_dir) as store:
            ids = _seed(store)
            res = store.search("PostgreSQL")
            assert res["semantic"].startswith("off: ollama at 127.0.0.1:") and "404" in res["semantic"]
            assert "nomic-embed-text" in res["semantic"]
            assert [h["id"] for h in res["hits"]] == [ids["db"]]


# -- doctor ------------------------------------------------------------------------------------------
def _doctor_semantic(store_dir, home, **env):
    out = subprocess.run([sys.executable, "-m", "retained", "doctor", "--json", "--host", "claude"],
                         env=dict(os.environ, RETAINED_DIR=str(store_dir), **env), capture_output=True, text=True,
                         timeout=120)
    checks = json.loads(out.stdout)["checks"]
    return next(c for c in checks if c["host"] == "store" and c["check"] == "semantic search")


def test_doctor_reports_the_tier_and_records_without_a_vector_loading_no_model(store_dir, isolate_home, tmp_path):
    with Store(store_dir) as store:
        _seed(store)
    check = _doctor_semantic(store_dir, isolate_home)
    assert check["ok"] is True
    assert f"semantic on; {len(TEAM)} of {len(TEAM)} records have no vector of {index_mod_model()} yet" in check["detail"]
    # It loaded no model: onnxruntime writes files under the user's cache dir when it is imported.
    assert not (isolate_home / ".cache" / "Microsoft").exists()
    with Store(store_dir) as store:
        store.search("passwords")  # embeds them
        store.write("one more record, written after the last search")
    check = _doctor_semantic(store_dir, isolate_home)
    assert f"semantic on; 1 of {len(TEAM) + 1} records have no vector" in check["detail"]
    check = _doctor_semantic(store_dir, isolate_home, RETAINED_EMBED="off")
    assert check["ok"] is True and "semantic off: RETAINED_EMBED=off" in check["detail"]
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\0" * 1000)
    check = _doctor_semantic(store_dir, isolate_home, RETAINED_EMBED_MODEL_PATH=str(bad))
    assert check["ok"] is False and "sha256" in check["detail"] and check["fix"]
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "numpy.py").write_text("raise ImportError('numpy is broken in this install')\n")
    check = _doctor_semantic(store_dir, isolate_home, PYTHONPATH=str(shim))
    assert check["ok"] is False and "numpy cannot be imported" in check["detail"]


def test_a_search_by_meaning_writes_nothing_outside_the_store_and_retaineds_cache(isolate_home, store_dir,
                                                                                 monkeypatch):
    """onnxruntime's telemetry writes a device id under ~/.cache/Microsoft on import: retained turns it off."""
    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    env = dict(os.environ, RETAINED_DIR=str(store_dir))
    env.pop("RETAINED_CACHE_DIR")  # the default: the user cache dir
    run = [sys.executable, "-m", "retained"]
    subprocess.run([*run, "write", "secrets live in 1Password"], env=env, check=True, capture_output=True)
    out = subprocess.run([*run, "search", "--meaning", "which tool holds our passwords?", "--json"], env=env, check=True,
                         capture_output=True, text=True)
    assert json.loads(out.stdout)["semantic"] == "on"
    written = sorted(str(p.relative_to(isolate_home)) for p in isolate_home.rglob("*") if p.is_file())
    assert all(p.startswith(".cache/retained/") for p in written), written
    assert any(p.startswith(".cache/retained/model-") and p.endswith("/weights.bin") for p in written), written  # kept


_CHATTER = ("Ana: morning all, sorry I'm late, the train was stuck again. Ben: no worries, we were catching up on "
            "the weekend. Chris: did anyone see the match last night? Dana: the kitchen is cleaned on Thursday, take "
            "your mugs home. Ben: the coffee machine on the third floor is broken again. Chris: I'm out on Monday for "
            "a dentist appointment. Ana: the all-hands slides are in the shared drive. Ben: welcome to Eli, who "
            "joins us from the design team. Eli: thanks, still finding my way around. Dana: my laptop updated itself "
            "during the demo yesterday. Ana: has anyone booked the big room for planning? Ben: I'll send the notes "
            "afterwards, as usual. Eli: do we get the bank holiday in May? Chris: yes, and the office is closed "
            "between Christmas and new year. Dana: the retro moves to Wednesday because half the team travels. ")


def test_a_long_record_is_found_by_what_its_later_part_says_not_by_its_opening_alone(store):
    """Two conversation logs open alike and differ past the 256 word pieces the model reads: each is
    found first by a paraphrase of its own ending (both hold the query's one shared word, 'decision')."""
    from retained.embed import pieces

    invoices = store.write(_CHATTER + _CHATTER[:250] + "Chris: decision: the billing worker retries failed invoices every six hours.",
                           scope="/p")["id"]
    office = store.write(_CHATTER + _CHATTER[:250] + "Ana: decision: the whole company relocates its headquarters to "
                         "Berlin next spring.", scope="/p")["id"]
    assert len(pieces(_CHATTER * 2)) > 1 and pieces("short text") == ["short text"]
    for query, want in (("the decision on how often we re-attempt unpaid bills", invoices),
                        ("the decision on moving our main office to Germany", office)):
        res = store.search(query, scopes=["/p"], k=2)
        assert res["semantic"] == "on" and res["hits"][0]["id"] == want, (query, res["hits"])
