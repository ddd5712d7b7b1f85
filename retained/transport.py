"""How `retained serve` runs: stdio, the early replies, SIGTERM and warm-up, in front of the MCP SDK.

The order of start-up is the point. The protocol's fds are claimed, the store is opened and stdin is
read *before* the SDK is imported (about half a second, python-sdk#1508 / #3220), so the requests a
host opens with are answered at once from `retained/handshake.json` (`stdio_guard.EarlyReplies`)
while it loads; every tool call is the SDK's. Nothing on that path imports the SDK or pydantic:
the snapshot's key (`made_with`) is computed from the tool definitions as data (retained/tools.py),
not from the SDK or from any file's bytes, so an edit to this module cannot make the snapshot stale.

What this module leans on that is not public, each to go when a public way exists:
- `MCPServer._lowlevel_server`: `MCPServer.run_stdio_async` claims fds 0 and 1 itself and takes no
  streams (python-sdk#2343, which would pass them through, was closed unmerged; mcp 2.3 has none),
  so the guarded streams are handed to the low-level server directly (`_run_sdk`).
- on SIGTERM, `Store.wait_idle` lets a write under way finish (`_exit_on_sigterm`); `tools.UnusableStore`
  stands in for a store that cannot be opened.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import embed, stdio_guard
from .errors import RetainedError, UsageError
from .installers import hosts as registry  # host facts: the session variables
from .instructions import GUIDANCE, compute_instructions
from .paths import store_dir
from .project import project_scope
from .stdio_guard import EarlyReplies, GuardedIn, WireOut
from .store import Store
from .switches import switch
from .tools import TOOL_NAMES, ServedStore, UnusableStore, definitions, here_phrase

if TYPE_CHECKING:
    from .server import RetainedServer  # imported at run time only once the opening replies are out

log = logging.getLogger("retained.server")

# -- the SDK's replies to the opening requests, precomputed ----------------------------------------
HANDSHAKE_SNAPSHOT = Path(__file__).with_name("handshake.json")
EARLY_WINDOW_S = 0.3  # longest the SDK's import waits for the opening to be answered
PROJECT_MARK = "<project>"  # the server's project, in handshake.json


def made_with() -> dict[str, str | None]:
    """What handshake.json's replies depend on: the tool definitions, and the SDK's and pydantic's versions.

    A change to a tool (a description, a parameter, a result's keys, a hint) or to the server's name
    or version changes the digest, so a stale snapshot is never served; code is not part of it.
    """
    data = json.dumps(definitions(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return {"tools": hashlib.sha256(data.encode("utf-8")).hexdigest(), **stdio_guard.sdk_versions()}


def early_snapshot(project: str | None) -> dict[str, Any] | None:
    """The SDK's replies to the opening requests for this project, or None when they may be stale.

    tests/test_server.py captures them from the SDK over real stdio into retained/handshake.json and
    fails when they differ from what the SDK answers (RETAINED_UPDATE_SNAPSHOT=1 rewrites the file).
    """
    try:
        data = json.loads(HANDSHAKE_SNAPSHOT.read_text(encoding="utf-8"))
        current = made_with()
    except (OSError, ValueError, TypeError) as e:
        log.warning("no early replies: %s", e)
        return None
    if not isinstance(data, dict) or data.get("made_with") != current:
        return None
    return replace_in_strings(data["replies"], here_phrase(PROJECT_MARK), here_phrase(project))


def replace_in_strings(value: Any, old: str, new: str) -> Any:
    """`value` (JSON data) with `old` replaced by `new` in every string."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: replace_in_strings(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_in_strings(v, old, new) for v in value]
    return value


def _early_replies(out: WireOut, project: str | None, instructions: Callable[[], str]) -> EarlyReplies | None:
    if not switch("RETAINED_EARLY_INITIALIZE", True):
        return None  # off: the opening requests wait for the SDK
    snapshot = early_snapshot(project)
    if snapshot is None:
        log.info("no early replies: retained/handshake.json was made with other tools or another SDK version")
        return None
    return EarlyReplies(out, snapshot, instructions, TOOL_NAMES)


# -- the store, whatever state it is in ---------------------------------------------------------------
def _open_store(directory: Path) -> ServedStore:
    try:
        return Store(directory)
    except RetainedError as e:
        # Serve anyway: every tool answers with the reason, which the agent (and the user) can read,
        # instead of a server that "failed to connect" with the reason lost in a log.
        log.error("store unusable: %s", e)
        return UnusableStore(e)


def _exit_on_sigterm(store: ServedStore) -> None:
    def _on_sigterm(signum: int, frame: Any) -> None:
        # Let an append that is under way finish, so nothing is left half-written, then leave at once
        # (a normal exit would wait for the stdin reader thread, which cannot be interrupted).
        store.wait_idle(10)
        os._exit(0)

    signal.signal(signal.SIGTERM, _on_sigterm)


class _Instructions:
    """The server's instructions (guidance and a brief), computed on a thread while the SDK imports.

    Start-up then stays within one import's time.
    """

    def __init__(self, store: ServedStore, project: str | None) -> None:
        self._text: str | None = None
        self._worker = threading.Thread(target=self._compute, args=(store, project), daemon=True)
        self._worker.start()

    def _compute(self, store: ServedStore, project: str | None) -> None:
        if isinstance(store, UnusableStore):  # say why in the instructions, where the model reads it
            self._text = f"{GUIDANCE}\n\nThe memory store cannot be used now: {store.reason}"
            return
        try:
            self._text = compute_instructions(store, project)
        except Exception as e:
            log.warning("no brief in the instructions: %s", e)

    def made(self) -> str | None:
        """The instructions once made (waiting up to 5 s), or None without a brief."""
        self._worker.join(timeout=5)
        return self._text

    def text(self) -> str:
        return self.made() or GUIDANCE


# -- serving ----------------------------------------------------------------------------------------
def command(dir_arg: str | None) -> int:
    """`retained [--dir D] serve`, as hosts start it: retained/entry.py comes here without the CLI's
    parser and the imports of every other command (~15 ms of a host's wait for the tool list)."""
    try:
        if dir_arg is not None and not dir_arg.strip():
            raise UsageError("--dir is empty", hint="give a directory, or leave --dir out for the default store")
        directory = store_dir(dir_arg)
    except RetainedError as e:  # as the CLI says an error: one line with its hint
        sys.stderr.write(f"error: {e.message}" + (f" (hint: {e.hint})" if e.hint else "") + "\n")
        return e.exit_code
    embed.one_heap()  # the model lives here: before serve() starts a thread, so a dropped one is given back
    try:
        return serve(directory)
    except OSError as e:  # stdin or stdout unusable: one line, as every error
        sys.stderr.write(f"error: {e.strerror or e}\n")
        return 1


def serve(directory: Path) -> int:
    """Run the server on stdin/stdout until EOF or SIGTERM."""
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("RETAINED_LOG_LEVEL", "WARNING"),
                        format="retained: %(levelname)s %(message)s")
    # Start-up (retained, then the SDK and pydantic) makes objects that live as long as the process:
    # the cyclic collector's passes over them would cost ~4% of it. Collected again once the SDK is up,
    # with everything made so far frozen out of later passes.
    gc.disable()
    wire_in, wire_out = stdio_guard.claim_stdio()
    store = _open_store(directory)
    project = project_scope(project_vars=registry.project_vars())
    session_id = registry.session_id(os.environ)
    instructions = _Instructions(store, project)
    _exit_on_sigterm(store)

    out = WireOut(wire_out)
    lent: list[Any] = []

    def _warm() -> None:  # after the handshake: the model warms up, and the prompt hook may borrow it
        out.tools_listed.wait()
        from . import warm  # imported only then: the opening replies do not wait for it

        if isinstance(store, Store):  # a store that could not be opened has no model to lend
            lent.append(warm.after_handshake(store))

    threading.Thread(target=_warm, name="retained-after-handshake", daemon=True).start()
    guarded = GuardedIn(wire_in, out, tools=TOOL_NAMES)
    early = _early_replies(out, project, instructions.text)
    guarded.read_ahead(early)  # the SDK gets every line; `early` may answer some while it imports
    if early is not None:  # the SDK's import holds the GIL for most of half a second: the opening goes first
        early.done.wait(EARLY_WINDOW_S)

    try:
        from .server import build_server  # the SDK registration, not needed for the early replies

        server = build_server(store, project, instructions.made(), session_id)  # imports the SDK
        guarded.validate = stdio_guard.sdk_validator()
    finally:
        gc.freeze()
        gc.enable()
    try:
        _run_sdk(server, guarded, out)
    finally:
        for lender in filter(None, lent):
            lender.stop()
        store.close()
    return 0


def _run_sdk(server: RetainedServer, guarded: GuardedIn, out: WireOut) -> None:
    """Serve the guarded streams with the SDK until stdin ends (or Ctrl-C)."""
    import anyio  # with the SDK: imported once the opening replies are out

    async def main() -> None:
        # Private: run_stdio_async takes no streams of ours (python-sdk#2343), so run its low-level server.
        await stdio_guard.serve_sdk(server._lowlevel_server, guarded, out)

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
