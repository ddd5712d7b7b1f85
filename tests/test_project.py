"""A project's identity travels: worktrees and clones of one repository share memory, every scope
spelling resolves, and a scope nobody reads by default is named at write time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from retained.brief import make_brief
from retained.project import identity, normalise_remote, project_identity, project_scope, read_scopes, resolve_scope
from retained.store import Store
from tests.conftest import cli_json

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@e"})


@pytest.fixture
def repos(tmp_path):
    """A remote, two clones of it, and a second worktree of the first clone."""
    remote = tmp_path / "remote.git"
    _git("init", "--bare", "-q", str(remote), cwd=tmp_path)
    seed = tmp_path / "seed"
    _git("clone", "-q", str(remote), str(seed), cwd=tmp_path)
    (seed / "README").write_text("x")
    _git("add", "README", cwd=seed)
    _git("commit", "-q", "-m", "init", cwd=seed)
    _git("push", "-q", "origin", "HEAD", cwd=seed)
    a = tmp_path / "clone-a"
    b = tmp_path / "elsewhere" / "clone-b"
    _git("clone", "-q", str(remote), str(a), cwd=tmp_path)
    _git("clone", "-q", str(remote), str(b), cwd=tmp_path)
    wt = tmp_path / "wt-feature"
    _git("worktree", "add", "-q", "-b", "feature", str(wt), cwd=a)
    return {"a": a.resolve(), "b": b.resolve(), "wt": wt.resolve(), "remote": remote}


@pytest.mark.parametrize("url", ["git@github.com:Org/Shop.git", "https://github.com/Org/Shop",
                                 "git://github.com/Org/Shop",
                                 "ssh://git@github.com/Org/Shop.git/", "https://user@GitHub.com/Org/Shop.git"])
def test_every_spelling_of_an_origin_url_gives_one_key(url):
    assert normalise_remote(url) == "github.com/Org/Shop"


def _reads(store, project):
    """The ids each default read path returns for a session in `project`."""
    return {"search": {h["id"] for h in store.search("release tuesdays", scopes=read_scopes(None, project))["hits"]},
            "list": {r["id"] for r in store.list(scopes=read_scopes(None, project))["records"]},
            "brief": {r["id"] for r in make_brief(store, project)["records"]}}


def test_a_local_remote_is_one_key_with_or_without_file_scheme():
    assert normalise_remote("file:///srv/git/shop.git/") == normalise_remote("/srv/git/shop.git") == "/srv/git/shop"


def test_two_worktrees_and_a_second_clone_share_memory(repos, store_dir):
    keys = {name: identity(path)["key"] for name, path in repos.items() if name != "remote"}
    assert len(set(keys.values())) == 1
    assert project_identity(repos["wt"])["name"] == "remote"
    # New records are filed under the project's key, not under the path of the checkout they came from.
    assert {project_scope(repos[w]) for w in ("a", "b", "wt")} == {keys["a"]}
    with Store(store_dir) as store:
        d = store.write("we release from the main branch on tuesdays", kind="decision",
                        default_scope=project_scope(repos["wt"]))
        store.write("someone else's project", scope="/projects/other")
    assert d["durable"]
    for where in ("a", "wt", "b"):
        with Store(store_dir) as store:
            project = project_scope(repos[where])
            assert all(d["id"] in ids for ids in _reads(store, project).values()), where
            assert "someone else" not in make_brief(store, project)["text"]


def test_records_filed_under_a_checkout_path_stay_the_projects(repos, store_dir):
    """Logs written before project keys hold path scopes: the index joins them, no log is rewritten."""
    with Store(store_dir) as store:
        d = store.write("we release from the main branch on tuesdays", kind="decision", scope=str(repos["a"]))
    before = (store_dir / "log.jsonl").read_bytes()
    for where in ("a", "wt", "b"):
        with Store(store_dir) as store:
            assert all(d["id"] in ids for ids in _reads(store, project_scope(repos[where])).values()), where
    assert (store_dir / "log.jsonl").read_bytes() == before


def test_a_moved_checkout_and_a_colleagues_clone_keep_the_memory(repos, store_dir, tmp_path):
    """The key is derived from what clones share (the origin URL), not from where a checkout lies."""
    _git("remote", "set-url", "origin", "git@github.com:Org/Shop.git", cwd=repos["a"])
    with Store(store_dir) as store:
        d = store.write("we release from the main branch on tuesdays", kind="decision",
                        default_scope=project_scope(repos["a"]))
    moved = tmp_path / "moved" / "clone-a"
    moved.parent.mkdir()
    repos["a"].rename(moved)
    with Store(store_dir) as store:
        assert all(d["id"] in ids for ids in _reads(store, project_scope(moved)).values())
    # A colleague cloned the same repository over another spelling of its URL, into another folder.
    colleague = tmp_path / "home" / "colleague" / "src" / "shop"
    _git("clone", "-q", str(repos["remote"]), str(colleague), cwd=tmp_path)
    _git("remote", "set-url", "origin", "https://colleague@github.com/Org/Shop/", cwd=colleague)
    assert project_scope(colleague) == project_scope(moved) == "github.com/Org/Shop"
    with Store(store_dir) as store:
        assert all(d["id"] in ids for ids in _reads(store, project_scope(colleague)).values())


def test_a_repository_without_a_remote_is_filed_under_its_root(tmp_path):
    repo = tmp_path / "solo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    assert project_scope(repo / ".") == str(repo.resolve())


def test_a_process_that_asked_before_sees_the_new_origin_and_a_new_repository(tmp_path):
    """The identity a process remembers (a server asks for its project's on every call) follows a changed
    origin, a remote added to a repository that had none, and a folder that became a repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    assert identity(repo) is None
    _git("init", "-q", cwd=repo)
    assert identity(repo)["key"].startswith("git-dir:")
    _git("remote", "add", "origin", "https://github.com/org/first.git", cwd=repo)
    assert identity(repo) == {"key": "github.com/org/first", "name": "first"}
    _git("remote", "set-url", "origin", "git@github.com:org/second.git", cwd=repo)
    assert identity(repo) == {"key": "github.com/org/second", "name": "second"}


def test_every_scope_spelling_resolves(repos, monkeypatch, tmp_path):
    a = str(repos["a"])
    key = project_scope(a)
    link = tmp_path / "link-to-a"
    link.symlink_to(repos["a"])
    monkeypatch.chdir(repos["a"])
    for spelling in (".", "./", a, a + "/", str(link), str(link) + "/", "../clone-a", a + "/sub/..", key,
                     identity(a)["name"], str(repos["wt"])):
        assert resolve_scope(spelling, key) == key, spelling
    assert resolve_scope("global", key) == "global" and resolve_scope("/no/such/project/", key) == "/no/such/project"


def test_a_write_to_a_scope_nobody_reads_by_default_warns(store):
    store.write("a record in the project", default_scope="/p/proj")
    quiet = store.write("a global record", scope="global", default_scope="/p/proj")
    assert not any("default reads" in w for w in quiet["warnings"])
    loud = store.write("filed under a typo", scope="/p/porj", default_scope="/p/proj")
    assert loud["durable"] and any("/p/porj" in w and "default reads" in w for w in loud["warnings"])
    again = store.write("a second one there", scope="/p/porj", default_scope="/p/proj")
    assert not any("default reads" in w for w in again["warnings"])  # now an existing scope


def test_retained_scopes_lists_the_scopes_with_counts(store_dir):
    with Store(store_dir) as store:
        for i in range(3):
            store.write(f"project fact {i}", scope="/p/one")
        old = store.write("a global rule", scope="global")
        store.write("a corrected global rule", scope="global", supersedes=old["id"])
    out = cli_json("scopes")
    by_scope = {s["scope"]: s for s in out["scopes"]}
    assert by_scope["/p/one"]["current"] == 3 and by_scope["/p/one"]["records"] == 3
    assert by_scope["global"]["current"] == 1 and by_scope["global"]["records"] == 2


def test_a_write_names_its_scope_in_any_spelling_too(repos, store_dir, monkeypatch):
    """`--scope .` (or a path with a trailing slash, or the short name) files under the project's scope."""
    monkeypatch.chdir(repos["wt"])
    key = project_scope(repos["wt"])
    for spelling in (".", str(repos["wt"]) + "/", "remote"):
        out = cli_json("write", f"written with --scope {spelling}", "--scope", spelling)
        assert out["durable"] and not any("default reads" in w for w in out["warnings"]), spelling
    cp = cli_json("checkpoint", "a checkpoint here", "--scope", ".")
    with Store(store_dir) as store:
        got = store.get([cp["id"]])["records"][0]
        assert got["scope"] == key
        assert {r["scope"] for r in store.list(scopes=None)["records"]} == {key}
