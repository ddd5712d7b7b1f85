"""The writer log (retained/team/wlog.py) and the standalone verifier beside it: pure, no git."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from retained import records
from retained.errors import UsageError
from retained.team import hlc, verifier, wlog

AUTHOR = {"name": "Ann Tester", "email": "ann@example.com"}


def body(text: str, **extra) -> dict:
    return {"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision", "text": text,
            "scope": "example.com/acme/shop", **extra}


def build(writer: str, bodies: list[dict], start: int = 1_000) -> list[wlog.Entry]:
    entries: list[wlog.Entry] = []
    for i, b in enumerate(bodies):
        entries.append(wlog.seal_after(b, entries[-1] if entries else None, writer=writer,
                                       clock=hlc.HLC(start + i, 0), author=AUTHOR, seen=None))
    return entries


def purge_of(writer: str, after: list[wlog.Entry], targets: list[tuple[str, wlog.Entry]], at: int) -> wlog.Entry:
    listed = [wlog.Target(w, e.rec["id"], e.rec["seq"], e.rec["sha256"]) for w, e in targets]
    return wlog.seal_after(wlog.purge_body(records.new_id(), records.now_rfc3339(), listed, "a secret", None),
                           after[-1] if after else None, writer=writer, clock=hlc.HLC(at, 0), author=None, seen={})


def stdlib_verdict(files: dict[str, bytes]) -> tuple[list[str], bool]:
    tree = {"format": b"retained-memory 1\n", **{f"writers/{w}.jsonl": d for w, d in files.items()}}
    return verifier.verify(tree)


def test_a_writer_record_is_a_valid_log_record_that_keeps_the_original_identity_and_gains_writer_fields():
    original = body("we deploy on Tuesdays")
    [entry] = build("wann0001", [original])
    rec = records.parse_line(entry.raw)  # the local log's own parser accepts it
    assert {k: rec[k] for k in original} == original
    assert rec["writer"] == "wann0001" and rec["author"] == AUTHOR and rec["hlc"] == [1000, 0]
    assert rec["seq"] == 1 and rec["prev"] == records.GENESIS
    assert entry.raw == records.format_line(rec)[:-1]  # canonical bytes, one line
    assert wlog.parse_log("wann0001", wlog.encode([entry])) == wlog.Parsed([entry], None)


def test_a_flipped_byte_keeps_the_verified_prefix_and_names_writer_and_line():
    entries = build("wann0001", [body(f"decision {i}") for i in range(5)])
    data = bytearray(wlog.encode(entries))
    third = data.index(b"decision 2")
    data[third] ^= 0x01
    parsed = wlog.parse_log("wann0001", bytes(data))
    assert parsed.entries == entries[:2]
    assert parsed.problem == "writer wann0001: line 3 is damaged (sha256 does not match the record's content)"
    assert not stdlib_verdict({"wann0001": bytes(data)})[1]


@pytest.mark.parametrize("tamper, expected", [
    ("other_writer", "line 2 is not a valid writer record: it names writer 'wbob0001'"),
    ("clock_back", "line 2 is not a valid writer record: its hlc [999, 0] does not come after"),
    ("drop_line", "line 2 breaks the chain"),
    ("torn", "line 3 is incomplete"),
    ("not_canonical", "line 2 is not a valid writer record: it is not written as canonical JSON"),
])
def test_a_log_that_breaks_a_writer_rule_is_cut_there(tamper, expected):
    bodies = [body("one"), body("two"), body("three")]
    entries = build("wann0001", bodies)
    if tamper == "other_writer":
        entries[1:] = [wlog.seal_after(bodies[1], entries[0], writer="wbob0001", clock=hlc.HLC(2000, 0),
                                       author=None, seen=None)]
    elif tamper == "clock_back":
        entries[1:] = [wlog.seal_after(bodies[1], entries[0], writer="wann0001", clock=hlc.HLC(999, 0),
                                       author=None, seen=None)]
    elif tamper == "drop_line":
        del entries[1]
    data = wlog.encode(entries)
    if tamper == "torn":
        data = data[:-10]
    elif tamper == "not_canonical":  # the same record, hash and all, with spaces: valid JSON, other bytes
        lines = data.split(b"\n")
        lines[1] = json.dumps(json.loads(lines[1])).encode()
        data = b"\n".join(lines)
    parsed = wlog.parse_log("wann0001", data)
    assert parsed.problem.startswith("writer wann0001: ") and expected in parsed.problem, parsed.problem
    assert len(parsed.entries) == (2 if tamper == "torn" else 1)
    if tamper == "not_canonical":
        records.parse_line(data.split(b"\n")[1])  # log.jsonl's own rules accept it: the writer log does not
    assert not stdlib_verdict({"wann0001": data})[1]


def test_verifying_only_the_new_lines_of_an_extension_gives_what_verifying_all_of_it_gives():
    entries = build("wann0001", [body(f"d{i}") for i in range(6)])
    data = wlog.encode(entries)
    assert wlog.parse_log("wann0001", data, base=entries[:4]) == wlog.parse_log("wann0001", data)
    damaged = data.replace(b'"d5"', b'"d6"')
    assert wlog.parse_log("wann0001", damaged, base=entries[:4]) == wlog.parse_log("wann0001", damaged)


def test_the_longer_extension_of_the_same_lines_wins_from_either_side():
    entries = build("wann0001", [body(f"d{i}") for i in range(4)])
    assert wlog.merge("wann0001", entries[:2], entries) == wlog.Merged(entries, 2, None)
    assert wlog.merge("wann0001", entries, entries[:2]) == wlog.Merged(entries, 0, None)
    assert wlog.merge("wann0001", [], entries) == wlog.Merged(entries, 4, None)


def test_a_version_that_changed_a_line_already_held_is_refused_and_this_copy_kept():
    bodies = [body("use postgres"), body("tabs, not spaces")]
    mine = build("wann0001", bodies)
    forged = build("wann0001", [bodies[0], dict(bodies[1], text="spaces, not tabs"), body("more")])
    merged = wlog.merge("wann0001", mine, forged)
    assert merged.entries == mine and merged.pulled == 0
    assert merged.refused == ("writer wann0001: the remote's line 2 (seq 2) is not the one this machine already "
                              "holds: kept this machine's copy of that log")


def test_a_line_and_its_tombstone_are_the_same_line_and_the_tombstone_wins():
    entries = build("wann0001", [body("secret plan"), body("public plan")])
    tomb_rec = records.tombstone(entries[0].rec, "mem_PURGE")
    tombed = [wlog.Entry(records.format_line(tomb_rec)[:-1], tomb_rec), entries[1]]
    for mine, theirs in ((entries, tombed), (tombed, entries), (entries[:1], tombed)):
        merged = wlog.merge("wann0001", mine, theirs)
        assert merged.refused is None
        assert merged.entries[0] == tombed[0] and len(merged.entries) == max(len(mine), len(theirs))


def test_a_purge_replaces_the_lines_it_lists_by_the_same_tombstone_bytes_whichever_purge_is_read_first():
    ann = build("wann0001", [body("the staging password is in the wiki")])
    bob_first = purge_of("wbob0001", [], [("wann0001", ann[0])], at=5_000)
    cat_first = purge_of("wcat0001", [], [("wann0001", ann[0])], at=6_000)  # later in the team's order
    results = []
    for order in (("wbob0001", "wcat0001"), ("wcat0001", "wbob0001")):
        files = {"wann0001": list(ann)}
        for w in order:
            files[w] = [bob_first if w == "wbob0001" else cat_first]
        newly = wlog.apply_purges(files)
        assert newly == [wlog.Target("wann0001", ann[0].rec["id"], 1, ann[0].rec["sha256"])]
        results.append(files["wann0001"][0].raw)
    expected = records.format_line(records.tombstone(ann[0].rec, bob_first.rec["id"]))[:-1]
    assert results == [expected, expected]
    assert b"password" not in expected


def test_a_purged_line_that_arrives_later_is_tombstoned_on_arrival():
    ann = build("wann0001", [body("keep"), body("drop this")])
    purge = purge_of("wbob0001", [], [("wann0001", ann[1])], at=9_000)
    files = {"wann0001": ann[:1], "wbob0001": [purge]}
    assert wlog.apply_purges(files) == []  # not held yet
    files["wann0001"] = list(ann)
    assert len(wlog.apply_purges(files)) == 1 and records.is_tombstone(files["wann0001"][1].rec)


def test_a_tombstone_is_vouched_for_by_a_purge_record_in_any_writers_log_and_cut_without_one():
    ann = build("wann0001", [body("a"), body("b"), body("c")])
    purge = purge_of("wbob0001", [], [("wann0001", ann[1])], at=9_000)
    files = {"wann0001": list(ann), "wbob0001": [purge]}
    wlog.apply_purges(files)
    data = wlog.encode(files["wann0001"])
    vouched = wlog.vouch({"wann0001": wlog.parse_log("wann0001", data),
                          "wbob0001": wlog.parse_log("wbob0001", wlog.encode([purge]))})
    assert len(vouched["wann0001"].entries) == 3 and vouched["wann0001"].problem is None
    alone = wlog.vouch({"wann0001": wlog.parse_log("wann0001", data)})
    assert len(alone["wann0001"].entries) == 1
    assert alone["wann0001"].problem == "writer wann0001: line 2 is a tombstone that no purge record lists"
    lines, ok = stdlib_verdict({"wann0001": data, "wbob0001": wlog.encode([purge])})
    assert ok, lines
    lines, ok = stdlib_verdict({"wann0001": data})
    assert not ok and "line 2: a tombstone no purge record lists" in lines[0]


def test_a_shared_copy_leaves_local_only_keys_behind_and_is_redacted_again_even_with_redaction_off(monkeypatch):
    monkeypatch.setenv("RETAINED_REDACT", "off")
    local = records.seal({"seq": 7, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "fact",
                          "text": "deploy token=abcd1234efgh", "prev": "1" * 64, "client_op_id": "op-1",
                          "source": "https://bot:hunter2hunter2@ci.example.com/x", "ticket": {"note": "password=swordfish"},
                          "scope": "example.com/acme/shop"})
    found: Counter[str] = Counter()
    copy, why = wlog.share_copy(local, found)
    assert why is None
    assert set(copy) == {"id", "ts", "kind", "text", "source", "ticket", "scope"}
    dumped = json.dumps(copy)
    for secret in ("abcd1234efgh", "hunter2hunter2", "swordfish"):
        assert secret not in dumped
    assert copy["id"] == local["id"] and copy["ts"] == local["ts"] and sum(found.values()) == 3


def test_a_record_with_a_field_named_like_a_team_field_stays_on_this_machine_with_one_line():
    local = dict(body("x"), author="someone else", seq=1, prev="0" * 64)
    copy, why = wlog.share_copy(records.seal(local), Counter())
    assert copy is None and "field named 'author'" in why and "stays on this machine" in why


def test_tombstones_are_not_shared_and_purge_records_go_as_purge_requests():
    rec = records.seal(dict(body("x"), seq=1, prev="0" * 64))
    copy, why = wlog.share_copy(records.tombstone(rec, "mem_P"), Counter())
    assert copy is None and "purged" in why
    purge = dict(body("purged 1 record"), kind="forget", action="purge", purged=[])
    with pytest.raises(UsageError):
        wlog.share_copy(purge, Counter())


def test_the_verifier_format_md_shows_is_the_verifier_that_runs():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    doc = doc[doc.index("## Team memory"):]
    shown = doc[doc.index("```python\n") + len("```python\n"):]
    shown = shown[:shown.index("```")]
    assert shown == (root / "retained" / "team" / "verifier.py").read_text(encoding="utf-8")


def test_a_record_is_checked_against_its_content_in_any_spelling_and_one_serialisation_checks_a_canonical_line():
    """The hash is over the content's canonical JSON, whatever spelling a line uses (another program may
    append `\\u00e9` escapes or another key order); a canonical line's hash is checked from its own
    bytes, and one changed byte of content, or a purge's nested `sha256` fields, never fool it."""
    rec = records.seal({"seq": 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision",
                        "text": "café — keep the queue", "prev": records.GENESIS})
    canon = records.format_line(rec)[:-1]
    assert records.checked_line(canon) == (rec, True)
    other = json.dumps(dict(reversed(list(rec.items()))), ensure_ascii=True).encode()
    assert other != canon and records.checked_line(other) == (rec, False)
    with pytest.raises(records.BadLine, match="sha256 does not match"):
        records.checked_line(canon.replace("café".encode(), b"cafe"))
    with pytest.raises(records.BadLine, match="sha256 does not match"):
        records.checked_line(other.replace(b"queue", b"QUEUE"))
    purge = records.seal({"seq": 2, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": records.FORGET_KIND,
                          "text": "purged", "prev": rec["sha256"], "action": "purge",
                          "purged": [{"id": rec["id"], "seq": 1, "sha256": rec["sha256"], "writer": "wann"}]})
    assert records.checked_line(records.format_line(purge)[:-1]) == (purge, True)
