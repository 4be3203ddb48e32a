"""What the NetworkX and RDF backends share: the host-side graph, views, and running jobs.

Both keep the authoritative graph as a property graph on the host (:class:`GraphState`) and
differ in the language the model writes and in the serialisation its job reads. The graph is
serialised for the sandbox from per-element fragments cached between changes, so preparing a job
after a small change does not re-encode the whole graph.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

import networkx as nx

from kgot.errors import ChangesetError
from kgot.graph_backends.base import GraphView, QueryLanguage, QueryResult, ViewRequest
from kgot.graph_backends.graph_state import ChangeListener, GraphState
from kgot.graph_backends.jobs.lookups import linked_ids
from kgot.graph_backends.jobs.outcome import MAX_ITEMS
from kgot.graph_backends.resident_graph import ResidentGraph, ResidentUnavailable
from kgot.graph_backends.runner import GraphCodeError, JobSpec, run_job, run_job_async
from kgot.graph_backends.view_lines import LineFormat
from kgot.graph_backends.views import ViewIndex
from kgot.graph_model import Changeset, GraphStats
from kgot.sandbox import Sandbox

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 20_000  # of a query result's text for prompts (the value stays whole)


class Serializer(ChangeListener, Protocol):
    """Keeps the graph encoded for jobs, following changes."""

    def job_files(self) -> dict[str, bytes]:
        """The whole graph in the job's input format: input file name -> content."""
        ...


class PropertyGraphBackend:
    """A :class:`~kgot.graph_backends.base.GraphBackend` over a host-side property graph.

    Subclasses set :attr:`name`, :attr:`language`, the job module and the code's file name.
    """

    name: str
    language: QueryLanguage
    job_module: str
    code_file: str
    resident_modules: tuple[str, ...] = ()  # what a resident worker pre-imports for the jobs

    def __init__(
        self,
        sandbox: Sandbox,
        graph: nx.MultiDiGraph | None,
        *,
        lines: LineFormat,
        serializer: Serializer,
        timeout_s: float | None = None,
        max_property_bytes: int | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self._view = ViewIndex(lines)
        self._serializer = serializer
        self._state = GraphState([self._view, serializer], max_property_bytes=max_property_bytes)
        self._state.load(graph)
        self.resident: ResidentGraph | None = None
        # Facts of the graph's owner this backend does not hold (an entity run's working set
        # holds part of the entity): counted in stats() and so in every view's header and
        # footer, which then describe the whole graph, not the part loaded.
        self.unloaded = GraphStats(0, 0, {}, {})
        # Sent to every job in in/options.json besides max_items: a working set's answers to
        # find()/neighbours() ({"lookups": {"answers": …}}, see jobs/lookups.py).
        self.job_options: dict[str, Any] = {}
        self._resident_lock = threading.Lock()
        self._resident_tried = False

    # -- the contract -------------------------------------------------------------------------

    def render(self, request: ViewRequest) -> GraphView:
        with self._state.lock:
            return self._view.render(self._state.graph, request, self.stats())

    def query(self, query: str, *, max_items: int | None = None) -> QueryResult:
        outcome, _ = self._run("read", query, max_items=max_items)
        return _read_result(outcome, max_items)

    async def aquery(self, query: str, *, max_items: int | None = None) -> QueryResult:
        if self._resident_graph() is not None:
            outcome, _ = await asyncio.to_thread(self._run, "read", query, max_items=max_items)
            return _read_result(outcome, max_items)
        spec, _ = self._job_spec("read", query, max_items=max_items)
        return _read_result(await run_job_async(self.sandbox, spec), max_items)

    def propose(self, code: str) -> Changeset:
        return self._changeset(*self._run("write", code))

    async def apropose(self, code: str) -> Changeset:
        if self._resident_graph() is not None:
            return self._changeset(*await asyncio.to_thread(self._run, "write", code))
        spec, version = self._job_spec("write", code)
        return self._changeset(await run_job_async(self.sandbox, spec), version)

    def apply(self, changeset: Changeset) -> None:
        self._state.apply(changeset)

    def to_networkx(self) -> nx.MultiDiGraph:
        return self._state.copy()

    # -- for a graph that holds part of its owner's (an entity run's working set) -----------

    def absorb(self, changeset: Changeset) -> Changeset:
        """Apply ``changeset`` as it fits the part of the graph held here
        (:meth:`GraphState.reconciled`), atomically; returns what was applied.

        Raises:
            ChangesetError: it still does not fit (an edge whose end is neither held nor added).
        """
        with self._state.lock:
            fitted = self._state.reconciled(changeset)
            if not fitted.is_empty:
                self._state.apply(fitted)
            return fitted

    def missing_nodes(self, node_ids: Iterable[str]) -> set[str]:
        """Of ``node_ids``, those not held here."""
        return self._state.missing_nodes(node_ids)

    def neighbours(self, node_id: str) -> list[str]:
        """Ids of the nodes held here linked to ``node_id`` either way, sorted (as graph
        code's ``neighbours()`` gives them)."""
        with self._state.lock:
            return linked_ids(self._state.graph, node_id)

    def load(self, graph: nx.MultiDiGraph) -> None:
        self._state.load(graph)

    def stats(self) -> GraphStats:
        held = self._state.stats()
        if not self.unloaded.nodes and not self.unloaded.edges:
            return held
        return combined_stats(held, self.unloaded)

    # -- for subclasses -----------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Increases with every change; equal versions mean an equal graph."""
        return self._state.version

    def warm_up(self, then: Callable[[], None] | None = None) -> None:
        """Start this backend's resident worker and send it the graph, in the background:
        a run calls this as it opens, so both happen while its first votes are with the
        model. Without it the first job starts the worker. ``then`` runs once the graph is
        in (or could not be sent), in the background too: the run warms the shared pool
        after, so the two starts do not compete for the CPU."""
        resident = self._resident_graph()
        if resident is None:
            if then is not None:
                then()
            return

        def prime() -> None:
            try:
                resident.prime(self._state)
            finally:
                if then is not None:
                    then()

        threading.Thread(target=prime, daemon=True, name="kgot-resident").start()

    def close(self) -> None:
        """Stop the resident worker, if one started (the sandbox's close and garbage
        collection of the backend stop it too)."""
        if self.resident is not None:
            self.resident.close()

    def _resident_graph(self) -> ResidentGraph | None:
        """The worker of this backend's own that holds its graph between jobs, opened on
        first use; ``None`` where the sandbox keeps no such worker."""
        with self._resident_lock:
            if self._resident_tried:
                return self.resident
            self._resident_tried = True
            open_resident = getattr(self.sandbox, "open_resident", None)
            worker = open_resident(self.resident_modules) if open_resident is not None else None
            if worker is None:
                return None
            resident = ResidentGraph(worker, self.name, self._state.token)
            with self._state.lock:
                resident.reset(self._state.graph)
                self._state.listeners.append(resident)
            weakref.finalize(self, worker.close)  # a forgotten backend frees its worker
            self.resident = resident
            return resident

    def _run(
        self, mode: str, text: str, *, max_items: int | None = None, with_graph: bool = True
    ) -> tuple[dict[str, Any], int]:
        """The outcome of a job, and the graph version it ran on."""
        resident = self._resident_graph() if with_graph else None
        if resident is not None:
            spec, _ = self._job_spec(mode, text, max_items=max_items, with_graph=False)
            try:
                return resident.run(spec, self._state)
            except ResidentUnavailable as why:
                log.warning("graph jobs carry the whole graph from now on: %s", why)
                with self._resident_lock:
                    self.resident = None
                resident.close()
        spec, version = self._job_spec(mode, text, max_items=max_items, with_graph=with_graph)
        return run_job(self.sandbox, spec), version

    def _job_spec(
        self, mode: str, text: str, *, max_items: int | None = None, with_graph: bool = True
    ) -> tuple[JobSpec, int]:
        """The job running ``text``, and the graph version it will see."""
        files = {self.code_file: text.encode("utf-8")}
        options = {**self.job_options}
        if max_items is not None:
            options["max_items"] = max_items
        if options:
            files["options.json"] = json.dumps(options, ensure_ascii=False).encode("utf-8")
        with self._state.lock:
            version = self._state.version
            if with_graph:
                files.update(self._serializer.job_files())
        spec = JobSpec(module=self.job_module, mode=mode, files=files, timeout_s=self.timeout_s)
        return spec, version

    def _changeset(self, outcome: dict[str, Any], version: int) -> Changeset:
        """A write job's changeset, checked against the graph; ``version`` is the one the code
        saw, so applying refuses the changeset if what it changes has changed since (another
        proposal applied in between), instead of overwriting it."""
        try:
            changeset = Changeset.from_dict(outcome["changeset"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise GraphCodeError(
                "the code corrupted the job's result; do not write to out/result.json"
            ) from None
        changeset = replace(changeset, base=(self._state.token, version))
        problems = self._state.problems(changeset)
        if problems:
            raise ChangesetError(problems)
        return changeset


def combined_stats(*parts: GraphStats) -> GraphStats:
    """The counts of graphs with no element in common, added up."""
    by_label: dict[str, int] = {}
    by_relationship: dict[str, int] = {}
    for part in parts:
        for label, count in part.nodes_by_label.items():
            by_label[label] = by_label.get(label, 0) + count
        for relationship, count in part.edges_by_relationship.items():
            by_relationship[relationship] = by_relationship.get(relationship, 0) + count
    return GraphStats(
        nodes=sum(part.nodes for part in parts),
        edges=sum(part.edges for part in parts),
        nodes_by_label={k: v for k, v in sorted(by_label.items()) if v > 0},
        edges_by_relationship={k: v for k, v in sorted(by_relationship.items()) if v > 0},
    )


def _read_result(outcome: dict[str, Any], max_items: int | None) -> QueryResult:
    return query_result(
        outcome.get("value"),
        bool(outcome.get("empty")),
        bool(outcome.get("truncated")),
        max_items or MAX_ITEMS,
    )


def query_result(value: Any, empty: bool, truncated: bool, max_items: int) -> QueryResult:
    """A :class:`QueryResult` whose text is compact JSON (one row per line for tables) and says
    what was cut."""
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        text = "\n".join(json.dumps(row, ensure_ascii=False) for row in value)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = f"{text[:MAX_RESULT_CHARS]}\n[… {cut:,} more characters; ask for less]"
    if truncated:
        items = f"{max_items:,} item{'' if max_items == 1 else 's'}"
        text += (
            f"\n[the result was cut to its first {items} (rows or values); ask for less, or "
            "aggregate with counts]"
        )
    return QueryResult(value=value, text=text, empty=empty, truncated=truncated)
