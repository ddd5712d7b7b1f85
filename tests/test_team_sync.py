"""Sync with real git: bare remotes over file:// and over git's own protocol, several machines
(separate HOMEs, stores and git identities), concurrent syncs. No git operation is faked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retained import records
from retained.team import git as team_git
from retained.team import hlc, state, verifier, wlog
from retained.team.sync import sync
from tests.helpers.team import PROJECT, all_objects, bare_remote, git, git_daemon, local_record, put_remote_log, remote_log, texts

# Run as a script without site-packages (-S) or the environment (-I): only the standard library is there.
VERIFIER = [sys.executable, "-I", "-S", verifier.__file__]


@pytest.fixture
def remote(remote_dir):
    return remote_dir.as_uri()


def test_every_writer_sees_every_other_writers_records_after_a_sync_each(machines):
    ann, bob, cat = machines("ann"), machines("bob"), machines("cat")
    ann.write("we deploy on Tuesdays")
    bob.write("the API is versioned in the URL", kind="convention")
    cat.write("staging lives in eu-west-1", kind="fact")
    cat.write("cat's scratch note", kind="note")  # not a shared kind: never leaves cat's machine
    for m in (ann, bob, cat, ann, bob):
        result = m.sync()
        assert result.ok, result
    expected = {"we deploy on Tuesdays", "the API is versioned in the URL", "staging lives in eu-west-1"}
    for m in (ann, bob, cat):
        assert texts(m) == expected
        assert sorted(m.mirror()) == sorted([ann.writer, bob.writer, cat.writer])
    last = bob.sync()
    assert last.ok and last.pulled == {} and last.pushed == 0 and last.pending == 0
    assert last.writers == sorted([ann.writer, bob.writer, cat.writer])


def test_sync_over_git_daemon_on_localhost(tmp_path, machines):
    bare_remote(tmp_path / "served" / "memory.git")
    with git_daemon(tmp_path / "served") as base:
        ann, bob = machines("ann", base + "memory.git"), machines("bob", base + "memory.git")
        ann.write("releases are cut from main")
        assert ann.sync().ok
        bob.write("main is protected")
        result = bob.sync()
        assert result.ok and result.pulled == {ann.writer: 1} and result.pushed == 1, result
        assert ann.sync().pulled == {bob.writer: 1}
    assert texts(ann) == texts(bob) == {"releases are cut from main", "main is protected"}


def test_each_record_carries_its_writer_and_the_author_from_that_machines_git_config(machines):
    ann, bob = machines("ann"), machines("bob")
    ann.write("use UTC everywhere")
    bob.write("log in JSON")
    ann.sync(), bob.sync(), ann.sync()
    by_text = {r["text"]: (w, r) for w, recs in ann.mirror().items() for r in recs}
    writer, rec = by_text["use UTC everywhere"]
    assert writer == ann.writer == rec["writer"]
    assert rec["author"] == {"name": "Ann Tester", "email": "ann@example.com"}
    assert by_text["log in JSON"][1]["author"] == {"name": "Bob Tester", "email": "bob@example.com"}
    local = next(r for r in ann.log() if r["text"] == "use UTC everywhere")
    assert rec["id"] == local["id"] and rec["ts"] == local["ts"] and rec["scope"] == PROJECT


def test_a_sync_with_nothing_new_makes_no_commit_and_pushes_nothing(machines, remote):
    ann = machines("ann")
    ann.write("one")
    first = ann.sync()
    again = ann.sync()
    assert again.ok and again.commit == first.commit and again.published == 0 and again.pushed == 0
    count = git("--git-dir", remote.removeprefix("file://"), "rev-list", "--count", team_git.MEMORY_REF).stdout
    assert count.strip() == b"1"


def test_the_memory_ref_holds_only_a_format_file_and_one_log_and_signature_per_writer(machines, remote):
    ann, bob = machines("ann"), machines("bob")
    ann.write("a"), bob.write("b")
    ann.sync(), bob.sync()
    listing = git("--git-dir", remote.removeprefix("file://"), "ls-tree", "-r", "--name-only",
                  team_git.MEMORY_REF).stdout.decode().split()
    assert sorted(listing) == sorted(["format", "allowed_signers", *(f"writers/{m.writer}/000000.jsonl" for m in (ann, bob)),
                                      *(f"signatures/{m.writer}.sig" for m in (ann, bob))])
    refs = git("--git-dir", remote.removeprefix("file://"), "for-each-ref", "--format=%(refname)").stdout.split()
    assert refs == [team_git.MEMORY_REF.encode()]


def test_sharing_leaves_the_projects_checkout_untouched(tmp_path, machines, remote):
    checkout = tmp_path / "checkout"
    git("clone", "--quiet", remote, str(checkout))
    (checkout / "app.py").write_text("print('hi')\n")
    git("-c", "user.name=t", "-c", "user.email=t@e", "add", "app.py", cwd=checkout)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "-m", "app", cwd=checkout)
    git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=checkout)
    before = (git("status", "--porcelain", cwd=checkout).stdout, git("for-each-ref", cwd=checkout).stdout,
              git("count-objects", "-v", cwd=checkout).stdout)
    ann = machines("ann", team_git.remote_url(checkout))
    ann.write("decisions live on their own ref")
    assert ann.sync().ok
    after = (git("status", "--porcelain", cwd=checkout).stdout, git("for-each-ref", cwd=checkout).stdout,
             git("count-objects", "-v", cwd=checkout).stdout)
    assert after == before
    assert not list(checkout.rglob("*.jsonl"))
    heads = git("--git-dir", remote.removeprefix("file://"), "for-each-ref", "--format=%(refname)").stdout.split()
    assert sorted(heads) == [b"refs/heads/main", team_git.MEMORY_REF.encode()]


def test_only_the_records_given_to_sync_reach_any_object_of_the_remote(machines, remote):
    ann = machines("ann")
    ann.write("shared decision MARK-SHARED-1")
    ann.write("personal note MARK-NOTE-2", kind="note")
    ann.write("a preference MARK-PREF-3", kind="preference")
    with ann.environment():
        ann.store.write("a global decision MARK-GLOBAL-4", kind="decision", scope=records.GLOBAL_SCOPE)
    recs, _ = ann.outgoing()
    recs = [r for r in recs if r.get("scope") == PROJECT]
    with ann.environment():
        assert sync(ann.team_dir, ann.remote, ann.writer, recs).ok
    everything = all_objects(Path(remote.removeprefix("file://")))
    assert b"MARK-SHARED-1" in everything
    for marker in (b"MARK-NOTE-2", b"MARK-PREF-3", b"MARK-GLOBAL-4"):
        assert marker not in everything


def test_the_standalone_verifier_passes_on_a_real_shared_remote_and_fails_on_a_tampered_one(tmp_path, machines, remote):
    ann, bob = machines("ann"), machines("bob")
    for i in range(3):
        ann.write(f"ann decision {i}")
        bob.write(f"bob decision {i}")
    secret = ann.write("rotate the key SECRET-PLAN")
    ann.sync(), bob.sync()
    with ann.environment():
        ann.store.purge([secret], reason="leaked")
    assert ann.sync().ok and bob.sync().ok
    copy = tmp_path / "outside.git"
    git("clone", "--bare", "--quiet", remote, str(copy))
    git("--git-dir", str(copy), "fetch", "--quiet", "origin", f"{team_git.MEMORY_REF}:{team_git.MEMORY_REF}")
    proc = subprocess.run([*VERIFIER, str(copy)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{ann.writer}: intact: 5 records" in proc.stdout and f"{bob.writer}: intact: 3 records" in proc.stdout
    tampered = remote_log(copy, bob.writer).replace(b"bob decision 1", b"bob decision X")
    put_remote_log(copy, bob.writer, tampered, to="refs/forged")
    proc = subprocess.run([*VERIFIER, str(copy), "refs/forged"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"{bob.writer}: line 2 (seq 2): bad hash (1 lines verified before it)" in proc.stdout, proc.stdout


def test_concurrent_syncs_from_several_machines_all_land(machines, remote):
    crew = [machines(name) for name in ("ann", "bob", "cat", "dan")]
    procs = [m.spawn_sync("--write", "25", m.name) for m in crew]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results), [r["error"] for r in results]
    for m in crew:
        assert m.sync().ok
    expected = {f"{m.name} decision {i}" for m in crew for i in range(25)}
    for m in crew:
        assert texts(m) == expected
    proc = subprocess.run([*VERIFIER, remote.removeprefix("file://")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.count("intact: 25 records") == 4, proc.stdout


def test_the_order_of_all_records_is_identical_on_every_clone(machines):
    crew = [machines(name) for name in ("ann", "bob", "cat")]
    for round_ in range(3):
        for m in crew:
            m.write(f"{m.name} round {round_}")
            m.sync()
    for m in crew:
        m.sync()

    def order(m):
        rows = [(w, r) for w, recs in m.mirror().items() for r in recs]
        return [r["sha256"] for w, r in sorted(rows, key=lambda wr: hlc.order_key(*wr))]

    orders = [order(m) for m in crew]
    assert orders[0] == orders[1] == orders[2] and len(orders[0]) == 9
    # A record written after a sync that brought others in comes after them in that order.
    mirror = crew[0].mirror()
    last = {(w, r["text"]): hlc.order_key(w, r) for w, recs in mirror.items() for r in recs}
    assert last[(crew[0].writer, "ann round 1")] > last[(crew[2].writer, "cat round 0")]


def test_a_correction_carries_what_its_writer_had_seen_of_each_teammate(machines):
    ann, bob = machines("ann"), machines("bob")
    first = ann.write("cache for 5 minutes")
    ann.sync(), bob.sync()
    # Bob's store cannot name Ann's record yet: his correction is built as his store will write it.
    with bob.environment():
        fix = local_record("cache for 10 minutes", supersedes=first)
        assert sync(bob.team_dir, bob.remote, bob.writer, [fix]).ok
    [rec] = [r for r in bob.mirror()[bob.writer] if r["text"] == "cache for 10 minutes"]
    assert rec["seen"] == {ann.writer: 1}
    assert hlc.parse(rec["hlc"]) > hlc.parse(ann.mirror()[ann.writer][0]["hlc"])


def test_two_syncs_of_one_project_at_once_on_one_machine_take_turns(machines):
    ann = machines("ann")
    ann.write("one")
    with state.try_lock(ann.team_dir / state.SYNC_LOCK, 0) as held:
        assert held
        busy = ann.spawn_sync("--wait", "0")
        out, err = busy.communicate(timeout=120)
        result = json.loads(out.strip().splitlines()[-1])
        assert not result["ok"] and result["error"] == "another sync of this project is running on this machine"
        waiting = ann.spawn_sync("--wait", "60")
    out, err = waiting.communicate(timeout=120)
    assert json.loads(out.strip().splitlines()[-1])["ok"], err
    assert texts(ann) == {"one"}


def test_every_mirror_file_is_a_verified_writer_log_and_no_temporary_file_is_left(machines):
    ann, bob = machines("ann"), machines("bob")
    for i in range(5):
        ann.write(f"a{i}"), bob.write(f"b{i}")
        ann.sync(), bob.sync()
    for m in (ann, bob):
        for w, data in m.mirror_bytes().items():
            assert wlog.parse_log(w, data).problem is None
        assert not [p for p in m.team_dir.rglob("*tmp")]
        saved = state.read_json(m.team_dir / state.SYNC_FILE)
        assert saved["last"]["ok"] and saved["remote"] == m.remote


def test_a_retraction_and_a_concurrent_edit_each_say_they_did_not_see_the_other_and_both_survive_a_resync(machines):
    ann, bob = machines("ann"), machines("bob")
    first = ann.write("feature flags live in LaunchDarkly")
    ann.sync(), bob.sync()
    # Offline on both machines: bob retracts ann's record, ann corrects it.
    with bob.environment():
        retraction = local_record("retracted 1 record", kind="forget", action="retract", targets=[first])
        assert sync(bob.team_dir, bob.remote, bob.writer, [retraction]).ok
    ann.write("feature flags live in Unleash", supersedes=first)
    assert ann.sync().ok and bob.sync().ok and ann.sync().ok
    for m in (ann, bob):
        logs = m.mirror()
        [r] = [r for r in logs[bob.writer] if r["kind"] == "forget"]
        [e] = [r for r in logs[ann.writer] if r.get("supersedes") == first]
        assert r["seen"] == {ann.writer: 1} and e["seen"] == {}
        assert not wlog.saw(ann.writer, e, bob.writer, r) and not wlog.saw(bob.writer, r, ann.writer, e)
        assert wlog.saw(bob.writer, r, ann.writer, logs[ann.writer][0])  # the retraction saw the record
    later = bob.write("we deploy with Argo")
    assert later and bob.sync().ok and ann.sync().ok
    assert any(r.get("action") == "retract" for r in ann.mirror()[bob.writer])  # a retraction never goes away


def test_a_mirror_file_grows_in_place_like_the_local_log_and_only_a_purge_rewrites_it(machines):
    ann, bob = machines("ann"), machines("bob")
    ann.write("first")
    ann.sync(), bob.sync()
    path = bob.team_dir / state.MIRROR / f"{ann.writer}.jsonl"
    inode, before = path.stat().st_ino, path.read_bytes()
    gone = ann.write("second, to be purged")
    ann.write("third")
    ann.sync(), bob.sync()
    assert path.stat().st_ino == inode and path.read_bytes().startswith(before)  # appended, not replaced
    with ann.environment():
        ann.store.purge([gone], reason="test")
    ann.sync(), bob.sync()
    assert path.stat().st_ino != inode and b"second, to be purged" not in path.read_bytes()
    assert wlog.parse_log(ann.writer, path.read_bytes()).problem is None


@pytest.mark.parametrize("many", [False, True])
def test_a_record_already_in_any_writers_log_is_never_published_twice(machines, many):
    ann = machines("ann")
    for i in range(70 if many else 3):  # past 64 ids, sync reads every line instead of searching bytes
        ann.write(f"decision {i}")
    assert ann.sync().ok
    import shutil

    shutil.rmtree(ann.team_dir)  # the mirror lost: the records come back from the remote, not again from ann
    result = ann.sync()
    # its own lines, signed with its own key, come back as this writer's own (issue 28 item 7), not as pulled
    assert result.ok and result.published == 0 and result.pulled == {} and len(result.restored) == (70 if many else 3)
    own = ann.mirror()[ann.writer]
    assert len(own) == len({r["id"] for r in own}) == (70 if many else 3)
