"""Versioned schema migrations: a small runner instead of Alembic.

Why not Alembic: kgot ships its migrations inside the package and applies them on every
``open_store`` (there is no separate deploy step), for two dialects, with no autogenerate. What
that needs is small: an ordered list of steps, a table recording which ran, and one lock so two
processes opening a fresh database at once do not both migrate. Each step runs in the same
transaction as its record (SQLite and PostgreSQL both have transactional DDL), so a failed step
leaves the database as it was.

Rules for adding a migration: append a :class:`Migration` with the next number; never edit or
reorder applied ones; steps may only add (tables, nullable columns, indexes, rows) or move data
without dropping it. ``test_migrations_run_once_and_the_tables_match_the_schema`` in
``tests/persistence/test_persistence_open.py`` fails when the tables in
:mod:`kgot.persistence.schema` drift from what the migrations create.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources

from sqlalchemy import Connection, Engine, MetaData, func, insert, select, text

from kgot.errors import StoreError
from kgot.persistence.engine import read_transaction, write_transaction
from kgot.persistence.schema import TABLES, define_tables
from kgot.persistence.target import StoreNotFoundError, StoreTarget

# pg_advisory_xact_lock key: "kgot" in ASCII. Held until the migrating transaction ends.
_PG_LOCK_KEY = 0x6B676F74


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_create_tables(connection: Connection) -> None:
    # Version 1 is `define_tables` as first released; later changes are switched on by
    # `release`, so this step keeps creating exactly version 1.
    define_tables(MetaData(), release=1).metadata.create_all(connection)


def _v2_seed_types(connection: Connection) -> None:
    from kgot.persistence.catalog import TypeSpec, parse_type_document, specs_from_document
    from kgot.persistence.types_store import insert_type_rows

    text_ = resources.files("kgot.persistence").joinpath("seed_types.yaml").read_text("utf-8")
    specs: list[TypeSpec] = specs_from_document(
        parse_type_document(text_, "seed_types.yaml"), "seed_types.yaml"
    )
    insert_type_rows(
        connection, specs, entity_id=None, created_by="system", justification="kgot starter type"
    )


_JSON_TEXT_COLUMNS = {
    "kgot_nodes": ("properties",),
    "kgot_edges": ("properties",),
    "kgot_types": ("properties_schema", "example", "source_types", "target_types"),
}


def _v3_json_text_and_sources(connection: Connection) -> None:
    # PostgreSQL: JSONB -> JSON keeps every value (the text JSONB prints parses back to the
    # same data); from now on values are stored as written. SQLite stored text all along.
    if connection.dialect.name == "postgresql":
        for table, columns in _JSON_TEXT_COLUMNS.items():
            changes = ", ".join(
                f"ALTER COLUMN {column} TYPE json USING {column}::json" for column in columns
            )
            connection.exec_driver_sql(f"ALTER TABLE {table} {changes}")
    for table in ("kgot_nodes", "kgot_edges"):
        connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN sources JSON")


def _v4_result_keys_and_run_owners(connection: Connection) -> None:
    connection.exec_driver_sql("ALTER TABLE kgot_commits ADD COLUMN result_key TEXT")
    connection.exec_driver_sql("ALTER TABLE kgot_runs ADD COLUMN owner TEXT")
    tables = define_tables(MetaData(), release=4)
    for index in tables.commits.indexes:
        index.create(connection)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1, "create entities, types, nodes, edges, commits and runs tables", _v1_create_tables
    ),
    Migration(2, "install the global starter types", _v2_seed_types),
    Migration(
        3,
        "store properties as JSON text on PostgreSQL too; record corroborating sources",
        _v3_json_text_and_sources,
    ),
    Migration(
        4,
        "record the controller result each commit applied and the process each run belongs to",
        _v4_result_keys_and_run_owners,
    ),
)
LATEST = MIGRATIONS[-1].version


def migrate(engine: Engine, target: StoreTarget, *, create: bool = True) -> int:
    """Bring the database to :data:`LATEST`; return the version it was at before.

    Args:
        create: whether a database without kgot's tables may be set up; ``False`` raises
            :class:`StoreNotFoundError` for it before anything (a schema included) is created.

    Raises:
        StoreNotFoundError: no kgot tables and ``create`` is false.
        StoreError: the database is newer than this kgot, or a migration failed.
    """
    current = _read_version(engine, target)
    if current == LATEST:
        return current
    if current == 0 and not create:
        raise store_not_found(target)
    if current > LATEST:
        raise _too_new(current, target)
    with write_transaction(engine, target) as connection:
        if not target.is_sqlite:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            if target.schema:
                connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"')
        TABLES.migrations.create(connection, checkfirst=True)
        before = _applied_version(connection)  # again, under the lock
        if before > LATEST:
            raise _too_new(before, target)
        for migration in MIGRATIONS:
            if migration.version <= before:
                continue
            try:
                migration.apply(connection)
            except StoreError:
                raise
            except Exception as error:
                raise StoreError(
                    f"migration {migration.version} ({migration.description}) failed on "
                    f"{target.display}: {error} (the database was left unchanged)"
                ) from error
            connection.execute(
                insert(TABLES.migrations).values(
                    version=migration.version,
                    description=migration.description,
                    applied_at=datetime.now(UTC),
                )
            )
        return before


def _read_version(engine: Engine, target: StoreTarget) -> int:
    with read_transaction(engine, target) as connection:
        if not connection.dialect.has_table(connection, TABLES.migrations.name):
            return 0
        return _applied_version(connection)


def _applied_version(connection: Connection) -> int:
    return int(connection.execute(select(func.max(TABLES.migrations.c.version))).scalar() or 0)


def store_not_found(target: StoreTarget) -> StoreNotFoundError:
    return StoreNotFoundError(
        f"no kgot database at {target.display} yet (commands that add something, such as "
        "`kgot entities create NAME`, create it; check KGOT_DB / --db if you expected one there)"
    )


def _too_new(version: int, target: StoreTarget) -> StoreError:
    return StoreError(
        f"database {target.display} has schema version {version}, newer than this kgot "
        f"supports ({LATEST}); upgrade kgot"
    )
