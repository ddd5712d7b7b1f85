"""A real headless Chromium, driven over WebDriver (chromedriver) with the standard library only.

`browser_or_skip()` gives a `Browser` or skips the test naming the part that is missing, Chromium or
chromedriver (.ci/run installs Debian's `chromium` and `chromedriver`). Each browser gets a fresh profile directory.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--no-default-browser-check", "--disable-extensions"]


def find_chromium() -> tuple[str | None, str | None]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or next(
        (p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if os.path.exists(p)), None)
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
    return chromium, driver


def missing_browser_parts(chromium: str | None, driver: str | None) -> str | None:
    """Why no browser can run, naming the part that is missing (None when both are there)."""
    if chromium is None and driver is None:
        return ("headless Chromium and chromedriver not installed (Debian: apt-get install chromium chromium-driver; "
                ".ci/run does it)")
    if chromium is None:
        return f"Chromium not installed, though chromedriver is ({driver}) (Debian: apt-get install chromium)"
    if driver is None:
        return f"chromedriver not installed, though Chromium is ({chromium}) (Debian: apt-get install chromium-driver)"
    return None


def browser_or_skip(width: int = 1280, height: int = 900) -> Browser:
    import pytest

    chromium, driver = find_chromium()
    reason = missing_browser_parts(chromium, driver)
    if reason is not None:
        pytest.skip(reason)
    assert chromium is not None and driver is not None
    return Browser(chromium, driver, width, height)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Browser:
    def __init__(self, chromium: str, driver: str, width: int, height: int) -> None:
        self.profile = tempfile.mkdtemp(prefix="retained-chromium-")
        self.port = _free_port()
        self.proc = subprocess.Popen([driver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "pageLoadStrategy": "normal",
            "goog:chromeOptions": {"binary": chromium,
                                   "args": [*FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"]}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]
        self._s("POST", "/timeouts", {"script": 60_000, "pageLoad": 60_000})

    # -- protocol ---------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as res:
                payload = json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as e:
            payload = json.loads(e.read() or b"{}")
            value = payload.get("value", {})
            raise WebDriverError(f"{value.get('error')}: {value.get('message', '')[:300]}") from None
        return payload.get("value", payload)

    def _s(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    # -- what tests use ---------------------------------------------------------------------------
    def get(self, url: str) -> None:
        self._s("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script: str, *args: Any) -> Any:
        return self._s("POST", "/execute/async", {"script": script, "args": list(args)})

    def search_ms(self, query: str) -> float:
        """Milliseconds from asking the page to search (its URL hash) to its 'list-rendered' mark."""
        return self.js_async(
            "const [q, done] = arguments; const t = performance.now(); performance.clearMarks('list-rendered');"
            " const poll = () => { const m = performance.getEntriesByName('list-rendered');"
            "   if (m.length) done(m[0].startTime - t); else setTimeout(poll, 2); };"
            " const target = '#/?q=' + encodeURIComponent(q);"
            " if (location.hash === target) window.dispatchEvent(new HashChangeEvent('hashchange'));"
            " else location.hash = target; poll();", query)

    def find(self, css: str) -> str:
        return self._s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css: str) -> list[str]:
        return [e[ELEMENT] for e in self._s("POST", "/elements", {"using": "css selector", "value": css})]

    def click(self, css: str) -> None:
        self._s("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str, clear: bool = True) -> None:
        eid = self.find(css)
        if clear:
            self._s("POST", f"/element/{eid}/clear", {})
        self._s("POST", f"/element/{eid}/value", {"text": text})

    def text(self, css: str) -> str:
        return self._s("GET", f"/element/{self.find(css)}/text")

    def keys(self, *keys: str) -> None:
        """Key presses sent to whatever has focus (WebDriver key codes for Enter etc.)."""
        actions = []
        for k in keys:
            actions += [{"type": "keyDown", "value": k}, {"type": "keyUp", "value": k}]
        self._s("POST", "/actions", {"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})
        self._s("DELETE", "/actions")

    def wait(self, script: str, timeout: float = 20.0, *args: Any) -> Any:
        """Poll a JS expression (`return …`) until it is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(script, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout}s for: {script}")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._s("GET", "/screenshot")))
        return path

    def window(self, width: int, height: int) -> None:
        """The viewport size (emulated: a headless window is never narrower than 500 px)."""
        self.cdp("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def cdp(self, cmd: str, params: dict[str, Any]) -> Any:
        return self._s("POST", "/goog/cdp/execute", {"cmd": cmd, "params": params})

    def dark(self, on: bool = True) -> None:
        self.cdp("Emulation.setEmulatedMedia",
                 {"features": [{"name": "prefers-color-scheme", "value": "dark" if on else "light"}]})

    def close(self) -> None:
        try:
            if getattr(self, "session", None):
                self._call("DELETE", f"/session/{self.session}")
        except (OSError, WebDriverError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
