"""The stdio guard: what stands between the wire and the MCP SDK's stdio transport.

It works around two things in the SDK (mcp 2.x), and can go when upstream fixes them:

- modelcontextprotocol/python-sdk#2751 (open; fix PRs #2755, #2766, #2857 closed unmerged): the
  stdio transport drops a line it cannot parse or validate, and an id-bearing request then hangs
  forever. `check_line` and `GuardedIn` answer every such line with a JSON-RPC error under its id
  (read from either end of the line when it is too long to parse) and keep serving.
- python-sdk#1508 / #3220 (import cost): any `import mcp.*` takes about half a second, longer than
  some hosts wait for a server (Codex and Claude Code 2.1.332 send their first model request
  without retained's tools when the tool list comes later). `GuardedIn.read_ahead` reads stdin
  while the SDK imports, `EarlyReplies` answers the handshake, the 2026 `server/discover` and the
  tool list with the SDK's own replies (precomputed; tests keep them equal), and `WireOut` then
  drops the SDK's copies. Every tool call goes to the SDK.

`claim_stdio` keeps stdout for protocol messages only. Nothing here imports the SDK at module level,
and nothing here knows retained's tools beyond the names it is given.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Collection
from typing import Any

from . import records

log = logging.getLogger("retained.server")

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is refused (the issue names 10 MiB lines as bad input)
# What the SDK (mcp 2.x) negotiates in an `initialize` handshake; a test keeps these equal to the SDK's.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = "2025-11-25"
# The 2026-07-28 era: each request carries these in params._meta (mcp_types' *_META_KEY constants).
MODERN_VERSIONS = ("2026-07-28",)
MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
ACK_METHOD = "notifications/subscriptions/acknowledged"
LIST_CHANGED = frozenset({"toolsListChanged", "promptsListChanged", "resourcesListChanged"})
# The lists hosts ask for while connecting (Claude Code asks for prompts and resources too).
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def check_line(raw: bytes, validate: Any = None, tools: Collection[str] = ()) -> tuple[str | None, dict[str, Any] | None]:
    """Decide what to do with one line from the client: (text to pass on, None) or (None, error or None).

    (None, None) means drop it quietly (a blank line, or a bad notification nobody waits for).
    `tools` are the server's tool names: a `tools/call` naming another is refused here; `validate`
    is the SDK's own message check, run last (whatever it rejects is answered, not dropped).
    """
    if not raw.strip():
        return None, None
    parsed = _parse(raw)
    if not isinstance(parsed, tuple):
        return None, parsed  # the error that answers an unreadable line
    text, msg = parsed
    msg_id = msg.get("id")
    if "id" in msg and msg_id is None and "method" in msg:  # a request whose id is null: not a notification
        return None, _error(None, -32600, "Invalid Request: id must be a string or an integer, not null")
    if msg_id is not None and not _usable_id(msg_id):
        return None, _error(None, -32600, "Invalid Request: id must be a string or an integer")
    if msg.get("jsonrpc") == "2.0" and "method" not in msg and msg_id is not None and ("result" in msg or "error" in msg):
        return text, None  # the client's answer to a server request
    problem = _envelope_problem(msg) or _params_problem(msg, tools) or _sdk_problem(text, validate)
    if problem is None:
        return text, None
    if msg_id is None and "method" in msg:
        log.warning("dropped a malformed notification: %s", problem[1])
        return None, None  # a notification: nobody waits for an answer
    return None, _error(msg_id, *problem)


def _parse(raw: bytes) -> tuple[str, dict[str, Any]] | dict[str, Any]:
    """The line as text and a JSON object, or the error that answers it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # the id is still answered when the line's head or tail shows it
        return _error(_ends_id(raw), -32700, "Parse error: the line is not valid UTF-8")
    try:
        msg = json.loads(text)
    except json.JSONDecodeError as e:
        return _error(_ends_id(raw), -32700, f"Parse error: not JSON ({e.msg} at column {e.colno})")
    except ValueError:  # well-formed, but an integer longer than Python converts (4,300 digits by default)
        return _error(_ends_id(raw), -32700, "Parse error: a number has too many digits to read; send it as a string")
    except RecursionError:
        return _error(_ends_id(raw), -32700, "Parse error: nested too deeply to read; send flatter JSON")
    if isinstance(msg, list):
        return _error(None, -32600, "Invalid Request: batches are not supported; send one message per line")
    if not isinstance(msg, dict):
        return _error(None, -32600, "Invalid Request: a JSON-RPC message must be a JSON object")
    return text, msg


def _ends_id(raw: bytes) -> Any:
    """The id of a line that is JSON but cannot be read whole, from its ends (as for an oversized line)."""
    return oversized_line_id(raw[:_PEEK], raw[-_PEEK:])


def _usable_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def _envelope_problem(msg: dict[str, Any]) -> tuple[int, str] | None:
    if msg.get("jsonrpc") != "2.0":
        return -32600, 'Invalid Request: "jsonrpc" must be "2.0"'
    if "method" not in msg:
        return -32600, "Invalid Request: no method"
    if not isinstance(msg["method"], str) or not msg["method"]:
        return -32600, "Invalid Request: method must be a non-empty string"
    return None


def _params_problem(msg: dict[str, Any], tools: Collection[str]) -> tuple[int, str] | None:
    if records.has_lone_surrogate(msg):
        return -32602, ("Invalid params: a string holds a lone surrogate escape (e.g. \\ud800) and is not valid "
                        "Unicode; send well-formed text")
    params = msg.get("params")
    if "params" in msg and not isinstance(params, dict):
        return -32602, "Invalid params: params must be a JSON object"
    if msg["method"] != "tools/call":
        return None
    name = (params or {}).get("name")
    if not isinstance(name, str):
        return -32602, "Invalid params: tools/call needs params.name, a string"
    if tools and name not in tools:
        return -32602, f"Unknown tool: {name[:100]!r}; the tools are {', '.join(tools)}"
    args = (params or {}).get("arguments")
    if args is not None and not isinstance(args, dict):
        return -32602, f"Invalid params: arguments of {name} must be a JSON object"
    return None


def _sdk_problem(text: str, validate: Any) -> tuple[int, str] | None:
    if validate is None:
        return None
    try:
        validate(text)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return -32600, f"Invalid Request: {first[:300]}"
    return None


class WireOut:
    """The protocol side of stdout: whole lines, one writer at a time, flushed at once."""

    def __init__(self, fd: int) -> None:
        self._f = os.fdopen(fd, "wb", buffering=0, closefd=False)
        self._lock = threading.Lock()
        self._expected: dict[tuple[str, str], dict[str, Any]] = {}  # what the SDK will repeat, to drop
        self.tools_listed = threading.Event()  # set once the first tool list is out

    def answer_early(self, frame: dict[str, Any], sdk_key: tuple[str, str]) -> None:
        """Write `frame` now and drop the SDK's own copy of it later (the frame keyed `sdk_key`)."""
        with self._lock:
            self._expected[sdk_key] = frame
        self.write_line(json.dumps(frame, ensure_ascii=False, separators=(",", ":")))

    def _swallowed(self, text: str) -> bool:
        try:
            msg = json.loads(text)
        except ValueError:
            return False
        key = sdk_frame_key(msg)
        with self._lock:
            early = self._expected.get(key) if key is not None else None
            if key is None or early is None or not _same_kind(early, msg):
                return False  # not one answered early, or a later request that reused the id
            del self._expected[key]
        if {k: v for k, v in msg.items() if k != "id"} != {k: v for k, v in early.items() if k != "id"}:
            log.warning("the SDK answered differently from the early reply: %s", text[:500])
        return True

    def write_line(self, text: str) -> None:
        data = text.encode("utf-8") if text.endswith("\n") else (text + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[self._f.write(view):]
        if not self.tools_listed.is_set() and '"tools"' in text and _is_tool_list(text):
            self.tools_listed.set()

    # the async face stdio_server() expects
    async def write(self, text: str) -> None:
        if self._expected and self._swallowed(text):  # only the SDK's output is ever dropped
            return
        self.write_line(text)

    async def flush(self) -> None:
        return None


def _settle(future: Any) -> None:
    if not future.done():
        future.set_result(None)


def _is_tool_list(text: str) -> bool:
    try:
        result = json.loads(text).get("result")
    except (ValueError, AttributeError):
        return False
    return isinstance(result, dict) and "tools" in result


def sdk_frame_key(msg: Any) -> tuple[str, str] | None:
    """What identifies a frame the SDK writes: a reply by its id, a listen acknowledgement by its stream."""
    if not isinstance(msg, dict):
        return None
    if "id" in msg and ("result" in msg or "error" in msg):
        return ("reply", json.dumps(msg["id"]))
    if msg.get("method") == ACK_METHOD:
        meta = (msg.get("params") or {}).get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID_KEY in meta:
            return ("ack", json.dumps(meta[SUBSCRIPTION_ID_KEY]))
    return None


def _same_kind(early: dict[str, Any], msg: dict[str, Any]) -> bool:
    """The SDK's frame answers the same request: an error, or a result with the same members."""
    if "error" in msg or "result" not in early:
        return True
    result = msg.get("result")
    return isinstance(result, dict) and set(result) == set(early["result"])


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
        self._ahead: queue.Queue[bytes | _Oversized | None] | None = None
        self._early: EarlyReplies | None = None
        self._early_lock = threading.Lock()
        self._wake: Callable[[], object] | None = None  # tells the event loop a line is queued (_next_ahead)

    def read_ahead(self, early: EarlyReplies | None) -> None:
        """Read stdin on a thread from now on, so lines arrive while the SDK imports.

        Until the SDK asks for its first line, `early` sees each line first and may answer it; the
        SDK still gets every line, in order (so its session state is what it would have been).
        """
        self._early = early
        ahead: queue.Queue[bytes | _Oversized | None] = queue.Queue(maxsize=8)
        self._ahead = ahead

        def run() -> None:
            while True:
                line = self._read_line()
                with self._early_lock:
                    if self._early is not None and isinstance(line, bytes):
                        self._early.see(line)
                ahead.put(line)
                wake = self._wake
                if wake is not None:
                    try:
                        wake()
                    except RuntimeError:  # the event loop has closed: nobody reads any more
                        pass
                if line is None:
                    return

        threading.Thread(target=run, daemon=True, name="retained-stdin").start()

    async def _next_ahead(self) -> bytes | _Oversized | None:
        """The next line the reading thread queued, awaited on the event loop itself: the reading thread
        wakes it directly, where a worker thread blocked on the queue would cost every request a second
        handoff."""
        import asyncio  # tens of ms the opening replies would wait for (-X importtime): the SDK's reading only

        if self._early is not None:
            with self._early_lock:
                self._early.done.set()
                self._early = None  # the SDK is up: from here on it answers everything itself
        assert self._ahead is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                return self._ahead.get_nowait()
            except queue.Empty:
                pass
            ready = loop.create_future()
            self._wake = functools.partial(loop.call_soon_threadsafe, _settle, ready)
            try:
                if self._ahead.empty():  # a line queued before the wake was set would wake nobody
                    await ready
            finally:
                self._wake = None

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

    def __aiter__(self) -> GuardedIn:
        return self

    async def __anext__(self) -> str:
        import anyio  # with asyncio, tens of ms the opening replies would wait for: the SDK's reading only

        while True:
            raw = await (self._next_ahead() if self._ahead is not None else anyio.to_thread.run_sync(self._read_line))
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


class EarlyReplies:
    """Answers the requests hosts open a connection with, from replies precomputed with the SDK.

    Importing the SDK takes about half a second, and hosts wait for the handshake and the tool list
    before their first model request (Codex and Claude Code 2.1.332 do not wait long). So while it
    imports, these are answered here, each only in the well-formed shape the hosts send:

    - the handshake era (2024-11-05 … 2025-11-25): the first request's `initialize`, then the
      lists (`tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`) and `ping`;
    - the 2026-07-28 era (a first request carrying the `_meta` envelope): `server/discover`, the
      same lists, and the acknowledgement that opens a `subscriptions/listen` stream.

    `snapshot` holds the SDK's own results for these (`retained/handshake.json`, captured from the
    SDK and kept equal to it by tests). Anything else, or anything odd, is left to the SDK; after an
    odd first request nothing is answered early at all. The SDK still reads every line and its own
    copies of these frames are dropped by `WireOut` (compared, with a warning if they differ).
    A tool call, like anything else not named here, is the SDK's.
    """

    def __init__(self, out: WireOut, snapshot: dict[str, Any], instructions: Callable[[], str],
                 tools: Collection[str] = ()) -> None:
        self._out = out
        self._snapshot = snapshot
        self._instructions = instructions
        self._tools = tuple(tools)
        self._era: str | None = None  # "handshake", "modern", or "off"
        # Set once the tool list is out, or a request came that only the SDK can answer: until
        # then the server may hold the SDK's import back, which would slow these replies down.
        self.done = threading.Event()
        self._answered = 0
        self._seen: set[str] = set()

    def see(self, raw: bytes) -> None:
        """Answer `raw` early if it is one of the opening requests answered here."""
        if self._era == "off":
            return
        answered = self._answered
        msg = _read_json(raw)  # once: a line may be up to 8 MiB
        try:
            self._see(raw, msg)
        except Exception as e:  # the SDK answers it
            log.warning("no early reply: %s", e)
            self._era = "off"
        if self._era == "off" or (self._answered == answered and _is_request(raw, msg)):
            self.done.set()  # something for the SDK: let it load now

    def _see(self, raw: bytes, msg: Any) -> None:
        text, err = check_line(raw, None, self._tools)
        if text is None:  # a blank line (ignored), or one the guard refuses
            if err is not None and self._era is None:
                self._era = "off"  # an odd opening: the SDK decides everything on this connection
            return
        # check_line read `text` (the line as UTF-8) as a JSON object: `msg` is that same object
        if not _plain_request(msg):
            if self._era is None:
                self._era = "off"
            return
        if msg.get("id") is None:
            return  # a notification: nothing to answer
        rid, method, params = msg["id"], msg["method"], msg.get("params")
        key = json.dumps(rid)
        fresh = key not in self._seen
        self._seen.add(key)
        if self._era is None:  # the first request decides the era, as in the SDK
            if method != "initialize" and has_modern_envelope(params):
                self._era = "modern"
            else:
                result = self._initialize(method, params)
                if result is None:
                    self._era = "off"  # what the SDK makes of an odd opening is its own business
                    return
                self._era = "handshake"
                self._reply(rid, result)
                return
        if not fresh:
            return  # a reused id: its replies could not be told apart
        if self._era == "handshake":
            self._handshake(rid, method, params)
        else:
            self._modern(rid, method, params)

    def _reply(self, rid: Any, result: dict[str, Any]) -> None:
        self._out.answer_early({"jsonrpc": "2.0", "id": rid, "result": result}, ("reply", json.dumps(rid)))
        self._answered += 1
        if "tools" in result:
            self.done.set()

    def _initialize(self, method: str, params: Any) -> dict[str, Any] | None:
        if method != "initialize":
            return None
        return initialize_result(params, self._snapshot["handshake"]["initialize"], self._instructions)

    def _handshake(self, rid: Any, method: str, params: Any) -> None:
        if has_modern_envelope(params):
            return
        if method in LISTS and method in self._snapshot["handshake"] and _no_cursor(params):
            self._reply(rid, self._snapshot["handshake"][method])
        elif method == "ping" and _no_cursor(params):
            self._reply(rid, {})

    def _modern(self, rid: Any, method: str, params: Any) -> None:
        if not _good_envelope(params):
            return
        if method == "server/discover" and set(params) == {"_meta"}:
            self._reply(rid, dict(self._snapshot["modern"]["server/discover"], instructions=self._instructions()))
        elif method in LISTS and method in self._snapshot["modern"] and _no_cursor(params):
            self._reply(rid, self._snapshot["modern"][method])
        elif method == "subscriptions/listen" and set(params) == {"_meta", "notifications"}:
            wanted = params["notifications"]
            if isinstance(wanted, dict) and set(wanted) <= LIST_CHANGED and all(isinstance(v, bool) for v in wanted.values()):
                honored = {k: True for k, v in wanted.items() if v}  # what the SDK's ListenHandler acknowledges
                ack = {"jsonrpc": "2.0", "method": ACK_METHOD,
                       "params": {"_meta": {SUBSCRIPTION_ID_KEY: rid}, "notifications": honored}}
                self._out.answer_early(ack, ("ack", json.dumps(rid)))
                self._answered += 1


_UNREADABLE = object()  # what _read_json gives for a line that is not JSON


def _read_json(raw: bytes) -> Any:
    """The line's JSON value, or _UNREADABLE."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return _UNREADABLE


def _is_request(raw: bytes, msg: Any) -> bool:
    """Whether a line (`msg` as read by `_read_json`) may be a request: anything but a clean notification
    or a blank line."""
    if msg is _UNREADABLE:
        return bool(raw.strip())
    return not (isinstance(msg, dict) and "id" not in msg and isinstance(msg.get("method"), str))


def _plain_request(msg: Any) -> bool:
    """A JSON-RPC 2.0 request or notification with nothing unusual about it."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
        return False
    if set(msg) - {"jsonrpc", "id", "method", "params"}:
        return False
    rid = msg.get("id")
    if "id" in msg and (isinstance(rid, bool) or not isinstance(rid, (int, str))):
        return False
    return "params" not in msg or isinstance(msg["params"], dict)


def has_modern_envelope(params: Any) -> bool:
    """The SDK's test for the 2026-07-28 era: the protocol-version key in `params._meta`."""
    return isinstance(params, dict) and isinstance(params.get("_meta"), dict) and MODERN_VERSION_KEY in params["_meta"]


def _good_envelope(params: Any) -> bool:
    if not has_modern_envelope(params):
        return False
    meta = params["_meta"]
    if meta.get(MODERN_VERSION_KEY) not in MODERN_VERSIONS or not isinstance(meta.get(CLIENT_CAPABILITIES_KEY), dict):
        return False
    if set(meta) - {MODERN_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY}:
        return False
    info = meta.get(CLIENT_INFO_KEY)
    return info is None or _implementation(info)


def _implementation(info: Any) -> bool:
    return (isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)
            and all(isinstance(v, str) for k, v in info.items() if k in ("title", "description", "websiteUrl"))
            and set(info) <= {"name", "version", "title", "description", "websiteUrl"})


def _no_cursor(params: Any) -> bool:
    """Params with nothing but request metadata (a page cursor or anything else goes to the SDK)."""
    return params is None or (set(params) <= {"_meta"} and isinstance(params.get("_meta", {}), dict))


def well_formed_initialize(params: Any) -> bool:
    """A handshake `initialize`'s params in the shape hosts send (anything else is the SDK's to judge)."""
    if not isinstance(params, dict) or "_meta" in params or set(params) - {"protocolVersion", "capabilities", "clientInfo"}:
        return False
    version, caps, client = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    return isinstance(version, str) and isinstance(caps, dict) and _implementation(client)


def initialize_result(params: Any, snapshot: dict[str, Any], instructions: Callable[[], str]) -> dict[str, Any] | None:
    """The SDK's result for a well-formed handshake `initialize`, or None to leave it to the SDK."""
    if not well_formed_initialize(params):
        return None
    version = params["protocolVersion"]
    return {**snapshot, "instructions": instructions(),
            "protocolVersion": version if version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION}


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
    from mcp.server.stdio import stdio_server  # the SDK: imported once the opening replies are out

    async with stdio_server(stdin=guarded, stdout=out) as (read_stream, write_stream):  # type: ignore[arg-type]
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def sdk_validator() -> Any:
    """The SDK's own JSON-RPC message check, for `GuardedIn.validate` (imports the SDK)."""
    from mcp.types import jsonrpc_message_adapter  # the SDK: imported once the opening replies are out

    return lambda text: jsonrpc_message_adapter.validate_json(text, by_name=False)


def sdk_versions() -> dict[str, str | None]:
    """The installed versions of the SDK and pydantic, read from their dist-info names (no import)."""
    found: dict[str, str | None] = {"mcp": None, "pydantic": None}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                dist, _, version = name[: -len(".dist-info")].partition("-")
                if dist.lower() in found and found[dist.lower()] is None:
                    found[dist.lower()] = version
        if all(found.values()):
            break
    return found
