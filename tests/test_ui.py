"""`retained ui` in a real headless Chromium against a store of a few hundred records: list, filter,
search, a record with its history and proof, edit (a supersede that lands in the log, proven), retract
and undo, purge after a confirmation (the bytes leave the store), the health panel, keyboard, a narrow
window and dark mode. Screenshots of the main views go to bench/out/ui-screenshots/ (printed)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from retained import records
from retained.store import Store
from tests.conftest import ISOLATED_VARS, LEAKY_VARS, cli_json, log_lines
from tests.helpers.browser import browser_or_skip
from tests.helpers.ui_server import UiServer

SHOTS = Path(__file__).resolve().parents[1] / "bench" / "out" / "ui-screenshots"
SCOPES = ["/src/app", "/src/lib", "global"]
KINDS = ["note", "fact", "decision", "convention"]
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold?</b> & done'
N_BULK = 300


def isolated_env(home: Path) -> dict[str, str | None]:
    """A module-wide server outlives the per-test HOME: give it one of its own (doctor reads it)."""
    home.mkdir(parents=True, exist_ok=True)
    env: dict[str, str | None] = {k: None for k in ISOLATED_VARS + LEAKY_VARS}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_STATE_HOME=str(home / ".local" / "state"), XDG_CACHE_HOME=str(home / ".cache"), **LEXICAL)
    return env


# Words only, for comparisons that must not depend on how far background embedding has got; the
# semantic tier has a test of its own below.
LEXICAL = {"RETAINED_EMBED": "off"}


def cli(*args: str) -> dict:
    return cli_json(*args, env=LEXICAL)


def shot(browser, name: str) -> None:
    path = browser.screenshot(SHOTS / f"{name}.png")
    print(f"screenshot: {path}")


def _bulk(store_dir: Path, n: int) -> None:
    """Records dated over 2026 so the date filters have something to cut, appended as FORMAT.md says."""
    rng = random.Random(7)
    store_dir.mkdir(parents=True, exist_ok=True)
    prev = records.GENESIS
    with open(store_dir / "log.jsonl", "wb") as f:
        for seq in range(1, n + 1):
            month, dom = 1 + (seq - 1) * 10 // n, 1 + seq % 28
            rec = records.seal({"seq": seq, "id": f"mem_bulk{seq:05d}", "ts": f"2026-{month:02d}-{dom:02d}T10:00:00.000000Z",
                                "kind": KINDS[seq % 4], "scope": SCOPES[seq % 3], "prev": prev,
                                "text": f"bulk record {seq} about the "
                                        f"{rng.choice(['parser', 'cache', 'deploy', 'schema'])} work"})
            prev = rec["sha256"]
            f.write(records.format_line(rec))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("ui")
    store_dir = base / "store"
    _bulk(store_dir, N_BULK)
    ids = {}
    with Store(store_dir) as s:
        a = s.write("the release train leaves on thursdays", kind="decision", scope="/src/app")
        b = s.write("the release train leaves on wednesdays", kind="decision", scope="/src/app", supersedes=a["id"])
        ids.update(chain_old=a["id"], chain_new=b["id"])
        ids["hostile"] = s.write(HOSTILE, kind="note", scope="global")["id"]
        ids["edit"] = s.write("tests run with pytest -x", kind="convention", scope="/src/lib")["id"]
        ids["retract"] = s.write("the staging box is called albatross", kind="fact", scope="/src/lib")["id"]
        ids["purge"] = s.write("PURGE-ME the vault phrase is zebra-quantum-marmalade", kind="fact", scope="global")["id"]
        ids["newest"] = s.write("newest record of them all: kiwi", kind="note", scope="global")["id"]
    # The browser first: a skip for want of one must come before anything is started that would
    # then be left running; and whatever fails after this, both are stopped.
    browser = browser_or_skip()
    server = None
    try:
        # Started outside any project (a module fixture is set up before the test's own cwd is), as a
        # person usually opens it: the page then shows every scope.
        here = os.getcwd()
        os.chdir(base)
        try:
            server = UiServer(store_dir, env=isolated_env(base / "home"))
        finally:
            os.chdir(here)
        browser.get(server.url)
        browser.wait("return document.body.dataset.ready === 'list'")
        yield {"server": server, "browser": browser, "store": store_dir, "ids": ids}
    finally:
        browser.close()
        if server is not None:
            server.stop()


EVERY = "#/?scope=*"  # every scope: the page's default too (issue 32), named here to say so


def _go(b, hash_: str, ready: str) -> None:
    b.js("document.body.dataset.ready = '';"
         " if (location.hash === arguments[0]) window.dispatchEvent(new HashChangeEvent('hashchange'));"
         " else location.hash = arguments[0];", hash_)
    b.wait(f"return document.body.dataset.ready === '{ready}'")


def _click_and_wait(b, css: str, until: str) -> None:
    """Click `css`, then wait until the page is ready again and `until` (a JS expression) holds."""
    b.js("document.body.dataset.ready = '';")
    b.click(css)
    b.wait(f"return document.body.dataset.ready === 'record' && {until}")


def _ids_listed(b) -> list[str]:
    return b.js("return [...document.querySelectorAll('a.rec')].map(a => a.dataset.id)")


def test_list_is_newest_first_paged_and_counted(world):
    b = world["browser"]
    _go(b, EVERY, "list")
    listed = _ids_listed(b)
    assert listed[0] == world["ids"]["newest"] and len(listed) == 50
    current = cli("list", "--scope", "*", "--dir", str(world["store"]))["total"]
    assert b.text("#summary").startswith(f"{current} records · current memory")
    shot(b, "list")
    b.click("#more")
    b.wait("return document.querySelectorAll('a.rec').length === 100")
    assert len(set(_ids_listed(b))) == 100
    assert world["ids"]["chain_old"] not in _ids_listed(b)  # superseded: history, not current memory


def test_filters_by_scope_kind_dates_and_as_of(world):
    b = world["browser"]
    # Opened outside a project, the page shows all of the person's memory, every scope (issue 32), and
    # its scope menu says so.
    _go(b, "#/", "list")
    assert set(b.js("return [...document.querySelectorAll('a.rec .scope')].map(e => e.dataset.scope)")) == set(SCOPES)
    assert "All memory" in b.js("return document.getElementById('f-scope').options[0].textContent")
    _go(b, EVERY, "list")
    b.js("const s = document.getElementById('f-scope'); s.value = '/src/lib'; document.body.dataset.ready = '';"
         " s.dispatchEvent(new Event('change'));")
    b.wait("return document.body.dataset.ready === 'list'")
    scopes = set(b.js("return [...document.querySelectorAll('a.rec .scope')].map(e => e.dataset.scope)"))
    assert scopes == {"/src/lib"}
    assert b.text("#summary").startswith("102 records")  # 100 bulk + 2 written
    b.js("const s = document.getElementById('f-kind'); s.value = 'decision'; document.body.dataset.ready = '';"
         " s.dispatchEvent(new Event('change'));")
    b.wait("return document.body.dataset.ready === 'list'")
    assert set(b.js("return [...document.querySelectorAll('a.rec .kind')].map(e => e.textContent)")) == {"decision"}
    # Dates: March only, every scope and kind.
    _go(b, EVERY, "list")
    b.js("document.getElementById('f-from').value = '2026-03-01'; document.getElementById('f-to').value = '2026-03-31';"
         " document.body.dataset.ready = ''; document.querySelector('form.filters').requestSubmit();")
    b.wait("return document.body.dataset.ready === 'list'")
    days = b.js("return [...document.querySelectorAll('a.rec time')].map(e => e.getAttribute('datetime'))")
    assert days and all(d.startswith("2026-03") for d in days)
    shot(b, "list-filtered")
    # As of the end of June: nothing written after it, and nothing written today.
    _go(b, EVERY + "&as_of=2026-06-30T23:59:59", "list")
    days = b.js("return [...document.querySelectorAll('a.rec time')].map(e => e.getAttribute('datetime'))")
    assert days and max(days) < "2026-07" and "as of 2026-06-30" in b.text("#summary")
    assert b.text("#summary").startswith("180 records")  # months 1-6 of the 300 bulk records


def test_search_uses_the_memory_search_engine_and_says_how_each_hit_matched(world):
    b = world["browser"]
    _go(b, EVERY, "list")
    b.type("#f-q", "release train")
    b.js("document.body.dataset.ready = '';")
    b.keys("\ue007")  # Enter
    b.wait("return document.body.dataset.ready === 'list'")
    engine = cli("search", "release train", "--scope", "*", "-k", "50", "--dir", str(world["store"]))
    assert _ids_listed(b) == [h["id"] for h in engine["hits"]] == [world["ids"]["chain_new"]]
    how = b.js("return [...document.querySelectorAll('a.rec .how')].map(e => e.textContent)")
    assert how == ["matched every word"]
    assert b.js("return [...document.querySelectorAll('a.rec mark')].map(e => e.textContent)") == ["release", "train"]
    shot(b, "search")
    assert "semantic off" in b.text("#summary")  # the reply says meaning was not used, and why
    _go(b, EVERY + "&q=" + "albatross%20unicorn", "list")
    assert "showing records with any of them" in b.text("#summary")
    assert b.js("return [...document.querySelectorAll('a.rec .how')].map(e => e.textContent)") == ["matched some of the words"]


def test_a_record_shows_its_history_chain_and_proof(world):
    b = world["browser"]
    ids = world["ids"]
    _go(b, f"#/r/{ids['chain_old']}", "record")
    assert "Superseded: the current version is" in b.text(".banner")
    history = b.js("return [...document.querySelectorAll('#history li code')].map(e => e.textContent)")
    assert history == [ids["chain_old"], ids["chain_new"]]
    proof = b.text("#proof")
    with Store(world["store"]) as s:
        row = s.index.by_id(ids["chain_old"])
    assert row["sha256"] in proof and f"line {row['line']}" in proof
    assert "✓ recomputed, matches" in proof and "✓ prev is the previous record's sha256" in proof
    assert "✓ the whole log links up" in proof
    shot(b, "record")


def test_edit_writes_a_superseding_record_that_is_proven(world):
    b = world["browser"]
    old = world["ids"]["edit"]
    _go(b, f"#/r/{old}", "record")
    b.click("#edit")
    b.type("#edit-text", "tests run with pytest -x -q")
    shot(b, "edit")
    _click_and_wait(b, "#edit-save", f"!location.hash.endsWith('{old}')")
    new_id = b.js("return decodeURIComponent(location.hash.slice(4))")
    last = json.loads(log_lines(world["store"])[-1])
    assert last["id"] == new_id and last["supersedes"] == old and last["text"] == "tests run with pytest -x -q"
    assert last["kind"] == "convention" and last["scope"] == "/src/lib"
    assert "durable ✓" in b.text("#toast")
    assert "✓ recomputed, matches" in b.text("#proof")
    assert cli_json("verify", "--dir", str(world["store"]))["intact"] is True
    history = b.js("return [...document.querySelectorAll('#history li code')].map(e => e.textContent)")
    assert history == [old, new_id]


def test_retract_then_undo(world):
    b = world["browser"]
    rid = world["ids"]["retract"]
    _go(b, f"#/r/{rid}", "record")
    b.click("#retract")
    b.type("#reason", "the box was renamed")
    _click_and_wait(b, "#dialog-confirm", "!!document.querySelector('.banner.retracted')")
    assert "the box was renamed" in b.text(".banner")
    shot(b, "retracted")
    assert cli("search", "albatross", "--scope", "*", "--dir", str(world["store"]))["hits"] == []
    _click_and_wait(b, "#undo", "!document.querySelector('.banner')")
    hits = cli("search", "albatross", "--scope", "*", "--dir", str(world["store"]))["hits"]
    assert [h["id"] for h in hits] == [rid]
    actions = b.js("return [...document.querySelectorAll('#history li.forget .badge')].map(e => e.textContent)")
    assert actions == ["retract", "undo"]


def test_purge_after_a_confirmation_naming_the_record_removes_its_bytes(world):
    b = world["browser"]
    rid = world["ids"]["purge"]
    secret = "zebra-quantum-marmalade"
    _go(b, f"#/r/{rid}", "record")
    b.click("#purge")
    b.wait("return document.getElementById('dialog').open")
    assert rid in b.text("#purge-list") and "cannot be undone" in b.text("#dialog")
    assert b.text("#dialog-confirm") == f"Purge {rid} permanently"
    shot(b, "purge-confirm")
    _click_and_wait(b, "#dialog-confirm", "!!document.querySelector('.banner.purged')")
    for path in world["store"].rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data and b"vault phrase" not in data, path
    assert cli_json("verify", "--dir", str(world["store"]))["intact"] is True
    assert "text" not in cli_json("get", rid, "--dir", str(world["store"]))["records"][0]


def test_stored_html_and_script_show_as_text(world):
    b = world["browser"]
    rid = world["ids"]["hostile"]
    b.get(world["server"].origin + "/")  # a full load: the server-rendered first screen holds it too
    b.wait("return document.body.dataset.ready === 'list'")
    listed = b.js("return [...document.querySelectorAll('a.rec')].find(a => a.dataset.id === arguments[0])"
                  ".querySelector('.text').textContent", rid)
    assert listed == HOSTILE
    assert b.js("return document.querySelectorAll('main img, main script, main b').length") == 0
    _go(b, f"#/r/{rid}", "record")
    assert b.js("return document.getElementById('fulltext').textContent") == HOSTILE
    assert b.js("return document.querySelectorAll('#fulltext *').length") == 0
    assert b.js("return window.__pwned === undefined")


def test_health_panel_shows_verify_quarantine_and_doctor(world):
    b = world["browser"]
    _go(b, "#/health", "health")
    assert b.text("#verify-summary").startswith("Intact: ")
    assert "Empty." in b.text("#quarantine")
    b.wait("return document.body.dataset.doctor === 'done'", 180)
    assert b.text("#doctor-summary").startswith("doctor: ")
    hosts = b.text("#doctor")
    assert "store" in hosts and "Own memory:" in hosts
    shot(b, "health")


def test_health_panel_names_damaged_lines_and_the_fix(tmp_path):
    store_dir = tmp_path / "damaged"
    _bulk(store_dir, 20)
    lines = log_lines(store_dir)
    lines[9] = lines[9].replace(b"bulk record", b"bulk recorX")
    (store_dir / "log.jsonl").write_bytes(b"".join(lines) + b'{"seq": 21, "torn')
    (store_dir / "quarantine").mkdir()
    (store_dir / "quarantine" / "torn-1-abc.part").write_bytes(b'{"seq": 3, "te')
    with UiServer(store_dir) as server:
        b = browser_or_skip()
        try:
            b.get(server.url)
            b.wait("return document.body.dataset.ready === 'list'")
            assert "damaged line" in b.text(".warn")
            _go(b, "#/health", "health")
            assert b.text("#verify-summary").startswith("NOT INTACT")
            table = b.text("#damaged")
            assert "10" in table and "sha256 does not match" in table
            assert "torn-1-abc.part" in b.text("#quarantine")
            assert "retained verify" in b.text(".fixes") and "Torn tail" in b.text("#verify")
            shot(b, "health-damaged")
        finally:
            b.close()


def test_keyboard_reaches_everything(world):
    b = world["browser"]
    _go(b, EVERY, "list")
    b.js("document.activeElement.blur()")
    b.keys("/")
    assert b.js("return document.activeElement.id") == "f-q"
    b.keys("\ue00c")  # Escape leaves the field
    b.keys("j")
    first = b.js("return document.activeElement.dataset.id")
    assert first == _ids_listed(b)[0]
    b.keys("j")
    assert b.js("return document.activeElement.dataset.id") == _ids_listed(b)[1]
    b.js("document.body.dataset.ready = '';")
    b.keys("\ue007")  # Enter opens it
    b.wait("return document.body.dataset.ready === 'record'")
    b.js("document.body.dataset.ready = '';")
    b.keys("\ue00c")  # Escape: back to the list
    b.wait("return document.body.dataset.ready === 'list'")
    b.keys("?")
    assert b.js("return document.getElementById('dialog').open") and "Keyboard" in b.text("#dialog")
    b.keys("\ue00c")
    assert not b.js("return document.getElementById('dialog').open")


def test_narrow_window_and_dark_mode(world):
    b = world["browser"]
    try:
        b.window(360, 800)
        _go(b, EVERY, "list")
        wide = b.js("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >"
                    " document.documentElement.clientWidth + 1).map(e => e.tagName + '.' + e.className)")
        sizes = b.js("const d = document.documentElement; return [d.scrollWidth, d.clientWidth,"
                     " [...document.querySelectorAll('body *')].map(e => [e.tagName + '#' + e.id + '.' + e.className,"
                     " e.scrollWidth, e.getBoundingClientRect().right]).filter(x => x[2] > 340).slice(0, 8)]")
        assert wide == [] and sizes[0] <= sizes[1] + 1, sizes
        shot(b, "narrow")
        _go(b, f"#/r/{world['ids']['chain_new']}", "record")
        wide = b.js("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >"
                    " document.documentElement.clientWidth + 1)"
                    ".map(e => e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 40))")
        assert wide == [] and b.js("return document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")
        b.dark(True)
        bg = b.js("return getComputedStyle(document.body).backgroundColor")
        r, g, bl = (int(x) for x in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3])
        assert r + g + bl < 150, bg
        shot(b, "narrow-dark")
        b.window(1280, 900)
        _go(b, EVERY, "list")
        shot(b, "list-dark")
    finally:
        b.dark(False)
        b.window(1280, 900)


def test_search_with_the_semantic_tier_says_how_each_hit_matched(tmp_path):
    store_dir = tmp_path / "sem"
    with Store(store_dir) as s:
        s.write("deployments go out through the release train on wednesdays", kind="decision", scope="global")
        s.write("the cafeteria serves soup on fridays", kind="note", scope="global")
    env = isolated_env(tmp_path / "home")
    env.pop("RETAINED_EMBED")
    with UiServer(store_dir, env=env) as server:
        b = browser_or_skip()
        try:
            b.get(server.url)
            b.wait("return document.body.dataset.ready === 'list'")
            _go(b, "#/?q=release%20train", "list")
            summary = b.text("#summary")
            assert "semantic on" in summary, summary  # the model is installed: the page says meaning is used
            how = b.js("return [...document.querySelectorAll('a.rec .how')].map(e => e.textContent)")
            allowed = {"matched every word", "matched some of the words", "matched by meaning (no shared word)",
                       "matched every word and by meaning", "matched some of the words and by meaning"}
            assert how and set(how) <= allowed
            assert how[0].startswith("matched every word")
        finally:
            b.close()
