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
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
from collections.abc import Mapping
from typing import Any

from kgot.graph_model.records import (
    RELATIONSHIP,
    canonical_json,
    diff_graphs,
    parse_records,
    private_copy,
)

from . import resident
from .outcome import (
    MAX_ITEMS,
    collector_paused,
    describe_exception,
    failure,
    is_empty,
    output_path,
    to_jsonable,
    write_outcome,
)

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
    if os.path.exists("in/options.json"):
        with open("in/options.json", encoding="utf-8") as handle:
            max_items = int(json.load(handle).get("max_items", MAX_ITEMS))
    try:
        state = resident.expect()
    except LookupError as error:
        write_outcome(result_path, failure(resident.STALE, str(error)))
        return
    if state is not None:
        outcome = run_on(mode, state.graph, state.nodes, state.edges, code, max_items=max_items)
        write_outcome(result_path, outcome)
        return
    with open("in/graph.json", encoding="utf-8") as handle:
        records = [handle.read()]
    if os.path.exists("in/graph_delta.json"):
        with open("in/graph_delta.json", encoding="utf-8") as handle:
            records.append(handle.read())
    write_outcome(result_path, run(mode, records, code, max_items=max_items))


def run(
    mode: str, records: str | list[str], code: str, *, max_items: int = MAX_ITEMS
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
    return run_on(mode, graph, before_nodes, before_edges, code, max_items=max_items)


def run_on(
    mode: str,
    graph: Any,
    before_nodes: dict[str, Any],
    before_edges: dict[Any, Any],
    code: str,
    *,
    max_items: int = MAX_ITEMS,
) -> dict[str, Any]:
    """The outcome of running ``code`` on ``graph``, whose attributes are copies of
    ``before_nodes``/``before_edges`` (what a write is diffed against)."""
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
    namespace: dict[str, Any] = {"G": graph, "nx": nx, "__name__": "__main__"}
    printed = io.StringIO()
    try:
        if mode == "read":
            with contextlib.redirect_stdout(printed):
                exec(compiled, namespace)
        else:
            exec(compiled, namespace)
    except BaseException as error:  # SystemExit too: the code must not end the job early
        summary, detail = describe_exception(error, CODE_FILENAME)
        return failure("exception", summary, detail)
    with collector_paused():
        if mode == "read":
            return _read_outcome(namespace, printed.getvalue(), max_items)
        return _write_outcome(namespace.get("G"), before_nodes, before_edges, nx)


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


def _write_outcome(graph: Any, before_nodes: dict, before_edges: dict, nx: Any) -> dict:
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
    assign_edge_keys(graph)
    after_nodes = dict(graph.nodes(data=True))
    after_edges = {(s, t, k): a for s, t, k, a in graph.edges(keys=True, data=True)}
    changes, problems = diff_graphs(before_nodes, before_edges, after_nodes, after_edges)
    if problems:
        return failure(
            "violations",
            f"{len(problems)} rule violation(s): {problems[0]}",
            "The changes break the graph rules; nothing was applied:\n- " + "\n- ".join(problems),
            problems,
        )
    return {"ok": True, "changeset": changes}


def normalize_identity_attributes(graph: Any) -> None:
    """Drop attributes that merely repeat an element's identity (``id`` equal to the node key,
    ``source``/``target``/``key`` equal to the edge's); different values stay and are reported."""
    for node_id, attrs in graph.nodes(data=True):
        if "id" in attrs and attrs["id"] == node_id:
            del attrs["id"]
    for source, target, key, attrs in graph.edges(keys=True, data=True):
        for name, actual in (("source", source), ("target", target), ("key", key)):
            if name in attrs and attrs[name] == actual:
                del attrs[name]


def assign_edge_keys(graph: Any) -> None:
    """Give every edge added without a string key its relationship as key.

    Parallel edges of one relationship get ``REL~2``, ``REL~3`` …; an edge identical to one
    already between the same nodes is a re-statement and is dropped.
    """
    unkeyed = [
        (s, t, k, a) for s, t, k, a in graph.edges(keys=True, data=True) if not isinstance(k, str)
    ]
    for source, target, key, _ in unkeyed:
        graph.remove_edge(source, target, key)
    for source, target, _, attrs in unkeyed:
        new_key = edge_key_for(graph.get_edge_data(source, target) or {}, attrs)
        if new_key is not None:
            graph.add_edge(source, target, key=new_key, **attrs)


def edge_key_for(existing: Mapping[Any, Any], attrs: Mapping[str, Any]) -> str | None:
    """The key for an edge added without one next to ``existing`` (key -> attributes of the
    edges between the same two nodes): its relationship, ``REL~2`` … for parallel edges, or
    ``None`` when an identical edge exists already (a re-statement, dropped)."""
    text = _canonical_or_none(attrs)
    if text is not None and any(_canonical_or_none(a) == text for a in existing.values()):
        return None
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
