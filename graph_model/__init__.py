"""The property graph at the bottom of kgot: nodes, edges, changesets, the rules their values
follow, and token estimates for rendering them.

Every layer may import this package; it imports nothing of kgot but :mod:`kgot.errors`.
:mod:`kgot.graph_model.records` (the record format and value rules) imports only the standard
library: it also ships into sandbox jobs (see :mod:`kgot.graph_backends.runner`).
"""

from __future__ import annotations

from kgot.graph_model.elements import (
    Changeset,
    Edge,
    GraphStats,
    Node,
    Properties,
    apply_to_networkx,
    edges_of,
    graph_stats,
    nodes_of,
)
from kgot.graph_model.token_estimate import count_tokens

__all__ = [
    "Changeset",
    "Edge",
    "GraphStats",
    "Node",
    "Properties",
    "apply_to_networkx",
    "count_tokens",
    "edges_of",
    "graph_stats",
    "nodes_of",
]
