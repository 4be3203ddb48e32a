"""What one write did to an entity's graph, as data: :class:`WriteOutcome`.

Every writer goes through the same pipeline: a changeset (from graph code, or from a client's
facts) is rewritten by the entity's memory (:func:`kgot.memory.prepare_changeset`), committed
(:meth:`kgot.persistence.EntitySession.commit`), its suggestions filed and its nodes embedded
(:func:`commit_prepared`). The outcome comes from the memory's rewrite and the commit's
:class:`~kgot.persistence.CommitResult`, so runs, ``kgot ingest``, aides, MCP ``remember`` and
``save_facts`` report the same facts the same way, and nothing reads a commit's summary (text
for people) to learn what it did.

Facts are named by fact key (``("node", id)`` / ``("edge", source, target, key)``) and edges
as :class:`WrittenEdge`; :func:`kgot.persistence.fact_id` turns either into the one text form
people and clients see (``source -[key]-> target``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from kgot.graph_model import Changeset, Edge
from kgot.persistence import FactKey, edge_key, fact_id, node_key

if TYPE_CHECKING:
    from kgot.memory.embeddings import NodeEmbedder
    from kgot.memory.writes import PreparedChangeset
    from kgot.persistence import CommitResult, EntitySession, Provenance

__all__ = ["MergedId", "WriteOutcome", "WrittenEdge", "commit_prepared"]


class WrittenEdge(NamedTuple):
    """An edge a write inserted or changed: ``(source, relationship, target)`` and its key."""

    source: str
    relationship: str
    target: str
    key: str

    @classmethod
    def of(cls, edge: Edge) -> WrittenEdge:
        return cls(edge.source, edge.relationship, edge.target, edge.ident[2])

    @property
    def fact_key(self) -> FactKey:
        return edge_key(self.source, self.target, self.key)

    @property
    def fact_id(self) -> str:
        return fact_id(self.fact_key)


class MergedId(NamedTuple):
    """A node id the write gave that the memory landed on another node: a duplicate of it, or
    an id merged into it earlier."""

    given: str
    into: str


@dataclass(frozen=True)
class WriteOutcome:
    """What one write did (module docstring).

    Attributes:
        version: the entity's version after the commit; ``None`` when nothing was committed
            (nothing to write, or a graph that is not kept in a store).
        already_committed: the write's result key had a commit already: nothing was written
            again (another worker did the same work first).
        inserted_nodes / inserted_edges: facts new to the graph.
        updated_nodes / updated_edges: existing facts with new or changed properties.
        merged: node ids the write gave that landed on another node.
        restated: facts stated again as the graph holds them: nothing new was written, the
            store counted them as ``corroborated`` (a new source) or ``reinforced`` (the same
            source).
        superseded: facts closed as contradicted by a new value.
        queued: suggestions filed in the curation queue (kept values, possible duplicates).
        notes: what the memory did, in words, for the model's next prompt and for people.
        failed: why no change could be made (the graph code kept failing), else ``None``.
        applied: the change to apply to an in-memory graph that held the entity's facts
            before the write (a duplicate there is a change, not an addition).
    """

    version: int | None = None
    already_committed: bool = False
    inserted_nodes: tuple[str, ...] = ()
    inserted_edges: tuple[WrittenEdge, ...] = ()
    updated_nodes: tuple[str, ...] = ()
    updated_edges: tuple[WrittenEdge, ...] = ()
    merged: tuple[MergedId, ...] = ()
    restated: tuple[FactKey, ...] = ()
    corroborated: int = 0
    reinforced: int = 0
    superseded: tuple[FactKey, ...] = ()
    queued: int = 0
    notes: tuple[str, ...] = ()
    failed: str | None = None
    applied: Changeset = field(default_factory=Changeset)

    @property
    def ok(self) -> bool:
        return self.failed is None

    @classmethod
    def unrecorded(cls, changeset: Changeset) -> WriteOutcome:
        """A change applied to a graph no store keeps (a run without an entity): every fact
        it adds is new, every one it changes updated."""
        return cls(
            inserted_nodes=tuple(node.id for node in changeset.added_nodes),
            inserted_edges=tuple(WrittenEdge.of(edge) for edge in changeset.added_edges),
            updated_nodes=tuple(node.id for node in changeset.changed_nodes),
            updated_edges=tuple(WrittenEdge.of(edge) for edge in changeset.changed_edges),
            applied=changeset,
        )

    @classmethod
    def of(cls, prepared: PreparedChangeset, result: CommitResult | None) -> WriteOutcome:
        """The outcome of ``prepared`` committed as ``result`` (``None``: the memory left
        nothing to commit)."""
        committed = prepared.changeset
        common: dict[str, Any] = {
            "merged": tuple(
                MergedId(given, into) for given, into in prepared.redirects.items() if given != into
            ),
            "queued": len(prepared.suggestions),
            "notes": tuple(prepared.notes),
            "applied": prepared.applied,
        }
        if result is None:
            return cls(**common)
        if result.already_committed:
            return cls(version=result.version, already_committed=True)

        def wrote_nodes(nodes: Iterable[Any]) -> tuple[str, ...]:
            return tuple(node.id for node in nodes if result.wrote(node_key(node.id)))

        def wrote_edges(edges: Iterable[Edge]) -> tuple[WrittenEdge, ...]:
            return tuple(
                WrittenEdge.of(edge) for edge in edges if result.wrote(edge_key(*edge.ident))
            )

        return cls(
            version=result.version,
            inserted_nodes=wrote_nodes(committed.added_nodes),
            inserted_edges=wrote_edges(committed.added_edges),
            updated_nodes=wrote_nodes(committed.changed_nodes),
            updated_edges=wrote_edges(committed.changed_edges),
            restated=result.restated,
            corroborated=result.corroborated,
            reinforced=result.reinforced,
            superseded=tuple(key for key, why in result.closed.items() if why == "contradicted"),
            **common,
        )

    def summary(self) -> str:
        """One line for people: what changed (only the counts that are not zero)."""
        if self.failed is not None:
            return f"failed: {self.failed}"
        if self.already_committed:
            return f"already committed as version {self.version}"
        parts = [
            f"{_count(len(self.inserted_nodes), 'node')} and "
            f"{_count(len(self.inserted_edges), 'edge')} inserted"
        ]
        # Both counts: a text ingested again from the same source reinforces its facts (their
        # clock restarts) without corroborating them.
        counts = ((self.corroborated, "corroborated"), (self.reinforced, "reinforced"))
        how = [f"{count} {what}" for count, what in counts if count]
        for count, what in (
            (len(self.updated_nodes) + len(self.updated_edges), "updated"),
            (len(self.merged), "merged"),
            (len(self.restated), "restated" + (f" ({', '.join(how)})" if how else "")),
            (len(self.superseded), "superseded"),
        ):
            if count:
                parts.append(f"{count} {what}")
        where = f"version {self.version}" if self.version is not None else "nothing committed"
        return f"{', '.join(parts)} ({where})"


def commit_prepared(
    session: EntitySession,
    prepared: PreparedChangeset,
    provenance: Provenance,
    *,
    embedder: NodeEmbedder | None = None,
) -> WriteOutcome:
    """Commit what the memory made of a write (:func:`kgot.memory.prepare_changeset`), file its
    suggestions and embed the nodes it wrote (with an ``embedder``: after the commit, never
    failing it); return the outcome.

    Raises:
        ChangesetError, CommitConflictError, StoreBusyError: as
            :meth:`~kgot.persistence.EntitySession.commit`; nothing was written or filed.
    """
    if prepared.changeset.is_empty:  # e.g. only a refused, less trusted value
        prepared.queue(session)
        return WriteOutcome.of(prepared, None)
    result = session.commit(
        prepared.changeset, provenance, close_reasons=prepared.close_reasons or None
    )
    prepared.committed(session, result.version)
    prepared.queue(session)
    if embedder is not None and result.written:
        from kgot.memory.embeddings import embed_after_commit

        embed_after_commit(session, embedder, prepared.changeset)
    return WriteOutcome.of(prepared, result)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
