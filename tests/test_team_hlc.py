"""The team's clock and order (retained/team/hlc.py): pure functions, no git."""

from __future__ import annotations

import random

from retained.team import hlc
from retained.team.hlc import HLC, Import


def test_a_new_record_comes_after_everything_its_writer_saw_even_when_the_wall_clock_is_behind():
    seen = HLC(5_000, 3)  # a teammate whose clock runs ahead
    assert hlc.tick(seen, wall_ms=4_000) == HLC(5_000, 4)
    assert hlc.tick(seen, wall_ms=6_000) == HLC(6_000, 0)
    clock = HLC(0, 0)
    stamps = []
    for wall in (10, 10, 10, 9, 11):  # a clock that stalls and steps back
        clock = hlc.tick(clock, wall)
        stamps.append(clock)
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_a_clock_more_than_a_day_ahead_is_not_followed():
    now = 1_000_000_000
    ahead = HLC(now + hlc.MAX_DRIFT_MS + 1, 0)
    assert hlc.observe(HLC(now, 0), ahead, now) == (HLC(now, 0), False)
    near = HLC(now + 1000, 2)
    assert hlc.observe(HLC(now, 0), near, now) == (near, True)


def test_the_total_order_is_the_same_whatever_order_the_records_arrive_in():
    recs = [("wb", {"hlc": [10, 0], "sha256": "b" * 64}), ("wa", {"hlc": [10, 0], "sha256": "c" * 64}),
            ("wa", {"hlc": [10, 1], "sha256": "a" * 64}), ("wc", {"hlc": [9, 7], "sha256": "d" * 64}),
            ("wa", {"sha256": "e" * 64})]  # a tombstone keeps no clock: it sorts first
    expected = [recs[4], recs[3], recs[1], recs[0], recs[2]]
    rng = random.Random(7)
    for _ in range(20):
        shuffled = recs[:]
        rng.shuffle(shuffled)
        assert sorted(shuffled, key=lambda wr: hlc.order_key(*wr)) == expected


def test_a_clock_field_that_is_not_two_non_negative_integers_is_no_clock():
    assert hlc.parse([1, 2]) == HLC(1, 2)
    for bad in ([1], [1, 2, 3], ["1", 2], [1, -1], [True, 0], {"ms": 1}, None, "1.2"):
        assert hlc.parse(bad) is None


def test_rfc3339_times_as_retained_writes_them_become_milliseconds():
    assert hlc.ts_ms("1970-01-01T00:00:01.500000Z") == 1500
    assert hlc.ts_ms("1970-01-01T01:00:00+01:00") == 0
    assert hlc.ts_ms("not a time") is None and hlc.ts_ms(None) is None


def test_a_record_published_late_takes_the_clock_and_heads_of_what_it_saw_when_written():
    history = [Import(at=100, done=110, hlc=HLC(90, 0), heads={"wb": 3}),
               Import(at=200, done=210, hlc=HLC(195, 1), heads={"wb": 5, "wc": 1})]
    # Written at 150, published after the second import: it saw only the first.
    assert hlc.floor_at(history, 150) == HLC(90, 0)
    assert hlc.seen_at(history, 150) == {"wb": 3}
    assert hlc.floor_at(history, 250) == HLC(195, 1)
    assert hlc.seen_at(history, 250) == {"wb": 5, "wc": 1}


def test_an_import_counts_as_seen_only_once_its_lines_were_readable_but_advances_the_clock_from_its_start():
    history = [Import(at=100, done=None, hlc=HLC(99, 0), heads={"wb": 2})]  # killed before the lines were readable
    assert hlc.seen_at(history, 500) == {}  # never claim to have seen what may not have been read
    assert hlc.floor_at(history, 500) == HLC(99, 0)  # order: the safe side is to come after it
    history = [Import(at=100, done=120, hlc=HLC(99, 0), heads={"wb": 2})]
    assert hlc.seen_at(history, 110) == {} and hlc.seen_at(history, 120) == {"wb": 2}


def test_pruning_the_import_history_changes_no_answer_for_a_record_not_yet_published():
    history = [Import(at=t, done=t + 5, hlc=HLC(t - 1, 0), heads={"wb": t // 10}) for t in range(100, 2100, 100)]
    for oldest_pending in (150, 1000, 1999, None):
        kept = hlc.prune(history, oldest_pending, now_ms=3000)
        assert len(kept) <= len(history) and len(kept) >= min(len(history), hlc.KEEP_IMPORTS)
        horizon = 3000 if oldest_pending is None else oldest_pending
        for written in range(horizon, 3001, 37):
            assert hlc.floor_at(kept, written) == hlc.floor_at(history, written)
            assert hlc.seen_at(kept, written) == hlc.seen_at(history, written)
    assert hlc.parse_imports([i.as_json() for i in history] + ["junk", {"at": "x"}]) == history
