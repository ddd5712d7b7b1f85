"""Tool calls answered while the SDK imports: the SDK's own reply, byte for byte, and each call run once.

`retained serve` answers a plain `tools/call` that comes before the MCP SDK has loaded with retained's
own tool code (retained/early_calls.py), and withholds the line from the SDK, which would run it again.
These tests drive real `retained serve` processes over real stdio, with the early replies on and off.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from retained.early_calls import EarlyCalls
from retained.stdio_guard import EarlyReplies, WireOut, wire_json
from retained.store import Store
from retained.tools import TOOL_NAMES, Tools
from retained.transport import early_snapshot
from tests.mcp_wire import WireServer

EARLY = "before the SDK loaded"  # what the server logs (INFO) for each call it answered early
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# A session's calls: every tool, a tool error (empty text, an unknown id), free-form fields with a float
# pydantic spells differently from Python, text with control characters and non-ASCII.
SESSION = [
    ("memory_write", {"text": "we deploy with héllo-tool \u4e2d\x01 on fridays\tonly", "kind": "decision",
                      "fields": {"ratio": 1.5e-05, "tiny": 1e-07, "list": [1, None, True], "nested": {"a": "b"}}}),
    ("memory_write", {"text": "the staging database is postgres 16", "scope": "global", "source": "ops.md"}),
    ("memory_search", {"query": "postgres staging", "scope": "*", "k": 5}),
    ("memory_search", {"query": "nothing like this at all"}),
    ("memory_get", {}),
    ("memory_list", {"scope": "*", "limit": 10}),
    ("memory_list", {"scopes": True}),
    ("memory_verify", {}),
    ("memory_write", {"text": ""}),
    ("memory_forget", {"ids": ["mem_00000000000000000000000000"], "reason": "wrong"}),
    ("memory_checkpoint", {"label": "early calls: done", "summary": "the next step is the bench"}),
    ("memory_write", {"text": "the staging database is postgres 16", "scope": "global"}),  # a duplicate
]


def _normalised(line: bytes) -> str:
    """A reply line with what differs between two runs of the same calls replaced: ids, times, hashes."""
    text = line.decode("utf-8")
    text = re.sub(r"mem_[0-9A-Z]{26}", "<id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<ts>", text)
    text = re.sub(r"[0-9a-f]{64}", "<sha256>", text)
    return re.sub(r"sha256 [0-9a-f]{12}", "sha256 <short>", text)


def _server(store: Path, early: bool, level: str = "INFO") -> WireServer:
    return WireServer(env={"RETAINED_DIR": str(store), "RETAINED_EARLY_INITIALIZE": "on" if early else "off",
                           "RETAINED_EMBED": "off", "RETAINED_LOG_LEVEL": level}, cwd=str(store.parent))


def _session(store: Path, early: bool, era: str, calls: list[tuple[str, dict]],
             sdk_first: bool = False) -> tuple[list[bytes], str]:
    """Run `calls` one after another (each after the previous reply), right after the opening (with
    `sdk_first`, once the SDK serves: after a request only the SDK answers)."""
    srv = _server(store, early, "DEBUG" if sdk_first else "INFO")
    try:
        if era == "handshake":
            srv.initialize()
        if sdk_first:
            up = {"_meta": MODERN_META} if era == "modern" else {}
            assert "error" in srv.request("sdk-up", "retained/no-such-method", up)
        for i, (name, arguments) in enumerate(calls):
            params: dict = {"name": name, "arguments": arguments}
            if era == "modern":
                params["_meta"] = MODERN_META
            srv.request(i, "tools/call", params)
    finally:
        assert srv.close() == 0
    return srv.lines, srv.stderr


def _logged(srv: WireServer, text: str, timeout: float = 10) -> int:
    """How often the server logged `text` (its stderr is read on a thread: wait for the line to arrive)."""
    deadline = time.monotonic() + timeout
    while text not in srv.stderr and time.monotonic() < deadline:
        time.sleep(0.01)
    return srv.stderr.count(text)


def _records(store: Path) -> list[dict]:
    path = store / "log.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_early_tool_replies_are_byte_for_byte_what_the_sdk_sends(tmp_path, era):
    """The same calls against a server with early replies and one without: every reply line is the same
    bytes once ids, times and hashes are normalised (content text, structuredContent, isError, and in the
    2026-07-28 era resultType and the serverInfo stamp), and most were answered before the SDK loaded."""
    ours, err = _session(tmp_path / "early", True, era, SESSION)
    sdk, _ = _session(tmp_path / "sdk", False, era, SESSION)
    assert err.count(EARLY) >= 3, err[-3000:]  # the first calls come well inside the SDK's import
    tool_replies = [i for i, line in enumerate(sdk) if b'"content"' in line]
    assert len(tool_replies) == len(SESSION)
    for i in tool_replies:
        assert _normalised(ours[i]) == _normalised(sdk[i])
    assert "Traceback" not in err and "differently" not in err


STEADY = "without the SDK"  # what the server logs (DEBUG) for each call it answered once the SDK is up


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_once_the_sdk_is_up_plain_calls_are_still_answered_as_the_sdk_answers_them(tmp_path, era):
    """Past the start of a session (the SDK has answered a request of its own), plain tool calls are still
    answered by retained's tool code, and every reply line is the SDK's own bytes, as with it off."""
    ours, err = _session(tmp_path / "early", True, era, SESSION, sdk_first=True)
    sdk, _ = _session(tmp_path / "sdk", False, era, SESSION, sdk_first=True)
    assert err.count(STEADY) == len(SESSION), err[-3000:]
    assert EARLY not in err
    assert len(ours) == len(sdk)
    tool_replies = [i for i, line in enumerate(sdk) if b'"content"' in line]
    assert len(tool_replies) == len(SESSION)
    for i in tool_replies:
        assert _normalised(ours[i]) == _normalised(sdk[i])
    assert "Traceback" not in err and "differently" not in err


def test_a_write_answered_early_is_in_the_log_exactly_once_as_the_session_goes_on(tmp_path):
    """A memory_write sent right after initialize is acknowledged before the SDK loads, never run again by
    the SDK, and the session carries on through the SDK (a call it must answer, more writes) as before."""
    store = tmp_path / "store"
    srv = _server(store, True)
    try:
        srv.initialize()
        first = srv.call("w0", "memory_write", {"text": "written before the SDK loaded"})
        assert first["result"]["isError"] is False and first["result"]["structuredContent"]["durable"] is True
        assert _logged(srv, EARLY) == 1
        # A string for an integer: only the SDK answers it (it coerces "3"), so the SDK is up after this.
        through_sdk = srv.call("s1", "memory_search", {"query": "written", "k": "3"})
        assert through_sdk["result"]["isError"] is False
        assert through_sdk["result"]["structuredContent"]["returned"] == 1
        for i in range(3):
            assert srv.call(f"w{i + 1}", "memory_write", {"text": f"written later {i}"})["result"]["isError"] is False
        listed = srv.call("l", "memory_list", {"scope": "*"})["result"]["structuredContent"]
    finally:
        assert srv.close() == 0
    texts = [r["text"] for r in _records(store)]
    assert texts.count("written before the SDK loaded") == 1
    assert texts == ["written before the SDK loaded", "written later 0", "written later 1", "written later 2"]
    assert listed["total"] == 4
    assert sum(json.loads(x).get("id") == "w0" for x in srv.lines) == 1  # one receipt, not two
    with Store(store) as s:
        assert s.verify()["intact"] is True


def _answers(store: Path, lines: list[dict]) -> list[bytes]:
    """What EarlyReplies (with the real tool code over `store`, no SDK running) writes for `lines`; a line
    is withheld from the SDK exactly when it is a tool call answered here."""
    snapshot = early_snapshot(None)
    assert snapshot is not None, "retained/handshake.json is stale: RETAINED_UPDATE_SNAPSHOT=1 pytest tests/test_server.py -k snapshot"
    read_fd, write_fd = os.pipe()
    with Store(store) as s:
        early = EarlyReplies(WireOut(write_fd), snapshot, lambda: "INSTRUCTIONS", TOOL_NAMES,
                             EarlyCalls(Tools(s, None), s, None))
        withheld = [early.see(json.dumps(m).encode() + b"\n") for m in lines]
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        out = f.read().splitlines()
    answered_calls = [json.loads(x)["id"] for x in out if b'"content"' in x]
    assert answered_calls == [m["id"] for m, w in zip(lines, withheld, strict=True) if w]
    assert all(m.get("method") == "tools/call" for m, w in zip(lines, withheld, strict=True) if w)
    return out


def _call(msg_id, name: str, arguments, **params) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": name, "arguments": arguments, **params}}


ODD_CALLS = {
    "string-number": _call(1, "memory_search", {"query": "x", "k": "5"}),
    "bool-for-int": _call(1, "memory_search", {"query": "x", "k": True}),
    "float-for-int": _call(1, "memory_list", {"limit": 5.0}),
    "over-the-bound": _call(1, "memory_search", {"query": "x", "k": 101}),
    "wrong-type": _call(1, "memory_write", {"text": 5}),
    "unknown-key": _call(1, "memory_write", {"text": "x", "tags": ["a"]}),
    "missing-required": _call(1, "memory_write", {"kind": "note"}),
    "json-in-a-string": _call(1, "memory_write", {"text": "x", "scope": "null"}),
    "list-of-numbers": _call(1, "memory_forget", {"ids": [1], "reason": "r"}),
    "null-arguments": _call(1, "memory_verify", None),
    "progress-token": _call(1, "memory_write", {"text": "x"}, _meta={"progressToken": 1}),
    "extra-param": _call(1, "memory_write", {"text": "x"}, task={"ttl": 1}),
    "string-for-a-list": _call(1, "memory_get", {"ids": '["mem_x"]'}),
    "deep-fields": _call(1, "memory_write", {"text": "x", "fields": json.loads('{"a":' * 40 + "1" + "}" * 40)}),
}


@pytest.mark.parametrize("odd", sorted(ODD_CALLS))
def test_odd_arguments_are_left_to_the_sdk(tmp_path, odd):
    """A call whose arguments the SDK would coerce, refuse or read otherwise is not answered early and is
    handed on, and nothing is written; a plain call after it waits its turn behind it at the SDK too."""
    store = tmp_path / "store"
    plain = _call(2, "memory_write", {"text": "a plain write after the odd call"})
    frames = _answers(store, [INIT, INITIALIZED, ODD_CALLS[odd], plain])
    assert [json.loads(f)["id"] for f in frames] == ["init"]  # the initialize reply only
    assert _records(store) == []


def _steady(store: Store, write_fd: int, opening: list[dict]) -> EarlyReplies:
    """EarlyReplies over real tool code, with the SDK up after `opening` was seen (no SDK runs: what it
    would answer is written by the test with `WireOut.sdk_line`)."""
    snapshot = early_snapshot(None)
    assert snapshot is not None
    early = EarlyReplies(WireOut(write_fd), snapshot, lambda: "INSTRUCTIONS", TOOL_NAMES,
                         EarlyCalls(Tools(store, None), store, None))
    for m in opening:
        early.see(json.dumps(m).encode() + b"\n")
    early.sdk_up()
    return early


def _ids_written(read_fd: int) -> list:
    with os.fdopen(read_fd, "rb") as f:
        return [json.loads(x).get("id") for x in f.read().splitlines()]


def test_a_plain_call_waits_while_a_request_is_owed_by_the_sdk_and_not_after(tmp_path):
    """A tool call never overtakes a request the SDK has not answered yet: it is handed to the SDK behind
    it. Once the SDK's reply is out, the next plain call is answered here again."""
    read_fd, write_fd = os.pipe()
    with Store(tmp_path / "s") as s:
        out_early = _steady(s, write_fd, [INIT, INITIALIZED])
        out = out_early._out
        odd = ODD_CALLS["string-number"]  # the SDK's to answer (it coerces "5")
        assert out_early.see(json.dumps(dict(odd, id="odd")).encode()) is False
        assert out_early.see(json.dumps(_call("behind", "memory_write", {"text": "behind"})).encode()) is False
        out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": "odd", "result": {}}))
        assert out_early.see(json.dumps(_call("next", "memory_write", {"text": "next"})).encode()) is False  # "behind" is owed
        out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": "behind", "result": {}}))
        out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": "next", "result": {}}))
        assert out_early.see(json.dumps(_call("answered", "memory_write", {"text": "answered here"})).encode()) is True
    os.close(write_fd)
    assert _ids_written(read_fd) == ["init", "odd", "behind", "next", "answered"]
    assert [r["text"] for r in _records(tmp_path / "s")] == ["answered here"]  # the rest were the SDK's to run


def test_a_cancelled_request_no_longer_holds_tool_calls_back(tmp_path):
    """The SDK may never answer a request the client cancelled: its cancellation settles what was owed."""
    read_fd, write_fd = os.pipe()
    with Store(tmp_path / "s") as s:
        early = _steady(s, write_fd, [INIT, INITIALIZED])
        assert early.see(json.dumps(dict(ODD_CALLS["string-number"], id=7)).encode()) is False
        assert early.see(json.dumps(_call(8, "memory_write", {"text": "held"})).encode()) is False
        for rid in (7, 8):
            early.see(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": rid}}).encode())
        assert early.see(json.dumps(_call(9, "memory_write", {"text": "free again"})).encode()) is True
    os.close(write_fd)
    assert _ids_written(read_fd) == ["init", 9]


def test_when_the_sdk_is_up_before_the_opening_it_answers_the_opening_and_calls_follow(tmp_path):
    """A host slower than the SDK's import: the SDK answers initialize; a tool call behind it waits for that
    reply, and plain calls after it are answered here. An odd opening leaves every call to the SDK."""
    read_fd, write_fd = os.pipe()
    with Store(tmp_path / "s") as s:
        early = _steady(s, write_fd, [])
        assert early.see(json.dumps(INIT).encode()) is False
        assert early.see(json.dumps(_call(1, "memory_write", {"text": "behind initialize"})).encode()) is False
        early._out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": "init", "result": {}}))
        early._out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}))
        assert early.see(json.dumps(_call(2, "memory_write", {"text": "after"})).encode()) is True
    with Store(tmp_path / "t") as s:
        odd = _steady(s, os.open(os.devnull, os.O_WRONLY), [])
        assert odd.see(json.dumps(dict(INIT, params={"protocolVersion": 5})).encode()) is False
        odd._out.sdk_line(json.dumps({"jsonrpc": "2.0", "id": "init", "error": {"code": -32602, "message": "x"}}))
        assert odd.see(json.dumps(_call(3, "memory_write", {"text": "x"})).encode()) is False
    os.close(write_fd)
    assert _ids_written(read_fd) == ["init", 1, 2]
    assert [r["text"] for r in _records(tmp_path / "s")] == ["after"]


def test_a_tool_call_before_initialize_is_left_to_the_sdk(tmp_path):
    """In the handshake era the SDK serves tool calls only once initialize was accepted: so here too."""
    store = tmp_path / "store"
    assert _answers(store, [_call(1, "memory_write", {"text": "too soon"})]) == []
    assert _records(store) == []


def test_plain_calls_in_both_eras_are_answered_and_withheld(tmp_path):
    """Withheld (see() says so) and answered once each: the handshake era after initialize, the 2026-07-28
    era from the first enveloped request."""
    frames = _answers(tmp_path / "a", [INIT, INITIALIZED, _call(1, "memory_write", {"text": "one"}),
                                       _call(2, "memory_list", {"scope": "*"})])
    assert [json.loads(f)["id"] for f in frames] == ["init", 1, 2]
    modern = _answers(tmp_path / "b", [_call("m", "memory_write", {"text": "two"}, _meta=MODERN_META)])
    result = json.loads(modern[0])["result"]
    assert result["resultType"] == "complete" and result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "retained"
    assert [r["text"] for r in _records(tmp_path / "b")] == ["two"]


@pytest.mark.parametrize("odd", ["string-number", "unknown-key", "wrong-type", "json-in-a-string"])
def test_odd_arguments_get_the_sdks_own_answer(tmp_path, odd):
    """Over real stdio: the odd call's reply with early replies on is the SDK's (none answered early)."""
    msg = ODD_CALLS[odd]["params"]
    ours, err = _session(tmp_path / "early", True, "handshake", [(msg["name"], msg["arguments"])])
    sdk, _ = _session(tmp_path / "sdk", False, "handshake", [(msg["name"], msg["arguments"])])
    assert EARLY not in err
    assert [_normalised(x) for x in ours if b'"content"' in x] == [_normalised(x) for x in sdk if b'"content"' in x]


def test_a_write_in_flight_at_sigterm_finishes_whole(tmp_path):
    """SIGTERM while writes are answered early: the server exits 0, the log ends on a whole line with its
    chain intact, every acknowledged write is in it exactly once, and none is there twice."""
    store = tmp_path / "store"
    srv = _server(store, True)
    srv.initialize()
    for i in range(30):
        srv.send(_call(i, "memory_write", {"text": f"burst {i} " + "z" * 15_000}))
    srv.wait_for(0, timeout=30)  # the first is acknowledged: the rest are being written
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(15) == 0
    srv._reader.join(5)
    assert EARLY in srv.stderr
    log = (store / "log.jsonl").read_bytes()
    assert log.endswith(b"\n")
    written = [r["text"].split(" ")[1] for r in _records(store)]
    assert len(written) == len(set(written))
    acked = {str(json.loads(x)["id"]) for x in srv.lines if json.loads(x).get("id") != "init"}
    assert acked <= set(written)
    with Store(store) as s:
        report = s.verify()
    assert report["torn_tail"] is None and report["chain_ok"] and report["intact"]


@pytest.mark.parametrize("value", [1.5e-05, -3.2e-05, 1e-05, 1e-06, 1.25e-10, 1e-07, 0.0001, 0.1, 1.0, 2.5, 1e15,
                                   1e16, 1.5e17, 1e22, 5e-324, -0.0, 1.7976931348623157e308, 123456.789])
def test_floats_are_spelt_as_the_sdk_spells_them(value):
    import pydantic_core

    assert wire_json({"v": value}) == pydantic_core.to_json({"v": value}).decode()


def test_text_is_escaped_as_the_sdk_escapes_it():
    import pydantic_core

    text = "".join(map(chr, range(0, 160))) + "é中\U0001f600\u2028\u2029\"\\/"
    value = {"text": text, "n": [1, -2, True, False, None, {"k": 2**70}], "é": {}}
    assert wire_json(value) == pydantic_core.to_json(value).decode()


def test_the_early_path_imports_no_sdk_and_no_pydantic(tmp_path):
    """The point is speed: answering a call early must not load what it is there to get ahead of."""
    script = (
        "import json, os, sys\n"
        "from retained.early_calls import EarlyCalls\n"
        "from retained.store import Store\n"
        "from retained.tools import Tools\n"
        "s = Store(sys.argv[1])\n"
        "calls = EarlyCalls(Tools(s, None), s, None)\n"
        "assert calls.accepts('memory_write', {'text': 'x'})\n"
        "r = calls.call('memory_write', {'text': 'no sdk here'})\n"
        "calls.call('memory_search', {'query': 'sdk'})\n"
        "print(json.dumps([r['isError'], sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'pydantic', 'pydantic_core', 'typing_extensions', 'anyio'))]))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "RETAINED_EMBED": "off"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, []]


def test_early_replies_off_answers_no_call_early(tmp_path):
    """RETAINED_EARLY_INITIALIZE=off turns the early tool calls off with the rest of the early replies."""
    lines, err = _session(tmp_path / "s", False, "handshake", [("memory_write", {"text": "through the SDK"})])
    assert EARLY not in err
    assert [r["text"] for r in _records(tmp_path / "s")] == ["through the SDK"]
    assert len([x for x in lines if b'"content"' in x]) == 1


def test_a_write_answered_here_is_taken_into_the_index_after_its_reply_is_out_on_the_same_thread(tmp_path):
    """The index takes in a write answered on the reading thread there, once the reply is written:
    the reply does not wait for it, and the next call finds it without handing over to another thread."""
    import select
    import threading

    r, w = os.pipe()
    try:
        with Store(tmp_path / "s") as store:
            store.index.catch_up_in_background()  # as `retained serve` runs it
            real = store.index.catch_up
            seen: list[tuple[str, bool]] = []

            def catch_up(*args, **kw):
                reply_out = bool(select.select([r], [], [], 0)[0])
                seen.append((threading.current_thread().name, reply_out))
                return real(*args, **kw)

            store.index.catch_up = catch_up
            early = EarlyReplies(WireOut(w), early_snapshot(None), lambda: "", TOOL_NAMES,
                                 EarlyCalls(Tools(store, None), store, None))
            early.see(json.dumps(INIT).encode())
            os.read(r, 1 << 20)
            early.sdk_up()
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "memory_write", "arguments": {"text": "the kestrel queue drains at noon"}}}
            seen.clear()
            assert early.see(json.dumps(call).encode()) is True
            reply = json.loads(os.read(r, 1 << 20))
            assert reply["id"] == 7 and reply["result"]["structuredContent"]["durable"] is True
            me = threading.current_thread().name
            # the write's own catch-up before appending (no reply yet), then the one after its reply, both here
            assert seen == [(me, False), (me, True)], seen
            assert store.index._follower._thread is None  # the background thread was never woken
            hits = store.search("kestrel")["hits"]
            assert [h["id"] for h in hits] == [reply["result"]["structuredContent"]["id"]]
    finally:
        os.close(r)
        os.close(w)


def test_a_call_taken_here_is_answered_even_when_its_after_reply_step_cannot_be_set_up():
    """A call answered here is withheld from the SDK, so it must get its reply whatever fails around it."""

    class Calls:
        def accepts(self, name, arguments):
            return True

        def call(self, name, arguments):
            return {"content": [{"text": "done", "type": "text"}], "isError": False}

        def answering(self):
            raise RuntimeError("no index to take the write in")

    r, w = os.pipe()
    try:
        early = EarlyReplies(WireOut(w), early_snapshot(None), lambda: "", TOOL_NAMES, Calls())
        early.see(json.dumps(INIT).encode())
        os.read(r, 1 << 20)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}}
        assert early.see(json.dumps(call).encode()) is True
        import select

        assert select.select([r], [], [], 10)[0], "the call was taken and never answered"
        reply = json.loads(os.read(r, 1 << 20))
        assert reply["id"] == 9 and reply["result"]["content"][0]["text"] == "done"
    finally:
        os.close(r)
        os.close(w)
