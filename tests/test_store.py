"""The store's promises: supersede (I3), honest reads (I2), idempotency, fields, secrets, safety."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from retained import records
from retained.errors import NotFound, Refused, StoreError, UsageError
from retained.store import Store


# -- supersede (I3) -------------------------------------------------------------------------------
def test_supersede_never_rewrites_and_search_serves_the_head(store, store_dir):
    old = store.write("the database is postgres 14")
    before = (store_dir / "log.jsonl").read_bytes()
    new = store.write("the database is sqlite, we dropped postgres", supersedes=old["id"])
    assert (store_dir / "log.jsonl").read_bytes().startswith(before)  # appended, never rewritten

    hits = store.search("postgres")["hits"]
    assert [h["id"] for h in hits] == [new["id"]]
    assert hits[0]["supersedes"] == old["id"]
    history = store.search("postgres", include_superseded=True)["hits"]
    assert {h["id"] for h in history} == {old["id"], new["id"]}
    assert next(h for h in history if h["id"] == old["id"])["superseded_by"] == new["id"]
    # A query that only matches the old wording still resolves to the current record.
    assert [h["id"] for h in store.search("14")["hits"]] == [new["id"]]


def test_superseding_an_already_superseded_record_is_refused_naming_the_head(store):
    a = store.write("deploy on fridays")
    b = store.write("never deploy on fridays", supersedes=a["id"])
    with pytest.raises(Refused, match=f"already corrected by {b['id']}"):
        store.write("deploy on fridays before noon", supersedes=a["id"])
    # The decision the head holds is still the one served.
    assert [h["id"] for h in store.search("fridays")["hits"]] == [b["id"]]
    assert store.list()["total"] == 1 and store.verify()["records"] == 2
    c = store.write("deploy on fridays before noon", supersedes=b["id"])
    assert [h["id"] for h in store.search("fridays")["hits"]] == [c["id"]]


def test_a_correction_keeps_the_scope_of_the_record_it_corrects(store):
    pref = store.write("the user prefers tabs", kind="preference", scope="global")
    fix = store.write("the user prefers spaces", kind="preference", supersedes=pref["id"], default_scope="/p/proj")
    assert store.get([fix["id"]])["records"][0]["scope"] == "global"
    local = store.write("the build runs make", scope="/p/proj")
    moved = store.write("the build runs ninja", supersedes=local["id"], scope="/p/other")
    assert store.get([moved["id"]])["records"][0]["scope"] == "/p/other"  # a scope given wins
    plain = store.write("a new fact", default_scope="/p/proj")
    assert store.get([plain["id"]])["records"][0]["scope"] == "/p/proj"


def test_an_exact_duplicate_is_not_written_again(store):
    first = store.write("Tests run with  pytest -q", kind="convention", scope="/p")
    again = store.write("tests run with pytest -q", kind="convention", scope="/p")
    assert again["deduplicated"] is True and again["durable"] is True
    assert (again["id"], again["seq"], again["sha256"]) == (first["id"], first["seq"], first["sha256"])
    assert any("identical" in w and first["id"] in w for w in again["warnings"])
    # Another kind or scope is another memory; a retracted one no longer counts as current.
    assert store.write("tests run with pytest -q", kind="note", scope="/p")["deduplicated"] is False
    assert store.write("tests run with pytest -q", kind="convention", scope="/q")["deduplicated"] is False
    store.forget([first["id"]], "re-stated below")
    assert store.write("tests run with pytest -q", kind="convention", scope="/p")["deduplicated"] is False
    cp = store.checkpoint("auth refactor: tokens moved", "next: tests", scope="/p")
    assert store.checkpoint("auth refactor: tokens moved", "next: tests", scope="/p")["id"] == cp["id"]


def test_a_near_duplicate_write_is_warned_naming_the_record(store):
    old = store.write("the staging database runs postgres 15 on the shared cluster", kind="fact", scope="/p")
    new = store.write("the staging database runs postgres 16 on the shared cluster", kind="fact", scope="/p")
    assert new["deduplicated"] is False and new["durable"] is True
    assert any(old["id"] in w and "supersedes" in w for w in new["warnings"]), new["warnings"]
    other = store.write("the frontend is built with vite and deployed to the edge", kind="fact", scope="/p")
    assert not any("closely matches" in w for w in other["warnings"])
    elsewhere = store.write("the staging database runs postgres 17 on the shared cluster", kind="fact", scope="/q")
    assert not any("closely matches" in w for w in elsewhere["warnings"])


def test_a_long_near_duplicate_is_warned_too_and_a_long_different_text_is_not(store):
    # Past 1,000 characters texts are compared word by word (by characters, two long records took
    # minutes): one changed word in 300 is still close; the same words in another order are not.
    words = [f"w{i % 97}x{i}" for i in range(300)]
    old = store.write("release notes " + " ".join(words), scope="/p")
    changed = words[:150] + ["different"] + words[151:]
    near = store.write("release notes " + " ".join(changed), scope="/p")
    assert any(old["id"] in w and "closely matches" in w for w in near["warnings"]), near["warnings"]
    shuffled = store.write("release notes " + " ".join(words[::-1]), scope="/p")
    assert not any("closely matches" in w for w in shuffled["warnings"]), shuffled["warnings"]


def _difflib_closeness(mine, theirs, min_length_ratio=0.0):
    """The near-duplicate measure as it was before its bounds: difflib's ratio, its two quick checks first."""
    import difflib

    if isinstance(mine, str) != isinstance(theirs, str):
        mine, theirs = (records._near_words(x) if isinstance(x, str) else x for x in (mine, theirs))
    if not mine or not theirs or min(len(mine), len(theirs)) / max(len(mine), len(theirs)) < min_length_ratio:
        return None
    match = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
    if match.real_quick_ratio() < records.NEAR_RATIO or match.quick_ratio() < records.NEAR_RATIO:
        return None
    ratio = match.ratio()
    return ratio if ratio >= records.NEAR_RATIO else None


def test_the_near_duplicate_bounds_never_change_a_verdict_of_difflibs_ratio():
    # closeness turns most pairs away by bounds (lengths, shared characters, longest common
    # subsequence) before difflib's ratio: every pair must still get exactly what the ratio gives,
    # near duplicates and strangers, short texts and long ones compared by words, one prepared text
    # against many.
    import random

    rng = random.Random(18)
    vocab = ["the", "staging", "database", "runs", "postgres", "on", "shared", "cluster", "deploy", "tests",
             "pytest", "q", "a", "é", "naïve", "ß", "日本", "x"]

    def text(n):
        return " ".join(rng.choice(vocab) for _ in range(n))

    def edited(t, k):
        words = t.split()
        for _ in range(k):
            i = rng.randrange(len(words))
            words[i] = rng.choice(vocab) if rng.random() < 0.7 else words[i] + rng.choice(vocab)
        return " ".join(words)

    pairs = []
    for _ in range(400):
        a = text(rng.randint(1, 40))
        pairs.append((a, edited(a, rng.randint(0, 4))))  # near duplicates, and some not quite
        pairs.append((a, text(rng.randint(1, 40))))  # strangers from the same words
    long = text(400)
    pairs += [(long, edited(long, 3)), (long, edited(long, 60)), (long, "short text"), ("", "x"), ("abc", "")]
    verdicts = set()
    for a, b in pairs:
        fa, fb = records.near_form(a), records.near_form(b)
        prepared = records.Near(fa)
        for ratio in (0.0, records.NEAR_RATIO):
            want = _difflib_closeness(fa, fb, ratio)
            assert records.closeness(fa, fb, ratio) == want, (a, b)
            assert prepared.closeness(fb, ratio) == want, (a, b)
            verdicts.add(want is None)
    assert verdicts == {True, False}  # both verdicts were met


def test_supersedes_must_name_an_existing_record(store):
    with pytest.raises(NotFound, match="not a record"):
        store.write("x", supersedes="mem_DOESNOTEXIST")
    assert store.verify()["records"] == 0


# -- idempotency --------------------------------------------------------------------------------
def test_repeated_client_op_id_returns_the_first_receipt(store):
    first = store.write("once", client_op_id="op-1")
    again = store.write("twice?", client_op_id="op-1")
    assert again["deduplicated"] is True and first["deduplicated"] is False
    assert (again["id"], again["seq"], again["sha256"]) == (first["id"], first["seq"], first["sha256"])
    assert store.verify()["records"] == 1


# -- fields -------------------------------------------------------------------------------------
def test_fields_are_stored_verbatim_at_top_level(store):
    fields = {"ticket": "ABC-12", "nested": {"list": [1, "two", None, True], "ü": "ß"}, "pr": 42}
    r = store.write("with fields", fields=fields)
    rec = store.get([r["id"]])["records"][0]
    for k, v in fields.items():
        assert rec[k] == v


@pytest.mark.parametrize("key", sorted(records.RESERVED_KEYS))
def test_reserved_field_names_are_a_clear_error(store, key):
    with pytest.raises(UsageError, match="reserved"):
        store.write("x", fields={key: 1})
    assert store.verify()["records"] == 0


# -- reads say what they left out (I2) ----------------------------------------------------------
def test_search_counts_what_it_did_not_return(store):
    for i in range(12):
        store.write(f"alpha fact {i}")
    res = store.search("alpha")
    assert (res["returned"], res["total_matched"], res["truncated"]) == (8, 12, True)
    res = store.search("alpha", k=100)
    assert (res["returned"], res["truncated"]) == (12, False)


def test_max_tokens_trims_and_says_so(store):
    for i in range(5):
        store.write(f"beta {i} " + "words " * 50)
    res = store.search("beta", max_tokens=100)
    assert res["truncated"] is True and res["returned"] < 5
    assert any("max_tokens" in w for w in res["warnings"])
    tiny = store.search("beta", max_tokens=20)
    assert tiny["returned"] == 1 and tiny["hits"][0]["text_truncated"] is True
    whole = store.get([tiny["hits"][0]["id"]])["records"][0]["text"]
    # The cut is counted, not written into the text: text_chars is the whole text's length.
    assert tiny["hits"][0]["text_chars"] == len(whole) and whole.startswith(tiny["hits"][0]["text"])


@pytest.mark.parametrize("query", ['"unbalanced', "AND", "OR NOT", "a:b", "*", "NEAR(x y)", "(((", "col:val^",
                                   "-minus", "'; DROP TABLE records; --", "\x00", "", "   ", "ünïcödé 日本"])
def test_any_string_is_a_valid_query(store, query):
    store.write("plain text ünïcödé 日本 about a:b and minus")
    res = store.search(query)
    assert set(res) >= {"hits", "total_matched", "returned", "truncated"}


def test_bm25_ranking_with_recency_tie_break(store, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")  # the lexical tier's own order (with meaning, the blend decides)
    store.write("cache cache cache invalidation rules")
    store.write("a note that mentions cache once among many other unrelated words here")
    tie_old = store.write("identical tie text")
    tie_new = store.write("identical tie text", kind="fact")  # another kind: not a duplicate
    assert store.search("cache")["hits"][0]["text"].startswith("cache cache")
    assert [h["id"] for h in store.search("identical tie")["hits"]] == [tie_new["id"], tie_old["id"]]


def test_scope_and_kind_filters(store):
    a = store.write("shared word", scope="/proj/a", kind="decision")
    b = store.write("shared word", scope="/proj/b")
    g = store.write("shared word")
    ids = lambda res: {h["id"] for h in res["hits"]}  # noqa: E731
    assert ids(store.search("shared", scopes=["/proj/a", "global"])) == {a["id"], g["id"]}
    assert ids(store.search("shared", kind="decision")) == {a["id"]}
    assert ids(store.search("shared")) == {a["id"], b["id"], g["id"]}
    assert {h["scope"] for h in store.search("shared")["hits"]} == {"/proj/a", "/proj/b", "global"}
    assert store.list(scopes=["/proj/b"])["records"][0]["id"] == b["id"]


@pytest.mark.parametrize("scope", ["a\x00b", "../etc", "x/../y", "", "line\nbreak", " padded "])
def test_unsafe_scopes_are_refused(store, scope):
    with pytest.raises(UsageError):
        store.write("x", scope=scope)


def test_list_is_newest_first_and_pages_with_an_opaque_cursor(store):
    receipts = [store.write(f"item {i}") for i in range(7)]
    page = store.list(limit=3)
    assert [r["seq"] for r in page["records"]] == [7, 6, 5]
    assert (page["total"], page["returned"], page["truncated"]) == (7, 3, True)
    assert isinstance(page["next_cursor"], str) and re.fullmatch(r"[a-z2-7]+", page["next_cursor"])
    page2 = store.list(limit=3, cursor=page["next_cursor"])
    assert [r["seq"] for r in page2["records"]] == [4, 3, 2] and page2["truncated"] is True
    last = store.list(limit=3, cursor=page2["next_cursor"])
    assert [r["seq"] for r in last["records"]] == [1] and last["truncated"] is False and last["next_cursor"] is None
    assert receipts[0]["id"] == last["records"][0]["id"]


@pytest.mark.parametrize("cursor", ["", "x", "not a cursor!", "aaaaaaaa", "MTIzLjQ1Ni5t", "gays4mbonvsw2x2y",
                                    "gexdaltnmvwquwa", "gexgoltnmvwv6wa", 5, "a" * 500])
def test_a_bad_cursor_is_a_one_line_usage_error(store, cursor):
    store.write("one record")
    with pytest.raises(UsageError) as e:
        store.list(cursor=cursor)
    assert "\n" not in str(e.value) and "next_cursor" in str(e.value)


def test_get_reports_missing_and_counts(store):
    r = store.write("present")
    res = store.get([r["id"], "mem_NOPE"])
    assert [x["id"] for x in res["records"]] == [r["id"]]
    assert res["missing"] == ["mem_NOPE"] and res["corrupt_lines"] == 0 and res["chain_ok"] is True


# -- the index in the background (the MCP server's stores) --------------------------------------
def _indexed_to(store_dir) -> int:
    """Where the index file says it stands in the log (bytes), read without catching up."""
    import sqlite3

    db = sqlite3.connect(store_dir / "index.sqlite3")
    try:
        return json.loads(db.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()[0])["offset"]
    finally:
        db.close()


def test_with_the_index_in_background_every_read_right_after_a_write_finds_it_here_and_elsewhere(store_dir):
    from tests.conftest import cli_json

    with Store(store_dir) as store:
        store.index.catch_up_in_background()
        first = store.write("the release train leaves on tuesdays", scope="/p")
        assert store.index._follower is not None
        for i in range(25):
            r = store.write(f"note {i}: the zebra{i} rollout waits for the canary", scope="/p")
            assert r["durable"] and r["deduplicated"] is False
            assert not any("index" in w for w in r["warnings"]), r["warnings"]
            # the next write's duplicate check, at once and without a read in between
            same = store.write(f"note {i}: the zebra{i} rollout waits for the canary", scope="/p")
            assert same["deduplicated"] is True and same["id"] == r["id"]
            # this process, at once: search, get and list
            assert r["id"] in [h["id"] for h in store.search(f"zebra{i}", scopes=["/p"])["hits"]]
            assert [x["id"] for x in store.get([r["id"]])["records"]] == [r["id"]]
            assert store.list(scopes=["/p"], limit=1)["records"][0]["id"] == r["id"]
        again = store.write("the release train leaves on tuesdays", scope="/p")
        assert again["deduplicated"] is True and again["id"] == first["id"]
        # another process, right after the receipt, while this one may still be catching up
        r = store.write("the quokka migration needs a second reviewer", scope="/p")
        found = cli_json("search", "quokka", "--scope", "/p")
        assert r["id"] in [h["id"] for h in found["hits"]]
        last = store.write("the wombat cache is warmed at boot", scope="/p")
    # close lets the catch-up under way finish: the index file has taken in the last line
    assert _indexed_to(store_dir) == (store_dir / "log.jsonl").stat().st_size
    with Store(store_dir) as store:
        assert last["id"] in [h["id"] for h in store.search("wombat", scopes=["/p"])["hits"]]


def test_a_background_catch_up_that_fails_costs_the_write_nothing_and_the_next_read_catches_up(store_dir, monkeypatch):
    import sqlite3
    import threading

    with Store(store_dir) as store:
        real = store.index.catch_up
        failed = []

        def catch_up(*args, **kw):
            if threading.current_thread().name == "retained-index":
                failed.append(True)
                raise sqlite3.OperationalError("database is locked")
            return real(*args, **kw)

        monkeypatch.setattr(store.index, "catch_up", catch_up)
        store.index.catch_up_in_background()
        r = store.write("the ferret build runs nightly")
        assert r["durable"] and r["warnings"] == []
        store.index._follower.stop()  # the background catch-up has run (and failed)
        assert failed
        result = store.search("ferret")
        assert r["id"] in [h["id"] for h in result["hits"]] and result["warnings"] == []


def test_with_the_index_in_background_writes_and_reads_from_threads_lose_nothing(store_dir):
    import threading

    errors: list[str] = []
    with Store(store_dir) as store:
        store.index.catch_up_in_background()

        def drive(tag: str) -> None:
            for i in range(15):
                r = store.write(f"{tag} wrote item{tag}{i} today", scope="/p")
                hits = [h["id"] for h in store.search(f"item{tag}{i}", scopes=["/p"], k=100)["hits"]]
                if not r["durable"] or r["id"] not in hits:
                    errors.append(f"{tag} {i}: {r} {hits}")

        threads = [threading.Thread(target=drive, args=(t,)) for t in ("a", "b", "c")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        report = store.verify()
        assert report["records"] == 45 and report["intact"] is True


# -- round trips --------------------------------------------------------------------------------
UNICODE_SAMPLES = [
    "plain ascii",
    "Grüße, café, naïve, Ångström",
    "日本語のテキスト 中文 한국어",
    "emoji 🧠💾✅ and flags 🇩🇪 and ZWJ 👩‍💻",
    "combining e\u0301 and Hangul jamo \u1100\u1161",
    "rtl עברית العربية",
    "line\nbreaks\r\nand\ttabs",
    "separators \u2028 and \u2029 and \u0085 NEL",
    "NUL \x00 and BEL \x07 and DEL \x7f",
    "zero width \u200b\u200c\u200d\ufeff BOM",
    "astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀 \U0010fffd",
    "quotes \" ' ` and backslash \\ and slash /",
]


@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_unicode_round_trips_byte_exact(store, store_dir, text):
    r = store.write(text)
    rec = store.get([r["id"]])["records"][0]
    assert rec["text"] == text
    assert store.verify()["intact"] is True
    assert (store_dir / "log.jsonl").read_bytes().count(b"\n") == 1


def test_four_mib_record_round_trips_byte_exact(store):
    chunk = "".join(UNICODE_SAMPLES)
    text = (chunk * (4 * 1024 * 1024 // len(chunk.encode()) + 1))
    assert len(text.encode()) >= 4 * 1024 * 1024
    r = store.write(text)
    assert r["durable"] is True
    assert store.get([r["id"]])["records"][0]["text"] == text


def test_lone_surrogate_is_refused(store):
    with pytest.raises(UsageError, match="surrogate"):
        store.write("bad \ud800 text")


# -- secrets -----------------------------------------------------------------------------------
SECRETS = {
    "aws_access_key_id": "AKIAQWERTYUIOPASDFGH",
    "aws_secret_access_key": "aws_secret_access_key=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",
    "github_token": "ghp_R4nd0mT0k3nV4lu3ThatIsLongEnough12345",
    "gitlab_token": "glpat-Xy12Zw34Vu56Ts78Rq90",
    "slack_token": "xoxb-2048-4096-AbCdEfGhIjKlMnOp",
    "openai_api_key": "sk-proj-Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8Oo9Pp0",
    "anthropic_api_key": "sk-ant-api03-Zz9Xx8Cc7Vv6Bb5Nn4Mm3",
    "private_key_block": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "url_password": "postgres://admin:S3cretPassw0rd@db.internal:5432/app",
    "password_assignment": "password=Tr0ub4dor&3xyz",
}
SECRET_VALUES = ["AKIAQWERTYUIOPASDFGH", "Zx8Kp2Lm9Qw3Er7Ty1Ui5Op0As4Df6Gh8Jk2Lz9X", "ghp_R4nd0mT0k3nV4lu3",
                 "glpat-Xy12Zw34", "xoxb-2048-4096", "sk-proj-Qq1Ww2", "sk-ant-api03-Zz9", "b3BlbnNzaC1rZXktdjEA",
                 "S3cretPassw0rd", "Tr0ub4dor"]


def test_planted_secrets_reach_neither_the_log_nor_the_index(store, store_dir):
    text = "config notes: " + " ; ".join(SECRETS.values())
    r = store.write(text, source="https://bob:hunter2hunter2@example.com/x",
                    fields={"env": {"GITHUB_TOKEN": SECRETS["github_token"]}})
    assert r["durable"]
    named = " ".join(r["warnings"])
    for kind in SECRETS:
        assert kind in named
    store.search("config notes")
    store.reindex()
    blobs = b"".join(p.read_bytes() for p in store_dir.rglob("*") if p.is_file())
    for value in SECRET_VALUES + ["hunter2hunter2"]:
        assert value.encode() not in blobs, value
    assert b"[REDACTED:github_token]" in (store_dir / "log.jsonl").read_bytes()


def test_redaction_opt_out(store, store_dir, monkeypatch):
    monkeypatch.setenv("RETAINED_REDACT", "off")
    store.write("token ghp_R4nd0mT0k3nV4lu3ThatIsLongEnough12345")
    assert b"ghp_R4nd0mT0k3nV4lu3" in (store_dir / "log.jsonl").read_bytes()


def test_ordinary_prose_and_code_survive_redaction(store):
    text = "we set the token budget: 800 tokens; def login(password): check(password=password, token=self.token)"
    r = store.write(text)
    assert store.get([r["id"]])["records"][0]["text"] == text and r["warnings"] == []


# -- the store directory --------------------------------------------------------------------------
def test_store_dir_is_private(store, store_dir):
    store.write("x")
    store.search("x")  # the index file is made on first read
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o700
    for name in ("log.jsonl", "index.sqlite3", "log.lock"):
        assert stat.S_IMODE((store_dir / name).stat().st_mode) == 0o600, name


def test_symlinked_log_is_refused(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    real = tmp_path / "elsewhere.jsonl"
    real.write_bytes(b"")
    (d / "log.jsonl").symlink_to(real)
    with pytest.raises(StoreError, match="symbolic link"):
        Store(d)


def test_hard_linked_log_is_refused(tmp_path):
    d = tmp_path / "s"
    Store(d).write("x")
    os.link(d / "log.jsonl", tmp_path / "other-name")
    with pytest.raises(StoreError, match="hard links"):
        Store(d)


def test_default_dir_matches_platformdirs(monkeypatch, tmp_path):
    import platformdirs

    from retained.paths import default_data_dir, store_dir

    monkeypatch.delenv("RETAINED_DIR")
    for xdg in (str(tmp_path / "xdg"), None):
        if xdg:
            monkeypatch.setenv("XDG_DATA_HOME", xdg)
        else:
            monkeypatch.delenv("XDG_DATA_HOME")
        assert default_data_dir() == platformdirs.user_data_path("retained", appauthor=False)
    assert store_dir() == default_data_dir()
    monkeypatch.setenv("RETAINED_DIR", str(tmp_path / "env"))
    assert store_dir() == tmp_path / "env"
    assert store_dir(tmp_path / "flag") == tmp_path / "flag"


def test_processes_racing_to_create_the_store_both_succeed(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "racy" / "store"
    code = "import os, sys; from retained.store import Store; Store(sys.argv[1]).write(f'hi {os.getpid()}'); print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [o[0].strip() for o in outs] == ["ok"] * 6, outs
    with Store(target) as s:
        assert s.verify()["records"] == 6


def test_get_without_ids_says_how_many_it_left_out(store):
    for i in range(5):
        store.write(f"r{i}")
    res = store.get(None, limit=2)
    assert [r["text"] for r in res["records"]] == ["r4", "r3"]
    assert res["total"] == 5 and res["truncated"] is True


def test_read_only_store_changes_no_file_and_refuses_writes(store_dir):
    with Store(store_dir) as s:
        s.write("indexed record about kittens")
        s.search("kittens")  # the index has this one
        last = json.loads((store_dir / "log.jsonl").read_bytes().splitlines()[-1])
        newer = records.seal({"seq": last["seq"] + 1, "id": "ext-newer", "ts": last["ts"], "kind": "note",
                              "text": "a newer record about kittens", "prev": last["sha256"]})
        with open(store_dir / "log.jsonl", "ab") as f:  # appended by another program: not indexed yet
            f.write(records.format_line(newer))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in store_dir.rglob("*") if p.is_file()}
    with Store(store_dir, read_only=True) as ro:
        assert ro.search("kittens")["total_matched"] == 2  # caught up in memory
        report = ro.verify()
        assert report["records"] == 2 and report["intact"] is True
        with pytest.raises(StoreError, match="read-only"):
            ro.write("nope")
        with pytest.raises(StoreError, match="read-only"):
            ro.reindex()
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in store_dir.rglob("*") if p.is_file()}
    assert after == before
    with Store(store_dir) as s:  # a normal open catches up on disk as always
        s.search("kittens")
    assert (store_dir / "index.sqlite3").stat().st_mtime_ns != before[store_dir / "index.sqlite3"][1]


def test_read_only_store_without_index_or_directory(tmp_path):
    with Store(tmp_path / "s") as s:
        s.write("only in the log")
    for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):  # a store with no index yet
        (tmp_path / "s" / name).unlink(missing_ok=True)
    with Store(tmp_path / "s", read_only=True) as ro:
        assert ro.search("log")["total_matched"] == 1 and ro.verify()["intact"] is True
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["log.jsonl", "log.lock"]
    with pytest.raises(StoreError):
        Store(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()
