"""A minimal raw JSON-RPC peer over a real `retained serve` subprocess (no SDK on the client side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


class WireServer:
    """`retained serve` by default; any stdio MCP server with `cmd` (the benchmark drives the reference one)."""

    def __init__(self, env: dict[str, str] | None = None, cwd: str | None = None, cmd: list[str] | None = None) -> None:
        full_env = dict(os.environ)
        full_env.update(env or {})
        cmd = cmd or [sys.executable, "-m", "retained", "serve"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd)
        self.lines: list[bytes] = []
        self.replies: dict = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            with self._cond:
                self.lines.append(line)
                if isinstance(msg, dict) and ("result" in msg or "error" in msg):
                    key = msg.get("id")
                    self.replies[json.dumps(key)] = msg
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: dict) -> None:
        self.send_raw(json.dumps(msg).encode())

    def wait_for(self, msg_id, timeout: float = 90) -> dict:
        key = json.dumps(msg_id)
        with self._cond:
            self._cond.wait_for(lambda: key in self.replies or self.proc.poll() is not None, timeout)
            result = self.replies.get(key)
        if result is None:
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

    def until_sdk(self, timeout: float = 90) -> dict:
        """Wait until the SDK itself serves: a request no early reply answers (an unknown method, which
        the SDK refuses). Every call after it goes through the SDK, as in a session past its first second."""
        return self.request("sdk-up", "retained/bench-sdk-up", {}, timeout)

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
