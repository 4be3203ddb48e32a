"""Moving whole graphs in and out of an entity (graph files, other stores)."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from kgot.errors import ChangesetError
from kgot.graph_model import Changeset
from kgot.persistence.graph_diff import diff_graphs
from kgot.persistence.session import (
    VERSION_ATTRIBUTE,
    CommitConflictError,
    EntitySession,
    Provenance,
)
from kgot.persistence.validation import READ_ONLY_META, WRITABLE_META


@dataclass(frozen=True)
class ImportResult:
    """What an import changed (or would change, for a dry run)."""

    changeset: Changeset
    version_before: int
    version_after: int

    @property
    def changed(self) -> bool:
        return self.version_after != self.version_before


def export_graph(
    session: EntitySession, *, include_meta: bool = True, as_of: int | None = None
) -> nx.MultiDiGraph:
    """The entity's current graph, or with ``as_of`` the graph as it was at that version
    (``graph.graph["kgot_version"]`` says which); with metadata (``_confidence``, …) a
    lossless copy that :func:`import_graph` restores. The session's tracked view is left
    alone."""
    return session.load_graph(include_meta=include_meta, as_of=as_of, track=False)


def import_graph(
    session: EntitySession,
    graph: nx.MultiDiGraph,
    provenance: Provenance,
    *,
    replace: bool = False,
    dry_run: bool = False,
) -> ImportResult:
    """Merge ``graph`` into the entity in one validated, atomic commit.

    Facts in ``graph`` are added or changed; with ``replace`` facts it lacks are removed too.
    Writable metadata in the file (``_confidence``, ``_source_kind``, ``_source_ref``,
    ``_expires_at``) is applied; read-only metadata (``_created_at``, …) is ignored, and
    metadata the file leaves out keeps its stored value.

    The file is compared with the graph as it is when the import starts, and committed against
    that version: when another writer changes a fact the import touches in between, the
    import starts over once on the new graph. The session's tracked view is left alone.

    Raises:
        ChangesetError: a fact breaks its type, or the graph holds more nodes or edges than
            the store's limits allow (nothing was written).
        CommitConflictError: other writers kept changing facts the import touches (nothing
            was written).
    """
    check_import_size(session, graph)
    for attempt in range(2):
        current = session.load_graph(include_meta=True, track=False)
        before = int(current.graph[VERSION_ATTRIBUTE])
        changeset = import_changeset(current, graph, replace=replace)
        if dry_run:
            problems = session.check(changeset, base=before)
            if problems:
                raise ChangesetError(problems)
            return ImportResult(changeset, before, before)
        try:
            after = session.commit(changeset, provenance, base=before).version
        except CommitConflictError:
            if attempt:
                raise
            continue
        return ImportResult(changeset, before, after)
    raise AssertionError("unreachable: the loop returns or raises")


def check_import_size(session: EntitySession, graph: nx.MultiDiGraph) -> None:
    """Refuse a graph larger than one import may hold (the store's limits).

    Raises:
        ChangesetError: the graph holds more nodes or edges than ``store.max_import_*``.
    """
    limits = session.limits
    for count, cap, noun in (
        (graph.number_of_nodes(), limits.max_import_nodes, "node"),
        (graph.number_of_edges(), limits.max_import_edges, "edge"),
    ):
        if count > cap:
            raise ChangesetError(
                [
                    f"the graph holds {count:,} {noun}s, more than the {cap:,} one import may "
                    f"hold (rule: import size; split it, or raise store.max_import_{noun}s)"
                ]
            )


def import_changeset(
    current: nx.MultiDiGraph, graph: nx.MultiDiGraph, *, replace: bool
) -> Changeset:
    """What importing ``graph`` changes in ``current`` (an entity's graph with metadata):
    facts added or changed, and with ``replace`` the facts ``graph`` lacks removed. Metadata
    the file leaves out keeps its stored value; read-only metadata is not compared."""
    incoming = graph.copy()
    for node_id, attributes in incoming.nodes(data=True):
        _align_meta(attributes, current.nodes.get(str(node_id)))
    for source, target, key, attributes in incoming.edges(keys=True, data=True):
        _align_meta(attributes, current.get_edge_data(str(source), str(target), str(key)))
    for _, attributes in current.nodes(data=True):
        _drop_read_only(attributes)
    for _, _, attributes in current.edges(data=True):
        _drop_read_only(attributes)
    return diff_graphs(current, incoming, remove_missing=replace)


def _align_meta(
    attributes: MutableMapping[str, Any], stored: MutableMapping[str, Any] | None
) -> None:
    """Drop derived metadata and fill writable metadata the file left out from what is stored,
    so that only real differences show up in the diff."""
    _drop_read_only(attributes)
    if stored is None:
        return
    for key in WRITABLE_META:
        if key not in attributes and key in stored:
            attributes[key] = stored[key]


def _drop_read_only(attributes: MutableMapping[str, Any]) -> None:
    for key in READ_ONLY_META:
        attributes.pop(key, None)
