"""The DDL of a store as sorted lines, the same on every run: what a fresh store's schema is
pinned to (``schema/sqlite.txt``, ``schema/postgres.txt``).

``python -m kgot.tests.persistence.schema_dump`` writes the pinned files from a fresh store on
SQLite and on PostgreSQL (``$KGOT_TEST_POSTGRES``); run it when a migration changes the schema
on purpose, and review the difference it makes.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import Connection, create_engine, text

GOLDEN = Path(__file__).parent / "schema"


def schema_dump(connection: Connection) -> list[str]:
    """Every table, column, constraint and index of the connection's schema, one per line."""
    if connection.dialect.name == "sqlite":
        rows = connection.execute(
            text(
                "SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
            )
        )
        return [
            f"{kind} {name} on {table}: " + re.sub(r"\s+", " ", sql or "")
            for kind, name, table, sql in rows
        ]
    schema = connection.execute(text("SELECT current_schema()")).scalar_one()
    lines = [
        "column " + " | ".join(str(value) for value in row)
        for row in connection.execute(
            text(
                "SELECT table_name, column_name, data_type, character_maximum_length, "
                "is_nullable, column_default, ordinal_position FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
            )
        )
    ]
    lines += [
        "constraint " + " | ".join(str(value) for value in row)
        for row in connection.execute(
            text(
                "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                "WHERE n.nspname = current_schema() ORDER BY 1, 2"
            )
        )
    ]
    lines += [
        f"index {table} | {name} | " + definition.replace(f"{schema}.", "")
        for table, name, definition in connection.execute(
            text(
                "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() ORDER BY 1, 2"
            )
        )
    ]
    return lines


def _write_pinned() -> None:
    from kgot.persistence import open_store
    from kgot.persistence.target import parse_target

    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kgot.db"
        open_store(str(path)).close()
        engine = create_engine(f"sqlite:///{path}")
        with engine.connect() as connection:
            (GOLDEN / "sqlite.txt").write_text("\n".join(schema_dump(connection)) + "\n")
        engine.dispose()
    server = os.environ.get("KGOT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"kgot_dump_{uuid.uuid4().hex[:12]}"
    url = f"{server}?schema={schema}"
    open_store(url).close()
    engine = create_engine(parse_target(url).url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f'SET search_path TO "{schema}"')
            (GOLDEN / "postgres.txt").write_text("\n".join(schema_dump(connection)) + "\n")
            connection.rollback()
        with engine.begin() as connection:
            connection.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        engine.dispose()
    print(f"wrote {GOLDEN / 'sqlite.txt'} and {GOLDEN / 'postgres.txt'}", file=sys.stderr)


if __name__ == "__main__":
    _write_pinned()
