"""The run's graph, held by a resident worker's zygote between jobs.

The host sends the graph once as records (``load``), then only the records of what it applied
since (``delta``); :func:`apply` is the hook the zygote calls for each (see
:mod:`kgot.sandbox.worker`). Jobs are forked from the zygote afterwards and find the state here
(:func:`expect`): the NetworkX job runs the model's code on :attr:`Resident.graph`, the SPARQL
job on :attr:`Resident.store`. A job's changes stay in its own copy-on-write memory; the held
state changes only through the host's next ``delta``, after the host checked and applied the
job's changeset.

One worker holds one run's state, ever: the first key it is given is the only one it accepts,
so a run's graph never sits in memory a job of another run could read.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgot.graph_model.nx_fast import node_table, predecessor_table, successor_table, tables
from kgot.graph_model.records import EdgeIdent, NodeAttrs, parse_records, private_copy

from .outcome import collector_paused

HOOK = "kgotjob.resident:apply"
_JOB_MODULES = {"networkx": "python_job", "rdf": "sparql_job"}
STALE = "resident_stale"  # a job's failure kind: the worker lacks the state it was sent for


@dataclass
class Resident:
    """One run's graph as of host version :attr:`version`."""

    key: str
    version: int
    kind: str  # "networkx" | "rdf"
    nodes: dict[str, NodeAttrs]  # the records as sent: what a write job diffs against
    edges: dict[EdgeIdent, NodeAttrs]
    graph: Any = None  # networkx: a MultiDiGraph with private copies of the attributes
    store: Any = None  # rdf: a pyoxigraph Store holding the graph's triples
    typed: set[str] = field(default_factory=set)  # rdf: ids of typed nodes
    # (source, target) -> edge keys between them: deltas find an edge group without a scan.
    # (dicts as ordered sets: the edges between two nodes keep the host's order)
    pairs: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)
    # networkx: which element each container belongs to, and each node's pairs (see .tracked)
    owners: Any = None
    incident: dict[str, set[tuple[str, str]]] = field(default_factory=dict)


class _Held:
    """What this process holds: the state, and the one run key it may ever hold."""

    state: Resident | None = None
    bound_key: str | None = None


HELD = _Held()


def apply(request: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    """Load or update the held state; raises (and drops the state) when it cannot.

    ``request``: ``{"op": "load" | "delta", "key", "kind", "version", "base"}``; ``blobs[0]``
    is a records array (the whole graph for ``load``, the changes since ``base`` for
    ``delta``).
    """
    key = str(request["key"])
    if HELD.bound_key is None:
        HELD.bound_key = key
    elif key != HELD.bound_key:
        raise PermissionError("this worker holds another run's graph; use a worker of its own")
    op, version = request["op"], int(request["version"])
    text = blobs[0].decode("utf-8") if blobs else "[]"
    try:
        with collector_paused():
            if op == "load":
                HELD.state = None
                gc.unfreeze()  # the graph held before goes: let the collector find it
                gc.collect()
                HELD.state = _load(key, str(request["kind"]), version, text)
            elif op == "delta":
                state = HELD.state
                if state is None or state.version != int(request["base"]):
                    raise LookupError("the held graph is not the delta's base; load it whole")
                _apply_delta(state, text)
                state.version = version
            else:
                raise ValueError(f"unknown state operation {op!r}")
    except BaseException:
        HELD.state = None
        gc.collect()
        raise
    held = HELD.state
    assert held is not None
    gc.collect()
    gc.freeze()  # jobs' collections skip the held graph: they would copy every page of it
    return {"version": version, "nodes": len(held.nodes), "edges": len(held.edges)}


def expect(files_dir: str = "in") -> Resident | None:
    """The held state a job was sent for (``in/resident.json``), or ``None`` when the job
    carries its graph in files.

    Raises:
        LookupError: the job expects a state this worker does not hold (the host reloads it).
    """
    try:
        with open(f"{files_dir}/resident.json", encoding="utf-8") as handle:
            wanted = json.load(handle)
    except FileNotFoundError:
        return None
    state = HELD.state
    if state is None or state.key != wanted.get("key") or state.version != wanted.get("version"):
        raise LookupError("the resident graph is not the version this job was sent for")
    return state


# -- loading --------------------------------------------------------------------------------


def _load(key: str, kind: str, version: int, text: str) -> Resident:
    import importlib

    # The job module too, so that no job pays for compiling it.
    importlib.import_module(f"{__package__}.{_JOB_MODULES[kind]}")
    nodes, edges = parse_records(text)
    state = Resident(key=key, version=version, kind=kind, nodes=nodes, edges=edges)
    for source, target, edge_key in edges:
        state.pairs.setdefault((source, target), {})[edge_key] = None
    if kind == "networkx":
        state.graph = _networkx_graph(nodes, edges)
        _index_networkx(state)
    elif kind == "rdf":
        _load_store(state)
    else:
        raise ValueError(f"unknown graph kind {kind!r}")
    return state


def _networkx_graph(nodes: dict[str, NodeAttrs], edges: dict[EdgeIdent, NodeAttrs]) -> Any:
    """A tracked graph (see :mod:`.tracked`) whose attribute dicts are copies: the job's code
    changes them, the diff needs the originals."""
    from .tracked import MultiDiGraph, TrackedDict

    graph = MultiDiGraph()
    node_map, succ, pred = tables(graph)
    for node_id, attrs in nodes.items():
        dict.__setitem__(node_map, node_id, TrackedDict(private_copy(attrs)))
        dict.__setitem__(succ, node_id, TrackedDict())
        dict.__setitem__(pred, node_id, TrackedDict())
    for (source, target, key), attrs in edges.items():
        keyed = succ[source].get(target)
        if keyed is None:
            keyed = TrackedDict()
            dict.__setitem__(succ[source], target, keyed)
            dict.__setitem__(pred[target], source, keyed)
        dict.__setitem__(keyed, key, TrackedDict(private_copy(attrs)))
    return graph


def _index_networkx(state: Resident) -> None:
    from .tracked import TOUCHED, Owners

    state.owners = Owners()
    state.owners.index(state.graph)
    state.incident = {}
    for source, target in state.pairs:
        state.incident.setdefault(source, set()).add((source, target))
        state.incident.setdefault(target, set()).add((source, target))
    TOUCHED.clear()


def _load_store(state: Resident) -> None:
    import pyoxigraph as ox

    from .rdf_model import graph_ntriples

    ntriples = graph_ntriples(
        state.nodes.items(), ((s, t, k, a) for (s, t, k), a in state.edges.items())
    )
    store = ox.Store()
    if ntriples.strip():
        store.bulk_load(ntriples.encode("utf-8"), ox.RdfFormat.N_TRIPLES)
    state.store = store
    _snapshot(state)


def _snapshot(state: Resident) -> None:
    """The typed nodes, computed once per load instead of per job (and kept up to date by
    deltas). The store's statements are not kept as a Python set: every job would pay for
    forking it, and only updates beyond ``INSERT DATA`` / ``DELETE DATA`` need them."""
    import pyoxigraph as ox

    from .rdf_model import RDF_TYPE, typed_nodes

    kind = ox.NamedNode(RDF_TYPE)
    statements = state.store.quads_for_pattern(None, kind, None, ox.DefaultGraph())
    state.typed = typed_nodes(statements, ox)


# -- deltas ---------------------------------------------------------------------------------


def _apply_delta(state: Resident, text: str) -> None:
    nodes, edges, pairs = state.nodes, state.edges, state.pairs
    touched_nodes: set[str] = set()
    touched_pairs: set[tuple[str, str]] = set()
    for record in json.loads(text):
        kind = record[0]
        if kind == "n":
            nodes[record[1]] = record[2]
            touched_nodes.add(record[1])
        elif kind == "-n":
            nodes.pop(record[1], None)
            touched_nodes.add(record[1])
        elif kind == "e":
            edges[(record[1], record[2], record[3])] = record[4]
            pairs.setdefault((record[1], record[2]), {})[record[3]] = None
            touched_pairs.add((record[1], record[2]))
        elif kind == "-e":
            edges.pop((record[1], record[2], record[3]), None)
            keys = pairs.get((record[1], record[2]))
            if keys is not None:
                keys.pop(record[3], None)
                if not keys:
                    del pairs[(record[1], record[2])]
            touched_pairs.add((record[1], record[2]))
        else:
            raise ValueError(f"unknown record kind {kind!r}")
    if state.kind == "networkx":
        _update_graph(state, touched_nodes, touched_pairs)
    else:
        _update_store(state, touched_nodes, touched_pairs)


def _update_graph(
    state: Resident, touched_nodes: set[str], touched_pairs: set[tuple[str, str]]
) -> None:
    from .tracked import TOUCHED, TrackedDict

    graph, nodes, owners = state.graph, state.nodes, state.owners
    node_map = node_table(graph)  # the graph's own dict: add_node and remove_node keep it
    for node_id in touched_nodes:
        if node_id in nodes:
            if node_id not in node_map:
                graph.add_node(node_id)
            dict.__setitem__(node_map, node_id, TrackedDict(private_copy(nodes[node_id])))
            owners.learn_node(graph, node_id)
        elif node_id in node_map:
            graph.remove_node(node_id)  # its edges were removed by records of their own
            owners.deep.discard(node_id)
    for source, target in touched_pairs:
        _update_pair(state, source, target)
    TOUCHED.clear()  # the host's own changes are the baseline, not a job's


def _update_pair(state: Resident, source: str, target: str) -> None:
    """Make the edges between two nodes those the records say."""
    from .tracked import TrackedDict

    graph, owners = state.graph, state.owners
    succ, pred = successor_table(graph), predecessor_table(graph)
    keyed = succ.get(source, {}).get(target)
    if keyed is not None:
        for key in list(keyed):
            owners.deep.discard((source, target, key))
        dict.clear(keyed)
    keys = state.pairs.get((source, target), {})
    if keys and keyed is None:
        keyed = TrackedDict()
        dict.__setitem__(succ[source], target, keyed)
        dict.__setitem__(pred[target], source, keyed)
    for key in keys:
        attrs = state.edges[(source, target, key)]
        assert keyed is not None  # made above whenever there are keys
        dict.__setitem__(keyed, key, TrackedDict(private_copy(attrs)))
    if keyed is not None and not keys:
        dict.__delitem__(succ[source], target)
        dict.__delitem__(pred[target], source)
    elif keyed is not None:
        owners.learn_pair(graph, source, target, keyed)
    for end in (source, target):
        incident = state.incident.setdefault(end, set())
        if keys:
            incident.add((source, target))
        else:
            incident.discard((source, target))


def _update_store(
    state: Resident, touched_nodes: set[str], touched_pairs: set[tuple[str, str]]
) -> None:
    import pyoxigraph as ox

    from .rdf_model import (
        KG_SOURCE,
        KG_TARGET,
        REL,
        edge_group_ntriples,
        node_iri,
        node_ntriples,
    )

    store, default = state.store, ox.DefaultGraph()
    removed: list[Any] = []
    lines: list[str] = []
    for node_id in touched_nodes:
        subject = ox.NamedNode(node_iri(node_id))
        removed += [
            q
            for q in store.quads_for_pattern(subject, None, None, default)
            if not q.predicate.value.startswith(REL)
        ]
        if node_id in state.nodes:
            lines.append(node_ntriples(node_id, state.nodes[node_id]))
    source_p, target_p = ox.NamedNode(KG_SOURCE), ox.NamedNode(KG_TARGET)
    for source, target in touched_pairs:
        s, t = ox.NamedNode(node_iri(source)), ox.NamedNode(node_iri(target))
        removed += [
            q
            for q in store.quads_for_pattern(s, None, t, default)
            if q.predicate.value.startswith(REL)
        ]
        described = {q.subject for q in store.quads_for_pattern(None, source_p, s, default)}
        for description in described:
            if any(True for _ in store.quads_for_pattern(description, target_p, t, default)):
                removed += list(store.quads_for_pattern(description, None, None, default))
        groups: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        for key in state.pairs.get((source, target), ()):
            attrs = state.edges[(source, target, key)]
            groups.setdefault(str(attrs.get("relationship")), []).append((key, attrs))
        for relationship, group in groups.items():
            lines.append(edge_group_ntriples(source, target, relationship, group))
    for quad in removed:
        store.remove(quad)
    text = "\n".join(line for line in lines if line)
    added = list(ox.parse(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)) if text else []
    for triple in added:  # parsed N-Triples land in the default graph
        quad = ox.Quad(triple.subject, triple.predicate, triple.object, default)
        store.add(quad)
    state.typed.difference_update(touched_nodes)
    state.typed.update(n for n in touched_nodes if n in state.nodes)
