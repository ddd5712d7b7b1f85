"""Issue 32 item 2 and issue 28 item 6, in a real headless Chromium: the page is the person's view of all
of their memory. Over a store holding three projects, global records and a teammate's records (real
git, separate HOMEs), opened outside any project it shows every scope, in the team order, with authors;
opened inside a project it shows that project first; an empty view never says the store is empty;
Health checks again on every visit; search says "matches" and marks no current hit.
Screenshots go to bench/out/ui-screenshots/ (printed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.browser import browser_or_skip
from tests.helpers.team import PROJECT, share_all, store_sync
from tests.helpers.ui_server import UiServer

SHOTS = Path(__file__).resolve().parents[1] / "bench" / "out" / "ui-screenshots"


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path.resolve()


@pytest.fixture
def world(tmp_path, machines):
    ann, bob = machines("ann"), machines("bob")
    share_all(ann, bob)
    ann.write("we deploy the shop on Tuesdays", kind="decision")
    for _ in range(2):
        for m in (ann, bob):
            assert store_sync(m).ok
    repos = [_repo(tmp_path / name) for name in ("alpha", "beta", "gamma")]
    with bob.environment():
        for repo in repos:
            for i in range(12):
                bob.store.write(f"{repo.name} note {i}: the deploy pipeline for {repo.name}", kind="note", scope=str(repo))
        bob.store.write("answers in British English", kind="preference", scope="global")
    env = {**bob.env, "RETAINED_EMBED": "off"}
    return {"bob": bob, "repos": repos, "env": env, "tmp": tmp_path}


def _serve(world, cwd: Path) -> UiServer:
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return UiServer(world["bob"].store_dir, env=world["env"])
    finally:
        os.chdir(here)


def _ready(b, hash_: str) -> None:
    b.js("document.body.dataset.ready = '';"
         " if (location.hash === arguments[0]) window.dispatchEvent(new HashChangeEvent('hashchange'));"
         " else location.hash = arguments[0];", hash_)
    b.wait("return document.body.dataset.ready === 'list'")


def test_opened_outside_a_project_the_page_shows_every_scope_with_authors_and_never_an_empty_store(world):
    browser = browser_or_skip()
    server = None
    try:
        outside = world["tmp"] / "elsewhere"
        outside.mkdir()
        server = _serve(world, outside)
        b = browser
        b.get(server.url)
        b.wait("return document.body.dataset.ready === 'list'")
        scopes = set(b.js("return [...document.querySelectorAll('a.rec .scope')].map(e => e.dataset.scope)"))
        assert {str(r) for r in world["repos"]} | {"global", PROJECT} >= scopes and len(scopes) >= 3, scopes
        assert b.text("#summary").startswith("38 records · current memory · every scope")
        assert "All memory" in b.js("return document.getElementById('f-scope').options[0].textContent")
        menu = b.js("return [...document.getElementById('f-scope').options].map(o => o.value)")
        assert {str(r) for r in world["repos"]} | {"global", PROJECT} <= set(menu)
        authors = b.js("return [...document.querySelectorAll('a.rec .author')].map(e => e.textContent)")
        assert authors == ["by Ann Tester"], authors
        b.screenshot(SHOTS / "all-memory-outside.png")
        print(f"screenshot: {SHOTS / 'all-memory-outside.png'}")
        # An empty view says what the store holds.
        _ready(b, "#/?kind=todo")
        empty = b.text("p.empty")
        assert "38 current records" in empty and "no records yet" not in empty.lower(), empty
        # Search: "matches", and no state badge on a current hit; the any-word note said once.
        b.js("document.body.dataset.ready = ''; location.hash = '#/?q=deploy';")
        b.wait("return document.body.dataset.ready === 'list'")
        summary = b.text("#summary")
        assert "matches" in summary and "matchs" not in summary, summary
        assert b.js("return document.querySelectorAll('a.rec .badge.state').length") == 0
        b.screenshot(SHOTS / "all-memory-search.png")
        print(f"screenshot: {SHOTS / 'all-memory-search.png'}")
        b.js("document.body.dataset.ready = ''; location.hash = '#/?q=deploy%20zebra';")
        b.wait("return document.body.dataset.ready === 'list'")
        said = b.js("return document.getElementById('main').textContent")
        assert said.count("holds every word") + said.count("hold every word") <= 1, said
        # Health checks again on every visit, a click on the view already shown included.
        b.js("window.__health = 0; const f = window.fetch; window.fetch = (u, o) => {"
             " if (String(u).startsWith('/api/health')) window.__health++; return f(u, o); };")
        b.click('a[data-nav="health"]')
        b.wait("return document.body.dataset.ready === 'health' && window.__health === 1")
        b.js("document.body.dataset.ready = '';")
        b.click('a[data-nav="health"]')
        b.wait("return document.body.dataset.ready === 'health' && window.__health === 2")
    finally:
        browser.close()
        if server is not None:
            server.stop()


def test_opened_inside_a_project_the_page_shows_it_first_then_the_rest(world):
    browser = browser_or_skip()
    server = None
    try:
        alpha = world["repos"][0]
        server = _serve(world, alpha)
        b = browser
        b.get(server.url)
        b.wait("return document.body.dataset.ready === 'list'")
        titles = b.js("return [...document.querySelectorAll('h2.group-title')].map(e => e.textContent)")
        assert titles[0].startswith(f"This project: {alpha}") and titles[1].startswith("Other projects and global"), titles
        first = set(b.js("return [...document.querySelectorAll('#records-here a.rec .scope')].map(e => e.dataset.scope)"))
        rest = set(b.js("return [...document.querySelectorAll('#records-elsewhere a.rec .scope')].map(e => e.dataset.scope)"))
        assert first == {str(alpha)} and str(alpha) not in rest and "global" in rest, (first, rest)
        b.screenshot(SHOTS / "all-memory-inside.png")
        print(f"screenshot: {SHOTS / 'all-memory-inside.png'}")
    finally:
        browser.close()
        if server is not None:
            server.stop()
