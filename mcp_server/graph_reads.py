"""Reads of one entity's graph for the MCP tools: a node with its edges and provenance, a
bounded traversal, a fact's versions, the types, the counts.

A node and its surroundings are read straight from the store
(:meth:`kgot.persistence.EntitySession.facts_around`: the rows of those nodes and their edges,
by index), never the entity's whole graph, so a read right after a write costs what any read
costs. Expired facts are left out like everywhere else. A traversal reads one level at a time;
a write landing between two levels may show in the deeper one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from kgot.errors import UsageError
from kgot.mcp_server.tool_schemas import (
    EdgeOut,
    FactProvenance,
    HistoryOut,
    HistoryVersion,
    NodeOut,
    TraverseEdge,
    TraverseNode,
    TraverseOut,
    TypesOut,
)
from kgot.persistence import edge_key, edge_key_from_id, fact_id

if TYPE_CHECKING:
    import networkx as nx

    from kgot.persistence import EntitySession

__all__ = [
    "get_node",
    "history",
    "list_types",
    "stats",
    "traverse",
]

MAX_EDGES_SHOWN = 100  # per direction in get_node
MAX_DEPTH = 3
MAX_TRAVERSE_NODES = 200
MAX_TRAVERSE_EDGES = 500


def latest_version(session: EntitySession) -> int:
    """The entity's newest version in the store (another process may have written since)."""
    newest = session.commits(limit=1)
    return int(newest[0]["version"]) if newest else 0


# ---------------------------------------------------------------------------- nodes


def get_node(session: EntitySession, node_id: str) -> NodeOut:
    """The node ``node_id`` names (an alias leads to its canonical node), its properties,
    provenance and edges (at most :data:`MAX_EDGES_SHOWN` each way).

    Raises:
        UsageError: no such current node in this entity.
    """
    found, graph = _current_node(session, node_id)
    data = graph.nodes[found]
    current = _current_row(session.node_history(found))
    out = list(graph.out_edges(found, keys=True, data=True))
    into = list(graph.in_edges(found, keys=True, data=True))
    return NodeOut(
        entity=session.entity,
        id=found,
        requested_id=node_id,
        label=str(data.get("label", "")),
        properties=_plain(data, "label"),
        provenance=_provenance(data, current),
        edges_out=[_edge_out(e) for e in out[:MAX_EDGES_SHOWN]],
        edges_in=[_edge_out(e) for e in into[:MAX_EDGES_SHOWN]],
        edges_out_total=len(out),
        edges_in_total=len(into),
    )


def _current_node(session: EntitySession, node_id: str) -> tuple[str, nx.MultiDiGraph]:
    """The current node ``node_id`` is (itself, or the node it was merged into) and the facts
    around it."""
    graph = session.facts_around([node_id])
    if node_id in graph:
        return node_id, graph
    canonical = session.canonical_id(node_id)
    if canonical is not None and canonical != node_id:
        graph = session.facts_around([canonical])
        if canonical in graph:
            return canonical, graph
    raise UsageError(
        f"no node {node_id!r} in entity {session.entity!r}; find ids with search_memory"
    )


def traverse(
    session: EntitySession,
    start: str,
    *,
    depth: int = 1,
    max_nodes: int = 50,
    relationships: Iterable[str] | None = None,
    direction: Literal["out", "in", "both"] = "both",
) -> TraverseOut:
    """The nodes within ``depth`` hops of ``start`` (breadth first), at most ``max_nodes`` of
    them and :data:`MAX_TRAVERSE_EDGES` edges; ``relationships`` keeps edges of those types.

    Raises:
        UsageError: an unknown start node, or bounds outside their limits.
    """
    if not 1 <= depth <= MAX_DEPTH:
        raise UsageError(f"depth must be 1 to {MAX_DEPTH}, not {depth}")
    if not 1 <= max_nodes <= MAX_TRAVERSE_NODES:
        raise UsageError(f"max_nodes must be 1 to {MAX_TRAVERSE_NODES}, not {max_nodes}")
    first, graph = _current_node(session, start)
    walk = _Walk(first, graph.nodes[first], max_nodes, set(relationships or ()) or None)
    frontier = [first]
    for level in range(depth):
        if level > 0:
            graph = session.facts_around(frontier)
        frontier = [
            found
            for node in frontier
            if node in graph  # else expired or removed since the level above was read
            for found in walk.follow(graph, node, level, direction)
        ]
        if not frontier:
            break
    return TraverseOut(
        entity=session.entity,
        start=first,
        nodes=list(walk.nodes.values()),
        edges=list(walk.edges.values()),
        truncated=walk.truncated,
    )


class _Walk:
    """What a traversal found so far, within its bounds."""

    def __init__(
        self, first: str, data: Mapping[str, Any], max_nodes: int, wanted: set[str] | None
    ) -> None:
        self.max_nodes = max_nodes
        self.wanted = wanted
        self.nodes = {first: _traverse_node(first, data, 0)}
        self.edges: dict[tuple[str, str, str], TraverseEdge] = {}
        self.truncated = False

    def follow(self, graph: nx.MultiDiGraph, node: str, level: int, direction: str) -> list[str]:
        """Take ``node``'s edges; return the nodes first reached through them."""
        reached: list[str] = []
        for source, target, key, data in _incident(graph, node, direction):
            if self.wanted is not None and data.get("relationship") not in self.wanted:
                continue
            other = target if source == node else source
            if other not in self.nodes:
                if len(self.nodes) >= self.max_nodes:
                    self.truncated = True
                    continue
                self.nodes[other] = _traverse_node(other, graph.nodes[other], level + 1)
                reached.append(other)
            if (source, target, key) not in self.edges:
                if len(self.edges) >= MAX_TRAVERSE_EDGES:
                    self.truncated = True
                    continue
                self.edges[(source, target, key)] = TraverseEdge(
                    id=fact_id(edge_key(source, target, key)),
                    source=source,
                    target=target,
                    relationship=str(data.get("relationship", "")),
                )
        return reached


def _traverse_node(node_id: str, data: Mapping[str, Any], depth: int) -> TraverseNode:
    return TraverseNode(
        id=node_id, label=str(data.get("label", "")), name=_name(node_id, data), depth=depth
    )


def _incident(
    graph: nx.MultiDiGraph, node: str, direction: str
) -> Iterable[tuple[str, str, str, Mapping[str, Any]]]:
    if direction in ("out", "both"):
        yield from graph.out_edges(node, keys=True, data=True)
    if direction in ("in", "both"):
        yield from graph.in_edges(node, keys=True, data=True)


# ---------------------------------------------------------------------------- history


def history(session: EntitySession, fact: str) -> HistoryOut:
    """Every stored version of a node (by id) or an edge (``source -[key]-> target``), oldest
    first.

    Raises:
        UsageError: the entity never had such a fact.
    """

    edge = edge_key_from_id(fact)
    ends = None if edge is None else edge[1:]
    rows: list[dict[str, Any]] = []
    current_id: str | None = None
    if ends is not None:
        source, target, key = ends
        rows = session.edge_history(source, target, key)
        if any(row["valid_to_version"] is None for row in rows):
            current_id = fact
    if not rows:
        rows = session.node_history(fact)
        current_id = session.canonical_id(fact) if rows else None
    if not rows:
        raise UsageError(
            f"entity {session.entity!r} has no fact {fact!r}; give a node id or an edge as "
            "'source -[key]-> target' (ids come from search_memory and get_node)"
        )
    return HistoryOut(
        entity=session.entity,
        fact=fact,
        current_id=current_id,
        versions=[
            HistoryVersion(
                properties=dict(row.get("properties") or {}),
                type=str(row.get("type")),
                valid_from_version=int(row["valid_from_version"]),
                valid_to_version=row.get("valid_to_version"),
                closed_reason=row.get("closed_reason"),
                superseded_at=row.get("superseded_at"),
                canonical_id=row.get("canonical_id"),
                provenance=_row_provenance(row),
            )
            for row in rows
        ],
    )


# ---------------------------------------------------------------------------- types, counts


def list_types(session: EntitySession) -> TypesOut:
    catalog = session.type_catalog().to_dict()
    return TypesOut(
        entity=session.entity,
        node_types=catalog["node_types"],
        edge_types=catalog["edge_types"],
    )


def stats(session: EntitySession) -> dict[str, Any]:
    return {
        "entity": session.entity,
        "version": latest_version(session),
        **session.stats().to_dict(),
    }


# ---------------------------------------------------------------------------- helpers


def _plain(data: Mapping[str, Any], label_key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not k.startswith("_") and k != label_key}


def _name(node_id: str, data: Mapping[str, Any]) -> str:
    for key in ("name", "title"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return node_id


def _current_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    current = [row for row in rows if row.get("valid_to_version") is None]
    return current[-1] if current else None


def _provenance(data: Mapping[str, Any], row: Mapping[str, Any] | None) -> FactProvenance:
    """A current fact's provenance: its metadata, plus the step and sources of its row."""
    return FactProvenance(
        confidence=data.get("_confidence"),
        source_kind=data.get("_source_kind"),
        source_ref=data.get("_source_ref"),
        run_id=data.get("_run_id"),
        step=row.get("step") if row is not None else None,
        created_at=data.get("_created_at"),
        updated_at=data.get("_updated_at"),
        corroborations=data.get("_corroborations"),
        version=data.get("_version"),
        sources=list(row.get("sources") or []) if row is not None else [],
    )


def _row_provenance(row: Mapping[str, Any]) -> FactProvenance:
    return FactProvenance(
        confidence=row.get("confidence"),
        source_kind=row.get("source_kind"),
        source_ref=row.get("source_ref"),
        run_id=row.get("run_id"),
        step=row.get("step"),
        created_at=row.get("created_at"),
        updated_at=row.get("updated_at"),
        corroborations=row.get("corroborations"),
        version=row.get("valid_from_version"),
        sources=list(row.get("sources") or []),
    )


def _edge_out(edge: tuple[str, str, str, Mapping[str, Any]]) -> EdgeOut:
    source, target, key, data = edge
    return EdgeOut(
        id=fact_id(edge_key(source, target, key)),
        source=source,
        target=target,
        relationship=str(data.get("relationship", "")),
        key=key,
        properties=_plain(data, "relationship"),
        provenance=_provenance(data, None),
    )
