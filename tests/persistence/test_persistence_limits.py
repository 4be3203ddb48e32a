"""What a commit refuses before it can cost the store or a later step: numbers out of range,
oversized values and imports, schemas whose checking would not end, and how many problems of
one kind are reported."""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pytest

from kgot.errors import ChangesetError
from kgot.graph_backends import write_graph
from kgot.graph_backends.base import Changeset, Node
from kgot.persistence import Provenance, Store
from kgot.tests.persistence.test_persistence_cli import kgot  # noqa: F401  (fixture)

PROV = Provenance(run_id="run-1", step="update_graph")


def test_numbers_a_checkpoint_cannot_hold_are_refused_with_their_json_path(store: Store) -> None:
    # Integers of 2**64 and more were committed, then the run's checkpoint failed (exit 70).
    store.create_entity("alice")
    session = store.session("alice")
    bad = Changeset(
        added_nodes=(
            Node("wide", "Quantity", {"name": "w", "value": 2**64}),
            Node("low", "Quantity", {"name": "l", "value": -(2**63) - 1}),
            Node("huge", "Quantity", {"name": "h", "value": 10**5000}),
            Node("inf", "Quantity", {"name": "i", "values": [1.5, {"x": math.inf}]}),
        )
    )
    problems = session.check(bad)
    text = "\n".join(problems)
    assert "node 'wide' (Quantity) at $.value: is an integer of 20 digits, outside the signed " in (
        text
    )
    assert "node 'low' (Quantity) at $.value: is an integer of 19 digits" in text
    assert "node 'huge' (Quantity) at $.value: is an integer of over 3,900 digits" in text
    assert "node 'inf' (Quantity) at $.values[1].x: is not a finite number" in text
    with pytest.raises(ChangesetError):
        session.commit(bad, PROV)
    assert store.get_entity("alice").version == 0  # nothing was written
    bounds = Changeset(
        added_nodes=(
            Node("max", "Quantity", {"name": "m", "value": 2**63 - 1}),
            Node("min", "Quantity", {"name": "n", "value": -(2**63)}),
            Node("digits", "Quantity", {"name": "d", "value": 1, "unit": "1" * 40}),  # a string
        )
    )
    assert session.check(bounds) == []
    assert session.commit(bounds, PROV) == 1
    graph = session.load_graph()
    assert graph.nodes["max"]["value"] == 2**63 - 1 and graph.nodes["min"]["value"] == -(2**63)


def test_violations_of_many_nodes_are_grouped_in_commits_and_imports(
    store: Store,
    kgot,
    tmp_path: Path,  # noqa: F811  (fixture)
) -> None:
    # 80 nodes of an unknown type printed 9,200 characters, one violation per node.
    store.create_entity("alice")
    session = store.session("alice")
    nodes = tuple(Node(f"n{i}", "Gadget", {"name": "x"}) for i in range(80))
    nameless = tuple(Node(f"p{i}", "Person", {}) for i in range(30))
    problems = session.check(Changeset(added_nodes=nodes + nameless))
    assert problems == [
        "nodes 'n0', 'n1', 'n2' and 77 more (Gadget): label 'Gadget' is not a known node type "
        "(rule: typed nodes); use one of Concept, Document, Event, Organization, Person, "
        "Place, Product, Quantity, Thing, or create it with the create_node_type tool",
        "nodes 'p0', 'p1', 'p2' and 27 more (Person) at $: 'name' is a required property "
        "(rule: required)",
    ]
    with pytest.raises(ChangesetError) as rejected:
        session.commit(Changeset(added_nodes=nodes), PROV)
    assert rejected.value.problems == problems[:1]

    graph = nx.MultiDiGraph()
    for node in nodes:
        graph.add_node(node.id, label=node.label, name="x")
    write_graph(graph, tmp_path / "gadgets.json")
    code, out, err = kgot("graph", "import", "--entity", "alice", str(tmp_path / "gadgets.json"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and len(err) < 600
    assert "nodes 'n0', 'n1', 'n2' and 77 more (Gadget): label 'Gadget'" in err
