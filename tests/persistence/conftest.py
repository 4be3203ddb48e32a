"""Fixtures for the persistence tests: a fresh store on SQLite and on PostgreSQL.

PostgreSQL runs against ``$KGOT_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/
test``), each test in its own schema that is dropped afterwards; tests skip, saying why, when the
server cannot be reached.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgot.persistence import Store, open_store
from kgot.persistence.engine import write_transaction
from kgot.persistence.migrations import seed_starter_types

POSTGRES_URL = os.environ.get("KGOT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def postgres_unreachable() -> str | None:
    """Why PostgreSQL cannot be used (``None`` when it can); checked once per session."""
    import psycopg

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        return f"PostgreSQL not reachable at {POSTGRES_URL} ({first})"
    return None


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    """A PostgreSQL store URL naming a new, empty schema (dropped after the test)."""
    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"kgot_test_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    drop_schema(schema)


@pytest.fixture(scope="session")
def _shared_postgres_url() -> Iterator[str]:
    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"kgot_test_{uuid.uuid4().hex[:12]}"
    url = f"{POSTGRES_URL}?schema={schema}"
    open_store(url).close()  # created and migrated once per test session
    yield url
    drop_schema(schema)


@pytest.fixture
def postgres_url(_shared_postgres_url: str) -> str:
    """A migrated PostgreSQL store holding only the starter types (emptied before each test:
    creating a schema per test would cost half a second each)."""
    store = open_store(_shared_postgres_url)
    try:
        with write_transaction(store._context.engine, store.target) as connection:
            # DELETE, not TRUNCATE: on tables this small it is many times faster.
            for table in (
                "aide_deliveries",
                "aide_outputs",
                "aide_cycles",
                "aide_items",
                "aide_sources",
                "aides",
                "fact_use",
                "suggestions",
                "embeddings",
                "edges",
                "nodes",
                "commits",
                "runs",
                "types",
                "entities",
            ):
                connection.exec_driver_sql(f"DELETE FROM kgot_{table}")
            seed_starter_types(connection)  # the starter types again
    finally:
        store.close()
    return _shared_postgres_url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    (tmp_path / "store").mkdir(exist_ok=True)  # only kgot's default folder is created for it
    return str(tmp_path / "store" / "kgot.db")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty store, once per database kind."""
    if request.param == "sqlite":
        (tmp_path / "store").mkdir(exist_ok=True)  # only kgot's default folder is created
        yield str(tmp_path / "store" / "kgot.db")
        return
    yield request.getfixturevalue("postgres_url")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()
