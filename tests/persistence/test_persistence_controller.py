"""`ask --entity` end to end (scripted model, real controller, sandbox, tools and store): the run
sees only its entity, its writes land typed and with provenance, and the agent may add a type."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kgot.config import load_settings
from kgot.controller import ask_async
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, open_store

FACTS = "City statistics bulletin (2023).\nParis: population 2,102,650; country France.\n"

CITY_TYPE = {
    "name": "City",
    "description": "A city with its population.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    },
    "justification": "Population figures belong to cities; Place has no population field.",
}

UPDATE = """```python
G.add_node("paris-city", label="City", name="Paris", population=2102650, _confidence=0.9)
G.add_edge("paris-city", "france", relationship="located_in")
```"""

QUERY = """```python
result = {"population": G.nodes["paris-city"]["population"], "names": sorted(
    str(d.get("name")) for _, d in G.nodes(data=True))}
```"""


def decide(call) -> dict[str, str]:
    decision = "INSERT" if call.number <= 5 else "RETRIEVE"
    return {"decision": decision, "reason": "need the bulletin" if decision == "INSERT" else "ok"}


@pytest.mark.slow
def test_an_entity_run_sees_only_its_graph_and_commits_with_provenance(tmp_path: Path) -> None:
    facts = tmp_path / "bulletin.txt"
    facts.write_text(FACTS, encoding="utf-8")
    db = str(tmp_path / "kgot.db")
    store = open_store(db)
    for name in ("alice", "bob"):
        store.create_entity(name)
        store.session(name).commit(
            Changeset(
                added_nodes=(
                    Node("france", "Place", {"name": f"France ({name})"}),
                    Node("note", "Concept", {"name": f"{name}-private-note"}),
                )
            ),
            Provenance(run_id="seed", step="seed"),
        )
    scripted = ScriptedChatModel(
        script={
            "decide": [decide],
            "define_tool_calls": [
                {
                    "$tool_calls": [
                        {"name": "create_node_type", "args": CITY_TYPE},
                        {"name": "inspect_file", "args": {"path": str(facts)}},
                    ]
                }
            ],
            "update_graph": [UPDATE],
            "query": [QUERY],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [{"answer": "2102650", "reasoning": "from the graph"}],
        }
    )
    settings = load_settings({"store.db": db, "llm.model": "scripted", "controller.votes": 5})
    result = asyncio.run(
        ask_async(
            "What is the population of Paris?",
            settings=settings,
            attachments=[facts],
            models={"planning": scripted, "execution": scripted},
            entity="alice",
        )
    )
    assert result.status == "answered" and result.answer == "2102650"

    # Nothing of Bob's reached any prompt; Alice's facts did.
    prompts = "\n".join(call.prompt for call in scripted.calls)
    assert "bob-private-note" not in prompts and "France (bob)" not in prompts
    assert "France (alice)" in prompts
    # The insert prompt listed the types, the new agent type included.
    update_prompt = scripted.calls_for("update_graph")[0].prompt
    assert "Node types:" in update_prompt and "- City" in update_prompt

    alice = store.session("alice")
    city = alice.type_catalog().node_types["City"]
    assert (city.created_by, city.scope, city.justification) == (
        "agent",
        "alice",
        CITY_TYPE["justification"],
    )
    assert "City" not in store.session("bob").type_catalog().node_types
    graph = alice.load_graph(include_meta=True)
    assert graph.nodes["paris-city"]["population"] == 2102650
    assert graph.nodes["paris-city"]["_confidence"] == 0.9
    (row,) = alice.node_history("paris-city")
    assert row["run_id"] == result.run_id and row["step"] == "update_graph"
    assert row["tool_call"].startswith("inspect_file:") and row["source_ref"]
    assert graph.has_edge("paris-city", "france", "located_in")

    bob = store.session("bob").load_graph()
    assert set(bob) == {"france", "note"}  # untouched
    record = store.get_run(result.run_id)
    assert record is not None and (record.entity, record.status) == ("alice", "answered")
    store.close()
