"""A minimal raw JSON-RPC peer over a real `retained serve` subprocess (no SDK on the client side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


class WireServer:
    def __init__(self, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "retained", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd)
        self.lines: list[bytes] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: dict) -> None:
        self.send_raw(json.dumps(msg).encode())

    def wait_for(self, msg_id, timeout: float = 90) -> dict:
        def find():
            for raw in self.lines:
                m = json.loads(raw)
                if m.get("id") == msg_id and ("result" in m or "error" in m):
                    return m
            return None

        with self._cond:
            found = self._cond.wait_for(lambda: find() is not None or self.proc.poll() is not None, timeout)
            result = find()
        if not found or result is None:
            raise TimeoutError(f"no reply to id {msg_id!r}; stderr: {b''.join(self._stderr)[-2000:]!r}")
        return result

    def request(self, msg_id, method: str, params: dict | None = None, timeout: float = 90) -> dict:
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_for(msg_id, timeout)

    def initialize(self) -> dict:
        reply = self.request("init", "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                    "clientInfo": {"name": "wire-test", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call(self, msg_id, tool: str, arguments: dict, timeout: float = 90) -> dict:
        return self.request(msg_id, "tools/call", {"name": tool, "arguments": arguments}, timeout)

    def close(self, timeout: float = 20) -> int:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")
