"""The aide tables (``kgot_aide*``): aides, their sources, items, cycles, outputs and delivery
log, declared here and registered with the store as a table set (entry point ``aides`` of the
group ``kgot.tables``; see :mod:`kgot.persistence.table_sets`). Their rows are read and written
by :mod:`kgot.aides.aide_rows`.

Every row is scoped by its entity and its aide. They were made by migration 4 and changed by
migration 6; those steps live here, with the tables.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.schema import CreateColumn

from kgot.persistence import (
    PREFIX,
    JsonValue,
    Migration,
    TableSet,
    Timestamp,
    define_tables,
    sql_list,
    tables_on_first_use,
)

AIDE_ITEM_STATUSES = ("new", "ingesting", "done", "failed")
# The schema version the aide tables last changed at (their last migration's).
AIDES_VERSION = 6


def define_aide_tables(metadata: MetaData, version: int = AIDES_VERSION) -> dict[str, Table]:
    """The aide tables as of schema ``version`` on ``metadata`` (which holds the store's own
    tables), by short name, parents first: none before migration 4, what migration 6 changes
    in them from version 6 on.

    Every row carries its entity (``entity_id``) and its aide: deleting an aide deletes its
    rows, deleting the entity deletes its aides, and the entity's graph never depends on them.
    An item's id is unique within its source (migration 6; within its aide before, which let
    one feed suppress another's entry by publishing its id), so an item seen before is never
    recorded twice; a delivery key is unique within its output, so nothing is sent twice.

    Migration 6 also adds: a cycle's worker and heartbeat (its spend is written as it happens,
    so a killed cycle is seen and counted) and whether it made a digest; a delivery's claim
    (one worker sends it; the others leave it) and when it may be tried next (backoff).
    """
    if version < 4:
        return {}
    entities = metadata.tables[f"{PREFIX}entities"]
    v6 = version >= 6

    def scoped(name: str, *columns: Any, **options: Any) -> Table:
        return Table(
            f"{PREFIX}{name}",
            metadata,
            Column("id", Integer, primary_key=True),
            Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=False),
            *columns,
            sqlite_autoincrement=True,  # ids are shown and named in commands: never reused
            **options,
        )

    aides = scoped(
        "aides",
        Column("name", String, nullable=False, unique=True),
        Column("program", String(32), nullable=False),
        Column("settings", JsonValue, nullable=False),
        # The process running it (see kgot.persistence.owner): one worker per aide.
        Column("worker", Text, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
    )

    def owned(name: str, *columns: Any) -> Table:
        return scoped(
            name,
            Column("aide_id", ForeignKey(aides.c.id, ondelete="CASCADE"), nullable=False),
            *columns,
        )

    sources = owned(
        "aide_sources",
        Column("kind", String(16), nullable=False),
        Column("spec", JsonValue, nullable=False),
        Column("cursor", JsonValue, nullable=True),
        Column("last_error", Text, nullable=True),
        Column("failures", Integer, nullable=False, server_default=text("0")),  # in a row
        Column("polled_at", Timestamp, nullable=True),
        Column("created_at", Timestamp, nullable=False),
    )
    statuses = sql_list(AIDE_ITEM_STATUSES)
    items = owned(
        "aide_items",
        Column("source_id", ForeignKey(sources.c.id, ondelete="CASCADE"), nullable=True),
        Column("item_id", Text, nullable=False),  # the source's stable id (URL, hash, …)
        Column("title", Text, nullable=False, server_default=""),
        Column("source_ref", Text, nullable=True),
        Column("kind", String(16), nullable=False),
        Column("published_at", Timestamp, nullable=True),
        Column("text", Text, nullable=False),  # kept until done: a failed item is retried
        Column("status", String(16), nullable=False),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("reason", Text, nullable=True),  # why the last attempt failed
        Column("lease_owner", Text, nullable=True),
        Column("lease_expires_at", Timestamp, nullable=True),
        Column("committed_version", BigInteger, nullable=True),
        Column("report", JsonValue, nullable=True),  # what the ingestion did
        Column("cycle_id", Integer, nullable=True),  # the cycle that last worked on it
        Column("created_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        CheckConstraint(f"status IN ({statuses})", name="kgot_aide_items_status"),
    )
    if v6:
        Index(
            f"{PREFIX}aide_items_source_uq",
            items.c.aide_id,
            items.c.source_id,
            items.c.item_id,
            unique=True,
        )
    else:
        Index(f"{PREFIX}aide_items_uq", items.c.aide_id, items.c.item_id, unique=True)
    Index(f"{PREFIX}aide_items_status", items.c.aide_id, items.c.status, items.c.id)
    cycles = owned(
        "aide_cycles",
        Column("started_at", Timestamp, nullable=False),
        Column("finished_at", Timestamp, nullable=True),
        Column("status", String(16), nullable=False),  # running | finished | stopped | failed
        Column("stop_reason", Text, nullable=True),
        Column("items", Integer, nullable=False, server_default=text("0")),  # ingested
        Column("failed", Integer, nullable=False, server_default=text("0")),
        Column("llm_calls", Integer, nullable=False, server_default=text("0")),
        Column("input_tokens", BigInteger, nullable=False, server_default=text("0")),
        Column("output_tokens", BigInteger, nullable=False, server_default=text("0")),
        Column("cost_usd", Float, nullable=True),  # NULL: a model's price is unknown
        Column("duration_s", Float, nullable=False, server_default=text("0")),
        Column("errors", JsonValue, nullable=True),
        Column("report", JsonValue, nullable=True),
        *(
            [
                Column("owner", Text, nullable=True),  # the worker (kgot.persistence.owner)
                Column("heartbeat_at", Timestamp, nullable=True),  # its last spend written
                Column("made_digest", Integer, nullable=False, server_default=text("0")),
            ]
            if v6
            else []
        ),
    )
    Index(f"{PREFIX}aide_cycles_recent", cycles.c.aide_id, cycles.c.started_at)
    outputs = owned(
        "aide_outputs",
        Column("kind", String(16), nullable=False),
        Column("spec", JsonValue, nullable=False),
        Column("created_at", Timestamp, nullable=False),
    )
    deliveries = owned(
        "aide_deliveries",
        Column("output_id", ForeignKey(outputs.c.id, ondelete="CASCADE"), nullable=False),
        Column("delivery_key", Text, nullable=False),
        Column("cycle_id", Integer, nullable=True),
        Column("ok", Integer, nullable=False),  # 1 delivered, 0 failed (retried next cycle)
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("error", Text, nullable=True),
        Column("delivered_at", Timestamp, nullable=False),  # the last try's time
        *(
            [
                # The worker sending it now and until when its claim holds.
                Column("claim_owner", Text, nullable=True),
                Column("claim_expires_at", Timestamp, nullable=True),
                Column("next_attempt_at", Timestamp, nullable=True),  # a failed one's backoff
            ]
            if v6
            else []
        ),
    )
    Index(
        f"{PREFIX}aide_deliveries_uq",
        deliveries.c.output_id,
        deliveries.c.delivery_key,
        unique=True,
    )
    return {
        "aides": aides,
        "aide_sources": sources,
        "aide_items": items,
        "aide_cycles": cycles,
        "aide_outputs": outputs,
        "aide_deliveries": deliveries,
    }


def _v4_aides(connection: Connection) -> None:
    """Add the aide tables (kgot.aides); nothing else changes."""
    for table in _tables_at(4).values():
        table.create(connection)


def _v6_aide_guarantees(connection: Connection) -> None:
    """Item ids unique per source instead of per aide; a cycle's worker, heartbeat and
    whether it made a digest; a delivery's claim and backoff. Columns are added (nullable or
    with a default) and one index is replaced; no row is rewritten. The DDL is compiled from
    the version-6 tables, so it cannot drift from what a fresh database gets."""
    added = _tables_at(6)
    items = added["aide_items"]
    connection.exec_driver_sql(f"DROP INDEX {PREFIX}aide_items_uq")
    next(ix for ix in items.indexes if ix.name == f"{PREFIX}aide_items_source_uq").create(
        connection
    )
    for table, columns in (
        (added["aide_cycles"], ("owner", "heartbeat_at", "made_digest")),
        (added["aide_deliveries"], ("claim_owner", "claim_expires_at", "next_attempt_at")),
    ):
        for name in columns:
            column = CreateColumn(table.c[name]).compile(dialect=connection.dialect)
            connection.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column}")


def _tables_at(version: int) -> dict[str, Table]:
    """The aide tables as migration ``version`` left them (beside the store's own of then)."""
    metadata = MetaData()
    define_tables(metadata, version=version)
    return define_aide_tables(metadata, version)


TABLE_SET = TableSet(
    "kgot.aides",
    define_aide_tables,
    (
        Migration(
            4,
            "aides: sources, items, cycles, outputs and the delivery log, scoped by entity",
            _v4_aides,
        ),
        Migration(
            6,
            "aide guarantees: item ids unique per source, cycles' live spend and worker, "
            "delivery claims and backoff",
            _v6_aide_guarantees,
        ),
    ),
)
if TABLE_SET.version != AIDES_VERSION:  # a migration added without moving the version
    raise RuntimeError("AIDES_VERSION must be the aide tables' last migration's version")


# The aide tables as this kgot uses them, by short name (``AIDE_TABLES.aide_items``), and their
# short names, parents first; defined when first read.
AIDE_TABLES: SimpleNamespace
AIDE_TABLE_ORDER: tuple[str, ...]
__getattr__ = tables_on_first_use(
    globals(),
    TABLE_SET,
    {"AIDE_TABLES": lambda tables: SimpleNamespace(**tables), "AIDE_TABLE_ORDER": tuple},
)
