"""Database engines and transactions, with the few per-dialect choices kgot depends on.

SQLite: WAL journal (readers never block the writer), foreign keys on, a 30 s busy timeout, and
write transactions opened with ``BEGIN IMMEDIATE`` so two writers queue for the lock at the
start instead of one failing half-way with "database is locked". PostgreSQL: reads that must see
one consistent snapshot (a whole graph) run at REPEATABLE READ; writers serialise per entity with
``SELECT … FOR UPDATE`` on the entity row (see :mod:`kgot.persistence.session`).

Driver failures become one-line :class:`~kgot.errors.StoreError` s; those caused only by other
transactions (a lock held too long, a serialization failure, a deadlock) are
:class:`StoreBusyError` s, which a caller may retry.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from kgot.errors import StoreError
from kgot.persistence import storable
from kgot.persistence.target import StoreTarget

BUSY_TIMEOUT_MS = 30_000
_WRITE = "kgot_write"
# PostgreSQL's answers that end a transaction only because of other transactions, so that the
# same work run again may well succeed: serialization_failure, deadlock_detected,
# lock_not_available.
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})


class StoreBusyError(StoreError):
    """Other transactions turned this one away for now: SQLite stayed locked past the busy
    timeout, or PostgreSQL ended it as a serialization failure, a deadlock or a lock it could
    not get. Nothing it did was kept, so the same work may simply be tried again (callers that
    retry recognise it by this type; the message alone reads like any other store error)."""


def create_store_engine(target: StoreTarget) -> Engine:
    """An engine for ``target`` (no connection is made yet).

    Every text it sends is made storable first (no NUL, no lone surrogate: see
    :mod:`kgot.persistence.storable`), JSON columns' text included, on both databases.
    """
    if target.is_sqlite:
        engine = create_engine(
            target.url,
            # The pool hands a connection to one thread at a time, so sharing across threads
            # (the controller commits from worker threads) is safe.
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
            json_serializer=storable.dumps,
        )
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    else:
        # Every statement is planned for its own parameters (plan_cache_mode): psycopg
        # prepares a statement run five times, and PostgreSQL would then plan it once for any
        # parameters; a generic plan cannot see which entity or type a statement reads, nor
        # that a list of 500 ids is selective. A write's lookups ran 100 times slower on such
        # plans (700 ms instead of 7 for one read of 500 nodes' keys). Statements stay
        # prepared, so batches of inserts are still parsed once.
        options = ["-c plan_cache_mode=force_custom_plan"]
        if target.schema:
            options.append(f"-c search_path={target.schema}")
        connect_args: dict[str, Any] = {"connect_timeout": 10, "options": " ".join(options)}
        engine = create_engine(
            target.url,
            connect_args=connect_args,
            pool_pre_ping=True,
            json_serializer=storable.dumps,
        )
    storable.install(engine)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite so `begin` below decides how to BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _enter_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")
        # In WAL mode NORMAL never corrupts the file; a power cut may lose the last commits.
        # FULL (one extra fsync per commit) would be needed to rule that out, see
        # docs/persistence.md for the trade-off measured on the commit benchmark.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Overwrite deleted content (a deleted entity's facts, superseded pages) instead of
        # leaving it readable in free pages of the file; see docs/persistence.md for its cost.
        cursor.execute("PRAGMA secure_delete=ON")
    finally:
        cursor.close()


def _enter_wal(cursor: Any) -> None:
    """Switch the file to WAL, waiting for other processes doing the same.

    Two processes opening a new store at once both switch it; SQLite answers "database is
    locked" at once to the second (the busy timeout does not cover a journal-mode change), so
    it is retried here for as long as the busy timeout would have waited.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_on_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(_WRITE, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def write_transaction(engine: Engine, target: StoreTarget) -> Iterator[Connection]:
    """A transaction that will write: all of it commits, or none of it on any exception.

    Raises:
        StoreError: the database could not be reached or stayed locked past the busy timeout.
    """
    with translate_errors(target), engine.connect() as connection:
        connection.execution_options(**{_WRITE: True})
        with connection.begin():
            yield connection


@contextmanager
def read_transaction(engine: Engine, target: StoreTarget) -> Iterator[Connection]:
    """A read-only transaction that sees one consistent snapshot for all its statements.

    Raises:
        StoreError: the database could not be reached.
    """
    with translate_errors(target), engine.connect() as connection:
        if not target.is_sqlite:
            connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


@contextmanager
def translate_errors(target: StoreTarget) -> Iterator[None]:
    """Turn driver failures that are the user's to fix into one-line :class:`StoreError` s.

    Integrity errors and programming errors pass through: the first are handled where they can
    happen, the second are bugs.
    """
    try:
        yield
    except OperationalError as error:
        if _is_transient(error, target):
            raise StoreBusyError(describe_operational_error(error, target)) from None
        raise StoreError(describe_operational_error(error, target)) from None
    except DBAPIError as error:
        if _is_not_a_database(error):
            raise StoreError(
                f"{target.display} is not a kgot database (it is not SQLite; point KGOT_DB or "
                "--db at another file)"
            ) from None
        raise


def _is_transient(error: OperationalError, target: StoreTarget) -> bool:
    """Whether ``error`` is another transaction's doing rather than the database's state."""
    if target.is_sqlite:
        lowered = str(error.orig).lower()
        return "locked" in lowered or "busy" in lowered
    return getattr(error.orig, "sqlstate", None) in _TRANSIENT_SQLSTATES


def describe_operational_error(error: SQLAlchemyError, target: StoreTarget) -> str:
    detail = str(getattr(error, "orig", error)).strip().splitlines()[0] if str(error) else ""
    lowered = detail.lower()
    if target.is_sqlite:
        if "locked" in lowered or "busy" in lowered:
            return (
                f"database {target.display} stayed locked for {BUSY_TIMEOUT_MS // 1000} s by "
                "another writer (retry, or use PostgreSQL for many concurrent writers)"
            )
        if "unable to open" in lowered or "readonly" in lowered or "read-only" in lowered:
            return (
                f"cannot open database {target.display}: {detail} (check the directory exists "
                "and is writable, or set KGOT_DB / --db to another path)"
            )
        if "not a database" in lowered:
            return (
                f"{target.display} is not a kgot database (it is not SQLite; point KGOT_DB or "
                "--db at another file)"
            )
        return f"database {target.display} failed: {detail}"
    if getattr(getattr(error, "orig", None), "sqlstate", None) in _TRANSIENT_SQLSTATES:
        return (
            f"database {target.display} turned the transaction away because of other writers "
            f"({detail}); nothing of it was kept, try again"
        )
    return (
        f"cannot use database {target.display}: {detail or type(error).__name__} (check the "
        "server is running and the URL in KGOT_DB / --db is right)"
    )


def _is_not_a_database(error: DBAPIError) -> bool:
    return "not a database" in str(getattr(error, "orig", "")).lower()
