"""The agent's type tools, called the way a model calls them (through a scripted model too)."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, Store
from kgot.tools.base import ToolFailure
from kgot.tools.type_tools import build_type_tools

TRIAL = {
    "name": "ClinicalTrial",
    "description": "A registered study of a medical intervention.",
    "properties": {
        "type": "object",
        "required": ["registry_id"],
        "properties": {
            "registry_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
            "started": {"type": "string", "format": "date"},
        },
    },
    "example": {"registry_id": "NCT01234567", "started": "2021-03-01"},
    "justification": "Trials have registry ids no existing type records.",
}


def tools_by_name(store: Store, entity: str = "alice") -> dict:
    store.create_entity(entity)
    return {t.name: t for t in build_type_tools(store.session(entity), run_id="run-9")}


def call(tool, args: dict) -> str:
    return asyncio.run(tool.ainvoke(args))


@pytest.mark.slow
def test_the_agent_creates_a_node_type_it_can_use_at_once(store: Store) -> None:
    tools = tools_by_name(store)
    text = call(tools["create_node_type"], TRIAL)
    assert text.startswith("Created node type ClinicalTrial (version 1) for alice.")
    assert "registry_id (string, pattern ^NCT[0-9]{8}$)" in text
    session = store.session("alice")
    created = session.type_catalog().node_types["ClinicalTrial"]
    assert (created.created_by, created.scope, created.run_id) == ("agent", "alice", "run-9")
    assert created.justification == TRIAL["justification"]
    good = Node("t1", "ClinicalTrial", {"registry_id": "NCT00000001"})
    bad = Node("t2", "ClinicalTrial", {"registry_id": "trial-2"})
    assert session.check(Changeset(added_nodes=(good,))) == []
    assert any(
        "at $.registry_id: 'trial-2' does not match" in p
        for p in session.check(Changeset(added_nodes=(bad,)))
    )
    session.commit(Changeset(added_nodes=(good,)), Provenance(run_id="run-9", step="update_graph"))
    assert "ClinicalTrial" not in store.type_catalog().node_types  # not global


def test_the_agent_creates_an_edge_type_between_known_types(store: Store) -> None:
    tools = tools_by_name(store)
    call(tools["create_node_type"], TRIAL)
    text = call(
        tools["create_edge_type"],
        {
            "name": "sponsors",
            "description": "An organization funds a trial.",
            "source_types": ["Organization"],
            "target_types": ["ClinicalTrial"],
            "justification": "Sponsorship is central to the question.",
        },
    )
    assert "It connects Organization -> ClinicalTrial." in text
    edge = store.session("alice").type_catalog().edge_types["sponsors"]
    assert edge.spec.target_types == ("ClinicalTrial",)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("create_node_type", {**TRIAL, "name": "clinical_trial"}, "must be PascalCase"),
        ("create_node_type", {**TRIAL, "name": "Person"}, "the name is not new"),
        ("create_node_type", {**TRIAL, "justification": " "}, "a justification is required"),
        (
            "create_node_type",
            {**TRIAL, "properties": {"type": "object", "required": "x"}},
            "properties schema at $.required: 'x' is not of type 'array'",
        ),
        (
            "create_edge_type",
            {"name": "Sponsors", "description": "d", "justification": "j"},
            "must be snake_case",
        ),
        (
            "create_edge_type",
            {
                "name": "sponsors",
                "description": "d",
                "justification": "j",
                "target_types": ["Trial"],
            },
            "target node type 'Trial' does not",
        ),
    ],
)
def test_rejected_proposals_tell_the_model_what_to_fix(store: Store, tool, args, expected) -> None:
    tools = tools_by_name(store)
    with pytest.raises(ToolFailure) as raised:
        call(tools[tool], args)
    assert expected in str(raised.value)
    assert raised.value.kind == "input"
    assert "call the tool again" in str(raised.value)
    catalog = store.session("alice").type_catalog()
    assert "ClinicalTrial" not in catalog.node_types and "sponsors" not in catalog.edge_types


@pytest.mark.slow
def test_a_scripted_model_can_call_the_tools(store: Store) -> None:
    tools = tools_by_name(store)
    model = ScriptedChatModel(
        script={"*": [{"$tool_calls": [{"name": "create_node_type", "args": TRIAL}]}]}
    )
    reply = model.bind_tools(list(tools.values())).invoke([HumanMessage("record the trial")])
    (request,) = reply.tool_calls
    result = asyncio.run(tools[request["name"]].ainvoke(request))  # a ToolMessage, as in a run
    assert "Created node type ClinicalTrial" in result.content
    advertised = {t["function"]["name"] for t in model.calls[0].tools}
    assert advertised == {"create_node_type", "create_edge_type"}
    schema = next(t for t in model.calls[0].tools if t["function"]["name"] == "create_edge_type")[
        "function"
    ]["parameters"]
    assert {"name", "description", "justification"} <= set(schema["required"])


def test_the_agent_gives_its_types_upkeep_settings(store: Store) -> None:
    tools = tools_by_name(store)
    asset = {
        "name": "Asset",
        "description": "A traded financial instrument.",
        "properties": {
            "type": "object",
            "required": ["symbol"],
            "properties": {"symbol": {"type": "string"}, "price": {"type": "number"}},
        },
        "identity": ["symbol"],
        "functional": ["price"],
        "half_life_days": 21,
        "rank_weight": 0.8,
        "justification": "Assets are identified by their symbol.",
    }
    text = call(tools["create_node_type"], asset)
    assert "Identified by: symbol. Single-valued: price. Half-life: 21 days." in text
    upkeep = store.session("alice").type_catalog().node_types["Asset"].upkeep
    assert (upkeep.identity, upkeep.functional, upkeep.half_life_days, upkeep.rank_weight) == (
        ("symbol",),
        ("price",),
        21.0,
        0.8,
    )
    text = call(
        tools["create_edge_type"],
        {
            "name": "headed_by",
            "description": "The organization's current chief executive.",
            "target_types": ["Person"],
            "functional": True,
            "justification": "One chief executive at a time.",
        },
    )
    assert "Single-valued: one target per source." in text
    assert store.session("alice").type_catalog().edge_types["headed_by"].upkeep.functional_edge


def test_a_setting_naming_a_missing_property_comes_back_to_the_model(store: Store) -> None:
    tools = tools_by_name(store)
    with pytest.raises(ToolFailure, match="identity names property 'ticker' the schema lacks"):
        call(tools["create_node_type"], {**TRIAL, "identity": ["ticker"]})
    assert "ClinicalTrial" not in store.session("alice").type_catalog().node_types
