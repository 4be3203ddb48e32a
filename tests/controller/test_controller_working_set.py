"""Entity runs on a working set: an entity larger than ``controller.working_set_nodes`` is read
by the part a run needs, and a run on it does what the same run on the whole entity does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.controller.ingest import Ingestor, IngestReport
from kgot.controller.working_set import (
    WORKING_SET_NOTE,
    named_in_error,
    named_strings,
    quoted_strings,
)
from kgot.graph_model import Changeset, Edge, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, open_store
from kgot.tests.controller.scripts import inspect_call, solution, votes
from kgot.tests.controller.test_controller_ingest import (
    ADD_ZETA,
    ADD_ZETA_AGAIN,
    ADD_ZETA_RDF,
    ADD_ZETA_RDF_AGAIN,
    RESTATED,
    TEXT,
)

Run = Callable[..., AskResult]
NO_MATH = {"needs_math": False, "reason": "stated"}
TOWNS = 300


def _fill(settings: Settings, entity: str, *, population_of_paris: int) -> None:
    """An entity of TOWNS towns in a chain, and Paris linked to town 0."""
    towns = [
        Node(f"town_{i}", "Place", {"name": f"Town {i}", "population": i}) for i in range(TOWNS)
    ]
    paris = Node("paris", "Place", {"name": "Paris", "population": population_of_paris})
    roads = [
        Edge(f"town_{i}", f"town_{i + 1}", "located_in", "located_in", {}) for i in range(TOWNS - 1)
    ]
    with open_store(settings.store.db) as store:
        store.create_entity(entity)
        session = store.session(entity)
        session.commit(
            Changeset(
                added_nodes=(*towns, paris),
                added_edges=(*roads, Edge("paris", "town_0", "located_in", "located_in", {})),
            ),
            Provenance(run_id="filler", step="test"),
        )


def _small(settings: Settings, nodes: int = 20) -> Settings:
    controller = settings.controller.model_copy(update={"working_set_nodes": nodes})
    return settings.model_copy(update={"controller": controller})


def _whole(settings: Settings) -> Settings:
    return _small(settings, 100_000)


def _query_run(code: str, answer: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": [f"```python\n{code}\n```"],
            "math_check": [NO_MATH],
            "solve": [solution(answer)],
        }
    )


def _queried(result: AskResult) -> Any:
    [event] = [e for e in result.trace if e.type == "query_result"]
    return json.loads(event.result)


@pytest.mark.slow
def test_a_working_set_run_answers_as_the_whole_entity_run_does(
    run: Run, store_settings: Settings
) -> None:
    _fill(store_settings, "atlas", population_of_paris=2102650)
    _fill(store_settings, "other", population_of_paris=1)  # same ids in another tenant
    # Town 123 is neither found by the question's search nor named by a constant of the code:
    # the KeyError names it, it is loaded and the query runs again.
    code = (
        'result = [G.nodes["paris"]["population"], G.nodes["town_" + str(123)]["population"],'
        ' sorted(G.successors("paris"))]'
    )
    results = {}
    for mode, chosen in (("set", _small(store_settings)), ("whole", _whole(store_settings))):
        model = _query_run(code, "2102650")
        results[mode] = (run(model, "What is the population of Paris?", entity="atlas",
                             settings=chosen), model)  # fmt: skip

    working, model = results["set"]
    whole, _ = results["whole"]
    assert _queried(working) == _queried(whole) == [2102650, 123, ["town_0"]]
    assert working.answer == whole.answer == "2102650"
    held = {node["id"] for node in working.graph["nodes"]}
    assert {"paris", "town_0", "town_123"} <= held
    assert len(held) < 40  # the run read a few nodes, not the entity's 301
    assert len(whole.graph["nodes"]) == TOWNS + 1
    # The view counts the whole entity, and showed Paris, the search hit of the question.
    [prompt] = [call.prompt for call in model.calls_for("query")]
    assert "Graph: 301 nodes, 300 edges" in prompt
    assert "paris" in prompt
    assert WORKING_SET_NOTE in prompt  # the model is told what its code sees
    assert WORKING_SET_NOTE not in results["whole"][1].calls_for("query")[0].prompt


@pytest.mark.slow
def test_write_code_that_adds_a_node_the_entity_holds_changes_it(
    run: Run, store_settings: Settings, facts_file: Path
) -> None:
    """The job saw no town_250 and added it anew; the store holds it: the node is loaded and
    the code runs again, so the write changes the node (its population kept) as a run on the
    whole entity does, instead of replacing it. Both runs leave the same graph."""
    write = (
        'G.add_node("town_" + str(250), label="Place", name="Town 250", mayor="Ada")\n'
        'G.add_edge("paris", "town_" + str(250), relationship="located_in")\n'
        'G.remove_node("town_" + str(17))'
    )
    graphs = {}
    for entity, chosen in (("set", _small(store_settings)), ("whole", _whole(store_settings))):
        _fill(store_settings, entity, population_of_paris=2102650)
        model = ScriptedChatModel(
            script={
                "decide": [votes("IIIII", "RRRRR")],
                "define_tool_calls": [inspect_call(facts_file)],
                "update_graph": [f"```python\n{write}\n```"],
                "query": ['```python\nresult = G.nodes["town_250"]\n```'],
                "math_check": [NO_MATH],
                "solve": [solution("Ada")],
            }
        )
        result = run(model, "Who is the mayor of Town 250?", entity=entity, settings=chosen)
        assert result.answer == "Ada", result.error
        assert _queried(result) == {
            "label": "Place", "name": "Town 250", "population": 250, "mayor": "Ada"
        }  # fmt: skip
        with open_store(store_settings.store.db) as store:
            graphs[entity] = store.session(entity).load_graph()

    graph = graphs["set"]
    assert graph.nodes["town_250"]["mayor"] == "Ada"
    assert graph.has_edge("paris", "town_250")
    assert graph.has_edge("town_249", "town_250")  # its edges outside the set are untouched
    # town_17 was removed with both its edges, though the set never held town_16 or town_18.
    assert "town_17" not in graph and not graph.has_edge("town_16", "town_17")
    assert dict(graph.nodes(data=True)) == dict(graphs["whole"].nodes(data=True))
    assert sorted(graph.edges(keys=True)) == sorted(graphs["whole"].edges(keys=True))


def test_named_strings_are_read_not_run() -> None:
    code = 'x = G.nodes["paris"]\ny = f"town_{1}"\nimport os  # "not a string"\nz = \'lyon\''
    assert set(named_strings(code, "python")) == {"paris", "town_", "lyon"}
    # Code that does not parse is read for its quoted strings.
    assert named_strings('G.nodes["paris"] = (', "python") == ["paris"]
    sparql = (
        'PREFIX node: <urn:kgot:node:>\nSELECT ?p WHERE { node:paris ?p "Town 3" . '
        "<urn:kgot:node:new%20york> ?q ?r }"
    )
    assert set(named_strings(sparql, "sparql")) == {"new york", "paris", "Town 3"}
    assert quoted_strings("KeyError: 'town_123' (see \"x\")") == ["town_123", "x"]
    assert named_in_error("The node town_17 is not in the graph.")[:3] == ["The", "node", "town_17"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "first", "again"),
    [("networkx", ADD_ZETA, ADD_ZETA_AGAIN), ("rdf", ADD_ZETA_RDF, ADD_ZETA_RDF_AGAIN)],
)
def test_ingestion_on_a_working_set_restates_what_the_entity_holds(
    store_settings: Settings, backend: str, first: str, again: str
) -> None:
    """Ingestion sessions read a working set too: facts a text states again are found in the
    store (the code names them) and counted as restated, as on the whole entity."""
    _fill(store_settings, "acme", population_of_paris=1)
    controller = store_settings.controller.model_copy(
        update={"working_set_nodes": 20, "backend": backend}
    )
    settings = store_settings.model_copy(update={"controller": controller})

    async def go(*codes: str) -> tuple[list[IngestReport], int]:
        model = ScriptedChatModel(script={"update_graph": list(codes)})
        models: dict[str, Any] = {"planning": model, "execution": model}
        with open_store(settings.store.db) as store:
            async with Ingestor(store, "acme", settings, models=models) as ingestor:
                reports = [await ingestor.ingest(TEXT, source_ref="b.md") for _ in codes]
                return reports, ingestor.graph().number_of_nodes()

    [added], _ = asyncio.run(go(first))
    assert added.ok, added.failed
    assert added.inserted_nodes == ["zeta", "cupertino"]
    (stated, restated), held = asyncio.run(go(first, again))
    for report in (stated, restated):
        assert report.ok, report.failed
        assert report.inserted_nodes == [] and report.inserted_edges == []
        assert sorted(report.to_json()["restated"]) == sorted(RESTATED)
    assert held < 40  # of the entity's 303 nodes
    with open_store(settings.store.db) as store:
        graph = store.session("acme").load_graph()
    assert graph.number_of_nodes() == TOWNS + 3
    assert graph.nodes["cupertino"] == {"label": "Place", "name": "Cupertino"}


@pytest.mark.slow
def test_find_and_neighbours_reach_the_whole_entity_from_a_working_set(
    run: Run, store_settings: Settings
) -> None:
    _fill(store_settings, "atlas", population_of_paris=2102650)
    code = (
        'towns = find("Place", limit=1000)\n'
        "result = [\n"
        '    find("Place", name="Town 222"), find(population=7), len(towns),\n'
        '    sum(G.nodes[t]["population"] for t in towns), neighbours("town_150"),\n'
        '    find("Place", population="7"), find("Nothing"),\n'
        "]"
    )
    answers = []
    for chosen in (_small(store_settings), _whole(store_settings)):
        result = run(_query_run(code, "ok"), "Which towns?", entity="atlas", settings=chosen)
        answers.append(_queried(result))
    expected = [
        ["town_222"], ["town_7"], TOWNS + 1, sum(range(TOWNS)) + 2102650,
        ["town_149", "town_151"], [], [],
    ]  # fmt: skip
    assert answers == [expected, expected]
