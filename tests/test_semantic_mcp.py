"""The semantic tier over MCP: memory_search says how each hit was found and whether meaning was used;
memory_search and memory_list answer as_of."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("mcp")
from mcp import Client

from retained.records import now_rfc3339
from retained.server import build_server

PROJECT = "/src/shop"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_memory_search_reports_match_and_semantic_and_both_tools_take_as_of(store):
    secrets = store.write("Secrets live in 1Password, vault shop-prod.", scope=PROJECT)
    old = store.write("The API listens on port 8080.", scope=PROJECT)
    time.sleep(0.01)
    between = now_rfc3339()
    time.sleep(0.01)
    new = store.write("The API listens on port 9090.", scope=PROJECT, supersedes=old["id"])
    server = build_server(store, PROJECT)
    async with Client(server) as c:
        res = (await c.call_tool("memory_search", {"query": "which tool holds our passwords?"})).structured_content
        assert res["semantic"] == "on" and res["hits"][0]["id"] == secrets["id"]
        assert res["hits"][0]["match"] == "meaning" and isinstance(res["total_exact"], bool)
        then = (await c.call_tool("memory_search", {"query": "API port", "as_of": between})).structured_content
        assert [h["id"] for h in then["hits"]] == [old["id"]]
        now = (await c.call_tool("memory_search", {"query": "API port"})).structured_content
        assert [h["id"] for h in now["hits"]][0] == new["id"]
        listed = (await c.call_tool("memory_list", {"as_of": between})).structured_content
        assert old["id"] in [r["id"] for r in listed["records"]] and new["id"] not in [r["id"] for r in listed["records"]]
        bad = await c.call_tool("memory_list", {"as_of": "last tuesday"})
        assert bad.is_error and "as_of" in bad.content[0].text
