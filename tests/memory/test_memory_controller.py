"""Write-time resolution in a scripted entity run: graph code that adds a node the entity
already has lands on the existing node, and the model is told which id it landed on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, open_store
from kgot.tests.controller.scripts import inspect_call, solution, votes

ADD_PARIS_AGAIN = """```python
G.add_node("paris_fr", label="Place", name="PARIS", country="France")
G.add_node("france", label="Place", name="France")
G.add_edge("paris_fr", "france", relationship="located_in")
```"""


@pytest.mark.slow
def test_a_duplicate_written_by_graph_code_lands_on_the_existing_node(
    run: Callable[..., AskResult], store_settings: Settings, facts_file: Any
) -> None:
    with open_store(store_settings.store.db) as store:
        store.create_entity("atlas")
        session = store.session("atlas")
        session.load_graph()
        session.commit(
            Changeset(added_nodes=(Node("paris", "Place", {"name": "Paris"}),)),
            Provenance(run_id="earlier", step="test"),
        )
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [ADD_PARIS_AGAIN],
            "query": ['```python\nresult = sorted(G.nodes) + [G.nodes["paris"]["country"]]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("France")],
        }
    )

    result = run(scripted, entity="atlas", settings=store_settings)

    assert result.answer == "France"
    [updated] = [e for e in result.trace if e.type == "graph_updated"]
    assert "the write landed on 'paris'" in updated.summary
    # The next round's votes are told (notes), and the in-memory graph has no duplicate.
    assert "landed on 'paris'" in scripted.calls_for("decide")[-1].prompt
    [query_result] = [e for e in result.trace if e.type == "query_result"]
    assert "paris_fr" not in query_result.result
    assert '"France"' in query_result.result
    with open_store(store_settings.store.db) as store:
        graph = store.session("atlas").load_graph()
    assert sorted(graph.nodes) == ["france", "paris"]
    assert graph.nodes["paris"]["country"] == "France"
    assert graph.has_edge("paris", "france")
