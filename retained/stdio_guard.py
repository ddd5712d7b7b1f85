"""The stdio guard: what stands between the wire and the MCP SDK's stdio transport.

It works around two things in the SDK (mcp 2.x), and can go when upstream fixes them:

- modelcontextprotocol/python-sdk#2751 (open; fix PRs #2755, #2766, #2857 closed unmerged): the
  stdio transport drops a line it cannot parse or validate, and an id-bearing request then hangs
  forever. `check_line` and `GuardedIn` answer every such line with a JSON-RPC error under its id
  (read from either end of the line when it is too long to parse) and keep serving.
- python-sdk#1508 / #3220 (import cost): any `import mcp.*` takes about half a second, longer than
  some hosts wait for a server. `GuardedIn.read_first_line_now` reads the first line while the SDK
  imports, and `early_initialize_reply` answers a handshake `initialize` with the reply the SDK
  will give (tests keep the two equal); `WireOut` then drops the SDK's own copy.

`claim_stdio` keeps stdout for protocol messages only. Nothing here imports the SDK at module level,
and nothing here knows retained's tools beyond the names it is given.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Collection
from typing import Any

log = logging.getLogger("retained.server")

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is refused (the issue names 10 MiB lines as bad input)
# What the SDK (mcp 2.x) negotiates in an `initialize` handshake; a test keeps these equal to the SDK's.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = "2025-11-25"
CAPABILITIES = {"prompts": {"listChanged": False}, "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False}}


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def check_line(raw: bytes, validate: Any = None, tools: Collection[str] = ()) -> tuple[str | None, dict[str, Any] | None]:
    """Decide what to do with one line from the client: (text to pass on, None) or (None, error or None).

    (None, None) means drop it quietly (a blank line, or a bad notification nobody waits for).
    `tools` are the server's tool names: a `tools/call` naming another is refused here; `validate`
    is the SDK's own message check, run last (whatever it rejects is answered, not dropped).
    """
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, _error(None, -32700, "Parse error: the line is not valid UTF-8")
    try:
        msg = json.loads(text)
    except ValueError as e:
        return None, _error(None, -32700, f"Parse error: not JSON ({e.msg} at column {e.colno})")
    if isinstance(msg, list):
        return None, _error(None, -32600, "Invalid Request: batches are not supported; send one message per line")
    if not isinstance(msg, dict):
        return None, _error(None, -32600, "Invalid Request: a JSON-RPC message must be a JSON object")
    msg_id = msg.get("id")
    has_id = "id" in msg and msg_id is not None
    id_ok = isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))
    reply_id = msg_id if id_ok else None

    def bad(code: int, message: str) -> tuple[None, dict[str, Any] | None]:
        if not has_id and "method" in msg:
            log.warning("dropped a malformed notification: %s", message)
            return None, None  # a notification: nobody waits for an answer
        return None, _error(reply_id, code, message)

    if has_id and not id_ok:
        return None, _error(None, -32600, "Invalid Request: id must be a string or an integer")
    if msg.get("jsonrpc") != "2.0":
        return bad(-32600, 'Invalid Request: "jsonrpc" must be "2.0"')
    if "method" not in msg:
        if id_ok and ("result" in msg or "error" in msg):
            return text, None  # the client's answer to a server request
        return bad(-32600, "Invalid Request: no method")
    method = msg["method"]
    if not isinstance(method, str) or not method:
        return bad(-32600, "Invalid Request: method must be a non-empty string")
    if _has_lone_surrogate(msg):
        return bad(-32602, "Invalid params: a string holds a lone surrogate escape (e.g. \\ud800) and is not "
                           "valid Unicode; send well-formed text")
    params = msg.get("params")
    if "params" in msg and not isinstance(params, dict):
        return bad(-32602, "Invalid params: params must be a JSON object")
    if method == "tools/call":
        p = params or {}
        name = p.get("name")
        if not isinstance(name, str):
            return bad(-32602, "Invalid params: tools/call needs params.name, a string")
        if tools and name not in tools:
            return bad(-32602, f"Unknown tool: {name[:100]!r}; the tools are {', '.join(tools)}")
        args = p.get("arguments")
        if args is not None and not isinstance(args, dict):
            return bad(-32602, f"Invalid params: arguments of {name} must be a JSON object")
    if validate is not None:
        try:
            validate(text)
        except Exception as e:  # noqa: BLE001 - whatever the SDK rejects, answer it instead of hanging
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return bad(-32600, f"Invalid Request: {first[:300]}")
    return text, None


class WireOut:
    """The protocol side of stdout: whole lines, one writer at a time, flushed at once."""

    def __init__(self, fd: int) -> None:
        self._f = os.fdopen(fd, "wb", buffering=0, closefd=False)
        self._lock = threading.Lock()
        self._swallow: dict[str, Any] | None = None

    def swallow(self, reply: dict[str, Any]) -> None:
        """Drop the SDK's own reply to a request that was already answered with `reply`."""
        self._swallow = reply

    def _swallowed(self, text: str) -> bool:
        early = self._swallow
        try:
            msg = json.loads(text)
        except ValueError:
            return False
        if not isinstance(msg, dict) or msg.get("id") != early["id"]:
            return False
        result = msg.get("result")
        if not ((isinstance(result, dict) and "serverInfo" in result) or "error" in msg):
            return False  # a later request that reused the id
        self._swallow = None
        if msg.get("result") != early["result"]:
            log.warning("the SDK answered initialize differently from the early reply: %s", text[:500])
        return True

    def write_line(self, text: str) -> None:
        data = text.encode("utf-8") if text.endswith("\n") else (text + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[self._f.write(view):]

    # the async face stdio_server() expects
    async def write(self, text: str) -> None:
        if self._swallow is not None and self._swallowed(text):  # only the SDK's output is ever dropped
            return
        self.write_line(text)

    async def flush(self) -> None:
        return None


_PEEK = 64 * 1024


class _Oversized:
    """What the reader hands on for a line too long to pass: the id read from its ends, if any."""

    def __init__(self, msg_id: Any) -> None:
        self.msg_id = msg_id

# A top-level "id" member: after "{" or ",", so never inside a string (a quote there is escaped).
_ID_MEMBER = re.compile(rb'[{,]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?=[,}])')


def oversized_line_id(head: bytes, tail: bytes) -> Any:
    """The request id of a line too long to parse, from its first and last bytes; None if unsure.

    JSON-RPC peers write the id near one end: before "params" (`{"jsonrpc","id","method","params"}`)
    or after it (`{"method","params","jsonrpc","id"}`). A match counts only at the top level: in the
    head, before any nested object opens; in the tail, with nothing after it but the closing brace.
    """
    if not head.lstrip().startswith(b"{"):
        return None
    first = _ID_MEMBER.search(head)
    if first is not None and head.count(b"{", 0, first.start() + 1) == 1:
        return _id_value(first.group(1))
    last = None
    for last in _ID_MEMBER.finditer(tail):  # noqa: B007 - the last match is the one wanted
        pass
    if last is not None and tail[last.end():].strip() == b"}":
        return _id_value(last.group(1))
    return None


def _id_value(raw: bytes) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, (int, str)) else None


class GuardedIn:
    """An async line iterator over the protocol's stdin that answers bad lines itself."""

    def __init__(self, fd: int, out: WireOut, validate: Any = None, tools: Collection[str] = ()) -> None:
        self._f = os.fdopen(fd, "rb", buffering=1 << 16, closefd=False)
        self._out = out
        self.validate = validate
        self.tools = tuple(tools)
        self._first: threading.Thread | None = None
        self._first_line: bytes | _Oversized | None = None

    def read_first_line_now(self, answer: Any) -> None:
        """Read the first line on a thread while the SDK imports, and let `answer` see it first."""

        def run() -> None:
            self._first_line = self._read_line()
            if isinstance(self._first_line, bytes):
                try:
                    answer(self._first_line)
                except Exception as e:  # noqa: BLE001 - the SDK will answer it instead
                    log.warning("no early reply: %s", e)

        self._first = threading.Thread(target=run, daemon=True, name="retained-first-line")
        self._first.start()

    def _read(self) -> bytes | _Oversized | None:
        if self._first is not None:
            self._first.join()
            self._first = None
            line, self._first_line = self._first_line, None
            return line
        return self._read_line()

    def _read_line(self) -> bytes | _Oversized | None:
        line = self._f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            head, tail = line[:_PEEK], line[-_PEEK:]
            while True:  # discard the rest of the oversized line, keeping its end to find the id
                more = self._f.readline(1 << 20)
                if more:
                    tail = (tail + more)[-_PEEK:]
                if not more or more.endswith(b"\n"):
                    break
            return _Oversized(oversized_line_id(head, tail))
        return line

    def __aiter__(self) -> "GuardedIn":
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            raw = await anyio.to_thread.run_sync(self._read)
            if raw is None:
                raise StopAsyncIteration
            if isinstance(raw, _Oversized):
                self._out.write_line(json.dumps(_error(raw.msg_id, -32600,
                                                       f"Invalid Request: line longer than "
                                                       f"{MAX_LINE_BYTES // 2**20} MiB; nothing was done")))
                continue
            text, err = check_line(raw, self.validate, self.tools)
            if err is not None:
                self._out.write_line(json.dumps(err, ensure_ascii=False))
            if text is not None:
                return text


def early_initialize_reply(line: bytes, instructions: str, server_info: dict[str, str]) -> dict[str, Any] | None:
    """The reply the SDK will give to a well-formed handshake `initialize`, or None to leave it to the SDK.

    Importing the SDK takes about half a second; answering the first `initialize` from here lets a host
    see the server as started long before that. The SDK still gets the request (so its session is
    initialized) and its own reply is dropped; a test keeps the two replies equal.
    """
    text, _ = check_line(line)  # what the guard would refuse (lone surrogates, ...) is not answered here
    if text is None:
        return None
    msg = json.loads(text)
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or msg.get("method") != "initialize":
        return None
    rid, params = msg.get("id"), msg.get("params")
    if isinstance(rid, bool) or not isinstance(rid, (int, str)) or not isinstance(params, dict) or "_meta" in params:
        return None
    version, caps, client = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    if not (isinstance(version, str) and isinstance(caps, dict) and isinstance(client, dict)
            and isinstance(client.get("name"), str) and isinstance(client.get("version"), str)):
        return None
    result: dict[str, Any] = {
        "capabilities": CAPABILITIES,
        "instructions": instructions,
        "protocolVersion": version if version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION,
        "serverInfo": server_info,
    }
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def claim_stdio() -> tuple[int, int]:
    """Move the protocol onto private fds; fd 0 reads /dev/null and fd 1 goes to stderr meanwhile.

    So a stray print() or a child process can never write into, or read from, the protocol stream.
    """
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


async def serve_sdk(lowlevel: Any, guarded: GuardedIn, out: WireOut) -> None:
    """Run the SDK's low-level server on the guarded streams (MCPServer.run_stdio_async minus the fd claim)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server(stdin=guarded, stdout=out) as (read_stream, write_stream):  # type: ignore[arg-type]
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def sdk_validator() -> Any:
    """The SDK's own JSON-RPC message check, for `GuardedIn.validate` (imports the SDK)."""
    from mcp.types import jsonrpc_message_adapter

    return lambda text: jsonrpc_message_adapter.validate_json(text, by_name=False)
