"""Issue 17 on the web page: `retained ui` as a real subprocess spoken to over HTTP (and, for the
Health view, a real Chromium). Request bodies are bounded (item 7), damage shows in every view as
soon as a read meets it (item 14), and outside a project the page reads `global` unless told
otherwise (item 8)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from retained.store import Store
from tests.helpers.browser import missing_browser_parts
from tests.helpers.hostile import LEXICAL, cli_json
from tests.helpers.ui_server import UiServer


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def ui(store_dir):
    with Store(store_dir) as s:
        ids = [s.write(f"record number {i} about widgets")["id"] for i in range(1, 21)]
    with UiServer(store_dir) as server:
        server.ids = ids
        yield server


def call(server: UiServer, method: str, path: str, body: bytes | None = None, *, length: int | None = None,
         timeout: float = 30) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"127.0.0.1:{server.port}")
        conn.putheader("X-Retained-Token", server.token)
        if body is not None or length is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(length if length is not None else len(body)))
        conn.endheaders(body)
        res = conn.getresponse()
        data = res.read()
        try:
            return res.status, json.loads(data)
        except ValueError:
            return res.status, data
    finally:
        conn.close()


def _alive(server: UiServer) -> None:
    assert server.proc.poll() is None, "the page's server died"
    assert call(server, "GET", "/api/facets")[0] == 200


# -- item 1 and the fuzz class: a body the page cannot take is a 400, never a 500 or a dead server ------------------
@pytest.mark.parametrize("path", ["/api/forget", "/api/purge", "/api/unforget"])
def test_a_deeply_nested_body_is_a_400_and_the_page_keeps_serving(ui, path):
    status, data = call(ui, "POST", path, b'{"ids":' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert status == 400 and "error" in data, (status, data)
    _alive(ui)


# -- item 7: a request body is bounded before it is read ---------------------------------------------------------
def test_an_oversized_body_is_refused_before_it_is_read(ui):
    """A 300 MB Content-Length is answered at once (413), without waiting for or holding the bytes."""
    status, _data = call(ui, "POST", "/api/forget", b'{"ids": [', length=300 * 1024 * 1024, timeout=15)
    assert status == 413
    _alive(ui)


def test_a_20_mib_body_is_refused_with_413(ui):
    body = json.dumps({"ids": ["mem_x"], "reason": "x" * (20 * 1024 * 1024)}).encode()
    try:
        status, _data = call(ui, "POST", "/api/forget", body)
    except (BrokenPipeError, ConnectionResetError):
        status = 413  # refused before the body was all sent: the connection closes under us
    assert status == 413
    _alive(ui)


def test_a_chunked_body_past_the_bound_is_refused_without_being_held(ui):
    """The rest of the class: a body sent without a Content-Length (chunked) is bounded while it is read."""
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=60)
    try:
        conn.putrequest("POST", "/api/forget", skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"127.0.0.1:{ui.port}")
        conn.putheader("X-Retained-Token", ui.token)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b"x" * (1024 * 1024)
        try:
            head = b'{"ids": ["mem_x"], "reason": "'
            conn.send(b"%x\r\n" % len(head) + head + b"\r\n")
            for _ in range(40):  # 40 MiB, more than any body the page takes
                conn.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while we were still sending
        assert conn.getresponse().status == 413
    finally:
        conn.close()
    _alive(ui)


@pytest.mark.parametrize("body", [b'{"ids": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}", b"\xff\xfe{}",
                                  b'{"ids": [1' + b"0" * 5000 + b"]}", b"[]", b'"just a string"', b"{" * 100_000])
def test_other_hostile_bodies_are_a_400_with_the_reason(ui, body):
    status, data = call(ui, "POST", "/api/forget", body)
    assert status == 400 and isinstance(data, dict) and data.get("error"), (status, data)
    _alive(ui)


# -- item 14: every view reports damage as soon as any read meets it ------------------------------------------------
def _flip_a_byte_of_record_7(store_dir: Path, keep_mtime: bool) -> None:
    path = store_dir / "log.jsonl"
    st = os.stat(path)
    time.sleep(0.01 if keep_mtime else 1.1)  # a new mtime, unless a bit rotted on disk
    lines = path.read_bytes().split(b"\n")
    at = sum(len(line) + 1 for line in lines[:6]) + lines[6].index(b"widgets")
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([lines[6][lines[6].index(b"widgets")] ^ 0x01]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _says_damaged(data: Any) -> bool:
    text = json.dumps(data)
    return "damaged" in text or "could not be read" in text or "not intact" in text.lower()


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["a program rewrote the log", "a bit rotted on disk"])
def test_every_view_reports_a_damaged_record_once_a_read_meets_it(ui, store_dir, keep_mtime):
    assert call(ui, "GET", "/api/health")[1]["intact"] is True
    _flip_a_byte_of_record_7(store_dir, keep_mtime)
    status, record = call(ui, "GET", f"/api/record/{ui.ids[6]}")
    assert status != 404 and _says_damaged(record), (status, record)
    for path in ("/api/records", "/api/search?q=widgets", "/api/facets"):
        status, data = call(ui, "GET", path)
        assert status == 200 and _says_damaged(data), (path, data)
    health = call(ui, "GET", "/api/health")[1]
    assert health["intact"] is False and health["corrupt_lines"][0]["line"] == 7


def test_the_health_view_reports_the_flipped_byte_after_a_reload(ui, store_dir):
    from tests.helpers.browser import browser_or_skip

    with browser_or_skip() as b:
        b.get(ui.url)
        b.wait("return document.body.dataset.ready === 'list'")
        b.js("location.hash = '#/health'")
        b.wait("return document.body.dataset.ready === 'health'")
        assert b.text("#verify-summary").startswith("Intact")
        _flip_a_byte_of_record_7(store_dir, keep_mtime=False)
        b.js("location.reload()")
        b.wait("return document.body.dataset.ready === 'health'", timeout=30)
        assert b.text("#verify-summary").startswith("NOT INTACT"), b.text("#verify-summary")


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["a program rewrote the log", "a bit rotted on disk"])
def test_the_record_view_of_a_damaged_record_says_so_and_offers_no_edit(ui, store_dir, keep_mtime):
    from tests.helpers.browser import browser_or_skip

    _flip_a_byte_of_record_7(store_dir, keep_mtime)
    with browser_or_skip() as b:
        b.get(ui.url)
        b.wait("return document.body.dataset.ready === 'list'")
        b.js(f"location.hash = '#/r/{ui.ids[6]}'")
        b.wait("return document.querySelector('.banner.damaged') !== null", timeout=30)
        assert "damaged" in b.text(".banner.damaged")
        assert b.js("return document.querySelector('#edit, #retract, #purge') === null")


# -- item 8: outside a project, the page reads global unless a scope is named ---------------------------------------------
def test_outside_a_project_the_page_lists_every_scope_and_filters_by_one(store_dir, tmp_path):
    """Issue 32: the page is the person's view of all of their memory, not an agent's default read."""
    repo = tmp_path / "app"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    app = cli_json("write", "app deploys on fridays", cwd=repo)["id"]
    glob = cli_json("write", "a global convention", "--scope", "global")["id"]
    with UiServer(store_dir) as server:
        listed = {r["id"] for r in call(server, "GET", "/api/records")[1]["records"]}
        assert glob in listed and app in listed
        named = {r["id"] for r in call(server, "GET", f"/api/records?scope={repo.resolve()}")[1]["records"]}
        assert app in named and glob not in named


# -- item 24 (the part in the tests): a skip says which part of the browser is missing --------------------------------
@pytest.mark.parametrize("chromium,driver,named,not_named", [
    (None, "/usr/bin/chromedriver", "Chromium", "chromedriver not"),
    ("/usr/bin/chromium", None, "chromedriver", "Chromium not"),
    (None, None, "Chromium and chromedriver", ""),
])
def test_the_browser_skip_names_what_is_missing(chromium, driver, named, not_named):
    reason = missing_browser_parts(chromium, driver)
    assert reason is not None and named in reason and (not not_named or not_named not in reason), reason


def test_nothing_is_missing_when_both_are_found():
    assert missing_browser_parts("/usr/bin/chromium", "/usr/bin/chromedriver") is None
