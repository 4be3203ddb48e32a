"""The RDF backend: the model writes SPARQL 1.1, run by Oxigraph inside the sandbox.

The graph of record is the host's property graph; jobs get it as N-Triples through the
documented mapping (:mod:`kgot.graph_backends.jobs.rdf_model`), load it into an in-memory
Oxigraph store, and run the query or the update there. Updates are diffed back into a
property-graph changeset, so the RDF backend and the NetworkX backend produce the same kind of
change and the same graph rules apply. Running in the sandbox bounds what a pathological query
can cost (the sandbox timeout and memory cap stop it; the host never blocks).

Optionally the graph also lives at a remote SPARQL 1.1 endpoint (:mod:`.remote`): reads go to
the endpoint once the guard (run in the sandbox) accepted them; every applied changeset is sent
there as one update request.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING

import networkx as nx

from kgot.errors import ChangesetError
from kgot.graph_backends.base import QueryResult
from kgot.graph_backends.common import PropertyGraphBackend, query_result
from kgot.graph_backends.graph_state import without_restatements
from kgot.graph_backends.jobs.outcome import MAX_ITEMS
from kgot.graph_backends.jobs.rdf_model import edge_group_ntriples, node_ntriples
from kgot.graph_backends.jobs.sparql_job import result_is_empty
from kgot.graph_backends.languages import SPARQL
from kgot.graph_backends.view_lines import TurtleLines
from kgot.graph_model import LABEL, RELATIONSHIP, Changeset
from kgot.sandbox import Sandbox

if TYPE_CHECKING:
    import rdflib

    from kgot.graph_backends.remote import SparqlEndpoint

Group = tuple[str, str, str]  # (source, target, relationship)


class NTriplesSerializer:
    """The graph as N-Triples (``in/graph.nt``): cached per node and per edge group.

    Edges between the same two nodes with the same relationship form a group because they share
    one ``rel:`` triple (and need description resources once there are several). Fragments are
    kept encoded, each ending with its line break, so the job input is one join of bytes: the
    text is encoded per changed element, never as a whole.
    """

    def __init__(self) -> None:
        self._graph: nx.MultiDiGraph | None = None
        self._nodes: dict[str, bytes] | None = None
        self._groups: dict[Group, bytes] = {}
        self._relationship_of: dict[tuple[str, str, str], str] = {}
        self._payload: bytes | None = None

    def reset(self, graph: nx.MultiDiGraph) -> None:
        self._graph = graph
        self._nodes, self._groups, self._relationship_of = None, {}, {}
        self._payload = None

    def changed(self, graph: nx.MultiDiGraph, changeset: Changeset) -> None:
        self._graph = graph
        self._payload = None
        if self._nodes is None:
            return
        for node_id in changeset.removed_nodes:
            self._nodes.pop(node_id, None)
        for node in (*changeset.added_nodes, *changeset.changed_nodes):
            self._nodes[node.id] = _encoded(node_ntriples(node.id, graph.nodes[node.id]))
        touched: set[Group] = set()
        for ident in changeset.removed_edges:
            old = self._relationship_of.pop(ident, None)
            if old is not None:
                touched.add((ident[0], ident[1], old))
        for edge in (*changeset.added_edges, *changeset.changed_edges):
            ident = edge.ident
            old = self._relationship_of.get(ident)
            if old is not None:
                touched.add((ident[0], ident[1], old))
            self._relationship_of[ident] = edge.relationship
            touched.add((ident[0], ident[1], edge.relationship))
        for group in touched:
            text = self._group_text(graph, group)
            if text:
                self._groups[group] = _encoded(text)
            else:
                self._groups.pop(group, None)

    @staticmethod
    def _group_text(graph: nx.MultiDiGraph, group: Group) -> str:
        source, target, relationship = group
        keyed = graph.get_edge_data(source, target) or {}
        edges = [(k, a) for k, a in keyed.items() if a.get(RELATIONSHIP) == relationship]
        return edge_group_ntriples(source, target, relationship, edges)

    def job_files(self) -> dict[str, bytes]:
        return {"graph.nt": self.payload()}

    def payload(self) -> bytes:
        """The whole graph as N-Triples."""
        if self._payload is None:
            if self._nodes is None:
                self._build()
            assert self._nodes is not None
            self._payload = b"".join(itertools.chain(self._nodes.values(), self._groups.values()))
        return self._payload

    def _build(self) -> None:
        graph = self._graph if self._graph is not None else nx.MultiDiGraph()
        self._nodes = {n: _encoded(node_ntriples(n, d)) for n, d in graph.nodes(data=True)}
        groups: set[Group] = set()
        for source, target, key, attrs in graph.edges(keys=True, data=True):
            relationship = attrs[RELATIONSHIP]
            self._relationship_of[(source, target, key)] = relationship
            groups.add((source, target, relationship))
        texts = ((group, self._group_text(graph, group)) for group in groups)
        self._groups = {group: _encoded(text) for group, text in texts if text}


def _encoded(ntriples: str) -> bytes:
    return (ntriples + "\n").encode("utf-8")


class RdfBackend(PropertyGraphBackend):
    """Graph code is SPARQL 1.1: SELECT/ASK to read, UPDATE to write."""

    name = "rdf"
    language = SPARQL
    job_module = "sparql_job"
    code_file = "query.rq"
    resident_modules = ("pyoxigraph",)

    def __init__(
        self,
        sandbox: Sandbox,
        graph: nx.MultiDiGraph | None = None,
        *,
        timeout_s: float | None = None,
        endpoint: SparqlEndpoint | None = None,
        max_property_bytes: int | None = None,
    ) -> None:
        self.endpoint = endpoint
        given = graph is not None
        if endpoint is not None and not given:
            graph = endpoint.fetch_graph()  # the endpoint's graph is the starting point
        self._ntriples = NTriplesSerializer()
        super().__init__(
            sandbox,
            graph,
            lines=TurtleLines(),
            serializer=self._ntriples,
            timeout_s=timeout_s,
            max_property_bytes=max_property_bytes,
        )
        if endpoint is not None and given:
            endpoint.replace_graph(self.to_networkx())

    def query(self, query: str, *, max_items: int | None = None) -> QueryResult:
        if self.endpoint is None:
            return super().query(query, max_items=max_items)
        # The guard runs in the sandbox (parsing is costly on pathological texts); the
        # endpoint gets the text exactly as checked.
        outcome, _ = self._run("check", query, with_graph=False)
        limit = max_items or MAX_ITEMS
        value, truncated = self.endpoint.select(str(outcome.get("text", "")), max_items=limit)
        return query_result(value, result_is_empty(value), truncated, limit)

    async def aquery(self, query: str, *, max_items: int | None = None) -> QueryResult:
        if self.endpoint is None:
            return await super().aquery(query, max_items=max_items)
        # The endpoint is asked over blocking HTTP: on a thread, as a whole.
        return await asyncio.to_thread(self.query, query, max_items=max_items)

    def apply(self, changeset: Changeset) -> None:
        if self.endpoint is None:
            super().apply(changeset)
            return
        with self._state.lock:
            problems = self._state.problems(changeset)
            if problems:
                raise ChangesetError(problems)
            # Facts stated again as they are change nothing: the endpoint is not sent them.
            changed = without_restatements(self._state.graph, changeset)
            # The endpoint first: if it refuses, the local graph is left as it was.
            if not changed.is_empty:
                self.endpoint.change(*touched(self._state.graph, changed))
            super().apply(changeset)

    def load(self, graph: nx.MultiDiGraph) -> None:
        super().load(graph)
        if self.endpoint is not None:
            self.endpoint.replace_graph(self.to_networkx())

    def ntriples(self) -> bytes:
        """The whole graph as N-Triples (the RDF mapping)."""
        with self._state.lock:
            return self._ntriples.payload()

    def to_rdflib(self) -> rdflib.Graph:
        """The graph as an rdflib ``Graph`` backed by an Oxigraph store (a copy)."""
        import rdflib
        from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

        graph = rdflib.Graph(store="Oxigraph", identifier=DATASET_DEFAULT_GRAPH_ID)
        graph.parse(data=self.ntriples(), format="ox-nt")
        return graph


def touched(graph: nx.MultiDiGraph, changeset: Changeset) -> tuple[set[str], set[Group], str]:
    """What ``changeset`` touches in the RDF of ``graph``, and the N-Triples of its new state.

    Returns the node ids whose own statements change, the (source, target, relationship)
    groups whose edges change, and the triples all of them will have once the changeset is
    applied; ``graph`` itself is not changed.
    """
    nodes = {*changeset.removed_nodes}
    nodes.update(n.id for n in (*changeset.added_nodes, *changeset.changed_nodes))
    parts = [
        node_ntriples(node.id, {LABEL: node.label, **node.properties})
        for node in (*changeset.added_nodes, *changeset.changed_nodes)
    ]
    gone = set(changeset.removed_edges)
    replaced = {e.ident: e for e in (*changeset.added_edges, *changeset.changed_edges)}
    groups: set[Group] = set()
    for source, target, key in (*gone, *replaced):
        if graph.has_edge(source, target, key):
            groups.add((source, target, graph.edges[source, target, key][RELATIONSHIP]))
    groups.update((e.source, e.target, e.relationship) for e in replaced.values())
    for group in groups:
        source, target, relationship = group
        keyed = graph.get_edge_data(source, target) or {}
        after = [
            (k, a)
            for k, a in keyed.items()
            if a.get(RELATIONSHIP) == relationship
            and (source, target, k) not in gone
            and (source, target, k) not in replaced
        ]
        after += [
            (e.ident[2], {RELATIONSHIP: e.relationship, **e.properties})
            for e in replaced.values()
            if (e.source, e.target, e.relationship) == group
        ]
        parts.append(edge_group_ntriples(source, target, relationship, after))
    return nodes, groups, "\n".join(part for part in parts if part)
