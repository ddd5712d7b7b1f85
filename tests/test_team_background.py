"""Issue 19 item 5: sync in the background at session start and after a session's writes, never in
the hook; a failed background sync leaves a note the next brief shows once; doctor and the page show
each shared project. Real git, real `python -m retained` processes, separate HOMEs and stores."""

from __future__ import annotations

import json
import time

from retained.team import background, state
from tests.test_team_cli import Teammate, make_origin


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


def _session_start(m: Teammate, sid: str = "s1"):
    payload = {"cwd": str(m.checkout), "session_id": sid, "hook_event_name": "SessionStart", "source": "startup"}
    started = time.perf_counter()
    proc = m.run("hook", "session-start", "--host", "claude", input=json.dumps(payload))
    return proc, time.perf_counter() - started


def test_session_start_syncs_in_the_background_beside_the_brief_not_in_it(tmp_path):
    origin = make_origin(tmp_path)
    ann, bob = Teammate(tmp_path, "ann", origin), Teammate(tmp_path, "bob", origin)
    ann.ok("share")
    bob.ok("share")
    rid = ann.write("the release train leaves on Thursdays", "--kind", "decision")
    ann.ok("sync")
    proc, took = _session_start(bob)
    assert proc.returncode == 0 and proc.stdout, proc.stderr
    assert "the release train" not in proc.stdout  # the brief did not wait for the sync
    assert _wait_for(lambda: rid in bob.search("release train")), "the background sync never brought it"
    assert rid in (_session_start(bob, "s2")[0].stdout)  # the next session's brief has it


def test_a_sessions_writes_are_pushed_in_the_background_after_the_stop_hook(tmp_path):
    origin = make_origin(tmp_path)
    ann, bob = Teammate(tmp_path, "ann", origin), Teammate(tmp_path, "bob", origin)
    ann.ok("share")
    bob.ok("share")
    (bob.store / "team" / background.STAMP).unlink(missing_ok=True)  # as if the last kick were long ago
    rid = bob.write("feature flags live in flags.yaml", "--kind", "convention")
    payload = {"cwd": str(bob.checkout), "session_id": "s9", "hook_event_name": "Stop"}
    assert bob.run("hook", "stop", "--host", "claude", input=json.dumps(payload)).returncode == 0
    # only bob's background sync can push it: bob runs no sync of his own here
    assert _wait_for(lambda: ann.ok("sync") is not None and rid in ann.search("flags")), "bob's record never reached ann"


def test_a_failed_background_sync_leaves_a_note_the_next_brief_shows_once(tmp_path):
    origin = make_origin(tmp_path)
    bob = Teammate(tmp_path, "bob", origin)
    bob.write("a decision to share", "--kind", "decision")
    bob.ok("share")
    key = json.loads((bob.store / "team" / "shared.json").read_text())["projects"]
    (name,) = key
    state.share(bob.store, name, (tmp_path / "moved-away.git").as_uri())  # the remote is gone
    proc = bob.run("sync", "--background")
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr == ""  # silent: there is no one to tell
    first = bob.ok("brief")
    assert "Note: the background team sync failed" in first
    assert "Note:" not in bob.ok("brief")  # once


def test_doctor_and_the_page_show_each_shared_project(tmp_path, monkeypatch):
    from retained.installers.doctor import doctor_store
    from retained.store import Store
    from retained.ui import Api

    origin = make_origin(tmp_path)
    ann, bob = Teammate(tmp_path, "ann", origin), Teammate(tmp_path, "bob", origin)
    ann.write("logs are JSON", "--kind", "convention")
    ann.ok("share")
    bob.ok("share")
    bob.write("bob's decision, not pushed yet", "--kind", "decision")
    for k in ("HOME", "RETAINED_DIR", "RETAINED_EMBED"):
        monkeypatch.setenv(k, bob.env[k])
    checks = [c for c in doctor_store(bob.store) if c.host == "team"]
    assert len(checks) == 1 and checks[0].ok
    detail = checks[0].detail
    assert origin in detail and "last sync" in detail and "ok" in detail
    assert "1 writer(s) seen" in detail and "1 pending push" in detail and "0 open conflict(s)" in detail
    with Store(bob.store) as store:
        team = Api(store, "token", bob.store).health()["team"]
    assert len(team) == 1 and team[0]["remote"] == origin and team[0]["last_ok"] is True
    assert len(team[0]["writers"]) == 1 and team[0]["pending"] == 1 and team[0]["conflicts"] == 0
    # signed or unsigned, per author: ann's head was signed with the key retained made in her HOME
    (ann_writer,) = team[0]["writers"]
    assert team[0]["signed"][ann_writer]["status"] == "signed" and f"{ann_writer} signed" in detail
