"""Search one entity's current facts for a free-text query, ranked (issue 15, section 4).

:func:`search` scores every current node and edge of one entity's session against a query and
returns the best ones as :class:`SearchHit` s. The score is :func:`kgot.memory.scoring.rank`:
``0.6·relevance + 0.15·rank_weight + 0.15·confidence + 0.10·freshness``, where

* **relevance** (0–1) is lexical and deterministic, computed here (below);
* **rank_weight** is the fact's type's ``rank_weight`` upkeep setting;
* **confidence** is the fact's stored confidence;
* **freshness** is :func:`kgot.memory.scoring.retention` of the fact's half-life freshness
  (:func:`~kgot.memory.scoring.fact_freshness`, at ``now``) and the strength its use earned
  (:meth:`EntitySession.fact_use`: +0.10 per use, +0.20 per good feedback).

A fact with zero relevance is never a hit. Superseded, merged-away and expired facts never
appear: only current facts are indexed, expired ones are left out when read, and a fact (or an
edge end) that expires during a query is dropped. Only the session's entity is read.

Relevance
    Words are folded like names (:func:`kgot.memory.names.fold_text`: NFKC, Latin accents off,
    case-folded, punctuation splits). Each fact has three kinds of text: its *names* (``name``,
    ``aliases``, ``title``, its label or relationship) weigh 1, its other string properties
    (descriptions, summaries, …) 0.6, and for an edge the names of its two ends 0.5 (so "apple
    headquarters" finds Apple's ``headquartered_in`` edge, below Apple itself).
    A query word matches a fact's word exactly (1), as a prefix of it (``appl`` → ``apple``,
    0.8–1 by how much of the word it covers), or, only when the graph has no word it equals or
    starts, by spelling (rapidfuzz ``ratio`` ≥ 80, weighed down to 0.9 of it) so a typo still
    finds something. The fact's *coverage* is the share of the query's words it matches, each
    weighed by its inverse document frequency (``ln(1 + (N + 1) / (df + 1))`` over the N facts;
    ``df`` counts the facts holding the word themselves, not edges holding it only through an
    end's name), so a rare word decides more than "group" or "inc". Coverage alone ties every
    fact that contains the query, so a fifth of relevance is *closeness*: rapidfuzz ``ratio``
    between the whole folded query and the fact's closest name (an exact name scores 1).
    ``relevance = 0.8·coverage + 0.2·closeness``, and 0 whenever coverage is 0.

    Why lexical with IDF and not embeddings or BM25: it needs no model, gives the same order in
    every process, is normalised to 0–1 by construction (BM25 is unbounded), and rapidfuzz only
    serves typos and closeness, where token overlap is blind.

    With embeddings configured (optional, :mod:`kgot.memory.embeddings`), the best
    ``4·limit`` lexical hits are re-ranked: a node with a stored vector gets
    ``relevance = 0.7·lexical + 0.3·cosine`` (its cosine to the query, clipped to 0–1); edges
    and nodes not embedded yet keep their lexical relevance. Embeddings re-order facts that
    share words with the query; they never add one that shares none.

What a hit shows
    Each hit carries the facts behind it (:mod:`kgot.memory.hit_facts`): its properties, the
    ones the query matched, its type's key properties and, for a node, its current edges the
    query matched (``-[ceo]-> Tim Cook``), all from the same index, so the search for "apple
    ceo" shows who the CEO is.

Speed
    The words live in the store (:mod:`kgot.memory.search_index`, kept up to date per commit):
    a query reads the index words its words equal, start or (failing both) resemble, the
    postings of those words (fact, part, label, confidence, version), and the entity's fact
    count. Each fact holding a query word gets an upper bound of its score from those alone;
    the best bounds' facts (:data:`FIRST_CANDIDATES`, at least 8 × ``limit``) are read by key
    and scored exactly by a :class:`SearchIndex` of just those facts, which ranks as a
    whole-graph index would because the entity's fact count, each word's document frequency
    and its matches are the whole entity's. When an unread fact's bound could still beat the
    last hit, four times more are read, up to :data:`MAX_CANDIDATES`: a query whose words
    most of a large entity holds ("group") ranks the :data:`MAX_CANDIDATES` facts of best
    bound (ties: the most recently written). Within the index's scoring, scores are bounded
    in two more steps so only facts that could still enter the top ``limit`` are scored
    exactly (:meth:`SearchIndex.search`). Edges that hold a query word only through an end's
    name are not in the postings: they are read (by their ends) only at the nodes whose names
    could give such an edge a score above the last hit's, usually none. A hit's surroundings
    (its edges the query matched) are read by key too. No search loads the whole graph: its
    cost follows the facts holding its words, not the entity's size.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from kgot.errors import UsageError
from kgot.memory import scoring, search_index
from kgot.memory.hit_facts import RelatedEdge, explain
from kgot.memory.names import fold_text
from kgot.memory.search_index import (
    FUZZY_CUTOFF,
    FUZZY_DISCOUNT,
    FUZZY_MIN,
    PREFIX_MIN,
    fact_names,
    other_text,
)

if TYPE_CHECKING:
    import networkx as nx

    from kgot.memory.embeddings import NodeEmbedder
    from kgot.persistence import EntitySession, TypeCatalog

__all__ = [
    "RelatedEdge",
    "SearchHit",
    "fact_key_for",
    "search",
]

FactKey = tuple[str, ...]  # ("node", id) or ("edge", source, target, key)

NAME_WEIGHT = 1.0  # name, aliases, title, label
TEXT_WEIGHT = 0.6  # other string properties
CONTEXT_WEIGHT = 0.5  # an edge's ends' names
COVERAGE_SHARE = 0.8  # relevance = 0.8·coverage + 0.2·closeness
CHUNK = 256  # facts whose closeness one rapidfuzz call computes
BATCH = 16  # facts scored exactly per round (one fact-use read each)
FIRST_CANDIDATES = 200  # facts a search reads first (at least 8 x its limit)
MAX_CANDIDATES = 1_000  # and at most (a query most facts match ranks the best bounds of them)
RARE_WORD_HOLDERS = 200  # a word held by more facts says little of which ones a text means
MAX_SEED_WORDS = 40  # words of a text looked up by nodes_named_by_rare_words
DEFAULT_CONFIDENCE = 1.0
# Words a question carries that say nothing about which fact is meant.
_STOPWORD_TEXT = (
    "a an and are as at be by did do does for from has have how in is it its of on or that "
    "the their this to was were what when where which who whom whose why with"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class SearchHit:
    """One fact a search found, with its score and the score's components, and the facts
    behind it (filled in by :func:`kgot.memory.hit_facts.explain`)."""

    key: FactKey  # for Memory.used / EntitySession.record_use
    label: str  # the node's label or the edge's relationship
    name: str
    parts: scoring.ScoreParts
    age_days: float | None = None
    properties: Mapping[str, Any] = field(default_factory=dict, compare=False)
    matched_properties: tuple[str, ...] = ()  # of `properties`, those the query matched
    key_properties: tuple[str, ...] = ()  # of `properties`: its type's identity, functional
    edges: tuple[RelatedEdge, ...] = ()  # a node: its current edges the query matched
    edges_matched: int = 0  # how many edges matched (`edges` holds the best ones)
    ends: tuple[str, str] | None = None  # an edge: the names of its source and target

    @property
    def kind(self) -> str:
        return self.key[0]

    @property
    def id(self) -> str:
        """The node's id, or the edge as ``source -[key]-> target``."""
        from kgot.persistence import fact_id

        return fact_id(self.key)

    @property
    def score(self) -> float:
        return self.parts.score

    @property
    def confidence(self) -> float:
        return self.parts.confidence

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``kgot memory search --json``: the fact, its score's parts and the
        facts behind it (``ends`` is null for a node; ``edges`` empty for an edge)."""
        ends = None
        if self.ends is not None:
            ends = {
                "source": {"id": self.key[1], "name": self.ends[0]},
                "target": {"id": self.key[2], "name": self.ends[1]},
            }
        return {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "name": self.name,
            "key": list(self.key),
            **self.parts.to_dict(),
            "properties": dict(self.properties),
            "matched_properties": list(self.matched_properties),
            "key_properties": list(self.key_properties),
            "edges": [edge.to_dict() for edge in self.edges],
            "edges_matched": self.edges_matched,
            "ends": ends,
        }


def search(
    session: EntitySession,
    query: str,
    *,
    limit: int = 10,
    type: str | None = None,
    min_confidence: float | None = None,
    now: datetime | None = None,
    embedder: NodeEmbedder | None = None,
) -> list[SearchHit]:
    """The best ``limit`` current facts of ``session``'s entity for ``query``, best first
    (module docstring). ``type``: only facts of this label or relationship;
    ``min_confidence``: only facts at least this confident; ``now``: the moment freshness is
    computed at (default: the clock), for reproducible scores. ``embedder`` (optional
    embeddings): the best ``CANDIDATE_FACTOR · limit`` lexical hits are re-ranked with each
    node's relevance blended with its cosine to the query
    (:func:`kgot.memory.embeddings.rerank`).

    Raises:
        UsageError: an empty query, ``limit`` < 1, ``min_confidence`` outside 0..1, or a
            ``type`` the entity has no type or fact of.
    """
    words = query_words(query)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}")
    if min_confidence is not None and not (
        isinstance(min_confidence, int | float) and 0.0 <= min_confidence <= 1.0
    ):
        raise UsageError(f"min_confidence must be between 0 and 1, not {min_confidence!r}")
    moment = _moment(now)
    catalog = session.type_catalog()
    version = search_index.update_search_index(session)
    if (
        type is not None
        and catalog.get("node", type) is None
        and catalog.get("edge", type) is None
        and not search_index.knows_label(session, type)
    ):
        raise UsageError(
            f"entity {session.entity!r} has no type or fact labelled {type!r}; "
            "see `kgot types list` for its types"
        )
    searcher = _StoreSearch(session, words, fold_text(query), catalog, version)
    if embedder is None:
        hits = searcher.run(limit=limit, label=type, min_confidence=min_confidence, now=moment)
    else:
        from kgot.memory.embeddings import CANDIDATE_FACTOR, rerank

        candidates = searcher.run(
            limit=limit * CANDIDATE_FACTOR, label=type, min_confidence=min_confidence, now=moment
        )
        hits = rerank(session, query, candidates, embedder, limit=limit)
    return explain(searcher.index_for(hits), hits, words, catalog, clock=datetime.now(UTC))


def nodes_named_by_rare_words(
    session: EntitySession, text: str, *, limit: int = 30, rare: int = RARE_WORD_HOLDERS
) -> list[str]:
    """Ids of the nodes ``text``'s rarer words point at, rarest word first: the nodes holding
    a word of it that at most ``rare`` facts hold (an edge holding it gives both its ends), at
    most ``limit``. What an entity run's working set starts from and follows its prompts'
    texts with (``controller/working_set.py``): unlike :func:`search` it ranks nothing and
    matches words exactly, so it costs one indexed read per word at any size, where a search
    for a text of common words reads many facts. Empty when every word is common or unknown.
    """
    try:
        words = query_words(text)
    except UsageError:
        return []
    search_index.update_search_index(session)
    holders: list[tuple[int, str, list[str]]] = []
    for word in words[:MAX_SEED_WORDS]:
        found = search_index.word_holders(session, word, limit=rare + 1)
        if 0 < len(found) <= rare:
            ids = [end for key in found for end in key[1:3]]
            holders.append((len(found), word, ids))
    seeds: dict[str, None] = {}
    for _count, _word, ids in sorted(holders):
        for node_id in ids:
            seeds.setdefault(node_id)
            if len(seeds) >= limit:
                return list(seeds)
    return list(seeds)


def query_words(query: str) -> list[str]:
    """The folded words of ``query`` that count (stop words dropped unless nothing else is
    left), each once.

    Raises:
        UsageError: the query has no word at all.
    """
    if not isinstance(query, str):
        raise UsageError(f"the search query must be text, not {query!r}")
    words = list(dict.fromkeys(fold_text(query).split()))
    if not words:
        raise UsageError("the search query is empty; give a few words to look for")
    kept = [w for w in words if w not in STOPWORDS]
    return kept or words


def fact_key_for(session: EntitySession, text: str) -> FactKey:
    """The fact key a user's id names: a node id (a merged-away id leads to the node it was
    merged into) or an edge as ``source -[key]-> target``
    (:func:`kgot.persistence.fact_id`). Whether the fact is current is checked by whoever uses
    the key."""
    from kgot.persistence import edge_key_from_id

    edge = edge_key_from_id(text)
    if edge is not None and session.canonical_id(text) is None:
        _, source, target, key = edge
        return (
            "edge",
            session.canonical_id(source) or source,
            session.canonical_id(target) or target,
            key,
        )
    return ("node", session.canonical_id(text) or text)


def find_edge(session: EntitySession, source: str, relationship: str, target: str) -> FactKey:
    """The current edge ``source`` → ``target`` whose key or relationship is
    ``relationship`` (ends follow merges).

    Raises:
        UsageError: no such edge, or several (then give the key with ``source -[key]-> target``).
    """
    source = session.canonical_id(source) or source
    target = session.canonical_id(target) or target
    around = session.facts_around([source])
    found = (
        sorted(
            (str(s), str(t), str(k))
            for s, t, k, data in around.out_edges(source, keys=True, data=True)
            if t == target and relationship in (k, data.get("relationship"))
        )
        if source in around
        else []
    )
    if not found:
        raise UsageError(
            f"no current edge {source!r} -{relationship}-> {target!r} in entity {session.entity!r}"
        )
    if len(found) > 1:
        from kgot.persistence import edge_key, fact_id

        listed = ", ".join(fact_id(edge_key(*ident)) for ident in found)
        raise UsageError(f"several edges match; name one by its id: {listed}")
    return ("edge", *found[0])


# --------------------------------------------------------------------------------------------
# The index


@dataclass
class _Fact:
    key: FactKey
    label: str
    name: str
    names: tuple[str, ...]  # folded, for closeness
    confidence: float
    latest: datetime | None  # the instant its age runs from (scoring.fact_freshness)
    expires_at: datetime | None
    ends: tuple[int, int] | None = None  # positions of an edge's end nodes
    # Its properties and metadata as loaded: what a hit shows (kgot.memory.hit_facts). The
    # index's graph is an untracked copy nothing else changes, so holding them is safe.
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class SearchIndex:
    """Facts of one version of an entity's graph prepared for scoring: their words' postings
    and metadata (a search's candidates, read from the store; or a whole graph); the hits'
    facts are read from it (:mod:`kgot.memory.hit_facts`)."""

    version: int
    facts: list[_Fact]
    vocabulary: list[str]  # sorted
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # word -> (fact positions, weights)
    confidence: np.ndarray
    labels: np.ndarray  # label position per fact
    label_keys: list[tuple[str, str]]  # (kind, label or relationship) per label position
    node_position: dict[str, int] = field(default_factory=dict)
    edge_position: dict[FactKey, int] = field(default_factory=dict)
    incident: dict[int, list[int]] = field(default_factory=dict)  # node -> its edges
    fuzzy_cache: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    # word -> the facts holding it themselves (its postings less edges' ends' names): a
    # word's document frequency counts these
    own_postings: dict[str, np.ndarray] = field(default_factory=dict)
    # Set when the index holds only some of the entity's facts (a search's candidates): the
    # entity's fact count, each query word's document frequency and the words it matches in
    # the whole entity (kgot.memory.search_index), so scores are those of the whole graph.
    total_facts: int | None = None
    document_frequency: dict[str, int] = field(default_factory=dict)
    term_matches: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    # -- building

    @classmethod
    def from_graph(
        cls,
        graph: nx.MultiDiGraph,
        catalog: TypeCatalog,
        *,
        searchable: Container[str] | None = None,
    ) -> SearchIndex:
        """The index of ``graph``'s facts. ``searchable``: the nodes that may be hits (default:
        all); the others are there only as edges' ends (their names name the edges and count
        as the edges' words), never hits, so their words are not indexed."""
        builder = _Builder(catalog)
        for node_id, data in graph.nodes(data=True):
            builder.node(
                str(node_id), data, searchable=searchable is None or str(node_id) in searchable
            )
        for source, target, key, data in graph.edges(keys=True, data=True):
            builder.edge(str(source), str(target), str(key), data)
        return builder.finish(int(graph.graph.get("kgot_version", 0)))

    # -- lookups

    def position_of(self, key: FactKey) -> int | None:
        """Where the fact ``key`` is in this index (``None``: not in it)."""
        if key[0] == "node":
            return self.node_position.get(key[1])
        return self.edge_position.get(key)

    def word_matches(self, word: str) -> list[tuple[str, float]]:
        """Index words the query word ``word`` matches, with how well (module docstring)."""
        return self._matches(word)

    def alive(self, position: int, clock: datetime) -> bool:
        """Not expired since the index was built (an edge: nor either of its ends)."""
        return self._alive(position, clock)

    def _matches(self, word: str) -> list[tuple[str, float]]:
        """Index words ``word`` matches, with how well (module docstring)."""
        if word in self.term_matches:
            return [(term, sim) for term, sim in self.term_matches[word] if term in self.postings]
        matched: dict[str, float] = {}
        if word in self.postings:
            matched[word] = 1.0
        if len(word) >= PREFIX_MIN:
            start = bisect.bisect_left(self.vocabulary, word)
            for other in self.vocabulary[start:]:
                if not other.startswith(word):
                    break
                if other != word:
                    matched[other] = 0.8 + 0.2 * len(word) / len(other)
        if matched or len(word) < FUZZY_MIN:
            return list(matched.items())
        if word not in self.fuzzy_cache:
            from rapidfuzz import fuzz, process

            near = process.extract(
                word,
                self.vocabulary,
                scorer=fuzz.ratio,
                score_cutoff=FUZZY_CUTOFF,
                limit=None,
            )
            self.fuzzy_cache[word] = [(text, FUZZY_DISCOUNT * s / 100.0) for text, s, _ in near]
        return self.fuzzy_cache[word]

    def coverage(self, words: Sequence[str]) -> np.ndarray:
        """Each fact's IDF-weighted share of ``words`` it matches (0–1)."""
        held = len(self.facts)
        total = held if self.total_facts is None else self.total_facts
        covered = np.zeros(held, dtype=np.float64)
        weight_sum = 0.0
        for word in words:
            best = np.zeros(held, dtype=np.float64)
            for other, similarity in self._matches(word):
                positions, weights = self.postings[other]
                # A word's postings name each fact once, so plain indexing is safe here.
                best[positions] = np.maximum(best[positions], weights * similarity)
            df = self.document_frequency.get(word)
            if df is None:  # facts holding it themselves (not through an edge's ends' names)
                holders = np.zeros(held, dtype=bool)
                for other, _similarity in self._matches(word):
                    holders[self.own_postings.get(other, _NO_POSITIONS)] = True
                df = int(np.count_nonzero(holders))
            idf = math.log(1.0 + (total + 1.0) / (df + 1.0))
            covered += idf * best
            weight_sum += idf
        return covered / weight_sum if weight_sum > 0 else covered

    def closeness(self, folded_query: str, positions: Sequence[int]) -> np.ndarray:
        """rapidfuzz ``ratio`` of the query and each fact's closest name, 0–1 (one C call)."""
        from rapidfuzz import fuzz, process

        names: list[str] = []
        owners: list[int] = []
        for slot, position in enumerate(positions):
            for name in self.facts[position].names:
                names.append(name)
                owners.append(slot)
        close = np.zeros(len(positions), dtype=np.float64)
        if names:
            scores = process.cdist([folded_query], names, scorer=fuzz.ratio, dtype=np.float64)
            np.maximum.at(close, np.array(owners, dtype=np.int64), scores[0] / 100.0)
        return close

    # -- the query

    def search(
        self,
        session: EntitySession,
        words: Sequence[str],
        folded_query: str,
        *,
        limit: int,
        label: str | None,
        min_confidence: float | None,
        now: datetime,
        catalog: TypeCatalog,
    ) -> list[SearchHit]:
        """The best ``limit`` hits. Scores are bounded from above in two steps, so only the
        few facts that could still enter the top ``limit`` are scored exactly: first with
        closeness and freshness taken as 1 (array arithmetic over every matching fact), then,
        a chunk at a time in that order, with the exact closeness (one rapidfuzz call per
        chunk); the exact score (freshness, use) follows for the best of each chunk."""
        if not self.facts:
            return []
        coverage = self.coverage(words)
        eligible = coverage > 0
        if label is not None:
            wanted = [i for i, (_, name) in enumerate(self.label_keys) if name == label]
            eligible &= np.isin(self.labels, wanted)
        if min_confidence is not None:
            eligible &= self.confidence >= min_confidence
        positions = np.flatnonzero(eligible)
        if positions.size == 0:
            return []
        settings = _LabelSettings(catalog, self.label_keys)
        w = scoring.DEFAULT_WEIGHTS
        # Everything but relevance, with freshness at its maximum 1.
        rest = (
            w.rank_weight * np.clip(settings.rank_weight[self.labels[positions]], 0.0, 1.0)
            + w.confidence * np.clip(self.confidence[positions], 0.0, 1.0)
            + w.freshness
        )
        cover = coverage[positions]
        loose = w.relevance * (COVERAGE_SHARE * cover + (1.0 - COVERAGE_SHARE)) + rest
        order = np.lexsort((positions, -loose))  # best bound first, then index order
        ranked = _TopK(limit)
        clock = datetime.now(UTC)
        chunk = max(CHUNK, 4 * limit)
        for start in range(0, order.size, chunk):
            if ranked.full and loose[order[start]] < ranked.threshold:
                break  # no fact left can enter the top `limit`
            slots = order[start : start + chunk]
            chosen = positions[slots].tolist()
            relevance = COVERAGE_SHARE * cover[slots] + (1.0 - COVERAGE_SHARE) * self.closeness(
                folded_query, chosen
            )
            self._rank_chunk(
                session,
                ranked,
                chosen,
                relevance,
                bound=w.relevance * relevance + rest[slots],
                now=now,
                clock=clock,
                settings=settings,
            )
        return ranked.best()

    def _rank_chunk(
        self,
        session: EntitySession,
        ranked: _TopK,
        chosen: list[int],
        relevance: np.ndarray,
        *,
        bound: np.ndarray,
        now: datetime,
        clock: datetime,
        settings: _LabelSettings,
    ) -> None:
        """Score ``chosen`` exactly, best ``bound`` first, into ``ranked``; stop once no bound
        left can enter it."""
        order = np.lexsort((np.array(chosen), -bound)).tolist()
        batch = max(BATCH, ranked.limit)
        use: dict[FactKey, Any] | None = None
        for start in range(0, len(order), batch):
            if ranked.full and bound[order[start]] < ranked.threshold:
                return
            if use is None and start > 0:
                # Past the first batch the chunk is likely read far: one read of the use of
                # every decaying fact left in it, not one per batch.
                use = self._use(session, [chosen[s] for s in order[start:]], now, settings)
            slots = [s for s in order[start : start + batch] if self._alive(chosen[s], clock)]
            for hit in self._score(
                session,
                [chosen[s] for s in slots],
                [float(relevance[s]) for s in slots],
                now=now,
                settings=settings,
                use=use,
            ):
                ranked.offer(hit)

    def _freshness(
        self, position: int, now: datetime, settings: _LabelSettings
    ) -> tuple[float, float | None]:
        fact = self.facts[position]
        half_life = settings.half_life[int(self.labels[position])]
        age = scoring.age_days(now, [fact.latest])
        return scoring.freshness(age or 0.0, half_life), age

    def _use(
        self,
        session: EntitySession,
        positions: Sequence[int],
        now: datetime,
        settings: _LabelSettings,
    ) -> dict[FactKey, Any]:
        """The use of those of ``positions`` that decay (use moves only them), and an entry
        (``None``) for each one that does not, so every position is known to have been read."""
        keys = [self.facts[p].key for p in positions]
        decaying = [
            self.facts[p].key for p in positions if self._freshness(p, now, settings)[0] < 1.0
        ]
        found: dict[FactKey, Any] = dict.fromkeys(keys)
        found.update(session.fact_use(decaying) if decaying else {})
        return found

    def _alive(self, position: int, clock: datetime) -> bool:
        """Not expired since the index was built (an edge: nor either of its ends)."""
        fact = self.facts[position]
        if fact.expires_at is not None and fact.expires_at <= clock:
            return False
        if fact.ends is not None:
            return all(self._alive(end, clock) for end in fact.ends)
        return True

    def _score(
        self,
        session: EntitySession,
        positions: list[int],
        relevance: list[float],
        *,
        now: datetime,
        settings: _LabelSettings,
        use: Mapping[FactKey, Any] | None = None,
    ) -> list[SearchHit]:
        freshness = {p: self._freshness(p, now, settings) for p in positions}
        if use is None:
            # Use only moves a decaying fact (retention of freshness 1 is 1): read it for those.
            decaying = [self.facts[p].key for p in positions if freshness[p][0] < 1.0]
            use = session.fact_use(decaying) if decaying else {}
        hits = []
        for slot, position in enumerate(positions):
            fact = self.facts[position]
            fresh, age = freshness[position]
            found = use.get(fact.key)
            parts = scoring.rank(
                relevance[slot],
                rank_weight=float(settings.rank_weight[int(self.labels[position])]),
                confidence=fact.confidence,
                fresh=scoring.retention(fresh, found.strength if found is not None else 0.0),
            )
            hits.append(SearchHit(fact.key, fact.label, fact.name, parts, age))
        return hits


class _StoreSearch:
    """One query answered from the store's search index (:mod:`kgot.memory.search_index`):
    the facts holding a query word are ordered by an upper bound of their score computed from
    the index alone (coverage, type weight, confidence; closeness and freshness taken as 1);
    the best of them are read and ranked exactly by a :class:`SearchIndex` of just those facts
    (and their edges' ends), with the whole entity's fact count and document frequencies.
    Rounds read four times more until no fact left unread could enter the top ``limit``, or
    :data:`MAX_CANDIDATES` were read: a query whose words most of a large entity holds ranks
    the :data:`MAX_CANDIDATES` facts of best bound (ties: the most recently written)."""

    def __init__(
        self,
        session: EntitySession,
        words: Sequence[str],
        folded: str,
        catalog: TypeCatalog,
        version: int,
    ) -> None:
        self.session = session
        self.version = version
        self.words = words
        self.folded = folded
        self.catalog = catalog
        self.overrides: dict[str, Any] = {}
        self.matched: list[FactKey] = []  # the facts holding a query word
        self.last_index: SearchIndex | None = None  # the last ranking's
        self.named: Mapping[str, Mapping[str, float]] = {}  # nodes whose names hold a word

    def run(
        self, *, limit: int, label: str | None, min_confidence: float | None, now: datetime
    ) -> list[SearchHit]:
        matches = search_index.word_matches(self.session, self.words)
        best, about, named = self._holders(matches)
        self.named = named
        if not best:
            return []
        total = search_index.fact_count(self.session, self.version)
        # Facts holding each word themselves (an edge through its ends' names does not count).
        frequency = {w: sum(1 for held in best.values() if w in held) for w in self.words}
        self.overrides = {
            "total_facts": total,
            "document_frequency": frequency,
            "term_matches": matches,
        }
        idf = {w: math.log(1.0 + (total + 1.0) / (frequency[w] + 1.0)) for w in self.words}
        self._add_context(best, named, list(best))
        hits = self._rank(
            best, about, idf, limit=limit, label=label, min_confidence=min_confidence, now=now
        )
        # Edges that hold no query word but through an end's name: read only at the named
        # nodes whose names could give such an edge a score that enters the top `limit`.
        threshold = hits[-1].score if len(hits) >= limit else -math.inf
        around = self._context_worth_reading(named, idf, threshold)
        if around:
            found = [
                edge
                for edge in search_index.incident_edges(self.session, around)
                if edge.key not in best
            ]
            for edge in found:
                about[edge.key] = (edge.relationship, edge.confidence, edge.version)
            added = self._add_context(best, named, [edge.key for edge in found])
            if added:
                hits = self._rank(
                    best,
                    about,
                    idf,
                    limit=limit,
                    label=label,
                    min_confidence=min_confidence,
                    now=now,
                )
        self.matched = list(best)
        return hits

    def _rank(
        self,
        best: Mapping[FactKey, Mapping[str, float]],
        about: Mapping[FactKey, tuple[str, float, int]],
        idf: Mapping[str, float],
        *,
        limit: int,
        label: str | None,
        min_confidence: float | None,
        now: datetime,
    ) -> list[SearchHit]:
        """The best ``limit`` of the facts in ``best``, read best bound first, in rounds four
        times larger until no unread fact can enter the top (or :data:`MAX_CANDIDATES`)."""
        bounds = self._bounds(best, about, idf, label, min_confidence)
        wanted = max(FIRST_CANDIDATES, 8 * limit)
        while True:
            chosen = [key for _, _, key in bounds[:wanted]]
            # Only the nodes chosen may be hits: an edge's end read beyond them may hold query
            # words too, and its bound says it cannot be a hit yet (a later round reads it).
            searchable = {key[1] for key in chosen if key[0] == "node"}
            index = self.last_index = self._index_of(self._read(chosen), searchable)
            hits = index.search(
                self.session,
                self.words,
                self.folded,
                limit=limit,
                label=label,
                min_confidence=min_confidence,
                now=now,
                catalog=self.catalog,
            )
            if wanted >= len(bounds) or wanted >= MAX_CANDIDATES:
                return hits
            if len(hits) >= limit and hits[-1].score >= bounds[wanted][0]:
                return hits  # no fact left unread can do better
            wanted = min(4 * wanted, MAX_CANDIDATES)

    def _holders(
        self, matches: Mapping[str, list[tuple[str, float]]]
    ) -> tuple[
        dict[FactKey, dict[str, float]],
        dict[FactKey, tuple[str, float, int]],
        dict[str, dict[str, float]],
    ]:
        """Every fact holding a query word itself, with how well it holds each (weight x
        match); its label, confidence and row version; and for each node whose names hold a
        query word, how well they hold each."""
        stands_for: dict[str, list[tuple[str, float]]] = {}  # index word -> query words
        for word, found in matches.items():
            for term, sim in found:
                stands_for.setdefault(term, []).append((word, sim))
        best: dict[FactKey, dict[str, float]] = {}
        about: dict[FactKey, tuple[str, float, int]] = {}
        named: dict[str, dict[str, float]] = {}
        for posting in search_index.postings(self.session, stands_for):
            held = best.setdefault(posting.key, {})
            for word, sim in stands_for[posting.term]:
                value = posting.weight * sim
                if held.get(word, 0.0) < value:
                    held[word] = value
                if posting.part == "n" and posting.key[0] == "node":
                    names = named.setdefault(posting.key[1], {})
                    names[word] = max(names.get(word, 0.0), sim)
            about.setdefault(posting.key, (posting.label, posting.confidence, posting.version))
        return best, about, named

    @staticmethod
    def _add_context(
        best: dict[FactKey, dict[str, float]],
        named: Mapping[str, Mapping[str, float]],
        edges: Sequence[FactKey],
    ) -> int:
        """Give ``edges`` the words of their ends' names at CONTEXT_WEIGHT ("apple
        headquarters" finds Apple's headquartered_in edge); return how many gained one."""
        gained = 0
        for key in edges:
            if key[0] != "edge":
                continue
            held = best.setdefault(key, {})
            before = dict(held)
            for end in dict.fromkeys(key[1:3]):
                for word, sim in named.get(end, {}).items():
                    value = search_index.CONTEXT_WEIGHT * sim
                    if held.get(word, 0.0) < value:
                        held[word] = value
            if held != before:
                gained += 1
            elif not held:
                del best[key]
        return gained

    def _context_worth_reading(
        self,
        named: Mapping[str, Mapping[str, float]],
        idf: Mapping[str, float],
        threshold: float,
    ) -> list[str]:
        """The named nodes whose edges could, through the names of their ends alone, score
        at least ``threshold``: such an edge's coverage is at most CONTEXT_WEIGHT x (its two
        ends' name coverages), capped at CONTEXT_WEIGHT."""
        if not named:
            return []
        idf_sum = sum(idf.values()) or 1.0
        cover = {
            node_id: sum(idf[word] * sim for word, sim in held.items()) / idf_sum
            for node_id, held in named.items()
        }
        widest = max(cover.values())
        w = scoring.DEFAULT_WEIGHTS
        rank_weight = min(max(self._edge_rank_weight(), 0.0), 1.0)
        rest = w.rank_weight * rank_weight + w.confidence + w.freshness
        worth = []
        for node_id, own in cover.items():
            coverage = search_index.CONTEXT_WEIGHT * min(1.0, own + widest)
            bound = w.relevance * (COVERAGE_SHARE * coverage + (1.0 - COVERAGE_SHARE)) + rest
            if bound >= threshold:
                worth.append(node_id)
        return worth

    def _edge_rank_weight(self) -> float:
        """The largest rank weight an edge can have (its type's, or the default's)."""
        from kgot.persistence import UpkeepSettings

        weights = [float(UpkeepSettings().rank_weight)]
        weights += [
            float(_upkeep(self.catalog, "edge", n).rank_weight) for n in self.catalog.edge_types
        ]
        return max(weights)

    def _bounds(
        self,
        best: Mapping[FactKey, Mapping[str, float]],
        about: Mapping[FactKey, tuple[str, float, int]],
        idf: Mapping[str, float],
        label: str | None,
        min_confidence: float | None,
    ) -> list[tuple[float, int, FactKey]]:
        """Each eligible fact's upper bound of its score (closeness and freshness at 1) and
        row version, best bound first (ties: the newest row, then the key)."""
        idf_sum = sum(idf.values()) or 1.0
        weights: dict[tuple[str, str], float] = {}
        w = scoring.DEFAULT_WEIGHTS
        bounds: list[tuple[float, int, FactKey]] = []
        for key, held in best.items():
            fact_label, confidence, version = about[key]
            if label is not None and fact_label != label:
                continue
            if min_confidence is not None and confidence < min_confidence:
                continue
            if (key[0], fact_label) not in weights:
                weights[(key[0], fact_label)] = float(
                    _upkeep(self.catalog, key[0], fact_label).rank_weight
                )
            cover = sum(idf[word] * value for word, value in held.items()) / idf_sum
            bound = (
                w.relevance * (COVERAGE_SHARE * cover + (1.0 - COVERAGE_SHARE))
                + w.rank_weight * min(max(weights[(key[0], fact_label)], 0.0), 1.0)
                + w.confidence * min(max(confidence, 0.0), 1.0)
                + w.freshness
            )
            bounds.append((bound, version, key))
        bounds.sort(key=lambda entry: (-entry[0], -entry[1], entry[2]))
        return bounds

    def _read(self, keys: Sequence[FactKey]) -> nx.MultiDiGraph:
        return self.session.load_facts(
            [key[1] for key in keys if key[0] == "node"],
            [(key[1], key[2], key[3]) for key in keys if key[0] == "edge"],
        )

    def _index_of(
        self, graph: nx.MultiDiGraph, searchable: Container[str] | None = None
    ) -> SearchIndex:
        index = SearchIndex.from_graph(graph, self.catalog, searchable=searchable)
        for name, value in self.overrides.items():
            setattr(index, name, value)
        return index

    def index_for(self, hits: Sequence[SearchHit]) -> SearchIndex:
        """An index of the hits, and of each node hit's current edges that hold a query word
        themselves or through the name of their other end (with those ends): what
        :func:`kgot.memory.hit_facts.explain` shows."""
        nodes = {hit.key[1] for hit in hits if hit.key[0] == "node"}
        edges = {hit.key[1:] for hit in hits if hit.key[0] == "edge"}
        edges.update(
            key[1:] for key in self.matched if key[0] == "edge" and not nodes.isdisjoint(key[1:3])
        )
        if nodes:
            for edge in search_index.incident_edges(self.session, nodes):
                source, target = edge.key[1], edge.key[2]
                other = target if source in nodes else source
                if other in self.named or (source in nodes and target in nodes):
                    edges.add(edge.key[1:])
        last = self.last_index
        if last is not None and all(
            last.position_of(key) is not None
            for key in [*(("node", n) for n in nodes), *(("edge", *e) for e in edges)]
        ):
            return last  # the ranking read them all already
        graph = self.session.load_facts(sorted(nodes), sorted(edges))  # type: ignore[arg-type]
        return self._index_of(graph)


class _TopK:
    """The best ``limit`` hits seen (ties: the smaller kind-and-id first)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._heap: list[tuple[float, _Reversed, SearchHit]] = []

    @property
    def full(self) -> bool:
        return len(self._heap) >= self.limit

    @property
    def threshold(self) -> float:
        return self._heap[0][0]

    def offer(self, hit: SearchHit) -> None:
        entry = (hit.score, _Reversed(hit.key), hit)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def best(self) -> list[SearchHit]:
        return [hit for _, _, hit in sorted(self._heap, key=lambda e: e[:2], reverse=True)]


@dataclass(frozen=True)
class _Reversed:
    """Orders keys backwards, so among equal scores the smaller key counts as better."""

    key: FactKey

    def __lt__(self, other: _Reversed) -> bool:
        return self.key > other.key

    def __gt__(self, other: _Reversed) -> bool:
        return self.key < other.key


class _LabelSettings:
    """Rank weight and half-life of each label position, from the current types."""

    def __init__(self, catalog: TypeCatalog, label_keys: Sequence[tuple[str, str]]) -> None:
        weights, half_lives = [], []
        for kind, name in label_keys:
            upkeep = _upkeep(catalog, kind, name)
            weights.append(float(upkeep.rank_weight))
            half_lives.append(upkeep.half_life_days)
        self.rank_weight = np.array(weights, dtype=np.float64)
        self.half_life: list[float | None] = half_lives


def _upkeep(catalog: TypeCatalog, kind: str, name: str) -> Any:
    from kgot.persistence import UpkeepSettings

    type_def = catalog.get("node" if kind == "node" else "edge", name)
    found = getattr(type_def, "upkeep", None) if type_def is not None else None
    return found if found is not None else UpkeepSettings()


def _temporal(catalog: TypeCatalog, kind: str, name: str) -> tuple[str, ...]:
    type_def = catalog.get("node" if kind == "node" else "edge", name)
    schema = type_def.spec.properties if type_def is not None else None
    return scoring.temporal_properties(schema)


_NO_POSITIONS = np.zeros(0, dtype=np.int64)


class _Builder:
    def __init__(self, catalog: TypeCatalog) -> None:
        self.catalog = catalog
        self.facts: list[_Fact] = []
        self.words: dict[str, dict[int, float]] = {}
        self.own: dict[str, set[int]] = {}  # word -> facts holding it themselves
        self.label_position: dict[tuple[str, str], int] = {}
        self.labels: list[int] = []
        self.node_position: dict[str, int] = {}
        self.temporal: dict[tuple[str, str], tuple[str, ...]] = {}
        self.name_words: dict[int, list[str]] = {}  # a node's words of its names, folded
        self.edge_position: dict[FactKey, int] = {}
        self.incident: dict[int, list[int]] = {}

    def _label(self, kind: str, name: str) -> int:
        return self.label_position.setdefault((kind, name), len(self.label_position))

    def _add_words(
        self, position: int, words: Iterable[str], weight: float, *, own: bool = True
    ) -> None:
        index = self.words
        for word in words:
            if own:
                self.own.setdefault(word, set()).add(position)
            postings = index.get(word)
            if postings is None:
                index[word] = {position: weight}
            elif postings.get(position, 0.0) < weight:
                postings[position] = weight

    def _latest(self, kind: str, label: str, data: Mapping[str, Any]) -> datetime | None:
        temporal = self.temporal.get((kind, label))
        if temporal is None:
            temporal = self.temporal[(kind, label)] = _temporal(self.catalog, kind, label)
        return scoring.age_anchor(data, temporal)  # as scoring.fact_freshness ages it

    def _add(self, fact: _Fact, kind: str, label: str) -> int:
        position = len(self.facts)
        self.facts.append(fact)
        self.labels.append(self._label(kind, label))
        return position

    def node(self, node_id: str, data: Mapping[str, Any], *, searchable: bool = True) -> None:
        label = str(data.get("label", ""))
        names = fact_names(data)
        fact = _Fact(
            key=("node", node_id),
            label=label,
            name=names[0] if names else node_id,
            names=tuple(fold_text(n) for n in names) or (fold_text(node_id),),
            confidence=_confidence(data),
            latest=self._latest("node", label, data),
            expires_at=scoring.parse_instant(data.get("_expires_at")),
            data=data,
        )
        position = self._add(fact, "node", label)
        self.node_position[node_id] = position
        words = [word for name in fact.names for word in name.split()]
        self.name_words[position] = words
        if not searchable:
            return
        self._add_words(position, words, NAME_WEIGHT)
        self._add_words(position, fold_text(label).split(), NAME_WEIGHT)
        for text in other_text(data, ("label",)):
            self._add_words(position, fold_text(text).split(), TEXT_WEIGHT)

    def edge(self, source: str, target: str, key: str, data: Mapping[str, Any]) -> None:
        relationship = str(data.get("relationship", key))
        own = fact_names(data)
        ends = (self.node_position[source], self.node_position[target])
        source_name, target_name = (self.facts[p].name for p in ends)
        fact = _Fact(
            key=("edge", source, target, key),
            label=relationship,
            name=own[0] if own else f"{source_name} {relationship} {target_name}",
            names=tuple(fold_text(n) for n in own) or (fold_text(relationship),),
            confidence=_confidence(data),
            latest=self._latest("edge", relationship, data),
            expires_at=scoring.parse_instant(data.get("_expires_at")),
            ends=ends,
            data=data,
        )
        position = self._add(fact, "edge", relationship)
        self.edge_position[fact.key] = position
        for end in dict.fromkeys(ends):  # a loop is listed once
            self.incident.setdefault(end, []).append(position)
        for text in (*own, relationship, key):
            self._add_words(position, fold_text(text).split(), NAME_WEIGHT)
        for text in other_text(data, ("relationship",)):
            self._add_words(position, fold_text(text).split(), TEXT_WEIGHT)
        for end in ends:
            self._add_words(position, self.name_words[end], CONTEXT_WEIGHT, own=False)

    def finish(self, version: int) -> SearchIndex:
        postings = {
            word: (
                np.fromiter(found.keys(), dtype=np.int64, count=len(found)),
                np.fromiter(found.values(), dtype=np.float64, count=len(found)),
            )
            for word, found in self.words.items()
        }
        return SearchIndex(
            version=version,
            facts=self.facts,
            vocabulary=sorted(postings),
            postings=postings,
            confidence=np.array([f.confidence for f in self.facts], dtype=np.float64),
            labels=np.array(self.labels, dtype=np.int64),
            label_keys=list(self.label_position),
            node_position=self.node_position,
            edge_position=self.edge_position,
            incident=self.incident,
            own_postings={
                word: np.fromiter(found, dtype=np.int64, count=len(found))
                for word, found in self.own.items()
            },
        )


def _confidence(data: Mapping[str, Any]) -> float:
    value = data.get("_confidence")
    return float(value) if isinstance(value, int | float) else DEFAULT_CONFIDENCE


def _moment(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if not isinstance(now, datetime):
        raise UsageError(f"now must be a datetime, not {now!r}")
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)
