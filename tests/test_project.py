"""A project's identity travels: worktrees and clones of one repository share memory, every scope
spelling resolves, and a scope nobody reads by default is named at write time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from retained.brief import make_brief
from retained.project import identity, normalise_remote, project_identity, read_scopes, resolve_scope
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
                                 "ssh://git@github.com/Org/Shop.git/", "https://user@GitHub.com/Org/Shop.git"])
def test_every_spelling_of_an_origin_url_gives_one_key(url):
    assert normalise_remote(url) == "github.com/Org/Shop"


def test_two_worktrees_and_a_second_clone_share_memory(repos, store_dir):
    keys = {name: identity(path)["key"] for name, path in repos.items() if name != "remote"}
    assert len(set(keys.values())) == 1
    assert project_identity(repos["wt"])["name"] == "remote"
    with Store(store_dir) as store:
        # Written the way retained always has: under the absolute path of the git root.
        d = store.write("we release from the main branch on tuesdays", kind="decision", scope=str(repos["a"]))
        store.write("someone else's project", scope="/projects/other")
    for where in ("wt", "b"):
        with Store(store_dir) as store:
            project = str(repos[where])
            hits = store.search("release tuesdays", scopes=read_scopes(None, project))["hits"]
            assert [h["id"] for h in hits] == [d["id"]], where
            assert d["id"] in {r["id"] for r in store.list(scopes=read_scopes(None, project))["records"]}
            assert d["id"] in {r["id"] for r in make_brief(store, project)["records"]}
            assert "someone else" not in make_brief(store, project)["text"]


def test_every_scope_spelling_resolves(repos, monkeypatch, tmp_path):
    a = str(repos["a"])
    link = tmp_path / "link-to-a"
    link.symlink_to(repos["a"])
    monkeypatch.chdir(repos["a"])
    for spelling in (".", "./", a + "/", str(link), str(link) + "/", "../clone-a", a + "/sub/.."):
        assert resolve_scope(spelling, a) == a, spelling
    ident = identity(a)
    assert resolve_scope(ident["key"], a) == a and resolve_scope(ident["name"], a) == a
    assert resolve_scope("global", a) == "global" and resolve_scope("/no/such/project/", a) == "/no/such/project"


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
