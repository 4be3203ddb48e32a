"""The search index in the store: each current fact's words, kept up to date per commit (issue 30).

:func:`kgot.memory.search.search` used to load the entity's whole graph into the process and
index it there, so a search cost what the entity holds (15 s of CPU for a search process at
100,000 nodes). It now asks this index which facts hold the query's words, reads only those
facts, and scores them as before.

What is stored (tables of :mod:`kgot.memory.schema`, migration 10), per entity:

* ``kgot_search_terms``: one row per current fact, folded word
  (:func:`kgot.memory.names.fold_text`) and *part*: ``n`` a name (a node's ``name``, ``title``,
  ``aliases``; an edge's own names, relationship and key), ``l`` a node's label, ``t`` its other
  string properties, ``c`` (edges only) the names of its two ends. The part sets the word's
  weight as :mod:`kgot.memory.search` weighs it (1, 1, 0.6, 0.5). Each row also holds the
  fact's label, confidence and row version, so a query can order candidates before reading any
  fact. Words longer than :data:`MAX_TERM_CHARS` are not indexed (a pasted URL is not searched
  for word by word).
* ``kgot_search_vocabulary``: every word the entity's facts ever held, for typo matches (a
  query word that equals or starts no word is matched by spelling against it). Words are never
  removed: a word no fact holds any more matches nothing.
* ``kgot_search_state``: the entity version the index shows.

Kept up to date by catching up, not by hooks in every write path: :func:`update_search_index`
compares the index's version with the entity's and re-indexes the facts whose rows changed
since (the ``nodes_since`` / ``nodes_until`` indexes find them). A search does it first, so
the index is never stale when read; its cost follows what was written since the last search,
not the entity's size. The first search of an entity indexes all of it once. Expiry is not a version
change: expired facts stay indexed and are left out when read.

Every statement is scoped by the session's entity id; another entity's rows are never read.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, delete, func, literal, or_, select, union

from kgot.memory.names import fold_text
from kgot.persistence import TABLES, utc_now

if TYPE_CHECKING:
    from kgot.persistence import EntitySession

__all__ = [
    "CONTEXT_WEIGHT",
    "MAX_TERM_CHARS",
    "PART_WEIGHTS",
    "EdgeRow",
    "Posting",
    "changed_node_ids",
    "fact_count",
    "fact_names",
    "incident_edges",
    "knows_label",
    "matching_terms",
    "other_text",
    "postings",
    "update_search_index",
    "vocabulary",
    "word_matches",
]

MAX_TERM_CHARS = 100
NAME_PROPERTIES = ("name", "title", "aliases")  # a fact's names, in this order
PREFIX_MIN = 3  # a query word this long matches the words it starts
FUZZY_MIN = 4  # a query word this long may match by spelling
FUZZY_CUTOFF = 80.0
FUZZY_DISCOUNT = 0.9
PART_WEIGHTS = {"n": 1.0, "l": 1.0, "t": 0.6}
CONTEXT_WEIGHT = 0.5  # an edge's word from the name of one of its ends
COUNT_TTL_S = 60.0
_CHUNK = 500  # ids per IN (...) list
_INSERT_BATCH = 5_000

_nodes = TABLES.nodes
_edges = TABLES.edges
_entities = TABLES.entities

FactKey = tuple[str, ...]
_counts: weakref.WeakKeyDictionary[Any, tuple[int, float, int]] = weakref.WeakKeyDictionary()
_counts_lock = threading.Lock()


@dataclass(frozen=True)
class Posting:
    """A fact holding an index word: its key, where the word is, and what orders it."""

    key: FactKey  # ("node", id) or ("edge", source, target, key)
    term: str
    part: str  # n: a name, l: the label, t: other text
    weight: float
    label: str
    confidence: float
    version: int


# ------------------------------------------------------------------------------------ reading


def update_search_index(session: EntitySession) -> int:
    """Bring the entity's index up to its current version; return that version.

    A cheap read when nothing was written since the last search; else one write transaction
    (the entity locked, so two processes never index the same commit twice) that re-indexes
    the facts changed since.

    Raises:
        EntityNotFoundError: the entity was deleted.
    """
    from kgot.memory.schema import SEARCH_STATE

    entity_id = session.entity_id
    with session.read() as connection:
        indexed, current = _versions(connection, entity_id, SEARCH_STATE)
    if indexed == current:
        return current
    with session.write(lock=True) as connection:
        indexed, current = _versions(connection, entity_id, SEARCH_STATE)
        if indexed == current:
            return current
        _Indexer(connection, entity_id).run(indexed)
        if indexed is None:
            connection.execute(SEARCH_STATE.insert().values(entity_id=entity_id, version=current))
        else:
            connection.execute(
                SEARCH_STATE.update()
                .where(SEARCH_STATE.c.entity_id == entity_id)
                .values(version=current)
            )
    return current


def matching_terms(
    session: EntitySession, word: str, *, prefix_min: int
) -> dict[str, float] | None:
    """Index words the folded query word ``word`` equals (1) or starts (0.8–1 by how much of
    the word it covers, when ``word`` has ``prefix_min`` letters or more) among the words
    current facts hold, or ``None`` when it equals and starts none (the caller may then match
    it by spelling against :func:`vocabulary`)."""
    from kgot.memory.schema import SEARCH_TERMS

    table = SEARCH_TERMS
    query = select(table.c.term).distinct().where(table.c.entity_id == session.entity_id)
    if len(word) >= prefix_min:
        # Every word starting `word` sorts between it and `word` + the highest code point.
        query = query.where(table.c.term >= word, table.c.term < word + "\U0010ffff")
    else:
        query = query.where(table.c.term == word)
    with session.read() as connection:
        found = [str(term) for term in connection.execute(query).scalars()]
    return {
        term: 1.0 if term == word else 0.8 + 0.2 * len(word) / len(term)
        for term in found
        if term.startswith(word)
    } or None


def vocabulary(session: EntitySession) -> list[str]:
    """Every word the entity's index knows, sorted (for matches by spelling)."""
    from kgot.memory.schema import SEARCH_VOCABULARY

    table = SEARCH_VOCABULARY
    with session.read() as connection:
        rows = connection.execute(
            select(table.c.term)
            .where(table.c.entity_id == session.entity_id)
            .order_by(table.c.term)
        )
        return [str(term) for term in rows.scalars()]


def word_matches(
    session: EntitySession, words: Iterable[str], *, prefix: bool = True
) -> dict[str, list[tuple[str, float]]]:
    """For each folded query word, the index words it matches and how well, best rules first:
    those it equals (1) or, with ``prefix``, starts (:func:`matching_terms`); failing both,
    for a word of :data:`FUZZY_MIN` letters or more, those spelled like it (rapidfuzz
    ``ratio`` ≥ :data:`FUZZY_CUTOFF`, weighed down by :data:`FUZZY_DISCOUNT`) among the
    entity's vocabulary, read once for all the words."""
    from rapidfuzz import fuzz, process

    matches: dict[str, list[tuple[str, float]]] = {}
    known: list[str] | None = None
    for word in words:
        found = matching_terms(session, word, prefix_min=PREFIX_MIN if prefix else len(word) + 1)
        if found is None and len(word) >= FUZZY_MIN:
            if known is None:
                known = vocabulary(session)
            near = process.extract(
                word, known, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF, limit=None
            )
            found = {text: FUZZY_DISCOUNT * score / 100.0 for text, score, _ in near}
        matches[word] = sorted((found or {}).items())
    return matches


def postings(session: EntitySession, terms: Iterable[str]) -> list[Posting]:
    """Every fact holding one of ``terms``, once per (fact, term, part)."""
    from kgot.memory.schema import SEARCH_TERMS

    table = SEARCH_TERMS
    wanted = sorted(set(terms))
    found: list[Posting] = []
    with session.read() as connection:
        for chunk in _chunks(wanted):
            rows = connection.execute(
                select(
                    table.c.term,
                    table.c.kind,
                    table.c.source,
                    table.c.target,
                    table.c.edge_key,
                    table.c.part,
                    table.c.label,
                    table.c.confidence,
                    table.c.version,
                ).where(table.c.entity_id == session.entity_id, table.c.term.in_(chunk))
            )
            for term, kind, source, target, edge_key, part, label, confidence, version in rows:
                key: FactKey = (
                    ("node", source) if kind == "n" else ("edge", source, target, edge_key)
                )
                found.append(
                    Posting(
                        key, term, part, PART_WEIGHTS[part], label, float(confidence), int(version)
                    )
                )
    return found


def word_holders(session: EntitySession, word: str, *, limit: int) -> list[FactKey]:
    """The facts holding the index word ``word`` (each once; nodes first, then edges, each by
    id), at most ``limit`` of them: a caller that asks for one more than it will use learns
    whether the word is rare."""
    from kgot.memory.schema import SEARCH_TERMS

    table = SEARCH_TERMS
    query = (
        select(table.c.kind, table.c.source, table.c.target, table.c.edge_key)
        .distinct()
        .where(table.c.entity_id == session.entity_id, table.c.term == word)
        .order_by(table.c.kind.desc(), table.c.source, table.c.target, table.c.edge_key)
        .limit(limit)
    )
    with session.read() as connection:
        rows = connection.execute(query).all()
    return [
        ("node", source) if kind == "n" else ("edge", source, target, edge_key)
        for kind, source, target, edge_key in rows
    ]


@dataclass(frozen=True)
class EdgeRow:
    """A current edge at a node a query word named: its key and what orders it."""

    key: FactKey  # ("edge", source, target, key)
    relationship: str
    confidence: float
    version: int


def incident_edges(session: EntitySession, node_ids: Iterable[str]) -> list[EdgeRow]:
    """The current edges at ``node_ids`` (either end), once each."""
    wanted = sorted(set(node_ids))
    found: dict[FactKey, EdgeRow] = {}
    columns = (
        _edges.c.source,
        _edges.c.target,
        _edges.c.key,
        _edges.c.relationship,
        _edges.c.confidence,
        _edges.c.valid_from_version,
    )
    with session.read() as connection:
        for end in (_edges.c.source, _edges.c.target):
            for chunk in _chunks(wanted):
                rows = connection.execute(
                    select(*columns).where(
                        _edges.c.entity_id == session.entity_id,
                        _edges.c.valid_to_version.is_(None),
                        end.in_(chunk),
                    )
                )
                for source, target, key, relationship, confidence, version in rows:
                    fact: FactKey = ("edge", str(source), str(target), str(key))
                    found[fact] = EdgeRow(
                        fact, str(relationship), _confidence(confidence), int(version)
                    )
    return list(found.values())


def fact_count(session: EntitySession, version: int) -> int:
    """How many current, unexpired facts (nodes and edges) the entity holds at ``version``: the
    N of search's inverse document frequency. Kept per session for :data:`COUNT_TTL_S` while
    the version is the same (only expiry changes it meanwhile)."""
    now = time.monotonic()
    with _counts_lock:
        kept = _counts.get(session)
    if kept is not None and kept[0] == version and now - kept[1] < COUNT_TTL_S:
        return kept[2]
    moment = utc_now()
    total = 0
    with session.read() as connection:
        for table in (_nodes, _edges):
            total += int(
                connection.execute(
                    select(func.count())
                    .select_from(table)
                    .where(
                        table.c.entity_id == session.entity_id,
                        table.c.valid_to_version.is_(None),
                        or_(table.c.expires_at.is_(None), table.c.expires_at > moment),
                    )
                ).scalar_one()
            )
    with _counts_lock:
        _counts[session] = (version, now, total)
    return total


def knows_label(session: EntitySession, label: str) -> bool:
    """Whether a current fact of the entity is labelled ``label`` (a node label or an edge
    relationship)."""
    with session.read() as connection:
        for table, column in ((_nodes, _nodes.c.label), (_edges, _edges.c.relationship)):
            found = connection.execute(
                select(literal(1))
                .where(
                    table.c.entity_id == session.entity_id,
                    table.c.valid_to_version.is_(None),
                    column == label,
                )
                .limit(1)
            ).first()
            if found is not None:
                return True
    return False


# ----------------------------------------------------------------------------------- indexing


def fact_words(
    kind: str, label: str, properties: Mapping[str, Any], key: str
) -> dict[str, set[str]]:
    """A fact's own words by part (``n``, ``l``, ``t``): what :mod:`kgot.memory.search`
    matches a query against. ``key``: a node's id (its name when it has none) or an edge's
    key."""
    words: dict[str, set[str]] = {"n": set(), "l": set(), "t": set()}
    names = fact_names(properties)
    if kind == "node":
        words["n"].update(_words(names or [key]))
        words["l"].update(_words([label]))
    else:
        words["n"].update(_words([*names, label, key]))
    skip = ("label",) if kind == "node" else ("relationship",)
    words["t"].update(_words(other_text(properties, skip)))
    return words


def fact_names(data: Mapping[str, Any]) -> list[str]:
    """A fact's names in order: ``name``, ``title``, then ``aliases`` (blank ones left out,
    each once)."""
    found: list[str] = []
    for prop in NAME_PROPERTIES:
        value = data.get(prop)
        if isinstance(value, str):
            if value.strip():
                found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, str) and v.strip())
    return list(dict.fromkeys(found)) if len(found) > 1 else found


def other_text(data: Mapping[str, Any], skip: Iterable[str]) -> Iterator[str]:
    """String properties (and strings in list properties) that are not names, metadata or
    ``skip``."""
    left_out = {*NAME_PROPERTIES, *skip}
    for prop, value in data.items():
        if prop.startswith("_") or prop in left_out:
            continue
        if isinstance(value, str):
            yield value
        elif isinstance(value, list | tuple):
            yield from (v for v in value if isinstance(v, str))


class _Indexer:
    """Re-indexes, in one transaction, the facts of one entity changed since a version."""

    def __init__(self, connection: Connection, entity_id: int) -> None:
        from kgot.memory.schema import SEARCH_TERMS, SEARCH_VOCABULARY

        self.connection = connection
        self.entity_id = entity_id
        self.terms = SEARCH_TERMS
        self.vocabulary = SEARCH_VOCABULARY
        self.rows: list[dict[str, Any]] = []
        self.words: set[str] = set()

    def run(self, since: int | None) -> None:
        if since is None:
            nodes = self._current_nodes(None)
            edges = self._current_edges(None)
        else:
            changed_nodes = self._changed_nodes(since)
            changed_edges = self._changed_edges(since)
            self._delete_nodes(changed_nodes)
            self._delete_edges(changed_edges)
            nodes = self._current_nodes(changed_nodes)
            edges = self._current_edges(changed_edges)
        for node_id, (label, words, confidence, version) in nodes.items():
            self._add(("n", node_id, "", ""), words, label, confidence, version)
        for (source, target, key), (label, words, confidence, version) in edges.items():
            self._add(("e", source, target, key), words, label, confidence, version)
        self._flush(final=True)

    # -- what changed

    def _changed_nodes(self, since: int) -> list[str]:
        return changed_node_ids(self.connection, self.entity_id, since)

    def _changed_edges(self, since: int) -> list[tuple[str, str, str]]:
        scope = _edges.c.entity_id == self.entity_id
        columns = (_edges.c.source, _edges.c.target, _edges.c.key)
        query = union(
            select(*columns).where(scope, _edges.c.valid_from_version > since),
            select(*columns).where(scope, _edges.c.valid_to_version > since),
        )
        return sorted((str(s), str(t), str(k)) for s, t, k in self.connection.execute(query))

    # -- current rows

    def _current_nodes(
        self, node_ids: Sequence[str] | None
    ) -> dict[str, tuple[str, dict[str, set[str]], float, int]]:
        base = select(
            _nodes.c.node_id,
            _nodes.c.label,
            _nodes.c.properties,
            _nodes.c.confidence,
            _nodes.c.valid_from_version,
        ).where(_nodes.c.entity_id == self.entity_id, _nodes.c.valid_to_version.is_(None))
        queries = (
            [base]
            if node_ids is None
            else [base.where(_nodes.c.node_id.in_(chunk)) for chunk in _chunks(node_ids)]
        )
        found = {}
        for query in queries:
            for node_id, label, properties, confidence, version in self.connection.execute(query):
                props = properties if isinstance(properties, dict) else {}
                words = fact_words("node", str(label), props, str(node_id))
                found[str(node_id)] = (str(label), words, _confidence(confidence), int(version))
        return found

    def _current_edges(
        self, keys: Sequence[tuple[str, str, str]] | None
    ) -> dict[tuple[str, str, str], tuple[str, dict[str, set[str]], float, int]]:
        base = select(
            _edges.c.source,
            _edges.c.target,
            _edges.c.key,
            _edges.c.relationship,
            _edges.c.properties,
            _edges.c.confidence,
            _edges.c.valid_from_version,
        ).where(_edges.c.entity_id == self.entity_id, _edges.c.valid_to_version.is_(None))
        queries = []
        wanted: set[tuple[str, str, str]] | None = None
        if keys is None:
            queries.append(base)
        else:
            # By source (an index prefix), keeping the edges named (below): SQLite scans the
            # table for a row-value IN.
            wanted = set(keys)
            queries += [
                base.where(_edges.c.source.in_(chunk))
                for chunk in _chunks(sorted({key[0] for key in keys}))
            ]
        found = {}
        for query in queries:
            for (
                source,
                target,
                key,
                relationship,
                properties,
                confidence,
                version,
            ) in self.connection.execute(query):
                if wanted is not None and (source, target, key) not in wanted:
                    continue
                props = properties if isinstance(properties, dict) else {}
                words = fact_words("edge", str(relationship), props, str(key))
                found[(str(source), str(target), str(key))] = (
                    str(relationship),
                    words,
                    _confidence(confidence),
                    int(version),
                )
        return found

    # -- writing

    def _delete_nodes(self, node_ids: Sequence[str]) -> None:
        table = self.terms
        for chunk in _chunks(node_ids):
            self.connection.execute(
                delete(table).where(
                    table.c.entity_id == self.entity_id,
                    table.c.kind == "n",
                    table.c.source.in_(chunk),
                )
            )

    def _delete_edges(self, keys: Sequence[tuple[str, str, str]]) -> None:
        # One seek per edge (the fact index leads with entity, kind, source, target, key).
        if not keys:
            return
        table = self.terms
        self.connection.execute(
            delete(table).where(
                table.c.entity_id == self.entity_id,
                table.c.kind == "e",
                table.c.source == bindparam("s"),
                table.c.target == bindparam("t"),
                table.c.edge_key == bindparam("k"),
            ),
            [{"s": s, "t": t, "k": k} for s, t, k in keys],
        )

    def _add(
        self,
        fact: tuple[str, str, str, str],
        words: Mapping[str, set[str]],
        label: str,
        confidence: float,
        version: int,
    ) -> None:
        kind, source, target, key = fact
        for part, found in words.items():
            for term in found:
                self.rows.append(
                    {
                        "entity_id": self.entity_id,
                        "term": term,
                        "kind": kind,
                        "source": source,
                        "target": target,
                        "edge_key": key,
                        "part": part,
                        "label": label,
                        "confidence": confidence,
                        "version": version,
                    }
                )
                self.words.add(term)
        if len(self.rows) >= _INSERT_BATCH:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        if self.rows:
            self.connection.execute(self.terms.insert(), self.rows)
            self.rows = []
        if final and self.words:
            self._add_vocabulary(sorted(self.words))

    def _add_vocabulary(self, words: Sequence[str]) -> None:
        if self.connection.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        table = self.vocabulary
        for start in range(0, len(words), _INSERT_BATCH):
            statement = insert(table).on_conflict_do_nothing(
                index_elements=[table.c.entity_id, table.c.term]
            )
            self.connection.execute(
                statement,
                [
                    {"entity_id": self.entity_id, "term": w}
                    for w in words[start : start + _INSERT_BATCH]
                ],
            )


# ------------------------------------------------------------------------------------ helpers


def changed_node_ids(connection: Connection, entity_id: int, since: int) -> list[str]:
    """Ids of the entity's nodes with a row written or closed after version ``since``
    (through the ``nodes_since`` / ``nodes_until`` indexes), sorted: what an index derived
    from the facts must look at again to catch up."""
    scope = _nodes.c.entity_id == entity_id
    query = union(
        select(_nodes.c.node_id).where(scope, _nodes.c.valid_from_version > since),
        select(_nodes.c.node_id).where(scope, _nodes.c.valid_to_version > since),
    )
    return sorted(str(n) for n in connection.execute(query).scalars())


def _versions(connection: Connection, entity_id: int, state: Any) -> tuple[int | None, int]:
    indexed = connection.execute(
        select(state.c.version).where(state.c.entity_id == entity_id)
    ).scalar()
    current = connection.execute(
        select(_entities.c.version).where(_entities.c.id == entity_id)
    ).scalar_one()
    return (None if indexed is None else int(indexed)), int(current)


def _words(texts: Iterable[str]) -> set[str]:
    return {
        word for text in texts for word in fold_text(text).split() if len(word) <= MAX_TERM_CHARS
    }


def _confidence(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 1.0


def _chunks(items: Sequence[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield list(items[start : start + _CHUNK])
