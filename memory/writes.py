"""Write-time upkeep: a changeset is rewritten before it is committed (issue 15, sections 1–2).

:func:`prepare_changeset` looks at what graph code is about to write and, against the entity's
current facts:

* **lands duplicates on the existing node.** An added node that resolves onto an existing node
  of its type (identity keys, or a name the resolution rules merge on; see
  :mod:`kgot.memory.resolution`) is not added. Its properties are merged into the existing node
  (a new name joins ``aliases``), its edges are re-pointed, and the model is told the id it
  landed on. A re-statement that adds nothing is re-added unchanged, which the store counts as
  a corroboration (a new source) or a reinforcement (the same source); one that adds properties
  becomes a change of the existing node. A node that only *may* be the same (the suggestion
  band) is added, and a merge suggestion is queued.
* **follows merges.** Graph code holding an id that was merged away (an edge end, a changed
  node) writes to the canonical node instead.
* **supersedes functional facts.** A new value of a ``functional`` property of the node's type,
  or a new edge of a ``functional`` edge type from a source that has one of that relationship
  to another target, closes the old fact as ``contradicted``. When the new fact's confidence is
  lower than the old one's by more than :data:`TRUST_MARGIN`, the old fact stays current, the
  new value is dropped from the changeset and a contradiction suggestion is queued instead.
  Only a fact with the same subject *and* the same property or relationship is ever closed.

The result carries the changeset to commit, the one to apply to an in-memory graph that held
the entity's facts before the commit (duplicates there are changes, not additions), the notes
for the model, the close reasons for :meth:`EntitySession.commit` and the suggestions, which
:meth:`PreparedChangeset.queue` files once the commit went through.

The facts a write needs are read by index (the nodes it names with their edges, every node of
each type it adds, for resolution) and kept in a snapshot with its resolution index per session
and graph version, so a run's commits each cost a lookup, never a load of the whole entity.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgot.graph_model import Changeset, Edge, Node
from kgot.memory.tickers import TickerClaims, with_ticker_names

if TYPE_CHECKING:
    from kgot.memory.resolution import ResolutionIndex, TypeHints
    from kgot.persistence import EntitySession, TypeCatalog

__all__ = [
    "TRUST_MARGIN",
    "FactKey",
    "PreparedChangeset",
    "QueuedSuggestion",
    "TypeUpkeep",
    "prepare_changeset",
]

# A new value this much less trusted than the old one does not supersede it (issue 15).
TRUST_MARGIN = 0.2
# Fresh snapshots tried when another writer commits between a snapshot's reads.
_STALE_RETRIES = 2
# What a fact without `_confidence` and without a commit default is stored with (the store's
# default, see persistence/planner.py).
DEFAULT_CONFIDENCE = 1.0

FactKey = tuple[str, ...]  # ("node", id) or ("edge", source, target, key)


@dataclass(frozen=True)
class QueuedSuggestion:
    """A suggestion to file in the entity's curation queue after the commit."""

    kind: str  # "merge" | "contradiction"
    payload: dict[str, Any]
    score: float


@dataclass(frozen=True)
class PreparedChangeset:
    """What :func:`prepare_changeset` made of a changeset (module docstring)."""

    changeset: Changeset  # to commit
    applied: Changeset  # to apply to the in-memory graph the original was computed on
    notes: tuple[str, ...] = ()
    close_reasons: dict[FactKey, str] = field(default_factory=dict)
    suggestions: tuple[QueuedSuggestion, ...] = ()
    default_confidence: float = DEFAULT_CONFIDENCE
    # id in the original changeset -> the existing node its write landed on (a duplicate, or
    # an id merged away), for callers that report what became of each node
    redirects: dict[str, str] = field(default_factory=dict)

    def queue(self, session: EntitySession) -> list[int]:
        """File the suggestions in ``session``'s entity; their ids (a suggestion already open
        with the same payload keeps its id)."""
        return [session.suggest(s.kind, s.payload, s.score) for s in self.suggestions]

    def committed(self, session: EntitySession, version: int) -> None:
        """Tell the snapshot cache the commit landed as ``version`` (the next write of this
        session reuses the snapshot instead of loading the graph again)."""
        _SNAPSHOTS.committed(session, self, version)


def prepare_changeset(
    session: EntitySession,
    changeset: Changeset,
    *,
    confidence: float | None = None,
    catalog: TypeCatalog | None = None,
) -> PreparedChangeset:
    """Rewrite ``changeset`` for ``session``'s entity (module docstring).

    ``confidence``: the commit's default confidence (:attr:`Provenance.confidence`), for facts
    that do not set ``_confidence``. ``catalog``: the entity's types (read from the session
    when not given).
    """
    if changeset.is_empty:
        return PreparedChangeset(changeset, changeset)
    types = TypeUpkeep(catalog if catalog is not None else session.type_catalog())
    for attempt in range(_STALE_RETRIES + 1):
        snapshot = _SNAPSHOTS.get(session)
        # The last try takes what it reads: the commit checks the facts it changes anyway.
        snapshot.strict = attempt < _STALE_RETRIES
        try:
            snapshot.prepare_for(session, changeset, types)
            return _Rewrite(session, snapshot, types, confidence).run(changeset)
        except _Stale:
            _SNAPSHOTS.drop(session)  # another writer committed between two reads
    raise AssertionError("unreachable: the last try is not strict")


# --------------------------------------------------------------------------------------------
# Type settings (read defensively: a store without upkeep settings has none)


class TypeUpkeep:
    """The upkeep rules of an entity's types, as writes apply them: which properties identify a
    node, which are functional (a new value supersedes the old), which relationships are
    functional edges. A type without rules has none."""

    def __init__(self, catalog: TypeCatalog) -> None:
        self.catalog = catalog

    def _settings(self, kind: str, name: str) -> Any:
        type_def = self.catalog.get("node" if kind == "node" else "edge", name)
        return getattr(type_def, "upkeep", None) if type_def is not None else None

    def identity(self, label: str) -> tuple[str, ...]:
        return tuple(getattr(self._settings("node", label), "identity", ()) or ())

    def functional(self, label: str) -> tuple[str, ...]:
        return tuple(getattr(self._settings("node", label), "functional", ()) or ())

    def functional_edge(self, relationship: str) -> bool:
        return bool(getattr(self._settings("edge", relationship), "functional_edge", False))

    def allows_aliases(self, label: str) -> bool:
        """Whether the type's schema takes an ``aliases`` list (declared, or extra properties
        allowed), so a landed node's other name can be kept there."""
        type_def = self.catalog.get("node", label)
        if type_def is None:
            return False
        schema = type_def.spec.properties or {}
        declared = schema.get("properties") or {}
        if "aliases" in declared:
            return bool((declared["aliases"] or {}).get("type", "array") == "array")
        return schema.get("additionalProperties", True) is not False

    def identity_by_type(self, labels: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return {label: self.identity(label) for label in labels}

    def hints_by_type(self, labels: Iterable[str]) -> dict[str, TypeHints]:
        """Each type's resolution hints (its type file's ``resolution``)."""
        from kgot.memory.resolution import TypeHints

        found: dict[str, TypeHints] = {}
        for label in labels:
            settings = self._settings("node", label)
            if settings is not None and (
                settings.compare or settings.merge_at or settings.suggest_at
            ):
                found[label] = TypeHints(
                    dict(settings.compare), settings.merge_at, settings.suggest_at
                )
        return found

    def schemas_by_type(self, labels: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Each type's declared properties (its JSON Schema ``properties``): what the field
        model of entity resolution compares, and how."""
        found: dict[str, dict[str, Any]] = {}
        for label in labels:
            type_def = self.catalog.get("node", label)
            if type_def is not None:
                found[label] = dict((type_def.spec.properties or {}).get("properties") or {})
        return found


# --------------------------------------------------------------------------------------------
# Snapshot of the entity's current facts


@dataclass
class _Fact:
    label: str
    properties: dict[str, Any]  # plain properties, no metadata, no label
    confidence: float


class _Stale(Exception):
    """The store moved on since the snapshot's first read: its parts would not agree."""


class _Snapshot:
    """The entity's current facts a write needs, read as writes need them and kept between
    the writes of one session while nobody else writes (see :class:`_SnapshotCache`).

    It never reads the whole entity. It holds:

    * the nodes a changeset names (its nodes, its edges' ends, the nodes they were merged
      into), and every edge out of its edges' sources (for functional edges and re-stated
      ones), read by index;
    * for each type a changeset adds nodes of, the nodes resolution weighs them against: for a
      type of fewer than :data:`~kgot.memory.resolution_store.PROBE_MIN_NODES` nodes (and any
      organisation type) every node of it (``types``), kept in ``index``; for a larger one
      only the nodes sharing a block with the new ones, found by the blocks kept in the store
      (:mod:`kgot.memory.resolution_store`) and read again for each changeset (``probes``);
    * for organisation types, the tickers every organisation claims (its own ticker
      properties, and the securities linked to it by an issuer-like edge), since a ticker
      claimed by two organisations names neither;
    * the out-edges of any other node a rewrite asks about (a landing node's), read on
      demand.

    Every read must show the version the first one showed; a later one that shows another
    raises :class:`_Stale`, and :func:`prepare_changeset` starts again on a fresh snapshot.
    """

    def __init__(self, identity: dict[str, tuple[str, ...]], types: TypeUpkeep) -> None:
        from kgot.memory.resolution import ResolutionIndex

        self.version: int | None = None
        self.nodes: dict[str, _Fact] = {}
        self.edges: dict[tuple[str, str, str], _Fact] = {}  # label = relationship
        self.identity = identity
        self.index = ResolutionIndex(
            identity,
            schemas_by_type=types.schemas_by_type(identity),
            hints_by_type=types.hints_by_type(identity),
        )
        # (source, relationship) -> its edges, for functional edges
        self.outgoing: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        # merged-away id -> the node it was merged into (read with the first facts)
        self.merged: dict[str, str] | None = None
        # which organisations claim each ticker (kgot.memory.tickers); None until read
        self.tickers: TickerClaims | None = None
        self.known: set[str] = set()  # ids read as nodes (whether or not one is current)
        self.sources: set[str] = set()  # nodes read with every edge out of them
        self.types: set[str] = set()  # types read whole (and in the index)
        self.large: dict[str, bool] = {}  # type -> whether its writes probe the store
        # type -> an index of only the candidates of this changeset's new nodes of it
        self.probes: dict[str, ResolutionIndex] = {}
        self.strict = True  # False: reads of another version are taken (see prepare)

    @classmethod
    def load(cls, session: EntitySession) -> _Snapshot:
        catalog = session.type_catalog()
        types = TypeUpkeep(catalog)
        # Every type's identity, not only those of the nodes read: the first node of a type
        # this snapshot sees written must be indexed under its type's identity, or the next
        # write would merge two symbols that share a name (GOOGL and GOOG).
        return cls(types.identity_by_type(set(catalog.node_types)), types)

    # -- reading

    def _took(self, graph: Any) -> None:
        """Check that ``graph`` (just read) shows this snapshot's version, and keep its facts
        (nodes read again are replaced: the store is the truth)."""
        version = int(graph.graph.get("kgot_version", 0))
        if self.version is None:
            self.version = version
        elif version != self.version and self.strict:
            raise _Stale(f"read version {version}, snapshot {self.version}")
        for node_id, data in graph.nodes(data=True):
            self.nodes[node_id] = _fact(data, "label")
        self.known.update(graph.nodes)
        for source, target, key, data in graph.edges(keys=True, data=True):
            fact = self.edges[(source, target, key)] = _fact(data, "relationship")
            self.outgoing.setdefault((source, fact.label), set()).add((source, target, key))

    def read_merges(self, session: EntitySession) -> None:
        if self.merged is None:
            self.merged = session.merged_ids()

    def read_nodes(self, session: EntitySession, node_ids: Iterable[str]) -> None:
        """Read the nodes ``node_ids`` (those not read yet; ids of no current node are noted
        as such)."""
        wanted = {n for n in node_ids if n not in self.known}
        if not wanted:
            return
        self._took(session.load_facts(wanted, ()))
        self.known |= wanted

    def read_out_edges(self, session: EntitySession, node_ids: Iterable[str]) -> None:
        """Read every edge out of ``node_ids`` (those not read yet), with their ends."""
        wanted = {n for n in node_ids if n not in self.sources}
        if not wanted:
            return
        self._took(session.edges_from(wanted))
        self.sources |= wanted
        self.known |= wanted

    def read_types(self, session: EntitySession, labels: Iterable[str], types: TypeUpkeep) -> None:
        """Read every node of the types ``labels`` (those not read yet) into the index."""
        from kgot.memory.names import is_organisation_type
        from kgot.memory.resolution_store import large_type

        wanted = {label for label in labels if label not in self.types}
        for label in wanted:
            if label not in self.large:
                self.large[label] = large_type(session, label)
        wanted = {label for label in wanted if not self.large[label]}
        if not wanted:
            return
        if self.tickers is None and any(is_organisation_type(label) for label in wanted):
            self.read_tickers(session)
        graph = session.nodes_of_types(wanted)
        self._took(graph)
        for label in wanted:
            if label not in self.identity:
                self.identity[label] = types.identity(label)
                self.index.identity_by_type[label] = self.identity[label]
                self.index.schemas_by_type.update(types.schemas_by_type([label]))
                self.index.hints_by_type.update(types.hints_by_type([label]))
        names = self.tickers.names() if self.tickers is not None else {}
        nodes = (Node(node_id, self.nodes[node_id].label, self.nodes[node_id].properties)
                 for node_id in graph.nodes)  # fmt: skip
        for node in with_ticker_names(nodes, names):
            self.index.add(node)
        self.types |= wanted

    def read_tickers(self, session: EntitySession) -> None:
        """Read the tickers every organisation claims: the nodes of every organisation type
        and the issuer-like edges with their ends (:func:`kgot.memory.tickers.ticker_claims`
        over those facts is its answer over the whole graph)."""
        import networkx as nx

        from kgot.memory.names import is_organisation_type
        from kgot.memory.tickers import ISSUER_WORDS, ticker_claims

        organisations = [
            label for label in session.stats().nodes_by_label if is_organisation_type(label)
        ]
        holders = session.nodes_of_types(organisations)
        self._took(holders)
        links = session.edges_with_relationship_words(ISSUER_WORDS)
        self._took(links)
        self.tickers = ticker_claims(nx.compose(holders, links))

    def prepare_for(self, session: EntitySession, changeset: Changeset, types: TypeUpkeep) -> None:
        """Read what rewriting ``changeset`` needs (see the class docstring)."""
        self.read_merges(session)
        written = {node.id for node in (*changeset.added_nodes, *changeset.changed_nodes)}
        sources = {edge.source for edge in (*changeset.added_edges, *changeset.changed_edges)}
        named = {
            *written,
            *sources,
            *changeset.removed_nodes,
            *(edge.target for edge in (*changeset.added_edges, *changeset.changed_edges)),
            *(end for ident in changeset.removed_edges for end in ident[:2]),
        }
        merged_into = self._merged_into(named)
        self.read_out_edges(session, {*sources, *(self._merged_into(sources))})
        self.read_nodes(session, {*named, *merged_into})
        added = {node.label for node in changeset.added_nodes}
        self.read_types(session, added, types)
        self.probes = {}
        for label in sorted(added):
            if self.large.get(label):
                self.read_candidates(session, changeset, label, types)

    def read_candidates(
        self, session: EntitySession, changeset: Changeset, label: str, types: TypeUpkeep
    ) -> None:
        """Read the nodes of the large type ``label`` that the changeset's new nodes of it
        share a block with, into an index of only them (``probes``)."""
        from kgot.memory.resolution_store import TypeSettings, probe, ready_type

        stored = ready_type(session, TypeSettings.of(types, label))
        new = [
            Node(node.id, label, _split(node.properties)[0])
            for node in changeset.added_nodes
            if node.label == label and node.id not in self.nodes
        ]
        found = probe(session, stored, new)
        graph = session.load_facts(found.node_ids, ())
        self._took(graph)
        if self.strict and stored.version != self.version:
            raise _Stale(f"keys show version {stored.version}, snapshot {self.version}")
        candidates = (
            Node(node_id, label, self.nodes[node_id].properties)
            for node_id in graph.nodes
            if self.nodes[node_id].label == label
        )
        self.probes[label] = stored.index_of(candidates, found.sizes)

    def index_for(self, label: str) -> ResolutionIndex:
        """The index a new node of ``label`` is matched in."""
        return self.probes.get(label, self.index)

    def _merged_into(self, node_ids: Iterable[str]) -> set[str]:
        """The nodes ``node_ids`` were merged into, following later merges."""
        merged = self.merged or {}
        found: set[str] = set()
        for node_id in node_ids:
            current = merged.get(node_id)
            while current is not None and current not in found:
                found.add(current)
                current = merged.get(current)
        return found

    # -- what the rewrite asks

    def canonical(self, node_id: str) -> str | None:
        """The current node ``node_id`` is or was merged into (following later merges), or
        None (never seen, removed, or its canonical node is gone)."""
        seen: set[str] = set()
        current: str | None = node_id
        merged = self.merged or {}
        while current is not None and current not in seen:
            if current in self.nodes:
                return current
            seen.add(current)
            current = merged.get(current)
        return None

    def edge(self, session: EntitySession, ident: tuple[str, str, str]) -> _Fact | None:
        self.read_out_edges(session, ident[:1])
        return self.edges.get(ident)

    def out_edges(
        self, session: EntitySession, source: str, relationship: str
    ) -> list[tuple[str, str, str]]:
        self.read_out_edges(session, [source])
        return sorted(self.outgoing.get((source, relationship), ()))

    # -- after a commit

    def _drop_edge(self, ident: tuple[str, str, str]) -> None:
        fact = self.edges.pop(ident, None)
        if fact is not None:
            self.outgoing.get((ident[0], fact.label), set()).discard(ident)

    def apply(self, committed: Changeset, default_confidence: float) -> None:
        for node_id in committed.removed_nodes:
            fact = self.nodes.pop(node_id, None)
            if fact is not None and fact.label in self.types:
                self.index.remove(node_id, fact.label)
            for ident in [i for i in self.edges if node_id in (i[0], i[1])]:
                self._drop_edge(ident)
        for ident in committed.removed_edges:
            self._drop_edge(ident)
        for node in (*committed.added_nodes, *committed.changed_nodes):
            old = self.nodes.get(node.id)
            plain, conf = _split(node.properties)
            if conf is None:
                conf = old.confidence if old is not None else default_confidence
            self.nodes[node.id] = _Fact(node.label, plain, conf)
            if node.label not in self.identity:
                self.identity[node.label] = ()
            if node.label in self.types:  # a type not read whole stays out of the index
                self.index.add(Node(node.id, node.label, plain))
        for edge in (*committed.added_edges, *committed.changed_edges):
            old = self.edges.get(edge.ident)
            plain, conf = _split(edge.properties)
            if conf is None:
                conf = old.confidence if old is not None else default_confidence
            self.edges[edge.ident] = _Fact(edge.relationship, plain, conf)
            self.outgoing.setdefault((edge.source, edge.relationship), set()).add(edge.ident)
        if self.tickers is not None:
            self._claim_tickers(committed)

    def _claim_tickers(self, committed: Changeset) -> None:
        """Tickers the commit gives organisations (a ticker property, a security linked by an
        issuer-like edge) count as their names from the next write on, as they would after a
        reload. A ticker a second organisation claims later stays a name of the first in this
        snapshot (the index only adds names); a reload drops it from both."""
        from kgot.memory.tickers import issuer_links, organisation_tickers, security_tickers

        assert self.tickers is not None
        claimed: dict[str, list[str]] = {}
        for node in (*committed.added_nodes, *committed.changed_nodes):
            found = organisation_tickers(node.label, node.properties)
            if found:
                claimed.setdefault(node.id, []).extend(found)
        labels = _Labels(self.nodes)
        for edge in (*committed.added_edges, *committed.changed_edges):
            for security, issuer in issuer_links(
                edge.relationship, (edge.source, edge.target), labels
            ):
                fact = self.nodes.get(security)
                found = security_tickers(fact.properties) if fact is not None else []
                if found:
                    claimed.setdefault(issuer, []).extend(found)
        for organisation, found in claimed.items():
            names = self.tickers.claim(organisation, found)
            holder = self.nodes.get(organisation)
            if names and holder is not None and holder.label in self.types:
                self.index.add(with_ticker_names(
                    [Node(organisation, holder.label, holder.properties)], {organisation: names}
                )[0])  # fmt: skip


class _Labels(Mapping[str, str]):
    """Node id → type, read from the snapshot's facts (no copy)."""

    def __init__(self, nodes: Mapping[str, _Fact]) -> None:
        self._nodes = nodes

    def __getitem__(self, node_id: str) -> str:
        return self._nodes[node_id].label

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def _fact(data: Mapping[str, Any], label_key: str) -> _Fact:
    plain = {k: v for k, v in data.items() if not k.startswith("_") and k != label_key}
    confidence = data.get("_confidence")
    return _Fact(
        str(data.get(label_key, "")),
        plain,
        float(confidence) if confidence is not None else DEFAULT_CONFIDENCE,
    )


def _split(properties: Mapping[str, Any]) -> tuple[dict[str, Any], float | None]:
    plain = {k: v for k, v in properties.items() if not k.startswith("_")}
    confidence = properties.get("_confidence")
    return plain, (float(confidence) if isinstance(confidence, int | float) else None)


def _meta(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in properties.items() if k.startswith("_")}


class _SnapshotCache:
    """One snapshot per live session, valid while the session's version is the snapshot's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: weakref.WeakKeyDictionary[Any, tuple[_Snapshot, float]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, session: EntitySession) -> _Snapshot:
        with self._lock:
            found = self._by_session.get(session)
        if found is not None and found[0].version == session.version:
            return found[0]
        snapshot = _Snapshot.load(session)
        with self._lock:
            self._by_session[session] = (snapshot, 0.0)
        return snapshot

    def drop(self, session: EntitySession) -> None:
        with self._lock:
            self._by_session.pop(session, None)

    def committed(self, session: EntitySession, prepared: PreparedChangeset, version: int) -> None:
        with self._lock:
            found = self._by_session.get(session)
        if found is None:
            return
        snapshot = found[0]
        if snapshot.version is None:
            with self._lock:
                self._by_session.pop(session, None)
            return
        if version == snapshot.version:
            return  # nothing was written
        if version != snapshot.version + 1:
            with self._lock:
                self._by_session.pop(session, None)  # others wrote meanwhile: reload next time
            return
        # Edges the store closed with a removed node leave the snapshot with the node.
        snapshot.apply(prepared.changeset, prepared.default_confidence)
        snapshot.version = version


_SNAPSHOTS = _SnapshotCache()


# --------------------------------------------------------------------------------------------
# The rewrite


class _Rewrite:
    def __init__(
        self,
        session: EntitySession,
        snapshot: _Snapshot,
        types: TypeUpkeep,
        confidence: float | None,
    ) -> None:
        self.session = session
        self.snapshot = snapshot
        self.types = types
        self.default_confidence = confidence if confidence is not None else DEFAULT_CONFIDENCE
        self.redirect: dict[str, str] = {}  # id in the changeset -> existing node id
        self.notes: list[str] = []
        self.close_reasons: dict[FactKey, str] = {}
        self.suggestions: list[QueuedSuggestion] = []

    # -- ids

    def canonical(self, node_id: str) -> str | None:
        """The current node ``node_id`` stands for: itself when current, the node it was
        merged into when merged away, else None."""
        return self.snapshot.canonical(node_id)

    def end(self, node_id: str, added: set[str]) -> str:
        if node_id in self.redirect:
            return self.redirect[node_id]
        if node_id in added:
            return node_id
        found = self.canonical(node_id)
        if found is not None and found != node_id:
            self.redirect[node_id] = found
            self.notes.append(f"node {node_id!r} was merged into {found!r}; wrote to {found!r}")
            return found
        return node_id

    # -- the pass

    def run(self, changeset: Changeset) -> PreparedChangeset:
        commit_nodes: list[Node] = []  # added, committed as added (new or a re-statement)
        changed: dict[str, Node] = {}  # node id -> new version (full properties + meta)
        applied_added: list[Node] = []
        applied_changed: dict[str, Node] = {}
        added_ids: set[str] = set()
        restating: set[str] = set()  # existing nodes re-added as they are (corroborated)

        for node in changeset.added_nodes:
            target = self._landing(node)
            if target is None:
                commit_nodes.append(node)
                applied_added.append(node)
                added_ids.add(node.id)
                continue
            self.redirect[node.id] = target
            merged = self._merged_properties(target, node, changed.get(target))
            existing = self.snapshot.nodes[target]
            restated = target in restating
            if _plain(merged) == existing.properties and target not in changed:
                # Nothing new: re-adding the existing fact counts it as corroborated (once,
                # however many of the write's nodes land on it).
                if not restated:
                    restating.add(target)
                    commit_nodes.append(Node(target, existing.label, merged))
            else:
                if restated:  # an earlier node of this write re-stated it; this one changes it
                    restating.discard(target)
                    commit_nodes = [n for n in commit_nodes if n.id != target]
                changed[target] = Node(target, existing.label, merged)
                applied_changed[target] = Node(target, existing.label, _plain(merged))

        for written in changeset.changed_nodes:
            target = self.canonical(written.id) or written.id
            node = written
            if target != written.id:
                self.redirect[written.id] = target
                self.notes.append(
                    f"node {written.id!r} was merged into {target!r}; the change went to {target!r}"
                )
                merged = self._merged_properties(target, written, changed.get(target))
                node = Node(target, self.snapshot.nodes[target].label, merged)
            changed[target] = node
            applied_changed[target] = node

        # Functional properties of every node this write changes.
        for node_id, node in list(changed.items()):
            kept = self._functional_properties(node)
            if kept is None:
                continue
            if _plain(kept.properties) == self.snapshot.nodes[node_id].properties:
                del changed[node_id]  # only a refused value changed
                applied_changed.pop(node_id, None)
            else:
                changed[node_id] = kept
                applied_changed[node_id] = kept

        # Removing an id that was merged away removes nothing: the canonical node is another
        # thing's record too, and graph code did not ask to remove it.
        removed_nodes = changeset.removed_nodes
        added_edges, changed_edges, removed_edges = self._edges(changeset, added_ids)
        to_commit = dataclasses.replace(
            changeset,
            added_nodes=tuple(commit_nodes),
            changed_nodes=tuple(changed.values()),
            removed_nodes=removed_nodes,
            added_edges=tuple(added_edges),
            changed_edges=tuple(changed_edges),
            removed_edges=tuple(removed_edges),
        )
        applied = dataclasses.replace(
            changeset,
            added_nodes=tuple(applied_added),
            changed_nodes=tuple(applied_changed.values()),
            removed_nodes=removed_nodes,
            added_edges=tuple(added_edges),
            changed_edges=tuple(changed_edges),
            removed_edges=tuple(removed_edges),
        )
        return PreparedChangeset(
            to_commit,
            applied,
            tuple(dict.fromkeys(self.notes)),
            self.close_reasons,
            tuple(self.suggestions),
            self.default_confidence,
            dict(self.redirect),
        )

    # -- nodes

    def _landing(self, node: Node) -> str | None:
        """The existing node an added node is, or None (then it is added as it is)."""
        if node.id in self.snapshot.nodes:
            return None  # the store decides (a re-statement or a mistake)
        merged_into = self.canonical(node.id)
        if merged_into is not None:
            self.notes.append(
                f"node {node.id!r} was merged into {merged_into!r} earlier; the write landed on "
                f"{merged_into!r} (use that id)"
            )
            return merged_into
        from kgot.memory.resolution import match_existing

        plain, _ = _split(node.properties)
        match = match_existing(
            Node(node.id, node.label, plain), self.snapshot.index_for(node.label)
        )
        if match is None or match.node_id not in self.snapshot.nodes:
            return None
        if not match.merge:
            pair = sorted((node.id, match.node_id))
            self.suggestions.append(
                QueuedSuggestion(
                    "merge",
                    {"nodes": pair, "type": node.label, "reason": match.reason},
                    match.score,
                )
            )
            self.notes.append(
                f"node {node.id!r} may be the existing node {match.node_id!r} ({match.reason}); "
                "added as a new node, a merge suggestion is queued for review"
            )
            return None
        name = plain.get("name")
        shown = f" {name!r}" if isinstance(name, str) else ""
        self.notes.append(
            f"node {node.id!r} ({node.label}{shown}) is the existing node {match.node_id!r} "
            f"({match.reason}): the write landed on {match.node_id!r}; use that id"
        )
        return match.node_id

    def _merged_properties(
        self, target: str, node: Node, pending: Node | None = None
    ) -> dict[str, Any]:
        """The existing node's properties (or ``pending``, its new version in this write) with
        ``node``'s merged in: values ``node`` sets win (it is the newer statement; functional
        ones are checked afterwards), a different name joins ``aliases`` instead of replacing
        the name, metadata comes from ``node``."""
        existing = self.snapshot.nodes[target]
        merged = _plain(pending.properties) if pending is not None else dict(existing.properties)
        plain, _ = _split(node.properties)
        new_names: list[str] = []
        for key, value in plain.items():
            if key == "aliases":
                new_names.extend(_names_of(value))
            elif key == "name" and merged.get("name") not in (None, value):
                if isinstance(value, str):
                    new_names.append(value)
            else:
                merged[key] = value
        if new_names:
            known = set(_names_of(merged.get("aliases"))) | {merged.get("name")}
            extra = [n for n in dict.fromkeys(new_names) if n not in known]
            if extra and self.types.allows_aliases(existing.label):
                merged["aliases"] = [*_names_of(merged.get("aliases")), *extra]
        merged.update(_meta(node.properties))
        return merged

    def _confidence_of(self, properties: Mapping[str, Any]) -> float:
        _, confidence = _split(properties)
        return confidence if confidence is not None else self.default_confidence

    def _functional_properties(self, node: Node) -> Node | None:
        """``node`` with refused (too little trusted) functional values put back; None when
        nothing was refused. Superseded values get the close reason ``contradicted``."""
        old = self.snapshot.nodes.get(node.id)
        if old is None:
            return None
        new_confidence = self._confidence_of(node.properties)
        properties = dict(node.properties)
        refused = False
        for prop in self.types.functional(old.label):
            if prop not in properties or prop not in old.properties:
                continue  # a first value, or a value removed: not a contradiction
            before, after = old.properties[prop], properties[prop]
            if before == after:
                continue
            if new_confidence < old.confidence - TRUST_MARGIN:
                properties[prop] = before
                refused = True
                self.suggestions.append(
                    QueuedSuggestion(
                        "contradiction",
                        {
                            "fact": "node",
                            "node": node.id,
                            "type": old.label,
                            "property": prop,
                            "old": before,
                            "new": after,
                            "old_confidence": old.confidence,
                            "new_confidence": new_confidence,
                        },
                        round(new_confidence, 3),
                    )
                )
                self.notes.append(
                    f"{node.id!r}.{prop} stays {before!r} (confidence {old.confidence:.2f}): "
                    f"the new value {after!r} (confidence {new_confidence:.2f}) is queued for "
                    "review instead"
                )
            else:
                self.close_reasons[("node", node.id)] = "contradicted"
                self.notes.append(
                    f"{node.id!r}.{prop} is now {after!r}; the old value {before!r} is kept in "
                    "history as contradicted"
                )
        if not refused:
            return None
        if "_confidence" in properties and all(
            properties.get(p) == old.properties.get(p) for p in properties if not p.startswith("_")
        ):
            # Only the refused value was new: the lower confidence must not touch the old fact.
            properties.pop("_confidence")
        return Node(node.id, node.label, properties)

    # -- edges

    def _edges(
        self, changeset: Changeset, added_ids: set[str]
    ) -> tuple[list[Edge], list[Edge], list[tuple[str, str, str]]]:
        removed: dict[tuple[str, str, str], None] = {}
        for source, target, key in changeset.removed_edges:
            removed[(self.end(source, added_ids), self.end(target, added_ids), key)] = None
        changed: list[Edge] = []
        for edge in changeset.changed_edges:
            changed.append(self._repointed(edge, added_ids))
        added: list[Edge] = []
        seen: set[tuple[str, str, str]] = set()
        for written in changeset.added_edges:
            edge = self._repointed(written, added_ids)
            if edge.ident in seen:
                continue  # two duplicates' edges landed on one edge
            seen.add(edge.ident)
            existing = self.snapshot.edge(self.session, edge.ident)
            if (
                existing is not None
                and edge.ident not in removed
                and existing.properties != _plain(edge.properties)
            ):
                changed.append(edge)  # the landed node's edge says more than the old one
                continue
            if not self._functional_edge(edge, removed):
                continue
            added.append(edge)
        return added, changed, list(removed)

    def _repointed(self, edge: Edge, added_ids: set[str]) -> Edge:
        source, target = self.end(edge.source, added_ids), self.end(edge.target, added_ids)
        if (source, target) == (edge.source, edge.target):
            return edge
        return Edge(source, target, edge.relationship, edge.key, edge.properties)

    def _functional_edge(self, edge: Edge, removed: dict[tuple[str, str, str], None]) -> bool:
        """Whether ``edge`` is written; for a functional relationship, the source's other
        current edge of it is closed as contradicted, or (new edge much less trusted) kept
        and the new one dropped with a suggestion queued."""
        if not self.types.functional_edge(edge.relationship):
            return True
        others = [
            ident
            for ident in self.snapshot.out_edges(self.session, edge.source, edge.relationship)
            if ident != edge.ident and ident not in removed
        ]
        if not others:
            return True
        new_confidence = self._confidence_of(edge.properties)
        strongest = max(self.snapshot.edges[ident].confidence for ident in others)
        if new_confidence < strongest - TRUST_MARGIN:
            old = others[0]
            self.suggestions.append(
                QueuedSuggestion(
                    "contradiction",
                    {
                        "fact": "edge",
                        "source": edge.source,
                        "relationship": edge.relationship,
                        "old": {"target": old[1], "key": old[2]},
                        "new": {
                            "target": edge.target,
                            "key": edge.key or edge.relationship,
                            "properties": _plain(edge.properties),
                        },
                        "old_confidence": strongest,
                        "new_confidence": new_confidence,
                    },
                    round(new_confidence, 3),
                )
            )
            self.notes.append(
                f"{edge.source!r} -{edge.relationship}-> stays {old[1]!r} (confidence "
                f"{strongest:.2f}): the new target {edge.target!r} (confidence "
                f"{new_confidence:.2f}) is queued for review instead"
            )
            return False
        for ident in others:
            removed[ident] = None
            self.close_reasons[("edge", *ident)] = "contradicted"
            self.notes.append(
                f"{edge.source!r} -{edge.relationship}-> is now {edge.target!r}; the edge to "
                f"{ident[1]!r} is kept in history as contradicted"
            )
        return True


def _plain(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in properties.items() if not k.startswith("_")}


def _names_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [v for v in value if isinstance(v, str)]
    return []
