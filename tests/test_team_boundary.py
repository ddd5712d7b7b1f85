"""Issue 29 item 3: the boundary follows the record itself. Whether a record leaves the machine depends
on its own scope, kind and flags, never on what it corrects or retracts; redaction runs on every string
of a line that leaves, field names at any depth included. Checked by scanning every object of both
remotes."""

from __future__ import annotations

from retained.team import share, state
from tests.helpers.team import PROJECT, Machine, all_objects, bare_remote, share_all


def _sync_all(m: Machine) -> None:
    with m.environment():
        for _, result in share.sync_all(m.store):
            assert result.ok, result


def test_nothing_global_reaches_the_project_ref_and_nothing_of_the_project_reaches_the_personal_ref(tmp_path, remote_dir):
    personal = tmp_path / "personal.git"
    bare_remote(personal)
    ann = Machine(tmp_path, "ann", remote_dir.as_uri())
    share_all(ann)
    state.share(ann.store_dir, state.PERSONAL, personal.as_uri())
    try:
        with ann.environment():
            team = ann.store.write("we deploy with blue-green switches", kind="decision", scope=PROJECT)["id"]
            mine = ann.store.write("I prefer dark terminals", kind="preference", scope="global")["id"]
        _sync_all(ann)
        with ann.environment():
            # A correction filed in global of the shared decision: personal text, stays off the project ref.
            ann.store.write("GLOBALCORRECTION my own take on deploys", kind="decision", scope="global", supersedes=team)
            # A correction filed in the project of the personal preference: stays off the personal ref.
            ann.store.write("PROJECTCORRECTION the shop prefers light terminals", kind="decision", scope=PROJECT,
                            supersedes=mine)
            ann.store.write("the token field", kind="decision", scope=PROJECT,
                            fields={"deep": {"ghp_" + "a1B2" * 9: "x", "list": [{"sk_live_" + "Z9" * 12: 1}]}})
        _sync_all(ann)
        project_objects, personal_objects = all_objects(remote_dir), all_objects(personal)
        assert b"blue-green" in project_objects and b"dark terminals" in personal_objects  # the checks can fail
        assert b"GLOBALCORRECTION" not in project_objects
        assert b"PROJECTCORRECTION" not in personal_objects
        assert b"PROJECTCORRECTION" in project_objects and b"GLOBALCORRECTION" in personal_objects
        assert b"the token field" in project_objects
        assert b"ghp_" + b"a1B2" * 9 not in project_objects and b"sk_live_" + b"Z9" * 12 not in project_objects
    finally:
        ann.close()
