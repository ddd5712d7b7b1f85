"""Purge across the team, with real git: the purged bytes leave every clone's mirror and bare repository
and the memory ref's reachable history on the remote; what remains is said exactly (unreachable objects
until the server's own gc)."""

from __future__ import annotations

import pytest

from retained import records
from retained.team import git as team_git
from retained.team import state
from retained.team.sync import PurgeRequest
from tests.helpers.team import Machine, all_objects, files_under, git, reachable_objects, texts

MARKER = b"PURGE-MARKER-7f3a"


@pytest.fixture
def crew(tmp_path, remote_dir):
    made = [Machine(tmp_path, name, remote_dir.as_uri()) for name in ("ann", "bob", "cat")]
    yield made
    for m in made:
        m.close()


def holds_marker(machine: Machine) -> list[str]:
    """Where on this machine's team directory the marker is: its files, and every object of its bare
    repository (packs are compressed, so objects are read through git)."""
    where = []
    plain = b"".join(files_under(p) if p.is_dir() else p.read_bytes()
                     for p in machine.team_dir.iterdir() if p.name != state.REPO)
    if MARKER in plain:
        where.append("files")
    if MARKER in all_objects(machine.team_dir / state.REPO):
        where.append("objects")
    return where


def purge_request(target: str, reason: str = "a password") -> PurgeRequest:
    return PurgeRequest(records.new_id(), (target,), records.now_rfc3339(), reason)


def share_a_secret(crew: list[Machine]) -> str:
    ann, bob, cat = crew
    ann.write("we use trunk-based development")
    secret = bob.write(f"the staging db codename is {MARKER.decode()}, do not tell")
    bob.write("bob's other decision")
    cat.write("cat's decision")
    for m in (ann, bob, cat, ann, bob):
        assert m.sync().ok
    assert all(MARKER in b"".join(m.mirror_bytes().values()) for m in crew)
    return secret


def test_after_a_purge_and_a_sync_on_every_clone_the_marker_is_in_no_clone_and_no_reachable_object(crew, remote_dir):
    ann, bob, cat = crew
    secret = share_a_secret(crew)
    request = purge_request(secret)
    result = ann.sync(purges=(request,))  # ann purges bob's record: any teammate may
    # each clone shows what it tombstoned and who asked: the purge record, its writer and author
    shown = [{"writer": bob.writer, "id": secret, "by": request.id, "purged_by": ann.writer, "author": "Ann Tester"}]
    assert result.ok and result.rewrote and result.purged == shown
    for m in (bob, cat):
        got = m.sync()
        assert got.ok and got.purged == shown, got
    # bob's sync says which record its store must purge from its own log (phase 2 does it).
    for m in crew:
        assert holds_marker(m) == [], m.name
        assert texts(m) == {"we use trunk-based development", "bob's other decision", "cat's decision"}
    assert MARKER not in reachable_objects(remote_dir)
    roots = git("--git-dir", str(remote_dir), "rev-list", "--max-parents=0", team_git.MEMORY_REF).stdout.split()
    assert len(roots) == 1


def test_what_remains_after_a_purge_is_only_unreachable_objects_on_the_server_until_its_own_gc(crew, remote_dir):
    secret = share_a_secret(crew)
    assert crew[0].sync(purges=(purge_request(secret),)).ok
    assert MARKER not in reachable_objects(remote_dir)
    assert MARKER in all_objects(remote_dir)  # the git server has not collected the old objects yet
    git("--git-dir", str(remote_dir), "gc", "--prune=now", "--quiet")  # what a host's own gc does, some day
    assert MARKER not in all_objects(remote_dir)


def test_tombstones_are_the_same_bytes_on_every_clone(crew):
    secret = share_a_secret(crew)
    crew[2].sync(purges=(purge_request(secret),))
    for m in crew:
        m.sync()
    mirrors = [m.mirror_bytes() for m in crew]
    assert mirrors[0] == mirrors[1] == mirrors[2]
    tomb = [r for r in crew[0].mirror()[crew[1].writer] if r["id"] == secret][0]
    assert records.is_tombstone(tomb) and set(tomb) <= {"seq", "id", "ts", "kind", "scope", "prev", "sha256",
                                                        "supersedes", "forgotten"}


def test_a_purge_from_the_local_store_reaches_the_teammates(crew):
    ann, bob, _ = crew
    mine = ann.write(f"my own mistake {MARKER.decode()}")
    ann.sync(), bob.sync()
    with ann.environment():
        ann.store.purge([mine], reason="pasted a secret")
    result = ann.sync()  # the store's purge record goes as a purge request
    assert result.ok and result.rewrote and [p["id"] for p in result.purged] == [mine]
    assert bob.sync().purged[0]["id"] == mine
    assert holds_marker(ann) == [] and holds_marker(bob) == []


def test_history_with_purged_bytes_pushed_back_by_someone_else_is_rewritten_again(tmp_path, crew, remote_dir):
    ann, bob, _ = crew
    secret = share_a_secret(crew)
    outsider = tmp_path / "outsider.git"  # someone who fetched the memory ref by hand, before the purge
    git("init", "--bare", "--quiet", str(outsider))
    git("--git-dir", str(outsider), "fetch", "--quiet", remote_dir.as_uri(), f"{team_git.MEMORY_REF}:refs/old")
    assert ann.sync(purges=(purge_request(secret),)).ok and bob.sync().ok
    git("--git-dir", str(outsider), "push", "--quiet", "--force", remote_dir.as_uri(), f"refs/old:{team_git.MEMORY_REF}")
    assert MARKER in reachable_objects(remote_dir)
    result = bob.sync()  # any clone that knows the purge puts it right
    assert result.ok and result.rewrote, result
    assert MARKER not in reachable_objects(remote_dir) and holds_marker(bob) == []
    # A clone that had not seen the purge took the old history in; its next sync drops it again.
    cat = crew[2]
    assert cat.sync().ok and holds_marker(cat) == []


def test_a_purge_that_races_a_teammates_push_still_leaves_no_purged_byte_reachable(crew, remote_dir, monkeypatch):
    ann, bob, cat = crew
    secret = share_a_secret(crew)
    cat.write("cat pushes in the middle")
    real_push = team_git.Git.push
    raced = []

    def push_after_cat(self, url, commit, ref, expect):
        if not raced:
            raced.append(True)
            assert cat.sync().ok  # lands first, on the history that still holds the secret
        return real_push(self, url, commit, ref, expect)

    monkeypatch.setattr(team_git.Git, "push", push_after_cat)
    result = ann.sync(purges=(purge_request(secret),))
    monkeypatch.undo()
    assert result.ok and result.rewrote and any("the remote moved during the sync" in n for n in result.notes)
    assert MARKER not in reachable_objects(remote_dir)
    for m in crew:
        m.sync()
        assert "cat pushes in the middle" in texts(m) and holds_marker(m) == []


def test_a_purge_naming_only_records_the_team_never_held_writes_nothing(crew, remote_dir):
    ann = crew[0]
    ann.write("x")
    first = ann.sync()
    result = ann.sync(purges=(purge_request("mem_NEVER_SHARED"),))
    assert result.ok and not result.rewrote and result.published == 0 and result.commit == first.commit


def test_retained_never_rewrites_any_ref_but_its_own(tmp_path, crew, remote_dir):
    checkout = tmp_path / "code"
    git("clone", "--quiet", remote_dir.as_uri(), str(checkout))
    (checkout / "f").write_text("code\n")
    git("add", "f", cwd=checkout)
    git("-c", "user.name=x", "-c", "user.email=x@e", "commit", "--quiet", "-m", "code", cwd=checkout)
    git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=checkout)
    main_before = git("--git-dir", str(remote_dir), "rev-parse", "refs/heads/main").stdout
    secret = share_a_secret(crew)
    assert crew[0].sync(purges=(purge_request(secret),)).ok
    assert git("--git-dir", str(remote_dir), "rev-parse", "refs/heads/main").stdout == main_before
    refs = git("--git-dir", str(remote_dir), "for-each-ref", "--format=%(refname)").stdout.split()
    assert sorted(refs) == [b"refs/heads/main", team_git.MEMORY_REF.encode()]


def test_a_purge_whose_push_is_refused_leaves_nothing_purged_here_and_the_next_sync_finishes_it(crew, remote_dir):
    ann, bob, _ = crew
    secret = share_a_secret(crew)
    hook = remote_dir / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    failed = ann.sync(purges=(purge_request(secret),))
    assert not failed.ok and "refused the push" in failed.error
    assert holds_marker(ann) == []  # the mirror is tombstoned and the old history's objects are gone
    again = ann.sync()  # the remote still refuses: fetching the old history again keeps nothing either
    assert not again.ok and holds_marker(ann) == []
    hook.unlink()
    done = ann.sync()
    assert done.ok and done.rewrote and MARKER not in reachable_objects(remote_dir)
    assert bob.sync().ok and holds_marker(bob) == [] and holds_marker(ann) == []


# -- issue 29 item 5: a purge record may tombstone only lines whose id and hash it names --------------------
def _forge_purge(remote_dir, eve: str, before: list, targets: list[dict]) -> list:
    """Eve's log, by hand: `before`, then one purge record listing `targets` ({writer, id, seq, sha256})
    exactly as given, pushed as anyone with push access could. Returns the log's lines."""
    import time

    from retained.team import hlc, wlog
    from tests.helpers.team import put_remote_log

    body = wlog.purge_body(records.new_id(), records.now_rfc3339(), [wlog.Target(**t) for t in targets], None, None)
    clock = hlc.HLC(int(time.time() * 1000) + len(before), 0)
    lines = [*before, wlog.seal_after(body, before[-1] if before else None, writer=eve, clock=clock,
                                      author={"name": "Eve Forger"}, seen=None)]
    put_remote_log(remote_dir, eve, wlog.encode(lines))
    return lines


def test_a_purge_record_tombstones_only_lines_whose_id_and_hash_it_names_and_a_clone_shows_who_asked(
        crew, remote_dir, capsys):
    import argparse

    from retained import team_cli

    ann, bob, _ = crew
    for text in ("we rotate keys monthly", "we deploy on Tuesdays"):
        ann.write(text)
    assert ann.sync().ok and bob.sync().ok
    first, second = bob.mirror()[ann.writer]
    eve = "wevee0000000000000001"
    wrong = [{"writer": ann.writer, "id": first["id"], "seq": 1, "sha256": second["sha256"]},  # another line's hash
             {"writer": ann.writer, "id": first["id"], "seq": 2, "sha256": second["sha256"]}]  # another line's id
    lines = _forge_purge(remote_dir, eve, [], wrong)
    missed = bob.sync()
    assert missed.ok and missed.purged == [] and texts(bob) == {"we rotate keys monthly", "we deploy on Tuesdays"}
    right = [{"writer": ann.writer, "id": first["id"], "seq": 1, "sha256": first["sha256"]}]
    lines = _forge_purge(remote_dir, eve, lines, right)
    hit = bob.sync()
    assert hit.ok and texts(bob) == {"we deploy on Tuesdays"}
    assert hit.purged == [{"writer": ann.writer, "id": first["id"], "by": lines[-1].rec["id"], "purged_by": eve,
                           "author": "Eve Forger"}]
    shared = state.Shared("example.com/acme/shop", remote_dir.as_uri(), team_git.MEMORY_REF, bob.team_dir, "")
    team_cli._report(argparse.Namespace(json=False), [(shared, hit)])
    assert f"purged: {first['id']} of writer {ann.writer}, asked by Eve Forger (writer {eve}, purge " \
           f"{lines[-1].rec['id']})" in capsys.readouterr().err
