"""Ingesting a text whose facts the entity's graph already holds: the graph code states them
again (the same ids, the same attributes), which changes nothing in the graph; the store counts
each such fact as corroborated (a new source) or reinforced (the same source), and the report
names them as restated, not inserted. Real sandbox and store, scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller.ingest import Ingestor, IngestReport
from kgot.llm.scripted import ScriptedChatModel
from kgot.memory import WrittenEdge
from kgot.persistence import open_store

TEXT = "Zeta Dynamics, led by Ada Byron, has its head office in Cupertino."
ADD_ZETA = """```python
G.add_node("zeta", label="Organization", name="Zeta Dynamics", ceo="Ada Byron")
G.add_node("cupertino", label="Place", name="Cupertino")
G.add_edge("zeta", "cupertino", relationship="located_in")
```"""
# The same facts written as a model may write them knowing they exist: keyed edge, bulk adds.
ADD_ZETA_AGAIN = """```python
G.add_nodes_from([("zeta", {"label": "Organization", "name": "Zeta Dynamics", "ceo": "Ada Byron"})])
G.add_node("cupertino", name="Cupertino")
G.add_edge("zeta", "cupertino", key="located_in", relationship="located_in")
```"""
RESTATED = ["zeta", "cupertino", "zeta -[located_in]-> cupertino"]


def _ingest(settings: Settings, model: ScriptedChatModel, *sources: str) -> list[IngestReport]:
    """Ingest ``TEXT`` once per source, in one ingestor (its graph held between texts)."""

    async def go() -> list[IngestReport]:
        with open_store(settings.store.db) as store:
            if "acme" not in {entity.name for entity in store.list_entities()}:
                store.create_entity("acme")
            models: dict[str, Any] = {"planning": model, "execution": model}
            async with Ingestor(store, "acme", settings, models=models) as ingestor:
                return [await ingestor.ingest(TEXT, source_ref=source) for source in sources]

    return asyncio.run(go())


def _current(settings: Settings, node_id: str) -> dict[str, Any]:
    with open_store(settings.store.db) as store:
        rows = store.session("acme").node_history(node_id)
    [current] = [row for row in rows if row["valid_to_version"] is None]
    return current


@pytest.mark.slow
def test_a_text_stated_again_is_counted_and_reported_as_restated(settings: Settings) -> None:
    [first] = _ingest(settings, ScriptedChatModel(script={"update_graph": [ADD_ZETA]}), "a.md")
    assert first.ok, first.failed
    assert first.inserted_nodes == ["zeta", "cupertino"]
    assert first.inserted_edges == [WrittenEdge("zeta", "located_in", "cupertino", "located_in")]
    assert first.to_json()["inserted_edges"] == ["zeta -[located_in]-> cupertino"]
    assert first.restated == [] and first.corroborated == 0

    # Another source states the same facts, then that source again; a second ingestor, as a
    # second remember call opens.
    model = ScriptedChatModel(script={"update_graph": [ADD_ZETA, ADD_ZETA_AGAIN]})
    other, same = _ingest(settings, model, "b.md", "b.md")

    for report in (other, same):
        assert report.ok, report.failed
        assert report.inserted_nodes == [] and report.inserted_edges == []
        assert report.updated_nodes == []
        assert sorted(report.to_json()["restated"]) == sorted(RESTATED)
        assert set(report.restated) == {
            ("node", "zeta"),
            ("node", "cupertino"),
            ("edge", "zeta", "cupertino", "located_in"),
        }
        assert "3 restated" in report.summary()
    assert (other.corroborated, other.reinforced) == (3, 0)
    assert (same.corroborated, same.reinforced) == (0, 3)
    assert other.version is not None and same.version == other.version + 1
    zeta = _current(settings, "zeta")
    assert zeta["corroborations"] == 2  # the first source and b.md, counted once
    assert [source["source_ref"] for source in zeta["sources"]] == ["b.md"]
    assert zeta["valid_from_version"] == first.version  # still the row the first text wrote
    with open_store(settings.store.db) as store:
        session = store.session("acme")
        graph = session.load_graph()
        [edge] = session.edge_history("zeta", "cupertino", "located_in")
    assert edge["corroborations"] == 2
    assert sorted(graph.nodes) == ["cupertino", "zeta"] and graph.number_of_edges() == 1


# The same facts in SPARQL for the RDF backend: once as a model writes them new, once as a
# model may write them knowing they exist (some statements of each, in two operations).
ADD_ZETA_RDF = """```sparql
INSERT DATA {
  node:zeta a type:Organization ; prop:name "Zeta Dynamics" ; prop:ceo "Ada Byron" .
  node:cupertino a type:Place ; prop:name "Cupertino" .
  node:zeta rel:located_in node:cupertino .
}
```"""
ADD_ZETA_RDF_AGAIN = """```sparql
INSERT DATA { node:zeta prop:name "Zeta Dynamics" ; prop:ceo "Ada Byron" } ;
INSERT DATA { node:cupertino a type:Place . node:zeta rel:located_in node:cupertino }
```"""


@pytest.mark.slow
def test_a_text_stated_again_in_sparql_is_counted_and_reported_as_restated(
    settings: Settings,
) -> None:
    rdf = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"backend": "rdf"})}
    )
    script = {"update_graph": [ADD_ZETA_RDF]}
    [first] = _ingest(rdf, ScriptedChatModel(script=script), "a.md")
    assert first.ok, first.failed
    assert first.inserted_nodes == ["zeta", "cupertino"]
    assert first.restated == []

    model = ScriptedChatModel(script={"update_graph": [ADD_ZETA_RDF, ADD_ZETA_RDF_AGAIN]})
    other, same = _ingest(rdf, model, "b.md", "b.md")

    for report in (other, same):
        assert report.ok, report.failed
        assert report.inserted_nodes == [] and report.inserted_edges == []
        assert report.updated_nodes == []
        # Sorted: a SPARQL update's statements come back in no order.
        assert sorted(report.to_json()["restated"]) == sorted(RESTATED)
    assert (other.corroborated, other.reinforced) == (3, 0)
    assert (same.corroborated, same.reinforced) == (0, 3)
    zeta = _current(rdf, "zeta")
    assert zeta["corroborations"] == 2
    assert zeta["valid_from_version"] == first.version  # still the row the first text wrote
    with open_store(rdf.store.db) as store:
        [edge] = store.session("acme").edge_history("zeta", "cupertino", "located_in")
    assert edge["corroborations"] == 2
