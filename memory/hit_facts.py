"""What a search hit found: the facts behind it that the query matched (issue 27, item 3).

A hit names a node or an edge, but whoever searched "apple ceo" wants to read "Tim Cook", not
an id. :func:`explain` fills in, for each hit of :func:`kgot.memory.search.search`:

* ``properties``: the fact's own properties (metadata such as ``_confidence`` left out);
* ``matched_properties``: those a query word matches, in their name or in their value, by the
  rules search matches words with (exactly, as a prefix, or by spelling where search allowed
  it). ``name`` and ``title`` are left out: every hit already shows its name;
* ``key_properties``: the properties its type's upkeep settings single out (``identity``,
  ``functional``) that it holds, which say what the thing is even when the query did not
  name them (a Company's ``symbol``, its ``ceo``);
* for a node, ``edges``: its current edges the query matched through their relationship (or
  key, or own name) or the node at their other end, best match first, at most
  :data:`MAX_EDGES` of them (``edges_matched`` counts them all);
* for an edge, ``ends``: the names of its source and target.

All of it comes from the index the search ranked with (the same snapshot of the entity's
current facts), so explaining a hit costs no read of the store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kgot.memory.names import fold_text

if TYPE_CHECKING:
    from kgot.memory.search import SearchHit, SearchIndex
    from kgot.persistence import TypeCatalog

__all__ = ["MAX_EDGES", "RelatedEdge", "explain"]

MAX_EDGES = 10  # matched edges kept per node hit (the rest are counted)
PREFIX_MIN = 3  # as kgot.memory.search: a query word this long matches the words it starts
HEADLINE_PROPERTIES = ("name", "title")  # shown as the hit's name already


@dataclass(frozen=True)
class RelatedEdge:
    """A current edge of a node hit that the query matched: ``-[ceo]-> Tim Cook``."""

    id: str  # 'source -[key]-> target', as search and history name edges
    relationship: str
    direction: str  # "out": the hit is its source; "in": its target
    other: str  # the id of the node at the other end
    other_name: str
    confidence: float
    properties: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "relationship": self.relationship,
            "direction": self.direction,
            "other": self.other,
            "other_name": self.other_name,
            "confidence": round(self.confidence, 4),
            "properties": dict(self.properties),
        }


def explain(
    index: SearchIndex,
    hits: Sequence[SearchHit],
    words: Sequence[str],
    catalog: TypeCatalog,
    *,
    clock: datetime,
) -> list[SearchHit]:
    """``hits`` with the facts behind each filled in (module docstring). ``words`` are the
    query's folded words; edges expired at ``clock`` are left out, as search leaves them."""
    matcher = _Matcher(index, words)
    key_names: dict[tuple[str, str], tuple[str, ...]] = {}
    explained = []
    for hit in hits:
        position = index.position_of(hit.key)
        if position is None:  # not in this index (a hit of another snapshot): leave it be
            explained.append(hit)
            continue
        fact = index.facts[position]
        own = plain_properties(fact.data, "label" if fact.key[0] == "node" else "relationship")
        label_key = (fact.key[0], fact.label)
        if label_key not in key_names:
            key_names[label_key] = _key_property_names(catalog, *label_key)
        changes: dict[str, Any] = {
            "properties": own,
            "matched_properties": tuple(
                name
                for name, value in own.items()
                if name not in HEADLINE_PROPERTIES and matcher.matches(name, value)
            ),
            "key_properties": tuple(name for name in key_names[label_key] if name in own),
        }
        if fact.ends is not None:
            changes["ends"] = tuple(index.facts[end].name for end in fact.ends)
        else:
            edges = _matched_edges(index, position, matcher, clock)
            changes["edges"] = tuple(edges[:MAX_EDGES])
            changes["edges_matched"] = len(edges)
        explained.append(dataclasses.replace(hit, **changes))
    return explained


def plain_properties(data: Mapping[str, Any], label_key: str) -> dict[str, Any]:
    """A fact's properties without its metadata (``_confidence``, …) and its label or
    relationship."""
    return {k: v for k, v in data.items() if not k.startswith("_") and k != label_key}


def _key_property_names(catalog: TypeCatalog, kind: str, label: str) -> tuple[str, ...]:
    type_def = catalog.get("node" if kind == "node" else "edge", label)
    if type_def is None:
        return ()
    upkeep = type_def.upkeep
    names = [*upkeep.identity, *upkeep.functional]
    return tuple(n for n in dict.fromkeys(names) if n not in HEADLINE_PROPERTIES)


def _matched_edges(
    index: SearchIndex, position: int, matcher: _Matcher, clock: datetime
) -> list[RelatedEdge]:
    """The node's current edges the query matched, best match first (then the more trusted,
    then by id)."""
    from kgot.persistence import fact_id  # here: search stays importable without the store

    found: list[tuple[float, RelatedEdge]] = []
    for edge_position in index.incident.get(position, ()):
        if not index.alive(edge_position, clock):
            continue
        edge = index.facts[edge_position]
        assert edge.ends is not None  # only edges are incident
        source, target = edge.ends
        other = target if source == position else source
        texts = [edge.label, edge.key[3], *edge.names]
        strength = max(
            matcher.best(fold_text(text).split() for text in texts),
            matcher.best(name.split() for name in index.facts[other].names),
        )
        if strength <= 0.0:
            continue
        related = RelatedEdge(
            id=fact_id(edge.key),
            relationship=edge.label,
            direction="out" if source == position else "in",
            other=index.facts[other].key[1],
            other_name=index.facts[other].name,
            confidence=edge.confidence,
            properties=plain_properties(edge.data, "relationship"),
        )
        found.append((strength, related))
    found.sort(key=lambda item: (-item[0], -item[1].confidence, item[1].id))
    return [related for _, related in found]


class _Matcher:
    """Whether a fact's words match the query, by search's own rules: the index words each
    query word matched (exactly, as a prefix or by spelling), plus, for words the index does
    not hold (property names are not indexed), an exact or prefix match."""

    def __init__(self, index: SearchIndex, words: Sequence[str]) -> None:
        self.words = tuple(words)
        self.expanded: dict[str, float] = {}
        for word in self.words:
            for other, similarity in index.word_matches(word):
                self.expanded[other] = max(self.expanded.get(other, 0.0), similarity)

    def similarity(self, word: str) -> float:
        best = self.expanded.get(word, 0.0)
        for query in self.words:
            if word == query:
                return 1.0
            if len(query) >= PREFIX_MIN and word.startswith(query):
                best = max(best, 0.8 + 0.2 * len(query) / len(word))
        return best

    def best(self, word_lists: Iterable[Iterable[str]]) -> float:
        return max((self.similarity(w) for words in word_lists for w in words), default=0.0)

    def matches(self, name: str, value: Any) -> bool:
        """A property matches when a query word matches a word of its name or its value."""
        texts = [name, *_value_texts(value)]
        return self.best(fold_text(text).split() for text in texts) > 0.0


def _value_texts(value: Any) -> list[str]:
    """The words a property value can be found by: strings, numbers, and those in lists."""
    if isinstance(value, bool):
        return []
    if isinstance(value, str | int | float):
        return [str(value)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _value_texts(item)]
    return []
