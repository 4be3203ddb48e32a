"""Fixtures and builders for the graph-backend tests: a real sandbox, both backends, graphs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import networkx as nx
import pytest

from kgot.config import SandboxSettings
from kgot.graph_backends import GraphBackend, open_backend
from kgot.sandbox import Sandbox, open_sandbox
from kgot.tests.support.sandbox_probe import machine_problem

BACKEND_NAMES = ("networkx", "rdf")


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """The default sandbox (bubblewrap with a warm pool) shared by the session; the plain
    subprocess sandbox only where this machine can have no isolating kind (same job contract).
    Whether it can is asked of the machine, never of kgot: kgot refusing a sandbox the machine
    can have is a failure, not a reason to test on the subprocess sandbox."""
    problem = machine_problem("auto")
    if problem is None:
        box = open_sandbox(SandboxSettings(timeout=60, pool_size=1))
    else:
        warnings.warn(f"graph tests use the subprocess sandbox: {problem}", stacklevel=1)
        box = open_sandbox(SandboxSettings(kind="subprocess", timeout=60))
    yield box
    box.close()


@pytest.fixture(params=BACKEND_NAMES)
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_backend(sandbox: Sandbox, backend_name: str) -> Callable[..., GraphBackend]:
    def make(graph: nx.MultiDiGraph | None = None, **options: Any) -> GraphBackend:
        return open_backend(backend_name, sandbox, graph, **options)

    return make


def people_graph() -> nx.MultiDiGraph:
    """A small graph: two people, a document, a city; one edge with properties."""
    graph = nx.MultiDiGraph()
    graph.add_node("ada", label="Person", name="Ada Lovelace", born="1815-12-10")
    graph.add_node("charles", label="Person", name="Charles Babbage", born="1791-12-26")
    graph.add_node("note_g", label="Document", title="Note G", pages=65)
    graph.add_node("london", label="City", name="London", population=8_900_000.5)
    graph.add_edge("ada", "note_g", key="WROTE", relationship="WROTE", year=1843)
    graph.add_edge("ada", "charles", key="KNEW", relationship="KNEW")
    graph.add_edge("ada", "london", key="LIVED_IN", relationship="LIVED_IN")
    graph.add_edge("charles", "london", key="LIVED_IN", relationship="LIVED_IN")
    return graph


def chain_graph(size: int, *, label: str = "Item") -> nx.MultiDiGraph:
    """``size`` nodes ``n0 … n{size-1}`` with a name and a number, linked in a chain."""
    graph = nx.MultiDiGraph()
    for i in range(size):
        graph.add_node(f"n{i}", label=label, name=f"item {i}", number=i)
    for i in range(size - 1):
        graph.add_edge(f"n{i}", f"n{i + 1}", key="NEXT", relationship="NEXT")
    return graph


def snapshot(graph: nx.MultiDiGraph) -> tuple[dict, dict]:
    """Nodes and edges with attribute values tagged by type (so 1, 1.0 and True differ)."""

    def tagged(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: tagged(v) for k, v in value.items()}
        if isinstance(value, list):
            return [tagged(v) for v in value]
        return (type(value).__name__, value)

    nodes = {n: tagged(dict(d)) for n, d in graph.nodes(data=True)}
    edges = {(s, t, k): tagged(dict(d)) for s, t, k, d in graph.edges(keys=True, data=True)}
    return nodes, edges


class Dialect:
    """The same operations written in each backend's language."""

    def __init__(self, name: str) -> None:
        self.name = name

    def add_person(self, node_id: str, name: str) -> str:
        if self.name == "networkx":
            return f"G.add_node({node_id!r}, label='Person', name={name!r})"
        return f'INSERT DATA {{ node:{node_id} a type:Person ; prop:name "{name}" . }}'

    def link(self, source: str, target: str, relationship: str) -> str:
        if self.name == "networkx":
            return f"G.add_edge({source!r}, {target!r}, relationship={relationship!r})"
        return f"INSERT DATA {{ node:{source} rel:{relationship} node:{target} . }}"

    def names_of(self, label: str) -> str:
        if self.name == "networkx":
            return (
                f"result = sorted(d['name'] for _, d in G.nodes(data=True) "
                f"if d['label'] == {label!r})"
            )
        return f"SELECT ?name WHERE {{ ?n a type:{label} ; prop:name ?name }} ORDER BY ?name"

    def names(self, rows: Any) -> list[str]:
        if self.name == "networkx":
            return list(rows)
        return [row["name"] for row in rows]

    def nothing(self) -> str:
        if self.name == "networkx":
            return "result = [n for n, d in G.nodes(data=True) if d['label'] == 'Unicorn']"
        return "SELECT ?n WHERE { ?n a type:Unicorn }"

    def failing_query(self) -> str:
        if self.name == "networkx":
            return (
                "total = 0\nfor n in G.nodes:\n    total += G.nodes[n]['missing']\nresult = total"
            )
        return "SELECT ?n WHERE { ?n a type:Person . FILTER(?n = }"

    def missing_label(self) -> str:
        if self.name == "networkx":
            return "G.add_node('mystery', name='No label')"
        return 'INSERT DATA { node:mystery prop:name "No label" }'

    def duplicate_id(self) -> str:
        if self.name == "networkx":
            return "G.add_node(7, label='Item')\nG.add_node('7', label='Item')"
        return "INSERT DATA { node:x%2Dy a type:Item . node:x-y a type:Item . }"

    def non_serializable(self) -> str:
        if self.name == "networkx":
            return "G.add_node('bad', label='Item', tags={'a', 'b'})"
        return 'INSERT DATA { node:bad a type:Item ; prop:score "NaN"^^xsd:double . }'

    def add_then_fail(self) -> str:
        """Adds a node, then fails: nothing may be applied."""
        if self.name == "networkx":
            return "G.add_node('half', label='Item')\nraise ValueError('stop half way')"
        # The second operation breaks a rule; the first one must not survive either.
        return (
            "INSERT DATA { node:half a type:Item . } ;\n"
            "INSERT DATA { node:half2 rdfs:label 'oops' . }"
        )

    def wrong_language(self) -> str:
        if self.name == "networkx":
            return "SELECT ?n WHERE { ?n a type:Person }"
        return "result = [n for n in G.nodes]"

    def remove(self, node_id: str) -> str:
        if self.name == "networkx":
            return f"G.remove_node({node_id!r})"
        return f"DELETE WHERE {{ node:{node_id} ?p ?o }} ;\nDELETE WHERE {{ ?s ?p node:{node_id} }}"

    def count_nodes(self) -> str:
        if self.name == "networkx":
            return "result = G.number_of_nodes()"
        return "SELECT (COUNT(DISTINCT ?n) AS ?count) WHERE { ?n a ?type }"

    def count(self, value: Any) -> int:
        return int(value if self.name == "networkx" else value[0]["count"])

    def endless(self) -> str:
        if self.name == "networkx":
            return "while True:\n    pass"
        # A five-way cross product over every triple: far beyond any timeout.
        return (
            "SELECT (COUNT(*) AS ?c) WHERE { ?a ?p1 ?b . ?c ?p2 ?d . ?e ?p3 ?f . "
            "?g ?p4 ?h . ?i ?p5 ?j }"
        )


@pytest.fixture
def dialect(backend_name: str) -> Dialect:
    return Dialect(backend_name)
