"""Issue 28 item 7: joining, watching, restoring. A fresh clone of a shared project learns once that its
remote holds team memory and the one command to join, from a look made beside the hook, never in it;
a clone that cannot push pulls and says "pull-only" with no failure note in later briefs; `share
--dry-run` lists exactly what `share` then pushes."""

from __future__ import annotations

import json
import time

from tests.helpers.team import git
from tests.test_team_cli import MEMORY_REF, Teammate, make_origin


def _start(t: Teammate) -> str:
    proc = t.run("hook", "session-start", "--host", "claude", input=json.dumps({"cwd": str(t.checkout),
                                                                                   "session_id": f"s{time.time_ns()}"}))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_fresh_clone_of_a_shared_project_learns_once_how_to_join(tmp_path):
    origin = make_origin(tmp_path)
    ann = Teammate(tmp_path, "ann", origin)
    ann.write("we ship on Tuesdays", "--kind", "decision")
    ann.ok("share")
    bob = Teammate(tmp_path, "bob", origin)
    bob.write("a note of bob's own")
    first = _start(bob)
    assert "retained share" not in first  # the look is started beside the hook, never made in it
    probe = bob.store / "team" / "probe.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        entries = json.loads(probe.read_text()) if probe.exists() else {}
        if any("memory" in e for e in entries.values()):
            break
        time.sleep(0.1)
    assert any(e.get("memory") is True for e in json.loads(probe.read_text()).values())
    second = _start(bob)
    assert "holds team memory" in second and "`retained share`" in second
    assert "holds team memory" not in _start(bob)  # once
    bob.ok("share")
    assert "we ship on Tuesdays" in bob.ok("brief")


def test_a_clone_that_cannot_push_pulls_and_says_pull_only(tmp_path):
    origin = make_origin(tmp_path)
    ann = Teammate(tmp_path, "ann", origin)
    ann.write("the release train leaves at noon", "--kind", "decision")
    ann.ok("share")
    ci = Teammate(tmp_path, "ci", origin)
    ci.write("ci's own decision it cannot push", "--kind", "decision")
    refuse = tmp_path / "origin.git" / "hooks" / "pre-receive"
    refuse.write_text("#!/bin/sh\necho 'Permission denied: read-only access' >&2\nexit 1\n")
    refuse.chmod(0o755)
    out = ci.json("share")
    project = out["projects"][0]
    assert out["ok"] and project["pull_only"] and project["pending"] >= 1, out
    assert "the release train leaves at noon" in ci.ok("brief")
    ci.ok("sync", "--background")
    assert "failed" not in ci.ok("brief")
    proc = ci.run("sync")
    assert proc.returncode == 0 and "pull-only" in proc.stdout


def test_share_dry_run_lists_exactly_what_share_pushes(tmp_path):
    origin = make_origin(tmp_path)
    ann = Teammate(tmp_path, "ann", origin)
    ann.write("shared decision one", "--kind", "decision")
    ann.write("a private note", "--kind", "note")
    doomed = ann.write("a decision that will be purged before sharing", "--kind", "decision")
    ann.ok("forget", "--purge", "--yes", doomed)
    ann.write("a fact for the team", "--kind", "fact", "--supersedes", ann.write("an old fact", "--kind", "fact"))
    listed = ann.json("share", "--dry-run")
    ann.ok("share")
    bare = tmp_path / "origin.git"
    on_remote = []
    for path in git("--git-dir", str(bare), "ls-tree", "-r", "--name-only", MEMORY_REF).stdout.decode().split():
        if path.startswith("writers/") and (path.endswith(".jsonl")):
            blob = git("--git-dir", str(bare), "show", f"{MEMORY_REF}:{path}").stdout
            on_remote += [json.loads(line)["id"] for line in blob.decode().splitlines()]
    assert sorted(r["id"] for r in listed["records"]) == sorted(on_remote)
    assert listed["would_share"] == len(on_remote)


def test_a_sync_whose_records_the_checkout_would_not_show_says_so_and_doctor_fails(tmp_path):
    origin = make_origin(tmp_path)
    ann, bob = Teammate(tmp_path, "ann", origin), Teammate(tmp_path, "bob", origin)
    ann.write("ann's decision", "--kind", "decision")
    ann.ok("share")
    bob.ok("share")
    bob.write("bob's decision on the cache", "--kind", "decision")
    bob.ok("sync")
    moved = make_origin(tmp_path / "moved")
    git("-C", str(ann.checkout), "remote", "set-url", "origin", moved)
    proc = ann.run("sync")
    assert proc.returncode == 0 and "run `retained share` in it again" in proc.stderr, proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if "do not show them" in ln]) == 1
    doctor = ann.run("doctor", "--json")
    assert doctor.returncode == 1
    failed = [c for c in json.loads(doctor.stdout)["checks"] if not c["ok"]]
    assert any(c["check"] == "pulled records are read here" for c in failed), failed
