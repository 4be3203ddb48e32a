"""What the store's sessions share: provenance of writes, the conflict error, the engine, and
the *view* a write is based on (see :mod:`kgot.persistence.session`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select
from sqlalchemy.exc import SQLAlchemyError

from kgot.config import DEFAULT_LIMITS, StoreLimits
from kgot.errors import ChangesetError, EntityNotFoundError
from kgot.persistence.catalog import TypeDef
from kgot.persistence.schema import SOURCE_KINDS, TABLES

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from kgot.persistence.target import StoreTarget

ANALYZE_EVERY = 10_000  # rows written between statistics refreshes (see StoreContext)
# Rows of each index SQLite's ANALYZE reads. Its estimate of rows per entity is capped near
# this: at 1,000 it believed an entity of 100,000 nodes held 1,000 and read a whole entity's
# current rows for an IN list of 300 ids, to save a sort (search p95 0.4 s -> 1.0 s).
SQLITE_ANALYSIS_LIMIT = 100_000


@dataclass(frozen=True)
class Provenance:
    """Where a commit's facts come from (stored on every row it writes).

    Attributes:
        run_id: the run that produced the facts.
        step: the controller step, e.g. ``update_graph`` (or ``import``, ``api``).
        tool_call: tool name and JSON arguments that produced the data.
        source_ref: URL, file path, … the data came from.
        source_kind: ``extracted`` (stated by a source), ``inferred`` (derived by the model) or
            ``ambiguous``; facts may override it with ``_source_kind``.
        confidence: default confidence (0–1) for facts that do not set ``_confidence``;
            ``None`` means 1.0.
        result_key: names the one piece of work this commit applies (the controller: run,
            round and tool result), so it is applied once: a commit whose key the entity
            already has writes nothing (see :meth:`EntitySession.committed`).
    """

    run_id: str
    step: str
    tool_call: str | None = None
    source_ref: str | None = None
    source_kind: str = "extracted"
    confidence: float | None = None
    result_key: str | None = None

    def __post_init__(self) -> None:
        if self.source_kind not in SOURCE_KINDS:
            raise ValueError(f"source_kind must be one of {SOURCE_KINDS}, not {self.source_kind!r}")
        if self.confidence is not None and not 0 <= self.confidence <= 1:
            raise ValueError(f"confidence must be within 0..1, not {self.confidence!r}")


class CommitConflictError(ChangesetError):
    """Another writer changed facts this changeset was based on; nothing was written.

    Call :meth:`EntitySession.refresh`, apply the changeset it returns to the in-memory graph,
    and redo the change on the refreshed graph.

    Attributes:
        problems: one line per conflicting fact.
        version: the entity's version when the conflict was found.
    """

    def __init__(self, problems: Sequence[str], version: int) -> None:
        super().__init__(
            [
                *problems,
                "the graph has been changed by another writer: reload it and redo the "
                "change on the current facts",
            ]
        )
        self.version = version


@dataclass
class StoreContext:
    """What sessions share with their store."""

    engine: Engine
    target: StoreTarget
    type_cache: dict[int, TypeDef] = field(default_factory=dict)
    limits: StoreLimits = DEFAULT_LIMITS
    rows_since_analyze: int = 0
    analyze_lock: threading.Lock = field(default_factory=threading.Lock)

    def note_rows_written(self, count: int) -> None:
        """Refresh the planner's statistics after many rows were written by this process.

        PostgreSQL picks good plans for the fact lookups only when its statistics know how big
        the tables are; autovacuum normally keeps them fresh, but it may be off (or lag behind
        a bulk import), and then a lookup by id degrades into a scan of the entity. So every
        ``ANALYZE_EVERY`` rows kgot analyzes the fact tables itself (SQLite: a sampled
        ``ANALYZE``). Best effort: a failure only costs speed.
        """
        with self.analyze_lock:
            self.rows_since_analyze += count
            if self.rows_since_analyze < ANALYZE_EVERY:
                return
            self.rows_since_analyze = 0
        # SQLite: `PRAGMA optimize` on a fresh connection analyzes nothing (it looks only at
        # tables that connection queried), and statistics left from the first 10,000 rows
        # make its planner read every current row of an entity for a lookup of three ids
        # (19 ms instead of 0.4 at 100,000 nodes). An ANALYZE bounded by analysis_limit costs
        # ~50 ms at 100,000 nodes and about that beyond.
        statements = (
            [
                f"PRAGMA analysis_limit = {SQLITE_ANALYSIS_LIMIT}",
                f"ANALYZE {TABLES.nodes.name}",
                f"ANALYZE {TABLES.edges.name}",
            ]
            if self.target.is_sqlite
            else [f"ANALYZE {TABLES.nodes.name}, {TABLES.edges.name}"]
        )
        try:
            with self.engine.connect() as connection:
                for statement in statements:
                    connection.exec_driver_sql(statement)
                connection.commit()
        except SQLAlchemyError:
            pass


@dataclass(frozen=True)
class View:
    """The graph versions a caller's in-memory graph includes: everything up to ``base`` plus
    the versions in ``own`` (its own later commits, already applied to that graph).

    A commit is checked against a view: facts written at versions outside it were written by
    someone the caller has not seen, so changing them would overwrite a change unseen.
    """

    base: int
    own: frozenset[int] = frozenset()

    def includes(self, version: int) -> bool:
        return version <= self.base or version in self.own

    @property
    def latest(self) -> int:
        return max([self.base, *self.own])

    def with_own(self, versions: Iterable[int]) -> View:
        return View(self.base, self.own | frozenset(versions))


def entity_version(
    connection: Connection, target: StoreTarget, entity_id: int, entity: str, *, lock: bool = False
) -> int:
    """The graph version of the entity a session or type scope was opened on.

    Args:
        lock: also lock the entity's row until the transaction ends (``SELECT … FOR UPDATE`` on
            PostgreSQL; SQLite's write transactions hold the database lock already), so writes
            to one entity take turns.

    Raises:
        EntityNotFoundError: the entity was deleted since.
    """
    entities = TABLES.entities
    query = select(entities.c.version).where(entities.c.id == entity_id)
    if lock and not target.is_sqlite:
        query = query.with_for_update()
    version = connection.execute(query).scalar()
    if version is None:
        raise EntityNotFoundError(
            f"entity {entity!r} no longer exists (it was deleted); create it with "
            f"`kgot entities create {entity}`"
        )
    return int(version)
