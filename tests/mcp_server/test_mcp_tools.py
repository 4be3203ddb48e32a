"""Every memory tool and resource through a real MCP client over Streamable HTTP, on SQLite and
PostgreSQL (the server is ``kgot mcp serve --http`` in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgot.graph_model import Changeset, Node
from kgot.mcp_server.tokens import add_token
from kgot.persistence import Provenance, open_store
from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import http_server, http_session, run, text_of
from kgot.tests.memory.conftest import UPKEEP_TYPES

MEMORY_TOOLS = {
    "search_memory",
    "get_node",
    "traverse",
    "save_facts",
    "remember",
    "verify_claim",
    "list_types",
    "propose_type",
    "history",
    "forget",
    "ask",
    "query",  # the deployment runs with --allow-query
    "briefing",  # the advisor package is installed (the tools say which entities have one)
    "alerts",
}


def _call(deployment: Deployment, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with http_session(deployment.url, deployment.token_a) as session:
            return await session.call_tool(name, arguments)

    return run(go)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


@pytest.mark.slow
def test_tools_are_listed_with_input_and_output_schemas(deployment: Deployment) -> None:
    async def go() -> Any:
        async with http_session(deployment.url, deployment.token_a) as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(go)}
    assert set(tools) == MEMORY_TOOLS
    assert "entity" in tools["search_memory"].input_schema["properties"]
    assert "hits" in tools["search_memory"].output_schema["properties"]
    assert "violations" in tools["save_facts"].output_schema["properties"]


@pytest.mark.slow
def test_save_facts_inserts_corroborates_supersedes_and_lands_duplicates(
    deployment: Deployment,
) -> None:
    first = _ok(
        _call(
            deployment,
            "save_facts",
            {
                "nodes": [
                    {
                        "id": "globex",
                        "label": "Company",
                        "properties": {"name": "Globex Corporation", "ceo": "Hank Scorpio"},
                    },
                    {"id": "springfield", "label": "Place", "properties": {"name": "Springfield"}},
                ],
                "edges": [
                    {
                        "source": "globex",
                        "target": "springfield",
                        "relationship": "headquartered_in",
                    }
                ],
                "source_ref": "https://example.test/globex",
            },
        )
    )
    assert first["written"] and first["entity"] == "a"
    assert set(first["inserted"]) == {
        "globex",
        "springfield",
        "globex -[headquartered_in]-> springfield",
    }
    again = _ok(
        _call(
            deployment,
            "save_facts",
            {
                "nodes": [
                    {"id": "springfield", "label": "Place", "properties": {"name": "Springfield"}}
                ]
            },
        )
    )
    assert again["corroborated"] == ["springfield"] and again["inserted"] == []
    newer = _ok(
        _call(
            deployment,
            "save_facts",
            {"nodes": [{"id": "globex", "label": "Company", "properties": {"ceo": "Homer"}}]},
        )
    )
    assert newer["updated"] == ["globex"] and newer["superseded"] == ["globex"]
    duplicate = _ok(
        _call(
            deployment,
            "save_facts",
            {"nodes": [{"id": "globex_2", "label": "Company", "properties": {"name": "GLOBEX"}}]},
        )
    )
    assert duplicate["merged"] == [{"id": "globex_2", "into": "globex"}]
    history = _ok(_call(deployment, "history", {"fact": "globex"}))
    reasons = [v["closed_reason"] for v in history["versions"]]
    assert "contradicted" in reasons
    assert history["versions"][0]["provenance"]["run_id"] == "mcp:client-a"
    assert history["versions"][0]["provenance"]["source_ref"] == "https://example.test/globex"


@pytest.mark.slow
def test_save_facts_with_a_type_violation_writes_nothing(deployment: Deployment) -> None:
    with open_store(deployment.store_url) as store:
        before = store.session("a").commits(limit=1)
    result = _call(
        deployment,
        "save_facts",
        {
            "nodes": [
                {"id": "fine", "label": "Place", "properties": {"name": "Fine"}},
                {"id": "broken", "label": "Company", "properties": {"name": 42}},
            ]
        },
    )
    assert result.is_error
    data = dict(result.structured_content)
    assert data["written"] is False
    assert any("broken" in v and "$.name" in v for v in data["violations"])
    assert "nothing was written" in text_of(result)
    with open_store(deployment.store_url) as store:
        session = store.session("a")
        assert session.commits(limit=1) == before
        assert session.node_history("fine") == []


@pytest.mark.slow
def test_search_get_node_traverse_verify_types(deployment: Deployment) -> None:
    hits = _ok(_call(deployment, "search_memory", {"query": "apple", "limit": 3}))["hits"]
    assert hits[0]["id"] == "apple" and hits[0]["kind"] == "node"
    typed = _ok(_call(deployment, "search_memory", {"query": "apple", "type": "Place"}))
    assert typed["hits"] == []
    past = _ok(_call(deployment, "search_memory", {"query": "apple", "as_of": "2030-01-01"}))
    assert past["hits"][0]["id"] == "apple"
    before = _ok(_call(deployment, "search_memory", {"query": "apple", "as_of": "2000-01-01"}))
    assert before["hits"][0]["id"] == "apple"  # as_of scores freshness; it is no time travel
    bad_time = _call(deployment, "search_memory", {"query": "apple", "as_of": "someday"})
    assert bad_time.is_error and "as_of" in text_of(bad_time)

    node = _ok(_call(deployment, "get_node", {"id": "apple_old"}))  # merged away: an alias
    assert node["id"] == "apple" and node["requested_id"] == "apple_old"
    assert node["properties"]["symbol"] == "AAPL"
    assert node["provenance"]["step"] == "seed"
    assert [e["target"] for e in node["edges_out"]] == ["cupertino"]
    missing = _call(deployment, "get_node", {"id": "no_such_node"})
    assert missing.is_error and "no node 'no_such_node' in entity 'a'" in text_of(missing)

    near = _ok(_call(deployment, "traverse", {"start": "cupertino", "depth": 2}))
    assert {n["id"] for n in near["nodes"]} >= {"cupertino", "apple"}
    bounded = _ok(_call(deployment, "traverse", {"start": "cupertino", "max_nodes": 1}))
    assert [n["id"] for n in bounded["nodes"]] == ["cupertino"] and bounded["truncated"]
    too_deep = _call(deployment, "traverse", {"start": "cupertino", "depth": 9})
    assert too_deep.is_error

    verdict = _ok(
        _call(
            deployment, "verify_claim", {"subject": "Apple", "property": "ceo", "value": "Tim Cook"}
        )
    )
    assert verdict["verdict"] == "corroborated" and verdict["subject_id"] == "apple"
    wrong = _ok(
        _call(
            deployment,
            "verify_claim",
            {"subject": "Apple", "property": "ceo", "value": "Steve Jobs"},
        )
    )
    assert wrong["verdict"] == "contradicted"

    types = _ok(_call(deployment, "list_types", {}))
    assert "Company" in {t["name"] for t in types["node_types"]}


def test_propose_type_follows_the_agent_rules(deployment: Deployment) -> None:
    created = _ok(
        _call(
            deployment,
            "propose_type",
            {
                "kind": "node",
                "name": "Gadget",
                "description": "A small device.",
                "justification": "no type fits devices",
                "properties": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}},
                },
                "example": {"name": "Widget 3000"},
            },
        )
    )
    assert created["created"]["created_by"] == "agent" and created["created"]["scope"] == "a"
    rejected = _call(
        deployment,
        "propose_type",
        {
            "kind": "node",
            "name": "bad name",
            "description": "x",
            "justification": "y",
        },
    )
    assert rejected.is_error and "bad name" in text_of(rejected)
    with open_store(deployment.store_url) as store:
        assert store.session("b").type_catalog().get("node", "Gadget") is None


@pytest.mark.slow
def test_resources_stats_types_and_nodes(deployment: Deployment) -> None:
    async def go() -> list[Any]:
        async with http_session(deployment.url, deployment.token_a) as session:
            templates = (await session.list_resource_templates()).resource_templates
            read = [
                await session.read_resource(uri)
                for uri in (
                    "kgot://entities/a/stats",
                    "kgot://entities/a/types",
                    "kgot://entities/a/nodes/apple_old",
                )
            ]
            return [templates, *read]

    templates, stats, types, node = run(go)
    assert {t.uri_template for t in templates} == {
        "kgot://entities/{name}/stats",
        "kgot://entities/{name}/types",
        "kgot://entities/{name}/nodes/{node_id}",
    }
    counted = json.loads(stats.contents[0].text)
    assert counted["entity"] == "a" and counted["nodes_by_label"]["Company"] >= 1
    assert "Company" in {t["name"] for t in json.loads(types.contents[0].text)["node_types"]}
    assert json.loads(node.contents[0].text)["id"] == "apple"


@pytest.mark.slow
def test_query_tool_runs_in_the_sandbox_on_the_entity_only(deployment: Deployment) -> None:
    found = _call(deployment, "query", {"code": "result = sorted(G.nodes)"})
    value = _ok(found)["value"]
    assert "apple" in value and "quokka" not in value  # quokka lives in entity b only
    reader = run(_as_reader(deployment, "query", {"code": "result = 1"}))
    assert reader.is_error and "'admin' scope" in text_of(reader)


def _as_reader(deployment: Deployment, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with http_session(deployment.url, deployment.token_a_read) as session:
            return await session.call_tool(name, arguments)

    return go


@pytest.mark.slow
def test_the_query_tool_reads_a_working_set_of_a_large_entity(
    deployment: Deployment, tmp_path: Path
) -> None:
    """On an entity over controller.working_set_nodes the query gets the nodes it names and
    what find()/neighbours() ask for, never the entity; answers are the whole entity's."""
    places = [Node(f"place_{i}", "Place", {"name": f"Place {i}"}) for i in range(40)]
    with open_store(deployment.store_url) as store:
        store.create_entity("big", types=UPKEEP_TYPES)
        store.session("big").commit(
            Changeset(added_nodes=tuple(places)), Provenance(run_id="seed", step="seed")
        )
    token, _ = add_token(deployment.tokens, "client-big", ["big"], ["read", "admin"])
    config = tmp_path / "small.toml"
    config.write_text("[controller]\nworking_set_nodes = 10\n", encoding="utf-8")
    codes = ['result = [len(G), G.nodes["place_3"]["name"]]', 'result = len(find("Place"))']
    with http_server(deployment.store_url, deployment.tokens, "--allow-query", config=config) as (
        server
    ):

        async def go() -> list[Any]:
            async with http_session(server.url, token) as session:
                return [await session.call_tool("query", {"code": code}) for code in codes]

        (held, name), found = [_ok(result)["value"] for result in run(go)]
    assert name == "Place 3"
    assert held < 40  # the nodes written last and the one the code names, not the entity
    assert found == 40
