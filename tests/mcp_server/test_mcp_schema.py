"""What a client reads before and after it calls: tool descriptions without source indentation,
every parameter described, unknown arguments refused, titles and hints right, tools listed by
the token's scopes; arguments capped in the schema so nothing huge is echoed back; errors in
the tools' words, not the command line's or pydantic's. Over Streamable HTTP and stdio, on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import http_session, run, stdio_session, text_of

WRITE_TOOLS = {"save_facts", "remember", "propose_type"}
READ_TOOLS = {"search_memory", "get_node", "traverse", "verify_claim", "list_types", "history"}
HUGE = "<huge>"  # stands for a 5 MB text over stdio; 3 MB over HTTP, whose transport
# answers bodies above 4 MB with HTTP 413 before any tool sees them


def _over(
    deployment: Deployment, transport: str, work: Callable[[Any], Awaitable[Any]], token: str = ""
) -> Any:
    """``work(session)`` over Streamable HTTP (with ``token``, default a's full one) or over
    stdio (a server fixed on entity ``a``)."""

    async def go() -> Any:
        if transport == "http":
            async with http_session(deployment.url, token or deployment.token_a) as session:
                return await work(session)
        command = ["mcp", "serve", "--entity", "a", "--db", deployment.store_url]
        async with stdio_session(command) as session:
            return await work(session)

    return run(go)


TRANSPORTS = pytest.mark.parametrize("transport", ["http", "stdio"])


@pytest.mark.slow
@TRANSPORTS
def test_schemas_describe_everything_and_refuse_unknown_arguments(
    deployment: Deployment, transport: str
) -> None:
    async def listed(session: Any) -> Any:
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in _over(deployment, transport, listed)}
    assert READ_TOOLS | WRITE_TOOLS | {"ask"} <= set(tools)
    for tool in tools.values():
        assert tool.title and tool.title[0].isupper(), tool.name
        assert tool.description and "\n " not in tool.description, tool.description
        assert "  " not in tool.description, tool.description
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, tool.name
        for name, field in schema["properties"].items():
            assert field.get("description"), f"{tool.name}.{name} has no description"
            text_types = [field, *field.get("anyOf", [])]
            for part in text_types:
                if part.get("type") == "string" and "enum" not in part:
                    assert part.get("maxLength"), f"{tool.name}.{name} has no length cap"
        hints = tool.annotations
        assert hints is not None, tool.name
        if tool.name in READ_TOOLS:
            assert hints.read_only_hint is True, tool.name
        if tool.name in WRITE_TOOLS | {"ask"}:
            assert hints.read_only_hint is False and hints.destructive_hint is False, tool.name
    assert tools["ask"].annotations.open_world_hint is True
    assert tools["save_facts"].annotations.open_world_hint is False


@pytest.mark.slow
@TRANSPORTS
def test_unknown_arguments_get_a_readable_error(deployment: Deployment, transport: str) -> None:
    async def call(session: Any) -> Any:
        return await session.call_tool("get_node", {"id": "apple", "node_id": "apple"})

    result = _over(deployment, transport, call)
    assert result.is_error
    text = text_of(result)
    assert "node_id: not an argument this tool takes; it takes id, entity" in text
    assert "pydantic" not in text and "https://" not in text and "\n" not in text


@pytest.mark.slow
def test_a_read_only_token_lists_no_write_tools(deployment: Deployment) -> None:
    async def listed(session: Any) -> Any:
        return {tool.name for tool in (await session.list_tools()).tools}

    reader = _over(deployment, "http", listed, token=deployment.token_a_read)
    assert reader >= READ_TOOLS
    assert not reader & (WRITE_TOOLS | {"ask", "query"})
    full = _over(deployment, "http", listed)
    assert WRITE_TOOLS | {"ask", "query"} <= full

    async def write(session: Any) -> Any:  # hidden and still refused
        return await session.call_tool("save_facts", {"nodes": []})

    refused = _over(deployment, "http", write, token=deployment.token_a_read)
    assert refused.is_error and "needs the 'write' scope" in text_of(refused)


@pytest.mark.slow
@TRANSPORTS
@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("get_node", {"id": HUGE}, "id"),
        ("history", {"fact": HUGE}, "fact"),
        ("traverse", {"start": HUGE}, "start"),
        ("verify_claim", {"subject": HUGE, "property": "ceo", "value": "x"}, "subject"),
        ("search_memory", {"query": HUGE}, "query"),
        ("save_facts", {"nodes": [{"id": HUGE, "label": "Company"}]}, "nodes[0].id"),
    ],
)
def test_a_5_mb_argument_is_refused_without_being_echoed(
    deployment: Deployment, transport: str, tool: str, arguments: dict[str, Any], field: str
) -> None:
    size = 5_000_000 if transport == "stdio" else 3_000_000
    huge = json.loads(json.dumps(arguments).replace(HUGE, "x" * size))

    async def call(session: Any) -> Any:
        return await session.call_tool(tool, huge)

    result = _over(deployment, transport, call)
    assert result.is_error
    text = text_of(result)
    assert len(text) < 500, text[:500]
    assert f"{field}: too long: at most" in text


@pytest.mark.slow
@TRANSPORTS
def test_errors_speak_of_the_tools_not_the_command_line(
    deployment: Deployment, transport: str
) -> None:
    async def calls(session: Any) -> list[Any]:
        return [
            await session.call_tool("verify_claim", {"subject": "apple", "property": "ceo"}),
            await session.call_tool(
                "save_facts", {"nodes": [{"id": "gizmo", "label": "Gizmo", "name": "Gizmo"}]}
            ),
            await session.call_tool("traverse", {"start": "apple", "depth": 9}),
        ]

    claim, untyped, deep = _over(deployment, transport, calls)
    assert claim.is_error and "property ceo needs value" in text_of(claim)
    assert "--" not in text_of(claim)
    assert untyped.is_error and "propose_type" in text_of(untyped)
    assert "create_node_type" not in text_of(untyped)
    assert deep.is_error and "depth: Input should be less than or equal to 3" in text_of(deep)
    assert "pydantic" not in text_of(deep)


@pytest.mark.slow
@TRANSPORTS
def test_save_facts_takes_flat_node_link_objects(deployment: Deployment, transport: str) -> None:
    node_id = f"flat_{transport}"

    async def calls(session: Any) -> list[Any]:
        saved = await session.call_tool(
            "save_facts",
            {
                "nodes": [
                    {
                        "id": node_id,
                        "label": "Company",
                        "name": f"Flat {transport}",
                        "symbol": transport.upper(),
                    },
                ],
                "edges": [
                    {"source": node_id, "target": "cupertino", "relationship": "headquartered_in"}
                ],
            },
        )
        return [saved, await session.call_tool("get_node", {"id": node_id})]

    saved, node = _over(deployment, transport, calls)
    assert not saved.is_error, text_of(saved)
    assert node_id in saved.structured_content["inserted"]
    assert node.structured_content["properties"] == {
        "name": f"Flat {transport}",
        "symbol": transport.upper(),
    }
    assert [edge["target"] for edge in node.structured_content["edges_out"]] == ["cupertino"]

    async def clash(session: Any) -> Any:
        return await session.call_tool(
            "save_facts",
            {
                "nodes": [
                    {"id": node_id, "label": "Company", "name": "A", "properties": {"name": "B"}}
                ]
            },
        )

    refused = _over(deployment, transport, clash)
    assert refused.is_error
    assert "name given both beside id and in properties" in text_of(refused)
