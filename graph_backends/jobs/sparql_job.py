"""Runs model-written SPARQL against a copy of the graph in Oxigraph, inside the sandbox.

Inputs: ``in/graph.nt`` (the graph as N-Triples, see :mod:`.rdf_model`), ``in/query.rq`` and
optionally ``in/options.json`` (``{"max_items": N}``).

* ``read``: a SELECT, ASK, CONSTRUCT or DESCRIBE query; rows come back as JSON objects with node
  IRIs compacted (``node:ada``) and literals as their property values.
* ``write``: a SPARQL UPDATE runs on an in-memory copy; the store before and after is decoded
  into property graphs and diffed into a changeset, with every mapping rule checked.
  Nodes and edges an ``INSERT DATA`` states again unchanged (triples already there) come back
  as added with their current attributes, as from the Python job: the entity's store counts
  them as corroborations or reinforcements.
* ``check``: only the guard (:mod:`.sparql_guard`) for a query that runs elsewhere (a remote
  endpoint), parsing every text so that only SPARQL 1.1 is sent; the outcome carries the text
  to send.

Every text passes the guard first, and the engine runs the guard's text (escapes decoded).

Running here, not on the host, is what bounds a pathological query: the sandbox's wall-clock
timeout and memory cap stop it and the host stays responsive.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from kgot.graph_model.records import diff_graphs

from . import resident
from .outcome import (
    MAX_ITEMS,
    add_restatements,
    changeset_outcome,
    collector_paused,
    failure,
    is_empty,
    output_path,
    write_outcome,
)
from .rdf_decode import decode
from .rdf_model import (
    KG_KEY,
    KG_RELATIONSHIP,
    KG_SOURCE,
    KG_TARGET,
    NODE,
    PREFIXES,
    PROP,
    RDF_TYPE,
    REL,
    ValueProblem,
    compact,
    decode_local,
    literal_value,
    node_iri,
    typed_nodes,
)
from .sparql_guard import check, keywords, looks_like_python

_POSITION = re.compile(r"error at (\d+):(\d+)")
# The guard parses with a recursive-descent grammar: deep nesting needs a deep stack. The
# sandbox's memory cap bounds what a pathological text can take.
_STACK_BYTES = 64 * 1024 * 1024
_RECURSION_LIMIT = 20_000


def main(mode: str) -> None:
    """Run ``in/query.rq`` in ``mode`` (``read``, ``write`` or ``check``) and write
    ``out/result.json``."""
    result_path = output_path()
    with open("in/query.rq", encoding="utf-8") as query_file:
        text = query_file.read()
    try:
        state = resident.expect() if mode != "check" else None
    except LookupError as error:
        write_outcome(result_path, failure(resident.STALE, str(error)))
        return
    data = b""
    if mode != "check" and state is None:
        with open("in/graph.nt", "rb") as graph_file:
            data = graph_file.read()
    options: dict[str, Any] = {}
    if os.path.exists("in/options.json"):
        with open("in/options.json", encoding="utf-8") as options_file:
            options = json.load(options_file)
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome.update(
                run(
                    mode,
                    data,
                    text,
                    max_items=int(options.get("max_items", MAX_ITEMS)),
                    held=state,
                )
            )
        except Exception as error:  # reported like any failure, not as a missing result
            outcome.update(failure("exception", f"the job failed: {type(error).__name__}: {error}"))

    sys.setrecursionlimit(_RECURSION_LIMIT)
    threading.stack_size(_STACK_BYTES)
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    write_outcome(result_path, outcome)


def run(
    mode: str,
    data: bytes,
    text: str,
    *,
    max_items: int = MAX_ITEMS,
    held: resident.Resident | None = None,
) -> dict[str, Any]:
    """The outcome of running ``text`` against the N-Triples graph ``data``, or against the
    resident graph ``held`` (its store is this job's own copy-on-write copy)."""
    import pyoxigraph as ox

    expected = "query" if mode in ("read", "check") else "update"
    # A text for a remote endpoint is parsed whatever it holds: only SPARQL 1.1 goes there.
    checked = check(
        text, expected, lambda t: engine_syntax(t, expected, ox), standard_only=mode == "check"
    )
    if checked.finding is not None:
        finding = checked.finding
        if finding.kind == "syntax":
            return _guard_syntax_failure(finding, checked.text)
        return failure(finding.kind, str(finding))
    if mode == "check":
        return {"ok": True, "text": checked.text}
    with collector_paused():
        if held is not None:
            store = held.store
        else:
            store = ox.Store()
            if data.strip():
                store.bulk_load(data, ox.RdfFormat.N_TRIPLES)
        if mode == "read":
            return _read(store, checked.text, ox, max_items)
        return _write(store, checked.text, ox, held=held)


def engine_syntax(text: str, expected: str, ox: Any) -> tuple[int, int, str] | None:
    """Where Oxigraph puts the syntax error of ``text``, without running anything.

    The text gets a NUL character appended (after a line break when its last line may end in a
    comment). No SPARQL text can end with NUL, so Oxigraph always stops at a syntax error and
    never evaluates. An error inside the text is the text's own; one at its end means the text
    stopped short (or that Oxigraph would have accepted it: then ``None``, the grammar's
    account stands).
    """
    lines = text.split("\n")
    suffix = "\n\x00" if "#" in lines[-1] else "\x00"
    store = ox.Store()
    try:
        if expected == "query":
            store.query(text + suffix, prefixes=PREFIXES)
        else:
            store.update(text + suffix, prefixes=PREFIXES)
    except SyntaxError as error:
        match = _POSITION.search(str(error))
        if not match:
            return None
        line, column = int(match.group(1)), int(match.group(2))
        message = _engine_message(str(error)[match.end() :].lstrip(": "))
        end = (len(lines), len(lines[-1]) + 1)
        if (line, column) < end:
            return line, column, message
        if message.replace("expected", "").strip(" []_") == "":
            return None  # nothing in particular was expected: the text itself was complete
        return end[0], end[1], f"the text ends too early ({message})"
    return None  # unreachable: no text ends with NUL


def _read(store: Any, text: str, ox: Any, max_items: int) -> dict[str, Any]:
    try:
        results = store.query(text, prefixes=PREFIXES)
        truncated = False
        if isinstance(results, ox.QueryBoolean):
            value: Any = bool(results)
        elif isinstance(results, ox.QuerySolutions):
            names = [variable.value for variable in results.variables]
            value = []
            for solution in results:
                if len(value) >= max_items:
                    truncated = True
                    break
                row = {}
                for name in names:
                    term = solution[name]
                    if term is not None:
                        row[name] = term_value(term, ox)
                value.append(row)
        else:
            value = []
            for triple in results:
                if len(value) >= max_items:
                    truncated = True
                    break
                value.append([term_value(t, ox) for t in triple])
    except SyntaxError as error:
        return _syntax_failure(error, text, "query", ox)
    except (OSError, RuntimeError, ValueError) as error:
        return failure("exception", f"the query failed: {error}")
    return {"ok": True, "value": value, "empty": result_is_empty(value), "truncated": truncated}


def result_is_empty(value: Any) -> bool:
    """Nothing found: no rows, or only rows whose every variable is unbound."""
    return is_empty(value) or (isinstance(value, list) and all(not row for row in value))


def _write(store: Any, text: str, ox: Any, *, held: Any = None) -> dict[str, Any]:
    """Run an update on the store and describe what it changed as a checked changeset.

    Only the *region* the update touched is decoded — the subjects whose statements changed,
    the source nodes of touched edge descriptions, and every description of a node in the
    region. On a resident graph (``held``) an update made only of ``INSERT DATA`` and
    ``DELETE DATA`` is applied statement by statement, so the whole cost follows the size of
    the change; any other update is compared with the store's statements before it ran.

    Statements such an update inserts that were there before and stay are re-statements: the
    nodes and edges they describe, when left unchanged, are reported as added with their
    current attributes (:func:`_restated_facts`), as the Python job does.
    """
    default = ox.DefaultGraph()
    operations = _data_operations(text, ox)
    change = _data_change(store, operations) if held is not None and operations else None
    lookup: _SetLookup | _StoreLookup
    if change is None:
        before = set(store.quads_for_pattern(None, None, None, default))
        try:
            store.update(text, prefixes=PREFIXES)
        except SyntaxError as error:
            return _syntax_failure(error, text, "update", ox)
        except (OSError, RuntimeError, ValueError) as error:
            return failure("exception", f"the update failed: {error}")
        after = set(store.quads_for_pattern(None, None, None, default))
        added, removed = after - before, before - after
        restated = _restated(operations, lambda quad: quad in before and quad in after)
        lookup = _SetLookup(before, after)
    else:
        added, removed = change
        held_store = store  # the state before: ``store`` is rebound to the overlay below
        # In the store and not removed: there before the update and still after it.
        restated = _restated(operations, lambda quad: quad not in removed and quad in held_store)
        lookup = _StoreLookup(store, added, removed, ox)
        store = lookup  # what follows reads the state after the update through the overlay
    if not added and not removed and not restated:
        return {"ok": True, "changeset": diff_graphs({}, {}, {}, {})[0]}
    region = _region(added | removed | set(restated), lookup, ox)
    nodes_after: set[str] | _Typed
    if held is None:
        nodes_after = typed_nodes(
            store.quads_for_pattern(None, ox.NamedNode(RDF_TYPE), None, default), ox
        )
    else:
        nodes_after = _typed_after(store, held.typed, added, removed, ox)
    nodes_before = (nodes_after - typed_nodes(added, ox)) | typed_nodes(removed, ox)
    old = decode(lookup.before_of(region), other_nodes=nodes_before)
    new = decode(lookup.after_of(region), old.descriptions, other_nodes=nodes_after)
    problems = list(new.problems)
    for node_id in old.nodes.keys() - new.nodes.keys():
        problems += _dangling(store, node_id, region, ox)
    changes, more = diff_graphs(old.nodes, old.edges, new.nodes, new.edges, other_nodes=nodes_after)
    problems += more
    if restated and not problems:
        node_ids, edge_idents = _restated_facts(restated, lookup, ox)
        add_restatements(
            changes,
            node_ids,
            edge_idents,
            before_nodes=old.nodes,
            before_edges=old.edges,
            node_kept=new.nodes.__contains__,
            edge_kept=new.edges.__contains__,
        )
    return changeset_outcome(changes, problems, "The update breaks")


def _restated(
    operations: list[tuple[str, list[Any]]] | None, kept: Callable[[Any], bool]
) -> list[Any]:
    """The statements the ``INSERT DATA`` operations insert that ``kept`` says were there
    before the update and still are (none for any other update: what an ``INSERT … WHERE``
    template inserts is not worked out)."""
    found: dict[Any, None] = {}
    for word, statements in operations or ():
        if word == "INSERT":
            found.update((quad, None) for quad in statements if kept(quad))
    return list(found)


def _restated_facts(
    restated: list[Any], lookup: _SetLookup | _StoreLookup, ox: Any
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The node ids and edge identities re-stated statements describe.

    A node is stated by its type or a property statement, an edge by its ``rel:`` statement
    (the edge keyed by its relationship, the key an undescribed edge has) or by any statement
    of its description. Whether each is still there unchanged is for the caller to see.

    Sorted: the engine parses an operation's statements into a store, which keeps no order of
    statement, and a report that changes order from run to run would read as a change.
    """
    nodes: dict[str, None] = {}
    edges: dict[tuple[str, str, str], None] = {}
    described: dict[Any, tuple[str, str, str] | None] = {}
    for quad in restated:
        subject, predicate = quad.subject, quad.predicate.value
        if not isinstance(subject, ox.NamedNode):
            continue
        if not subject.value.startswith(NODE):
            if subject not in described:
                described[subject] = _described_edge(lookup.before_of({subject}), ox)
            ident = described[subject]
            if ident is not None:
                edges[ident] = None
            continue
        node_id = decode_local(subject.value[len(NODE) :])
        if predicate.startswith(REL):
            target = quad.object
            if isinstance(target, ox.NamedNode) and target.value.startswith(NODE):
                relationship = decode_local(predicate[len(REL) :])
                edges[(node_id, decode_local(target.value[len(NODE) :]), relationship)] = None
        elif predicate == RDF_TYPE or predicate.startswith(PROP):
            nodes[node_id] = None
    return sorted(nodes), sorted(edges)


def _described_edge(statements: list[Any], ox: Any) -> tuple[str, str, str] | None:
    """(source, target, key) of the edge an edge description's ``statements`` describe, or
    ``None`` when they describe no single edge (the decoding reports why, if it matters)."""
    fields: dict[str, list[Any]] = {}
    for quad in statements:
        fields.setdefault(quad.predicate.value, []).append(quad.object)
    ends = []
    for field in (KG_SOURCE, KG_TARGET, KG_RELATIONSHIP):
        found = fields.get(field, [])
        if len(found) != 1 or not isinstance(found[0], ox.NamedNode):
            return None
        ends.append(found[0].value)
    source, target, relationship = ends
    if not (source.startswith(NODE) and target.startswith(NODE) and relationship.startswith(REL)):
        return None
    keys = fields.get(KG_KEY, [])
    if len(keys) > 1 or (keys and not isinstance(keys[0], ox.Literal)):
        return None
    key = keys[0].value if keys else decode_local(relationship[len(REL) :])
    return decode_local(source[len(NODE) :]), decode_local(target[len(NODE) :]), key


_DATA_WORDS = frozenset({"INSERT", "DELETE", "DATA", "A", "TRUE", "FALSE"})


def _data_operations(text: str, ox: Any) -> list[tuple[str, list[Any]]] | None:
    """The operations of an update made only of ``INSERT DATA`` / ``DELETE DATA``: each one's
    word (``INSERT`` or ``DELETE``) and statements. ``None`` for any other update, or one this
    cannot follow (blank nodes, a syntax error).

    Each operation's statements are read by running it as ``INSERT DATA`` on an empty store,
    so the engine parses them exactly as it would have.
    """
    body = [(word, at) for word, at in keywords(text) if word not in ("PREFIX", "BASE")]
    if not body or any(word not in _DATA_WORDS for word, _ in body):
        return None
    starts = [i for i, (word, _) in enumerate(body) if word in ("INSERT", "DELETE")]
    if not starts or starts[0] != 0:
        return None
    if any(i + 1 >= len(body) or body[i + 1][0] != "DATA" for i in starts):
        return None
    prologue = text[: body[0][1]]
    bounds = [body[i][1] for i in starts] + [len(text)]
    statements_of = []
    scratch = ox.Store()
    for i, start, end in zip(starts, bounds, bounds[1:], strict=False):
        word = body[i][0]
        operation = text[start:end].rstrip().rstrip(";")
        try:
            scratch.update(prologue + "INSERT" + operation[len(word) :], prefixes=PREFIXES)
        except (SyntaxError, OSError, RuntimeError, ValueError):
            return None  # the whole update runs instead, and reports the error as usual
        statements = list(scratch)
        scratch.clear()
        if any(_has_blank_node(quad, ox) for quad in statements):
            return None
        statements_of.append((word, statements))
    return statements_of


def _data_change(store: Any, operations: list[tuple[str, list[Any]]]) -> tuple[set[Any], set[Any]]:
    """The statements the data ``operations`` (:func:`_data_operations`) add to and remove
    from the store, worked out statement by statement without changing the store (a resident
    store is shared copy-on-write: writing to it would copy its pages into the job)."""
    added: set[Any] = set()
    removed: set[Any] = set()
    for word, statements in operations:
        if word == "INSERT":
            _insert(store, statements, added, removed)
        else:
            _delete(store, statements, added, removed)
    return added, removed


def _has_blank_node(quad: Any, ox: Any) -> bool:
    return isinstance(quad.subject, ox.BlankNode) or isinstance(quad.object, ox.BlankNode)


def _insert(store: Any, statements: list[Any], added: set[Any], removed: set[Any]) -> None:
    for quad in statements:
        if quad in removed:
            removed.discard(quad)  # back as it was
        elif quad not in store:
            added.add(quad)


def _delete(store: Any, statements: list[Any], added: set[Any], removed: set[Any]) -> None:
    for quad in statements:
        if quad in added:
            added.discard(quad)  # never there
        elif quad in store:
            removed.add(quad)


class _SetLookup:
    """The statements before and after an update, as two sets (any update)."""

    def __init__(self, before: set[Any], after: set[Any]) -> None:
        self.before, self.after = before, after
        self._descriptions: list[Any] | None = None

    def _all_descriptions(self, ox: Any) -> list[Any]:
        if self._descriptions is None:
            source = ox.NamedNode(KG_SOURCE)
            self._descriptions = [q for q in self.before if q.predicate == source]
            self._descriptions += [q for q in self.after if q.predicate == source]
        return self._descriptions

    def sources_of(self, subjects: set[Any], ox: Any) -> list[Any]:
        return [q for q in self._all_descriptions(ox) if q.subject in subjects]

    def described(self, objects: set[Any], ox: Any) -> list[Any]:
        return [q for q in self._all_descriptions(ox) if q.object in objects]

    def before_of(self, region: set[Any]) -> list[Any]:
        return [q for q in self.before if q.subject in region]

    def after_of(self, region: set[Any]) -> list[Any]:
        return [q for q in self.after if q.subject in region]


class _StoreLookup:
    """The statements before and after a statement-by-statement update: the store holds the
    state before it, ``added`` and ``removed`` the difference (an overlay; the store is never
    written). ``quads_for_pattern`` answers for the state after, like a store would."""

    def __init__(self, store: Any, added: set[Any], removed: set[Any], ox: Any) -> None:
        self.store, self.added, self.removed, self.ox = store, added, removed, ox
        self.default = ox.DefaultGraph()

    def _stored(self, subject: Any, predicate: Any, obj: Any) -> list[Any]:
        ox = self.ox
        if subject is not None and not isinstance(subject, (ox.NamedNode, ox.BlankNode)):
            return []  # a literal is nobody's subject
        return list(self.store.quads_for_pattern(subject, predicate, obj, self.default))

    @staticmethod
    def _matching(quads: set[Any], subject: Any, predicate: Any, obj: Any) -> list[Any]:
        return [
            q
            for q in quads
            if (subject is None or q.subject == subject)
            and (predicate is None or q.predicate == predicate)
            and (obj is None or q.object == obj)
        ]

    def quads_for_pattern(
        self, subject: Any, predicate: Any, obj: Any, _graph: Any = None
    ) -> list[Any]:
        stored = [q for q in self._stored(subject, predicate, obj) if q not in self.removed]
        return stored + self._matching(self.added, subject, predicate, obj)

    def _either(self, subject: Any, predicate: Any, obj: Any) -> list[Any]:
        """Matching statements before or after the update."""
        stored = self._stored(subject, predicate, obj)
        return stored + self._matching(self.added, subject, predicate, obj)

    def sources_of(self, subjects: set[Any], ox: Any) -> list[Any]:
        source = ox.NamedNode(KG_SOURCE)
        return [q for s in subjects for q in self._either(s, source, None)]

    def described(self, objects: set[Any], ox: Any) -> list[Any]:
        source = ox.NamedNode(KG_SOURCE)
        return [q for o in objects for q in self._either(None, source, o)]

    def before_of(self, region: set[Any]) -> list[Any]:
        return [q for subject in region for q in self._stored(subject, None, None)]

    def after_of(self, region: set[Any]) -> list[Any]:
        return [q for subject in region for q in self.quads_for_pattern(subject, None, None)]


def _region(delta: set[Any], lookup: _SetLookup | _StoreLookup, ox: Any) -> set[Any]:
    """Subjects whose decoding may differ between before and after the update."""
    region = {quad.subject for quad in delta}
    for subject in list(region):  # other spellings of a node id: duplicates must be seen
        if isinstance(subject, ox.NamedNode) and subject.value.startswith(NODE):
            canonical = node_iri(decode_local(subject.value[len(NODE) :]))
            if canonical != subject.value:
                region.add(ox.NamedNode(canonical))
    region.update(q.object for q in lookup.sources_of(set(region), ox))
    region.update(q.subject for q in lookup.described(set(region), ox))
    return region


def _typed_after(
    store: Any, typed_before: set[str], added: set[Any], removed: set[Any], ox: Any
) -> _Typed:
    """The typed nodes after an update, from those before and what it changed (a node that
    lost one type statement may keep another)."""
    untyped = typed_nodes(removed, ox)
    kind, default = ox.NamedNode(RDF_TYPE), ox.DefaultGraph()
    kept = {
        node_id
        for node_id in untyped
        if typed_nodes(
            store.quads_for_pattern(ox.NamedNode(node_iri(node_id)), kind, None, default), ox
        )
    }
    return _Typed(typed_before, untyped - kept, typed_nodes(added, ox))


class _Typed:
    """A set of node ids as a base set with some taken out and some put in, answering ``in``
    without copying the base (a resident graph's typed nodes: copying them would cost every
    write the whole set)."""

    def __init__(self, base: set[str], gone: set[str], new: set[str]) -> None:
        self.base, self.gone, self.new = base, gone, new

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.new or (node_id in self.base and node_id not in self.gone)

    def __sub__(self, other: set[str]) -> _Typed:
        return _Typed(self.base, self.gone | other, self.new - other)

    def __or__(self, other: set[str]) -> _Typed:
        return _Typed(self.base, self.gone - other, self.new | other)


def _dangling(store: Any, node_id: str, region: set[Any], ox: Any) -> list[str]:
    """Edges from outside the region that still point at a node the update removed."""
    problems = []
    for quad in store.quads_for_pattern(None, None, ox.NamedNode(node_iri(node_id)), None):
        if quad.predicate.value.startswith(REL) and quad.subject not in region:
            source = decode_local(quad.subject.value[len(NODE) :])
            relationship = decode_local(quad.predicate.value[len(REL) :])
            problems.append(
                f"edge {source!r} -[{relationship}]-> {node_id!r}: endpoint {node_id!r} is not a "
                "node (delete the edge too, or keep the node's type)"
            )
    return problems


def term_value(term: Any, ox: Any) -> Any:
    """A query result term as JSON data: compact IRIs, literal values, ``_:`` blank nodes."""
    if isinstance(term, ox.NamedNode):
        return compact(term.value)
    if isinstance(term, ox.Literal):
        try:
            return literal_value(term.value, term.datatype.value, term.language)
        except ValueProblem:
            return term.value
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return str(term)


def _engine_message(message: str) -> str:
    if "Prefix not found" in message:
        known = ", ".join(f"{p}:" for p in PREFIXES)
        message = f"unknown prefix (declare it with PREFIX; predeclared: {known})"
    message = " ".join(message.replace(", [_]", "").split())
    return message[:240] + "…" if len(message) > 240 else message


def _syntax_failure(error: SyntaxError, text: str, expected: str, ox: Any) -> dict[str, Any]:
    """A syntax error Oxigraph raised on running ``text`` (texts the guard did not parse),
    located and worded like the guard's."""
    located = engine_syntax(text, expected, ox)
    if located is not None:
        return _syntax_outcome(*located, text)
    message = str(error)
    match = _POSITION.search(message)
    line = column = 0
    if match:
        line, column = int(match.group(1)), int(match.group(2))
        message = message[match.end() :].lstrip(": ")
    return _syntax_outcome(line, column, _engine_message(message), text)


def _guard_syntax_failure(finding: Any, text: str) -> dict[str, Any]:
    return _syntax_outcome(finding.line, finding.column, finding.message, text)


def _syntax_outcome(line: int, column: int, message: str, text: str) -> dict[str, Any]:
    where = f" at line {line}, column {column}" if line else ""
    summary = f"SPARQL syntax error{where}: {message}"
    detail = summary
    lines = text.splitlines()
    if 0 < line <= len(lines):
        detail += f"\n    {lines[line - 1]}\n    {' ' * max(0, column - 1)}^"
    if looks_like_python(text):
        summary += " (this looks like Python; this graph takes SPARQL)"
        detail += "\nThis looks like Python, but this graph takes SPARQL."
    return failure("syntax", summary, detail)
