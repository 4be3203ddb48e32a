"""What kgot's NetworkX fast paths rely on (kgot/graph_model/nx_fast.py), pinned.

The loaders, the job diff and the views read and write MultiDiGraph's internal dicts. A
networkx release that changes them must fail here, by name, before it corrupts a graph.
"""

from __future__ import annotations

from typing import Any, ClassVar

import networkx as nx
import pytest

from kgot.graph_model.nx_fast import (
    adjacency_is_successors,
    forget_cached_conversions,
    node_table,
    predecessor_table,
    successor_table,
    tables,
)


def _graph() -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph()
    graph.add_node("a", label="City", name="Paris")
    graph.add_node("b", label="Country", name="France")
    graph.add_edge("a", "b", key="IN", since=1790)
    graph.add_edge("a", "b", key="CAPITAL_OF")
    return graph


def test_the_node_table_holds_the_attribute_dicts_the_public_view_shows() -> None:
    graph = _graph()
    table = node_table(graph)
    assert type(table) is dict and list(table) == ["a", "b"]
    assert table["a"] is graph.nodes["a"]
    table["a"]["name"] = "Lutetia"
    assert graph.nodes["a"]["name"] == "Lutetia"


def test_successors_and_predecessors_share_each_key_dict() -> None:
    graph = _graph()
    succ, pred = successor_table(graph), predecessor_table(graph)
    assert set(succ) == set(pred) == {"a", "b"}
    keyed = succ["a"]["b"]
    assert list(keyed) == ["IN", "CAPITAL_OF"]  # insertion order is edge order
    assert pred["b"]["a"] is keyed
    assert keyed["IN"] is graph.edges["a", "b", "IN"]
    assert succ["b"] == {} and pred["a"] == {}  # every node has both rows, empty or not
    assert tables(graph) == (node_table(graph), succ, pred)
    assert all(x is y for x, y in zip(tables(graph), (node_table(graph), succ, pred), strict=True))


def test_the_adjacency_is_the_successor_table() -> None:
    graph = _graph()
    assert adjacency_is_successors(graph)
    assert graph.adj["a"]["b"] == successor_table(graph)["a"]["b"]
    # Rebinding one rebinds both, so a job whose code replaced the tables is caught by
    # comparing the successor table with the one loaded (graph_backends/jobs/tracked.py).
    loaded = successor_table(graph)
    graph._adj = {node: dict(row) for node, row in loaded.items()}
    assert adjacency_is_successors(graph) and successor_table(graph) is not loaded
    graph.__dict__["_adj"] = {}
    assert not adjacency_is_successors(graph)


def test_removing_the_last_key_removes_the_pair_from_both_tables() -> None:
    graph = _graph()
    graph.remove_edge("a", "b", key="IN")
    assert list(successor_table(graph)["a"]["b"]) == ["CAPITAL_OF"]
    graph.remove_edge("a", "b", key="CAPITAL_OF")
    assert "b" not in successor_table(graph)["a"]
    assert "a" not in predecessor_table(graph)["b"]
    graph.remove_node("b")
    assert "b" not in node_table(graph) and "b" not in predecessor_table(graph)


class _Recording(dict):  # type: ignore[type-arg]
    """A dict that records which keys were set through it, as kgot's tracked dicts do
    (item assignment and ``update``: networkx adds attributes with ``update``)."""

    seen: ClassVar[list[Any]] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        _Recording.seen.append(key)
        dict.__setitem__(self, key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        _Recording.seen.extend(dict(*args, **kwargs))
        dict.update(self, *args, **kwargs)


class _RecordingGraph(nx.MultiDiGraph):  # type: ignore[misc]
    node_dict_factory = _Recording
    node_attr_dict_factory = _Recording
    adjlist_outer_dict_factory = _Recording
    adjlist_inner_dict_factory = _Recording
    edge_key_dict_factory = _Recording
    edge_attr_dict_factory = _Recording


def test_every_table_is_built_from_the_factories_and_written_through_item_assignment() -> None:
    """The job diff (graph_backends/jobs/tracked.py) learns what code changed from the dicts'
    own ``__setitem__``; networkx must keep building its tables from the class factories and
    writing them by item, not by ``dict.__setitem__`` or a literal."""
    _Recording.seen = []
    graph = _RecordingGraph()
    graph.add_node("a", name="Paris")
    graph.add_edge("a", "b", key="IN", since=1790)
    graph.nodes["a"]["name"] = "Lutetia"  # attribute changes go through the attr dict too
    node, succ, pred = tables(graph)
    for container in (node, succ, pred, node["a"], succ["a"], succ["a"]["b"]):
        assert type(container) is _Recording
    assert type(succ["a"]["b"]["IN"]) is _Recording
    assert {"a", "b", "IN", "since", "name"} <= set(_Recording.seen)


def test_forgetting_cached_conversions_clears_the_cache() -> None:
    graph = _graph()
    cache = getattr(graph, "__networkx_cache__", None)
    if cache is None:
        pytest.fail("networkx no longer keeps __networkx_cache__: check nx_fast")
    cache["converted"] = object()
    forget_cached_conversions(graph)
    assert graph.__networkx_cache__ == {}
