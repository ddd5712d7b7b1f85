"""A fake model API on 127.0.0.1 for driving real host CLIs offline.

It speaks just enough of the Anthropic Messages API (`/v1/messages`, SSE) and the OpenAI Responses API
(`/v1/responses`, SSE) for Claude Code and Codex to run a session, records every request body, and
answers with a scripted turn: plain text, or a tool call the test chose.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A turn is ("text", "ok") or ("tool", name, {arguments}[, {extra item fields}]).
Turn = tuple


class FakeModel:
    def __init__(self, script: Callable[[str, dict[str, Any]], Turn] | None = None) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.script = script or (lambda api, body: ("text", "ok"))
        self._lock = threading.Lock()
        self._counter = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self._json(200, {"data": [], "object": "list"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    raw = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        raw += self.rfile.read(size)
                        self.rfile.readline()
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    raw = self.rfile.read(length) if length else b""
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    import gzip

                    raw = gzip.decompress(raw)
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                with model._lock:
                    model.requests.append((path, body))
                    model._counter += 1
                    n = model._counter
                if path.endswith(":countTokens"):
                    self._json(200, {"totalTokens": 10})
                elif ":streamGenerateContent" in path or ":generateContent" in path:
                    events = model._gemini(body, n)
                    if ":streamGenerateContent" in path:
                        self._sse([(None, e) for e in events])
                    else:
                        self._json(200, events[-1])
                elif path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 10})
                elif path.endswith("/messages"):
                    self._sse(model._anthropic(body, n))
                elif path.endswith("/responses"):
                    self._sse(model._openai(body, n))
                else:
                    self._json(404, {"error": {"type": "not_found", "message": path}})

            def _json(self, status: int, data: dict[str, Any]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                payload = "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
                                  for name, data in events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- Anthropic Messages ------------------------------------------------------------------------
    def _anthropic(self, body: dict[str, Any], n: int) -> list[tuple[str, dict[str, Any]]]:
        turn = self.script("anthropic", body) if body.get("messages") else ("text", "ok")
        usage = {"input_tokens": 10, "output_tokens": 1}
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})]
        if turn[0] == "tool":
            name, args = turn[1], turn[2]
            events += [
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(args)}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "tool_use"
        else:
            events += [
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": turn[1]}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "end_turn"
        events += [
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    # -- OpenAI Responses ----------------------------------------------------------------------------
    def _openai(self, body: dict[str, Any], n: int) -> list[tuple[str, dict[str, Any]]]:
        turn = self.script("openai", body)
        rid = f"resp_{n}"
        if turn[0] == "tool":
            name, args = turn[1], turn[2]
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
                                    "arguments": json.dumps(args)}
            if len(turn) > 3:
                item.update(turn[3])  # e.g. {"namespace": "mcp__retained"}
        else:
            item = {"type": "message", "role": "assistant", "id": f"msg_{n}",
                    "content": [{"type": "output_text", "text": turn[1]}]}
        usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 1, "output_tokens_details": None,
                 "total_tokens": 11}
        return [
            ("response.created", {"type": "response.created", "response": {"id": rid}}),
            ("response.output_item.done", {"type": "response.output_item.done", "item": item}),
            ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}),
        ]

    # -- Gemini generateContent ---------------------------------------------------------------------
    def _gemini(self, body: dict[str, Any], n: int) -> list[dict[str, Any]]:
        turn = self.script("gemini", body) if body.get("contents") else ("text", "ok")
        if turn[0] == "tool":
            part: dict[str, Any] = {"functionCall": {"name": turn[1], "args": turn[2]}}
        else:
            part = {"text": turn[1]}
        return [{"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}}]

    # -- what the host sent --------------------------------------------------------------------------
    def conversation_requests(self, api: str) -> list[dict[str, Any]]:
        if api == "gemini":
            return [b for p, b in self.requests if "generatecontent" in p.lower() and b.get("contents")]
        key = "messages" if api == "anthropic" else "input"
        suffix = "/messages" if api == "anthropic" else "/responses"
        return [b for p, b in self.requests if p.endswith(suffix) and b.get(key)]

    @staticmethod
    def text_of(body: dict[str, Any]) -> str:
        """Everything in a request the model would read, flattened (system, messages, input, tools)."""
        return json.dumps(body, ensure_ascii=False)
