"""retained's MCP server built in the test's own process, as `retained serve` builds it (the store of the
environment, the project of the folder, `server.build_server`), and called through the SDK's client:
`call` gives the reply as the JSON-RPC line of `tests/mcp_wire.py` carries it.

For tests whose promise is a tool's reply, not stdio: a server process costs an interpreter and the
SDK's import (about a second a test); the guard, the early replies and anything else about the wire
stay with `WireServer`.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp import Client

from retained.paths import store_dir
from retained.project import project_scope
from retained.server import build_server
from retained.store import Store


class InProcessServer:
    def __init__(self, cwd: str | os.PathLike[str] | None = None) -> None:
        self.store = Store(store_dir(None))
        self.server = build_server(self.store, project_scope(cwd))

    def call(self, msg_id: Any, tool: str, arguments: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        async def calling() -> Any:
            with anyio.fail_after(timeout):
                async with Client(self.server) as client:
                    return await client.call_tool(tool, arguments)

        result = anyio.run(calling)
        return {"jsonrpc": "2.0", "id": msg_id,
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}

    def close(self) -> None:
        self.store.close()
