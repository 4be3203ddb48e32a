"""A write turned away because of other transactions is a :class:`StoreBusyError` (a
:class:`StoreError` a caller may retry), not the "check the server is running" of a database
that cannot be used: SQLite locked past the busy timeout, PostgreSQL unable to get the entity's
lock. Nothing of it is written, and the same commit goes through once the other writer is done.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from kgot.errors import StoreError
from kgot.graph_model import Changeset, Node
from kgot.persistence import Provenance, Store, StoreBusyError, engine, open_store
from kgot.tests.persistence.conftest import POSTGRES_URL

_CHANGE = Changeset(added_nodes=(Node("oslo", "Place", {"name": "Oslo"}),))
_PROVENANCE = Provenance(run_id="test", step="test")


def _refused_then_written(store: Store, release: Any, says: str) -> None:
    session = store.session("e")
    with pytest.raises(StoreBusyError, match=says) as raised:
        session.commit(_CHANGE, _PROVENANCE)
    assert isinstance(raised.value, StoreError)
    assert "check the server is running" not in str(raised.value)
    assert session.node_history("oslo") == []
    release()
    assert session.commit(_CHANGE, _PROVENANCE).version == session.version
    assert len(session.node_history("oslo")) == 1


@pytest.mark.slow
def test_sqlite_locked_past_the_busy_timeout_is_busy(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 200)  # read when a connection is made
    with open_store(sqlite_url) as store:
        store.create_entity("e")
        holder = sqlite3.connect(sqlite_url, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process's write transaction
            _refused_then_written(store, lambda: holder.execute("ROLLBACK"), "stayed locked")
        finally:
            holder.close()


@pytest.mark.slow
def test_postgres_lock_not_available_is_busy(postgres_url: str) -> None:
    with open_store(postgres_url) as store:
        store.create_entity("e")
        schema = store.target.schema
        # The store's connections give up on a lock after 200 ms (kgot sets no lock timeout:
        # this stands in for any transaction PostgreSQL turns away because of another one).
        store._context.engine.dispose()

        def impatient(connection: Any, _record: Any) -> None:
            connection.execute("SET lock_timeout = '200ms'")
            connection.commit()

        event.listen(store._context.engine, "connect", impatient)
        holder = psycopg.connect(POSTGRES_URL, options=f"-c search_path={schema}")
        try:
            holder.execute("SELECT version FROM kgot_entities WHERE name = 'e' FOR UPDATE")
            _refused_then_written(store, holder.rollback, "lock timeout.*try again")
        finally:
            holder.close()
