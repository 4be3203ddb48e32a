"""Keeps a run's graph resident in a sandbox worker of its own, in step with the host's.

The host's :class:`~kgot.graph_backends.state.GraphState` stays the graph of record: every
changeset is diffed, checked and applied there first. This listener notes which elements each
applied changeset touched; before the next job it sends the worker the records of exactly those
(their state now, or their removal), so a job ships only the model's code and the worker's copy
equals the host's graph at the version the job runs on. Anything uncertain (a replaced graph,
a replaced worker, a refused update, a job reporting a stale copy) sends the whole graph again.

Jobs and state updates of one backend go through one lock: the worker runs one at a time, and a
job always runs on the state sent just before it.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import networkx as nx

from kgot.graph_backends.jobs.resident import HOOK, STALE
from kgot.graph_backends.runner import (
    JobSpec,
    job_bundle,
    run_resident_job,
    successful_outcome,
)
from kgot.graph_model import Changeset
from kgot.graph_model.records import (
    EdgeIdent,
    edge_record,
    edge_removal_record,
    node_record,
    records_text,
    removal_record,
)

if TYPE_CHECKING:
    from kgot.graph_backends.state import GraphState
    from kgot.sandbox.resident import ResidentWorker

log = logging.getLogger(__name__)

# Past this share of the graph, a delta costs about what the whole graph does.
_DELTA_SHARE = 0.25


class ResidentGraph:
    """The worker's copy of one backend's graph (a :class:`ChangeListener` of its state)."""

    def __init__(self, worker: ResidentWorker, kind: str, key: str) -> None:
        self.worker = worker
        self.kind = kind  # "networkx" | "rdf": how the worker holds the graph
        self.key = key  # the run's: the worker refuses any other
        self.lock = threading.Lock()
        self.loads = 0  # whole-graph loads sent (for tests and figures)
        self.deltas = 0
        self._graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self._held: int | None = None  # the host version the worker holds
        self._generation = worker.generation
        self._nodes: set[str] | None = set()  # touched since _held; None: send it whole
        self._edges: set[EdgeIdent] = set()

    # -- ChangeListener ---------------------------------------------------------------------

    def reset(self, graph: nx.MultiDiGraph) -> None:
        self._graph = graph
        self._nodes = None

    def changed(self, graph: nx.MultiDiGraph, changeset: Changeset) -> None:
        self._graph = graph
        if self._nodes is None:
            return
        self._nodes.update(n.id for n in (*changeset.added_nodes, *changeset.changed_nodes))
        self._nodes.update(changeset.removed_nodes)
        self._edges.update(e.ident for e in (*changeset.added_edges, *changeset.changed_edges))
        self._edges.update(changeset.removed_edges)
        size = graph.number_of_nodes() + len(self._edges) + 1
        if len(self._nodes) + len(self._edges) > _DELTA_SHARE * size:
            self._nodes = None

    # -- jobs -------------------------------------------------------------------------------

    def run(self, spec: JobSpec, state: GraphState) -> tuple[dict[str, Any], int]:
        """Run ``spec`` (code and options only) on the resident graph; its successful outcome
        and the host version it ran on (``state``'s: the update sent before the job is
        computed under its lock, so it matches that version exactly).

        Raises:
            GraphQueryError, GraphCodeError, ChangesetError: as :func:`run_job`.
        """
        with self.lock:
            for attempt in (1, 2):
                version = self._sync(state)
                files = {**spec.files, "resident.json": _resident_file(self.key, version)}
                job = replace(spec, files=files)
                outcome = run_resident_job(self.worker, job)
                if outcome.get("kind") == STALE and attempt == 1:
                    self._held = None  # the worker lost its copy (or never had it): resend
                    continue
                return successful_outcome(outcome, job), version
        raise AssertionError("unreachable")

    def prime(self, state: GraphState) -> None:
        """Send the graph now (called in the background when a run opens, so the load
        overlaps the first votes); failures are left for the first job to meet again."""
        with self.lock:
            try:
                self._sync(state)
            except Exception as error:  # the first job reports it, with its own context
                log.debug("resident graph not primed: %s", error)

    def close(self) -> None:
        self.worker.close()

    # -- mechanics --------------------------------------------------------------------------

    def _sync(self, state: GraphState) -> int:
        """Bring the worker to the host's current version; that version."""
        from kgot.sandbox.resident import StateRefused

        if self.worker.generation != self._generation:
            self._generation = self.worker.generation
            self._held = None  # a new worker holds nothing
        with state.lock:
            version = state.version
            if self._held == version:
                return version
            whole = self._held is None or self._nodes is None
            request: dict[str, Any] = {
                "key": self.key,
                "kind": self.kind,
                "version": version,
                "op": "load" if whole else "delta",
                "base": self._held,
            }
            payload = self._whole() if whole else self._delta()
            self._nodes, self._edges = set(), set()
        bundle = job_bundle() if whole else b""  # a new worker needs the code too
        try:
            self.worker.set_state(HOOK, request, [bundle, payload])
        except StateRefused:
            self._held = None
            if whole:
                raise
            log.debug("resident delta refused; sending the whole graph")
            return self._sync(state)
        except BaseException:
            self._held = None
            raise
        self._held = version
        if whole:
            self.loads += 1
        else:
            self.deltas += 1
        return version

    def _whole(self) -> bytes:
        graph = self._graph
        records = itertools.chain(
            (node_record(n, a) for n, a in graph.nodes(data=True)),
            (edge_record(s, t, k, a) for s, t, k, a in graph.edges(keys=True, data=True)),
        )
        return records_text(records).encode("utf-8")

    def _delta(self) -> bytes:
        graph = self._graph
        records: list[str] = []
        assert self._nodes is not None
        # Removals first: a node removed and added again ends as its last record says.
        for source, target, key in sorted(self._edges):
            if not graph.has_edge(source, target, key):
                records.append(edge_removal_record(source, target, key))
        for node_id in sorted(self._nodes):
            if node_id in graph:
                records.append(node_record(node_id, graph.nodes[node_id]))
            else:
                records.append(removal_record(node_id))
        for source, target, key in sorted(self._edges):
            if graph.has_edge(source, target, key):
                records.append(edge_record(source, target, key, graph.edges[source, target, key]))
        return records_text(records).encode("utf-8")


def _resident_file(key: str, version: int) -> bytes:
    return json.dumps({"key": key, "version": version}).encode("utf-8")
