"""The index reads its logs as sources, each with its own saved state (retained/index/sources.py).

Today a store has one source, its own log.jsonl; issue 19 adds a read-only log per teammate. These
tests hold the seam that work will use: a second source is taken in by the same catch-up, with row
keys of its own and a state of its own, and the local log's state stays where earlier versions
wrote it, so an existing index keeps working without a rebuild.
"""

from __future__ import annotations

import sqlite3

from retained.index.sources import KEY_BITS
from retained.log import LOG_NAME, Log
from retained.store import Store


def _meta_keys(store_dir) -> set[str]:
    db = sqlite3.connect(store_dir / "index.sqlite3")
    try:
        return {key for (key,) in db.execute("SELECT key FROM meta")}
    finally:
        db.close()


def test_the_local_logs_state_stays_in_the_row_earlier_versions_wrote(store, store_dir):
    store.write("a record, so that the index has read something")
    assert "state" in _meta_keys(store_dir)
    assert store.index.log_sources[0].state_key == "state" and store.index.log_sources[0].base == 0
    assert store.index.by_id(store.get()["records"][0]["id"])["line"] == 1  # row keys are line numbers


def test_a_second_log_is_read_by_the_same_catch_up_with_keys_and_state_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")
    with Store(tmp_path / "team") as team:  # a real log file, as a teammate's would be
        theirs = team.write("the teammate decided widgets ship in blue", kind="decision")["id"]
    with Store(tmp_path / "mine") as mine:
        own = mine.write("my note: widgets need a new box")["id"]
        team_log = Log(tmp_path / "team" / LOG_NAME)
        mine.index.team_logs = lambda: [("team", "wteammate", team_log, None)]  # the seam issue 19 fills
        assert mine.index.catch_up() == 1
        assert mine.index.by_id(theirs)["line"] == (1 << KEY_BITS) + 1
        assert mine.index.by_id(own)["line"] == 1
        assert {h["id"] for h in mine.search("widgets")["hits"]} == {own, theirs}
        assert {"state", "state:team"} <= _meta_keys(tmp_path / "mine")
        assert mine.index.catch_up() == 0  # nothing new in either log: the fast path
        with Store(tmp_path / "team") as team:
            later = team.write("the teammate noted gadgets are on hold")["id"]
        assert mine.index.catch_up() == 1  # only the new line of that log is read
        assert mine.index.by_id(later)["line"] == (1 << KEY_BITS) + 2
        assert mine.write("my second note")["durable"]
        assert mine.verify()["intact"]  # the local log still verifies on its own
