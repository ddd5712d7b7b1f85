"""Issue 28 item 1: one address per line that nothing else can shift. Rewriting one log (a purge of
this machine's own record) never changes how a teammate's lines are read; verify reconciles every log
the index reads; a read that meets an index entry pointing at the wrong bytes says so and heals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from retained.team import state
from tests.helpers.team import PROJECT, Machine, share_all, store_sync


def _crew(tmp_path, remote_dir):
    ann, bob = Machine(tmp_path, "ann", remote_dir.as_uri()), Machine(tmp_path, "bob", remote_dir.as_uri())
    share_all(ann, bob)
    return ann, bob


def test_a_purge_of_an_own_record_leaves_every_teammate_record_readable_on_cli_and_store(tmp_path, remote_dir):
    ann, bob = _crew(tmp_path, remote_dir)
    try:
        theirs = [bob.write(f"bob decided thing number {i} about the payment queue") for i in range(3)]
        assert store_sync(bob).ok
        mine = [ann.write(f"ann decided thing number {i} about the search cache") for i in range(3)]
        assert store_sync(ann).ok
        with ann.environment():
            got = ann.store.get(theirs)
            assert [r["id"] for r in got["records"]] == theirs and not got["missing"]
            receipt = ann.store.purge([mine[0]], "a secret")
            assert receipt["durable"]
            after = ann.store.get(theirs + mine[1:])
        assert [r["id"] for r in after["records"]] == theirs + mine[1:], after
        assert not after["missing"] and after["chain_ok"], after
        assert not any("pointed at" in w or "damaged" in w for w in after["warnings"]), after["warnings"]
        env = {**os.environ, **ann.env}
        proc = subprocess.run([sys.executable, "-m", "retained", "get", *theirs, "--json"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert [r["id"] for r in json.loads(proc.stdout)["records"]] == theirs
        proc = subprocess.run([sys.executable, "-m", "retained", "verify", "--json"], env=env,
                              capture_output=True, text=True, timeout=60)
        report = json.loads(proc.stdout)
        assert proc.returncode == 0 and report["intact"], report
        assert [t["records"] for t in report["team_logs"]] == [3]
    finally:
        ann.close()
        bob.close()


def test_verify_says_not_intact_when_an_index_entry_points_at_the_wrong_bytes_of_a_teammate_log(tmp_path, remote_dir):
    ann, bob = _crew(tmp_path, remote_dir)
    try:
        theirs = [bob.write(f"bob's decision {i}: keep the queue at-least-once") for i in range(2)]
        assert store_sync(bob).ok and store_sync(ann).ok
        with ann.environment():
            assert len(ann.store.get(theirs)["records"]) == 2
            # Damage the derived index the way the old purge did: move a teammate row's offset.
            db = ann.store.index._conn()
            db.execute("UPDATE records SET offset = offset + 7 WHERE id = ?", (theirs[1],))
            db.commit()
            ann.store.index._memo.clear()
            report = ann.store.verify()
            assert not report["intact"]
            assert [t["intact"] for t in report["team_logs"]] == [False]
            got = ann.store.get(theirs)
        # The read says what it met, heals, and still returns the record.
        assert [r["id"] for r in got["records"]] == theirs, got
        assert any("pointed at bytes that are not this record" in w for w in got["warnings"]), got["warnings"]
        with ann.environment():
            assert ann.store.verify()["intact"]
    finally:
        ann.close()
        bob.close()


def test_the_team_directory_is_the_projects_own(tmp_path, remote_dir):
    ann, bob = _crew(tmp_path, remote_dir)
    try:
        assert state.shared(ann.store_dir)[PROJECT].dir == ann.team_dir
    finally:
        ann.close()
        bob.close()
