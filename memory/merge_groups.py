"""What a merge of nodes needs, shared by on-demand resolution and the upkeep pass.

:meth:`kgot.memory.api.Memory.resolve` (and accepting a merge suggestion) and
:func:`kgot.memory.upkeep.run_upkeep` merge groups of nodes the same way: each node is read off
the graph as a :class:`~kgot.graph_model.Node`, the node with the most evidence stays, and the
group's properties are unioned onto it. Both import these helpers from here, a module that
imports neither of them, so neither has to import the other lazily.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kgot.graph_model import Node
from kgot.memory.resolution import node_names

if TYPE_CHECKING:
    import networkx as nx


def node_from_graph(node_id: str, data: Mapping[str, Any]) -> Node:
    """The node as the rules see it: its label, and its properties without kgot's own
    ``_``-prefixed bookkeeping."""
    plain = {k: v for k, v in data.items() if not k.startswith("_") and k != "label"}
    return Node(node_id, str(data.get("label", "")), plain)


def merge_evidence(graph: nx.MultiDiGraph) -> dict[str, float]:
    """Node id → current edges (in and out) + corroborations: which node of a group stays."""
    return {
        node_id: float(graph.degree(node_id)) + float(data.get("_corroborations") or 0)
        for node_id, data in graph.nodes(data=True)
    }


def merged_properties(
    canonical: Node, aliases: Sequence[Node], *, aliases_allowed: bool = True
) -> dict[str, Any]:
    """The union of a merge group's properties: the canonical node's values win, the aliases
    add what it lacks, and every alias's names join ``aliases`` (when the type takes it)."""
    merged = dict(canonical.properties)
    for alias in aliases:
        for key, value in alias.properties.items():
            if key not in ("name", "aliases"):
                merged.setdefault(key, value)
    if aliases_allowed:
        own = node_names(canonical.properties)
        names = list(own[1:])
        for alias in aliases:
            names.extend(node_names(alias.properties))
        keep = [n for n in dict.fromkeys(names) if n not in own[:1]]
        if keep:
            merged["aliases"] = keep
    return merged
