"""The NetworkX backend: the model writes Python against ``G`` and ``nx``, run in the sandbox."""

from __future__ import annotations

import itertools

import networkx as nx

from kgot.graph_backends.common import PropertyGraphBackend
from kgot.graph_backends.languages import PYTHON
from kgot.graph_backends.view_lines import PythonLines
from kgot.graph_model import (
    Changeset,
    edge_record,
    edge_removal_record,
    node_record,
    records_text,
    removal_record,
)
from kgot.sandbox import Sandbox


class RecordSerializer:
    """The graph as records for jobs, one cached record per element.

    Records are encoded lazily, on the first job after the graph was replaced. After that a job
    gets the array encoded last time (``in/graph.json``, the same bytes object every time) and
    the records of what changed since (``in/graph_delta.json``: later records replace or remove
    earlier ones, see :mod:`~kgot.graph_model.records`), so a small change costs a
    small file, not a re-encoding or a copy of the graph. Once the changes reach a quarter of
    the whole, the array is encoded afresh.
    """

    def __init__(self) -> None:
        self._graph: nx.MultiDiGraph | None = None
        self._nodes: dict[str, str] | None = None
        self._edges: dict[tuple[str, str, str], str] = {}
        self._base: bytes | None = None
        self._base_count = 0
        self._delta: list[str] = []
        self._delta_bytes: bytes | None = None

    def reset(self, graph: nx.MultiDiGraph) -> None:
        self._graph = graph
        self._nodes, self._edges = None, {}
        self._base, self._base_count, self._delta, self._delta_bytes = None, 0, [], None

    def changed(self, graph: nx.MultiDiGraph, changeset: Changeset) -> None:
        self._graph = graph
        if self._nodes is None:
            return
        self._delta_bytes = None
        delta = self._delta
        for ident in changeset.removed_edges:
            self._edges.pop(ident, None)
            delta.append(edge_removal_record(*ident))
        for node_id in changeset.removed_nodes:
            self._nodes.pop(node_id, None)
            delta.append(removal_record(node_id))
        for node in (*changeset.added_nodes, *changeset.changed_nodes):
            record = self._nodes[node.id] = node_record(node.id, graph.nodes[node.id])
            delta.append(record)
        for edge in (*changeset.added_edges, *changeset.changed_edges):
            ident = edge.ident
            record = self._edges[ident] = edge_record(*ident, graph.edges[ident])
            delta.append(record)

    def job_files(self) -> dict[str, bytes]:
        if self._nodes is None:
            graph = self._graph if self._graph is not None else nx.MultiDiGraph()
            self._nodes = {n: node_record(n, d) for n, d in graph.nodes(data=True)}
            self._edges = {
                (s, t, k): edge_record(s, t, k, d)
                for s, t, k, d in graph.edges(keys=True, data=True)
            }
        if self._base is None or len(self._delta) * 4 > self._base_count:
            records = list(itertools.chain(self._nodes.values(), self._edges.values()))
            self._base = records_text(records).encode("utf-8")
            self._base_count, self._delta, self._delta_bytes = len(records), [], None
        files = {"graph.json": self._base}
        if self._delta:
            if self._delta_bytes is None:
                self._delta_bytes = records_text(self._delta).encode("utf-8")
            files["graph_delta.json"] = self._delta_bytes
        return files


class NetworkXBackend(PropertyGraphBackend):
    """Graph code is Python: ``G`` (a ``networkx.MultiDiGraph``), ``nx``, ``result``."""

    name = "networkx"
    language = PYTHON
    job_module = "python_job"
    code_file = "code.py"
    resident_modules = ("networkx",)

    def __init__(
        self,
        sandbox: Sandbox,
        graph: nx.MultiDiGraph | None = None,
        *,
        timeout_s: float | None = None,
        max_property_bytes: int | None = None,
    ) -> None:
        super().__init__(
            sandbox,
            graph,
            lines=PythonLines(),
            serializer=RecordSerializer(),
            timeout_s=timeout_s,
            max_property_bytes=max_property_bytes,
        )
