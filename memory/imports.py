"""A graph file imported into an entity through the memory's write-time rules (issue 29).

``kgot graph import --entity`` used to write the file's facts as they were: a person the graph
held under another id became a second node, a new CEO sat beside the old one, and every fact
got the store's default confidence. An import is one more writer, so it takes the one write
pipeline (:mod:`kgot.memory.write_outcome`): the file is compared with the entity's graph
(:func:`kgot.persistence.transfer.import_changeset`), the memory rewrites the difference
(duplicates land on the node they are, functional facts supersede or are queued, see
:func:`kgot.memory.prepare_changeset`), and the commit carries the import's trust
(``[memory.trust] import``, else ``default``; facts the file gives a ``_confidence`` keep
it). ``kgot graph import --raw`` (:func:`kgot.persistence.import_graph`) skips the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgot.errors import ChangesetError
from kgot.graph_model import Changeset
from kgot.memory.write_outcome import WriteOutcome, commit_prepared
from kgot.memory.writes import prepare_changeset

if TYPE_CHECKING:
    import networkx as nx

    from kgot.memory.embeddings import NodeEmbedder
    from kgot.persistence import EntitySession, Provenance

__all__ = ["ImportOutcome", "import_with_rules"]


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did, or would do (a dry run).

    Attributes:
        changeset: what the file changes in the entity's graph, before the rules.
        planned: what the rules made of it: what was (or would be) committed.
        version_before: the entity's version the file was compared with.
        written: the write's outcome; ``None`` for a dry run.
        notes: what the memory did, in words (landings, kept values).
        queued: suggestions filed (or that would be, for a dry run).
    """

    changeset: Changeset
    planned: Changeset
    version_before: int
    written: WriteOutcome | None
    notes: tuple[str, ...]
    queued: int


def import_with_rules(
    session: EntitySession,
    graph: nx.MultiDiGraph,
    provenance: Provenance,
    *,
    replace: bool = False,
    dry_run: bool = False,
    embedder: NodeEmbedder | None = None,
) -> ImportOutcome:
    """Merge ``graph`` into the session's entity through the write-time rules, in one
    commit (module docstring). With ``replace``, facts the file lacks are removed; with
    ``dry_run`` nothing is written. A conflict with another writer starts the import over
    once on the new graph.

    Raises:
        ChangesetError: a fact breaks its type, or the file is larger than one import may
            hold (nothing was written).
        CommitConflictError: other writers kept changing facts the import touches.
    """
    from kgot.persistence import CommitConflictError, check_import_size, import_changeset

    check_import_size(session, graph)
    for attempt in range(2):
        # Tracked: the commit is checked against this version, as the rules read it.
        current = session.load_graph(include_meta=True)
        before = int(current.graph.get("kgot_version", 0))
        changeset = import_changeset(current, graph, replace=replace)
        prepared = prepare_changeset(session, changeset, confidence=provenance.confidence)
        if dry_run:
            problems = session.check(prepared.changeset, base=before)
            if problems:
                raise ChangesetError(problems)
            return ImportOutcome(
                changeset,
                prepared.changeset,
                before,
                None,
                tuple(prepared.notes),
                len(prepared.suggestions),
            )
        try:
            written = commit_prepared(session, prepared, provenance, embedder=embedder)
        except CommitConflictError:
            if attempt:
                raise
            continue
        return ImportOutcome(
            changeset, prepared.changeset, before, written, written.notes, written.queued
        )
    raise AssertionError("unreachable: the loop returns or raises")
