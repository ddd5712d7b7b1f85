"""Team memory's files on this machine (retained/team/state.py): the writer id, the shared projects,
the sync state that doctor and the page read; all written atomically."""

from __future__ import annotations

import shutil
import stat

import pytest

from retained.errors import StoreError, UsageError
from retained.team import state
from retained.team.sync import status
from tests.helpers.team import PROJECT, Machine, bare_remote


def test_the_writer_id_is_random_stable_and_new_for_a_store_copied_elsewhere(tmp_path):
    store = tmp_path / "store"
    first = state.writer_id(store)
    assert first == state.writer_id(store) and first.startswith("w") and len(first) == 21
    assert state.writer_id(tmp_path / "other") != first
    copy = tmp_path / "copied"
    shutil.copytree(store, copy)
    moved = state.writer_id(copy)
    assert moved != first
    assert state.read_json(copy / "team" / state.WRITER_FILE)["previous"] == [first]
    assert state.writer_id(store) == first  # the original keeps its id


def test_share_is_idempotent_keeps_its_first_date_and_unshare_removes_the_projects_team_directory(tmp_path):
    store = tmp_path / "store"
    one = state.share(store, PROJECT, "https://example.com/acme/shop.git")
    again = state.share(store, PROJECT, "git@example.com:acme/shop.git")
    assert again.since == one.since and state.shared(store)[PROJECT].remote == "git@example.com:acme/shop.git"
    assert again.dir == state.project_dir(store, PROJECT) and again.ref == "refs/retained/memory"
    (again.dir / state.MIRROR).mkdir(parents=True)
    (again.dir / state.MIRROR / "wx.jsonl").write_bytes(b"")
    assert state.unshare(store, PROJECT).key == PROJECT
    assert state.shared(store) == {} and not again.dir.exists()
    assert state.unshare(store, PROJECT) is None


def test_a_ref_name_that_git_would_refuse_is_a_usage_error(tmp_path):
    for ref in ("memory", "refs/retained/me mory", "refs/../x", "refs/a:b"):
        with pytest.raises(UsageError):
            state.share(tmp_path / "store", PROJECT, "https://example.com/x.git", ref=ref)


def test_unshare_waits_for_a_running_sync_and_says_so_in_one_line(tmp_path):
    store = tmp_path / "store"
    shared = state.share(store, PROJECT, "https://example.com/x.git")
    with state.try_lock(shared.dir / state.SYNC_LOCK, 0) as held:
        assert held
        with pytest.raises(StoreError) as err:
            state.unshare(store, PROJECT, wait=0.2)
    assert err.value.message == "a sync of this project is running"
    assert PROJECT in state.shared(store)


def test_team_files_are_private_to_this_user(tmp_path):
    store = tmp_path / "store"
    state.writer_id(store)
    state.share(store, PROJECT, "https://example.com/x.git")
    for name in (state.WRITER_FILE, state.SHARED_FILE):
        assert stat.S_IMODE((store / "team" / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((store / "team").stat().st_mode) == 0o700


def test_a_write_killed_before_its_rename_leaves_the_old_file_and_its_temporary_is_discarded(tmp_path):
    path = tmp_path / "team" / "shared.json"
    state.write_json(path, {"version": 1, "projects": {}})
    left = path.with_name(".shared.json.999.dead.tmp")
    left.write_bytes(b'{"half')  # what a kill -9 between write and rename leaves
    assert state.read_json(path) == {"version": 1, "projects": {}}
    state.discard_temporaries(path.parent)
    assert not left.exists()


def test_a_state_file_that_is_not_json_is_named_in_one_line(tmp_path):
    path = tmp_path / "shared.json"
    path.write_text("{not json")
    with pytest.raises(StoreError) as err:
        state.read_json(path)
    assert str(path) in err.value.message and "move shared.json aside" in err.value.hint


def test_status_shows_the_last_sync_its_outcome_the_writers_and_what_waits_to_be_pushed(tmp_path):
    ok_remote = bare_remote(tmp_path / "remote.git")
    ann = Machine(tmp_path, "ann", ok_remote)
    try:
        ann.write("one")
        ann.sync()
        shown = status(ann.team_dir, ann.writer)
        assert shown["last"]["ok"] and shown["writers"] == [ann.writer] and shown["pending"] == 0
        assert shown["remote"] == ok_remote
        hook = tmp_path / "remote.git" / "hooks" / "pre-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text("#!/bin/sh\nexit 1\n")
        hook.chmod(0o755)
        ann.write("two")
        ann.sync()
        shown = status(ann.team_dir, ann.writer)
        assert not shown["last"]["ok"] and "refused the push" in shown["last"]["error"] and shown["pending"] == 1
    finally:
        ann.close()
