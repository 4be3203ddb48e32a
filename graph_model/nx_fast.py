"""NetworkX's internal tables, reached from this one module.

A :class:`networkx.MultiDiGraph` keeps its data in plain dicts: ``_node`` (node id → attribute
dict), ``_succ`` (source → target → key → attribute dict) and ``_pred`` (target → source → the
*same* key dict as ``_succ``), with ``_adj`` the very object ``_succ`` is. Its public views
(``graph.nodes``, ``graph.adj``, ``graph.edges``) wrap those dicts in objects built per access,
which costs more than the work for the hot paths of kgot: loading 100k facts, diffing a job's
graph, indexing a view. Those paths read and write the tables directly, as networkx documents
for subclasses, and they do it through the functions below so that every reliance on the
internals is in one place.

What they rely on is pinned by ``tests/graph_backends/test_graph_backends_nx_fast.py``: a
networkx release that renames or reshapes a table fails that test loudly instead of corrupting
graphs quietly, and ``pyproject.toml`` bounds networkx below its next major version.

Standard library and networkx only: this module ships into sandbox jobs next to
:mod:`kgot.graph_model.records` (see :mod:`kgot.graph_backends.runner`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

NodeTable = dict[Any, dict[str, Any]]
"""Node id → the node's attribute dict (the dict ``graph.nodes[n]`` shows)."""

Adjacency = dict[Any, dict[Any, dict[Any, dict[str, Any]]]]
"""Node → neighbour → edge key → the edge's attribute dict."""


def node_table(graph: nx.MultiDiGraph) -> NodeTable:
    """The graph's node table: ``graph.nodes[n]`` is ``node_table(graph)[n]``, same object."""
    return graph._node


def successor_table(graph: nx.MultiDiGraph) -> Adjacency:
    """Source → target → key → attributes; ``graph.edges[s, t, k]`` is the innermost dict."""
    return graph._succ


def predecessor_table(graph: nx.MultiDiGraph) -> Adjacency:
    """Target → source → key dict, sharing each key dict with :func:`successor_table`."""
    return graph._pred


def tables(graph: nx.MultiDiGraph) -> tuple[NodeTable, Adjacency, Adjacency]:
    """The node table, the successor table and the predecessor table, in that order."""
    return graph._node, graph._succ, graph._pred


def adjacency_is_successors(graph: nx.MultiDiGraph) -> bool:
    """Whether ``graph.adj`` still reads the successor table (false once code rebinds either)."""
    return graph._adj is graph._succ


def forget_cached_conversions(graph: nx.MultiDiGraph) -> None:
    """Drop the converted graphs networkx caches on ``graph`` (``__networkx_cache__``).

    Its own mutators do this; code that writes the tables directly must do it too, or a
    dispatched algorithm could answer from the graph as it was."""
    import networkx as nx

    nx._clear_cache(graph)
