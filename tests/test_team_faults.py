"""Faults of a team sync, each with real git: one clear line, no acknowledged record lost, the local
store intact, and a later sync that recovers."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from retained import records
from retained.team import git as team_git
from retained.team import state, wlog
from retained.team.sync import sync
from tests.helpers.team import bare_remote, free_port, git, put_remote_log, remote_log, texts


def one_line(text: str | None) -> bool:
    return bool(text) and "\n" not in text and "Traceback" not in text


def remote_file(remote_dir: Path, writer: str) -> bytes:
    return remote_log(remote_dir, writer)


def force_remote_file(remote_dir: Path, writer: str, data: bytes) -> None:
    """What a person (or a broken tool) outside retained could do: put other bytes in a writer's log
    and force-push the ref."""
    put_remote_log(remote_dir, writer, data)


def test_an_unreachable_remote_gives_one_line_keeps_the_records_pending_and_a_later_sync_recovers(tmp_path, machines):
    missing = tmp_path / "not-yet.git"
    ann = machines("ann", missing.as_uri())
    ann.write("first"), ann.write("second")
    log_before = (ann.store_dir / "log.jsonl").read_bytes()
    result = ann.sync()
    assert not result.ok and one_line(result.error)
    assert result.error.startswith(f"cannot reach the team remote {missing.as_uri()}: ")
    assert "records wait here" in result.hint and result.pending == 2
    assert (ann.store_dir / "log.jsonl").read_bytes() == log_before
    assert state.read_json(ann.team_dir / state.SYNC_FILE)["last"]["ok"] is False
    bare_remote(missing)
    again = ann.sync()
    assert again.ok and again.pushed == 2 and again.pending == 0
    assert b"second" in remote_file(missing, ann.writer)


def test_a_git_daemon_that_is_not_running_gives_one_line(machines):
    url = f"git://127.0.0.1:{free_port()}/memory.git"
    ann = machines("ann", url)
    ann.write("offline work")
    result = ann.sync()
    assert not result.ok and one_line(result.error) and result.error.startswith(f"cannot reach the team remote {url}")


def test_a_rejected_push_gives_one_line_keeps_the_records_and_a_later_sync_recovers(machines, remote_dir):
    hook = remote_dir / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'pushes to refs/retained are not allowed here' >&2\nexit 1\n")
    hook.chmod(0o755)
    ann = machines("ann")
    ann.write("a decision to keep")
    result = ann.sync()
    assert not result.ok and one_line(result.error)
    # What the server said is data: quoted, in one line (issue 29).
    assert result.error == ('the team remote refused the push to refs/retained/memory: "[remote rejected] '
                            '(pre-receive hook declined)": the remote said "pushes to refs/retained are not allowed here"')
    assert result.pending == 1 and texts(ann) == {"a decision to keep"}
    hook.unlink()
    again = ann.sync()
    assert again.ok and again.pushed == 1 and again.pending == 0 and again.published == 0


def test_a_flipped_byte_in_a_teammates_log_imports_the_verified_prefix_and_a_later_sync_recovers(machines, remote_dir):
    ann, bob = machines("ann"), machines("bob")
    for i in range(5):
        ann.write(f"ann decision {i}")
        if i == 1:  # bob verified ann's signed head at line 2: what a signature vouched for stays his
            ann.sync(), bob.sync()
    ann.sync()
    data = bytearray(remote_file(remote_dir, ann.writer))
    data[data.index(b"ann decision 2")] ^= 0x20
    force_remote_file(remote_dir, ann.writer, bytes(data))
    result = bob.sync()
    assert result.ok and result.refused == [f"writer {ann.writer}: line 3 is damaged (sha256 does not match the "
                                            "record's content); took in the 2 lines before it"]
    assert texts(bob) == {"ann decision 0", "ann decision 1"}
    assert ann.sync().ok  # the writer's own copy is longer: it repairs the remote
    again = bob.sync()
    assert again.ok and again.refused == [] and again.pulled == {ann.writer: 3}
    assert texts(bob) == {f"ann decision {i}" for i in range(5)}


def test_a_rewritten_line_already_seen_is_refused_for_that_writer_and_the_original_pushed_back(machines, remote_dir):
    ann, bob = machines("ann"), machines("bob")
    for text in ("use postgres", "tabs for indentation", "ship on Fridays"):
        ann.write(text)
    ann.sync(), bob.sync()
    original = remote_file(remote_dir, ann.writer)
    # A rewrite that verifies on its own: line 2 changed and the chain sealed again from there.
    recs = [json.loads(raw) for raw in original.split(b"\n")[:-1]]
    recs[1]["text"] = "spaces for indentation"
    for i in range(1, 3):
        recs[i]["prev"] = recs[i - 1]["sha256"]
        recs[i] = records.seal(recs[i])
    forged = b"".join(records.format_line(r) for r in recs)
    assert wlog.parse_log(ann.writer, forged).problem is None
    force_remote_file(remote_dir, ann.writer, forged)
    result = bob.sync()
    assert result.ok and result.refused == [f"writer {ann.writer}: the remote's line 2 (seq 2) is not the one this "
                                            "machine already holds: kept this machine's copy of that log"]
    assert "tabs for indentation" in texts(bob) and "spaces for indentation" not in texts(bob)
    assert remote_file(remote_dir, ann.writer) == original


def test_a_remote_ref_rewound_by_someone_else_loses_no_record(machines, remote_dir):
    ann, bob = machines("ann"), machines("bob")
    ann.write("one"), ann.write("two")
    old = ann.sync().commit
    ann.write("three")
    ann.sync()
    git("--git-dir", str(remote_dir), "update-ref", team_git.MEMORY_REF, old)  # a force-push of an old commit
    assert texts(bob) == set() and bob.sync().ok and texts(bob) == {"one", "two"}
    result = ann.sync()
    assert result.ok and result.pushed == 1 and result.commit != old  # the line the rewind dropped, again
    assert bob.sync().pulled == {ann.writer: 1} and texts(bob) == {"one", "two", "three"}


def test_a_ref_that_holds_something_other_than_memory_is_refused_and_nothing_is_pushed(tmp_path, machines, remote_dir):
    ann = machines("ann")
    ann.write("mine")
    checkout = tmp_path / "code"
    git("init", "--quiet", str(checkout))
    (checkout / "README").write_text("code, not memory\n")
    git("add", "README", cwd=checkout)
    git("-c", "user.name=x", "-c", "user.email=x@e", "commit", "--quiet", "-m", "code", cwd=checkout)
    git("push", "--quiet", remote_dir.as_uri(), f"HEAD:{team_git.MEMORY_REF}", cwd=checkout)
    before = git("--git-dir", str(remote_dir), "rev-parse", team_git.MEMORY_REF).stdout
    result = ann.sync()
    assert not result.ok and one_line(result.error)
    assert result.error == (f"refs/retained/memory on {remote_dir.as_uri()} does not hold retained memory (no format "
                            "file): someone pushed something else there; nothing was pulled or pushed")
    assert git("--git-dir", str(remote_dir), "rev-parse", team_git.MEMORY_REF).stdout == before
    assert result.pending == 1


@pytest.mark.parametrize("die_at", ["_install", "_commit", "push", "_pushed", "collect"])
def test_a_sync_killed_with_kill_9_at_any_step_loses_nothing_and_the_next_sync_recovers(machines, remote_dir, die_at):
    ann, bob = machines("ann"), machines("bob")
    bob.write("bob was here")
    bob.sync()
    secret = ann.write("purge me KILLED-SECRET")
    ann.sync()
    with ann.environment():
        ann.store.purge([secret], reason="test")  # so that the run reaches collect
    proc = ann.spawn_sync("--write", "20", "ann", "--die-at", die_at)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    assert "dying" in out
    result = ann.sync()
    assert result.ok, result
    assert result.pending == 0 and not list(ann.team_dir.rglob("*tmp"))
    expected = {f"ann decision {i}" for i in range(20)} | {"bob was here"}
    assert texts(ann) == expected and bob.sync().ok and texts(bob) == expected
    own = [json.loads(raw) for raw in remote_file(remote_dir, ann.writer).split(b"\n")[:-1]]
    assert len({r["id"] for r in own}) == len(own) == 22  # purged line, purge record, 20 decisions: once each
    for m in (ann, bob):
        assert b"KILLED-SECRET" not in b"".join(m.mirror_bytes().values())


def test_syncs_killed_with_kill_9_at_random_moments_never_lose_a_record(machines, remote_dir):
    ann = machines("ann")
    rng = random.Random(19)
    for round_ in range(4):
        proc = ann.spawn_sync("--write", "40", f"round{round_}")
        time.sleep(rng.uniform(0.3, 2.5))
        os.kill(proc.pid, signal.SIGKILL)  # only retained's process: a git it started may finish on its own
        proc.communicate(timeout=120)
        time.sleep(0.2)
    result = ann.sync()
    assert result.ok and result.pending == 0, result
    written = {r["text"] for r in ann.log() if r["kind"] == "decision"}
    assert texts(ann) == written and len(written) >= 40  # every round wrote before it synced
    on_remote = remote_file(remote_dir, ann.writer)
    assert wlog.parse_log(ann.writer, on_remote).problem is None
    assert {json.loads(raw)["text"] for raw in on_remote.split(b"\n")[:-1]} == written


def test_without_git_a_sync_says_so_in_one_line_and_changes_nothing(machines, monkeypatch, tmp_path):
    ann = machines("ann")
    ann.write("needs git")
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = ann.sync()
    assert not result.ok and one_line(result.error)
    assert result.error == "git is not installed or not on PATH; team memory needs it"
    assert result.pending == 1 and not (ann.team_dir / state.MIRROR).exists()


def test_a_second_machine_writing_under_this_writer_id_is_refused_and_the_owners_log_goes_back(machines, remote_dir,
                                                                                              monkeypatch):
    """A writer's published lines are its own (issue 29 item 4): a machine with another key that writes
    under this writer's id (a copied store, an attacker) has its lines refused by the owner, who
    pushes its own log back; no local log loses a record."""
    ann, twin = machines("ann"), machines("twin")
    ann.write("from the original")
    ann.sync()
    ann.write("the original again")
    with monkeypatch.context() as m:  # ann's push fails: her new line is in her mirror only
        m.setattr(team_git.Git, "push", lambda *a: team_git.PushOutcome(False, False, "[remote rejected] (injected)"))
        assert not ann.sync().ok
    twin.write("from the copy")
    with twin.environment():
        recs, _ = twin.outgoing()
        first = sync(twin.team_dir, twin.remote, ann.writer, recs)  # a copy of the store: same id, its own key
    assert first.ok and first.restored == [] and first.pulled == {}
    assert [r for r in first.refused if "(this machine)" in r] == [
        f"writer {ann.writer} (this machine): the remote's lines 1-1 of this machine's own log ({ann.log()[0]['id']}) "
        "were not written here and their head is not signed with this machine's key: refused, and this machine's own "
        "log pushed back (a store restored from a backup takes its newer lines back only when they are signed: keep "
        "signing on)"]
    result = ann.sync()
    assert result.ok and result.pending == 0
    assert any(r.startswith(f"writer {ann.writer}: the remote's line 1 (seq 1) is not the one this machine")
               and r.endswith("its own log pushed back") for r in result.refused), result.refused
    on_remote = remote_file(remote_dir, ann.writer)
    assert b"the original again" in on_remote and b"from the copy" not in on_remote  # the owner's log stands
    assert {r["text"] for r in ann.log() if r["kind"] == "decision"} == {"from the original", "the original again"}
    assert {r["text"] for r in twin.log() if r["kind"] == "decision"} == {"from the copy"}


def bobs_copy_of_anns_log(machines, n: int):
    """ann writes n decisions a0, a1, ...; both sync; the path of bob's mirror copy of ann's log."""
    ann, bob = machines("ann"), machines("bob")
    for i in range(n):
        ann.write(f"a{i}")
    ann.sync(), bob.sync()
    return ann, bob, bob.team_dir / state.MIRROR / f"{ann.writer}.jsonl"


def test_a_damaged_mirror_file_is_verified_and_repaired_from_the_remote(machines):
    ann, bob, path = bobs_copy_of_anns_log(machines, 4)
    data = bytearray(path.read_bytes())
    data[data.index(b'"a1"') + 1] = ord("b")
    path.write_bytes(bytes(data))
    result = bob.sync()
    assert result.ok and any(n.startswith(f"this machine's copy of writer {ann.writer}: line 2 is damaged")
                             for n in result.notes), result.notes
    assert texts(bob) == {"a0", "a1", "a2", "a3"}


def test_a_broken_or_missing_bare_repository_is_made_again(machines):
    ann = machines("ann")
    ann.write("x")
    ann.sync()
    (ann.team_dir / state.REPO / "HEAD").write_text("garbage\n")
    result = ann.sync()
    assert result.ok and any("was unusable" in n for n in result.notes), result.notes
    import shutil

    shutil.rmtree(ann.team_dir / state.REPO)
    ann.write("y")
    assert ann.sync().ok and texts(ann) == {"x", "y"}


def test_a_lock_file_left_by_a_killed_git_does_not_wedge_later_syncs(machines):
    ann = machines("ann")
    ann.write("x")
    ann.sync()
    lock = ann.team_dir / state.REPO / "refs" / "retained" / "fetched.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    ann.write("y")
    result = ann.sync()
    assert result.ok, result
    assert not lock.exists()


def test_a_remote_that_hangs_ends_the_sync_within_its_time_budget_in_one_line(machines):
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    url = f"git://127.0.0.1:{server.getsockname()[1]}/memory.git"
    ann = machines("ann", url)
    ann.write("written while the network hangs")
    started = time.monotonic()
    try:
        result = ann.sync(budget=5.0)
    finally:
        server.close()
        for conn, _ in held:
            conn.close()
    assert time.monotonic() - started < 20
    assert not result.ok and one_line(result.error) and result.pending == 1
    assert result.error == "git fetch was stopped: the sync's time budget of 5 s ran out"


def test_a_mirror_append_torn_by_a_crash_is_cut_off_and_fetched_again(machines):
    ann, bob, path = bobs_copy_of_anns_log(machines, 3)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"half a line')  # a crash in the middle of an append
    result = bob.sync()
    assert result.ok and any("line 4 is" in n for n in result.notes), result.notes
    assert path.read_bytes() == whole and texts(bob) == {"a0", "a1", "a2"}
