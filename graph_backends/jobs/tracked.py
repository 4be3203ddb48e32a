"""A NetworkX graph that notes what code changes in it, so a write is diffed in proportion to
its size rather than to the graph's.

The resident graph (:mod:`.resident`) is built from :class:`MultiDiGraph`, whose every internal
dict — the node table, the adjacency, the edge key dicts, the attribute dicts — is a
:class:`TrackedDict`: a ``dict`` that records itself and the keys it was asked to change. After
the model's code ran, :func:`changed_region` turns those records into the nodes and node pairs
that may differ from the graph as loaded; only they are compared.

Anything the records cannot account for falls back to the full comparison: ``G`` rebound or
rebuilt, a container replaced, a ``clear()``. Values nested inside attributes (lists, dicts)
change without their attribute dict knowing, so elements holding such values are always
compared (:attr:`Owners.deep`). Whatever the diff finds, the host checks the changeset against
its own graph again before applying it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from kgot.graph_model.nx_fast import (
    adjacency_is_successors,
    node_table,
    predecessor_table,
    successor_table,
    tables,
)

# id(dict) -> (dict, the keys it changed in the order it did, or None for "any key"). Holding
# the dict keeps its id from being reused by a new object while the job runs. Orders are kept
# (dicts as ordered sets) so that problems are listed in the order the code made them.
TOUCHED: dict[int, tuple[dict[Any, Any], dict[Any, None] | None]] = {}


def _note(container: dict[Any, Any], keys: Iterable[Any] | None) -> None:
    entry = TOUCHED.get(id(container))
    if entry is None:
        TOUCHED[id(container)] = (container, None if keys is None else dict.fromkeys(keys))
    elif entry[1] is not None:
        if keys is None:
            TOUCHED[id(container)] = (container, None)
        else:
            entry[1].update(dict.fromkeys(keys))


class TrackedDict(dict):  # type: ignore[type-arg]
    """A dict that notes which of its keys code set or removed (see :data:`TOUCHED`)."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        _note(self, (key,))
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        _note(self, (key,))
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        _note(self, (key,))
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Any, Any]:
        _note(self, None)
        return dict.popitem(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        _note(self, (key,))
        return dict.setdefault(self, key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            _note(self, list(args[0]))
        elif not args:
            _note(self, list(kwargs))
        else:
            _note(self, None)  # pairs or a mapping we would have to consume twice
        dict.update(self, *args, **kwargs)

    def clear(self) -> None:
        _note(self, None)
        dict.clear(self)

    def __ior__(self, other: Any) -> TrackedDict:  # type: ignore[override,misc]
        self.update(other)
        return self


class MultiDiGraph(nx.MultiDiGraph):  # type: ignore[misc]
    """``networkx.MultiDiGraph`` built from :class:`TrackedDict`\\ s (same name, same API)."""

    node_dict_factory = TrackedDict
    node_attr_dict_factory = TrackedDict
    adjlist_outer_dict_factory = TrackedDict
    adjlist_inner_dict_factory = TrackedDict
    edge_key_dict_factory = TrackedDict
    edge_attr_dict_factory = TrackedDict


@dataclass
class Owners:
    """Which element each container of the loaded graph belongs to (kept by the resident
    state, updated with every delta)."""

    node_table: Any = None
    succ: Any = None
    pred: Any = None
    attrs: dict[int, Any] = field(default_factory=dict)  # id -> node id or (s, t, k)
    out_of: dict[int, str] = field(default_factory=dict)  # id(succ[u]) -> u
    into: dict[int, str] = field(default_factory=dict)  # id(pred[v]) -> v
    pairs: dict[int, tuple[str, str]] = field(default_factory=dict)  # id(keydict) -> (s, t)
    deep: set[Any] = field(default_factory=set)  # node ids and (s, t, k) with nested values

    def index(self, graph: MultiDiGraph) -> None:
        """Learn every container of ``graph`` afresh."""
        self.node_table, self.succ, self.pred = tables(graph)
        self.attrs, self.out_of, self.into, self.pairs = {}, {}, {}, {}
        self.deep = set()
        for node_id in node_table(graph):
            self.learn_node(graph, node_id)
        for source, neighbours in successor_table(graph).items():
            for target, keyed in neighbours.items():
                self.learn_pair(graph, source, target, keyed)

    def learn_node(self, graph: MultiDiGraph, node_id: str) -> None:
        attrs = node_table(graph)[node_id]
        self.attrs[id(attrs)] = node_id
        self.out_of[id(successor_table(graph)[node_id])] = node_id
        self.into[id(predecessor_table(graph)[node_id])] = node_id
        if _nested(attrs):
            self.deep.add(node_id)
        else:
            self.deep.discard(node_id)

    def learn_pair(self, graph: MultiDiGraph, source: str, target: str, keyed: Any) -> None:
        self.pairs[id(keyed)] = (source, target)
        for key, attrs in keyed.items():
            self.attrs[id(attrs)] = (source, target, key)
            if _nested(attrs):
                self.deep.add((source, target, key))
            else:
                self.deep.discard((source, target, key))


def _nested(attrs: dict[str, Any]) -> bool:
    return any(isinstance(value, (list, dict)) for value in attrs.values())


@dataclass
class Region:
    """The nodes and node pairs a job's code may have changed."""

    nodes: dict[Any, None]  # ordered sets
    pairs: dict[tuple[Any, Any], None]


def changed_region(graph: Any, owners: Owners, before_pairs: dict[Any, Any]) -> Region | None:
    """What the code changed, from :data:`TOUCHED`; ``None`` when it cannot tell (the caller
    compares the whole graph). ``before_pairs``: node id -> the node pairs it had edges
    between before the code ran."""
    if not _intact(graph, owners):
        return None
    region = Region({}, {})
    for container, keys in TOUCHED.values():
        if not _account(graph, owners, container, keys, region):
            return None
    for item in owners.deep:
        if isinstance(item, tuple):
            region.pairs[(item[0], item[1])] = None
        else:
            region.nodes[item] = None
    # The edges of nodes added or removed are part of the change.
    pairs = region.pairs
    succ, pred = successor_table(graph), predecessor_table(graph)
    for node_id in list(region.nodes):
        pairs.update(dict.fromkeys((node_id, target) for target in succ.get(node_id, ())))
        pairs.update(dict.fromkeys((source, node_id) for source in pred.get(node_id, ())))
        pairs.update(dict.fromkeys(sorted(before_pairs.get(node_id, ()))))
    return region


def _intact(graph: Any, owners: Owners) -> bool:
    """Whether ``G`` is still the tracked graph, with its own containers."""
    return (
        type(graph) is MultiDiGraph
        and node_table(graph) is owners.node_table
        and successor_table(graph) is owners.succ
        and predecessor_table(graph) is owners.pred
        and adjacency_is_successors(graph)
    )


def _account(
    graph: Any, owners: Owners, container: Any, keys: dict[Any, None] | None, region: Region
) -> bool:
    """Add what a touched container says changed to ``region``; False if it cannot say."""
    if any(container is table for table in tables(graph)):
        if keys is None:
            return False
        region.nodes.update(keys)
        return True
    ident = id(container)
    owner = owners.attrs.get(ident)
    if owner is not None:
        if isinstance(owner, tuple):
            region.pairs[(owner[0], owner[1])] = None
        else:
            region.nodes[owner] = None
    elif ident in owners.pairs:
        region.pairs[owners.pairs[ident]] = None
    elif ident in owners.out_of:
        if keys is None:
            return False
        region.pairs.update(dict.fromkeys((owners.out_of[ident], target) for target in keys))
    elif ident in owners.into:
        if keys is None:
            return False
        region.pairs.update(dict.fromkeys((source, owners.into[ident]) for source in keys))
    # Otherwise a container the code made (a new node's, a new pair's): the element it belongs
    # to is new, and the node table or a neighbour dict noted it.
    return True
