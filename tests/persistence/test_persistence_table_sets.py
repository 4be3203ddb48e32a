"""Packages own their tables: table sets registered by entry point, one migration history.

The DDL a fresh store gets is pinned on both databases (``schema/*.txt``, written by
``python -m kgot.tests.persistence.schema_dump`` from the store as kgot made it before the
tables moved to their packages), and a store made by that kgot at version 3 (``schema/
store_v3.sql``) is brought to the same DDL. A new migration changes the pinned DDL on purpose:
run the module again and review the difference.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import (
    Column,
    Connection,
    ForeignKey,
    Integer,
    MetaData,
    Table,
    create_engine,
    func,
    select,
    text,
)

from kgot.errors import ConfigError, EntityNotFoundError
from kgot.persistence import Migration, TableSet, open_store, tables_on_first_use
from kgot.persistence.engine import create_store_engine
from kgot.persistence.migrations import (
    CORE_TABLE_SET,
    latest_version,
    migrate,
    migrations,
    owned_tables,
    store_tables,
    table_sets,
)
from kgot.persistence.table_sets import order_table_sets, schema_steps
from kgot.persistence.target import parse_target
from kgot.tests.persistence.schema_dump import GOLDEN, schema_dump

# The store's history as every kgot before the tables moved recorded it.
HISTORY = [
    (
        1,
        "create entities, types, nodes, edges, commits and runs tables; install the global "
        "starter types",
    ),
    (
        2,
        "memory upkeep: why each fact closed, type upkeep settings, fact use, suggestions, "
        "embeddings",
    ),
    (3, "run events: each run's trace, step by step"),
    (4, "aides: sources, items, cycles, outputs and the delivery log, scoped by entity"),
    (5, "advisor: users, positions, watchlists, briefings, alerts and prices, scoped by entity"),
    (
        6,
        "aide guarantees: item ids unique per source, cycles' live spend and worker, "
        "delivery claims and backoff",
    ),
    (7, "forgotten facts: a fact may close as forgotten"),
    (8, "run kinds: ingestions and aide cycles are runs; commits by run"),
    (9, "suggestion decisions: who decided a suggestion and why"),
    (10, "search index: each current fact's words, by entity"),
    (11, "nodes by type: an index of current nodes by type"),
    (12, "resolution keys: large types' blocks, by entity"),
]


def _dump(url: str) -> tuple[list[str], list[tuple[int, str]]]:
    target = parse_target(url)
    engine = create_engine(target.url)
    try:
        with engine.connect() as connection:
            if target.schema:
                connection.exec_driver_sql(f'SET search_path TO "{target.schema}"')
            return schema_dump(connection), _history(connection)
    finally:
        engine.dispose()


def _history(connection: Connection) -> list[tuple[int, str]]:
    rows = connection.execute(text("SELECT version, description FROM kgot_migrations"))
    return sorted((int(v), str(d)) for v, d in rows)


def _pinned(kind: str) -> list[str]:
    return (GOLDEN / f"{kind}.txt").read_text("utf-8").splitlines()


def test_the_packages_table_sets_are_installed_in_order() -> None:
    owners = [s.owner for s in table_sets()]
    assert owners == ["kgot.persistence", "kgot.aides", "kgot.memory", "kgot.aides.advisor"]
    assert [(s.version, s.description) for s in migrations()] == HISTORY
    assert latest_version() == 12
    names = {t.name for t in owned_tables()}
    assert "kgot_embeddings" in names and "kgot_aide_items" in names
    assert "kgot_advisor_users" in names and "kgot_nodes" not in names
    # The store's own set defines none of them.
    own = CORE_TABLE_SET.define(MetaData(), latest_version()).values()
    assert {t.name for t in own} == {t.name for t in store_tables().values()} - names


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_fresh_store_gets_the_pinned_ddl_and_history(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    open_store(url).close()
    ddl, history = _dump(url)
    assert history == HISTORY
    assert ddl == _pinned(kind)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_store_left_at_an_older_version_is_brought_to_the_pinned_ddl(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    target = parse_target(url)
    if target.sqlite_path is not None:
        target.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_store_engine(target)
    try:
        assert migrate(engine, target, through=3) == 0
        assert migrate(engine, target, through=3) == 3  # nothing left to do up to there
        with engine.connect() as connection:
            if target.schema:
                connection.exec_driver_sql(f'SET search_path TO "{target.schema}"')
            assert _history(connection) == HISTORY[:3]
            tables = set(connection.dialect.get_table_names(connection))
            assert "kgot_run_events" in tables and "kgot_embeddings" in tables
            assert "kgot_aides" not in tables
    finally:
        engine.dispose()
    open_store(url).close()
    assert _dump(url) == (_pinned(kind), HISTORY)


def test_a_store_made_by_kgot_before_the_move_opens_and_works(tmp_path: Path) -> None:
    """``store_v3.sql`` is a store the kgot before this change left at version 3 (before the
    aide tables): the aides', advisor's and store's later steps bring it to today's DDL."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.executescript((GOLDEN / "store_v3.sql").read_text("utf-8"))
    connection.close()
    store = open_store(str(path))
    try:
        store.create_entity("fund")
        from kgot.aides import create_aide
        from kgot.aides.advisor import add_user, users

        create_aide(store, "advisor", entity="fund", program="advisor")
        add_user(store, "advisor", "ada", risk="moderate")
        assert [u.name for u in users(store, "advisor")] == ["ada"]
    finally:
        store.close()
    assert _dump(str(path)) == (_pinned("sqlite"), HISTORY)


@pytest.mark.slow
def test_deleting_an_entity_deletes_its_rows_in_every_package_s_tables(sqlite_url: str) -> None:
    from kgot.aides import create_aide
    from kgot.aides.advisor import add_user

    store = open_store(sqlite_url)
    try:
        for name in ("fund", "other"):
            store.create_entity(name)
            create_aide(store, f"advisor-{name}", entity=name, program="advisor")
            add_user(store, f"advisor-{name}", "ada", risk="moderate")
        with store.read() as connection:
            fund = connection.execute(text("SELECT id FROM kgot_entities WHERE name = 'fund'"))
            fund_id = fund.scalar_one()
            before = _rows_of(connection, fund_id)
        assert before["kgot_aides"] == 1 and before["kgot_advisor_users"] == 1
        store.delete_entity("fund")
        with store.read() as connection:
            assert set(_rows_of(connection, fund_id).values()) == {0}
            assert _rows_of(connection, fund_id + 1)["kgot_advisor_users"] == 1  # the other
    finally:
        store.close()


def _rows_of(connection: Connection, entity_id: int) -> dict[str, int]:
    return {
        table.name: int(
            connection.execute(
                select(func.count()).select_from(table).where(table.c.entity_id == entity_id)
            ).scalar_one()
        )
        for table in store_tables().values()
        if "entity_id" in table.c
    }


def test_store_write_can_lock_an_entity_and_refuses_a_missing_one(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    try:
        store.create_entity("fund")
        with store.write(lock_entity="fund") as connection:
            connection.execute(text("UPDATE kgot_entities SET description = 'locked'"))
        assert store.get_entity("fund").description == "locked"
        with (
            pytest.raises(EntityNotFoundError, match="no entity named 'gone'"),
            store.write(lock_entity="gone") as connection,
        ):
            connection.execute(text("UPDATE kgot_entities SET description = 'no'"))
        assert store.get_entity("fund").description == "locked"  # nothing written
    finally:
        store.close()


def test_a_session_s_transactions_refuse_a_deleted_entity(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    try:
        store.create_entity("fund")
        session = store.session("fund")
        with session.read() as connection:
            assert (
                connection.execute(
                    text("SELECT name FROM kgot_entities WHERE id = :i"), {"i": session.entity_id}
                ).scalar()
                == "fund"
            )
        store.delete_entity("fund")
        for transaction in (session.read, session.write):
            with (
                pytest.raises(EntityNotFoundError, match="no longer exists"),
                transaction(),
            ):
                raise AssertionError("the block must not run for a deleted entity")
    finally:
        store.close()


def _noop(connection: Connection) -> None:
    return None


def _set(owner: str, *versions: int, requires: tuple[str, ...] = ()) -> TableSet:
    steps = tuple(Migration(v, f"{owner} {v}", _noop) for v in versions)
    return TableSet(owner, lambda metadata, version: {}, steps, requires)


def test_a_version_no_installed_set_provides_is_refused_not_skipped() -> None:
    core = _set("kgot.persistence", 1, 2, 3, 7)
    with pytest.raises(ConfigError, match=r"migration 4, 5, 6 of 7 .*reinstall"):
        schema_steps(order_table_sets(core, [_set("kgot.memory", 2)]))
    steps = schema_steps(order_table_sets(core, [_set("b", 4, 6), _set("a", 2, 5)]))
    assert [(s.version, s.description) for s in steps] == [
        (1, "kgot.persistence 1"),
        (2, "kgot.persistence 2, a 2"),  # parts in the sets' order, recorded once
        (3, "kgot.persistence 3"),
        (4, "b 4"),
        (5, "a 5"),
        (6, "b 6"),
        (7, "kgot.persistence 7"),
    ]


def test_table_sets_are_ordered_by_what_they_require_and_checked() -> None:
    core = _set("kgot.persistence", 1)
    ordered = order_table_sets(core, [_set("a", 2, requires=("z",)), _set("z", 3)])
    assert [s.owner for s in ordered] == ["kgot.persistence", "z", "a"]
    with pytest.raises(ConfigError, match="the tables of a need those of z"):
        order_table_sets(core, [_set("a", 2, requires=("z",))])
    with pytest.raises(ConfigError, match="two table sets are registered for a"):
        order_table_sets(core, [_set("a", 2), _set("a", 3)])


def _widgets(metadata: MetaData, version: int) -> dict[str, Table]:
    if version < 9:
        return {}
    entities = metadata.tables["kgot_entities"]
    gadgets = metadata.tables["kgot_gadgets"]
    widget = Table(
        "kgot_widgets",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("entity_id", ForeignKey(entities.c.id)),
        Column("gadget_id", ForeignKey(gadgets.c.id)),
    )
    return {"widgets": widget}


def _gadgets(metadata: MetaData, version: int) -> dict[str, Table]:
    gadget = Table("kgot_gadgets", metadata, Column("id", Integer, primary_key=True))
    return {"gadgets": gadget} if version >= 8 else {}


GADGETS = TableSet("gadgets", _gadgets, (Migration(8, "gadgets", lambda _: None),))
WIDGETS = TableSet(
    "widgets", _widgets, (Migration(9, "widgets", lambda _: None),), requires=("gadgets",)
)


def test_a_package_s_tables_are_defined_when_first_read_and_once() -> None:
    namespace: dict[str, object] = {"__name__": "widget_schema"}
    built: list[int] = []

    def order(tables: dict[str, Table]) -> tuple[str, ...]:
        built.append(1)
        return tuple(tables)

    hook = tables_on_first_use(
        namespace,
        WIDGETS,
        {"WIDGETS": lambda tables: tables["widgets"], "ORDER": order},
        required=(GADGETS,),
    )
    assert "WIDGETS" not in namespace and built == []  # nothing defined before it is read
    widgets = hook("WIDGETS")
    assert isinstance(widgets, Table) and namespace["WIDGETS"] is widgets
    assert namespace["ORDER"] == ("widgets",) and built == [1]  # every name at once
    # Its foreign keys resolve: the store's tables and the required set's are on its MetaData.
    assert {fk.column.table.name for fk in widgets.foreign_keys} == {
        "kgot_entities",
        "kgot_gadgets",
    }
    with pytest.raises(AttributeError, match="'widget_schema' has no attribute '__path__'"):
        hook("__path__")  # what a module does not publish is still missing


def test_a_package_s_lazy_tables_need_the_sets_it_requires() -> None:
    with pytest.raises(ValueError, match="requires the tables of \\['gadgets'\\]"):
        tables_on_first_use({"__name__": "widget_schema"}, WIDGETS, {})


def test_the_packages_publish_their_tables_from_one_metadata_each() -> None:
    from kgot.aides.advisor.schema import ADVISOR_TABLE_ORDER, ADVISOR_TABLES
    from kgot.aides.schema import AIDE_TABLE_ORDER, AIDE_TABLES
    from kgot.memory.schema import EMBEDDINGS

    assert AIDE_TABLE_ORDER[0] == "aides" and AIDE_TABLES.aides.name == "kgot_aides"
    assert ADVISOR_TABLE_ORDER[0] == "advisor_users"
    assert ADVISOR_TABLES.advisor_users.metadata.tables["kgot_aides"] is not AIDE_TABLES.aides
    assert EMBEDDINGS.name == "kgot_embeddings" and "kgot_entities" in EMBEDDINGS.metadata.tables
