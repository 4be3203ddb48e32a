"""Nodes, edges and changesets: the property graph every layer of kgot speaks.

* a node has a unique string ``id``, a ``label`` (its type) and JSON-serializable properties;
* an edge has ``source``, ``target``, a ``relationship`` (its type), a string ``key`` that tells
  parallel edges apart (by default the relationship itself), and JSON-serializable properties;
* a :class:`Changeset` is the difference between a graph before and after a change, applied
  whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

Properties = dict[str, Any]


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    properties: Properties = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "properties": self.properties}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(str(data["id"]), str(data["label"]), dict(data.get("properties") or {}))


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    relationship: str
    key: str = ""  # "" means "same as relationship"
    properties: Properties = field(default_factory=dict)

    @property
    def ident(self) -> tuple[str, str, str]:
        """Identity of the edge in its graph: (source, target, key)."""
        return (self.source, self.target, self.key or self.relationship)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "relationship": self.relationship,
            "key": self.key or self.relationship,
            "properties": self.properties,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Edge:
        return cls(
            str(data["source"]),
            str(data["target"]),
            str(data["relationship"]),
            str(data.get("key") or data["relationship"]),
            dict(data.get("properties") or {}),
        )


@dataclass(frozen=True)
class Changeset:
    """The difference between a graph before and after some write code ran on a copy.

    ``changed_*`` hold the *new* version; the old one is in the graph the changeset applies to.
    Removing a node lists its incident edges in ``removed_edges`` explicitly.

    ``base`` names the graph version a backend computed the changeset from (``(graph token,
    version)``, set by ``propose``). Applying it refuses the changeset when an element it
    changes or removes changed after that version, instead of overwriting the newer values.
    Changesets made by hand (``base=None``) are not checked that way.
    """

    added_nodes: tuple[Node, ...] = ()
    changed_nodes: tuple[Node, ...] = ()
    removed_nodes: tuple[str, ...] = ()
    added_edges: tuple[Edge, ...] = ()
    changed_edges: tuple[Edge, ...] = ()
    removed_edges: tuple[tuple[str, str, str], ...] = ()  # (source, target, key)
    base: tuple[str, int] | None = None  # (graph token, version) it was computed from

    @property
    def is_empty(self) -> bool:
        return not (
            self.added_nodes
            or self.changed_nodes
            or self.removed_nodes
            or self.added_edges
            or self.changed_edges
            or self.removed_edges
        )

    def summary(self) -> str:
        """One line, e.g. ``+3 nodes ~1 node -0 nodes, +2 edges``."""
        parts = []
        for sign, items, noun in (
            ("+", self.added_nodes, "node"),
            ("~", self.changed_nodes, "node"),
            ("-", self.removed_nodes, "node"),
            ("+", self.added_edges, "edge"),
            ("~", self.changed_edges, "edge"),
            ("-", self.removed_edges, "edge"),
        ):
            if items:
                parts.append(f"{sign}{len(items)} {noun}{'s' if len(items) != 1 else ''}")
        return ", ".join(parts) or "no changes"

    def to_dict(self) -> dict[str, Any]:
        """JSON data; ``base`` appears only when set."""
        data: dict[str, Any] = {
            "added_nodes": [n.to_dict() for n in self.added_nodes],
            "changed_nodes": [n.to_dict() for n in self.changed_nodes],
            "removed_nodes": list(self.removed_nodes),
            "added_edges": [e.to_dict() for e in self.added_edges],
            "changed_edges": [e.to_dict() for e in self.changed_edges],
            "removed_edges": [list(ident) for ident in self.removed_edges],
        }
        if self.base is not None:
            data["base"] = {"graph": self.base[0], "version": self.base[1]}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Changeset:
        """The changeset of :meth:`to_dict` (hand-made changesets have no ``base``)."""
        base = data.get("base")
        return cls(
            added_nodes=tuple(Node.from_dict(n) for n in data.get("added_nodes", ())),
            changed_nodes=tuple(Node.from_dict(n) for n in data.get("changed_nodes", ())),
            removed_nodes=tuple(str(n) for n in data.get("removed_nodes", ())),
            added_edges=tuple(Edge.from_dict(e) for e in data.get("added_edges", ())),
            changed_edges=tuple(Edge.from_dict(e) for e in data.get("changed_edges", ())),
            removed_edges=tuple(
                (str(s), str(t), str(k)) for s, t, k in data.get("removed_edges", ())
            ),
            base=(str(base["graph"]), int(base["version"])) if base else None,
        )


@dataclass(frozen=True)
class GraphStats:
    nodes: int
    edges: int
    nodes_by_label: Mapping[str, int]
    edges_by_relationship: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "edges": self.edges,
            "nodes_by_label": dict(self.nodes_by_label),
            "edges_by_relationship": dict(self.edges_by_relationship),
        }


def graph_stats(graph: nx.MultiDiGraph) -> GraphStats:
    """Counts per label and relationship for a property graph."""
    by_label: dict[str, int] = {}
    for _, data in graph.nodes(data=True):
        label = str(data.get("label", "?"))
        by_label[label] = by_label.get(label, 0) + 1
    by_rel: dict[str, int] = {}
    for _, _, data in graph.edges(data=True):
        rel = str(data.get("relationship", "?"))
        by_rel[rel] = by_rel.get(rel, 0) + 1
    return GraphStats(
        graph.number_of_nodes(),
        graph.number_of_edges(),
        dict(sorted(by_label.items())),
        dict(sorted(by_rel.items())),
    )


def apply_to_networkx(graph: nx.MultiDiGraph, changeset: Changeset) -> None:
    """Apply a changeset to a property graph in place (callers pass a copy for atomicity)."""
    for source, target, key in changeset.removed_edges:
        if graph.has_edge(source, target, key):
            graph.remove_edge(source, target, key)
    graph.remove_nodes_from(changeset.removed_nodes)
    for node in (*changeset.added_nodes, *changeset.changed_nodes):
        if graph.has_node(node.id):
            graph.nodes[node.id].clear()
        graph.add_node(node.id, label=node.label, **node.properties)
    for edge in (*changeset.added_edges, *changeset.changed_edges):
        source, target, key = edge.ident
        if graph.has_edge(source, target, key):
            graph.remove_edge(source, target, key)
        graph.add_edge(source, target, key=key, relationship=edge.relationship, **edge.properties)


def nodes_of(graph: nx.MultiDiGraph) -> Iterable[Node]:
    for node_id, data in graph.nodes(data=True):
        props = {k: v for k, v in data.items() if k != "label"}
        yield Node(str(node_id), str(data.get("label", "")), props)


def edges_of(graph: nx.MultiDiGraph) -> Iterable[Edge]:
    for source, target, key, data in graph.edges(keys=True, data=True):
        props = {k: v for k, v in data.items() if k != "relationship"}
        yield Edge(str(source), str(target), str(data.get("relationship", "")), str(key), props)
