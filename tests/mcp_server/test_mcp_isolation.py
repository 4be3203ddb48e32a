"""The tenant-isolation matrix: a client granted entity ``a`` tries every tool (the advisor's
too) and resource on entity ``b`` (which exists) and on an entity that does not exist. Both get
the same answer, word for word but the name; nothing of ``b`` is returned; every row of ``b`` in
every table scoped by entity is byte-for-byte unchanged afterwards. Calls without an entity
never reach ``b`` either, and no listing or completion names it. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import B_ONLY_WORDS, http_session, run, text_of
from kgot.tests.memory.test_memory_isolation import _snapshot

UNKNOWN = "zz_no_such_entity"

# Every tool, with arguments that would read or write b's facts if the call reached b.
ATTEMPTS: dict[str, dict[str, Any]] = {
    "search_memory": {"query": B_ONLY_WORDS},
    "get_node": {"id": "quokka"},
    "traverse": {"start": "quokka", "depth": 3},
    "save_facts": {
        "nodes": [{"id": "intruder", "label": "Place", "properties": {"name": "Intruder"}}],
        "edges": [{"source": "intruder", "target": "quokka", "relationship": "related_to"}],
    },
    "remember": {"text": "Intruder Holdings bought Zanzibar Quokka Holdings."},
    "verify_claim": {"subject": "quokka", "property": "name", "value": "x"},
    "list_types": {},
    "propose_type": {
        "kind": "node",
        "name": "Intruder",
        "description": "x",
        "justification": "y",
    },
    "history": {"fact": "quokka"},
    "ask": {"question": "Who owns Zanzibar Quokka Holdings?"},
    "query": {"code": "result = sorted(G.nodes)"},
    "briefing": {"user": "alice"},
    "alerts": {"user": "alice"},
}
RESOURCES = (
    "kgot://entities/{}/stats",
    "kgot://entities/{}/types",
    "kgot://entities/{}/nodes/quokka",
)


def _answers(deployment: Deployment, entity: str) -> dict[str, tuple[bool, str]]:
    """Each tool's and resource's (is_error, text) for ``entity``, the name blanked out."""

    async def go() -> dict[str, tuple[bool, str]]:
        found: dict[str, tuple[bool, str]] = {}
        async with http_session(deployment.url, deployment.token_a) as session:
            for name, arguments in ATTEMPTS.items():
                result = await session.call_tool(name, {**arguments, "entity": entity})
                found[name] = (bool(result.is_error), text_of(result))
            for template in RESOURCES:
                try:
                    read = await session.read_resource(template.format(entity))
                    found[template] = (False, read.contents[0].text)
                except Exception as error:  # the SDK raises the server's error response
                    code = getattr(error, "code", None)  # the JSON-RPC error code too
                    found[template] = (True, f"{code}: {error}")
        return {
            key: (bad, text.replace(f"'{entity}'", "'E'")) for key, (bad, text) in found.items()
        }

    return run(go)


@pytest.mark.slow
def test_another_entity_answers_exactly_as_an_unknown_one_and_is_untouched(
    deployment: Deployment,
) -> None:
    before = _snapshot(deployment.store_url, "b")
    across = _answers(deployment, "b")
    unknown = _answers(deployment, UNKNOWN)
    assert _snapshot(deployment.store_url, "b") == before  # zero writes
    assert across == unknown  # the same answer as for an entity that does not exist
    for key, (is_error, text) in across.items():
        assert is_error, f"{key} reached entity b: {text}"
        assert "quokka" not in text.lower() or key in ("get_node", "traverse", "history")
        assert B_ONLY_WORDS.lower() not in text.lower()
    assert "no entity named 'E' for this client; use one of: a" in across["get_node"][1]


@pytest.mark.slow
def test_calls_without_an_entity_stay_in_the_granted_one(deployment: Deployment) -> None:
    before = _snapshot(deployment.store_url, "b")

    async def go() -> dict[str, Any]:
        async with http_session(deployment.url, deployment.token_a) as session:
            return {
                "search": await session.call_tool("search_memory", {"query": B_ONLY_WORDS}),
                "node": await session.call_tool("get_node", {"id": "quokka"}),
                "history": await session.call_tool("history", {"fact": "quokka"}),
                "verify": await session.call_tool(
                    "verify_claim",
                    {"subject": f"{B_ONLY_WORDS} Holdings", "property": "name", "value": "x"},
                ),
                "query": await session.call_tool(
                    "query", {"code": "result = [n for n in G.nodes if n == 'quokka']"}
                ),
            }

    found = run(go)
    assert found["search"].structured_content["hits"] == []  # zero results
    assert found["node"].is_error and "entity 'a'" in text_of(found["node"])
    assert found["history"].is_error
    assert found["verify"].structured_content["verdict"] == "inconclusive"
    assert found["verify"].structured_content["candidates"] == []
    assert found["query"].structured_content["value"] == []
    assert _snapshot(deployment.store_url, "b") == before


@pytest.mark.slow
def test_the_owner_of_b_sees_b(deployment: Deployment) -> None:
    """The control: the same calls with b's own token find b's facts."""

    async def go() -> Any:
        async with http_session(deployment.url, deployment.token_b) as session:
            return await session.call_tool("search_memory", {"query": B_ONLY_WORDS})

    hits = run(go).structured_content["hits"]
    assert hits and hits[0]["id"] == "quokka"


@pytest.mark.slow
def test_resources_across_the_boundary_name_no_entity(deployment: Deployment) -> None:
    found = _answers(deployment, "b")
    for template in RESOURCES:
        is_error, text = found[template]
        assert is_error and "no entity named 'E' for this client" in text, text


@pytest.mark.slow
def test_no_secondary_path_names_another_entity(deployment: Deployment) -> None:
    """Listings, templates, prompts and completion: nothing a client of ``a`` can list or
    complete names entity ``b`` or its facts."""
    from mcp import types

    async def go() -> list[str]:
        seen: list[str] = []
        async with http_session(deployment.url, deployment.token_a) as session:
            seen.append((await session.list_resources()).model_dump_json())
            seen.append((await session.list_resource_templates()).model_dump_json())
            seen.append((await session.list_prompts()).model_dump_json())
            seen.append((await session.list_tools()).model_dump_json())
            for argument in ({"name": "name", "value": ""}, {"name": "node_id", "value": "q"}):
                reference = types.ResourceTemplateReference(
                    type="ref/resource", uri="kgot://entities/{name}/nodes/{node_id}"
                )
                try:
                    done = await session.complete(reference, argument, {"name": "b"})
                    seen.append(done.model_dump_json())
                except Exception as error:  # no completion handler: the SDK's error
                    seen.append(str(error))
        return seen

    for text in run(go):
        assert '"b"' not in text and "quokka" not in text.lower(), text
        assert B_ONLY_WORDS.lower() not in text.lower(), text


@pytest.mark.slow
def test_a_token_for_two_entities_must_name_one(deployment: Deployment) -> None:
    from kgot.mcp_server.tokens import add_token

    token, _ = add_token(deployment.tokens, "client-ab", ["a", "b"], ["read"])

    async def go() -> dict[str, Any]:
        async with http_session(deployment.url, token) as session:
            return {
                "unnamed": await session.call_tool("search_memory", {"query": B_ONLY_WORDS}),
                "b": await session.call_tool(
                    "search_memory", {"query": B_ONLY_WORDS, "entity": "b"}
                ),
                "a": await session.call_tool(
                    "search_memory", {"query": B_ONLY_WORDS, "entity": "a"}
                ),
            }

    found = run(go)
    assert found["unnamed"].is_error
    assert "several entities (a, b); name one" in text_of(found["unnamed"])
    assert found["b"].structured_content["hits"][0]["id"] == "quokka"
    assert found["a"].structured_content["hits"] == []
