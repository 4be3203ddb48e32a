"""Trust in an entity run's facts: what a write is stored with, and how prompt views weigh it.

* **Defaults per producer.** A fact written from a tool result gets the confidence and source
  kind configured for that tool (``[memory.trust]``, :meth:`kgot.config.MemorySettings.trust_for`:
  ``wikipedia`` 0.8 extracted, ``llm_query`` 0.5 inferred, …; an unknown tool gets ``default``)
  through the commit's :class:`~kgot.persistence.Provenance`, unless its graph code sets
  ``_confidence`` / ``_source_kind``. The write prompt offers the ``model`` entry for what the
  model concludes itself rather than reads in the result. Nothing is 1.0 by default.
* **Prompt views** (:class:`FactLens`): the entity's facts ranked with
  :func:`kgot.memory.scoring.rank` and marked when their trust or age tells the model something:
  ``[inferred 0.6]``, ``[confidence 0.5]``, ``[412 d old]``.

The lens reads a fact's metadata and use when a view first asks about it, by key (a view
prefetches its candidates at once), never the whole entity, and follows the run's own commits
from then on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from kgot.graph_backends import RDF_NODE, rdf_decode_local
from kgot.memory import (
    DEFAULT_RANK_WEIGHTS,
    fact_freshness,
    parse_instant,
    rank,
    retention,
    temporal_properties,
)
from kgot.prompts import render_prompt

if TYPE_CHECKING:
    from kgot.config import Settings, Trust
    from kgot.graph_model import Changeset
    from kgot.persistence import EntitySession, Provenance, TypeCatalog

__all__ = [
    "LOW_CONFIDENCE",
    "STALE_FRESHNESS",
    "FactLens",
    "producer_trust",
    "trust_note",
]

# Markers say what the model should weigh: a fact below this confidence, or not extracted from
# a source, is marked with its kind and confidence ...
LOW_CONFIDENCE = 0.7
# ... and one older than its type's half-life (freshness below one half) with its age.
STALE_FRESHNESS = 0.5
DEFAULT_RANK_WEIGHT = 0.5
_EXTRACTED = "extracted"

_RELEVANCE = DEFAULT_RANK_WEIGHTS.relevance
EdgeIdent = tuple[str, str, str]
Kind = Literal["node", "edge"]


def producer_trust(settings: Settings, producer: str | None) -> Trust:
    """The trust of facts written from ``producer``'s result (a tool name; ``None``: the model's
    own conclusion)."""
    return settings.memory.trust_for(producer)


def trust_note(settings: Settings, language: str, producer: str) -> str:
    """The write prompt's paragraph on fact metadata (entity runs, ``prompts/write_trust.md``):
    what the result's facts are stored with, and when and how graph code sets a fact's own."""
    given = producer_trust(settings, producer)
    own = producer_trust(settings, None)
    if language == "sparql":
        syntax = (
            "give them as properties of the node or edge resource, e.g. "
            f'`node:x prop:_confidence {_number(own.confidence)} ; prop:_source_kind "inferred" .`'
        )
    else:
        syntax = (
            "set them as attributes of the node or edge, e.g. "
            f'`G.add_node("x", label=..., name=..., _confidence={_number(own.confidence)}, '
            '_source_kind="inferred")`'
        )
    [message] = render_prompt(
        "write_trust",
        producer=producer,
        source_kind=given.source_kind,
        confidence=_number(given.confidence),
        model_confidence=_number(own.confidence),
        metadata_syntax=syntax,
    )
    return f"\n{message.content}\n"


@dataclass
class _Fact:
    """What the lens knows of one current fact."""

    label: str  # node label or edge relationship
    confidence: float
    source_kind: str
    created: datetime | None
    reinforced: datetime | None
    temporal: datetime | None  # the latest of its temporal property values
    strength: float = 0.0
    # Derived on first use and dropped when the fact changes: the rank score without
    # relevance, and the marker.
    base: float | None = None
    marker: str | None = None


class FactLens:
    """Ranking and markers for the prompt views of one entity run
    (:class:`kgot.graph_backends.views.FactLens`)."""

    def __init__(
        self,
        nodes: dict[str, _Fact],
        edges: dict[EdgeIdent, _Fact],
        catalog: TypeCatalog | None,
        *,
        now: datetime | None = None,
        session: EntitySession | None = None,
    ) -> None:
        # Nodes and edges apart, keyed as views ask (no key tuple built per lookup).
        self._nodes = nodes
        self._edges = edges
        self._catalog = catalog
        self._session = session
        self._now = now or datetime.now(UTC)
        self._types: dict[tuple[Kind, str], tuple[float, float | None, tuple[str, ...]]] = {}
        self._looked_up: set[tuple[Kind, str]] = set()  # labels new to the lens, checked once
        # Facts read and found not current (another writer removed them, or a string that
        # names no node): not read again.
        self._absent: set[str | EdgeIdent] = set()

    # -- building and following -----------------------------------------------------------

    @classmethod
    def load(cls, session: EntitySession, *, now: datetime | None = None) -> FactLens:
        """The lens over ``session``'s current facts. Nothing is read yet: a fact's metadata
        and use are read when a view first asks about it (:meth:`prefetch` reads many at once),
        so a run reads what its views show, not the entity."""
        return cls({}, {}, session.type_catalog(), now=now, session=session)

    def prefetch(self, nodes: Iterable[str], edges: Iterable[EdgeIdent] = ()) -> None:
        """Read at once the facts among ``nodes`` and ``edges`` the lens does not know yet
        (a view calls it with its candidates before it ranks them)."""
        if self._session is None:
            return
        node_ids = [
            n for n in dict.fromkeys(nodes) if n not in self._nodes and n not in self._absent
        ]
        idents = [e for e in dict.fromkeys(edges) if e not in self._edges and e not in self._absent]
        if not node_ids and not idents:
            return
        graph = self._session.load_facts(node_ids, idents)
        found: list[tuple[str, ...]] = []
        for node_id in node_ids:
            if node_id in graph:
                attrs = graph.nodes[node_id]
                self._nodes[node_id] = self._stored_fact("node", attrs, attrs.get("label"))
                found.append(("node", node_id))
            else:
                self._absent.add(node_id)
        for ident in idents:
            if graph.has_edge(*ident):
                attrs = graph.edges[ident]
                self._edges[ident] = self._stored_fact("edge", attrs, attrs.get("relationship"))
                found.append(("edge", *ident))
            else:
                self._absent.add(ident)
        if found:
            for fact_key, use in self._session.fact_use(found).items():
                known = self._fact(fact_key)
                if known is not None:
                    known.strength = use.strength

    def _node(self, node_id: str) -> _Fact | None:
        fact = self._nodes.get(node_id)
        if fact is None and self._session is not None and node_id not in self._absent:
            self.prefetch([node_id])
            fact = self._nodes.get(node_id)
        return fact

    def _edge(self, ident: EdgeIdent) -> _Fact | None:
        fact = self._edges.get(ident)
        if fact is None and self._session is not None and ident not in self._absent:
            self.prefetch((), [ident])
            fact = self._edges.get(ident)
        return fact

    def _fact(self, key: tuple[str, ...]) -> _Fact | None:
        if key[0] == "node":
            return self._nodes.get(key[1])
        return self._edges.get((key[1], key[2], key[3]))

    def committed(self, changeset: Changeset, provenance: Provenance) -> None:
        """Follow a commit of this run: its facts carry their own ``_confidence`` /
        ``_source_kind`` or the commit's defaults (as the store keeps them). Call it before the
        changeset is applied to the backend, so the view lines rebuilt for it see the change."""
        now = datetime.now(UTC)
        for node_id in changeset.removed_nodes:
            self._nodes.pop(node_id, None)
            self._absent.add(node_id)
        for ident in changeset.removed_edges:
            self._edges.pop(ident, None)
            self._absent.add(ident)
        written: list[tuple[Any, dict[Any, _Fact], Kind, str, Mapping[str, Any]]] = [
            (n.id, self._nodes, "node", n.label, n.properties)
            for n in (*changeset.added_nodes, *changeset.changed_nodes)
        ]
        written += [
            (e.ident, self._edges, "edge", e.relationship, e.properties)
            for e in (*changeset.added_edges, *changeset.changed_edges)
        ]
        for fact_key, facts, kind, label, properties in written:
            if (kind, label) not in self._types and (kind, label) not in self._looked_up:
                self._looked_up.add((kind, label))
                if self._catalog is not None and self._catalog.get(kind, label) is None:
                    self._reload_catalog()  # a type the run created since the lens was built
            self._absent.discard(fact_key)
            old = facts.get(fact_key)
            confidence = properties.get("_confidence")
            if not isinstance(confidence, int | float) or isinstance(confidence, bool):
                confidence = provenance.confidence if provenance.confidence is not None else 1.0
            source_kind = properties.get("_source_kind") or provenance.source_kind
            facts[fact_key] = _Fact(
                label=label,
                confidence=float(confidence),
                source_kind=str(source_kind),
                created=old.created if old is not None else now,
                reinforced=now if old is not None else None,
                temporal=self._temporal(kind, label, properties),
                strength=old.strength if old is not None else 0.0,
            )

    def _stored_fact(self, kind: Kind, attrs: Mapping[str, Any], label: Any) -> _Fact:
        confidence = attrs.get("_confidence")
        return _Fact(
            label=str(label),
            confidence=float(confidence) if isinstance(confidence, int | float) else 1.0,
            source_kind=str(attrs.get("_source_kind") or _EXTRACTED),
            created=parse_instant(attrs.get("_created_at")),
            reinforced=parse_instant(attrs.get("_reinforced_at")),
            temporal=self._temporal(kind, str(label), attrs),
        )

    def _reload_catalog(self) -> None:
        if self._session is not None:
            self._catalog = self._session.type_catalog()
            self._types.clear()

    # -- type settings --------------------------------------------------------------------

    def _type(self, kind: Kind, label: str) -> tuple[float, float | None, tuple[str, ...]]:
        """(rank weight, half-life in days, temporal property names) of a type."""
        found = self._types.get((kind, label))
        if found is None:
            type_def = self._catalog.get(kind, label) if self._catalog is not None else None
            upkeep = getattr(type_def, "upkeep", None)
            schema = type_def.spec.properties if type_def is not None else None
            found = (
                float(getattr(upkeep, "rank_weight", DEFAULT_RANK_WEIGHT)),
                getattr(upkeep, "half_life_days", None),
                temporal_properties(schema),
            )
            self._types[(kind, label)] = found
        return found

    def _temporal(self, kind: Kind, label: str, properties: Mapping[str, Any]) -> datetime | None:
        names = self._type(kind, label)[2]
        found = [parse_instant(properties.get(name)) for name in names if name in properties]
        return max((f for f in found if f is not None), default=None)

    # -- reinforcement --------------------------------------------------------------------

    def named_nodes(self, value: Any) -> list[str]:
        """The entity's nodes a query result names by id (any string in it, dict keys
        included; SPARQL's ``node:…`` names decoded), at most :data:`MAX_NAMED` of them."""
        found: dict[str, None] = {}
        batch: dict[str, None] = {}

        def read_batch() -> None:
            # Read a batch of strings as ids at once; stop reading once enough are nodes.
            self.prefetch(batch)
            found.update((n, None) for n in batch if n in self._nodes)
            batch.clear()

        for text in _strings(value):
            for node_id in (text, _sparql_node(text)):
                if node_id is not None and node_id not in self._absent:
                    batch[node_id] = None
            if len(batch) >= _NAMED_BATCH:
                read_batch()
                if len(found) >= MAX_NAMED:
                    break
        read_batch()
        return list(found)[:MAX_NAMED]

    def used_facts(self, node_ids: Iterable[str]) -> list[tuple[str, ...]]:
        """Keys of the facts an answer used, given the nodes its query result named: those
        nodes and the current edges between two of them."""
        named = set(node_ids)
        keys: list[tuple[str, ...]] = [("node", n) for n in named if self._node(n) is not None]
        if len(named) > 1:
            between: set[EdgeIdent] = set()
            if self._session is not None:
                around = self._session.facts_around(named)
                between = {
                    (s, t, k)
                    for s, t, k in around.edges(keys=True)
                    if s in named and t in named and (s, t, k) not in self._absent
                }
            between |= {e for e in self._edges if e[0] in named and e[1] in named}
            keys += [("edge", *ident) for ident in sorted(between)]
        return keys

    # -- what views ask -------------------------------------------------------------------

    def node_marker(self, node_id: str) -> str:
        """The node's marker (``""`` when its trust and age say nothing worth a token)."""
        return self._marker(self._node(node_id), "node")

    def edge_marker(self, ident: EdgeIdent) -> str:
        return self._marker(self._edge(ident), "edge")

    def node_score(self, node_id: str, relevance: float) -> float:
        """The node's ranking score for a relevance of 0 to 1 (:func:`kgot.memory.scoring.rank`)."""
        fact = self._node(node_id)
        base = fact.base if fact is not None else None
        return _RELEVANCE * relevance + (base if base is not None else self._base(fact, "node"))

    def edge_score(self, ident: EdgeIdent, relevance: float) -> float:
        fact = self._edge(ident)
        base = fact.base if fact is not None else None
        return _RELEVANCE * relevance + (base if base is not None else self._base(fact, "edge"))

    def _freshness(self, fact: _Fact, kind: Kind) -> tuple[float, float | None]:
        half_life = self._type(kind, fact.label)[1]
        return fact_freshness(
            {
                "t": fact.temporal,
                "_reinforced_at": fact.reinforced,
                "_created_at": fact.created,
            },
            now=self._now,
            half_life_days=half_life,
            temporal=("t",),
        )

    def _base(self, fact: _Fact | None, kind: Kind) -> float:
        """The score of ``fact`` at relevance 0: ranking is linear in relevance, so a view adds
        ``0.6 · relevance`` (the relevance weight) to this, computed once per fact."""
        if fact is None:
            return _UNKNOWN_BASE
        if fact.base is None:
            fresh, _ = self._freshness(fact, kind)
            fact.base = rank(
                0.0,
                rank_weight=self._type(kind, fact.label)[0],
                confidence=fact.confidence,
                fresh=retention(fresh, fact.strength),
            ).score
        return fact.base

    def _marker(self, fact: _Fact | None, kind: Kind) -> str:
        if fact is None:
            return ""
        if fact.marker is None:
            parts = []
            if fact.source_kind != _EXTRACTED:
                parts.append(f"{fact.source_kind} {_number(fact.confidence)}")
            elif fact.confidence < LOW_CONFIDENCE:
                parts.append(f"confidence {_number(fact.confidence)}")
            fresh, age = self._freshness(fact, kind)
            if fresh < STALE_FRESHNESS and age is not None:
                parts.append(f"{math.floor(age):,} d old")
            fact.marker = f"[{', '.join(parts)}]" if parts else ""
        return fact.marker


# A fact the lens does not know (another writer added it during the run): ranked as a
# confident, fresh fact of an average type.
_UNKNOWN_BASE = rank(0.0, rank_weight=DEFAULT_RANK_WEIGHT, confidence=1.0, fresh=1.0).score


MAX_NAMED = 1_000  # nodes one query result can reinforce
_NAMED_BATCH = 500  # strings of a query result read as node ids at once
_MAX_STRINGS = 20_000  # strings looked at in one result


def _strings(value: Any) -> Iterator[str]:
    """The strings in a JSON value, depth first (dict keys too), at most ``_MAX_STRINGS``."""
    stack = [value]
    seen = 0
    while stack and seen < _MAX_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            seen += 1
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _sparql_node(text: str) -> str | None:
    """The node id of a SPARQL result's ``node:…`` name (or full ``urn:kgot:node:…`` IRI)."""
    for prefix in ("node:", RDF_NODE):
        if text.startswith(prefix) and len(text) > len(prefix):
            return rdf_decode_local(text[len(prefix) :])
    return None


def _number(value: float) -> str:
    """``0.6``, ``0.85``, ``1``: a confidence as short as it reads."""
    return f"{value:.2f}".rstrip("0").rstrip(".")
