"""safe_file.edit against writers that strike at the worst moments: neither side's change is lost."""

from __future__ import annotations

import json
import os

import pytest

from retained import durable
from retained.installers import safe_file


def add_ours(text: str) -> str:
    doc = json.loads(text or "{}")
    doc.setdefault("mcpServers", {})["retained"] = {"command": "/x/retained"}
    return json.dumps(doc, indent=2)


def check_ours(old: str, new: str) -> None:
    assert "retained" in json.loads(new)["mcpServers"]


def foreign_write(path, key):
    """Another program's read-modify-write, done atomically like Claude Code does it."""
    doc = json.loads(path.read_text())
    doc[key] = True
    tmp = path.with_name(".foreign")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


@pytest.fixture
def config(tmp_path):
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / ".claude.json"
    path.write_text('{"mcpServers": {"other": {"command": "o"}}}')
    return path


def test_write_between_last_look_and_replace_is_not_clobbered(config, monkeypatch):
    """A write that lands after our last look but before the replace must survive, and ours too."""
    real_read = durable.read_with_stat
    looks = {"n": 0}

    def read(target):
        got = real_read(target)
        if target == config.resolve():
            looks["n"] += 1
            if looks["n"] == 2:  # the look just before the replace: the other program writes right after it
                foreign_write(config, "theirs")
        return got

    monkeypatch.setattr(durable, "read_with_stat", read)
    out = safe_file.edit(config, add_ours, verify=check_ours)
    doc = json.loads(config.read_text())
    assert out.action == "updated"
    assert doc.get("theirs") is True, "the other program's write was clobbered"
    assert set(doc["mcpServers"]) == {"other", "retained"}
    if durable.exchanger() is not None:
        assert looks["n"] >= 4  # the swap handed their file back and we started over on it


def test_stale_write_after_ours_is_noticed_and_redone(config, monkeypatch):
    """A program that read before our replace and writes after it undoes our change; we put it back."""
    before = config.read_text()
    checks = {"n": 0}

    def verify(old, new):
        check_ours(old, new)
        checks["n"] += 1
        if checks["n"] == 1:  # after our read-back: the other program writes back what it read before
            doc = json.loads(before)
            doc["theirs"] = True
            config.write_text(json.dumps(doc))

    safe_file.edit(config, add_ours, verify=verify, settle=(0.0,))
    doc = json.loads(config.read_text())
    assert checks["n"] == 2
    assert doc.get("theirs") is True and set(doc["mcpServers"]) == {"other", "retained"}


def test_file_created_by_someone_else_meanwhile_is_not_replaced(tmp_path, monkeypatch):
    path = tmp_path / "new.json"
    real_commit = durable.replace_if_unchanged
    calls = {"n": 0}

    def commit(target, original, data, mode):
        calls["n"] += 1
        if calls["n"] == 1:
            path.write_text('{"mcpServers": {}, "theirs": true}')
        return real_commit(target, original, data, mode)

    monkeypatch.setattr(durable, "replace_if_unchanged", commit)
    out = safe_file.edit(path, add_ours, verify=check_ours, default_text="{}")
    doc = json.loads(path.read_text())
    assert out.action == "updated" and doc.get("theirs") is True and "retained" in doc["mcpServers"]


def test_no_temp_files_are_left_behind(config):
    safe_file.edit(config, add_ours, verify=check_ours)
    assert sorted(p.name for p in config.parent.iterdir()) == [".claude.json", ".claude.json.retained-backup"]


def test_file_caught_mid_write_is_read_again_not_refused(config, monkeypatch):
    """A program that rewrites in place (truncate, then write) can be caught half-way: wait and retry."""
    whole = config.read_text()
    config.write_text(whole[: len(whole) // 2])  # what a reader sees in the middle of the other write
    real_sleep = safe_file.time.sleep

    def sleep(seconds):
        if config.read_text() != whole and "retained" not in config.read_text():
            config.write_text(whole)  # ... and the other program finishes its write
        real_sleep(0)

    monkeypatch.setattr(safe_file.time, "sleep", sleep)
    safe_file.edit(config, lambda t: add_ours(_parse_or_refuse(t)), verify=check_ours)
    assert set(json.loads(config.read_text())["mcpServers"]) == {"other", "retained"}


def test_truly_broken_file_is_refused_untouched(config):
    config.write_text('{"mcpServers": ')
    with pytest.raises(safe_file.ConfigError):
        safe_file.edit(config, lambda t: add_ours(_parse_or_refuse(t)), verify=check_ours)
    assert config.read_text() == '{"mcpServers": '


def _parse_or_refuse(text):
    try:
        json.loads(text)
    except ValueError as e:
        raise safe_file.ConfigError(f"does not parse: {e}") from None
    return text


def test_empty_file_caught_between_truncate_and_write_is_read_again(config, monkeypatch):
    """An empty file parses as an empty config: building on it would drop everything the other
    program is about to write back. Look again first."""
    whole = config.read_text()
    config.write_text("")  # the other program has truncated the file and not yet written it
    real_sleep = safe_file.time.sleep

    def sleep(seconds):
        if config.read_text() == "":
            config.write_text(whole)
        real_sleep(0)

    monkeypatch.setattr(safe_file.time, "sleep", sleep)
    safe_file.edit(config, add_ours, verify=check_ours, default_text="{}")
    assert set(json.loads(config.read_text())["mcpServers"]) == {"other", "retained"}


def test_a_file_that_stays_empty_is_a_real_empty_config_and_is_edited(config):
    """The wait for a writer caught mid-write ends: an empty file nobody writes is edited like any other."""
    config.write_text("")
    out = safe_file.edit(config, add_ours, verify=check_ours, default_text="{}")
    assert out.action == "updated" and set(json.loads(config.read_text())["mcpServers"]) == {"retained"}


def test_empty_after_this_edit_saw_text_is_never_built_on(config, monkeypatch):
    """Once the file was seen holding text, empty is another program between truncate and write,
    however long it stays: the edit gives up with nothing changed rather than write over it."""
    whole = config.read_text()
    real_read = durable.read_with_stat
    looks = []

    def read(target):
        data, st = real_read(target)
        looks.append(data)
        if len(looks) == 2:  # right after our first read: the other program truncates, and stalls
            config.write_text("")
        return data, st

    monkeypatch.setattr(durable, "read_with_stat", read)
    with pytest.raises(safe_file.ConfigError, match="kept changing"):
        safe_file.edit(config, add_ours, verify=check_ours, default_text="{}")
    assert config.read_text() == ""  # not our entry alone over the other program's file
    config.write_text(whole)


def test_a_change_that_does_not_check_out_is_undone(config):
    before = config.read_bytes()

    def refuse(old, new):
        raise AssertionError("entry missing")

    with pytest.raises(safe_file.ConfigError, match="original was restored"):
        safe_file.edit(config, add_ours, verify=refuse)
    assert config.read_bytes() == before


def test_undoing_never_replaces_another_programs_write(config):
    """If the file changed after our write, the undo leaves the other program's version alone."""
    def refuse(old, new):
        foreign_write(config, "theirs")
        raise AssertionError("entry missing")

    with pytest.raises(safe_file.ConfigError, match="its version was left in place"):
        safe_file.edit(config, add_ours, verify=refuse)
    assert json.loads(config.read_text()).get("theirs") is True


def test_a_new_file_that_does_not_check_out_is_removed(tmp_path):
    path = tmp_path / "fresh.json"

    def refuse(old, new):
        raise AssertionError("entry missing")

    with pytest.raises(safe_file.ConfigError):
        safe_file.edit(path, add_ours, verify=refuse, default_text="{}")
    assert not path.exists()


def remove_ours(text: str) -> str:
    doc = json.loads(text)
    doc.get("mcpServers", {}).pop("retained", None)
    return json.dumps(doc)


def nothing_left(text: str) -> bool:
    return json.loads(text) in ({}, {"mcpServers": {}})


def test_uninstall_removes_a_file_retained_created(tmp_path):
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "created.json"
    path.write_text('{"mcpServers": {"retained": {"command": "/x/retained"}}}')  # no backup: retained made it
    out = safe_file.edit(path, remove_ours, verify=lambda old, new: None, remove_if_empty=nothing_left)
    assert out.action == "removed" and not path.exists() and list((tmp_path / "cfg").iterdir()) == []


def test_uninstall_keeps_a_file_that_existed_before_install(config):
    safe_file.edit(config, add_ours, verify=check_ours)  # install: backs up the user's file
    config.write_text('{"mcpServers": {"retained": {"command": "/x/retained"}}}')
    out = safe_file.edit(config, remove_ours, verify=lambda old, new: None, remove_if_empty=nothing_left)
    assert out.action == "updated" and config.exists()


def test_removal_never_takes_a_write_that_lands_meanwhile(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "created.json"
    path.write_text('{"mcpServers": {"retained": {"command": "/x/retained"}}}')
    real_rename = os.rename
    struck = {"n": 0}

    def rename(src, dst):
        if str(src) == str(path.resolve()) and not struck["n"]:
            struck["n"] += 1
            foreign_write(path, "theirs")  # lands after our last look, just before the file goes
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    out = safe_file.edit(path, remove_ours, verify=lambda old, new: None, remove_if_empty=nothing_left)
    assert struck["n"] == 1 and out.action == "updated"
    assert json.loads(path.read_text()) == {"mcpServers": {}, "theirs": True}
