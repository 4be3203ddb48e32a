"""LangGraph checkpoints next to the store (same kind of database).

* SQLite store ``/path/kgot.db`` → checkpoints in ``/path/kgot.checkpoints.db`` (a sibling file:
  the controller writes a checkpoint after every step, and a separate file keeps those writes
  from queueing behind graph commits for SQLite's single write lock).
* PostgreSQL → the same database, in the store's ``schema`` when the URL names one.

Checkpoint threads are keyed by run id; deleting an entity deletes the checkpoints of its runs,
since they hold that entity's graph state. For the same reason the SQLite checkpoint file is
readable by its owner only, like the store (its ``-wal``/``-shm`` files take the same mode), and
deleted checkpoints are overwritten on disk (``secure_delete``).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.errors import StoreError
from kgot.persistence.target import StoreTarget, parse_target, prepare_sqlite_folder

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


def _open_sqlite(path: Path) -> tuple[Any, BaseCheckpointSaver]:
    """The checkpoint database at ``path`` (created, private, set up) and its saver.

    Raises:
        StoreError: it cannot be created or opened (one line naming it).
        StoreUnusableError: its folder does not exist (and is not kgot's default one).
    """
    import sqlite3

    from kgot.persistence.inline_saver import InlineSqliteSaver

    prepare_sqlite_folder(path, str(path))  # the store's folder: only the default is created
    _make_private(path)
    try:
        connection = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    except sqlite3.Error as error:
        raise StoreError(f"cannot open checkpoint database {path}: {error}") from None
    try:
        saver = InlineSqliteSaver(connection)
        connection.execute("PRAGMA secure_delete=ON")
        saver.setup()
        # WAL without an fsync per commit: a checkpoint survives the process dying (Ctrl-C,
        # a crash); only a power cut may lose the last few. With the default (FULL) every
        # step of a run waited for the disk.
        connection.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as error:
        connection.close()
        raise StoreError(
            f"cannot open checkpoint database {path}: {error} (check the file is a SQLite "
            "database and writable)"
        ) from None
    return connection, saver


@asynccontextmanager
async def open_checkpointer(url: str) -> AsyncIterator[BaseCheckpointSaver]:
    """An async LangGraph checkpointer for the store at ``url``, set up and ready.

    Raises:
        StoreError: the database cannot be reached or opened (one line naming it).
    """
    target = parse_target(url)
    if target.is_sqlite:
        # Opening may wait for another process's write lock (setup's DDL, up to the busy
        # timeout): on a thread, so an event loop serving other calls goes on meanwhile.
        connection, saver = await asyncio.to_thread(_open_sqlite, target.checkpoint_path)
        try:
            yield saver
        finally:
            connection.close()
        return

    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    await _ensure_schema(target)
    try:
        async with AsyncPostgresSaver.from_conn_string(target.libpq_conninfo()) as async_saver:
            await async_saver.setup()
            yield async_saver
    except psycopg.OperationalError as error:
        # Also when the server goes away mid-run: still the user's to fix, in one line.
        raise StoreError(_unreachable(target, error)) from None


async def _ensure_schema(target: StoreTarget) -> None:
    if not target.schema:
        return
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(
            target.url.set(drivername="postgresql").render_as_string(hide_password=False),
            autocommit=True,
        ) as connection:
            await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"')
    except psycopg.OperationalError as error:
        raise StoreError(_unreachable(target, error)) from None
    except psycopg.errors.UniqueViolation:
        pass  # created concurrently by another process


def purge_checkpoints(target: StoreTarget | str, run_ids: Sequence[str]) -> None:
    """Delete the checkpoint threads of ``run_ids`` (missing threads are fine).

    Raises:
        StoreError: the checkpoint database cannot be reached.
    """
    target = parse_target(target) if isinstance(target, str) else target
    if not run_ids:
        return
    if target.is_sqlite:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        path = target.checkpoint_path
        if not path.exists():
            return
        _make_private(path)
        connection = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        try:
            connection.execute("PRAGMA secure_delete=ON")
            saver = SqliteSaver(connection)
            for run_id in run_ids:
                saver.delete_thread(run_id)
        except sqlite3.Error as error:
            raise StoreError(f"cannot delete checkpoints in {path}: {error}") from None
        finally:
            connection.close()
        return

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    try:
        # The connection PostgresSaver.from_conn_string would open, kept typed as one.
        with psycopg.connect(
            target.libpq_conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as pg_connection:
            # No setup(): its CREATE INDEX CONCURRENTLY waits for every open transaction —
            # the caller's own included (delete_entity purges while it holds the entity lock).
            # Without the tables there is nothing to purge.
            row = pg_connection.execute(
                "SELECT to_regclass('checkpoints') IS NOT NULL AS present"
            ).fetchone()
            if not row or not row["present"]:
                return
            postgres_saver = PostgresSaver(pg_connection)
            for run_id in run_ids:
                postgres_saver.delete_thread(run_id)
    except psycopg.OperationalError as error:
        raise StoreError(_unreachable(target, error)) from None


def _make_private(path: Path) -> None:
    """Create ``path`` readable by its owner only, or take group and other access away from an
    existing file (older kgot versions created it with the process umask)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    except OSError:
        return  # unwritable locations are reported by the connection, in one line
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
            if mode & 0o077:
                candidate.chmod(mode & 0o700)
        except OSError:
            continue


def _unreachable(target: StoreTarget, error: Exception) -> str:
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (
        f"cannot use database {target.display}: {detail} (check the server is running and the "
        "URL in KGOT_DB / --db is right)"
    )
