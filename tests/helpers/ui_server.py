"""`retained ui --no-open` as a real subprocess: its printed address, and a clean stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse


class UiServer:
    def __init__(self, store_dir: Path, env: dict[str, str | None] | None = None) -> None:
        full = dict(os.environ)
        for key, value in (env or {}).items():  # None: leave the variable out
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        self.proc = subprocess.Popen([sys.executable, "-m", "retained", "ui", "--no-open", "--dir", str(store_dir)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("retained ui: "):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"retained ui printed {line!r}: {err[-500:]}")
        self.url = line.split(": ", 1)[1]
        parts = urlparse(self.url)
        self.host, self.port = parts.hostname, parts.port
        self.token = parse_qs(parts.query)["token"][0]
        self.origin = f"http://127.0.0.1:{self.port}"
        try:
            self._wait_ready()
        except BaseException:  # started, so stopped: never a server left behind by a failed start
            self.stop()
            raise

    def _wait_ready(self) -> None:
        import socket

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("retained ui did not accept connections")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()

    def __enter__(self) -> UiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
