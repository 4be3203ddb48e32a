"""Reading RDF back into a property graph: the other half of :mod:`.rdf_model`.

Statements are grouped by subject, then interpreted: ``node:`` subjects become nodes (exactly
one ``a type:…``, one value per ``prop:``), subjects with ``kg:source``/``kg:relationship``/
``kg:target`` describe edges, ``rel:`` triples are edges. Everything that fits none of these is a
problem naming the subject — the model sees it and fixes its update.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kgot.graph_model.records import LABEL, RELATIONSHIP, canonical_json

from .rdf_model import (
    KG_KEY,
    KG_RELATIONSHIP,
    KG_SOURCE,
    KG_TARGET,
    NAMESPACE,
    NODE,
    PROP,
    RDF_TYPE,
    REL,
    TYPE,
    XSD_STRING,
    ValueProblem,
    compact,
    decode_local,
    literal_value,
    rel_iri,
)

_DESCRIPTION_FIELDS = {
    KG_SOURCE: "source",
    KG_TARGET: "target",
    KG_RELATIONSHIP: "relationship",
    KG_KEY: "key",
}


class _Subject:
    """Everything said about one subject, gathered before it is interpreted."""

    __slots__ = ("fields", "key", "links", "properties", "statements", "term", "types")

    def __init__(self, key: str, term: Any) -> None:
        self.key = key
        self.term = term
        self.types: list[str] = []
        self.properties: dict[str, list[Any]] = {}
        self.fields: dict[str, list[Any]] = {}
        self.links: list[tuple[str, Any]] = []  # (relationship, object term)
        self.statements: set[str] | None = None  # kept for non-node subjects only

    @property
    def name(self) -> str:
        """How messages show the subject."""
        return compact(self.key) if not self.key.startswith("_:") else self.key


@dataclass
class Decoded:
    """A property graph read from RDF, with every mapping rule the triples broke."""

    nodes: dict[str, dict[str, Any]]
    edges: dict[tuple[str, str, str], dict[str, Any]]
    problems: list[str]
    descriptions: dict[str, frozenset[str]]  # description subject -> its statements


# How each predicate is read: ("type"|"rel"|"prop"|"field"|"other", decoded name).
_PredicateKind = tuple[str, str]


def _classify(predicate: str) -> _PredicateKind:
    if predicate == RDF_TYPE:
        return ("type", "")
    if predicate.startswith(REL):
        return ("rel", decode_local(predicate[len(REL) :]))
    if predicate.startswith(PROP):
        return ("prop", decode_local(predicate[len(PROP) :]))
    if predicate in _DESCRIPTION_FIELDS:
        return ("field", _DESCRIPTION_FIELDS[predicate])
    return ("other", "")


def decode(
    triples: Iterable[Any],
    previous: Mapping[str, frozenset[str]] | None = None,
    *,
    other_nodes: Container[str] = (),
) -> Decoded:
    """The property graph a set of pyoxigraph triples or quads describes (default graph).

    Args:
        triples: objects with ``subject``, ``predicate`` and ``object`` pyoxigraph terms.
        previous: edge descriptions before an update (from an earlier :func:`decode`). A
            description that is unchanged while its ``rel:`` triple is gone means the edge was
            deleted; a new or changed one implies its triple.
        other_nodes: ids of nodes that exist although their triples are not among ``triples``
            (when only a region of a store is decoded); edges may end at them.
    """
    problems: list[str] = []
    subjects = _gather_subjects(triples, problems)
    nodes = _nodes(subjects, problems)
    edges, descriptions = _edges(subjects, nodes, other_nodes, previous or {}, problems)
    return Decoded(nodes, edges, problems, descriptions)


def _gather_subjects(triples: Iterable[Any], problems: list[str]) -> dict[str, _Subject]:
    """Statements grouped by subject (the hot loop: literal properties take the short path)."""
    import pyoxigraph as ox

    named, literal = ox.NamedNode, ox.Literal
    kinds: dict[str, _PredicateKind] = {}
    subjects: dict[str, _Subject] = {}
    for triple in triples:
        subject, obj = triple.subject, triple.object
        predicate = triple.predicate.value
        key = subject.value if isinstance(subject, named) else _term_key(subject, ox)
        entry = subjects.get(key)
        if entry is None:
            entry = subjects[key] = _Subject(key, subject)
            if not key.startswith(NODE):
                entry.statements = set()
        if entry.statements is not None:
            entry.statements.add(f"{predicate} {_term_key(obj, ox)}")
        kind = kinds.get(predicate)
        if kind is None:
            kind = kinds[predicate] = _classify(predicate)
        if kind[0] == "prop" and isinstance(obj, literal):
            datatype = obj.datatype.value
            try:
                value = (
                    obj.value
                    if datatype == XSD_STRING
                    else literal_value(obj.value, datatype, obj.language)
                )
            except ValueProblem as invalid:
                problems.append(f"{entry.name} {compact(predicate)}: {invalid}")
                continue
            entry.properties.setdefault(kind[1], []).append(value)
            continue
        misfit = _gather(entry, kind, predicate, obj, ox)
        if misfit:
            problems.append(misfit)
    return subjects


def _nodes(subjects: Mapping[str, _Subject], problems: list[str]) -> dict[str, dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    seen_ids: dict[str, str] = {}
    for key, entry in subjects.items():
        if entry.fields:
            continue
        if not key.startswith(NODE):
            problems.append(
                f"subject {entry.name} is neither a node (node:<id>) nor an edge description "
                "(with kg:source, kg:relationship, kg:target)"
            )
            continue
        node_id = decode_local(key[len(NODE) :])
        if node_id in seen_ids:
            problems.append(
                f"duplicate id {node_id!r}: {compact(seen_ids[node_id])} and {compact(key)} "
                "name the same node; use one spelling"
            )
            continue
        seen_ids[node_id] = key
        attrs = _node_attrs(node_id, entry, problems)
        if attrs is not None:
            nodes[node_id] = attrs
    return nodes


def _term_key(term: Any, ox: Any) -> str:
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return str(term)


def _show(term: Any, ox: Any) -> str:
    if isinstance(term, ox.NamedNode):
        return compact(term.value)
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return str(term)


def _gather(entry: _Subject, kind: _PredicateKind, predicate: str, obj: Any, ox: Any) -> str | None:
    """File one statement (other than a literal property) under its subject; a problem when
    it fits no part of the mapping."""
    what, name = kind
    if what == "type":
        if isinstance(obj, ox.NamedNode) and obj.value.startswith(TYPE):
            entry.types.append(decode_local(obj.value[len(TYPE) :]))
            return None
        return f"{entry.name} a {_show(obj, ox)}: node types must be type:<Label>"
    where = f"{entry.name} {compact(predicate)}"
    if what == "rel":
        if isinstance(obj, ox.Literal):
            return f"{where}: rel: links two nodes; put literal values under prop:<name>"
        entry.links.append((name, obj))
        return None
    if what == "prop":  # a non-literal value
        if isinstance(obj, ox.NamedNode) and not obj.value.startswith(NAMESPACE):
            entry.properties.setdefault(name, []).append(obj.value)
            return None
        return f"{where} {_show(obj, ox)}: prop: values are literals; link nodes with rel:"
    if what == "field":
        entry.fields.setdefault(name, []).append(obj)
        return None
    return (
        f"{where}: predicate outside the kgot vocabulary (use prop:<name> for values, "
        "rel:<NAME> for links between nodes, `a type:<Label>` for the node type)"
    )


def _node_attrs(node_id: str, entry: _Subject, problems: list[str]) -> dict[str, Any] | None:
    where = f"node {node_id!r}"
    if not entry.types:
        problems.append(f"{where}: missing `label` (give it one type: node:… a type:<Label>)")
        return None
    if len(set(entry.types)) > 1:
        labels = ", ".join(sorted(set(entry.types)))
        problems.append(f"{where}: has several types ({labels}); a node has exactly one label")
        return None
    attrs: dict[str, Any] = {LABEL: entry.types[0]}
    for name, values in entry.properties.items():
        distinct = {canonical_json(v) for v in values} if len(values) > 1 else ()
        if len(distinct) > 1:
            problems.append(
                f"{where}: property `{name}` has {len(distinct)} values; keep one "
                '(several values belong in one JSON list: "[…]"^^rdf:JSON)'
            )
            continue
        if name in (LABEL, "id"):
            problems.append(f"{where}: `{name}` is reserved and cannot be a property name")
            continue
        attrs[name] = values[0]
    return attrs


def _edges(
    subjects: Mapping[str, _Subject],
    nodes: Mapping[str, Any],
    other_nodes: Container[str],
    previous: Mapping[str, frozenset[str]],
    problems: list[str],
) -> tuple[dict[tuple[str, str, str], dict[str, Any]], dict[str, frozenset[str]]]:
    import pyoxigraph as ox

    direct = _direct_links(subjects, problems, ox)
    groups: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = {}
    descriptions: dict[str, frozenset[str]] = {}
    for key, entry in subjects.items():
        if not entry.fields:
            continue
        descriptions[key] = frozenset(entry.statements or ())
        described = _description(entry, ox, problems, existed=key in previous)
        if described is None:
            continue
        group, edge_key, attrs = described
        if group not in direct:
            if previous.get(key) == descriptions[key]:
                continue  # its rel: triple was deleted and the description left alone
            direct.add(group)  # a new or changed description implies its triple
        groups.setdefault(group, []).append((edge_key, attrs))

    edges: dict[tuple[str, str, str], dict[str, Any]] = {}
    for group in direct:
        source, target, relationship = group
        missing = [e for e in (source, target) if e not in nodes and e not in other_nodes]
        if missing:
            problems.append(
                f"edge {source!r} -[{relationship}]-> {target!r}: endpoint {missing[0]!r} is not "
                "a node (give it a type: node:… a type:<Label>)"
            )
            continue
        for edge_key, attrs in groups.get(group) or [(relationship, {RELATIONSHIP: relationship})]:
            ident = (source, target, edge_key)
            if ident in edges:
                problems.append(
                    f"edge {source!r} -[{edge_key}]-> {target!r}: described twice; "
                    "parallel edges need different kg:key values"
                )
                continue
            edges[ident] = attrs
    return edges, descriptions


def _direct_links(
    subjects: Mapping[str, _Subject], problems: list[str], ox: Any
) -> set[tuple[str, str, str]]:
    """(source, target, relationship) of every ``node:s rel:R node:t`` triple."""
    direct: set[tuple[str, str, str]] = set()
    for key, entry in subjects.items():
        if entry.fields or not entry.links or not key.startswith(NODE):
            continue
        source = decode_local(key[len(NODE) :])
        for relationship, obj in entry.links:
            target = _node_id_of(obj, ox)
            if target is None:
                problems.append(
                    f"{entry.name} {compact(rel_iri(relationship))} {_show(obj, ox)}: "
                    "rel: must point to a node (node:<id>)"
                )
                continue
            direct.add((source, target, relationship))
    return direct


def _node_id_of(term: Any, ox: Any) -> str | None:
    if isinstance(term, ox.NamedNode) and term.value.startswith(NODE):
        return decode_local(term.value[len(NODE) :])
    return None


def _description(
    entry: _Subject, ox: Any, problems: list[str], *, existed: bool
) -> tuple[tuple[str, str, str], str, dict[str, Any]] | None:
    """(source, target, relationship), key and attributes of one edge description.

    A description that existed before and lost one of its ends was taken apart on purpose
    (e.g. by deleting every triple that mentions a node): it is dropped without a problem.
    """
    where = f"edge description {entry.name}"
    values: dict[str, Any] = {}
    for name in ("source", "target", "relationship"):
        found = entry.fields.get(name, [])
        if not found and existed:
            return None
        if len(found) != 1:
            count = "lacks" if not found else "has several values for"
            problems.append(f"{where}: {count} kg:{name} (an edge has exactly one)")
            return None
        values[name] = found[0]
    source, target = _node_id_of(values["source"], ox), _node_id_of(values["target"], ox)
    relationship_term = values["relationship"]
    if source is None or target is None:
        problems.append(f"{where}: kg:source and kg:target must be nodes (node:<id>)")
        return None
    if not (
        isinstance(relationship_term, ox.NamedNode) and relationship_term.value.startswith(REL)
    ):
        problems.append(f"{where}: kg:relationship must be rel:<NAME>")
        return None
    relationship = decode_local(relationship_term.value[len(REL) :])
    keys = entry.fields.get("key", [])
    if len(keys) > 1 or (keys and not isinstance(keys[0], ox.Literal)):
        problems.append(f"{where}: kg:key must be one string literal")
        return None
    edge_key = keys[0].value if keys else relationship
    attrs: dict[str, Any] = {RELATIONSHIP: relationship}
    for name, found in entry.properties.items():
        if name == RELATIONSHIP:
            problems.append(f"{where}: `{name}` is reserved and cannot be a property name")
            return None
        if len({canonical_json(v) for v in found}) > 1:
            problems.append(f"{where}: property `{name}` has several values; keep one")
            return None
        attrs[name] = found[0]
    if entry.types or entry.links:
        problems.append(f"{where}: an edge description has no type and no rel: links")
        return None
    return (source, target, relationship), edge_key, attrs
