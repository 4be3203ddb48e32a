"""How views write nodes and edges: each backend in its own syntax.

A view shows ids exactly as the model must write them in code — JSON-quoted strings for Python,
prefixed names for SPARQL — so the model can copy them. Nothing in a line can start another:
ids, values and unusual property names are quoted or percent-encoded, and labels and
relationships are single words by the graph rules. Long values are cut here, for display only;
queries always see whole values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from kgot.graph_backends.jobs.rdf_model import (
    compact,
    edge_iri,
    node_iri,
    prop_iri,
    rel_iri,
    turtle_value,
    type_iri,
)
from kgot.graph_model import LABEL, RELATIONSHIP, TYPE_NAME

MAX_STRING_CHARS = 200  # longer values are cut in views (queries still see them whole)
MAX_LIST_ITEMS = 10


class LineFormat(Protocol):
    """How one backend writes nodes and edges in a view (its own syntax, so the model can copy
    ids and names straight into code)."""

    nodes_heading: str
    edges_heading: str

    def node_line(self, node_id: str, attrs: Mapping[str, Any]) -> str: ...

    def edge_line(self, source: str, target: str, key: str, attrs: Mapping[str, Any]) -> str: ...

    def mark(self, line: str, marker: str) -> str:
        """``line`` with an entity run's marker on a fact (``[inferred 0.6]``), set off so it
        cannot be read as part of the fact."""
        ...


def shorten(value: Any) -> Any:
    """``value`` with long strings and lists cut, for display only."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return f"{value[:MAX_STRING_CHARS]}…(+{len(value) - MAX_STRING_CHARS} chars)"
    if isinstance(value, list):
        kept = [shorten(v) for v in value[:MAX_LIST_ITEMS]]
        if len(value) > MAX_LIST_ITEMS:
            kept.append(f"…(+{len(value) - MAX_LIST_ITEMS} more)")
        return kept
    if isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False)
        return shorten(text) if len(text) > MAX_STRING_CHARS else value
    return value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _name(name: str) -> str:
    """A property name as a view shows it: bare when it is one word, else JSON-quoted, so no
    name (a newline, a quote) can make the line read as something else."""
    return name if TYPE_NAME.fullmatch(name) else _json(name)  # bare as labels are


class PythonLines:
    """``"ada" Person name="Ada Lovelace" born=1815`` and ``"ada" -WROTE-> "note_g" year=1843``."""

    nodes_heading = "Nodes (id label property=value …):"
    edges_heading = "Edges (source -relationship-> target property=value …):"

    def node_line(self, node_id: str, attrs: Mapping[str, Any]) -> str:
        parts = [_json(node_id), str(attrs.get(LABEL))]
        parts += [f"{_name(k)}={_json(shorten(v))}" for k, v in attrs.items() if k != LABEL]
        return " ".join(parts)

    def edge_line(self, source: str, target: str, key: str, attrs: Mapping[str, Any]) -> str:
        relationship = attrs.get(RELATIONSHIP)
        parts = [_json(source), f"-{relationship}->", _json(target)]
        if key != relationship:
            parts.append(f"key={_json(key)}")
        parts += [f"{_name(k)}={_json(shorten(v))}" for k, v in attrs.items() if k != RELATIONSHIP]
        return " ".join(parts)

    def mark(self, line: str, marker: str) -> str:
        return f"{line}  {marker}"


class TurtleLines:
    """``node:ada a type:Person ; prop:name "Ada Lovelace" .`` and
    ``node:ada rel:WROTE node:note_g .`` (edge properties on ``edge:`` resources)."""

    nodes_heading = "Nodes (Turtle):"
    edges_heading = "Edges (Turtle; edge properties on edge: resources):"

    def node_line(self, node_id: str, attrs: Mapping[str, Any]) -> str:
        parts = [f"{compact(node_iri(node_id))} a {compact(type_iri(str(attrs.get(LABEL))))}"]
        parts += [
            f"{compact(prop_iri(k))} {turtle_value(shorten(v))}"
            for k, v in attrs.items()
            if k != LABEL
        ]
        return " ; ".join(parts) + " ."

    def edge_line(self, source: str, target: str, key: str, attrs: Mapping[str, Any]) -> str:
        relationship = str(attrs.get(RELATIONSHIP))
        line = (
            f"{compact(node_iri(source))} {compact(rel_iri(relationship))} "
            f"{compact(node_iri(target))} ."
        )
        extra = [f"kg:key {_json(key)}"] if key != relationship else []
        extra += [
            f"{compact(prop_iri(k))} {turtle_value(shorten(v))}"
            for k, v in attrs.items()
            if k != RELATIONSHIP
        ]
        if extra:
            line += f" {compact(edge_iri(source, key, target))} " + " ; ".join(extra) + " ."
        return line

    def mark(self, line: str, marker: str) -> str:
        return f"{line}  # {marker}"  # a Turtle comment
