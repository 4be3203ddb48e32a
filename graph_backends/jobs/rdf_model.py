"""The mapping between kgot's property graph and RDF, in both directions.

* node ``id``            -> IRI ``node:<id>``           (``urn:kgot:node:``)
* ``label``              -> ``node:<id> a type:<Label>``  (``urn:kgot:type:``), exactly one
* property ``name: v``   -> ``node:<id> prop:<name> v``  (``urn:kgot:prop:``), one literal
* edge ``relationship``  -> ``node:<s> rel:<REL> node:<t>`` (``urn:kgot:rel:``)
* an edge with properties, a key other than its relationship, or a parallel twin is also
  described by ``edge:<s>.<key>.<t>`` with ``kg:source``, ``kg:target``, ``kg:relationship``,
  ``kg:key`` (``urn:kgot:vocab:``) and its ``prop:`` values.

Local names are percent-encoded so every IRI is also a valid SPARQL/Turtle prefixed name:
letters, digits, ``_`` and ``-`` stay, everything else (space, ``.``, ``:``, ``/``, …) becomes
``%XX`` of its UTF-8 bytes. Literal types: ``str`` -> ``xsd:string`` (ISO dates in canonical form
-> ``xsd:date`` / ``xsd:dateTime``), ``int`` -> ``xsd:integer``, ``float`` -> ``xsd:double``,
``bool`` -> ``xsd:boolean``, lists, objects and ``None`` -> ``rdf:JSON``. Reading RDF also
accepts other XSD numeric types, language-tagged strings (the tag is dropped) and IRIs as values.

Standard library only; shared by host and sandbox jobs. Reading RDF back is
:mod:`.rdf_decode`.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from kgot.graph_model.records import INT_MAX, INT_MIN, LABEL, RELATIONSHIP, canonical_json

NAMESPACE = "urn:kgot:"
NODE = NAMESPACE + "node:"
TYPE = NAMESPACE + "type:"
REL = NAMESPACE + "rel:"
PROP = NAMESPACE + "prop:"
EDGE = NAMESPACE + "edge:"
KG = NAMESPACE + "vocab:"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
XSD = "http://www.w3.org/2001/XMLSchema#"

PREFIXES = {
    "node": NODE,
    "type": TYPE,
    "rel": REL,
    "prop": PROP,
    "edge": EDGE,
    "kg": KG,
    "rdf": RDF,
    "rdfs": RDFS,
    "xsd": XSD,
}
RDF_TYPE = RDF + "type"
RDF_JSON = RDF + "JSON"
RDF_LANG_STRING = RDF + "langString"
KG_SOURCE, KG_TARGET, KG_RELATIONSHIP, KG_KEY = (
    KG + "source",
    KG + "target",
    KG + "relationship",
    KG + "key",
)
XSD_STRING, XSD_INTEGER, XSD_DOUBLE, XSD_BOOLEAN = (
    XSD + "string",
    XSD + "integer",
    XSD + "double",
    XSD + "boolean",
)
XSD_DATE, XSD_DATETIME = XSD + "date", XSD + "dateTime"
_INTEGER_TYPES = frozenset(
    XSD + name
    for name in [
        "integer",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedLong",
        "unsignedInt",
        "unsignedShort",
        "unsignedByte",
    ]
)
_FLOAT_TYPES = frozenset({XSD + "decimal", XSD + "float", XSD_DOUBLE})

# ISO dates and date-times exactly as Oxigraph writes them back (canonical lexical form), so a
# string typed on the way in comes back unchanged.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d*[1-9])?Z?")

# PN_CHARS_BASE from the SPARQL/Turtle grammar, beyond ASCII letters.
_PN_RANGES = (
    (0x00C0, 0x00D6),
    (0x00D8, 0x00F6),
    (0x00F8, 0x02FF),
    (0x0370, 0x037D),
    (0x037F, 0x1FFF),
    (0x200C, 0x200D),
    (0x2070, 0x218F),
    (0x2C00, 0x2FEF),
    (0x3001, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFFD),
    (0x10000, 0xEFFFF),
)
_ASCII_KEPT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _kept(char: str, first: bool) -> bool:
    if char in _ASCII_KEPT:
        return not (first and char == "-")
    code = ord(char)
    return code > 0x7F and char.isalnum() and any(lo <= code <= hi for lo, hi in _PN_RANGES)


def encode_local(text: str) -> str:
    """``text`` as the local part of an IRI that is also a valid prefixed name."""
    if text and all(c in _ASCII_KEPT for c in text) and text[0] != "-":
        return text  # the common case, without a per-character loop
    out = []
    for index, char in enumerate(text):
        if _kept(char, index == 0):
            out.append(char)
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
    return "".join(out)


def decode_local(local: str) -> str:
    return unquote(local) if "%" in local else local


def node_iri(node_id: str) -> str:
    return NODE + encode_local(node_id)


def type_iri(label: str) -> str:
    return TYPE + encode_local(label)


def rel_iri(relationship: str) -> str:
    return REL + encode_local(relationship)


def prop_iri(name: str) -> str:
    return PROP + encode_local(name)


def edge_iri(source: str, key: str, target: str) -> str:
    return f"{EDGE}{encode_local(source)}.{encode_local(key)}.{encode_local(target)}"


def compact(iri: str) -> str:
    """``node:ada`` for kgot IRIs, ``xsd:date`` for XSD/RDF ones, ``<iri>`` otherwise."""
    for prefix, base in PREFIXES.items():
        if iri.startswith(base):
            return f"{prefix}:{iri[len(base) :]}"
    return f"<{iri}>"


# ---------------------------------------------------------------------------------------------
# Property graph -> RDF


def literal_parts(value: Any) -> tuple[str, str]:
    """The lexical form and datatype IRI of a property value."""
    if isinstance(value, bool):
        return ("true" if value else "false"), XSD_BOOLEAN
    if isinstance(value, int):
        return str(value), XSD_INTEGER
    if isinstance(value, float):
        return repr(value), XSD_DOUBLE
    if isinstance(value, str):
        if _DATE.fullmatch(value) and _valid_date(value):
            return value, XSD_DATE
        if _DATETIME.fullmatch(value) and _valid_datetime(value):
            return value, XSD_DATETIME
        return value, XSD_STRING
    return canonical_json(value), RDF_JSON


def _valid_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _valid_datetime(text: str) -> bool:
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _quote(text: str) -> str:
    # JSON string escapes are a subset of the N-Triples/Turtle ones.
    return json.dumps(text, ensure_ascii=False)


def nt_literal(value: Any) -> str:
    lexical, datatype = literal_parts(value)
    if datatype == XSD_STRING:
        return _quote(lexical)
    return f"{_quote(lexical)}^^<{datatype}>"


def node_ntriples(node_id: str, attrs: Mapping[str, Any]) -> str:
    """The N-Triples lines of one node (label and properties)."""
    subject = f"<{node_iri(node_id)}>"
    lines = [f"{subject} <{RDF_TYPE}> <{type_iri(str(attrs.get(LABEL)))}> ."]
    for name, value in attrs.items():
        if name != LABEL:
            lines.append(f"{subject} <{prop_iri(name)}> {nt_literal(value)} .")
    return "\n".join(lines)


def needs_description(relationship: str, edges: list[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether the edges of one (source, relationship, target) group need description nodes."""
    if len(edges) != 1:
        return True
    key, attrs = edges[0]
    return key != relationship or any(name != RELATIONSHIP for name in attrs)


def edge_group_ntriples(
    source: str, target: str, relationship: str, edges: list[tuple[str, Mapping[str, Any]]]
) -> str:
    """The N-Triples lines of all edges from ``source`` to ``target`` with one relationship.

    Args:
        edges: (key, attributes) of each edge in the group; an empty list means no edges.
    """
    if not edges:
        return ""
    s, t, r = f"<{node_iri(source)}>", f"<{node_iri(target)}>", f"<{rel_iri(relationship)}>"
    lines = [f"{s} {r} {t} ."]
    if needs_description(relationship, edges):
        for key, attrs in edges:
            d = f"<{edge_iri(source, key, target)}>"
            lines += [f"{d} <{KG_SOURCE}> {s} .", f"{d} <{KG_RELATIONSHIP}> {r} ."]
            lines.append(f"{d} <{KG_TARGET}> {t} .")
            if key != relationship:
                lines.append(f"{d} <{KG_KEY}> {_quote(key)} .")
            for name, value in attrs.items():
                if name != RELATIONSHIP:
                    lines.append(f"{d} <{prop_iri(name)}> {nt_literal(value)} .")
    return "\n".join(lines)


def graph_ntriples(nodes: Iterable[tuple[str, Mapping[str, Any]]], edges: Iterable[Any]) -> str:
    """N-Triples of a whole property graph.

    Args:
        nodes: (id, attributes) pairs.
        edges: (source, target, key, attributes) tuples.
    """
    parts = [node_ntriples(node_id, attrs) for node_id, attrs in nodes]
    for (source, target, relationship), group in group_edges(edges).items():
        parts.append(edge_group_ntriples(source, target, relationship, group))
    return "\n".join(p for p in parts if p) + "\n"


def group_edges(edges: Iterable[Any]) -> dict[tuple[str, str, str], list[tuple[str, Any]]]:
    groups: dict[tuple[str, str, str], list[tuple[str, Any]]] = {}
    for source, target, key, attrs in edges:
        relationship = str(attrs.get(RELATIONSHIP))
        groups.setdefault((source, target, relationship), []).append((key, attrs))
    return groups


# Turtle-like text for graph views: prefixed names, bare numbers and booleans.


def turtle_value(value: Any) -> str:
    lexical, datatype = literal_parts(value)
    if datatype == XSD_STRING:
        return _quote(lexical)
    if datatype in (XSD_INTEGER, XSD_BOOLEAN):
        return lexical
    if datatype == XSD_DOUBLE:
        return lexical if ("e" in lexical or "E" in lexical) else lexical + "e0"
    return f"{_quote(lexical)}^^{compact(datatype)}"


# ---------------------------------------------------------------------------------------------
# RDF -> property graph


class ValueProblem(ValueError):
    """A literal that has no property-graph value."""


_DIGITS = re.compile(r"[+-]?[0-9]+")


def _integer_value(lexical: str, datatype: str) -> int:
    """An integer literal within the signed 64-bit range property values allow."""
    try:
        number = int(lexical)
    except ValueError:
        if not _DIGITS.fullmatch(lexical.strip()):
            raise ValueProblem(f"{_quote(lexical)} is not a valid {compact(datatype)}") from None
        number = None  # digits too many for Python to convert
    if number is None or not INT_MIN <= number <= INT_MAX:
        shown = lexical if len(lexical) <= 40 else lexical[:12] + "…"
        raise ValueProblem(
            f"{_quote(shown)} is an integer outside the signed 64-bit range ({INT_MIN} to "
            f"{INT_MAX}); store it as a string"
        )
    return number


def literal_value(lexical: str, datatype: str, language: str | None = None) -> Any:
    """The property value of an RDF literal.

    Raises:
        ValueProblem: ill-typed lexical forms, non-finite numbers, invalid rdf:JSON.
    """
    if language or datatype in (XSD_STRING, RDF_LANG_STRING):
        return lexical
    if datatype == XSD_BOOLEAN:
        if lexical in ("true", "1"):
            return True
        if lexical in ("false", "0"):
            return False
        raise ValueProblem(f"{_quote(lexical)} is not a valid xsd:boolean")
    if datatype in _INTEGER_TYPES:
        return _integer_value(lexical, datatype)
    if datatype in _FLOAT_TYPES:
        try:
            number = float(lexical)
        except ValueError:
            raise ValueProblem(f"{_quote(lexical)} is not a valid {compact(datatype)}") from None
        if not math.isfinite(number):
            raise ValueProblem(
                f"{_quote(lexical)} is not a finite number (NaN and infinity have no JSON form)"
            )
        return number
    if datatype == RDF_JSON:
        try:
            return json.loads(lexical)
        except ValueError:
            raise ValueProblem(f"{_quote(lexical[:80])} is not valid rdf:JSON") from None
    return lexical  # dates, times, other datatypes: their lexical form


def typed_nodes(quads: Any, ox: Any) -> set[str]:
    """Ids of the nodes given a type by ``quads`` (``node:x a type:…``)."""
    ids = set()
    for quad in quads:
        subject = quad.subject
        if (
            quad.predicate.value == RDF_TYPE
            and isinstance(subject, ox.NamedNode)
            and subject.value.startswith(NODE)
            and isinstance(quad.object, ox.NamedNode)
            and quad.object.value.startswith(TYPE)
        ):
            ids.add(decode_local(subject.value[len(NODE) :]))
    return ids
