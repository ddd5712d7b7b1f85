"""Issue 28 item 4 and issue 29 item 5: anyone on the team can forget anything shared, a departed
teammate's records included; the purge reaches every clone and the remote's reachable history as an own
purge does, and every clone shows who purged or retracted it and why."""

from __future__ import annotations

from retained.team import state
from tests.helpers.team import Machine, all_objects, files_under, reachable_objects, share_all, store_sync

SECRET = "SECRET-MARKER-9c2e"


def _sync(*ms):
    for m in ms:
        result = store_sync(m)
        assert result.ok, result


def test_a_purge_of_a_departed_teammates_record_reaches_a_third_clone_and_the_remote(tmp_path, remote_dir):
    ann, bob, cat = (Machine(tmp_path, n, remote_dir.as_uri()) for n in ("ann", "bob", "cat"))
    share_all(ann, bob, cat)
    try:
        leak = ann.write(f"the deploy token is {SECRET}", kind="fact")
        keep = ann.write("ann's honest decision about retries", kind="decision")
        _sync(ann, bob, cat)
        ann.close()  # ann leaves the team: her machine never syncs again
        with bob.environment():
            receipt = bob.store.purge([leak], "a leaked token")
            assert receipt["durable"] and receipt["purged"][0]["writer"] == ann.writer
            assert any("next sync" in w and "rotate" in w for w in receipt["warnings"]), receipt["warnings"]
            assert not any("by hand" in w for w in receipt["warnings"]), receipt["warnings"]
            # Hidden here at once, before any sync.
            assert bob.store.search("deploy token")["hits"] == []
            assert bob.store.verify()["intact"]
        _sync(bob, cat, bob)
        assert SECRET.encode() not in reachable_objects(remote_dir)
        for m in (bob, cat):
            assert SECRET.encode() not in files_under(m.team_dir / state.MIRROR), m.name
            assert SECRET.encode() not in all_objects(m.team_dir / state.REPO), m.name
            with m.environment():
                assert m.store.search("deploy token")["hits"] == []
                got = m.store.get([leak])["records"]
                assert got and "text" not in got[0]
                forgotten = got[0]["purged_by"]
                assert forgotten.get("author", "").startswith("Bob Tester") and forgotten.get("reason") == "a leaked token"
                assert [h["id"] for h in m.store.search("honest decision retries")["hits"]] == [keep]
    finally:
        bob.close()
        cat.close()


def test_a_retraction_of_a_teammates_record_names_who_retracted_it_on_every_clone(tmp_path, remote_dir):
    ann, bob = Machine(tmp_path, "ann", remote_dir.as_uri()), Machine(tmp_path, "bob", remote_dir.as_uri())
    share_all(ann, bob)
    try:
        rid = ann.write("we cache sessions in redis", kind="decision")
        _sync(ann, bob)
        with bob.environment():
            bob.store.forget([rid], "we moved to memcached")
        _sync(bob, ann)
        for m in (ann, bob):
            with m.environment():
                got = m.store.get([rid])["records"][0]
            assert got["retracted"]["reason"] == "we moved to memcached"
            assert got["retracted"]["author"].startswith("Bob Tester"), (m.name, got["retracted"])
    finally:
        ann.close()
        bob.close()
