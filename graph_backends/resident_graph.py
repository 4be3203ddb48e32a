"""Keeps a run's graph resident in a sandbox worker of its own, in step with the host's.

The host's :class:`~kgot.graph_backends.graph_state.GraphState` stays the graph of record: every
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import networkx as nx

from kgot.graph_backends.jobs.resident import HOOK, STALE
from kgot.graph_backends.runner import (
    JobSpec,
    job_bundle,
    job_outcome,
    resident_job,
    successful_outcome,
)
from kgot.graph_model import (
    Changeset,
    EdgeIdent,
    edge_record,
    edge_removal_record,
    node_record,
    records_text,
    removal_record,
)
from kgot.sandbox import StateRefused

if TYPE_CHECKING:
    from kgot.graph_backends.graph_state import GraphState
    from kgot.sandbox import ResidentWorker

log = logging.getLogger(__name__)

# Past this share of the graph, a delta costs about what the whole graph does; below this many
# elements a delta is cheaper anyway (a whole load also ships the job code and re-indexes).
_DELTA_SHARE = 0.25
_DELTA_MIN = 1000


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
        touched = len(self._nodes) + len(self._edges)
        if touched > _DELTA_MIN and touched > _DELTA_SHARE * graph.number_of_nodes():
            self._nodes = None

    # -- jobs -------------------------------------------------------------------------------

    def run(self, spec: JobSpec, state: GraphState) -> tuple[dict[str, Any], int]:
        """Run ``spec`` (code and options only) on the resident graph; its successful outcome
        and the host version it ran on. The update that brings the worker to ``state``'s
        version (computed under its lock, so it matches that version exactly) travels with
        the job, in one exchange.

        Raises:
            GraphQueryError, GraphCodeError, ChangesetError: as :func:`run_job`.
            ResidentUnavailable: the worker cannot take the graph at all.
        """
        with self.lock:
            for attempt in (1, 2, 3):
                update = self._update(state)
                version = update.version if update is not None else self._held
                assert version is not None
                files = {**spec.files, "resident.json": _resident_file(self.key, version)}
                job = replace(spec, files=files)
                generation = self.worker.generation
                try:
                    result = self.worker.run_with_state(
                        resident_job(job), update.message() if update is not None else None
                    )
                except StateRefused as why:
                    self._held = None
                    if update is not None and update.whole:
                        raise ResidentUnavailable(str(why)) from None
                    continue  # a refused delta: the whole graph goes next time
                if update is not None and self.worker.generation == generation:
                    self._took(update)  # taken, whatever the job then did
                outcome = job_outcome(result, job)
                if outcome.get("kind") == STALE and attempt < 3:
                    self._held = None  # the worker lost its copy (or never had it): resend
                    continue
                return successful_outcome(outcome, job), version
        raise ResidentUnavailable("the resident worker kept losing the run's graph")

    def prime(self, state: GraphState) -> None:
        """Send the graph now (called in the background when a run opens, so the load
        overlaps the first votes); failures are left for the first job to meet again."""
        with self.lock:
            update = self._update(state)
            if update is None:
                return
            try:
                self.worker.set_state(HOOK, *update.message()[1:])
            except Exception as error:  # the first job reports it, with its own context
                self._held = None
                log.debug("resident graph not primed: %s", error)
                return
            self._took(update)

    def close(self) -> None:
        self.worker.close()

    # -- mechanics --------------------------------------------------------------------------

    def _update(self, state: GraphState) -> _Update | None:
        """What brings the worker to the host's current version (``None``: it is there). The
        touched elements are forgotten here: from now on they count from that version."""
        if self.worker.generation != self._generation:
            self._generation = self.worker.generation
            self._held = None  # a new worker holds nothing
        with state.lock:
            version = state.version
            if self._held == version:
                return None
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
        return _Update(request, [bundle, payload], version, whole)

    def _took(self, update: _Update) -> None:
        self._held = update.version
        if update.whole:
            self.loads += 1
        else:
            self.deltas += 1

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


@dataclass(frozen=True)
class _Update:
    """A state update for the worker: to host ``version``, whole or as a delta."""

    request: dict[str, Any]
    blobs: list[bytes]
    version: int
    whole: bool

    def message(self) -> tuple[str, dict[str, Any], list[bytes]]:
        return HOOK, self.request, self.blobs


class ResidentUnavailable(Exception):
    """The resident worker cannot take the run's graph (the backend then sends the graph
    with every job instead)."""


def _resident_file(key: str, version: int) -> bytes:
    return json.dumps({"key": key, "version": version}).encode("utf-8")
