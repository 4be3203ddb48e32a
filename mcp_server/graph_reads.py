"""Reads of one entity's graph for the MCP tools: a node with its edges and provenance, a
bounded traversal, a fact's versions, the types, the counts.

Nodes and edges come from the entity's current graph with metadata
(``EntitySession.load_graph(include_meta=True)``), kept per entity while its version stays the
same (:class:`GraphCache`); a write by anyone makes the next read load it again. Facts that
expired since the load are skipped at read time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from kgot.errors import UsageError
from kgot.mcp_server.models import (
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

if TYPE_CHECKING:
    import networkx as nx

    from kgot.persistence import EntitySession

__all__ = [
    "GraphCache",
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


class GraphCache:
    """One current graph (with metadata) per entity, reloaded when the entity's version moves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graphs: dict[int, tuple[int, nx.MultiDiGraph]] = {}
        self._loading: dict[int, threading.Lock] = {}

    def get(self, session: EntitySession) -> nx.MultiDiGraph:
        key = id(session)
        version = latest_version(session)
        with self._lock:
            found = self._graphs.get(key)
            loading = self._loading.setdefault(key, threading.Lock())
        if found is not None and found[0] == version:
            return found[1]
        with loading:  # concurrent readers wait for one load instead of loading in parallel
            with self._lock:
                found = self._graphs.get(key)
            if found is not None and found[0] == version:
                return found[1]
            graph = session.load_graph(include_meta=True, track=False)
            with self._lock:
                self._graphs[key] = (int(graph.graph.get("kgot_version", version)), graph)
            return graph


def latest_version(session: EntitySession) -> int:
    """The entity's newest version in the store (another process may have written since)."""
    newest = session.commits(limit=1)
    return int(newest[0]["version"]) if newest else 0


def edge_id(source: str, target: str, key: str) -> str:
    return f"{source} -[{key}]-> {target}"


# ---------------------------------------------------------------------------- nodes


def get_node(session: EntitySession, graph: nx.MultiDiGraph, node_id: str) -> NodeOut:
    """The node ``node_id`` names (an alias leads to its canonical node), its properties,
    provenance and edges (at most :data:`MAX_EDGES_SHOWN` each way).

    Raises:
        UsageError: no such current node in this entity.
    """
    now = datetime.now(UTC)
    found = _current_node(session, graph, node_id, now)
    data = graph.nodes[found]
    current = _current_row(session.node_history(found))
    out = [e for e in graph.out_edges(found, keys=True, data=True) if _edge_alive(graph, e, now)]
    into = [e for e in graph.in_edges(found, keys=True, data=True) if _edge_alive(graph, e, now)]
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


def _current_node(
    session: EntitySession, graph: nx.MultiDiGraph, node_id: str, now: datetime
) -> str:
    if node_id in graph and _alive(graph.nodes[node_id], now):
        return node_id
    canonical = session.canonical_id(node_id)
    if canonical is not None and canonical in graph and _alive(graph.nodes[canonical], now):
        return canonical
    raise UsageError(
        f"no node {node_id!r} in entity {session.entity!r}; find ids with search_memory"
    )


def traverse(
    session: EntitySession,
    graph: nx.MultiDiGraph,
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
    now = datetime.now(UTC)
    first = _current_node(session, graph, start, now)
    wanted = set(relationships) if relationships else None
    depths = {first: 0}
    edges: dict[tuple[str, str, str], TraverseEdge] = {}
    queue = deque([first])
    truncated = False
    while queue:
        node = queue.popleft()
        if depths[node] >= depth:
            continue
        for source, target, key, data in _incident(graph, node, direction):
            if wanted is not None and data.get("relationship") not in wanted:
                continue
            if not _edge_alive(graph, (source, target, key, data), now):
                continue
            other = target if source == node else source
            if other not in depths:
                if len(depths) >= max_nodes:
                    truncated = True
                    continue
                depths[other] = depths[node] + 1
                queue.append(other)
            if (source, target, key) not in edges:
                if len(edges) >= MAX_TRAVERSE_EDGES:
                    truncated = True
                    continue
                edges[(source, target, key)] = TraverseEdge(
                    id=edge_id(source, target, key),
                    source=source,
                    target=target,
                    relationship=str(data.get("relationship", "")),
                )
    return TraverseOut(
        entity=session.entity,
        start=first,
        nodes=[
            TraverseNode(
                id=node,
                label=str(graph.nodes[node].get("label", "")),
                name=_name(node, graph.nodes[node]),
                depth=level,
            )
            for node, level in depths.items()
        ],
        edges=list(edges.values()),
        truncated=truncated,
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
    from kgot.memory.search import parse_edge_id

    ends = parse_edge_id(fact)
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


def _alive(data: Mapping[str, Any], now: datetime) -> bool:
    from kgot.memory.scoring import parse_instant

    expires = parse_instant(data.get("_expires_at"))
    return expires is None or expires > now


def _edge_alive(
    graph: nx.MultiDiGraph, edge: tuple[str, str, str, Mapping[str, Any]], now: datetime
) -> bool:
    source, target, _key, data = edge
    return (
        _alive(data, now) and _alive(graph.nodes[source], now) and _alive(graph.nodes[target], now)
    )


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
        id=edge_id(source, target, key),
        source=source,
        target=target,
        relationship=str(data.get("relationship", "")),
        key=key,
        properties=_plain(data, "relationship"),
        provenance=_provenance(data, None),
    )
