"""The authoritative property graph behind a backend, and the checks guarding every change.

:class:`GraphState` owns one ``networkx.MultiDiGraph``. Changes arrive only as changesets that
:func:`changeset_problems` has accepted, so applying one cannot fail half way: that is what makes
:meth:`GraphState.apply` atomic. Derived structures (serialisation caches, the view index) follow
along as :class:`ChangeListener`\\ s, updated from the changeset alone, so the cost of a change is
proportional to its size, not to the size of the graph.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Protocol

import networkx as nx

from kgot.errors import ChangesetError
from kgot.graph_backends.jobs.outcome import collector_paused
from kgot.graph_backends.jobs.python_job import (
    assign_edge_keys,
    edge_key_for,
    normalize_identity_attributes,
)
from kgot.graph_model import (
    LABEL,
    RELATIONSHIP,
    Changeset,
    Edge,
    EdgeIdent,
    GraphStats,
    Node,
    apply_to_networkx,
    canonical_json,
    cap_problems,
    check_edge,
    check_node,
    describe_edge,
    describe_id,
    edge_problems,
    node_problems,
    node_table,
    oversized_problem,
    successor_table,
    tables,
)


class ChangeListener(Protocol):
    """Something derived from the graph that follows its changes."""

    def reset(self, graph: nx.MultiDiGraph) -> None:
        """The whole graph was replaced."""

    def changed(self, graph: nx.MultiDiGraph, changeset: Changeset) -> None:
        """``changeset`` was just applied to ``graph``."""


class GraphState:
    """A property graph, a lock, and the listeners kept in step with it."""

    def __init__(
        self, listeners: Iterable[ChangeListener] = (), *, max_property_bytes: int | None = None
    ) -> None:
        self.graph = nx.MultiDiGraph()
        self.max_property_bytes = max_property_bytes  # None: no cap on a property value's size
        self.lock = threading.RLock()
        self.version = 0
        self.listeners = list(listeners)
        # Which history a changeset's base version refers to (see Changeset.base).
        self.token = uuid.uuid4().hex
        self._label_counts: dict[str, int] = {}
        self._relationship_counts: dict[str, int] = {}
        # The version that last changed each element; untouched elements date from the load.
        self._loaded_at = 0
        self._node_versions: dict[str, int] = {}
        self._edge_versions: dict[EdgeIdent, int] = {}

    def load(self, graph: nx.MultiDiGraph | None) -> None:
        """Replace the graph with a checked copy of ``graph``.

        Raises:
            ChangesetError: ``graph`` breaks the property-graph rules (nothing is replaced).
        """
        fresh = normalized_copy(graph) if graph is not None else nx.MultiDiGraph()
        self.adopt(fresh)

    def adopt(self, graph: nx.MultiDiGraph) -> None:
        """Make ``graph`` the graph, without copying or checking it.

        For graphs that already follow the rules and that nobody else holds, such as the
        result of :func:`normalized_copy` or of reading a graph file.
        """
        with self.lock:
            self.graph = graph
            self.version += 1
            self._loaded_at = self.version
            self._node_versions, self._edge_versions = {}, {}
            self._label_counts = _count(d.get(LABEL) for _, d in graph.nodes(data=True))
            self._relationship_counts = _count(
                d.get(RELATIONSHIP) for _, _, d in graph.edges(data=True)
            )
            for listener in self.listeners:
                listener.reset(graph)

    def problems(self, changeset: Changeset) -> list[str]:
        """Every reason ``changeset`` cannot be applied now ([] when it can): the graph rules,
        and elements that changed since the version the changeset was computed from."""
        with self.lock:
            return cap_problems(
                changeset_problems(self.graph, changeset)
                + self._stale_problems(changeset)
                + size_problems(changeset, self.max_property_bytes)
            )

    def apply(self, changeset: Changeset) -> None:
        """Apply ``changeset`` entirely, or not at all.

        Raises:
            ChangesetError: the changeset does not fit the current graph, or elements it
                changes or removes changed since its base version; nothing changed.
        """
        with self.lock:
            problems = self.problems(changeset)
            if problems:
                raise ChangesetError(problems)
            # Facts added again exactly as they are change nothing here (the store counted
            # them); left in, they would be counted and versioned as new.
            changeset = without_restatements(self.graph, changeset)
            if changeset.is_empty:
                return
            self._update_counts(changeset, -1)
            removed_edges = self._removed_edges(changeset)
            apply_to_networkx(self.graph, changeset)
            self._update_counts(changeset, +1)
            self.version += 1
            self._note_versions(changeset, removed_edges)
            for listener in self.listeners:
                listener.changed(self.graph, changeset)

    def reconciled(self, changeset: Changeset) -> Changeset:
        """``changeset`` rewritten to fit this graph, which may hold only part of the graph it
        was made for (an entity run's working set): an element it adds that is here already
        is changed (or left out when it is here exactly so), one it changes that is not here is
        added, removals of what is not here are left out, and a removed node takes the edges
        it has here along. Edge ends must be here or added by the changeset."""
        with self.lock:
            graph = self.graph
            removed_nodes = tuple(dict.fromkeys(n for n in changeset.removed_nodes if n in graph))
            gone = set(removed_nodes)
            removed_edges = dict.fromkeys(i for i in changeset.removed_edges if graph.has_edge(*i))
            for node_id in removed_nodes:
                removed_edges.update(dict.fromkeys(graph.in_edges(node_id, keys=True)))
                removed_edges.update(dict.fromkeys(graph.out_edges(node_id, keys=True)))
            added_nodes: list[Node] = []
            changed_nodes: list[Node] = []
            for node in (*changeset.added_nodes, *changeset.changed_nodes):
                if node.id not in graph or node.id in gone:
                    added_nodes.append(node)
                elif not _restates_node(graph, node):
                    changed_nodes.append(node)
            added_edges: list[Edge] = []
            changed_edges: list[Edge] = []
            for edge in (*changeset.added_edges, *changeset.changed_edges):
                ident = edge.ident
                if not graph.has_edge(*ident) or ident in removed_edges:
                    added_edges.append(edge)
                elif not _restates_edge(graph, edge):
                    changed_edges.append(edge)
            return Changeset(
                added_nodes=tuple(added_nodes),
                changed_nodes=tuple(changed_nodes),
                removed_nodes=removed_nodes,
                added_edges=tuple(added_edges),
                changed_edges=tuple(changed_edges),
                removed_edges=tuple(removed_edges),
            )

    def missing_nodes(self, node_ids: Iterable[str]) -> set[str]:
        """Of ``node_ids``, those this graph does not hold."""
        with self.lock:
            graph = self.graph
            return {node_id for node_id in node_ids if node_id not in graph}

    def stats(self) -> GraphStats:
        with self.lock:
            return GraphStats(
                self.graph.number_of_nodes(),
                sum(self._relationship_counts.values()),  # networkx counts edges in O(n)
                {k: v for k, v in sorted(self._label_counts.items()) if v},
                {k: v for k, v in sorted(self._relationship_counts.items()) if v},
            )

    def copy(self) -> nx.MultiDiGraph:
        """A copy of the graph the caller may keep and change."""
        with self.lock:
            return self.graph.copy()

    def _stale_problems(self, changeset: Changeset) -> list[str]:
        """Elements ``changeset`` changes or removes that changed after its base version.

        A changeset without a base (made by hand) or with the base of another graph is not
        checked: there is nothing to compare it with.
        """
        if changeset.base is None:
            return []
        token, base = changeset.base
        if token != self.token or base == self.version:
            return []
        again = "compute the change again on the current graph"
        if base < self._loaded_at:
            return [f"the graph was replaced after this change was computed; {again}"]
        problems = []
        nodes = self._node_versions
        for node_id in (*(n.id for n in changeset.changed_nodes), *changeset.removed_nodes):
            if nodes.get(node_id, 0) > base:
                problems.append(
                    f"node {node_id!r}: changed by another update after this change was "
                    f"computed (version {base}, now {self.version}); {again}"
                )
        edges = self._edge_versions
        for ident in (*(e.ident for e in changeset.changed_edges), *changeset.removed_edges):
            if edges.get(ident, 0) > base:
                problems.append(
                    f"{describe_edge(*ident)}: changed by another update after this change was "
                    f"computed (version {base}, now {self.version}); {again}"
                )
        return problems

    def _removed_edges(self, changeset: Changeset) -> set[EdgeIdent]:
        """Edges the changeset removes, those of removed nodes included (before applying)."""
        removed = set(changeset.removed_edges)
        for node_id in changeset.removed_nodes:
            if self.graph.has_node(node_id):
                removed.update(self.graph.in_edges(node_id, keys=True))
                removed.update(self.graph.out_edges(node_id, keys=True))
        return removed

    def _note_versions(self, changeset: Changeset, removed_edges: set[EdgeIdent]) -> None:
        version = self.version
        for node_id in changeset.removed_nodes:
            self._node_versions.pop(node_id, None)
        for ident in removed_edges:
            self._edge_versions.pop(ident, None)
        for node in (*changeset.added_nodes, *changeset.changed_nodes):
            self._node_versions[node.id] = version
        for edge in (*changeset.added_edges, *changeset.changed_edges):
            self._edge_versions[edge.ident] = version

    def _update_counts(self, changeset: Changeset, sign: int) -> None:
        """Remove (sign -1, before applying) or add (+1, after) the touched elements' counts."""
        graph = self.graph
        node_ids = {n.id for n in (*changeset.added_nodes, *changeset.changed_nodes)}
        node_ids.update(changeset.removed_nodes)
        for node_id in node_ids:
            if graph.has_node(node_id):
                label = graph.nodes[node_id].get(LABEL)
                self._label_counts[label] = self._label_counts.get(label, 0) + sign
        idents = {e.ident for e in (*changeset.added_edges, *changeset.changed_edges)}
        idents.update(changeset.removed_edges)
        for removed in changeset.removed_nodes:  # their edges go too
            if graph.has_node(removed):
                idents.update(graph.in_edges(removed, keys=True))
                idents.update(graph.out_edges(removed, keys=True))
        for source, target, key in idents:
            if graph.has_edge(source, target, key):
                relationship = graph.edges[source, target, key].get(RELATIONSHIP)
                counts = self._relationship_counts
                counts[relationship] = counts.get(relationship, 0) + sign


def _count(values: Iterable[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def normalized_copy(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy of ``graph`` with string edge keys, checked against the property-graph rules.

    Attributes that repeat an element's identity (``id`` equal to the node id, ``source``/
    ``target``/``key`` equal to the edge's) are dropped; edges without a string key get one
    (see :func:`~kgot.graph_backends.jobs.python_job.assign_edge_keys`).

    Raises:
        ChangesetError: a node or edge breaks a rule (each problem names it and the rule).
    """
    if not isinstance(graph, nx.MultiDiGraph):
        raise ChangesetError([f"expected a networkx.MultiDiGraph, got {type(graph).__name__}"])
    with collector_paused():  # many new objects, no cycles: collections would only cost time
        return _normalized_copy(graph)


def _normalized_copy(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    nodes = []
    for node_id, original in node_table(graph).items():
        attrs = dict(original)
        if "id" in attrs and attrs["id"] == node_id:
            del attrs["id"]
        nodes.append((node_id, attrs))
    edges = []
    for source, target, key, original in _edges(graph):
        attrs = dict(original)
        for name, actual in (("source", source), ("target", target), ("key", key)):
            if name in attrs and attrs[name] == actual:
                del attrs[name]
        edges.append((source, target, key if isinstance(key, str) else None, attrs))
    fresh = fill_graph(nodes, edges)
    raise_problems(fresh)
    return fresh


class FillError(Exception):
    """A graph's listing names a node twice, an edge key twice, or an edge end not listed.

    Attributes:
        kind: ``duplicate_node``, ``duplicate_edge`` or ``missing_node``.
        item: the node id, or the edge as (source, target, key).
    """

    def __init__(self, kind: str, item: Any) -> None:
        super().__init__(f"{kind}: {item!r}")
        self.kind = kind
        self.item = item


def fill_graph(
    nodes: Iterable[tuple[Any, dict[str, Any]]],
    edges: Iterable[tuple[Any, Any, str | None, dict[str, Any]]],
    *,
    strict: bool = False,
) -> nx.MultiDiGraph:
    """A new graph holding ``nodes`` and ``edges``; the attribute dicts are used, not copied.

    Edges are (source, target, key or ``None``, attributes); an unkeyed one is keyed by its
    relationship after all keyed edges are in (see
    :func:`~kgot.graph_backends.jobs.python_job.edge_key_for`). NetworkX's adjacency is filled
    directly: ``add_edge`` costs several times more per edge, which adds up to seconds at a
    few hundred thousand edges.

    Raises:
        FillError: ``strict`` and a node listed twice, an edge key listed twice between the
            same nodes, or an edge end that is not a node (listings from files must not
            silently merge). Without ``strict`` the edge ends must be nodes (else
            ``FillError`` too) and later duplicates replace earlier ones.
    """
    graph = nx.MultiDiGraph()
    node_map, succ, pred = tables(graph)
    for node_id, attrs in nodes:
        if strict and node_id in node_map:
            raise FillError("duplicate_node", node_id)
        node_map[node_id] = attrs
        succ[node_id] = {}
        pred[node_id] = {}
    unkeyed = []
    for source, target, key, attrs in edges:
        if source not in node_map or target not in node_map:
            raise FillError("missing_node", source if source not in node_map else target)
        if key is None:
            unkeyed.append((source, target, attrs))
            continue
        keyed = succ[source].get(target)
        if keyed is None:
            keyed = succ[source][target] = {}
            pred[target][source] = keyed
        elif strict and key in keyed:
            raise FillError("duplicate_edge", (source, target, key))
        keyed[key] = attrs
    for source, target, attrs in unkeyed:
        keyed = succ[source].get(target)
        if keyed is None:
            keyed = succ[source][target] = {}
            pred[target][source] = keyed
        new_key = edge_key_for(keyed, attrs)
        if new_key is not None:
            keyed[new_key] = attrs
    return graph


def checked(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """``graph`` itself when it follows the rules as it is, else a normalised, checked copy.

    For callers that only read the result (writing a file): no copy in the common case.

    Raises:
        ChangesetError: a node or edge breaks a rule.
    """
    if not isinstance(graph, nx.MultiDiGraph):
        raise ChangesetError([f"expected a networkx.MultiDiGraph, got {type(graph).__name__}"])
    if _needs_normalizing(graph):
        return normalized_copy(graph)
    raise_problems(graph)
    return graph


def normalize_in_place(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """Give ``graph`` string edge keys, drop attributes repeating an identity, check the rules.

    Raises:
        ChangesetError: a node or edge breaks a rule (``graph`` may be normalised already).
    """
    if _needs_normalizing(graph):
        normalize_identity_attributes(graph)
        assign_edge_keys(graph)
    raise_problems(graph)
    return graph


def raise_problems(graph: nx.MultiDiGraph) -> None:
    """Check every element of ``graph``: all of them, so that a grouped problem line counts
    every element breaking its rule (valid elements cost no message).

    Raises:
        ChangesetError: a node or edge breaks a rule.
    """
    problems: list[str] = []
    for node_id, attrs in node_table(graph).items():
        problems.extend(node_problems(node_id, attrs))
    for source, target, key, attrs in _edges(graph):
        problems.extend(edge_problems(source, target, key, attrs))
    if problems:
        raise ChangesetError(cap_problems(problems))


def _edges(graph: nx.MultiDiGraph) -> Iterator[tuple[Any, Any, Any, dict[str, Any]]]:
    """(source, target, key, attributes) straight from the adjacency (views are slower)."""
    for source, neighbours in successor_table(graph).items():
        for target, keyed in neighbours.items():
            for key, attrs in keyed.items():
                yield source, target, key, attrs


def _needs_normalizing(graph: nx.MultiDiGraph) -> bool:
    for node_id, attrs in node_table(graph).items():
        if "id" in attrs and attrs["id"] == node_id:
            return True
    for source, target, key, attrs in _edges(graph):
        if not isinstance(key, str):
            return True
        if ("source" in attrs or "target" in attrs or "key" in attrs) and (
            attrs.get("source") == source
            or attrs.get("target") == target
            or attrs.get("key") == key
        ):
            return True
    return False


def size_problems(changeset: Changeset, limit: int | None) -> list[str]:
    """Property values of new and changed elements larger than ``limit`` bytes of JSON."""
    if limit is None:
        return []
    problems = []
    elements: list[tuple[str, Mapping[str, Any]]] = [
        (f"node {describe_id(node.id)}", node.properties)
        for node in (*changeset.added_nodes, *changeset.changed_nodes)
    ]
    elements.extend(
        (describe_edge(*edge.ident), edge.properties)
        for edge in (*changeset.added_edges, *changeset.changed_edges)
    )
    for where, properties in elements:
        for name, value in properties.items():
            why = oversized_problem(value, limit)
            if why is not None:
                problems.append(f"{where}: property `{name}`: {why}")
    return problems


def changeset_problems(graph: nx.MultiDiGraph, changeset: Changeset) -> list[str]:
    """Every reason ``changeset`` cannot be applied to ``graph`` ([] when it can).

    The checks cost time in proportion to the changeset, never to the graph.
    """
    problems: list[str] = []
    removed_nodes = set(changeset.removed_nodes)
    added_ids: set[str] = set()
    for node in changeset.added_nodes:
        problems.extend(check_node(node.id, node.label, node.properties))
        if (
            graph.has_node(node.id)
            and node.id not in removed_nodes
            and not _restates_node(graph, node)
        ):
            problems.append(f"node {node.id!r}: already exists, so it cannot be added")
        if node.id in added_ids:
            problems.append(f"duplicate id {node.id!r}: added twice in one change")
        added_ids.add(node.id)
    for node in changeset.changed_nodes:
        problems.extend(check_node(node.id, node.label, node.properties))
        if not graph.has_node(node.id) or node.id in removed_nodes:
            problems.append(f"node {node.id!r}: does not exist, so it cannot be changed")
    for node_id in removed_nodes:
        if not graph.has_node(node_id):
            problems.append(f"node {node_id!r}: does not exist, so it cannot be removed")
    problems.extend(_edge_changes_problems(graph, changeset, removed_nodes, added_ids))
    return cap_problems(problems)


def without_restatements(graph: nx.MultiDiGraph, changeset: Changeset) -> Changeset:
    """``changeset`` without the nodes and edges it adds that ``graph`` holds exactly so.

    Write code that states a fact again reports it as added with its current attributes (see
    :mod:`kgot.graph_backends.jobs.python_job`): for the entity's store a re-statement, which it
    counts; for the graph in memory nothing to do.
    """
    # What the changeset also removes is re-added, not restated: the removal goes first.
    removed = set(changeset.removed_nodes)
    nodes = tuple(
        n for n in changeset.added_nodes if n.id in removed or not _restates_node(graph, n)
    )
    gone = set(changeset.removed_edges)
    edges = tuple(
        e
        for e in changeset.added_edges
        if e.ident in gone
        or e.source in removed
        or e.target in removed
        or not _restates_edge(graph, e)
    )
    if len(nodes) == len(changeset.added_nodes) and len(edges) == len(changeset.added_edges):
        return changeset
    return replace(changeset, added_nodes=nodes, added_edges=edges)


def _restates_node(graph: nx.MultiDiGraph, node: Node) -> bool:
    current = node_table(graph).get(node.id)
    return current is not None and _same_json(current, {LABEL: node.label, **node.properties})


def _restates_edge(graph: nx.MultiDiGraph, edge: Edge) -> bool:
    source, target, key = edge.ident
    current = successor_table(graph).get(source, {}).get(target, {}).get(key)
    return current is not None and _same_json(
        current, {RELATIONSHIP: edge.relationship, **edge.properties}
    )


def _same_json(current: Mapping[str, Any], stated: Mapping[str, Any]) -> bool:
    """Equal attributes, ``1``, ``1.0`` and ``True`` told apart (``==`` would not)."""
    if current.keys() != stated.keys():
        return False
    try:
        return canonical_json(current) == canonical_json(stated)
    except (TypeError, ValueError, RecursionError):
        return False


def _edge_changes_problems(
    graph: nx.MultiDiGraph, changeset: Changeset, removed_nodes: set[str], added_ids: set[str]
) -> list[str]:
    problems: list[str] = []
    removed_edges = set(changeset.removed_edges)
    for ident in removed_edges:
        if not graph.has_edge(*ident):
            problems.append(f"{describe_edge(*ident)}: does not exist, so it cannot be removed")
    for node_id in removed_nodes:
        if not graph.has_node(node_id):
            continue
        for ident in (
            *graph.in_edges(node_id, keys=True),
            *graph.out_edges(node_id, keys=True),
        ):
            if ident not in removed_edges:
                problems.append(
                    f"node {node_id!r}: removed, but its {describe_edge(*ident)} is not"
                )
    added_idents: set[tuple[str, str, str]] = set()
    for edge, adding in (
        *((e, True) for e in changeset.added_edges),
        *((e, False) for e in changeset.changed_edges),
    ):
        ident = edge.ident
        # A None key would pass check_edge: the identity falls back to the relationship.
        if not isinstance(edge.key, str):
            problems.append(f"{describe_edge(*ident)}: edge keys must be strings")
        problems.extend(check_edge(*ident, edge.relationship, edge.properties))
        exists = graph.has_edge(*ident) and ident not in removed_edges
        restated = adding and exists and _restates_edge(graph, edge)
        if adding and ((exists and not restated) or ident in added_idents):
            problems.append(f"{describe_edge(*ident)}: already exists, so it cannot be added")
        if not adding and not exists:
            problems.append(f"{describe_edge(*ident)}: does not exist, so it cannot be changed")
        added_idents.add(ident)
        for end in (edge.source, edge.target):
            present = graph.has_node(end) and end not in removed_nodes
            if not present and end not in added_ids:
                problems.append(
                    f"{describe_edge(*ident)}: endpoint {end!r} is not a node "
                    "(add that node with a label first)"
                )
    return problems
