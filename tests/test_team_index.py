"""Issue 19 item 1: the index reads every mirrored writer log beside the local log. Real git, a bare
remote, several machines (separate HOMEs and stores); the reads are the store's own."""

from __future__ import annotations

from retained.team import state
from tests.helpers.team import PROJECT, share_all, store_sync


def _sync_all(*ms, rounds=2):
    for _ in range(rounds):
        for m in ms:
            result = store_sync(m)
            assert result.ok, result


def test_teammates_records_are_visible_to_search_list_get_and_brief_with_their_author(machines):
    from retained.brief import make_brief

    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    theirs = ann.write("we deploy the shop on Tuesdays", kind="decision")
    mine = bob.write("the shop's API is versioned in the URL", kind="convention")
    _sync_all(ann, bob)
    with bob.environment():
        hits = {h["id"]: h for h in bob.store.search("shop")["hits"]}
        assert set(hits) == {theirs, mine}
        assert hits[theirs]["writer"] == ann.writer and hits[theirs]["author"] == "Ann Tester <ann@example.com>"
        assert "writer" not in hits[mine]  # bob's own record comes from his own log
        listed = {r["id"]: r for r in bob.store.list()["records"]}
        assert listed[theirs]["author"] == "Ann Tester <ann@example.com>"
        got = bob.store.get([theirs])["records"][0]
        assert got["text"] == "we deploy the shop on Tuesdays" and got["writer"] == ann.writer
        assert got["author"] == {"name": "Ann Tester", "email": "ann@example.com"}
        brief = make_brief(bob.store, PROJECT)["text"]
        assert "we deploy the shop on Tuesdays" in brief and "by Ann Tester" in brief
    with ann.environment():
        assert {h["id"] for h in ann.store.search("shop")["hits"]} == {theirs, mine}


def test_rows_are_identified_by_record_id_and_a_teammates_correction_supersedes_across_logs(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    first = ann.write("the cache holds sessions for 10 minutes", kind="fact")
    _sync_all(ann, bob)
    with bob.environment():
        fixed = bob.store.write("the cache holds sessions for 30 minutes", kind="fact", supersedes=first)["id"]
        assert [h["id"] for h in bob.store.search("cache sessions")["hits"]] == [fixed]
    _sync_all(bob, ann)
    for m in (ann, bob):
        with m.environment():
            assert [h["id"] for h in m.store.search("cache sessions")["hits"]] == [fixed]
            assert m.store.get([first])["records"][0]["superseded_by"] == fixed
            assert m.store.index.by_id(first)["id"] == first  # one row per record id, whichever log


def test_a_teammates_retraction_hides_the_record_on_every_clone(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    rid = ann.write("the staging database is db-7", kind="fact")
    _sync_all(ann, bob)
    with bob.environment():
        assert [h["id"] for h in bob.store.search("staging database")["hits"]] == [rid]
    with ann.environment():
        ann.store.forget([rid], "db-7 was retired")
    _sync_all(ann, bob)
    with bob.environment():
        assert bob.store.search("staging database")["hits"] == []
        assert bob.store.get([rid])["records"][0]["retracted"]["by"]


def test_newest_first_follows_the_teams_clock_across_logs(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    a1 = ann.write("release one is cut", kind="decision")
    _sync_all(ann, bob)
    b1 = bob.write("release two is cut", kind="decision")  # written after bob saw a1
    _sync_all(bob, ann)
    a2 = ann.write("release three is cut", kind="decision")  # after ann saw b1
    _sync_all(ann, bob)
    for m in (ann, bob):
        with m.environment():
            ids = [r["id"] for r in m.store.list()["records"]]
            assert ids == [a2, b1, a1], m.name


def test_unsharing_drops_the_teammates_rows_from_the_index(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    theirs = ann.write("invoices are numbered per tenant", kind="convention")
    _sync_all(ann, bob)
    with bob.environment():
        assert [h["id"] for h in bob.store.search("invoices tenant")["hits"]] == [theirs]
        state.unshare(bob.store_dir, PROJECT)
        assert bob.store.search("invoices tenant")["hits"] == []
        assert bob.store.verify()["intact"]
