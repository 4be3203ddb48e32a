"""Issue 27: search_memory shows the facts it found (item 3) and the ``forget`` tool retires a
fact with history kept (item 14), through a real MCP client over Streamable HTTP against
``kgot mcp serve --http`` in a subprocess, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from kgot.persistence import open_store
from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import http_session, run, text_of


def _calls(deployment: Deployment, calls: list[tuple[str, dict[str, Any]]], token: str) -> Any:
    async def go() -> list[Any]:
        async with http_session(deployment.url, token) as session:
            return [await session.call_tool(name, arguments) for name, arguments in calls]

    return run(go)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def _entity_b(deployment: Deployment) -> dict[str, Any]:
    with open_store(deployment.store_url) as store:
        session = store.session("b")
        graph = session.load_graph(include_meta=True)
        return {
            "version": session.version,
            "nodes": dict(graph.nodes(data=True)),
            "edges": sorted(graph.edges(keys=True)),
        }


@pytest.mark.slow
def test_forget_is_a_scoped_write_tool_a_client_should_confirm(deployment: Deployment) -> None:
    async def listed(token: str) -> dict[str, Any]:
        async with http_session(deployment.url, token) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = run(lambda: listed(deployment.token_a))
    hints = tools["forget"].annotations
    assert hints.read_only_hint is False and hints.destructive_hint is True
    assert hints.open_world_hint is False
    assert set(tools["forget"].input_schema["properties"]) == {"fact", "entity", "property"}
    assert "forget" not in run(lambda: listed(deployment.token_a_read))
    [refused] = _calls(deployment, [("forget", {"fact": "apple"})], deployment.token_a_read)
    assert refused.is_error and "needs the 'write' scope" in text_of(refused)


@pytest.mark.slow
def test_search_then_forget_a_property_an_edge_and_a_node(deployment: Deployment) -> None:
    before_b = _entity_b(deployment)
    search, forget_ceo, node, history, search_again = (
        _ok(result)
        for result in _calls(
            deployment,
            [
                ("search_memory", {"query": "apple ceo"}),
                ("forget", {"fact": "apple", "property": "ceo"}),
                ("get_node", {"id": "apple"}),
                ("history", {"fact": "apple"}),
                ("search_memory", {"query": "apple ceo"}),
            ],
            deployment.token_a,
        )
    )
    # What the search found, not only its id: Apple's CEO.
    apple = next(hit for hit in search["hits"] if hit["id"] == "apple")
    assert apple["properties"]["ceo"] == "Tim Cook"
    assert apple["matched_properties"] == ["ceo", "aliases"]  # "Apple Computer"
    assert apple["key_properties"] == ["symbol", "ceo"]
    assert forget_ceo == {
        "entity": "a",
        "kind": "property",
        "fact": "apple.ceo",
        "version": forget_ceo["version"],
        "closed": ["apple"],
        "closed_reason": "forgotten",
        "value": "Tim Cook",
    }
    assert "ceo" not in node["properties"] and node["properties"]["symbol"] == "AAPL"
    assert node["provenance"]["run_id"] == "mcp:client-a"
    closed = [v for v in history["versions"] if v["closed_reason"] == "forgotten"]
    assert [v["properties"].get("ceo") for v in closed] == ["Tim Cook"]
    again = next(hit for hit in search_again["hits"] if hit["id"] == "apple")
    assert "ceo" not in again["properties"]

    edge = "apple -[headquartered_in]-> cupertino"
    results = _calls(
        deployment,
        [
            ("forget", {"fact": edge}),
            ("history", {"fact": edge}),
            ("search_memory", {"query": "apple headquarters cupertino"}),
            ("forget", {"fact": "cupertino"}),
            ("get_node", {"id": "cupertino"}),
        ],
        deployment.token_a,
    )
    forgot_edge, edge_history, search_edge, forgot_node = (_ok(r) for r in results[:4])
    assert (forgot_edge["kind"], forgot_edge["closed"]) == ("edge", [edge])
    assert edge_history["current_id"] is None
    assert edge_history["versions"][-1]["closed_reason"] == "forgotten"
    assert edge not in [hit["id"] for hit in search_edge["hits"]]
    assert (forgot_node["kind"], forgot_node["closed"]) == ("node", ["cupertino"])
    assert results[4].is_error and "no node 'cupertino'" in text_of(results[4])
    # Entity b holds the same ids: none of it moved.
    assert _entity_b(deployment) == before_b


@pytest.mark.slow
def test_unknown_and_foreign_facts_answer_as_not_found(deployment: Deployment) -> None:
    before_b = _entity_b(deployment)
    results = _calls(
        deployment,
        [
            ("forget", {"fact": "ghost"}),
            ("forget", {"fact": "quokka"}),  # only entity b has it
            ("forget", {"fact": "quokka", "entity": "b"}),
            ("forget", {"fact": "apple -[owns]-> cupertino"}),
            ("forget", {"fact": "apple", "property": "sector"}),
            ("forget", {"fact": "quokka", "entity": "nowhere"}),
        ],
        deployment.token_a,
    )
    assert all(result.is_error for result in results)
    texts = [text_of(result) for result in results]
    assert "entity 'a' has no current node 'ghost'" in texts[0]
    assert "entity 'a' has no current node 'quokka'" in texts[1]
    # Another tenant's entity reads as one that does not exist, as everywhere else.
    assert "no entity named 'b' for this client" in texts[2]
    assert texts[2].replace("'b'", "'nowhere'") == texts[5]
    assert "has no current edge 'apple -[owns]-> cupertino'" in texts[3]
    assert "has no property 'sector'" in texts[4]
    assert _entity_b(deployment) == before_b
    # b's own client reaches its own fact.
    [own] = _calls(deployment, [("forget", {"fact": "quokka"})], deployment.token_b)
    assert _ok(own)["closed"] == ["quokka"]
