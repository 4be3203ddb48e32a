"""Write-time upkeep reads what a write needs, never the whole entity: the nodes it names with
their edges and every node of each type it adds (so resolution decides as on the whole graph);
a read that shows another writer's commit starts the rewrite again on fresh reads."""

from __future__ import annotations

from typing import Any

import pytest

from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory
from kgot.persistence import EntitySession, Provenance, Store
from kgot.tests.memory.conftest import UPKEEP_TYPES


def _provenance(source: str = "file:one") -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source)


def _company(node_id: str, name: str, **properties: Any) -> Node:
    return Node(node_id, "Company", {"name": name, **properties})


def _desk(store: Store) -> None:
    asset = {
        "kind": "node",
        "name": "Asset",
        "description": "A listed security.",
        "properties": {"type": "object", "properties": {"symbol": {"type": "string"}}},
    }
    issued_by = {"kind": "edge", "name": "issued_by", "description": "Its issuer."}
    store.create_entity("desk", types=[*UPKEEP_TYPES, asset, issued_by])
    session = store.session("desk")
    session.commit(
        Changeset(
            added_nodes=(
                _company("apple", "Apple Inc."),
                _company("foxconn", "Foxconn"),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                Node("aapl_stock", "Asset", {"symbol": "AAPL"}),
                *(Node(f"note_{i}", "Document", {"title": f"note {i}"}) for i in range(50)),
            ),
            added_edges=(
                Edge("aapl_stock", "apple", "issued_by"),
                Edge("apple", "cupertino", "headquartered_in", "hq"),
            ),
        ),
        _provenance(),
    )


def test_a_write_reads_its_facts_and_its_types_never_the_entity(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _desk(store)
    read_types: list[set[str]] = []
    real = EntitySession.nodes_of_types

    def nodes_of_types(self: EntitySession, labels: Any) -> Any:
        read_types.append(set(labels))
        return real(self, labels)

    def whole_graph(*_: Any, **__: Any) -> Any:
        raise AssertionError("a write loaded the whole entity")

    monkeypatch.setattr(EntitySession, "nodes_of_types", nodes_of_types)
    memory = open_memory(store, "desk")
    monkeypatch.setattr(EntitySession, "load_graph", whole_graph)

    # A ticker mention lands on its issuer (ticker claims read with the organisations), and
    # a second headquarters supersedes the first (the landing node's edges read on demand).
    outcome = memory.commit(
        Changeset(
            added_nodes=(
                _company("aapl_mention", "AAPL"),
                Node("austin", "Place", {"name": "Austin"}),
            ),
            added_edges=(Edge("aapl_mention", "austin", "headquartered_in", "hq"),),
        ),
        _provenance("https://news.example/1"),
    )
    assert [(m.given, m.into) for m in outcome.merged] == [("aapl_mention", "apple")]
    assert outcome.superseded == (("edge", "apple", "cupertino", "hq"),)
    # The types read: the organisations (for tickers), then the types the write adds.
    assert read_types == [{"Company"}, {"Company", "Place"}]

    read_types.clear()
    outcome = memory.commit(
        Changeset(added_nodes=(Node("note_new", "Document", {"title": "note 51"}),)), _provenance()
    )
    assert outcome.inserted_nodes == ("note_new",)
    assert read_types == [{"Document"}]  # not the companies again, not the places


def test_another_writer_between_two_reads_starts_the_rewrite_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _desk(store)
    other = store.session("desk")
    real = EntitySession.nodes_of_types
    calls: list[int] = []

    def nodes_of_types(self: EntitySession, labels: Any) -> Any:
        calls.append(self.version)
        if len(calls) == 1:  # another process commits Foxconn's new name meanwhile
            other.refresh()
            other.commit(
                Changeset(changed_nodes=(_company("foxconn", "Hon Hai Precision"),)),
                _provenance("other"),
            )
        return real(self, labels)

    monkeypatch.setattr(EntitySession, "nodes_of_types", nodes_of_types)
    memory = open_memory(store, "desk")
    prepared = memory.prepare(
        Changeset(added_nodes=(_company("hon_hai", "Hon Hai Precision"),)), confidence=0.7
    )
    # The first snapshot read the facts before the other commit and the types after it: it
    # was dropped, and the second one, read at one version, finds the renamed company.
    assert len(calls) >= 2
    assert prepared.redirects == {"hon_hai": "foxconn"}
