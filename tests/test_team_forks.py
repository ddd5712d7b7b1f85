"""Issue 19 item 4: forks, delete-wins and purge across clones. Real git, a bare remote, machines with
their own HOMEs and stores; every read is the store's own (search, list, get, brief, maintain)."""

from __future__ import annotations

from retained.team import state
from tests.helpers.team import PROJECT, files_under, reachable_objects, share_all, store_sync


def _sync(*ms):
    for m in ms:
        result = store_sync(m)
        assert result.ok, result


def _ids(m, query):
    with m.environment():
        return [h["id"] for h in m.store.search(query)["hits"]]


def test_concurrent_supersedes_make_a_fork_that_every_read_shows_identically_on_both_clones(machines):
    from retained import maintain
    from retained.brief import make_brief

    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    base = ann.write("the session cache holds 10 minutes", kind="fact")
    _sync(ann, bob)
    mine = ann.write("the session cache holds 20 minutes", kind="fact", supersedes=base)
    theirs = bob.write("the session cache holds 30 minutes", kind="fact", supersedes=base)
    _sync(ann, bob, ann)
    seen = []
    for m in (ann, bob):
        with m.environment():
            result = m.store.search("session cache")
            hits = {h["id"]: h for h in result["hits"]}
            assert set(hits) == {mine, theirs}, m.name
            assert hits[mine]["conflict"]["other_versions"] == [theirs]
            assert hits[theirs]["conflict"]["other_versions"] == [mine]
            summary = hits[mine]["conflict"]["summary"]
            assert summary.startswith("2 current versions: by ") and summary in result["warnings"]
            listed = {r["id"]: r for r in m.store.list()["records"]}
            assert listed[theirs]["conflict"]["versions"] == hits[theirs]["conflict"]["versions"]
            assert m.store.get([mine])["records"][0]["conflict"]["other_versions"] == [theirs]
            assert "(conflict: 2 current versions" in make_brief(m.store, PROJECT)["text"]
            forks = maintain.report(m.store)["forks"]
            assert forks == [{"target": base, "scope": PROJECT, "versions": hits[mine]["conflict"]["versions"]}]
            seen.append(hits[mine]["conflict"]["versions"])
    assert seen[0] == seen[1]  # the same fork, the same order, on both clones


def test_a_write_that_supersedes_every_version_resolves_the_fork_on_every_clone(machines):
    from retained import maintain

    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    base = ann.write("builds run on node 20", kind="convention")
    _sync(ann, bob)
    mine = ann.write("builds run on node 22", kind="convention", supersedes=base)
    theirs = bob.write("builds run on node 24", kind="convention", supersedes=base)
    _sync(ann, bob, ann)
    with bob.environment():
        fixed = bob.store.write("builds run on node 24 from December", kind="convention", supersedes=theirs,
                                resolves=[mine])["id"]
    _sync(bob, ann)
    for m in (ann, bob):
        assert _ids(m, "builds node") == [fixed], m.name
        with m.environment():
            assert "conflict" not in m.store.search("builds node")["hits"][0]
            assert maintain.report(m.store)["forks"] == []


def test_delete_wins_over_a_concurrent_edit_that_did_not_see_it_and_never_comes_back(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    rid = ann.write("the billing webhook posts to /hooks/v1", kind="fact")
    _sync(ann, bob)
    with ann.environment():
        ann.store.forget([rid], "v1 is gone")
    edit = bob.write("the billing webhook posts to /hooks/v2", kind="fact", supersedes=rid)
    _sync(ann, bob, ann)
    for m in (ann, bob):
        assert _ids(m, "billing webhook") == [], m.name
        with m.environment():
            assert m.store.get([edit])["records"][0]["retracted"]
    bob.write("an unrelated fact about invoices", kind="fact")
    _sync(bob, ann, bob)  # and again: the retraction stays
    for m in (ann, bob):
        assert _ids(m, "billing webhook") == [], m.name


def test_a_purge_reaches_every_clones_store_and_leaves_the_remotes_reachable_history(machines, remote_dir):
    ann, bob, cat = machines("ann"), machines("bob"), machines("cat")
    share_all(ann, bob, cat)
    marker = "PURGE-MARKER-7f3a the prod password is hunter2"
    rid = ann.write(marker, kind="fact")
    keep = ann.write("the prod database is in eu-west-1", kind="fact")
    _sync(ann, bob, cat)
    assert _ids(bob, "PURGE-MARKER-7f3a") == [rid]
    with ann.environment():
        ann.store.purge([rid], "a secret")
    _sync(ann, bob, cat)
    for m in (ann, bob, cat):
        assert _ids(m, "PURGE-MARKER-7f3a") == [], m.name
        assert _ids(m, "prod database") == [keep], m.name
        with m.environment():
            m.store.close()  # the index's own files: flushed, checkpointed
        assert b"PURGE-MARKER-7f3a" not in files_under(m.store_dir), m.name
    assert b"PURGE-MARKER-7f3a" not in reachable_objects(remote_dir)


def test_mcp_private_true_keeps_a_record_off_the_remote_and_shared_true_shares_a_note(machines, remote_dir):
    from retained.tools import Tools
    from tests.helpers.team import all_objects

    ann = machines("ann")
    share_all(ann)
    with ann.environment():
        tools = Tools(ann.store, PROJECT)
        tools.memory_write("MCP-PRIVATE-1 a decision kept here", kind="decision", scope=PROJECT, private=True)
        tools.memory_write("MCP-SHARED-2 a note for the team", kind="note", scope=PROJECT, shared=True)
    from retained.team import share

    with ann.environment():
        outgoing, _ = share.select(ann.store, PROJECT)
        result = share.sync_one(ann.store, state.shared(ann.store_dir)[PROJECT])
    assert result.ok, result
    assert [r["text"][:11] for r in outgoing] == ["MCP-SHARED-"]
    objects = all_objects(remote_dir)
    assert b"MCP-PRIVATE-1" not in objects and b"MCP-SHARED-2" in objects


def test_a_retraction_of_a_teammates_record_reaches_its_writer(machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    rid = ann.write("the old API key lives in vault/legacy", kind="fact")
    _sync(ann, bob)
    with bob.environment():
        bob.store.forget([rid], "moved")
    _sync(bob, ann)
    assert _ids(ann, "API key vault") == [] and _ids(bob, "API key vault") == []
