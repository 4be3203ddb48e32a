"""One entity's persistent graph: load it, check and commit changesets, catch up, see history.

Concurrency model (optimistic, per fact). A commit is checked against a *view*: the graph
version the caller's in-memory graph was loaded at (its *base*) plus the versions the caller
committed itself since. A session tracks one such view — that of the graph its last
:meth:`EntitySession.load_graph` returned, moved on by its commits and :meth:`~EntitySession
.refresh` — and a caller holding another graph passes its version explicitly
(``commit(changeset, provenance, base=graph.graph["kgot_version"])``).

Property values are validated against their types first, without any lock. Then the commit
locks the entity (``SELECT … FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and
applies the changeset fact by fact to what is in the database *now*:

* facts no one else touched since the base are written;
* facts another writer added, changed or removed since the base make the whole commit fail with
  :class:`CommitConflictError` (nothing written) — never a silent overwrite;
* re-adding a fact another writer just added with identical content is not a conflict: from a
  new source it counts as a corroboration, from the same source it reinforces the fact;
* an edge to a node another writer removed after the view is a conflict too (the caller could
  not know), while an edge to a node that never was in the view is the caller's mistake.

So two processes adding different facts to one entity both succeed, and no update is lost. After
a conflict, :meth:`EntitySession.refresh` returns the other writers' changes as a changeset the
caller applies to its in-memory graph before redoing its change.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import networkx as nx
from sqlalchemy import Connection, Text, cast, func, or_, select

from kgot.config import StoreLimits
from kgot.errors import ChangesetError, UsageError
from kgot.graph_model import (
    Changeset,
    Edge,
    GraphStats,
    Node,
    forget_cached_conversions,
    has_values,
    predecessor_table,
    successor_table,
    tables,
)
from kgot.persistence import upkeep_store
from kgot.persistence.catalog import TypeCatalog, TypeDef, TypeSpec
from kgot.persistence.commit_result import CommitResult
from kgot.persistence.context import (
    ANALYZE_EVERY,
    CommitConflictError,
    Provenance,
    StoreContext,
    View,
    entity_version,
)
from kgot.persistence.counts import edge_counts, node_counts
from kgot.persistence.engine import read_transaction, write_transaction
from kgot.persistence.facts import FactKey, checked_key, checked_reason, checked_reasons
from kgot.persistence.planner import Planner, chunks
from kgot.persistence.schema import TABLES
from kgot.persistence.timeutil import as_utc, iso, utc_now
from kgot.persistence.types_store import TypeScope, load_catalog
from kgot.persistence.upkeep_store import (
    GOOD_FEEDBACK_BOOST,
    RETRIEVAL_BOOST,
    FactUse,
    Suggestion,
    checked_amount,
)
from kgot.persistence.validation import SchemaMemo, capped, content_problems

__all__ = [
    "ANALYZE_EVERY",
    "CommitConflictError",
    "EntitySession",
    "Provenance",
    "StoreContext",
    "View",
]

_nodes = TABLES.nodes
_edges = TABLES.edges
VERSION_ATTRIBUTE = "kgot_version"  # graph.graph[...] of a loaded graph: the version it shows
_TYPE_RETRIES = 3  # re-validations when types change between validation and the lock


class EntitySession:
    """Reads and writes of one entity's graph; every statement is scoped by the entity's id.

    Thread-safe: the controller may call it from worker threads.
    """

    def __init__(self, context: StoreContext, entity_id: int, entity: str, version: int) -> None:
        self._context = context
        self._entity_id = entity_id
        self.entity = entity
        self._view = View(version)
        self._lock = threading.RLock()
        self._schema_memo: SchemaMemo = {}  # what the last `check` validated (see `commit`)
        self._types = TypeScope(context, entity_id, entity)

    @property
    def limits(self) -> StoreLimits:
        """The caps on this store's commits and imports."""
        return self._context.limits

    @property
    def version(self) -> int:
        """The newest graph version the session's tracked view includes."""
        with self._lock:
            return self._view.latest

    @property
    def view(self) -> View:
        """The tracked view: the last loaded graph's version plus this session's commits."""
        with self._lock:
            return self._view

    @property
    def entity_id(self) -> int:
        """The entity's row id: a package scopes every statement on its own tables by it."""
        return self._entity_id

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction for a package's own rows of this entity (see
        :class:`~kgot.persistence.TableSet`), after checking the entity still exists.

        Raises:
            EntityNotFoundError: the entity was deleted since the session was opened.
        """
        with read_transaction(self._context.engine, self._context.target) as connection:
            self._entity_version(connection)
            yield connection

    @contextmanager
    def write(self, *, lock: bool = False) -> Iterator[Connection]:
        """A write transaction for a package's own rows of this entity, after checking the
        entity still exists; committed when the block ends, rolled back when it raises.

        Args:
            lock: also lock the entity's row until the transaction ends (PostgreSQL; SQLite's
                write lock excludes other writers already), so the write takes turns with
                commits to the entity and with its deletion.

        Raises:
            EntityNotFoundError: the entity was deleted since the session was opened.
        """
        with write_transaction(self._context.engine, self._context.target) as connection:
            if lock:
                self._lock_entity(connection)
            else:
                self._entity_version(connection)
            yield connection

    def __repr__(self) -> str:
        return f"EntitySession(entity={self.entity!r}, version={self.version})"

    # ----------------------------------------------------------------------------- reading

    def load_graph(
        self, *, include_meta: bool = False, as_of: int | None = None, track: bool = True
    ) -> nx.MultiDiGraph:
        """The entity's current facts as a property graph (see ``graph_backends/base.py``).

        The graph's ``graph.graph["kgot_version"]`` is the version it shows: pass it as
        ``base`` to :meth:`commit` for changes computed on this graph.

        Args:
            include_meta: also return each fact's metadata as ``_``-prefixed attributes
                (``_confidence``, ``_source_kind``, ``_created_at``, …; see
                :mod:`kgot.persistence.validation`), e.g. for export.
            as_of: the graph as it was at that version (history); the session's view is left
                alone.
            track: make this graph the one the session tracks (its view becomes this
                version). ``False`` leaves the view alone — for a second graph, an export, a
                look at the current state — so the graph the session tracks cannot silently
                miss another writer's change.

        Raises:
            EntityNotFoundError: the entity was deleted.
        """
        with self._lock, self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            at = version if as_of is None else min(max(as_of, 0), version)
            moment = utc_now() if as_of is None else self._commit_time(connection, at)
            current = at == version
            rows = connection.execute(
                self._facts_query(_nodes, at, current, moment, include_meta)
            ).all()
            properties = _decode_all(rows)
            graph = nx.MultiDiGraph()
            if include_meta:
                node_meta = _MetaReader(_NODE_META_OFFSET, is_node=True)
                _add_nodes(
                    graph,
                    (
                        (row[0], node_meta(row, _labelled(props, "label", row[1])))
                        for row, props in zip(rows, properties, strict=True)
                    ),
                )
            else:
                _add_nodes(
                    graph,
                    (
                        (row[0], _labelled(props, "label", row[1]))
                        for row, props in zip(rows, properties, strict=True)
                    ),
                )
            rows = connection.execute(
                self._facts_query(_edges, at, current, moment, include_meta)
            ).all()
            properties = _decode_all(rows)
            if include_meta:
                edge_meta = _MetaReader(_EDGE_META_OFFSET, is_node=False)
                edges = (
                    (
                        row[0],
                        row[1],
                        row[2],
                        edge_meta(row, _labelled(props, "relationship", row[3])),
                    )
                    for row, props in zip(rows, properties, strict=True)
                )
            else:
                edges = (
                    (row[0], row[1], row[2], _labelled(props, "relationship", row[3]))
                    for row, props in zip(rows, properties, strict=True)
                )
            _add_edges(graph, edges)
            graph.graph[VERSION_ATTRIBUTE] = at
            if as_of is None and track:
                self._view = View(version)
            return graph

    def _facts_query(
        self, table: Any, at: int, current: bool, moment: datetime, include_meta: bool
    ) -> Any:
        # The metadata columns follow the identity columns (_NODE_META_OFFSET /
        # _EDGE_META_OFFSET) in the order _MetaReader unpacks them.
        # Properties come back as JSON text, decoded for all rows at once (see _decode_all).
        text = cast(table.c.properties, Text).label("properties")
        if table is _nodes:
            columns = [table.c.node_id, table.c.label, text]
        else:
            columns = [table.c.source, table.c.target, table.c.key, table.c.relationship, text]
        if include_meta:
            columns += [
                table.c.confidence,
                table.c.source_kind,
                table.c.source_ref,
                table.c.expires_at,
                table.c.created_at,
                table.c.updated_at,
                table.c.reinforced_at,
                table.c.run_id,
                table.c.corroborations,
                table.c.valid_from_version,
                table.c.type_version,
            ]
            if table is _nodes:
                columns.append(table.c.canonical_id)
        alive = or_(table.c.expires_at.is_(None), table.c.expires_at > moment)
        query = select(*columns).where(table.c.entity_id == self._entity_id, alive)
        if current:  # served by the partial index on current rows
            query = query.where(table.c.valid_to_version.is_(None))
        else:
            query = query.where(
                table.c.valid_from_version <= at,
                or_(table.c.valid_to_version.is_(None), table.c.valid_to_version > at),
            )
        return query.order_by(table.c.row_id)

    def facts_around(
        self, node_ids: Iterable[str], *, include_meta: bool = True, track: bool = False
    ) -> nx.MultiDiGraph:
        """The current facts at ``node_ids`` as ``load_graph(include_meta=...)`` shows them:
        those nodes, their edges both ways and the nodes at the edges' other ends (expired
        facts, and edges with an expired end, left out).

        Reads only those rows, by index, where :meth:`load_graph` reads the whole entity: a
        look at a few nodes' surroundings costs milliseconds at any graph size.
        ``graph.graph["kgot_version"]`` is the version read. ``track=True`` makes that version
        the session's tracked view, as :meth:`load_graph` does (the first read of a working
        set, which later reads and :meth:`refresh` keep up to date); otherwise the view is
        left alone.

        Raises:
            EntityNotFoundError: the entity was deleted.
        """
        ids = sorted(set(node_ids))
        with self._lock, self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            moment = utc_now()
            edge_rows: dict[tuple[str, str, str], Any] = {}
            for column in (_edges.c.source, _edges.c.target):
                for chunk in chunks(ids):
                    query = self._facts_query(_edges, version, True, moment, include_meta)
                    for row in connection.execute(query.where(column.in_(chunk))):
                        edge_rows.setdefault((row[0], row[1], row[2]), row)
            wanted = {*ids, *(end for ident in edge_rows for end in ident[:2])}
            node_rows = self._current_node_rows(
                connection, version, moment, wanted, include_meta=include_meta
            )
            if track:
                self._view = View(version)
        alive = {row[0] for row in node_rows}
        rows = [row for ident, row in edge_rows.items() if ident[0] in alive and ident[1] in alive]
        shown = alive.intersection(ids).union(end for row in rows for end in row[:2])
        return _fact_graph(
            [row for row in node_rows if row[0] in shown], rows, version, include_meta
        )

    def load_facts(
        self,
        node_ids: Iterable[str],
        edge_keys: Iterable[tuple[str, str, str]],
        *,
        include_meta: bool = True,
    ) -> nx.MultiDiGraph:
        """The current facts named, as ``load_graph(include_meta=...)`` shows them: the nodes
        ``node_ids``, the edges ``edge_keys`` (source, target, key) and those edges' end nodes
        (expired facts, and edges with an expired end, left out; ids that name no current fact
        are skipped).

        Reads only those rows, by index (see :meth:`facts_around`). The session's view is left
        alone. ``graph.graph["kgot_version"]`` is the version read.

        Raises:
            EntityNotFoundError: the entity was deleted.
        """
        wanted_edges = set(edge_keys)
        with self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            moment = utc_now()
            # By source (an index prefix), keeping the edges named: cheaper to state than one
            # condition per edge, and SQLite scans the table for a row-value IN.
            edge_rows = []
            for chunk in chunks(sorted({key[0] for key in wanted_edges})):
                query = self._facts_query(_edges, version, True, moment, include_meta)
                edge_rows += [
                    row
                    for row in connection.execute(query.where(_edges.c.source.in_(chunk)))
                    if (row[0], row[1], row[2]) in wanted_edges
                ]
            return self._with_ends(
                connection, version, moment, edge_rows, node_ids, include_meta=include_meta
            )

    def nodes_of_types(self, labels: Iterable[str]) -> nx.MultiDiGraph:
        """The current nodes of the types ``labels`` (no edges), as
        ``load_graph(include_meta=True)`` shows them: a type-wide read, for what compares a
        node with every other of its type (entity resolution).
        ``graph.graph["kgot_version"]`` is the version read; the session's view is left alone.
        """
        wanted = sorted(set(labels))
        with self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            moment = utc_now()
            rows: list[Any] = []
            for chunk in chunks(wanted):
                query = self._facts_query(_nodes, version, True, moment, True)
                rows += connection.execute(query.where(_nodes.c.label.in_(chunk))).all()
        return _meta_graph(rows, [], version)

    def edges_with_relationship_words(self, words: Iterable[str]) -> nx.MultiDiGraph:
        """The current edges whose relationship contains one of ``words`` (any case), with
        their end nodes, as ``load_graph(include_meta=True)`` shows them (e.g. the issuer
        links of securities, for tickers). ``graph.graph["kgot_version"]`` is the version
        read; the session's view is left alone."""
        found = [word.casefold() for word in words if word]
        if not found:
            return _meta_graph([], [], self.version)
        relationship = func.lower(_edges.c.relationship)
        matching = or_(*(relationship.contains(word, autoescape=True) for word in found))
        with self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            moment = utc_now()
            query = self._facts_query(_edges, version, True, moment, True).where(matching)
            edge_rows = connection.execute(query).all()
            return self._with_ends(connection, version, moment, edge_rows)

    def find_node_ids(
        self, label: str | None, properties: Mapping[str, Any], *, limit: int
    ) -> list[str]:
        """Ids of current, unexpired nodes with ``label`` (any when None) whose properties have
        these values (strings, numbers, booleans, compared as JSON values: ``1`` is not
        ``True`` nor ``"1"``), sorted, at most ``limit``."""
        query = select(_nodes.c.node_id, cast(_nodes.c.properties, Text)).where(
            _nodes.c.entity_id == self._entity_id,
            _nodes.c.valid_to_version.is_(None),
            or_(_nodes.c.expires_at.is_(None), _nodes.c.expires_at > utc_now()),
        )
        if label is not None:
            query = query.where(_nodes.c.label == label)
        for name, value in properties.items():
            if isinstance(value, str):
                query = query.where(_nodes.c.properties[name].as_string() == value)
        query = query.order_by(_nodes.c.node_id)
        found: list[str] = []
        with self._read() as connection, _collector_paused():
            self._entity_version(connection)
            if not properties:
                return list(connection.execute(query.limit(limit)).scalars())
            # The database narrows by strings, but compares a number with a string as equal
            # (SQLite's json_extract, PostgreSQL's ->> text): every row is checked here too,
            # read in batches so that a type of many nodes is never held at once.
            rows = connection.execution_options(yield_per=_FIND_BATCH).execute(query)
            for node_id, text in rows:
                if has_values(json.loads(text), properties):
                    found.append(node_id)
                    if len(found) == limit:
                        break
            rows.close()
        return found

    def edges_from(self, node_ids: Iterable[str]) -> nx.MultiDiGraph:
        """The current edges out of ``node_ids`` with the nodes at both their ends, as
        ``load_graph(include_meta=True)`` shows them (the nodes themselves are in it only
        where they have such an edge). Read by index; the session's view is left alone.
        ``graph.graph["kgot_version"]`` is the version read."""
        ids = sorted(set(node_ids))
        with self._read() as connection, _collector_paused():
            version = self._entity_version(connection)
            moment = utc_now()
            edge_rows: list[Any] = []
            for chunk in chunks(ids):
                query = self._facts_query(_edges, version, True, moment, True)
                edge_rows += connection.execute(query.where(_edges.c.source.in_(chunk))).all()
            return self._with_ends(connection, version, moment, edge_rows)

    def recent_node_ids(self, limit: int) -> list[str]:
        """The ids of the ``limit`` current nodes written last, newest first (by the version
        that wrote them; an index range, whatever the entity's size)."""
        with self._read() as connection:
            self._entity_version(connection)
            query = (
                select(_nodes.c.node_id)
                .where(_nodes.c.entity_id == self._entity_id, _nodes.c.valid_to_version.is_(None))
                .order_by(_nodes.c.valid_from_version.desc(), _nodes.c.row_id.desc())
                .limit(limit)
            )
            return list(connection.execute(query).scalars())

    def _with_ends(
        self,
        connection: Connection,
        version: int,
        moment: datetime,
        edge_rows: Sequence[Any],
        node_ids: Iterable[str] = (),
        *,
        include_meta: bool = True,
    ) -> nx.MultiDiGraph:
        """A graph of ``edge_rows`` (read with ``_facts_query``), the current nodes at their
        ends and the current ones of ``node_ids``; an edge with an end that is not current is
        left out."""
        wanted = {*node_ids, *(end for row in edge_rows for end in row[:2])}
        node_rows = self._current_node_rows(
            connection, version, moment, wanted, include_meta=include_meta
        )
        alive = {row[0] for row in node_rows}
        rows = [row for row in edge_rows if row[0] in alive and row[1] in alive]
        return _fact_graph(node_rows, rows, version, include_meta)

    def _current_node_rows(
        self,
        connection: Connection,
        version: int,
        moment: datetime,
        node_ids: Iterable[str],
        *,
        include_meta: bool = True,
    ) -> list[Any]:
        """The current, unexpired rows (metadata too where asked) of ``node_ids``, by index."""
        rows: list[Any] = []
        for chunk in chunks(sorted(node_ids)):
            query = self._facts_query(_nodes, version, True, moment, include_meta)
            rows += connection.execute(query.where(_nodes.c.node_id.in_(chunk))).all()
        return rows

    def type_catalog(self) -> TypeCatalog:
        """The node and edge types this entity may use (its own plus the global ones): what
        :meth:`check` and :meth:`commit` validate against."""
        return self._types.catalog()

    def stats(self) -> GraphStats:
        """Counts of the facts :meth:`load_graph` returns, per label and relationship (current
        and unexpired; edges also need both ends unexpired)."""
        now = utc_now()
        with self._read() as connection:
            self._entity_version(connection)
            label_counts = node_counts(connection, now, self._entity_id, by_label=True)
            relationship_counts = edge_counts(
                connection, now, self._entity_id, by_relationship=True
            )
        by_label = dict(sorted(label_counts.items()))
        by_relationship = dict(sorted(relationship_counts.items()))
        return GraphStats(
            nodes=sum(by_label.values()),
            edges=sum(by_relationship.values()),
            nodes_by_label=by_label,
            edges_by_relationship=by_relationship,
        )

    def node_history(self, node_id: str) -> list[dict[str, Any]]:
        """Every stored version of a node, oldest first (superseded and removed ones too)."""
        with self._read() as connection:
            self._entity_version(connection)
            rows = connection.execute(
                select(_nodes)
                .where(_nodes.c.entity_id == self._entity_id, _nodes.c.node_id == node_id)
                .order_by(_nodes.c.valid_from_version, _nodes.c.row_id)
            )
            return [_history_entry(row, row.label) for row in rows]

    def edge_history(self, source: str, target: str, key: str) -> list[dict[str, Any]]:
        """Every stored version of an edge, oldest first."""
        with self._read() as connection:
            self._entity_version(connection)
            rows = connection.execute(
                select(_edges)
                .where(
                    _edges.c.entity_id == self._entity_id,
                    _edges.c.source == source,
                    _edges.c.target == target,
                    _edges.c.key == key,
                )
                .order_by(_edges.c.valid_from_version, _edges.c.row_id)
            )
            return [_history_entry(row, row.relationship) for row in rows]

    def committed(self, result_key: str) -> dict[str, Any] | None:
        """The commit made with ``result_key`` (see :class:`Provenance`), or ``None``: lets a
        resumed run skip work whose commit was made before a crash."""
        with self._read() as connection:
            self._entity_version(connection)
            row = self._keyed_commit(connection, result_key)
            return None if row is None else _commit_entry(row)

    def _keyed_commit(self, connection: Connection, result_key: str) -> Any:
        commits = TABLES.commits
        return connection.execute(
            select(commits).where(
                commits.c.entity_id == self._entity_id, commits.c.result_key == result_key
            )
        ).first()

    def version_at(self, moment: datetime) -> int:
        """The version the entity's graph had at ``moment`` (an aware datetime): that of its
        last commit at or before it, 0 (the empty graph it was created with) before the first.

        Raises:
            EntityNotFoundError: the entity was deleted.
        """
        commits = TABLES.commits
        moment = as_utc(moment)  # stored times are UTC (SQLite keeps them without a zone)
        with self._read() as connection:
            self._entity_version(connection)
            found = connection.execute(
                select(func.max(commits.c.version)).where(
                    commits.c.entity_id == self._entity_id, commits.c.committed_at <= moment
                )
            ).scalar()
        return int(found or 0)

    def commits(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest commits (version, run, step, summary, time), newest first."""
        commits = TABLES.commits
        with self._read() as connection:
            self._entity_version(connection)
            rows = connection.execute(
                select(commits)
                .where(commits.c.entity_id == self._entity_id)
                .order_by(commits.c.version.desc())
                .limit(max(0, limit))
            )
            return [_commit_entry(row) for row in rows]

    # ----------------------------------------------------------------------------- writing

    def check(self, changeset: Changeset, *, base: int | None = None) -> list[str]:
        """Type and structure violations of ``changeset`` against the current graph.

        Each line names the node or edge, the JSON path and the rule; ``[]`` when the changeset
        is valid. Conflicts with other writers (judged against ``base``, by default the
        tracked view, as in :meth:`commit`) are reported by :meth:`commit`, not here.
        """
        if changeset.is_empty:
            return []
        with self._lock:
            view = self._view if base is None else View(base)
        catalog = self.type_catalog()
        memo: SchemaMemo = {}
        content = content_problems(changeset, catalog, limits=self._context.limits, memo=memo)
        self._schema_memo = memo  # the commit that usually follows validates nothing again
        return self._problems(changeset, catalog, view, content)

    def _problems(
        self, changeset: Changeset, catalog: TypeCatalog, view: View, content: list[str]
    ) -> list[str]:
        """``content`` plus the problems of edge ends and existing facts (read, no lock)."""
        with self._read() as connection:
            self._entity_version(connection)
            planner = self._planner(connection, catalog, view, None)
            return capped([*content, *planner.plan(changeset).problems])

    def commit(
        self,
        changeset: Changeset,
        provenance: Provenance,
        *,
        base: int | None = None,
        close_reasons: Mapping[FactKey, str] | None = None,
        decides: int | None = None,
        decision: Mapping[str, Any] | None = None,
    ) -> CommitResult:
        """Write ``changeset`` atomically and return what the commit did
        (:class:`~kgot.persistence.commit_result.CommitResult`: the entity's new version, or
        the view's when there was nothing to write, and the facts written, stated again and
        closed).

        Property values are validated against their types before the entity is locked; under
        the lock only what needs it is checked (edge ends, other writers' changes). Changed
        facts get new rows and their old rows are closed (history is kept).

        Args:
            changeset: the change.
            provenance: where its facts come from.
            base: the version of the graph the change was computed on
                (``graph.graph["kgot_version"]`` of a loaded graph). ``None``: the session's
                tracked view, which then includes the new version; with a ``base`` the tracked
                view is left alone (the change reaches it through :meth:`refresh`).
            close_reasons: why facts this change closes stop being current, by fact key
                (``("node", id)`` or ``("edge", source, target, key)``; one of
                :data:`CLOSE_REASONS`). Unnamed facts close as ``changed`` (a new version
                replaces them) or ``removed``; keys of facts the change does not close are
                ignored. A removed edge closed as ``contradicted`` is ``superseded_by`` the
                edge this change adds from the same source with the same relationship.
            decides: an open suggestion this change carries out: marked accepted in the same
                transaction, so a suggestion decided meanwhile (by another process) refuses
                the change instead of being applied twice or after a rejection.
            decision: who decided ``decides`` and why, stored with it
                (``{"by": "person" | "model:NAME", "reason": …}``).

        A ``provenance.result_key`` the entity already has a commit for writes nothing and
        returns that commit's version (``already_committed``): the work it names was applied
        once already (the tracked view is left alone).

        Raises:
            ChangesetError: type or structure violations; nothing was written.
            CommitConflictError: another writer changed facts this change was based on;
                nothing was written (see :meth:`refresh`).
            EntityNotFoundError: the entity was deleted.
            UsageError: a close reason or fact key is malformed, or ``decides`` names no
                open suggestion of this entity (nothing was written).
        """
        reasons = checked_reasons(close_reasons)
        if changeset.is_empty:
            if decides is not None:
                self.decide_suggestion(decides, True, decision)
            return CommitResult(self.version if base is None else base)
        with self._lock:
            view = self._view if base is None else View(base)
            memo, self._schema_memo = self._schema_memo, {}
            for _attempt in range(_TYPE_RETRIES):
                catalog = self.type_catalog()
                problems = content_problems(
                    changeset, catalog, limits=self._context.limits, memo=memo
                )
                if problems:
                    raise ChangesetError(self._problems(changeset, catalog, view, problems))
                outcome = self._write(
                    changeset, provenance, catalog, view, reasons, decides=(decides, decision)
                )
                if outcome is not None:
                    break
            else:
                raise CommitConflictError(
                    ["the types this change uses were changed by another writer meanwhile"],
                    self.version,
                )
            result, rows_written = outcome
            if result.written and base is None:
                self._view = self._view.with_own([result.version])
        self._context.note_rows_written(rows_written)
        return result

    def _write(
        self,
        changeset: Changeset,
        provenance: Provenance,
        catalog: TypeCatalog,
        view: View,
        close_reasons: Mapping[FactKey, str],
        *,
        decides: tuple[int | None, Mapping[str, Any] | None] = (None, None),
    ) -> tuple[CommitResult, int] | None:
        """Lock the entity, plan and write; return what the commit did and the rows it
        wrote, or ``None`` when a type the changeset uses changed since ``catalog`` was
        validated against (the caller validates again)."""
        with write_transaction(self._context.engine, self._context.target) as connection:
            version = self._lock_entity(connection)
            if provenance.result_key is not None:
                earlier = self._keyed_commit(connection, provenance.result_key)
                if earlier is not None:
                    return CommitResult(int(earlier.version), already_committed=True), 0
            locked = self._catalog(connection)
            if not _same_types(catalog, locked, changeset):
                return None
            planner = self._planner(connection, locked, view, provenance, close_reasons)
            plan = planner.plan(changeset)
            if plan.problems:
                raise ChangesetError(capped(plan.problems) + capped(plan.conflicts))
            if plan.conflicts:
                raise CommitConflictError(capped(plan.conflicts), version)
            suggestion_id, decision = decides
            if suggestion_id is not None:
                upkeep_store.decide(
                    connection, self._entity_id, self.entity, suggestion_id, True, decision=decision
                )
            if plan.is_noop:
                return CommitResult(view.latest), 0
            return planner.execute(plan, version + 1, changeset.summary()), plan.rows_written

    def _planner(
        self,
        connection: Connection,
        catalog: TypeCatalog,
        view: View,
        provenance: Provenance | None,
        close_reasons: Mapping[FactKey, str] | None = None,
    ) -> Planner:
        return Planner(
            connection,
            entity_id=self._entity_id,
            catalog=catalog,
            view=view,
            provenance=provenance,
            close_reasons=close_reasons,
        )

    def refresh(self) -> Changeset:
        """Other writers' changes since the tracked view, as a changeset to apply to the
        tracked graph (the one the last :meth:`load_graph` returned plus this session's
        commits).

        Afterwards the tracked view is the current version. Expiry is not a change: facts
        that expired since the load stay in the caller's graph until the next load.

        Raises:
            EntityNotFoundError: the entity was deleted.
        """
        with self._lock, self._read() as connection:
            version = self._entity_version(connection)
            view = self._view
            if version - view.base == sum(1 for v in view.own if view.base < v <= version):
                self._view = View(version)
                return Changeset()  # every version since the base is this session's own
            now = utc_now()
            nodes = _catch_up(
                connection,
                _nodes,
                key_columns=(_nodes.c.node_id,),
                entity_id=self._entity_id,
                view=view,
                now=now,
            )
            edges = _catch_up(
                connection,
                _edges,
                key_columns=(_edges.c.source, _edges.c.target, _edges.c.key),
                entity_id=self._entity_id,
                view=view,
                now=now,
            )
            self._view = View(version)
        return Changeset(
            added_nodes=tuple(_row_node(r) for r in nodes["added"]),
            changed_nodes=tuple(_row_node(r) for r in nodes["changed"]),
            removed_nodes=tuple(r.node_id for r in nodes["removed"]),
            added_edges=tuple(_row_edge(r) for r in edges["added"]),
            changed_edges=tuple(_row_edge(r) for r in edges["changed"]),
            removed_edges=tuple((r.source, r.target, r.key) for r in edges["removed"]),
        )

    # ----------------------------------------------------------------------------- types

    def create_type(
        self,
        spec: TypeSpec | Mapping[str, Any],
        *,
        created_by: str = "user",
        justification: str = "",
        run_id: str | None = None,
        shadow: bool = False,
    ) -> TypeDef:
        """Add a type scoped to this entity: what the agent's type tools call, so a run that
        holds only this session cannot touch global types or other entities. Everything else
        about types is on the store (:meth:`kgot.persistence.Store.create_types` and the rest,
        with ``entity=``); both run the same code.

        ``shadow=True`` lets the entity's type take the name of a global type, replacing it for
        this entity (never offered to the agent's type tools). ``created_by="agent"`` needs a
        ``justification``.

        Raises:
            TypeRejectedError: a rule is broken or the name is taken; nothing was stored.
            EntityNotFoundError: the entity was deleted.
        """
        return self._types.create(
            [spec],
            created_by=created_by,
            justification=justification,
            run_id=run_id,
            shadow=shadow,
        )[0]

    # ----------------------------------------------------------------------------- upkeep

    def merge_nodes(
        self,
        canonical_id: str,
        alias_ids: Sequence[str],
        provenance: Provenance,
        *,
        properties: Mapping[str, Any],
        base: int | None = None,
        decides: int | None = None,
        decision: Mapping[str, Any] | None = None,
    ) -> int:
        """Merge nodes that are one real thing into ``canonical_id``, in one commit; return
        the new version. ``decides``: an open merge suggestion this merge carries out, marked
        accepted in the same transaction with ``decision`` (see :meth:`commit`).

        The alias nodes close as ``merged`` with ``canonical_id`` set (history keeps them, and
        :meth:`canonical_id` leads from their ids to the canonical node); each of their current
        edges closes as ``merged`` and is written again on the canonical node with its
        provenance, trust and counters. An edge equal to one the canonical node already has
        joins it (its sources counted as corroborations), one that would take another edge's
        identity gets a fresh key (``key~2``), and an edge between the merged nodes is closed,
        not turned into a loop. The canonical node's next version has ``properties`` (the
        caller computes the union, e.g. extends ``aliases``) and the aliases' sources as
        corroborations. ``load_graph(as_of=…)`` before the merge still shows every node.

        Like :meth:`commit`, the merge is checked against the tracked view (or ``base``):
        nodes another writer changed since refuse it. The change reaches the tracked graph
        through :meth:`refresh` (or a new load).

        Raises:
            UsageError: a node is not current in this entity, no aliases, the canonical node
                among them, or nodes of different types.
            ChangesetError: ``properties`` break the canonical node's type.
            CommitConflictError: another writer changed one of the nodes since the view.
            EntityNotFoundError: the entity was deleted.
        """
        with self._lock:
            view = self._view if base is None else View(base)
            with write_transaction(self._context.engine, self._context.target) as connection:
                version = self._lock_entity(connection)
                catalog = self._catalog(connection)
                limits = self._context.limits

                def problems(changeset: Changeset, types: TypeCatalog) -> list[str]:
                    return content_problems(changeset, types, limits=limits)

                new_version, written = upkeep_store.merge_nodes(
                    connection,
                    entity_id=self._entity_id,
                    entity=self.entity,
                    version=version,
                    view=view,
                    catalog=catalog,
                    canonical_id=canonical_id,
                    alias_ids=alias_ids,
                    provenance=provenance,
                    properties=properties,
                    content_problems=problems,
                )
                if decides is not None:
                    upkeep_store.decide(
                        connection, self._entity_id, self.entity, decides, True, decision=decision
                    )
        self._context.note_rows_written(written)
        return new_version

    def canonical_id(self, node_id: str) -> str | None:
        """The current node ``node_id`` is, or was merged into (following chains of merges);
        ``None`` when there is none (an unknown id, a removed or expired node)."""
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.canonical_id(connection, self._entity_id, node_id)

    def canonical_ids(self, node_ids: Iterable[str]) -> dict[str, str | None]:
        """:meth:`canonical_id` of each of ``node_ids``, read together (a write's ids in one
        query)."""
        ids = list(node_ids)
        if not ids:
            return {}
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.canonical_ids(connection, self._entity_id, ids)

    def merged_ids(self) -> dict[str, str]:
        """Node ids merged away, each with the node it was merged into (follow the map: that
        node may have been merged since, or be gone). An id written again after its merge is
        not listed."""
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.merged_ids(connection, self._entity_id)

    def close_facts(self, keys: Iterable[FactKey], reason: str, provenance: Provenance) -> int:
        """Close the current facts ``keys`` name (a node's current edges with it) for
        ``reason`` (``expired``, ``pruned``, …) in one commit, without writing new versions;
        return the new version (the current one when none was current).

        Acts on the current facts, whatever the tracked view holds; the change reaches the
        tracked graph through :meth:`refresh`.

        Raises:
            UsageError: a malformed key, a reason not in :data:`CLOSE_REASONS`, or ``merged``
                (use :meth:`merge_nodes`).
            EntityNotFoundError: the entity was deleted.
        """
        # Checked here: a key may come as a list, which is no mapping key.
        facts = dict.fromkeys(map(checked_key, keys))
        return self.close_facts_as_read(facts, reason, provenance).version

    def close_facts_as_read(
        self,
        facts: Mapping[FactKey, upkeep_store.FactAsRead | None],
        reason: str,
        provenance: Provenance,
    ) -> upkeep_store.ClosedFacts:
        """:meth:`close_facts`, each fact only while its current row is still as read (its
        :class:`~kgot.persistence.upkeep_store.FactAsRead`; ``None``: whatever it holds). A fact
        a writer re-stated since is left current, and so are its edges; a node closed takes
        every current edge with it. Returns what was closed and what was left.

        Raises:
            UsageError: a malformed key, a reason not in :data:`CLOSE_REASONS`, or ``merged``.
            EntityNotFoundError: the entity was deleted.
        """
        if checked_reason(reason) == "merged":
            raise UsageError("facts are closed as merged by merge_nodes, not close_facts")
        with (
            self._lock,
            write_transaction(self._context.engine, self._context.target) as connection,
        ):
            version = self._lock_entity(connection)
            done = upkeep_store.close_facts_as_read(
                connection,
                entity_id=self._entity_id,
                version=version,
                facts=facts,
                reason=reason,
                provenance=provenance,
            )
        self._context.note_rows_written(len(done.closed))
        return done

    def lapsed_facts(self, now: datetime | None = None) -> list[tuple[FactKey, str]]:
        """Current facts whose ``expires_at`` is not after ``now`` (default: the wall clock),
        each with the expiry that hides it: reads already hide them, but nothing has closed
        them yet (the upkeep pass closes them as ``expired``). The current edges of a lapsed
        node are listed too, with the node's expiry (reads hide them with it, and closing the
        node closes them). Oldest expiry first."""
        moment = utc_now() if now is None else as_utc(now)
        found: dict[FactKey, datetime] = {}
        with self._read() as connection:
            self._entity_version(connection)
            lapsed = (_nodes.c.expires_at.is_not(None), _nodes.c.expires_at <= moment)
            current = (_nodes.c.entity_id == self._entity_id, _nodes.c.valid_to_version.is_(None))
            for row in connection.execute(
                select(_nodes.c.node_id, _nodes.c.expires_at).where(*current, *lapsed)
            ):
                found[("node", row.node_id)] = as_utc(row.expires_at)
            nodes = {key[1]: at for key, at in found.items()}
            edge_columns = (_edges.c.source, _edges.c.target, _edges.c.key, _edges.c.expires_at)
            current_edges = (
                _edges.c.entity_id == self._entity_id,
                _edges.c.valid_to_version.is_(None),
            )
            queries = [
                select(*edge_columns).where(
                    *current_edges,
                    _edges.c.expires_at.is_not(None),
                    _edges.c.expires_at <= moment,
                )
            ]
            for chunk in chunks(sorted(nodes)):
                queries.append(
                    select(*edge_columns).where(
                        *current_edges,
                        or_(_edges.c.source.in_(chunk), _edges.c.target.in_(chunk)),
                    )
                )
            for query in queries:
                for row in connection.execute(query):
                    times = [nodes.get(row.source), nodes.get(row.target)]
                    if row.expires_at is not None and as_utc(row.expires_at) <= moment:
                        times.append(as_utc(row.expires_at))
                    found[("edge", row.source, row.target, row.key)] = min(
                        t for t in times if t is not None
                    )
        ordered = sorted(found.items(), key=lambda item: (item[1], item[0]))
        return [(key, iso(at) or "") for key, at in ordered]

    def record_use(self, keys: Iterable[FactKey], amount: float = RETRIEVAL_BOOST) -> int:
        """Count a use of each current fact ``keys`` name (retrieved into an answer or a
        search result the caller used): its strength grows by ``amount`` (capped at 1). No
        fact version is written. Returns how many facts were counted (keys of facts that are
        not current are skipped).

        Raises:
            UsageError: a malformed key or an amount outside 0..1.
            EntityNotFoundError: the entity was deleted.
        """
        step = checked_amount(amount)
        keys = list(keys)
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._entity_version(connection)
            found = upkeep_store.existing_keys(connection, self._entity_id, keys)
            upkeep_store.add_use(connection, self._entity_id, found, amount=step, use=True)
        return len(found)

    def feedback(self, key: FactKey, good: bool) -> FactUse:
        """Record feedback on a current fact: good adds 0.20 to its strength (capped at 1);
        both are counted. Returns the fact's use afterwards.

        Raises:
            UsageError: the key is malformed or names no current fact of this entity.
            EntityNotFoundError: the entity was deleted.
        """
        checked = checked_key(key)
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._entity_version(connection)
            if not upkeep_store.existing_keys(connection, self._entity_id, [checked]):
                what = (
                    f"node {checked[1]!r}"
                    if checked[0] == "node"
                    else f"edge {checked[1]!r} -> {checked[2]!r} key {checked[3]!r}"
                )
                raise UsageError(f"no current {what} in entity {self.entity!r}")
            upkeep_store.add_use(
                connection,
                self._entity_id,
                [checked],
                amount=GOOD_FEEDBACK_BOOST if good else 0.0,
                use=False,
                good=int(good),
                bad=int(not good),
            )
            return upkeep_store.read_use(connection, self._entity_id, [checked])[checked]

    def fact_use(self, keys: Iterable[FactKey]) -> dict[FactKey, FactUse]:
        """How the facts ``keys`` name were used; facts never used are absent."""
        keys = list(keys)
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.read_use(connection, self._entity_id, keys)

    def suggest(self, kind: str, payload: Mapping[str, Any], score: float) -> int:
        """Queue a ``merge`` or ``contradiction`` for a person to decide; return its id.

        A suggestion with an equal payload (compared as canonical JSON: give lists in a fixed
        order) that is still open or was rejected is not queued again: its id comes back.

        Raises:
            UsageError: an unknown kind, a payload that is not a JSON object, or a score
                outside 0..1.
            EntityNotFoundError: the entity was deleted.
        """
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._lock_entity(connection)  # two equal suggestions at once: one is queued
            return upkeep_store.add_suggestion(connection, self._entity_id, kind, payload, score)

    def suggestions(self, status: str | None = "open") -> list[Suggestion]:
        """This entity's suggestions with ``status`` (``None``: all), best score first."""
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.list_suggestions(connection, self._entity_id, status)

    def suggestion(self, suggestion_id: int) -> Suggestion:
        """One of this entity's suggestions.

        Raises:
            SuggestionNotFoundError: no suggestion with that id in this entity (another
                entity's ids read exactly like unknown ones).
        """
        with self._read() as connection:
            self._entity_version(connection)
            return upkeep_store.get_suggestion(
                connection, self._entity_id, self.entity, suggestion_id
            )

    def decide_suggestion(
        self, suggestion_id: int, accepted: bool, decision: Mapping[str, Any] | None = None
    ) -> Suggestion:
        """Mark an open suggestion accepted or rejected (applying it, e.g. the merge, is the
        caller's), recording ``decision`` (who decided and why); return it as it is now.

        Raises:
            SuggestionNotFoundError: no suggestion with that id in this entity.
            UsageError: it was decided before.
        """
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._lock_entity(connection)
            return upkeep_store.decide(
                connection,
                self._entity_id,
                self.entity,
                suggestion_id,
                accepted,
                decision=decision,
            )

    # ----------------------------------------------------------------------------- internals

    def _read(self) -> Any:
        return read_transaction(self._context.engine, self._context.target)

    def _catalog(self, connection: Connection) -> TypeCatalog:
        return load_catalog(connection, self._entity_id, self.entity, self._context.type_cache)

    def _entity_version(self, connection: Connection) -> int:
        return entity_version(connection, self._context.target, self._entity_id, self.entity)

    def _lock_entity(self, connection: Connection) -> int:
        return entity_version(
            connection, self._context.target, self._entity_id, self.entity, lock=True
        )

    def _commit_time(self, connection: Connection, version: int) -> datetime:
        commits = TABLES.commits
        moment = connection.execute(
            select(commits.c.committed_at).where(
                commits.c.entity_id == self._entity_id, commits.c.version == version
            )
        ).scalar()
        return as_utc(moment) or utc_now()


# --------------------------------------------------------------------------------- helpers


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a graph is built: hundreds of thousands of new
    dicts trigger repeated full collections that free nothing and double the load time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_FIND_BATCH = 1000  # rows find_node_ids reads at a time


def _fact_graph(
    node_rows: Sequence[Any], edge_rows: Sequence[Any], version: int, include_meta: bool
) -> nx.MultiDiGraph:
    """A graph of fact rows read with ``_facts_query(..., include_meta)``."""
    if include_meta:
        return _meta_graph(node_rows, edge_rows, version)
    graph = nx.MultiDiGraph()
    _add_nodes(
        graph,
        (
            (row[0], _labelled(props, "label", row[1]))
            for row, props in zip(node_rows, _decode_all(node_rows), strict=True)
        ),
    )
    _add_edges(
        graph,
        (
            (row[0], row[1], row[2], _labelled(props, "relationship", row[3]))
            for row, props in zip(edge_rows, _decode_all(edge_rows), strict=True)
        ),
    )
    graph.graph[VERSION_ATTRIBUTE] = version
    return graph


def _meta_graph(
    node_rows: Sequence[Any], edge_rows: Sequence[Any], version: int
) -> nx.MultiDiGraph:
    """A graph of fact rows read with metadata (``_facts_query(..., include_meta=True)``)."""
    graph = nx.MultiDiGraph()
    node_meta = _MetaReader(_NODE_META_OFFSET, is_node=True)
    _add_nodes(
        graph,
        (
            (row[0], node_meta(row, _labelled(props, "label", row[1])))
            for row, props in zip(node_rows, _decode_all(node_rows), strict=True)
        ),
    )
    edge_meta = _MetaReader(_EDGE_META_OFFSET, is_node=False)
    _add_edges(
        graph,
        (
            (row[0], row[1], row[2], edge_meta(row, _labelled(props, "relationship", row[3])))
            for row, props in zip(edge_rows, _decode_all(edge_rows), strict=True)
        ),
    )
    graph.graph[VERSION_ATTRIBUTE] = version
    return graph


def _add_nodes(graph: nx.MultiDiGraph, nodes: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Add new nodes to an empty graph, taking ownership of their attribute dicts.

    Equivalent to ``graph.add_nodes_from`` for fresh ids, but writes the adjacency structures
    networkx documents for subclassing (``_node``, ``_succ``, ``_pred`` and their factories)
    directly, without copying each attribute dict: for 100k nodes this is several times faster.
    """
    node_map, succ, pred = tables(graph)
    inner = graph.adjlist_inner_dict_factory
    for node_id, attributes in nodes:
        node_map[node_id] = attributes
        succ[node_id] = inner()
        pred[node_id] = inner()
    forget_cached_conversions(graph)


def _add_edges(
    graph: nx.MultiDiGraph, edges: Iterable[tuple[str, str, str, dict[str, Any]]]
) -> None:
    """Add edges with unique (source, target, key) between present nodes; edges touching an
    absent (expired) node are skipped. Writes ``_succ``/``_pred`` directly like
    :func:`_add_nodes`: ``add_edges_from`` costs about 15 µs per edge, this about 2 µs."""
    succ, pred = successor_table(graph), predecessor_table(graph)
    new_keys = graph.edge_key_dict_factory
    for source, target, key, attributes in edges:
        outgoing = succ.get(source)
        if outgoing is None or target not in succ:
            continue
        keys = outgoing.get(target)
        if keys is None:
            keys = outgoing[target] = new_keys()
            pred[target][source] = keys
        keys[key] = attributes
    forget_cached_conversions(graph)


# Where the metadata columns start in a fact query's rows (see _facts_query).
_NODE_META_OFFSET = 3
_EDGE_META_OFFSET = 5


def _decode_all(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """Every row's ``properties`` JSON text, decoded by one ``json.loads`` call (several times
    faster than one call per row, which pays Python-level decoder overhead each time)."""
    if not rows:
        return []
    return json.loads("[" + ",".join(row.properties for row in rows) + "]")


def _labelled(properties: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    properties[key] = value
    return properties


class _MetaReader:
    """Adds a fact row's metadata to its attributes (``load_graph(include_meta=True)``).

    Reads the row's metadata columns by position (the order ``_facts_query`` selects them in)
    and formats each distinct timestamp once: rows written by one commit share their times, so
    a 10,000-fact load formats a handful instead of tens of thousands.
    """

    def __init__(self, offset: int, is_node: bool) -> None:
        self.offset = offset
        self.is_node = is_node
        self._stamps: dict[datetime, str | None] = {}

    def _iso(self, value: datetime) -> str | None:
        text = self._stamps.get(value)
        if text is None:
            text = self._stamps[value] = iso(value)
        return text

    def __call__(self, row: Any, attributes: dict[str, Any]) -> dict[str, Any]:
        (
            confidence,
            source_kind,
            source_ref,
            expires_at,
            created_at,
            updated_at,
            reinforced_at,
            run_id,
            corroborations,
            version,
            type_version,
        ) = row[self.offset : self.offset + 11]
        attributes["_confidence"] = confidence
        attributes["_source_kind"] = source_kind
        if source_ref is not None:
            attributes["_source_ref"] = source_ref
        if expires_at is not None:
            attributes["_expires_at"] = self._iso(expires_at)
        attributes["_created_at"] = self._iso(created_at)
        attributes["_updated_at"] = self._iso(updated_at)
        if reinforced_at is not None:
            attributes["_reinforced_at"] = self._iso(reinforced_at)
        if run_id is not None:
            attributes["_run_id"] = run_id
        attributes["_corroborations"] = corroborations
        attributes["_version"] = version
        if type_version is not None:
            attributes["_type_version"] = type_version
        if self.is_node and row[self.offset + 11] is not None:
            attributes["_canonical_id"] = row[self.offset + 11]
        return attributes


def _commit_entry(row: Any) -> dict[str, Any]:
    return {
        "version": row.version,
        "run_id": row.run_id,
        "step": row.step,
        "tool_call": row.tool_call,
        "source_ref": row.source_ref,
        "summary": row.summary,
        "committed_at": iso(row.committed_at),
        "result_key": row.result_key,
    }


def _history_entry(row: Any, type_name: str) -> dict[str, Any]:
    return {
        "type": type_name,
        "type_version": row.type_version,
        "properties": row.properties,
        "valid_from_version": row.valid_from_version,
        "valid_to_version": row.valid_to_version,
        "superseded_by": row.superseded_by,
        "confidence": row.confidence,
        "source_kind": row.source_kind,
        "source_ref": row.source_ref,
        "run_id": row.run_id,
        "step": row.step,
        "tool_call": row.tool_call,
        "corroborations": row.corroborations,
        "sources": row.sources or [],
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "expires_at": iso(row.expires_at),
        "superseded_at": iso(row.superseded_at),
        "closed_reason": row.closed_reason,
        "canonical_id": row._mapping.get("canonical_id"),
        "row_id": row.row_id,
    }


def _catch_up(
    connection: Connection,
    table: Any,
    *,
    key_columns: tuple[Any, ...],
    entity_id: int,
    view: View,
    now: datetime,
) -> dict[str, list[Any]]:
    """Classify facts other writers touched since the view's base relative to the view."""
    base, seen_from = view.base, view.includes

    def ended_in_view(row: Any) -> bool:
        return row.valid_to_version is not None and seen_from(row.valid_to_version)

    rows = connection.execute(
        select(table)
        .where(
            table.c.entity_id == entity_id,
            or_(table.c.valid_from_version > base, table.c.valid_to_version > base),
        )
        .order_by(table.c.row_id)
    )
    by_key: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        by_key.setdefault(tuple(getattr(row, c.name) for c in key_columns), []).append(row)
    result: dict[str, list[Any]] = {"added": [], "changed": [], "removed": []}
    for versions in by_key.values():
        in_view = next(
            (r for r in versions if seen_from(r.valid_from_version) and not ended_in_view(r)),
            None,
        )
        current = next(
            (
                r
                for r in versions
                if r.valid_to_version is None
                and (r.expires_at is None or as_utc(r.expires_at) > now)
            ),
            None,
        )
        if in_view is None and current is not None:
            result["added"].append(current)
        elif in_view is not None and current is None:
            result["removed"].append(in_view)
        elif in_view is not None and current is not None and in_view.row_id != current.row_id:
            result["changed"].append(current)
    return result


def _row_node(row: Any) -> Node:
    return Node(row.node_id, row.label, dict(row.properties))


def _row_edge(row: Any) -> Edge:
    return Edge(row.source, row.target, row.relationship, row.key, dict(row.properties))


def _same_types(before: TypeCatalog, now: TypeCatalog, changeset: Changeset) -> bool:
    """Whether every type ``changeset`` writes is the same version in both catalogs."""
    for node in (*changeset.added_nodes, *changeset.changed_nodes):
        old, new = before.node_types.get(node.label), now.node_types.get(node.label)
        if (old and old.id) != (new and new.id):
            return False
    for edge in (*changeset.added_edges, *changeset.changed_edges):
        old, new = before.edge_types.get(edge.relationship), now.edge_types.get(edge.relationship)
        if (old and old.id) != (new and new.id):
            return False
    return True
