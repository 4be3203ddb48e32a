"""Versioned schema migrations: a small runner instead of Alembic.

Why not Alembic: kgot ships its migrations inside the package and applies them on every
``open_store`` (there is no separate deploy step), for two dialects, with no autogenerate. What
that needs is small: an ordered list of steps, a table recording which ran, and one lock so two
processes opening a fresh database at once do not both migrate. Each step runs in the same
transaction as its record (SQLite and PostgreSQL both have transactional DDL), so a failed step
leaves the database as it was.

The steps come from every registered table set (:mod:`kgot.persistence.table_sets`): the
store's own (:data:`CORE_TABLE_SET`: the graph, runs and upkeep rows) and those of the packages
that keep tables of their own (the aides, the advisor, the memory's embeddings), loaded from
their entry points before anything is migrated. Rules for adding a migration: give it the next
version of the whole store in the set of the package that owns the tables; never edit or
reorder applied ones; steps may only add (tables, nullable columns, indexes, rows) or move data
without dropping it. ``test_migrations_run_once_and_the_tables_match_the_schema`` in
``tests/persistence/test_persistence_open.py`` fails when the tables the code defines drift
from what the migrations create, and ``test_persistence_schema_dump.py`` pins the DDL a fresh
store gets on both databases.

Before 1.0 no database compatibility is promised: the migrations of the development versions
were squashed into migration 1. Those versions recorded their steps in
``kgot_schema_migrations`` (this runner uses ``kgot_migrations``), so such a database is
recognised and refused with what to do, never misread as a current one nor changed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, MetaData, Table, func, insert, select, text, update

from kgot.errors import StoreError
from kgot.persistence.engine import read_transaction, write_transaction
from kgot.persistence.schema import (
    CLOSE_REASONS_V2,
    SCHEMA_VERSION,
    TABLES,
    JsonValue,
    closed_reason_check,
    define_tables,
)
from kgot.persistence.table_sets import (
    CORE_OWNER,
    Migration,
    SchemaStep,
    TableSet,
    installed_table_sets,
    order_table_sets,
    schema_steps,
)
from kgot.persistence.target import StoreNotFoundError, StoreTarget

if TYPE_CHECKING:
    from kgot.persistence.catalog import TypeSpec

# Where development versions before the squash recorded their migrations (see above).
PRE_RELEASE_TABLE = "kgot_schema_migrations"
# pg_advisory_xact_lock key: "kgot" in ASCII. Held until the migrating transaction ends.
_PG_LOCK_KEY = 0x6B676F74


def starter_specs() -> list[TypeSpec]:
    """The global starter types of ``seed_types.yaml``."""
    return list(_starter_specs())


@functools.cache
def _starter_specs() -> tuple[TypeSpec, ...]:
    """Parsed once per process: every new store installs them."""
    from kgot.persistence.catalog import parse_type_document, specs_from_document

    text_ = resources.files("kgot.persistence").joinpath("seed_types.yaml").read_text("utf-8")
    return tuple(
        specs_from_document(parse_type_document(text_, "seed_types.yaml"), "seed_types.yaml")
    )


def seed_starter_types(connection: Connection, *, schema_version: int = SCHEMA_VERSION) -> None:
    """Install the global starter types of ``seed_types.yaml`` (``created_by: system``) into
    a database at ``schema_version`` (before migration 2 without their upkeep settings)."""
    from kgot.persistence.types_store import insert_type_rows

    insert_type_rows(
        connection,
        starter_specs(),
        entity_id=None,
        created_by="system",
        justification="kgot starter type",
        table=define_tables(MetaData(), version=schema_version).types,
    )


def _v1_initial_schema(connection: Connection) -> None:
    # Frozen: the tables as migration 1 made them (`define_tables` adds later versions' parts
    # only for version >= 2).
    define_tables(MetaData(), version=1).metadata.create_all(connection)
    seed_starter_types(connection, schema_version=1)


def _v2_memory_upkeep(connection: Connection) -> None:
    """Add what memory upkeep needs, dropping and rewriting nothing.

    New nullable columns (``closed_reason`` on fact rows, ``upkeep`` on type rows), the fact
    use and suggestion tables, and the starter types' upkeep settings (the embedding table of
    the same version is the memory's part of it: ``kgot.memory.schema``). The settings are
    written into the starter types' existing rows (a NULL column filled, not a new type
    version): their schemas are unchanged, so every fact stays valid against the version it
    was checked with, and a fresh database gets the same rows as an upgraded one. Starter
    types a user replaced (a newer version not ``created_by: system``) are left alone.
    """
    for table in (TABLES.nodes.name, TABLES.edges.name):
        connection.exec_driver_sql(
            f"ALTER TABLE {table} ADD COLUMN closed_reason VARCHAR(16) "
            f"CONSTRAINT {table}_closed_reason CHECK ({closed_reason_check(CLOSE_REASONS_V2)})"
        )
    connection.exec_driver_sql(f"ALTER TABLE {TABLES.types.name} ADD COLUMN upkeep JSON")
    added = define_tables(MetaData(), version=2)
    added.fact_use.create(connection)
    added.suggestions.create(connection)
    types = TABLES.types
    for spec in starter_specs():
        connection.execute(
            update(types)
            .where(
                types.c.entity_id.is_(None),
                types.c.kind == spec.kind,
                types.c.name == spec.name,
                types.c.created_by == "system",
                types.c.retired_at.is_(None),
                types.c.upkeep.is_(None),
            )
            .values(upkeep=spec.upkeep.stored(spec.kind))
        )


def _v3_run_events(connection: Connection) -> None:
    """Add the table each run's trace events are kept in; runs recorded before it have
    none."""
    define_tables(MetaData(), version=3).run_events.create(connection)


def _v7_forgotten_facts(connection: Connection) -> None:
    """Let a fact row close as ``forgotten`` (`kgot memory forget`): the ``closed_reason``
    checks of both fact tables allow one more value. No row is read or rewritten.

    PostgreSQL replaces the constraint. SQLite cannot alter a constraint, so the check's text
    in the tables' stored definitions is replaced the way SQLite documents for loosening a
    CHECK constraint (``writable_schema``, then a new ``schema_version`` so every connection
    reads the definitions again): every stored row satisfies the wider check, so no row needs
    to be checked or copied. A definition whose check is not the one migration 2 wrote is
    refused (the transaction leaves the database as it was).
    """
    old, new = closed_reason_check(CLOSE_REASONS_V2), closed_reason_check()
    tables = (TABLES.nodes.name, TABLES.edges.name)
    if connection.dialect.name != "sqlite":
        for table in tables:
            connection.exec_driver_sql(
                f"ALTER TABLE {table} DROP CONSTRAINT {table}_closed_reason, "
                f"ADD CONSTRAINT {table}_closed_reason CHECK ({new})"
            )
        return
    version = int(connection.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    connection.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        for table in tables:
            sql = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"),
                {"t": table},
            ).scalar()
            if not isinstance(sql, str) or sql.count(old) != 1:
                raise StoreError(
                    f"migration 7 cannot find the closed_reason check of {table} that "
                    "migration 2 wrote; the database was left unchanged"
                )
            connection.execute(
                text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' AND name = :t"),
                {"sql": sql.replace(old, new), "t": table},
            )
        connection.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    finally:
        connection.exec_driver_sql("PRAGMA writable_schema = OFF")


def _v8_run_kinds(connection: Connection) -> None:
    """Record what kind of run each run is (every run before was a question: ``ask``) and
    index the commits by the run that wrote them (``kgot runs show`` lists a run's commits)."""
    connection.exec_driver_sql(
        f"ALTER TABLE {TABLES.runs.name} ADD COLUMN kind VARCHAR(16) DEFAULT 'ask' NOT NULL"
    )
    next(
        index
        for index in define_tables(MetaData(), version=8).commits.indexes
        if index.name == f"{TABLES.commits.name}_run"
    ).create(connection)


def _v9_suggestion_decisions(connection: Connection) -> None:
    """Record who decided a suggestion and why (a person, or the model adjudicating)."""
    column_type = JsonValue.compile(dialect=connection.dialect)
    connection.exec_driver_sql(
        f"ALTER TABLE {TABLES.suggestions.name} ADD COLUMN decision {column_type}"
    )


def _v11_nodes_by_type(connection: Connection) -> None:
    """Index current nodes by type, for reads of one type's nodes."""
    next(
        index
        for index in define_tables(MetaData(), version=11).nodes.indexes
        if index.name == f"{TABLES.nodes.name}_current_label"
    ).create(connection)


CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "create entities, types, nodes, edges, commits and runs tables; install the global "
        "starter types",
        _v1_initial_schema,
    ),
    # The memory's embedding table is the rest of version 2 ("…, embeddings").
    Migration(
        2,
        "memory upkeep: why each fact closed, type upkeep settings, fact use, suggestions",
        _v2_memory_upkeep,
    ),
    Migration(3, "run events: each run's trace, step by step", _v3_run_events),
    # Versions 4 to 6 belong to other packages' table sets (see kgot.persistence.table_sets).
    Migration(7, "forgotten facts: a fact may close as forgotten", _v7_forgotten_facts),
    Migration(8, "run kinds: ingestions and aide cycles are runs; commits by run", _v8_run_kinds),
    Migration(
        9, "suggestion decisions: who decided a suggestion and why", _v9_suggestion_decisions
    ),
    # Version 10 is the memory's search index (kgot.memory.schema).
    Migration(11, "nodes by type: an index of current nodes by type", _v11_nodes_by_type),
)
if CORE_MIGRATIONS[-1].version != SCHEMA_VERSION:  # a step added without moving the version
    raise RuntimeError("schema.SCHEMA_VERSION must be the store's own last migration's version")


def _core_tables(metadata: MetaData, version: int) -> dict[str, Table]:
    tables = vars(define_tables(metadata, version=version))
    return {name: table for name, table in tables.items() if isinstance(table, Table)}


# The store's own tables: graphs, types, commits, runs, run events and upkeep rows.
CORE_TABLE_SET = TableSet(CORE_OWNER, _core_tables, CORE_MIGRATIONS)


@functools.cache
def table_sets() -> tuple[TableSet, ...]:
    """Every table set: the store's own first, then each installed one after those it
    requires (loaded from entry points once per process).

    Raises:
        ConfigError: an entry point is broken, or a set is registered twice or misses one it
            requires.
    """
    return order_table_sets(CORE_TABLE_SET, installed_table_sets())


@functools.cache
def migrations() -> tuple[SchemaStep, ...]:
    """The store's versions 1 to :func:`latest_version`, each with its sets' parts.

    Raises:
        ConfigError: a version has no installed part (see
            :func:`kgot.persistence.table_sets.schema_steps`).
    """
    return schema_steps(table_sets())


def latest_version() -> int:
    """The schema version a store opened by this installation is brought to."""
    return migrations()[-1].version


def define_store_tables(metadata: MetaData, version: int | None = None) -> dict[str, Table]:
    """Every set's tables as of ``version`` (default: the latest) on ``metadata``, by table
    name, parents before children."""
    version = latest_version() if version is None else version
    tables: dict[str, Table] = {}
    for table_set in table_sets():
        tables.update({t.name: t for t in table_set.define(metadata, version).values()})
    return tables


@functools.cache
def store_tables() -> Mapping[str, Table]:
    """Every table of the store as this installation defines it, by table name."""
    return define_store_tables(MetaData())


def owned_tables() -> tuple[Table, ...]:
    """The tables the store keeps for other packages, parents before children."""
    own = {table.name for table in TABLES.metadata.tables.values()}
    return tuple(t for t in store_tables().values() if t.name not in own)


def migrate(
    engine: Engine, target: StoreTarget, *, create: bool = True, through: int | None = None
) -> int:
    """Bring the database to :func:`latest_version`; return the version it was at before.

    Args:
        create: whether a database without kgot's tables may be set up; ``False`` raises
            :class:`StoreNotFoundError` for it before anything (a schema included) is created.
        through: stop after this version instead (tests build older databases with it; a
            store left there is brought up to date by the next :func:`migrate`).

    Raises:
        StoreNotFoundError: no kgot tables and ``create`` is false.
        StoreError: the database is newer than this kgot, was written by a development version
            before the migrations were squashed, or a migration failed.
        ConfigError: the installed table sets are incomplete (nothing was read or changed).
    """
    steps = migrations()
    latest = steps[-1].version
    wanted = latest if through is None else min(through, latest)
    current = _read_version(engine, target)
    if current >= wanted and current <= latest:
        return current
    if current == 0 and not create:
        raise store_not_found(target)
    if current > latest:
        raise _too_new(current, latest, target)
    with write_transaction(engine, target) as connection:
        if not target.is_sqlite:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            if target.schema:
                connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"')
        if not connection.dialect.has_table(connection, TABLES.migrations.name):
            _refuse_pre_release(connection, target)  # again, under the lock
            TABLES.migrations.create(connection)
        before = _applied_version(connection)
        if before > latest:
            raise _too_new(before, latest, target)
        for step in steps:
            if step.version <= before or step.version > wanted:
                continue
            try:
                step.apply(connection)
            except StoreError:
                raise
            except Exception as error:
                raise StoreError(
                    f"migration {step.version} ({step.description}) failed on "
                    f"{target.display}: {error} (the database was left unchanged)"
                ) from error
            connection.execute(
                insert(TABLES.migrations).values(
                    version=step.version,
                    description=step.description,
                    applied_at=datetime.now(UTC),
                )
            )
        return before


def _read_version(engine: Engine, target: StoreTarget) -> int:
    with read_transaction(engine, target) as connection:
        if not connection.dialect.has_table(connection, TABLES.migrations.name):
            _refuse_pre_release(connection, target)
            return 0
        return _applied_version(connection)


def _refuse_pre_release(connection: Connection, target: StoreTarget) -> None:
    """Raise for a database without kgot's version table that has the one of a development
    version from before the squash, before anything is created in it."""
    if not connection.dialect.has_table(connection, PRE_RELEASE_TABLE):
        return
    version = connection.exec_driver_sql(f"SELECT max(version) FROM {PRE_RELEASE_TABLE}").scalar()
    raise StoreError(
        f"database {target.display} was written by a development version of kgot (pre-release "
        f"schema {version or 0}) that this kgot cannot open: export what you need with the kgot "
        "that wrote it (`kgot graph export --entity NAME FILE`), then delete the database or "
        "point --db / KGOT_DB elsewhere, and import it there (`kgot graph import --entity NAME "
        "FILE`)"
    )


def _applied_version(connection: Connection) -> int:
    return int(connection.execute(select(func.max(TABLES.migrations.c.version))).scalar() or 0)


def store_not_found(target: StoreTarget) -> StoreNotFoundError:
    return StoreNotFoundError(
        f"no kgot database at {target.display} yet (commands that add something, such as "
        "`kgot entities create NAME`, create it; check KGOT_DB / --db if you expected one there)"
    )


def _too_new(version: int, latest: int, target: StoreTarget) -> StoreError:
    return StoreError(
        f"database {target.display} has schema version {version}, newer than this kgot "
        f"supports ({latest}); upgrade kgot"
    )
