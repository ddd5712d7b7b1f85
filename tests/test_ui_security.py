"""Who may read or change memory through `retained ui`: only this run's token holder, on the loopback
address it serves. Raw HTTP for the refusals, a real Chromium for the attack from another origin."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
from pathlib import Path

import pytest

from retained.store import Store
from tests.conftest import log_lines
from tests.helpers.browser import browser_or_skip
from tests.helpers.ui_server import UiServer


@pytest.fixture
def ui(store_dir):
    with Store(store_dir) as s:
        rid = s.write("the deploy key lives in the vault", kind="fact", scope="global")["id"]
    with UiServer(store_dir) as server:
        server.rid = rid
        yield server


def request(server: UiServer, method: str, path: str, *, headers: dict[str, str] | None = None,
            body: bytes | None = None, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{server.port}")
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()


def _cookie(server: UiServer) -> str:
    status, headers, _ = request(server, "GET", f"/?token={server.token}")
    assert status == 303 and headers["location"] == "/"
    return headers["set-cookie"].split(";")[0]


def test_no_token_is_403_everywhere(ui):
    for path in ("/", "/api/records", "/api/facets", f"/api/record/{ui.rid}", "/api/health", "/static/app.js"):
        status, _, body = request(ui, "GET", path)
        assert status == 403, path
        assert b"deploy key" not in body
    assert request(ui, "GET", "/api/records?token=wrong-token")[0] == 403
    assert request(ui, "GET", "/api/records", headers={"Cookie": f"retained_ui_{ui.port}=wrong"})[0] == 403


def test_the_token_in_the_address_becomes_a_strict_http_only_cookie(ui):
    status, headers, _ = request(ui, "GET", f"/?token={ui.token}")
    assert status == 303 and headers["location"] == "/"  # the token leaves the address bar
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    status, headers, body = request(ui, "GET", "/", headers={"Cookie": cookie.split(";")[0]})
    assert status == 200 and b"deploy key lives" in body
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, _, body = request(ui, "GET", "/api/records", headers={"X-Retained-Token": ui.token})
    assert status == 200 and json.loads(body)["total"] == 1


def test_wrong_host_is_refused_even_with_the_token(ui):
    cookie = _cookie(ui)
    for host in (f"evil.example:{ui.port}", "evil.example", f"localhost.evil.example:{ui.port}", f"127.0.0.1:{ui.port + 1}"):
        status, _, body = request(ui, "GET", "/api/records", host=host, headers={"Cookie": cookie, "X-Retained-Token": ui.token})
        assert status == 403 and b"Host" in body, host


def test_a_foreign_origin_is_refused_even_with_the_token(ui):
    cookie = _cookie(ui)
    for origin in ("http://evil.example", f"http://127.0.0.1:{ui.port + 1}", "null", f"https://127.0.0.1:{ui.port}"):
        status, _, _ = request(ui, "GET", "/api/records", headers={"Cookie": cookie, "Origin": origin})
        assert status == 403, origin
    status, _, _ = request(ui, "GET", "/api/records", headers={"Cookie": cookie, "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    status, _, _ = request(ui, "GET", "/api/records", headers={"Cookie": cookie, "Sec-Fetch-Site": "same-site"})
    assert status == 403  # another port of 127.0.0.1 is the same site, not the same origin


def test_state_changes_need_the_token_header_and_a_json_body(ui, store_dir):
    cookie = _cookie(ui)
    before = log_lines(store_dir)
    body = json.dumps({"ids": [ui.rid], "reason": "x"}).encode()
    attempts = [
        {"Cookie": cookie, "Content-Type": "application/json"},  # the cookie alone: what a forged request has
        {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded", "X-Retained-Token": ui.token},
        {"Cookie": cookie, "Content-Type": "text/plain", "X-Retained-Token": ui.token},
        {"Cookie": cookie, "Content-Type": "application/json", "X-Retained-Token": ui.token, "Origin": "http://evil.example"},
        {"Content-Type": "application/json", "X-Retained-Token": "not-the-token"},
    ]
    for headers in attempts:
        for path in ("/api/forget", "/api/purge", f"/api/record/{ui.rid}/supersede"):
            status, _, _ = request(ui, "POST", path, headers=headers, body=body)
            assert status == 403, (path, headers)
    status, _, _ = request(ui, "OPTIONS", "/api/forget", headers={"Origin": "http://evil.example",
                                                                "Access-Control-Request-Method": "POST"})
    assert status == 403
    assert log_lines(store_dir) == before
    # The page's own way works: token header, JSON, same origin.
    status, _, reply = request(ui, "POST", "/api/forget", body=body, headers={
        "Cookie": cookie, "Content-Type": "application/json", "X-Retained-Token": ui.token, "Origin": ui.origin})
    assert status == 200 and json.loads(reply)["durable"] is True


def test_purge_needs_the_confirmation_naming_what_it_removes(ui, store_dir):
    headers = {"Content-Type": "application/json", "X-Retained-Token": ui.token, "Origin": ui.origin}
    before = log_lines(store_dir)
    for body in ({"ids": [ui.rid]}, {"ids": [ui.rid], "confirm": True}, {"ids": [ui.rid], "confirm": ["mem_OTHER"]}):
        status, _, reply = request(ui, "POST", "/api/purge", headers=headers, body=json.dumps(body).encode())
        assert status == 400 and b"confirmation" in reply
    assert log_lines(store_dir) == before


def test_the_server_listens_on_loopback_only(ui):
    port_hex = f"{ui.port:04X}"
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A" and local.endswith(":" + port_hex):
                listening.append(local)
    if not listening and not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp to read listening sockets from")
    assert listening == [f"0100007F:{port_hex}"]
    # And from any other address of this machine, nothing answers on that port.
    others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for addr in others:
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((addr, ui.port)) != 0, addr


class _Attacker(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: object) -> None:
        pass


def test_a_page_on_another_origin_cannot_change_memory_in_a_real_browser(ui, store_dir):
    target = f"http://127.0.0.1:{ui.port}"
    rid = ui.rid
    _Attacker.page = f"""<!doctype html><body>
<form id="f" method="POST" action="{target}/api/forget" enctype="text/plain">
<input name='{{"ids":["{rid}"],"reason":"' value='x"}}'></form>
<script>
window.results = [];
const body = JSON.stringify({{ids: ["{rid}"], reason: "csrf"}});
fetch("{target}/api/forget", {{method: "POST", credentials: "include", mode: "no-cors",
  headers: {{"Content-Type": "text/plain"}}, body}}).then(() => results.push("no-cors sent"), e => results.push("no-cors " + e));
fetch("{target}/api/forget", {{method: "POST", credentials: "include",
  headers: {{"Content-Type": "application/json", "X-Retained-Token": "guess"}}, body}})
  .then(r => results.push("cors " + r.status), e => results.push("cors blocked"));
fetch("{target}/api/records", {{credentials: "include"}}).then(r => r.text()).then(t => results.push("read " + t.slice(0, 40)), e => results.push("read blocked"));
setTimeout(() => document.getElementById("f").submit(), 500);
</script></body>""".encode()
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    browser = browser_or_skip()
    try:
        browser.get(ui.url)  # the person's browser holds the cookie
        browser.wait("return document.body.dataset.ready === 'list'")
        before = log_lines(store_dir)
        browser.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        results = browser.wait("return window.results && window.results.length >= 3 ? window.results : null")
        assert "cors blocked" in results and "read blocked" in results
        browser.wait("return location.href.includes('/api/forget')", 20)  # the form went through
        assert "refused" in browser.js("return document.body.innerText")
        assert log_lines(store_dir) == before
    finally:
        browser.close()
        attacker.shutdown()
        attacker.server_close()
