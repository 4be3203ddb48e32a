"""An entity run's graph as a working set: the part of the entity the run needs, read from the
store as the run goes, instead of the whole entity.

An entity of more nodes than ``controller.working_set_nodes`` is not loaded whole. The run's
backend starts on the nodes the question's rarer words point at in the store's search index
(``kgot.memory.nodes_named_by_rare_words``: one indexed read per word, no ranking; the view
ranks what is loaded) and the nodes written last, with their neighbourhoods, within that many
nodes. As the run goes on it reads more,
always by index and never the whole entity:

* **views**: the focus texts of a prompt (tool results, the reason for a step) are looked up
  the same way and what they point at loaded before the view is drawn, so a fact the entity already
  holds is shown when a tool result names it;
* **graph code**: the strings a query or write code names (Python string constants, SPARQL
  literals and node IRIs) that are node ids are loaded with their edges before the job runs;
* **after a job**: what a write's changeset adds, links or removes, and the strings of a
  failed job's error, are looked up; where the store holds facts the job did not see (a node
  added that exists, an edge to a node not loaded, a removed node's other edges) they are
  loaded and the job runs again on the larger set (jobs are deterministic and see nothing
  but the graph, so the second run is the one that would have run on the whole entity);
* **commits and catch-ups**: changesets are fitted to what is held
  (:meth:`~kgot.graph_backends.PropertyGraphBackend.absorb`), loading the ends of edges that
  link to nodes not held.

Counts in views describe the whole entity: the facts not held are added to the backend's
statistics (``unloaded``), as read when the run opened, less what was loaded since.

What graph code cannot see is what no string of it names and no search found: a scan over a
whole type (``[n for n in G if …]``) sees the working set. The view says how many facts the
entity holds, and the prompts tell the model to name the nodes it needs.
"""

from __future__ import annotations

import ast
import asyncio
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import networkx as nx

from kgot.errors import ChangesetError, CodeExecutionError, QueryError
from kgot.graph_backends import (
    RDF_NODE,
    FactsNeededError,
    GraphBackend,
    GraphView,
    QueryLanguage,
    QueryResult,
    ViewRequest,
    lookup_key,
    rdf_decode_local,
)
from kgot.graph_model import Changeset, GraphStats, edges_of, nodes_of

if TYPE_CHECKING:
    from kgot.graph_backends import PropertyGraphBackend
    from kgot.persistence import EntitySession

SEARCH_HITS = 30  # nodes a text's rarer words point at, loaded per text (question, focus)
RECENT_NODES = 20  # the nodes written last, loaded when the run opens
MAX_SEARCH_CHARS = 2_000  # of a focus text searched (its start names what it is about)
MAX_NAMED = 500  # strings of one piece of code looked up as node ids
MAX_NAME_CHARS = 300
RERUNS = 2  # times a job runs again after loading what it turned out to need
MAX_LOOKUPS = 20  # find()/neighbours() calls answered for one piece of code

_QUOTED = re.compile(r"'([^'\n]{1,300})'|\"([^\"\n]{1,300})\"")
_NODE_IRI = re.compile(r"<" + re.escape(RDF_NODE) + r"([^>\s]{1,600})>")
_WORD = re.compile(r"[\w.:\-]{1,300}")
_NODE_PREFIXED = re.compile(r"(?<![\w:])node:((?:[\w\-.]|%[0-9A-Fa-f]{2})+)")

T = TypeVar("T")

WORKING_SET_NOTE = (
    "This graph is large: `G` holds the part of it loaded for this question (the view's "
    "first line counts the whole), plus every node the code names by its id in a string "
    "constant, loaded with its edges before the code runs. A scan over G's nodes sees only "
    "those loaded; to reach the rest, `find(label, limit=100, **properties)` returns the ids "
    "of the whole graph's nodes with that label and those property values (sorted; e.g. "
    "find('Company', country='France')) and `neighbours(id)` the ids linked to a node; the "
    "nodes they return are in G when the call returns."
)


def open_entity_backend(
    session: EntitySession,
    question: str,
    open_backend: Callable[[nx.MultiDiGraph], GraphBackend],
    *,
    max_nodes: int,
    track: bool = True,
) -> GraphBackend:
    """The backend of an entity run: on the whole entity when it has at most ``max_nodes``
    nodes (read whole, as before; cheaper than the searches at that size), else on a working
    set for ``question`` (module docstring). ``open_backend`` opens a backend on a graph.

    ``track``: the session's tracked view becomes the version read, as with ``load_graph``
    (a run's, whose commits are checked against it); False leaves it alone (a look).
    """
    from kgot.graph_backends import PropertyGraphBackend

    totals = session.stats()
    if totals.nodes <= max_nodes:
        return open_backend(session.load_graph(track=track))
    searcher = _Searcher(session)
    seeds = [*searcher.node_ids(question), *session.recent_node_ids(RECENT_NODES)]
    around = session.facts_around(seeds, include_meta=False, track=track)
    graph = _within(around, seeds, max_nodes)
    inner = open_backend(graph)
    if not isinstance(inner, PropertyGraphBackend):  # one on an endpoint holds its own graph
        inner.close()
        return open_backend(session.load_graph(track=track))
    # The seeds held are held with all their edges, unless the cut to the budget dropped some.
    complete = [n for n in seeds if n in graph and graph.degree(n) == around.degree(n)]
    return WorkingSet(
        inner,
        session,
        totals=totals,
        max_nodes=max_nodes,
        searcher=searcher,
        complete=complete,
    )


class WorkingSet:
    """A :class:`~kgot.graph_backends.GraphBackend` over the part of an entity a run needs
    (module docstring), loading more from the entity's store on demand."""

    def __init__(
        self,
        inner: PropertyGraphBackend,
        session: EntitySession,
        *,
        totals: GraphStats,
        max_nodes: int,
        searcher: _Searcher | None = None,
        complete: Iterable[str] = (),
    ) -> None:
        self._inner = inner
        self._session = session
        self._max_nodes = max_nodes
        self._searcher = searcher or _Searcher(session)
        self._lock = threading.RLock()  # one load at a time; jobs run outside it
        # Nodes held with every edge they have in the store (read with facts_around); others
        # came in as the end of an edge.
        self._complete: set[str] = set()
        self._searched: set[str] = set()
        inner.unloaded = _difference(totals, inner.stats())
        # The answers to graph code's find()/neighbours(), sent with every job (lookups.py).
        self._answers: dict[str, list[str]] = {}
        inner.job_options = {"lookups": {"answers": self._answers}}
        language = inner.language
        self._language = replace(
            language,
            read_contract=f"{language.read_contract} {WORKING_SET_NOTE}",
            write_contract=f"{language.write_contract}\n{WORKING_SET_NOTE}",
        )
        self._complete.update(complete)

    # -- the contract -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def language(self) -> QueryLanguage:
        """The inner backend's, with what graph code must know of a working set."""
        return self._language

    def render(self, request: ViewRequest) -> GraphView:
        texts = [request.question, *request.focus]
        ids = [
            node_id
            for text in texts
            if text and text not in self._searched
            for node_id in self._search(text)
        ]
        if ids:
            self._load_around(ids, within_budget=True)
        return self._inner.render(request)

    def query(self, query: str, *, max_items: int | None = None) -> QueryResult:
        return self._with_reruns(query, lambda: self._inner.query(query, max_items=max_items))

    async def aquery(self, query: str, *, max_items: int | None = None) -> QueryResult:
        return await self._awith_reruns(
            query, lambda: self._inner.aquery(query, max_items=max_items)
        )

    def propose(self, code: str) -> Changeset:
        return self._with_reruns(code, lambda: self._inner.propose(code), writes=True)

    async def apropose(self, code: str) -> Changeset:
        return await self._awith_reruns(code, lambda: self._inner.apropose(code), writes=True)

    def apply(self, changeset: Changeset) -> None:
        """Apply a commit's or another writer's changes to what is held: elements not held
        are added, the ends of edges to nodes not held are read first."""
        with self._lock:
            changed = {node.id: node.label for node in changeset.changed_nodes}
            ends = {end for edge in (*changeset.added_edges, *changeset.changed_edges)
                    for end in (edge.source, edge.target)}  # fmt: skip
            ends -= {node.id for node in changeset.added_nodes}
            ends -= changed.keys()
            missing = self._inner.missing_nodes(ends)
            if missing:
                self._absorb(self._session.load_facts(missing, (), include_meta=False))
            # A changed node not held was counted among those not held; now it is held.
            came_in = self._inner.missing_nodes(changed)
            self._inner.absorb(changeset)
            if came_in:
                counts = _label_counts(changed[n] for n in came_in)
                self._inner.unloaded = _difference(
                    self._inner.unloaded, GraphStats(len(came_in), 0, counts, {})
                )

    def to_networkx(self) -> nx.MultiDiGraph:
        """The working set (what the run read and wrote), not the entity."""
        return self._inner.to_networkx()

    def load(self, graph: nx.MultiDiGraph) -> None:
        self._inner.load(graph)

    def stats(self) -> GraphStats:
        return self._inner.stats()

    def warm_up(self, then: Callable[[], None] | None = None) -> None:
        self._inner.warm_up(then)

    def close(self) -> None:
        self._inner.close()

    # -- loading ------------------------------------------------------------------------------

    def held_nodes(self) -> int:
        """How many nodes the working set holds."""
        return self._inner.stats().nodes - self._inner.unloaded.nodes

    def _search(self, text: str) -> list[str]:
        self._searched.add(text)
        return self._searcher.node_ids(text)

    def _load_around(self, node_ids: Iterable[str], *, within_budget: bool = False) -> bool:
        """Read ``node_ids`` (those not yet read with every edge) with their edges and the
        nodes at the other ends; search results stop at the node budget, what code names
        does not. True when something was loaded."""
        with self._lock:
            wanted = [n for n in dict.fromkeys(node_ids) if n not in self._complete]
            if not wanted:
                return False
            around = graph = self._session.facts_around(wanted, include_meta=False)
            if within_budget:
                room = self._max_nodes - self.held_nodes()
                if room <= 0:
                    return False
                graph = _within(around, wanted, room, not_held=self._inner.missing_nodes)
            self._complete.update(
                n for n in wanted if n in graph and graph.degree(n) == around.degree(n)
            )
            return self._absorb(graph)

    def _absorb(self, graph: nx.MultiDiGraph) -> bool:
        """Add the facts of ``graph`` (read from the store) to the working set."""
        if not graph.number_of_nodes():
            return False
        new_nodes = self._inner.missing_nodes(graph.nodes)
        fitted = self._inner.absorb(
            Changeset(added_nodes=tuple(nodes_of(graph)), added_edges=tuple(edges_of(graph)))
        )
        if fitted.is_empty:
            return False
        # What came in was counted among the facts not held; it is held now.
        new_edges = {edge.ident: edge.relationship for edge in fitted.added_edges}
        loaded = GraphStats(
            len(new_nodes),
            len(new_edges),
            _label_counts(graph.nodes[n].get("label") for n in new_nodes),
            _label_counts(new_edges.values()),
        )
        self._inner.unloaded = _difference(self._inner.unloaded, loaded)
        return True

    def _needed_before(self, code: str) -> bool:
        """Load the nodes ``code`` names; True when something was loaded."""
        names = named_strings(code, self._inner.language.name)
        if not names:
            return False
        return self._load_existing(names)

    def _load_existing(self, names: Iterable[str]) -> bool:
        """Load those of ``names`` that are nodes of the entity (with their edges)."""
        candidates = [n for n in dict.fromkeys(names) if n not in self._complete]
        if not candidates:
            return False
        found = self._session.load_facts(candidates[:MAX_NAMED], (), include_meta=False)
        return self._load_around(found.nodes) if found.number_of_nodes() else False

    def _needed_after(self, outcome: Any) -> bool:
        """After a job: load what its changeset or its error shows it needed of the entity
        and did not see; True when something was loaded (the job should run again).

        A changeset needed more where it adds a node or an edge the entity holds already (the
        code would have changed it, not made it anew) or removes a node that has edges not
        held; a failed job where its error names a node not held (``KeyError: 'x'``, ``The
        node x is not in the graph``, an edge to a node the code did not find)."""
        if isinstance(outcome, Changeset):
            loaded = self._load_existing(node.id for node in outcome.added_nodes)
            loaded |= self._load_around(outcome.removed_nodes)
            return self._load_edges(edge.ident for edge in outcome.added_edges) or loaded
        if isinstance(outcome, CodeExecutionError | QueryError | ChangesetError):
            return self._load_existing(named_in_error(str(outcome)))
        return False

    def _load_edges(self, idents: Iterable[tuple[str, str, str]]) -> bool:
        """Load those of the edges ``idents`` the entity holds (with their ends)."""
        wanted = list(dict.fromkeys(idents))
        if not wanted:
            return False
        with self._lock:
            return self._absorb(self._session.load_facts((), wanted, include_meta=False))

    def _with_reruns(self, code: str, job: Callable[[], T], *, writes: bool = False) -> T:
        self._needed_before(code)
        runs = _Runs(self, writes)
        while True:
            try:
                result = job()
            except _RUN_AGAIN_AFTER as failure:
                if not runs.again(failure):
                    raise
            else:
                if not runs.again(result):
                    return result

    async def _awith_reruns(
        self, code: str, job: Callable[[], Any], *, writes: bool = False
    ) -> Any:
        await asyncio.to_thread(self._needed_before, code)
        runs = _Runs(self, writes)
        while True:
            try:
                result = await job()
            except _RUN_AGAIN_AFTER as failure:
                if not await asyncio.to_thread(runs.again, failure):
                    raise
            else:
                if not await asyncio.to_thread(runs.again, result):
                    return result

    def _answer(self, request: dict[str, Any]) -> None:
        """Answer graph code's ``find``/``neighbours`` call from the store, with the nodes in
        the answer loaded (with their edges), for the next run of the code."""
        if "find" in request:
            spec = request["find"]
            found = self._session.find_node_ids(
                spec.get("label"), dict(spec.get("properties") or {}), limit=int(spec["limit"])
            )
            self._load_around(found)
        else:
            node_id = str(request.get("neighbours"))
            self._load_around([node_id])
            found = self._inner.neighbours(node_id)
        with self._lock:
            self._answers[lookup_key(request)] = found


_RUN_AGAIN_AFTER = (FactsNeededError, CodeExecutionError, QueryError, ChangesetError)


class _Runs:
    """Whether one piece of graph code on a working set runs again, after each of its runs:
    once a ``find``/``neighbours`` call it made is answered (at most :data:`MAX_LOOKUPS`), or
    once what its changeset or its error shows it needed is loaded (at most :data:`RERUNS`
    times)."""

    def __init__(self, working_set: WorkingSet, writes: bool) -> None:
        self._set = working_set
        self._writes = writes
        self._attempts = 0
        self._lookups = 0

    def again(self, outcome: object) -> bool:
        """After a run that returned ``outcome`` or raised it: True when it should run again
        (what it asked for is loaded). Reads the store.

        Raises:
            CodeExecutionError, QueryError: the code asked for more lookups than one run gets.
        """
        if isinstance(outcome, FactsNeededError):
            self._lookups += 1
            if self._lookups > MAX_LOOKUPS:
                message = (
                    f"the code called find()/neighbours() with more than {MAX_LOOKUPS} "
                    "different arguments in one run; ask for what you need in fewer calls "
                    "(one find() with a larger limit, then read G)"
                )
                raise CodeExecutionError(message) if self._writes else QueryError(message)
            self._set._answer(outcome.request)
            return True
        if not isinstance(outcome, Exception) and not self._writes:
            return False  # a read's result: nothing it returned can show a need
        if self._attempts == RERUNS or not self._set._needed_after(outcome):
            return False
        self._attempts += 1
        return True


class _Searcher:
    """Node ids the entity's search index points at for a text (its rarer words)."""

    def __init__(self, session: EntitySession) -> None:
        self._session = session

    def node_ids(self, text: str) -> list[str]:
        from kgot.memory import nodes_named_by_rare_words

        text = text.strip()[:MAX_SEARCH_CHARS]
        if not text:
            return []
        return nodes_named_by_rare_words(self._session, text, limit=SEARCH_HITS)


# -- what code names --------------------------------------------------------------------------


def named_strings(code: str, language: str) -> list[str]:
    """The strings ``code`` names that may be node ids, in order: Python's string constants
    (read with ``ast``, never run), SPARQL's literals and node IRIs (decoded)."""
    if language == "sparql":
        found = [rdf_decode_local(m.group(1)) for m in _NODE_IRI.finditer(code)]
        found += [rdf_decode_local(m.group(1)) for m in _NODE_PREFIXED.finditer(code)]
        found += quoted_strings(code)
    else:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            found = quoted_strings(code)
        else:
            found = [
                node.value
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and 0 < len(node.value) <= MAX_NAME_CHARS
            ]
    return list(dict.fromkeys(found))[:MAX_NAMED]


def named_in_error(text: str) -> list[str]:
    """What an error message may name as a node: its quoted strings (``KeyError: 'x'``), then
    its words (``The node x is not in the graph.``)."""
    words = [m.group(0).strip(".:") for m in _WORD.finditer(text)]
    return list(dict.fromkeys([*quoted_strings(text), *words]))[:MAX_NAMED]


def quoted_strings(text: str) -> list[str]:
    """The single- or double-quoted strings of ``text`` (an error message, a query)."""
    return list(dict.fromkeys(m.group(1) or m.group(2) for m in _QUOTED.finditer(text)))[:MAX_NAMED]


# -- helpers -------------------------------------------------------------------------------------


def _within(
    graph: nx.MultiDiGraph,
    seeds: Sequence[str],
    room: int,
    *,
    not_held: Callable[[Iterable[str]], set[str]] | None = None,
) -> nx.MultiDiGraph:
    """``graph`` cut to at most ``room`` nodes not held yet (``not_held`` tells them; default:
    all): the seeds first (in order), then their neighbours seed by seed; edges only between
    nodes kept."""
    new = not_held(graph.nodes) if not_held is not None else set(graph.nodes)
    if len(new) <= room:
        return graph
    keep: dict[str, None] = {}
    taken = 0

    def take(node_id: str) -> bool:
        nonlocal taken
        if node_id in keep or node_id not in graph:
            return True
        if node_id in new:
            if taken >= room:
                return False
            taken += 1
        keep[node_id] = None
        return True

    for seed in seeds:
        if not take(seed):
            break
    for seed in seeds:
        if seed not in graph:
            continue
        for neighbour in (*graph.successors(seed), *graph.predecessors(seed)):
            if not take(neighbour):
                break
        if taken >= room:
            break
    cut = graph.subgraph(keep).copy()
    cut.graph.update(graph.graph)
    return cut


def _label_counts(labels: Iterable[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in labels:
        counts[str(label)] = counts.get(str(label), 0) + 1
    return counts


def _difference(whole: GraphStats, part: GraphStats) -> GraphStats:
    """``whole``'s counts less ``part``'s (never below zero)."""
    by_label = {
        label: max(0, count - part.nodes_by_label.get(label, 0))
        for label, count in whole.nodes_by_label.items()
    }
    by_relationship = {
        rel: max(0, count - part.edges_by_relationship.get(rel, 0))
        for rel, count in whole.edges_by_relationship.items()
    }
    return GraphStats(
        nodes=sum(by_label.values()),
        edges=sum(by_relationship.values()),
        nodes_by_label={k: v for k, v in by_label.items() if v},
        edges_by_relationship={k: v for k, v in by_relationship.items() if v},
    )
