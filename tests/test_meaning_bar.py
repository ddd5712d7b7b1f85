"""What counts as found by meaning: scores that mean one thing (0..1), no unrelated record "by meaning",
a reply that says when nothing is close, and prompt recall that understands short paraphrased prompts
while staying silent on unrelated ones. Real model, real store."""

from __future__ import annotations

from retained.recall import recall

PROJECT = "/src/api"
TEAM = [
    ("tests", "Run the test suite with `make check`; it starts the docker services the integration tests need."),
    ("db", "Database is PostgreSQL 16 with pgvector for the embedding columns."),
    ("branch", "Branch names follow type/ticket-short-description, for example feat/PLAT-123-rate-limits."),
    ("secrets", "Secrets live in 1Password, vault 'platform'; never commit .env files."),
    ("deploy", "Deploys to production go out on Tuesdays after the release review; no deploys on Fridays."),
    ("errors", "API errors are returned as RFC 7807 problem+json bodies; never return a bare string."),
    ("jobs", "Background jobs run on Dramatiq with RabbitMQ as the broker."),
    ("error", "Error ERR_QUOTA_429 means the tenant exceeded its monthly quota; it is not retried."),
]


def _seed(store) -> dict[str, str]:
    return {name: store.write(text, scope=PROJECT)["id"] for name, text in TEAM}


def test_scores_stay_between_0_and_1_and_fall_with_rank_even_for_identifiers(store):
    ids = _seed(store)
    for query in ("ERR_QUOTA_429", "what does ERR_QUOTA_429 mean for the tenant quota", "which broker runs jobs?",
                  "feat/PLAT-123-rate-limits"):
        res = store.search(query, scopes=[PROJECT])
        scores = [h["score"] for h in res["hits"]]
        assert scores and all(0 <= s <= 1 for s in scores), (query, scores)
        assert scores == sorted(scores, reverse=True)
    assert store.search("ERR_QUOTA_429", scopes=[PROJECT])["hits"][0]["id"] == ids["error"]


def test_a_weak_best_hit_scores_low_instead_of_near_one(store):
    _seed(store)
    strong = store.search("which message broker do background jobs use?", scopes=[PROJECT])["hits"][0]["score"]
    # Holds one word of it ('release') and means something else: a weak hit, scored as one.
    weak = store.search("who brings the cake to the release party?", scopes=[PROJECT])["hits"]
    assert strong >= 0.5
    assert weak and all(h["score"] < 0.35 for h in weak), weak


def test_gibberish_finds_no_short_record_by_meaning_and_the_reply_says_nothing_is_close(store):
    for text in ("hello", "hi", "Deploys go out on Tuesdays.", "Run the test suite with make check."):
        store.write(text)
    res = store.search("xxxx")
    assert res["hits"] == [] and res["total_matched"] == 0
    assert any("close to it in meaning" in w for w in res["warnings"])
    assert not any("showing records" in w for w in res["warnings"])


def test_a_purged_name_brings_back_no_unrelated_record_by_meaning(store):
    ids = _seed(store)
    assert store.search("1Password", scopes=[PROJECT])["hits"][0]["id"] == ids["secrets"]
    store.purge([ids["secrets"]], reason="rotated")
    res = store.search("1Password", scopes=[PROJECT])
    assert [h["text"][:20] for h in res["hits"]] == [], res["hits"]
    assert res["total_matched"] == 0


def test_an_empty_any_word_result_does_not_claim_to_show_records(store):
    _seed(store)
    res = store.search("zzyzx quux", scopes=[PROJECT])
    assert res["hits"] == []
    assert not any("showing records" in w for w in res["warnings"])
    assert any("no record holds the words" in w for w in res["warnings"])


def test_recall_injects_the_answer_to_a_short_paraphrased_prompt(store):
    ids = _seed(store)
    for prompt, want in (("how do we run the tests?", "tests"), ("which database do we use for vectors?", "db"),
                         ("what should I name my branch?", "branch")):
        got = recall(store, prompt, project=PROJECT, shown=set())
        assert got is not None and ids[want] in got["ids"], (prompt, got)


def test_recall_stays_silent_on_unrelated_prompts(store):
    _seed(store)
    for prompt in ("rename this variable", "thanks!", "explain this function", "make it faster", "ok, continue",
                   "sort this list by date", "write a haiku about autumn", "how do I center a div?"):
        assert recall(store, prompt, project=PROJECT, shown=set()) is None, prompt


def test_recall_bridges_a_kind_of_tool_to_the_tool_a_record_names_and_stays_silent_on_another_sense(store):
    """'the container orchestrator' is Kubernetes, 'crash reports' go to Sentry: neither the words nor the
    small model join them; the shipped vocabulary does. A kind word meant another way stays silent."""
    k8s = store.write("Production runs on Kubernetes (EKS); deploy with `kubectl apply -k deploy/overlays/prod`.",
                      scope=PROJECT)["id"]
    sentry = store.write("Sentry collects our exceptions; releases are tagged with the git sha.", scope=PROJECT)["id"]
    store.write("Sessions and rate-limit counters are kept in Redis 7; keys expire after 30 minutes.", scope=PROJECT)
    store.write("Commit messages follow Conventional Commits (feat:, fix:, chore:).", scope=PROJECT)
    for prompt, want in (("roll out the new build to the container orchestrator", k8s),
                         ("where do crash reports from prod end up?", sentry)):
        got = recall(store, prompt, project=PROJECT, shown=set())
        assert got is not None and got["ids"][0] == want, (prompt, got)
    assert recall(store, "how does a CPU cache work?", project=PROJECT, shown=set()) is None
    assert store.search("the container orchestrator", scopes=[PROJECT])["hits"][0]["id"] == k8s


def test_the_vocabulary_names_tools_by_kind_and_leaves_out_what_the_text_holds():
    from retained.vocabulary import bridged

    assert "kubernetes" in bridged("restart the container orchestrator") and bridged("restart the container orchestrator")["kubernetes"]
    assert bridged("why did CI fail")["github actions"] is False  # one word: a weaker bridge
    assert "kubernetes" not in bridged("the kubernetes cluster") and "k8s" in bridged("the kubernetes cluster")
    assert bridged("write a haiku about autumn") == {}


def test_a_query_that_matches_k_records_returns_k_when_fewer_hold_every_word(store_dir, monkeypatch):
    """The every-word gate falls back: records holding some of the words fill the rest, after the one
    holding them all (words only here, where nothing else could fill them)."""
    from retained.store import Store

    monkeypatch.setenv("RETAINED_EMBED", "off")
    with Store(store_dir) as s:
        both = s.write("The canary deploy holds 5% of traffic for two hours.", scope=PROJECT)["id"]
        some = {s.write(text, scope=PROJECT)["id"] for text in (
            "Deploys go out on Tuesdays after the release review.",
            "Every deploy is announced in the releases channel first.",
            "The canary cluster runs in eu-west-1.")}
        s.write("Branch names follow type/ticket-short-description.", scope=PROJECT)
        res = s.search("canary deploy", scopes=[PROJECT], k=4)
    assert [h["id"] for h in res["hits"]][0] == both
    assert {h["id"] for h in res["hits"][1:]} == some and res["returned"] == 4
    scores = [h["score"] for h in res["hits"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]


def test_one_source_does_not_fill_the_top_k(store):
    """Six records of one conversation log and two of other sources all hold the words: the top 4 holds
    the other sources too, and scores still fall with rank."""
    others = {store.write(f"Ben: the retry budget of the importer is {n} attempts per hour, reviewed weekly by us.",
                          scope=PROJECT, source=f"notes-{n}")["id"] for n in (10, 12)}  # older, a little longer
    log = {store.write(f"Ana: the retry budget of the importer is {n} attempts per hour, reviewed weekly.",
                       scope=PROJECT, source="chat-2026-09-01")["id"] for n in range(3, 9)}
    res = store.search("retry budget of the importer", scopes=[PROJECT], k=4)
    top = [h["id"] for h in res["hits"]]
    assert len(top) == 4 and others <= set(top) and len(set(top) & log) == 2, top
    scores = [h["score"] for h in res["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_text_in_scripts_written_without_spaces_is_found_by_a_part_of_a_word(store_dir, monkeypatch):
    """Japanese and Chinese are written without spaces: full-text search sees a whole run as one word,
    so '会議' never matched '東京都庁で会議があります'. By words alone, as with meaning."""
    from retained.store import Store

    monkeypatch.setenv("RETAINED_EMBED", "off")
    with Store(store_dir) as s:
        meeting = s.write("東京都庁で会議があります。来週の月曜日です。", scope=PROJECT)["id"]
        deploy = s.write("本番環境へのデプロイは火曜日に行います。", scope=PROJECT)["id"]
        migrate = s.write("数据库迁移使用 make migrate 命令。", scope=PROJECT)["id"]
        s.write("Deploys go out on Tuesdays.", scope=PROJECT)
        for query, want in (("会議", meeting), ("デプロイ", deploy), ("迁移", migrate), ("月曜日 会議", meeting)):
            res = s.search(query, scopes=[PROJECT])
            assert [h["id"] for h in res["hits"]] == [want], (query, res)
            assert res["match"] == "all" and res["hits"][0]["match"] == "words"
        assert s.search("会議室", scopes=[PROJECT])["hits"] == []
