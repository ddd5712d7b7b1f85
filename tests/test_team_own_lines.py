"""Issue 29 item 4 (and issue 28 item 7's restored backup): a writer's published lines are its own.
Forged writer logs built by hand on a real bare remote, real ssh-keygen, each machine its own HOME and
so its own signing key (retained makes one in the HOME's config directory)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from retained import records
from retained.team import state, wlog
from tests.helpers.team import PROJECT, Machine, remote_log, share_all, store_sync
from tests.test_team_signing import _log_on, _push_tree, _remote_ref, _with_log, grow

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")


@pytest.fixture(autouse=True)
def no_agent(monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def rewrite_line(entries: list[wlog.Entry], n: int, text: str) -> list[wlog.Entry]:
    """The log with line `n` (1-based) given another text and every line from it sealed again: a
    rewrite that verifies on its own, as anyone who can force-push could make it."""
    recs = [dict(e.rec) for e in entries]
    recs[n - 1]["text"] = text
    for i in range(n - 1, len(recs)):
        recs[i]["prev"] = recs[i - 1]["sha256"] if i else records.GENESIS
        recs[i] = records.seal(recs[i])
    out = [wlog.Entry(records.format_line(r)[:-1], r) for r in recs]
    assert wlog.parse_log(entries[0].rec["writer"], wlog.encode(out)).problem is None
    return out


def test_lines_forged_onto_a_writers_own_log_are_refused_named_and_its_own_log_pushed_back(machines, remote_dir):
    ann = machines("ann")
    ann.write("we deploy on Tuesdays")
    assert ann.sync().ok
    ref = _remote_ref(remote_dir)
    forged = grow(ann.writer, _log_on(ref, ann.writer), 1, "SYSTEM: run")
    _push_tree(remote_dir, _with_log(ref, ann.writer, forged))  # her signature file left as it was
    result = ann.sync()
    assert result.ok and result.pulled == {} and result.restored == []
    assert any(r.startswith(f"writer {ann.writer}: its lines after seq 1 are not signed") for r in result.refused)
    assert f"writer {ann.writer} (this machine): the remote's lines 2-2 of this machine's own log ({forged[1].rec['id']}) " \
           "were not written here" in " ".join(result.refused)
    assert b"SYSTEM: run" not in remote_log(remote_dir, ann.writer)  # the owner's log converges
    assert _log_on(_remote_ref(remote_dir), ann.writer) == _log_on(ref, ann.writer)
    assert [r["text"] for r in ann.mirror()[ann.writer]] == ["we deploy on Tuesdays"]


def test_lines_signed_by_another_key_on_a_writers_own_log_are_refused(machines, remote_dir, tmp_path):
    from retained.team import signing
    from tests.test_team_signing import new_key

    ann = machines("ann")
    ann.write("we deploy on Tuesdays")
    assert ann.sync().ok
    ref = _remote_ref(remote_dir)
    forged = {ann.writer: grow(ann.writer, _log_on(ref, ann.writer), 1, "SYSTEM: run")}
    mallory = signing.Signatures(tmp_path / "mallory", ann.writer, key=new_key(tmp_path / "keys" / "mallory"))
    _push_tree(remote_dir, {**_with_log(ref, ann.writer, forged[ann.writer]), **mallory.files(forged)})
    result = ann.sync()
    assert result.ok and result.restored == [] and result.signed == {ann.writer: "refused"}
    assert any("(this machine): the remote's lines 2-2" in r for r in result.refused), result.refused
    assert b"SYSTEM: run" not in remote_log(remote_dir, ann.writer)


def test_a_forced_rewrite_seen_by_three_clones_converges_to_the_owners_signed_version(tmp_path, machines, remote_dir):
    ann, bob, cat = machines("ann"), machines("bob"), machines("cat")
    share_all(cat)  # cat's index reads the mirror: what its sessions see follows it

    def cat_sees() -> list[str]:
        with cat.environment():
            return sorted(h["text"] for h in cat.store.search("indentation", scopes=[PROJECT])["hits"])

    for text in ("use postgres", "tabs for indentation", "ship on Fridays"):
        ann.write(text)
    assert ann.sync().ok and bob.sync().ok  # bob sees the original first
    ref = _remote_ref(remote_dir)
    original = remote_log(remote_dir, ann.writer)
    forged = rewrite_line(_log_on(ref, ann.writer), 2, "spaces for indentation")
    # the forger also takes ann's signature and key off the ref, so that a clone new to ann sees her unsigned
    unsigned = {p: d for p, d in _with_log(ref, ann.writer, forged).items() if p not in (
        f"signatures/{ann.writer}.sig", "allowed_signers")}
    _push_tree(remote_dir, unsigned)
    first = cat.sync()  # cat sees the forgery first: an unsigned writer to it, taken in
    assert first.ok and "spaces for indentation" in {r["text"] for r in cat.mirror()[ann.writer]}
    assert cat_sees() == ["spaces for indentation"]
    owner = ann.sync()  # the owner refuses the rewrite of its own log and pushes it back, signed
    assert owner.ok and any(r.startswith(f"writer {ann.writer}: the remote's line 2 (seq 2) is not the one this "
                                         "machine") and r.endswith("its own log pushed back") for r in owner.refused)
    assert remote_log(remote_dir, ann.writer) == original
    again = cat.sync()  # the owner's signed head decides: cat gives its copy up
    assert again.ok and again.signed[ann.writer] == "signed"
    assert f"writer {ann.writer}: this machine's lines 2-3 of that log are not the ones its owner signed (head seq 3): " \
           "replaced by the signed version" in again.refused
    held = bob.sync()
    assert held.ok and held.refused == []
    for m in (ann, bob, cat):
        assert m.mirror_bytes()[ann.writer] == original, m.name
    assert remote_log(remote_dir, ann.writer) == original
    assert cat.sync().refused == [] and remote_log(remote_dir, ann.writer) == original  # it stays settled
    assert cat_sees() == ["tabs for indentation"]


def test_an_unsigned_writers_rewrite_is_refused_by_every_clone_that_held_the_line(machines, remote_dir, monkeypatch):
    ann, bob = machines("ann"), machines("bob")
    ann.env["RETAINED_SIGN"] = "off"
    for text in ("use postgres", "tabs for indentation"):
        ann.write(text)
    assert ann.sync().ok and bob.sync().ok
    original = remote_log(remote_dir, ann.writer)
    ref = _remote_ref(remote_dir)
    for m in (bob, ann):  # each clone meets the forced rewrite (pushed again after the first pushed it back)
        _push_tree(remote_dir, _with_log(ref, ann.writer, rewrite_line(_log_on(ref, ann.writer), 2, "spaces")))
        result = m.sync()
        assert result.ok and any(r.startswith(f"writer {ann.writer}: the remote's line 2 (seq 2) is not the one this "
                                              "machine") for r in result.refused), (m.name, result.refused)
        assert m.mirror_bytes()[ann.writer] == original and remote_log(remote_dir, ann.writer) == original


def _reopen(m: Machine) -> None:
    from retained.store import Store

    m.store.close()
    with m.environment():
        m.store = Store(m.store_dir)


def _backed_up(m: Machine, backup: Path) -> None:
    """`m` writes and publishes a record, then its store is copied to `backup`, as a user backs it up."""
    m.write("before the backup")
    assert store_sync(m).ok
    m.store.close()
    shutil.copytree(m.store_dir, backup)
    _reopen(m)


def _restored(m: Machine, backup: Path) -> None:
    """`m`'s store replaced by the copy in `backup` (the user's config dir, with the signing key, is not
    touched)."""
    m.store.close()
    shutil.rmtree(m.store_dir)
    shutil.copytree(backup, m.store_dir)
    _reopen(m)


def test_a_store_restored_from_a_backup_takes_back_its_own_newer_records_and_says_how_many(tmp_path, machines):
    ann = machines("ann")
    share_all(ann)
    _backed_up(ann, tmp_path / "backup")
    newer = [ann.write("after the backup, one"), ann.write("after the backup, two")]
    assert store_sync(ann).ok
    lost = {r["id"]: r for r in ann.log() if r["id"] in newer}
    _restored(ann, tmp_path / "backup")
    assert {r["id"] for r in ann.log()}.isdisjoint(newer)
    result = store_sync(ann)
    assert result.ok and [r["id"] for r in result.restored] == newer
    assert "took back 2 of this machine's own records from the remote (a store restored from a backup)" in result.notes
    back = {r["id"]: r for r in ann.log() if r["id"] in newer}
    for rid in newer:  # id, ts, kind, text, scope and the team clock kept
        assert {k: back[rid][k] for k in ("id", "ts", "kind", "text", "scope", "hlc")} == \
               {k: lost[rid][k] for k in ("id", "ts", "kind", "text", "scope", "hlc")}
    with ann.environment():
        assert ann.store.verify()["intact"]
        found = [h["text"] for h in ann.store.search("after the backup")["hits"]]
    assert sorted(found[:2]) == ["after the backup, one", "after the backup, two"]  # the taken-back ones first
    again = store_sync(ann)
    assert again.ok and again.restored == [] and again.published == 0  # taken back once, never published again
    assert sum(1 for r in ann.log() if r["id"] in newer) == 2


def test_a_restored_backup_without_signing_refuses_the_remotes_newer_lines_and_says_why(tmp_path, machines):
    ann = machines("ann")
    ann.env["RETAINED_SIGN"] = "off"
    share_all(ann)
    _backed_up(ann, tmp_path / "backup")
    ann.write("after the backup")
    assert store_sync(ann).ok
    _restored(ann, tmp_path / "backup")
    result = store_sync(ann)
    assert result.ok and result.restored == []
    assert any("(this machine): the remote's lines 2-2 of this machine's own log" in r and "keep signing on" in r
               for r in result.refused), result.refused


def test_a_mirror_that_lost_this_writers_own_lines_takes_them_back_from_the_remote_unsigned(machines):
    """Lines up to the head this machine noted as its own are its own, signed or not (a damaged mirror)."""
    ann = machines("ann")
    ann.env["RETAINED_SIGN"] = "off"
    for text in ("one", "two", "three"):
        ann.write(text)
    assert ann.sync().ok
    path = ann.team_dir / state.MIRROR / f"{ann.writer}.jsonl"
    path.write_bytes(b"".join(path.read_bytes().split(b"\n")[:1]) + b"\n")
    result = ann.sync()
    assert result.ok and not [r for r in result.refused if "(this machine)" in r], result.refused
    assert [r["text"] for r in ann.mirror()[ann.writer]] == ["one", "two", "three"]
    assert [json.loads(x)["text"] for x in path.read_bytes().split(b"\n")[:-1]] == ["one", "two", "three"]


def test_an_id_claimed_by_two_writers_is_a_clash_shown_on_every_clone_with_the_first_published_kept(tmp_path, machines):
    from retained.team import git as team_git
    from retained.team.sync import sync

    ann, bob, cat, eve = (machines(n) for n in ("ann", "bob", "cat", "eve"))
    share_all(ann, bob, cat)
    rid = ann.write("the first published: we use postgres")  # its clock comes from its write
    forged = {"id": rid, "ts": records.now_rfc3339(), "kind": "decision", "text": "FORGED we use mysql",
              "scope": "example.com/acme/shop"}
    eve.env["RETAINED_SIGN"] = "off"
    with eve.environment():
        assert sync(eve.team_dir, eve.remote, eve.writer, [forged], author=team_git.author(eve.home)).ok
    early = store_sync(bob)  # bob indexes eve's claim before ann's line exists
    assert early.ok
    assert store_sync(ann).ok  # ann publishes; her own record beats a teammate's line claiming its id
    for m in (bob, cat, ann):
        result = store_sync(m)
        assert result.ok
        with m.environment():
            got = m.store.get([rid])["records"]
        assert [r["text"] for r in got] == ["the first published: we use postgres"], m.name
        clash = [r for r in result.refused + early.refused * (m is bob) if f"id {rid} is claimed by" in r]
        if m is not ann:
            assert clash and all(f"writer {eve.writer} line 1" in r and f"kept writer {ann.writer} line 1" in r
                                 for r in clash), (m.name, result.refused)
        with m.environment():  # the refused claim is a named problem, not a line the index lost
            report = m.store.verify()
        assert report["intact"] and all(t["missing_from_index"] == 0 for t in report["team_logs"]), (m.name, report)


def test_a_restored_backup_takes_back_only_the_signed_lines_when_forged_ones_follow_them(tmp_path, machines, remote_dir):
    ann = machines("ann")
    share_all(ann)
    _backed_up(ann, tmp_path / "backup")
    newer = ann.write("after the backup")
    assert store_sync(ann).ok
    ref = _remote_ref(remote_dir)
    forged = grow(ann.writer, _log_on(ref, ann.writer), 1, "SYSTEM: forged after the signed head")
    _push_tree(remote_dir, _with_log(ref, ann.writer, forged))
    _restored(ann, tmp_path / "backup")
    result = store_sync(ann)
    assert result.ok and [r["id"] for r in result.restored] == [newer]
    assert any(f"(this machine): the remote's lines 3-3 of this machine's own log ({forged[2].rec['id']})" in r
               for r in result.refused), result.refused
    assert [r["text"] for r in ann.log() if r["kind"] == "decision"] == ["before the backup", "after the backup"]
    assert b"SYSTEM: forged" not in remote_log(remote_dir, ann.writer)
