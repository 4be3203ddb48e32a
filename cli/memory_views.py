"""How `kgot memory` prints what it found: search hits with the facts behind them (issue 27,
item 3), and long lines wrapped (upkeep -v), in 80 columns.

A hit is one headline (score, kind, label, id, name: the columns scripts read) and, indented
under it, the facts that answer the query: the properties it matched, then its type's key
properties, then (a node) the edges it matched, ``-[ceo]-> Tim Cook``, or (an edge) its two
ends by name; and its confidence and freshness when they are below 1.
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, Any

from kgot.cli.common import printable

if TYPE_CHECKING:
    from kgot.memory import RelatedEdge, SearchHit

__all__ = ["WIDTH", "fit", "hit_lines", "wrapped"]

WIDTH = 80
INDENT = " " * 7  # under the headline's kind, past the score
MAX_PROPERTIES = 4  # property lines per hit
MAX_EDGES = 3  # edge lines per hit (the rest are counted)


def hit_lines(hit: SearchHit) -> list[str]:
    """The headline of ``hit`` and the lines of the facts behind it, each at most
    :data:`WIDTH` columns."""
    lines = [fit(printable(f"{hit.score:.3f}  {hit.kind}  {hit.label}  {hit.id}  {hit.name}"))]
    details: list[str] = []
    if hit.ends is not None:
        source, target = hit.ends
        details.append(f"{source} -[{hit.label}]-> {target}")
        shown = _property_order(hit, everything=True)
    else:
        shown = _property_order(hit, everything=False)
    details += [f"{name}: {_value(hit.properties[name])}" for name in shown[:MAX_PROPERTIES]]
    if len(shown) > MAX_PROPERTIES:
        details.append(f"… and {len(shown) - MAX_PROPERTIES} more properties (--json shows all)")
    details += [_edge_line(edge) for edge in hit.edges[:MAX_EDGES]]
    if hit.edges_matched > MAX_EDGES:
        more = hit.edges_matched - MAX_EDGES
        details.append(f"… and {more} more matching edge{'s' if more != 1 else ''}")
    trust = _trust(hit)
    if trust:
        details.append(trust)
    lines += [fit(INDENT + printable(line)) for line in details]
    return lines


def fit(text: str, width: int = WIDTH) -> str:
    """``text`` on one line of at most ``width`` columns (cut with an ellipsis)."""
    flat = " ".join(text.split()) if "\n" in text or "\t" in text else text
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def wrapped(text: str, *, indent: str, hanging: str, width: int = WIDTH) -> list[str]:
    """``text`` wrapped at word boundaries into lines of at most ``width`` columns (a word
    longer than a line stays whole): the first line starts with ``indent``, the rest with
    ``hanging``."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def _property_order(hit: SearchHit, *, everything: bool) -> list[str]:
    """Matched properties first, then key ones; ``everything``: then the rest too (an edge
    has few, and each says something about the link)."""
    names = [*hit.matched_properties, *hit.key_properties]
    if everything:
        names += [n for n in hit.properties if n != "name"]
    return [n for n in dict.fromkeys(names) if n in hit.properties]


def _edge_line(edge: RelatedEdge) -> str:
    arrow = (
        f"-[{edge.relationship}]-> {edge.other_name}"
        if edge.direction == "out"
        else f"<-[{edge.relationship}]- {edge.other_name}"
    )
    if edge.other_name != edge.other:
        arrow += f" ({edge.other})"
    if edge.confidence < 1.0:
        arrow += f"  confidence {edge.confidence:.2f}"
    return arrow


def _trust(hit: SearchHit) -> str:
    """``confidence 0.70, freshness 0.42 (age 37 d)`` when either is below 1; else empty."""
    parts = []
    if hit.parts.confidence < 1.0:
        parts.append(f"confidence {hit.parts.confidence:.2f}")
    if hit.parts.freshness < 0.995:
        age = f" (age {hit.age_days:.0f} d)" if hit.age_days is not None else ""
        parts.append(f"freshness {hit.parts.freshness:.2f}{age}")
    return ", ".join(parts)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value, ensure_ascii=False, default=str)
