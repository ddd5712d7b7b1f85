"""Issue 28 item 2: one team order everywhere. Every record carries its team clock from its write on,
its shared copy keeps it, and "newest" is that clock then the record id: the brief and the newest
records over writers of very different sizes come out the same on every clone."""

from __future__ import annotations

from retained import records
from retained.brief import make_brief
from tests.helpers.team import PROJECT, Machine, share_all, store_sync


def test_every_record_carries_its_team_clock_from_its_write_and_its_shared_copy_keeps_it(tmp_path, remote_dir):
    ann = Machine(tmp_path, "ann", remote_dir.as_uri())
    share_all(ann)
    try:
        ids = [ann.write(f"decision {i} about the cache") for i in range(3)]
        clocks = [r["hlc"] for r in ann.log() if r["id"] in ids]
        assert len(clocks) == 3 and clocks == sorted(clocks) and len({tuple(c) for c in clocks}) == 3
        assert store_sync(ann).ok
        shared = {r["id"]: r["hlc"] for recs in ann.mirror().values() for r in recs}
        assert [shared[i] for i in ids] == clocks
    finally:
        ann.close()


def test_the_brief_and_the_newest_records_are_identical_on_every_clone(tmp_path, remote_dir):
    crew = [Machine(tmp_path, n, remote_dir.as_uri()) for n in ("ann", "bob", "cat")]
    ann, bob, cat = crew
    share_all(*crew)
    try:
        for i in range(40):  # ann writes a lot, bob a little, cat once: the local seq says nothing
            ann.write(f"ann's decision {i} on the billing service")
            if i % 10 == 3:
                bob.write(f"bob's convention {i} for the billing service", kind="convention")
        cat.write("cat's newest decision: freeze the billing schema")
        for m in (*crew, *crew):
            assert store_sync(m).ok
        briefs, newest, texts = [], [], []
        for m in crew:
            with m.environment():
                brief = make_brief(m.store, PROJECT, budget=400)
                briefs.append([r["id"] for r in brief["records"]])
                texts.append(brief["text"])
                newest.append([r["id"] for r in m.store.index.newest_current([PROJECT], 30)])
        assert briefs[0] == briefs[1] == briefs[2]
        assert texts[0] == texts[1] == texts[2] and "by Ann Tester" in texts[0]
        assert newest[0] == newest[1] == newest[2]
        with cat.environment():
            cats = cat.store.search("freeze billing schema", scopes=[PROJECT])["hits"][0]["id"]
        assert cats in briefs[0], "a teammate's newest decision is in every brief"
        assert newest[0][0] == cats
    finally:
        for m in crew:
            m.close()


def test_an_import_takes_a_clock_of_this_store_not_the_one_it_brings(tmp_path):
    from retained.store import Store

    with Store(tmp_path / "s") as store:
        receipt = store.write("first", kind="note")
        with store.appending() as app:
            app.append_record({"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "note", "text": "imported",
                               "hlc": [99999999999999, 7]})
        recs = [records.parse_line(raw) for raw in (tmp_path / "s" / "log.jsonl").read_bytes().split(b"\n")[:-1]]
    assert receipt["durable"] and recs[1]["hlc"] > recs[0]["hlc"] and recs[1]["hlc"][0] < 99999999999999
