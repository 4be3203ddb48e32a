"""The store's own tables (SQLAlchemy Core), one definition for SQLite and PostgreSQL: entities,
types, facts, commits, runs and their events, and the upkeep rows. Packages that keep rows of
their own (the aides, the memory's node embeddings, …) declare their tables themselves, as
table sets (see :mod:`kgot.persistence.table_sets`).

Design rules the rows follow, so that memory upkeep (dedup, contradictions, decay) can come later
without a migration that loses data:

* **Facts are never overwritten.** A change to a node or edge writes a new row and closes the
  old one (``valid_to_version``, ``superseded_by``, ``superseded_at``); a removal only closes the
  row. "Current" means ``valid_to_version IS NULL``; the graph as of version *N* is every row
  with ``valid_from_version <= N < valid_to_version``.
* **One current row per identity**, enforced by a partial unique index (not only by code): a
  node per ``(entity_id, node_id)``, an edge per ``(entity_id, source, target, key)``.
* **Every row carries its tenant** (``entity_id``) and its provenance (run, step, tool call,
  source reference, source kind, confidence).
* Columns reserved for upkeep: ``canonical_id`` (alias → canonical node id),
  ``corroborations`` (independent confirmations), ``reinforced_at`` (last confirmation, the clock
  for decay), ``expires_at`` (facts hidden after that time).
* Every closed fact row says why it closed (``closed_reason``, migration 2): one of
  :data:`CLOSE_REASONS`. Rows closed before migration 2 have none.
* Reads never write fact rows: how often a fact was used and what feedback it got live in
  ``kgot_fact_use``; merges and contradictions the rules would not decide wait in
  ``kgot_suggestions`` (both migration 2).
* Each run's trace is kept in ``kgot_run_events`` (migration 3): one row per event, numbered
  in order within the run, going with its run (and the run's entity) when that is deleted.
* A run is a question (``ask``), an ingestion (``ingest``) or an aide's cycle (``aide_cycle``),
  in ``kgot_runs.kind`` (migration 8); the commits a run wrote name it (``kgot_commits.run_id``,
  indexed by migration 8 so that a run's commits are found without reading every commit).
* Tables of other packages follow the same rules: every row carries its entity
  (``entity_id``, deleted with it) and never holds a fact version.
* Types are versioned the same way: a change writes version *n+1* and retires version *n*
  (``retired_at``); ``entity_id IS NULL`` marks a global type.
* Properties, schemas and examples are JSON *text* on both databases (``json``, not ``jsonb``,
  on PostgreSQL): JSONB rewrites numbers (``1e22`` comes back as an integer) and reorders
  keys, so the same data would read back differently than on SQLite and a re-write of
  identical data would look like a change.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

PREFIX = "kgot_"
# The table recording applied migrations. Development versions before the migrations were
# squashed recorded theirs in `kgot_schema_migrations`; see `kgot.persistence.migrations`.
MIGRATIONS_TABLE = f"{PREFIX}migrations"
SOURCE_KINDS = ("extracted", "inferred", "ambiguous")
CREATORS = ("system", "agent", "user")
# Why a fact row stopped being current (kgot_nodes/kgot_edges.closed_reason): a commit that
# changed or removed it, a functional value or edge that replaced it, a merge of its node into
# another, its time to live running out, pruning of a fact whose score decayed away, or a
# person asking to forget it (`kgot memory forget`, migration 7).
CLOSE_REASONS = (
    "changed",
    "removed",
    "contradicted",
    "merged",
    "expired",
    "pruned",
    "forgotten",
)
# The reasons migration 2 allowed (frozen: what it and databases before migration 7 check).
CLOSE_REASONS_V2 = CLOSE_REASONS[:6]
SUGGESTION_KINDS = ("merge", "contradiction")
SUGGESTION_STATUSES = ("open", "accepted", "rejected")
# The schema version `define_tables` describes by default: the last migration of the store's
# own tables (other packages' migrations take versions of the same history).
SCHEMA_VERSION = 11

# Facts and types: JSON text on both databases (see above). Run options and totals are only
# stored and shown, never compared, so JSONB's rewriting does them no harm.
JsonValue = JSON(none_as_null=True)
JsonbValue = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
# SQLite only auto-numbers an INTEGER PRIMARY KEY; PostgreSQL wants 64 bits for fact rows.
RowId = BigInteger().with_variant(Integer(), "sqlite")
Timestamp = DateTime(timezone=True)


def define_tables(metadata: MetaData, *, version: int = SCHEMA_VERSION) -> SimpleNamespace:
    """Define the store's own tables on ``metadata`` as of schema ``version`` and return them
    by short name.

    ``version=1`` gives the tables migration 1 creates (frozen: never change what a version
    below :data:`SCHEMA_VERSION` describes); each later version adds what its migration adds.
    """
    migrations = Table(
        MIGRATIONS_TABLE,
        metadata,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("description", Text, nullable=False),
        Column("applied_at", Timestamp, nullable=False),
    )
    entities = Table(
        f"{PREFIX}entities",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("name", String, nullable=False, unique=True),
        Column("description", Text, nullable=False, server_default=""),
        # Bumped by every commit; the graph version callers see.
        Column("version", BigInteger, nullable=False, server_default=text("0")),
        Column("created_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        # Never reuse an id: a session of a deleted entity must not reach a new one (SQLite
        # otherwise hands out the highest id again after it is deleted).
        sqlite_autoincrement=True,
    )
    types = Table(
        f"{PREFIX}types",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=True),
        Column("kind", String(4), nullable=False),
        Column("name", String, nullable=False),
        Column("version", Integer, nullable=False),
        Column("description", Text, nullable=False),
        Column("properties_schema", JsonValue, nullable=False),
        Column("example", JsonValue, nullable=True),
        Column("source_types", JsonValue, nullable=True),
        Column("target_types", JsonValue, nullable=True),
        Column("created_by", String(8), nullable=False),
        Column("justification", Text, nullable=False, server_default=""),
        Column("run_id", String, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("retired_at", Timestamp, nullable=True),
        Column("retired_reason", String(8), nullable=True),  # "updated" | "removed"
        *([Column("upkeep", JsonValue, nullable=True)] if version >= 2 else []),
        CheckConstraint("kind IN ('node', 'edge')", name="kgot_types_kind"),
        CheckConstraint("created_by IN ('system', 'agent', 'user')", name="kgot_types_created_by"),
        sqlite_autoincrement=True,  # ids key the process-wide cache of compiled types
    )
    # NULL entity_id (global) must still collide with itself: index on COALESCE(entity_id, 0).
    scope = func.coalesce(types.c.entity_id, 0)
    Index(
        f"{PREFIX}types_version_uq", scope, types.c.kind, types.c.name, types.c.version, unique=True
    )
    Index(
        f"{PREFIX}types_current_uq",
        scope,
        types.c.kind,
        types.c.name,
        unique=True,
        sqlite_where=types.c.retired_at.is_(None),
        postgresql_where=types.c.retired_at.is_(None),
    )

    nodes = Table(
        f"{PREFIX}nodes",
        metadata,
        Column("row_id", RowId, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=False),
        Column("node_id", String, nullable=False),
        Column("label", String, nullable=False),
        Column("type_version", Integer, nullable=True),
        Column("properties", JsonValue, nullable=False),
        *_fact_columns(),
        Column("canonical_id", String, nullable=True),
        *_closed_reason("nodes", version),
        *_checks("nodes"),
    )
    current_node = nodes.c.valid_to_version.is_(None)
    Index(
        f"{PREFIX}nodes_current_uq",
        nodes.c.entity_id,
        nodes.c.node_id,
        unique=True,
        sqlite_where=current_node,
        postgresql_where=current_node,
    )
    if version >= 11:
        # Type-wide reads (entity resolution against a type, graph code's find()) read the
        # current nodes of one type, not every node of the entity.
        Index(
            f"{PREFIX}nodes_current_label",
            nodes.c.entity_id,
            nodes.c.label,
            nodes.c.node_id,
            sqlite_where=current_node,
            postgresql_where=current_node,
        )
    Index(f"{PREFIX}nodes_history", nodes.c.entity_id, nodes.c.node_id, nodes.c.valid_from_version)
    Index(f"{PREFIX}nodes_since", nodes.c.entity_id, nodes.c.valid_from_version)
    Index(f"{PREFIX}nodes_until", nodes.c.entity_id, nodes.c.valid_to_version)

    edges = Table(
        f"{PREFIX}edges",
        metadata,
        Column("row_id", RowId, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=False),
        Column("source", String, nullable=False),
        Column("target", String, nullable=False),
        Column("key", String, nullable=False),
        Column("relationship", String, nullable=False),
        Column("type_version", Integer, nullable=True),
        Column("properties", JsonValue, nullable=False),
        *_fact_columns(),
        *_closed_reason("edges", version),
        *_checks("edges"),
    )
    current_edge = edges.c.valid_to_version.is_(None)
    Index(
        f"{PREFIX}edges_current_uq",
        edges.c.entity_id,
        edges.c.source,
        edges.c.target,
        edges.c.key,
        unique=True,
        sqlite_where=current_edge,
        postgresql_where=current_edge,
    )
    Index(
        f"{PREFIX}edges_current_target",
        edges.c.entity_id,
        edges.c.target,
        sqlite_where=current_edge,
        postgresql_where=current_edge,
    )
    Index(
        f"{PREFIX}edges_history",
        edges.c.entity_id,
        edges.c.source,
        edges.c.target,
        edges.c.key,
        edges.c.valid_from_version,
    )
    Index(f"{PREFIX}edges_since", edges.c.entity_id, edges.c.valid_from_version)
    Index(f"{PREFIX}edges_until", edges.c.entity_id, edges.c.valid_to_version)

    commits = Table(
        f"{PREFIX}commits",
        metadata,
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), primary_key=True),
        Column("version", BigInteger, primary_key=True, autoincrement=False),
        Column("run_id", String, nullable=True),
        Column("step", String, nullable=False),
        Column("tool_call", Text, nullable=True),
        Column("source_ref", Text, nullable=True),
        Column("summary", Text, nullable=False),
        Column("committed_at", Timestamp, nullable=False),
        # The key of the controller result the commit applied (see
        # :class:`kgot.persistence.context.Provenance`).
        Column("result_key", Text, nullable=True),
    )
    # One commit per result key: a run resumed after a crash between a commit and its
    # checkpoint finds the commit instead of writing it again.
    keyed = commits.c.result_key.isnot(None)
    Index(
        f"{PREFIX}commits_result_uq",
        commits.c.entity_id,
        commits.c.result_key,
        unique=True,
        sqlite_where=keyed,
        postgresql_where=keyed,
    )
    runs = Table(
        f"{PREFIX}runs",
        metadata,
        Column("run_id", String, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=True),
        Column("question", Text, nullable=False),
        Column("options", JsonbValue, nullable=False),
        Column("status", String(16), nullable=False),
        Column("answer", Text, nullable=True),
        Column("totals", JsonbValue, nullable=True),
        Column("attempts", Integer, nullable=False, server_default=text("1")),
        Column("started_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        Column("finished_at", Timestamp, nullable=True),
        # The process running it (``host boot-id pid start-time``, see
        # :mod:`kgot.persistence.owner`); cleared when the run ends.
        Column("owner", Text, nullable=True),
        *(
            [Column("kind", String(16), nullable=False, server_default=text("'ask'"))]
            if version >= 8
            else []
        ),
    )
    Index(f"{PREFIX}runs_recent", runs.c.started_at)
    Index(f"{PREFIX}runs_entity", runs.c.entity_id, runs.c.started_at)
    if version >= 8:
        Index(f"{PREFIX}commits_run", commits.c.run_id)
    tables = SimpleNamespace(
        metadata=metadata,
        migrations=migrations,
        entities=entities,
        types=types,
        nodes=nodes,
        edges=edges,
        commits=commits,
        runs=runs,
    )
    if version >= 2:
        tables.fact_use, tables.suggestions = _v2_tables(metadata, entities, version)
    if version >= 3:
        tables.run_events = _v3_run_events(metadata, runs)
    return tables


def _v3_run_events(metadata: MetaData, runs: Table) -> Table:
    """The table migration 3 adds: each run's trace events, in order.

    The primary key ``(run_id, seq)`` is also the index a run's events are read by. Events
    are stored and shown, never compared, so JSON text is enough on both databases (and
    cheaper to write than JSONB).
    """
    return Table(
        f"{PREFIX}run_events",
        metadata,
        Column(
            "run_id",
            ForeignKey(runs.c.run_id, ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        # 1, 2, 3, … within the run; a resumed run goes on after its last number.
        Column("seq", Integer, primary_key=True, autoincrement=False),
        Column("kind", String(32), nullable=False),  # the event's ``type``
        Column("event", JsonValue, nullable=False),
        Column("recorded_at", Timestamp, nullable=False),
    )


def _v2_tables(metadata: MetaData, entities: Table, version: int) -> tuple[Table, Table]:
    """The store's tables migration 2 adds: fact use (reads must not write fact versions) and
    the curation queue (as of schema ``version``: 9 adds its decisions)."""
    fact_use = Table(
        f"{PREFIX}fact_use",
        metadata,
        Column(
            "entity_id",
            ForeignKey(entities.c.id, ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        Column("kind", String(4), primary_key=True),
        # A node's id; an edge's JSON array [source, target, key] (see facts.stored_key).
        Column("fact_key", Text, primary_key=True),
        Column("strength", Float, nullable=False, server_default=text("0")),
        Column("uses", Integer, nullable=False, server_default=text("0")),
        Column("good", Integer, nullable=False, server_default=text("0")),
        Column("bad", Integer, nullable=False, server_default=text("0")),
        Column("last_used_at", Timestamp, nullable=True),
        CheckConstraint("kind IN ('node', 'edge')", name="kgot_fact_use_kind"),
        CheckConstraint("strength >= 0 AND strength <= 1", name="kgot_fact_use_strength"),
    )
    suggestion_kinds = sql_list(SUGGESTION_KINDS)
    statuses = sql_list(SUGGESTION_STATUSES)
    suggestions = Table(
        f"{PREFIX}suggestions",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("payload", JsonValue, nullable=False),
        # sha256 of the payload's canonical JSON: finds an equal suggestion without comparing
        # payloads one by one.
        Column("payload_key", String(64), nullable=False),
        Column("score", Float, nullable=False),
        Column("status", String(8), nullable=False),
        Column("created_at", Timestamp, nullable=False),
        Column("decided_at", Timestamp, nullable=True),
        # Who decided it and why ({"by": "person" | "model:NAME", "reason": "…"}), or NULL.
        *([Column("decision", JsonValue, nullable=True)] if version >= 9 else []),
        CheckConstraint(f"kind IN ({suggestion_kinds})", name="kgot_suggestions_kind"),
        CheckConstraint(f"status IN ({statuses})", name="kgot_suggestions_status"),
        # Never reuse an id: "accept 7" must not reach a suggestion made after 7 was deleted.
        sqlite_autoincrement=True,
    )
    Index(
        f"{PREFIX}suggestions_payload",
        suggestions.c.entity_id,
        suggestions.c.kind,
        suggestions.c.payload_key,
    )
    Index(f"{PREFIX}suggestions_status", suggestions.c.entity_id, suggestions.c.status)
    return fact_use, suggestions


def _closed_reason(table: str, version: int) -> list[Any]:
    """The ``closed_reason`` column (migration 2) and its check."""
    if version < 2:
        return []
    return [
        Column("closed_reason", String(16), nullable=True),
        CheckConstraint(
            closed_reason_check(CLOSE_REASONS if version >= 7 else CLOSE_REASONS_V2),
            name=f"kgot_{table}_closed_reason",
        ),
    ]


def sql_list(values: tuple[str, ...]) -> str:
    """``values`` as the quoted list of a CHECK constraint's ``IN (…)``."""
    return ", ".join(f"'{value}'" for value in values)


def closed_reason_check(allowed: tuple[str, ...] = CLOSE_REASONS) -> str:
    """The ``closed_reason`` column's check, allowing ``allowed`` (default: every reason)."""
    reasons = sql_list(allowed)
    return f"closed_reason IS NULL OR closed_reason IN ({reasons})"


def _fact_columns() -> list[Column]:
    """Provenance, trust and lifetime columns shared by node and edge rows."""
    return [
        Column("confidence", Float, nullable=False),
        Column("source_kind", String(16), nullable=False),
        Column("run_id", String, nullable=True),
        Column("step", String, nullable=True),
        Column("tool_call", Text, nullable=True),
        Column("source_ref", Text, nullable=True),
        Column("corroborations", Integer, nullable=False, server_default=text("1")),
        Column("created_at", Timestamp, nullable=False),  # first version of this fact
        Column("updated_at", Timestamp, nullable=False),  # this version
        Column("reinforced_at", Timestamp, nullable=True),
        Column("expires_at", Timestamp, nullable=True),
        Column("valid_from_version", BigInteger, nullable=False),
        Column("valid_to_version", BigInteger, nullable=True),
        Column("superseded_by", BigInteger, nullable=True),
        Column("superseded_at", Timestamp, nullable=True),
        # Distinct sources that confirmed the fact after the one that wrote it: a JSON list of
        # {source_ref, run_id, source_kind, confidence, at}; `corroborations` counts 1 + these.
        Column("sources", JsonValue, nullable=True),
    ]


def _checks(table: str) -> list[CheckConstraint]:
    kinds = sql_list(SOURCE_KINDS)
    return [
        CheckConstraint("confidence >= 0 AND confidence <= 1", name=f"kgot_{table}_confidence"),
        CheckConstraint(f"source_kind IN ({kinds})", name=f"kgot_{table}_source_kind"),
    ]


TABLES = define_tables(MetaData())
