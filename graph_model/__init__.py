"""The property graph at the bottom of kgot: nodes, edges, changesets, the rules their values
follow, and token estimates for rendering them.

Every layer may import this package; it imports nothing of kgot but :mod:`kgot.errors`.
:mod:`kgot.graph_model.records` (the record format and value rules) imports only the standard
library: it also ships into sandbox jobs (see :mod:`kgot.graph_backends.runner`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.graph_model.nx_fast import (
        forget_cached_conversions,
        node_table,
        predecessor_table,
        successor_table,
        tables,
    )
    from kgot.graph_model.records import (
        INT_MAX,
        INT_MIN,
        LABEL,
        MAX_VALUE_DEPTH,
        RELATIONSHIP,
        TYPE_NAME,
        EdgeIdent,
        canonical_json,
        cap_problems,
        check_edge,
        check_node,
        child_path,
        describe_edge,
        describe_id,
        edge_problems,
        edge_record,
        edge_removal_record,
        has_values,
        locate_value_problem,
        node_problems,
        node_record,
        oversized_problem,
        records_text,
        removal_record,
    )

# The record rules and the NetworkX fast paths load on first use. Sandbox jobs import those two
# modules by their own names: they travel into the job's zip without this __init__.
_LAZY = {
    "EdgeIdent": "kgot.graph_model.records",
    "INT_MAX": "kgot.graph_model.records",
    "INT_MIN": "kgot.graph_model.records",
    "LABEL": "kgot.graph_model.records",
    "MAX_VALUE_DEPTH": "kgot.graph_model.records",
    "RELATIONSHIP": "kgot.graph_model.records",
    "TYPE_NAME": "kgot.graph_model.records",
    "canonical_json": "kgot.graph_model.records",
    "has_values": "kgot.graph_model.records",
    "cap_problems": "kgot.graph_model.records",
    "check_edge": "kgot.graph_model.records",
    "check_node": "kgot.graph_model.records",
    "child_path": "kgot.graph_model.records",
    "describe_edge": "kgot.graph_model.records",
    "describe_id": "kgot.graph_model.records",
    "edge_problems": "kgot.graph_model.records",
    "edge_record": "kgot.graph_model.records",
    "edge_removal_record": "kgot.graph_model.records",
    "forget_cached_conversions": "kgot.graph_model.nx_fast",
    "locate_value_problem": "kgot.graph_model.records",
    "node_problems": "kgot.graph_model.records",
    "node_record": "kgot.graph_model.records",
    "node_table": "kgot.graph_model.nx_fast",
    "oversized_problem": "kgot.graph_model.records",
    "predecessor_table": "kgot.graph_model.nx_fast",
    "records_text": "kgot.graph_model.records",
    "removal_record": "kgot.graph_model.records",
    "successor_table": "kgot.graph_model.nx_fast",
    "tables": "kgot.graph_model.nx_fast",
}

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LABEL",
    "MAX_VALUE_DEPTH",
    "RELATIONSHIP",
    "TYPE_NAME",
    "Changeset",
    "Edge",
    "EdgeIdent",
    "GraphStats",
    "Node",
    "Properties",
    "apply_to_networkx",
    "canonical_json",
    "cap_problems",
    "check_edge",
    "check_node",
    "child_path",
    "count_tokens",
    "describe_edge",
    "describe_id",
    "edge_problems",
    "edge_record",
    "edge_removal_record",
    "edges_of",
    "forget_cached_conversions",
    "graph_stats",
    "has_values",
    "locate_value_problem",
    "node_problems",
    "node_record",
    "node_table",
    "nodes_of",
    "oversized_problem",
    "predecessor_table",
    "records_text",
    "removal_record",
    "successor_table",
    "tables",
]


__getattr__ = lazy_exports(__name__, _LAZY)
