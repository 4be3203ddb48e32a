"""``get_node``, ``traverse`` and the node resource read a node's surroundings from the store
(``EntitySession.facts_around``), never the whole graph: the same facts ``load_graph`` shows
(expired ones left out, aliases followed), a write visible at the next read, nothing of another
entity with the same node ids. In process, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.mcp_server import graph_reads
from kgot.persistence import EntitySession, Provenance, Store
from kgot.tests.memory.conftest import UPKEEP_TYPES

PAST = "2001-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"


def _commit(session: EntitySession, nodes: list[Node], edges: list[Edge]) -> None:
    session.commit(
        Changeset(added_nodes=tuple(nodes), added_edges=tuple(edges)),
        Provenance(run_id="test", step="seed", source_ref="file:seed"),
    )


def _seeded(store: Store, entity: str, *, stranger: bool = False) -> EntitySession:
    """hub -located_in-> b, c (twice), gone (expired), c2 (through an expired edge);
    b -part_of-> d -part_of-> e, e -related_to-> e; an alias ``hub_old`` merged into ``hub``;
    ``stranger`` adds ``hub -related_to-> quokka`` (entity b only)."""
    store.create_entity(entity, types=UPKEEP_TYPES)
    session = store.session(entity)
    session.load_graph()
    nodes = [
        Node("hub", "Company", {"name": "Hub Corp", "symbol": "HUB"}),
        Node("hub_old", "Company", {"name": "Hub Old"}),
        Node("b", "Place", {"name": "Bee"}),
        Node("c", "Place", {"name": "Sea"}),
        Node("c2", "Place", {"name": "Sea Two"}),
        Node("d", "Place", {"name": "Dee"}),
        Node("e", "Place", {"name": "Ee", "_expires_at": FUTURE}),
        Node("gone", "Place", {"name": "Gone", "_expires_at": PAST}),
    ]
    edges = [
        Edge("hub", "b", "located_in"),
        Edge("hub", "c", "located_in"),
        Edge("hub", "c", "located_in", "second"),
        Edge("hub", "gone", "located_in"),
        Edge("hub", "c2", "located_in", "", {"_expires_at": PAST}),
        Edge("b", "d", "part_of"),
        Edge("d", "e", "part_of"),
        Edge("e", "e", "related_to"),
    ]
    if stranger:
        nodes.append(Node("quokka", "Company", {"name": "Quokka"}))
        edges.append(Edge("hub", "quokka", "related_to"))
    _commit(session, nodes, edges)
    session.merge_nodes(
        "hub", ["hub_old"], Provenance(run_id="test", step="merge"), properties={"name": "Hub"}
    )
    return session


def _edges(graph: nx.MultiDiGraph, node: str) -> set[tuple[str, str, str, str]]:
    found = set()
    for source, target, key, data in [
        *graph.out_edges(node, keys=True, data=True),
        *graph.in_edges(node, keys=True, data=True),
    ]:
        found.add((source, target, key, repr(sorted(data.items()))))
    return found


def test_facts_around_equal_what_the_whole_graph_shows(store: Store) -> None:
    session = _seeded(store, "g")
    whole = session.load_graph(include_meta=True, track=False)
    assert "gone" not in whole and "hub_old" not in whole  # the reference hides them too
    for node in whole.nodes:
        around = session.facts_around([node])
        assert around.nodes[node] == whole.nodes[node], node
        assert _edges(around, node) == _edges(whole, node), node
    assert len(session.facts_around(["nothing_here"])) == 0
    assert session.facts_around(["gone"]).number_of_nodes() == 0


@pytest.mark.slow
def test_get_node_follows_aliases_and_hides_expired_facts(store: Store) -> None:
    session = _seeded(store, "g")
    node = graph_reads.get_node(session, "hub_old")
    assert node.id == "hub" and node.requested_id == "hub_old"
    assert node.properties["name"] == "Hub" and node.label == "Company"
    assert node.provenance.run_id == "test" and node.provenance.confidence is not None
    out = sorted((e.target, e.key) for e in node.edges_out)
    assert out == [("b", "located_in"), ("c", "located_in"), ("c", "second")]  # gone and c2 expired
    assert node.edges_out_total == 3 and node.edges_in_total == 0
    loop = graph_reads.get_node(session, "e")
    assert [e.id for e in loop.edges_out] == ["e -[related_to]-> e"]
    assert {e.source for e in loop.edges_in} == {"d", "e"}
    for missing in ("gone", "nothing_here"):
        with pytest.raises(UsageError, match=f"no node '{missing}' in entity 'g'"):
            graph_reads.get_node(session, missing)


@pytest.mark.slow
def test_traverse_equals_a_breadth_first_walk_of_the_whole_graph(store: Store) -> None:
    session = _seeded(store, "g")
    whole = nx.Graph(session.load_graph(include_meta=True, track=False))
    for depth in (1, 2, 3):
        found = graph_reads.traverse(session, "hub", depth=depth, max_nodes=200)
        expected = nx.single_source_shortest_path_length(whole, "hub", cutoff=depth)
        assert {n.id: n.depth for n in found.nodes} == expected, depth
        assert not found.truncated
    deep = graph_reads.traverse(session, "hub_old", depth=3)
    assert deep.start == "hub"
    assert {e.id for e in deep.edges} >= {"hub -[second]-> c", "d -[part_of]-> e"}
    names = {n.id: n.name for n in deep.nodes}
    assert names["d"] == "Dee" and names["b"] == "Bee"
    out_only = graph_reads.traverse(session, "d", depth=1, direction="out")
    assert [n.id for n in out_only.nodes] == ["d", "e"]
    roads = graph_reads.traverse(session, "hub", depth=3, relationships=["located_in"])
    assert {n.id for n in roads.nodes} == {"hub", "b", "c"}
    small = graph_reads.traverse(session, "hub", depth=3, max_nodes=2)
    assert len(small.nodes) == 2 and small.truncated


@pytest.mark.slow
def test_reads_never_load_the_whole_graph_and_see_a_write_at_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _seeded(store, "g")

    def whole_graph(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a node read loaded the whole graph")

    monkeypatch.setattr(session, "load_graph", whole_graph)
    assert graph_reads.get_node(session, "b").edges_out_total == 1
    writer = store.session("g")
    writer.load_graph()
    writer.commit(
        Changeset(
            added_nodes=(Node("f", "Place", {"name": "Eff"}),),
            added_edges=(Edge("b", "f", "part_of"),),
        ),
        Provenance(run_id="test", step="later"),
    )
    after = graph_reads.get_node(session, "b")
    assert sorted(e.target for e in after.edges_out) == ["d", "f"]
    assert "f" in {n.id for n in graph_reads.traverse(session, "b").nodes}


@pytest.mark.slow
def test_an_entity_with_the_same_ids_stays_out(store: Store) -> None:
    mine = _seeded(store, "a")
    _seeded(store, "b", stranger=True)
    assert "quokka" not in mine.facts_around(["hub", "quokka"])
    node = graph_reads.get_node(mine, "hub")
    assert "quokka" not in {e.target for e in node.edges_out}
    walked = graph_reads.traverse(mine, "hub", depth=3)
    assert "quokka" not in {n.id for n in walked.nodes}
    with pytest.raises(UsageError, match="no node 'quokka' in entity 'a'"):
        graph_reads.get_node(mine, "quokka")
