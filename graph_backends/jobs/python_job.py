"""Runs model-written NetworkX code on a copy of the graph, inside the sandbox.

Inputs: ``in/graph.json`` (records, see :mod:`kgot.graph_model.records`), optionally
``in/graph_delta.json`` (records of changes since, applied after it), ``in/code.py`` and optionally
``in/options.json`` (``{"max_items": N}``). The code sees ``G`` (a ``networkx.MultiDiGraph``)
and ``nx``.

* ``read``: the code assigns ``result``; it is converted to JSON data (what has no JSON form
  becomes its ``repr``). Code that prints instead of assigning gets its printed text as result.
* ``write``: edges added without a string key get one (their relationship, ``REL~2`` … for
  parallel edges; an exact re-statement of an existing edge is dropped), then the graph is diffed
  against its input and checked against the graph rules. The job reports the changeset; the host
  checks it again before anything is applied.

  Existing facts the code stated again without changing them (``G.add_node`` with attributes on
  a node it left as it was, ``G.add_edge`` of an edge identical to one there) are reported as
  added with their current attributes: the diff alone would not show them, and the entity's
  store counts such a re-addition as a corroboration (a new source) or a reinforcement (the
  same source). Applying one to a graph changes nothing (:mod:`kgot.graph_backends.graph_state`).
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
from collections.abc import Iterable, Mapping
from typing import Any

from kgot.graph_model.nx_fast import node_table, successor_table
from kgot.graph_model.records import (
    RELATIONSHIP,
    canonical_json,
    diff_graphs,
    parse_records,
    private_copy,
)

from . import lookups, resident
from .outcome import (
    MAX_ITEMS,
    add_restatements,
    changeset_outcome,
    collector_paused,
    describe_exception,
    failure,
    is_empty,
    output_path,
    to_jsonable,
    write_outcome,
)
from .tracked import changed_region

CODE_FILENAME = "<graph code>"
MAX_PRINTED = 200_000


def main(mode: str) -> None:
    """Run ``in/code.py`` in ``mode`` (``read`` or ``write``) and write ``out/result.json``.

    The graph is the resident one when the job was sent for it (``in/resident.json``), else
    ``in/graph.json`` and ``in/graph_delta.json``.
    """
    result_path = output_path()
    with open("in/code.py", encoding="utf-8") as handle:
        code = handle.read()
    max_items = MAX_ITEMS
    answers: dict[str, list[str]] | None = None
    if os.path.exists("in/options.json"):
        with open("in/options.json", encoding="utf-8") as handle:
            options = json.load(handle)
        max_items = int(options.get("max_items", MAX_ITEMS))
        if isinstance(options.get("lookups"), dict):
            answers = dict(options["lookups"].get("answers") or {})
    try:
        state = resident.expect()
    except LookupError as error:
        write_outcome(result_path, failure(resident.STALE, str(error)))
        return
    if state is not None:
        outcome = run_on(
            mode,
            state.graph,
            state.nodes,
            state.edges,
            code,
            max_items=max_items,
            held=state,
            answers=answers,
        )
        write_outcome(result_path, outcome)
        return
    with open("in/graph.json", encoding="utf-8") as handle:
        records = [handle.read()]
    if os.path.exists("in/graph_delta.json"):
        with open("in/graph_delta.json", encoding="utf-8") as handle:
            records.append(handle.read())
    write_outcome(result_path, run(mode, records, code, max_items=max_items, answers=answers))


def run(
    mode: str,
    records: str | list[str],
    code: str,
    *,
    max_items: int = MAX_ITEMS,
    answers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The outcome of running ``code`` against the graph in ``records`` (one array, or several
    applied in order)."""
    import networkx as nx

    with collector_paused():
        before_nodes, before_edges = parse_records(
            *([records] if isinstance(records, str) else records)
        )
        graph = nx.MultiDiGraph()
        if mode == "write":
            # G gets copies: the code may change attribute values in place, and the diff needs
            # the originals.
            graph.add_nodes_from((n, private_copy(a)) for n, a in before_nodes.items())
            graph.add_edges_from(
                (s, t, k, private_copy(a)) for (s, t, k), a in before_edges.items()
            )
        else:
            graph.add_nodes_from(before_nodes.items())
            graph.add_edges_from((s, t, k, a) for (s, t, k), a in before_edges.items())
    return run_on(
        mode, graph, before_nodes, before_edges, code, max_items=max_items, answers=answers
    )


def run_on(
    mode: str,
    graph: Any,
    before_nodes: dict[str, Any],
    before_edges: dict[Any, Any],
    code: str,
    *,
    max_items: int = MAX_ITEMS,
    held: resident.Resident | None = None,
    answers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The outcome of running ``code`` on ``graph``, whose attributes are copies of
    ``before_nodes``/``before_edges`` (what a write is diffed against). ``graph`` is the
    resident one when ``held`` is given: a write then compares only what the code touched.
    ``answers``: the host's answers to ``find``/``neighbours`` when ``graph`` is a working set
    (:mod:`.lookups`); None when it is the whole graph."""
    import networkx as nx

    try:
        compiled = compile(code, CODE_FILENAME, "exec")
    except SyntaxError as error:
        summary, detail = describe_exception(error, CODE_FILENAME)
        if looks_like_sparql(code):
            summary += " (this is SPARQL; this graph runs Python code)"
            detail += (
                "\nThis looks like SPARQL, but this graph runs Python (NetworkX) code: use G "
                "and nx, and assign the answer to `result`."
            )
        return failure("syntax", summary, detail)
    linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(True), CODE_FILENAME)
    namespace: dict[str, Any] = {
        "G": graph,
        "nx": nx,
        "__name__": "__main__",
        **lookups.helpers(graph, answers),
    }
    printed = io.StringIO()
    stated = Stated.noting(graph) if mode == "write" else None
    try:
        if mode == "read":
            with contextlib.redirect_stdout(printed):
                exec(compiled, namespace)
        else:
            exec(compiled, namespace)
    except lookups.FactsNeeded as needed:
        # The code stopped before it could change anything it saw wrongly: nothing is
        # reported but the request (the host answers it and runs the code again).
        outcome = failure("needs", "the code asked for facts the graph does not hold yet")
        outcome["request"] = needed.request
        return outcome
    except BaseException as error:  # SystemExit too: the code must not end the job early
        summary, detail = describe_exception(error, CODE_FILENAME)
        return failure("exception", summary, detail)
    finally:
        if stated is not None:
            stated.stop(graph)
    with collector_paused():
        if mode == "read":
            return _read_outcome(namespace, printed.getvalue(), max_items)
        assert stated is not None
        if namespace.get("G") is not graph:
            stated = Stated()  # G rebound: what the code stated was said to another graph
        if held is not None:
            return _region_write_outcome(namespace.get("G"), held, nx, stated)
        return _write_outcome(namespace.get("G"), before_nodes, before_edges, nx, stated)


class Stated:
    """What write code stated through ``G``'s add methods: node ids it gave attributes
    (``add_node``, ``add_nodes_from``) and edges it added under a string key (``add_edge``, and
    through it ``add_edges_from``, ``nx.add_path`` …).

    Those of them that were there before and that the code left unchanged are re-statements;
    the diff cannot see them. Edges added without a key need no noting: key assignment finds
    the identical edge each one repeats (:func:`key_new_edges`).
    """

    _METHODS = ("add_node", "add_nodes_from", "add_edge")

    def __init__(self) -> None:
        self.nodes: dict[str, None] = {}  # ordered sets: reported in the order stated
        self.edges: dict[tuple[str, str, str], None] = {}

    @classmethod
    def noting(cls, graph: Any) -> Stated:
        """Start noting on ``graph``: its add methods are shadowed on the instance (as
        ``networkx.freeze`` does), so the graph's class, which the resident tracking checks,
        stays what it is, and NetworkX's own calls of ``self.add_edge`` are seen too."""
        stated = cls()
        kind = type(graph)

        def add_node(node_for_adding: Any, **attr: Any) -> None:
            kind.add_node(graph, node_for_adding, **attr)
            if attr and isinstance(node_for_adding, str):
                stated.nodes[node_for_adding] = None

        def add_nodes_from(nodes_for_adding: Any, **attr: Any) -> None:
            items = list(nodes_for_adding)  # read once: NetworkX reads it too
            kind.add_nodes_from(graph, items, **attr)
            for item in items:
                # NetworkX's reading: a hashable item is a node, else a (node, attributes) pair.
                try:
                    hash(item)
                    node, data = item, attr
                except TypeError:
                    node, given = item
                    data = {**attr, **given}
                if data and isinstance(node, str):
                    stated.nodes[node] = None

        def add_edge(u_for_edge: Any, v_for_edge: Any, key: Any = None, **attr: Any) -> Any:
            made = kind.add_edge(graph, u_for_edge, v_for_edge, key, **attr)
            if all(isinstance(end, str) for end in (u_for_edge, v_for_edge, made)):
                stated.edges[(u_for_edge, v_for_edge, made)] = None
            return made

        for name, method in zip(cls._METHODS, (add_node, add_nodes_from, add_edge), strict=True):
            setattr(graph, name, method)
        return stated

    def stop(self, graph: Any) -> None:
        """Remove the shadowing methods (the resident graph is run again in tests)."""
        for name in self._METHODS:
            graph.__dict__.pop(name, None)


def _read_outcome(namespace: dict[str, Any], printed: str, max_items: int) -> dict[str, Any]:
    if "result" in namespace:
        value, truncated = to_jsonable(namespace["result"], max_items)
    elif printed.strip():
        value, truncated = printed[:MAX_PRINTED].strip(), len(printed) > MAX_PRINTED
    else:
        return failure(
            "no_result",
            "the query did not assign `result`",
            "The query ran but did not assign `result`; end it with `result = <the answer>`.",
        )
    return {"ok": True, "value": value, "empty": is_empty(value), "truncated": truncated}


def _write_outcome(
    graph: Any, before_nodes: dict, before_edges: dict, nx: Any, stated: Stated
) -> dict:
    if not isinstance(graph, nx.MultiDiGraph):
        kind = type(graph).__name__
        return failure(
            "violations",
            f"`G` was replaced by a {kind}",
            f"`G` must remain a networkx.MultiDiGraph, but the code left a {kind} in it; "
            "change G in place (G.add_node, G.add_edge, G.remove_node, …).",
            [f"`G` must remain a networkx.MultiDiGraph, not a {kind}"],
        )
    normalize_identity_attributes(graph)
    repeated: list[tuple[Any, Any, Any]] = []
    assign_edge_keys(graph, repeated)
    after_nodes = dict(graph.nodes(data=True))
    after_edges = {(s, t, k): a for s, t, k, a in graph.edges(keys=True, data=True)}
    changes, problems = diff_graphs(before_nodes, before_edges, after_nodes, after_edges)
    if not problems:
        _add_restatements(
            changes,
            stated,
            repeated,
            graph=graph,
            before_nodes=before_nodes,
            before_edges=before_edges,
        )
    return changeset_outcome(changes, problems, "The changes break")


def _region_write_outcome(
    graph: Any, held: resident.Resident, nx: Any, stated: Stated
) -> dict[str, Any]:
    """:func:`_write_outcome` over the part of the resident graph the code touched."""
    region = changed_region(graph, held.owners, held.incident)
    if region is None:  # the code did something the tracking cannot follow: compare all
        return _write_outcome(graph, held.nodes, held.edges, nx, stated)
    before_nodes, after_nodes = _region_nodes(graph, held, region.nodes)
    repeated: list[tuple[Any, Any, Any]] = []
    before_edges, after_edges = _region_edges(graph, held, region.pairs, repeated)
    changes, problems = diff_graphs(
        before_nodes, before_edges, after_nodes, after_edges, other_nodes=node_table(graph)
    )
    if not problems:
        # Whatever the code stated was noted by a tracked container too, so it is in the
        # region; the loaded records are the whole graph's.
        _add_restatements(
            changes,
            stated,
            repeated,
            graph=graph,
            before_nodes=held.nodes,
            before_edges=held.edges,
        )
    return changeset_outcome(changes, problems, "The changes break")


def _add_restatements(
    changes: dict[str, list[Any]],
    stated: Stated,
    repeated: Iterable[tuple[Any, Any, Any]],
    *,
    graph: Any,
    before_nodes: Mapping[str, Any],
    before_edges: Mapping[Any, Any],
) -> None:
    """Add to ``changes`` the facts the code stated again and left as they were (see
    :class:`Stated`; ``repeated``: existing edges an edge added without a key repeated), as
    added, with the attributes they were loaded with."""

    def edge_kept(ident: tuple[Any, Any, Any]) -> bool:
        source, target, key = ident
        return key in successor_table(graph).get(source, {}).get(target, ())

    add_restatements(
        changes,
        stated.nodes,
        (*stated.edges, *repeated),
        before_nodes=before_nodes,
        before_edges=before_edges,
        node_kept=node_table(graph).__contains__,
        edge_kept=edge_kept,
    )


def _region_nodes(
    graph: Any, held: resident.Resident, node_ids: Iterable[Any]
) -> tuple[dict, dict]:
    """The region's nodes before and after (identity attributes dropped, as in a full diff)."""
    table = node_table(graph)
    before, after = {}, {}
    for node_id in node_ids:
        # 7 next to "7": the duplicate check sees both, the loaded "7" first as in the table.
        for name in dict.fromkeys((str(node_id), node_id)):
            if name in table:
                _drop_node_identity(name, table[name])
                after[name] = table[name]
            if isinstance(name, str) and name in held.nodes:
                before[name] = held.nodes[name]
    return before, after


def _region_edges(
    graph: Any,
    held: resident.Resident,
    pairs: Iterable[tuple[Any, Any]],
    repeated: list[tuple[Any, Any, Any]],
) -> tuple[dict, dict]:
    """The edges between the region's node pairs before and after (identity attributes
    dropped, then new edges keyed, in a full diff's order); ``repeated`` gets the edges that
    new ones without a key repeated exactly."""
    before: dict[tuple[Any, Any, Any], Any] = {}
    after: dict[tuple[Any, Any, Any], Any] = {}
    for source, target in pairs:
        for key in held.pairs.get((source, target), ()):
            before[(source, target, key)] = held.edges[(source, target, key)]
        keyed = successor_table(graph).get(source, {}).get(target)
        if keyed is None:
            continue
        for key, attrs in keyed.items():
            _drop_edge_identity(source, target, key, attrs)
        repeated.extend((source, target, key) for key in key_new_edges(keyed))
        after.update(((source, target, key), attrs) for key, attrs in keyed.items())
    return before, after


def normalize_identity_attributes(graph: Any) -> None:
    """Drop attributes that merely repeat an element's identity (``id`` equal to the node key,
    ``source``/``target``/``key`` equal to the edge's); different values stay and are reported."""
    for node_id, attrs in graph.nodes(data=True):
        _drop_node_identity(node_id, attrs)
    for source, target, key, attrs in graph.edges(keys=True, data=True):
        _drop_edge_identity(source, target, key, attrs)


def _drop_node_identity(node_id: Any, attrs: dict[str, Any]) -> None:
    if "id" in attrs and attrs["id"] == node_id:
        del attrs["id"]


def _drop_edge_identity(source: Any, target: Any, key: Any, attrs: dict[str, Any]) -> None:
    for name, actual in (("source", source), ("target", target), ("key", key)):
        if name in attrs and attrs[name] == actual:
            del attrs[name]


def assign_edge_keys(graph: Any, repeated: list[tuple[Any, Any, Any]] | None = None) -> None:
    """Give every edge added without a string key its relationship as key.

    Parallel edges of one relationship get ``REL~2``, ``REL~3`` …; an edge identical to one
    already between the same nodes is a re-statement and is dropped (the edge it repeats goes
    to ``repeated``, when given).
    """
    for source, neighbours in successor_table(graph).items():
        for target, keyed in neighbours.items():
            keys = key_new_edges(keyed)
            if repeated is not None:
                repeated.extend((source, target, key) for key in keys)


def key_new_edges(keyed: dict[Any, Any]) -> list[Any]:
    """:func:`assign_edge_keys` for the edges between one pair of nodes (``keyed``: key ->
    attributes, the graph's own dict, shared by both directions' adjacency); returns the keys
    of the edges that dropped ones repeated."""
    unkeyed = [(k, a) for k, a in keyed.items() if not isinstance(k, str)]
    for key, _ in unkeyed:
        del keyed[key]
    repeated = []
    for _, attrs in unkeyed:
        same = identical_key(keyed, attrs)
        if same is not None:
            repeated.append(same)
            continue
        keyed[_new_key(keyed, attrs)] = attrs
    return repeated


def identical_key(existing: Mapping[Any, Any], attrs: Mapping[str, Any]) -> Any | None:
    """The key of the edge in ``existing`` (key -> attributes) whose attributes are exactly
    ``attrs``, or ``None``."""
    text = _canonical_or_none(attrs)
    if text is None:
        return None
    for key, other in existing.items():
        if _canonical_or_none(other) == text:
            return key
    return None


def edge_key_for(existing: Mapping[Any, Any], attrs: Mapping[str, Any]) -> str | None:
    """The key for an edge added without one next to ``existing`` (key -> attributes of the
    edges between the same two nodes): its relationship, ``REL~2`` … for parallel edges, or
    ``None`` when an identical edge exists already (a re-statement, dropped)."""
    if identical_key(existing, attrs) is not None:
        return None
    return _new_key(existing, attrs)


def _new_key(existing: Mapping[Any, Any], attrs: Mapping[str, Any]) -> str:
    relationship = attrs.get(RELATIONSHIP)
    base = relationship if isinstance(relationship, str) and relationship else "edge"
    new_key, number = base, 2
    while new_key in existing:
        new_key, number = f"{base}~{number}", number + 1
    return new_key


def _canonical_or_none(attrs: Any) -> str | None:
    try:
        return canonical_json(attrs)
    except (TypeError, ValueError, RecursionError):
        return None


def looks_like_sparql(code: str) -> bool:
    head = code.lstrip()[:200].upper()
    return head.startswith(
        ("PREFIX", "BASE", "SELECT", "ASK", "CONSTRUCT", "INSERT", "DELETE", "DESCRIBE")
    )
