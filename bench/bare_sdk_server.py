"""A bare stdio server of the installed MCP SDK, with one tool that does nothing: the floor under any tool
call answered on the SDK's path, and under any process that serves through it (bench/arch_bench.py,
bench/rss_bench.py).

    python bench/bare_sdk_server.py [model]

It is the SDK's low-level `Server`, the least of its paths (its MCPServer, which retained registers its
tools with, adds argument and result models: 0.1-0.15 ms a call more here). `model`: the tool also embeds
its `text` with retained's model (retained importable, its cache dir as RETAINED_CACHE_DIR says), as a
server holds it after a search by meaning, but with no store or index.
"""

import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

NOOP = types.Tool(name="noop", input_schema={"type": "object", "properties": {
    "text": {"type": "string"}, "query": {"type": "string"}, "scope": {"type": "string"}}})
held: list = []


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[NOOP])


async def call_tool(ctx, params):
    if sys.argv[1:] == ["model"]:
        from retained.embed import LocalEmbedder

        if not held:
            held.append(LocalEmbedder())
        held[0].embed([str((params.arguments or {}).get("text", ""))])
    return types.CallToolResult(content=[types.TextContent(type="text", text="{}")], structured_content={})


async def main() -> None:
    server = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1:] == ["model"]:
        from retained.embed import one_heap

        one_heap()  # as `retained serve` does before its first thread
    anyio.run(main)
