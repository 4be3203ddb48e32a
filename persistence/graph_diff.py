"""The changeset between two property graphs (used to import a graph file into an entity)."""

from __future__ import annotations

import networkx as nx

from kgot.graph_model import Changeset, Edge, Node, edges_of, nodes_of


def diff_graphs(
    before: nx.MultiDiGraph, after: nx.MultiDiGraph, *, remove_missing: bool = True
) -> Changeset:
    """The changeset that turns ``before`` into ``after``.

    Node ids and edge keys are compared as strings (graph files may hold other types). With
    ``remove_missing=False`` facts absent from ``after`` are kept (a merge), otherwise they are
    removed, and a removed node's remaining edges are listed as removed too.
    """
    old_nodes = {node.id: node for node in nodes_of(before)}
    old_edges = {edge.ident: edge for edge in edges_of(before)}
    new_nodes = {node.id: node for node in nodes_of(after)}
    new_edges = {edge.ident: edge for edge in edges_of(after)}

    added_nodes: list[Node] = []
    changed_nodes: list[Node] = []
    for node_id, node in new_nodes.items():
        old = old_nodes.get(node_id)
        if old is None:
            added_nodes.append(node)
        elif (old.label, old.properties) != (node.label, node.properties):
            changed_nodes.append(node)
    added_edges: list[Edge] = []
    changed_edges: list[Edge] = []
    for ident, edge in new_edges.items():
        old_edge = old_edges.get(ident)
        if old_edge is None:
            added_edges.append(edge)
        elif (old_edge.relationship, old_edge.properties) != (edge.relationship, edge.properties):
            changed_edges.append(edge)

    removed_nodes: list[str] = []
    removed_edges: list[tuple[str, str, str]] = []
    if remove_missing:
        removed_nodes = [node_id for node_id in old_nodes if node_id not in new_nodes]
        removed_edges = [ident for ident in old_edges if ident not in new_edges]
    return Changeset(
        added_nodes=tuple(added_nodes),
        changed_nodes=tuple(changed_nodes),
        removed_nodes=tuple(removed_nodes),
        added_edges=tuple(added_edges),
        changed_edges=tuple(changed_edges),
        removed_edges=tuple(removed_edges),
    )
