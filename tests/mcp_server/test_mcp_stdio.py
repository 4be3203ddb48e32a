"""stdio: `python -m kgot mcp serve --entity a` as a subprocess of a real MCP client. The tenant
is fixed by the command line: every tool and resource works on ``a``, and ``b`` answers as an
entity that does not exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgot.tests.mcp_server.mcp_support import B_ONLY_WORDS, run, seed, stdio_session, text_of
from kgot.tests.memory.test_memory_isolation import _snapshot


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = str(tmp_path / "kgot.db")
    seed(url, "a")
    seed(url, "b", own_company=True)
    return url


@pytest.mark.slow
def test_stdio_serves_the_entity_on_the_command_line(store_url: str) -> None:
    before = _snapshot(store_url, "b")

    async def go() -> dict[str, Any]:
        arguments = ["mcp", "serve", "--entity", "a", "--label", "desk", "--db", store_url]
        async with stdio_session(arguments) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            calls = {
                "save": await session.call_tool(
                    "save_facts",
                    {"nodes": [{"id": "oslo", "label": "Place", "properties": {"name": "Oslo"}}]},
                ),
                "search": await session.call_tool("search_memory", {"query": "oslo"}),
                "node": await session.call_tool("get_node", {"id": "apple_old"}),
                "traverse": await session.call_tool("traverse", {"start": "apple"}),
                "verify": await session.call_tool(
                    "verify_claim", {"subject": "Apple", "property": "ceo", "value": "Tim Cook"}
                ),
                "types": await session.call_tool("list_types", {}),
                "history": await session.call_tool("history", {"fact": "oslo"}),
                "across": await session.call_tool("search_memory", {"query": "x", "entity": "b"}),
                "unknown": await session.call_tool("search_memory", {"query": "x", "entity": "zz"}),
                "b_words": await session.call_tool("search_memory", {"query": B_ONLY_WORDS}),
            }
            stats = await session.read_resource("kgot://entities/a/stats")
            return {"tools": tools, "calls": calls, "stats": stats}

    found = run(go)
    calls = found["calls"]
    assert "query" not in found["tools"] and "search_memory" in found["tools"]
    assert calls["save"].structured_content["inserted"] == ["oslo"]
    assert calls["search"].structured_content["hits"][0]["id"] == "oslo"
    assert calls["node"].structured_content["id"] == "apple"
    assert calls["traverse"].structured_content["nodes"][0]["id"] == "apple"
    assert calls["verify"].structured_content["verdict"] == "corroborated"
    assert calls["types"].structured_content["entity"] == "a"
    history = calls["history"].structured_content["versions"]
    assert history[0]["provenance"]["run_id"] == "mcp:desk"  # provenance mcp:<label>
    assert calls["across"].is_error
    assert text_of(calls["across"]).replace("'b'", "'E'") == text_of(calls["unknown"]).replace(
        "'zz'", "'E'"
    )
    assert calls["b_words"].structured_content["hits"] == []
    assert json.loads(found["stats"].contents[0].text)["entity"] == "a"
    assert _snapshot(store_url, "b") == before
