"""A bare stdio server of the installed MCP SDK, with one tool that does nothing: the floor under any tool
call answered on the SDK's path, and under any process that serves through it (bench/arch_bench.py,
bench/rss_bench.py).

    python bench/bare_sdk_server.py [model]

`model`: the tool also embeds its `text` with retained's model (retained importable, its cache dir as
RETAINED_CACHE_DIR says), as a server holds it after a search by meaning, but with no store or index.
"""

import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("bare")
held: list = []


@app.tool()
def noop(text: str = "", query: str = "", scope: str = "") -> dict:
    if sys.argv[1:] == ["model"]:
        from retained.embed import LocalEmbedder, one_heap

        if not held:
            one_heap()  # as `retained serve` does before its first thread
            held.append(LocalEmbedder())
        held[0].embed([text])
    return {}


if __name__ == "__main__":
    app.run()
