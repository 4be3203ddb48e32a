"""Opening stores: locations, migrations, schema drift, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, inspect, text

from kgot.errors import StoreError
from kgot.persistence import open_store
from kgot.persistence.migrations import (
    PRE_RELEASE_TABLE,
    define_store_tables,
    latest_version,
    migrate,
    migrations,
    store_tables,
)
from kgot.persistence.target import parse_target


def test_sqlite_paths_and_urls_are_accepted(tmp_path: Path) -> None:
    target = parse_target(str(tmp_path / "a" / "kgot.db"))
    assert target.is_sqlite and target.sqlite_path == tmp_path / "a" / "kgot.db"
    assert target.checkpoint_path == tmp_path / "a" / "kgot.checkpoints.db"
    assert parse_target(f"sqlite:///{tmp_path}/b.db").sqlite_path == tmp_path / "b.db"
    (tmp_path / "deep" / "dir").mkdir(parents=True)  # only kgot's default folder is made
    store = open_store(str(tmp_path / "deep" / "dir" / "kgot.db"))
    store.create_entity("alice")
    store.close()
    database = tmp_path / "deep" / "dir" / "kgot.db"
    assert database.is_file()
    assert database.stat().st_mode & 0o777 == 0o600  # every tenant's facts: owner only


def test_postgres_urls_mask_passwords_and_take_a_schema() -> None:
    target = parse_target(
        "postgres://ann:s3cret@db.example:5433/kg?schema=tenant_a&sslmode=disable"
    )
    assert target.dialect == "postgresql" and target.schema == "tenant_a"
    assert "s3cret" not in target.display
    assert target.display == (
        "postgresql://ann:***@db.example:5433/kg?sslmode=disable (schema tenant_a)"
    )
    assert "schema=" not in target.url.render_as_string(hide_password=False)
    conninfo = target.libpq_conninfo()
    assert "options=-csearch_path%3Dtenant_a" in conninfo and "s3cret" in conninfo


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("", "the store location is empty"),
        (":memory:", "an in-memory store cannot be shared"),
        ("mysql://x@y/z", "unsupported store URL scheme 'mysql'"),
        ("postgresql://u@h/db?schema=1bad", "invalid PostgreSQL schema name '1bad'"),
    ],
)
def test_bad_locations_are_one_line_errors(location: str, message: str) -> None:
    with pytest.raises(StoreError, match=message) as raised:
        open_store(location)
    assert "\n" not in str(raised.value)


def test_an_unreachable_server_is_named_with_the_password_masked() -> None:
    with pytest.raises(StoreError) as raised:
        open_store("postgresql://kgot:hunter2@127.0.0.1:1/kgot")
    message = str(raised.value)
    assert message.startswith("cannot use database postgresql://kgot:***@127.0.0.1:1/kgot:")
    assert "hunter2" not in message and "\n" not in message
    assert "check the server is running" in message


def test_unusable_sqlite_files_are_one_line_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_bytes(b"these are not the bytes of a SQLite database\n" * 100)
    with pytest.raises(StoreError, match="is not a kgot database") as raised:
        open_store(str(garbage))
    assert "\n" not in str(raised.value)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match=f"{blocker} is a file, not a folder"):
        open_store(str(blocker / "sub" / "kgot.db"))


def test_migrations_run_once_and_the_tables_match_the_schema(store_url: str) -> None:
    open_store(store_url).close()
    store = open_store(store_url)  # second open: nothing to do
    engine = store._context.engine
    with engine.connect() as connection:
        applied = (
            connection.execute(text("SELECT version FROM kgot_migrations ORDER BY version"))
            .scalars()
            .all()
        )
        assert applied == [m.version for m in migrations()] and applied[-1] == latest_version()
        seeded = connection.execute(
            text("SELECT count(*) FROM kgot_types WHERE created_by = 'system'")
        ).scalar()
        assert seeded == len(store.type_catalog())
        # Drift guard: every table and column the code uses exists as the migrations made it.
        inspector = inspect(connection)
        for table in store_tables().values():
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            assert columns == {c.name for c in table.columns}, table.name
            assert {i.name for i in table.indexes} <= index_names(connection, table.name)
    store.close()


def index_names(connection, table: str) -> set[str]:
    # Inspector cannot reflect the expression indexes on SQLite; ask the catalogs directly.
    if connection.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"
    else:
        query = (
            "SELECT indexname FROM pg_indexes WHERE tablename = :t AND schemaname = "
            "current_schema()"
        )
    return set(connection.execute(text(query), {"t": table}).scalars())


@pytest.mark.slow
def test_a_database_newer_than_this_kgot_is_refused(sqlite_url: str) -> None:
    open_store(sqlite_url).close()
    engine = create_engine(f"sqlite:///{sqlite_url}")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO kgot_migrations (version, description, applied_at) "
                "VALUES (:v, 'from the future', CURRENT_TIMESTAMP)"
            ),
            {"v": latest_version() + 1},
        )
    engine.dispose()
    newer = latest_version() + 1
    with pytest.raises(StoreError, match=f"schema version {newer}, newer than this kgot"):
        open_store(sqlite_url)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_fresh_database_gets_every_migration(kind: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    open_store(url).close()
    engine = create_engine(parse_target(url).url)
    try:
        with engine.connect() as connection:
            if kind == "postgres":
                connection.exec_driver_sql(f"SET search_path TO {parse_target(url).schema}")
            applied = connection.execute(
                text("SELECT version, description FROM kgot_migrations")
            ).all()
            assert sorted(tuple(row) for row in applied) == [
                (m.version, m.description) for m in migrations()
            ]
            assert [m.version for m in migrations()] == list(range(1, latest_version() + 1))
            inspector = inspect(connection)
            assert not inspector.has_table(PRE_RELEASE_TABLE)
            assert set(store_tables()) <= set(inspector.get_table_names())
            if kind == "postgres":
                # Facts and types are JSON text (values read back as written), not JSONB.
                for table, column in [
                    ("kgot_nodes", "properties"),
                    ("kgot_edges", "properties"),
                    ("kgot_nodes", "sources"),
                    ("kgot_types", "properties_schema"),
                    ("kgot_types", "example"),
                ]:
                    kinds = {c["name"]: str(c["type"]) for c in inspector.get_columns(table)}
                    assert kinds[column] == "JSON", (table, column)
    finally:
        engine.dispose()


def make_pre_release_database(url: str, version: int) -> None:
    """A database as a development version before the squash left it: today's tables (what
    its migration 4 made), versions recorded in ``kgot_schema_migrations``, one entity."""
    from kgot.persistence.engine import create_store_engine, write_transaction

    target = parse_target(url)
    if target.sqlite_path is not None:
        target.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_store_engine(target)
    try:
        with write_transaction(engine, target) as connection:
            if target.schema:
                connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"')
            metadata = MetaData()
            define_store_tables(metadata)
            metadata.create_all(connection)
            connection.exec_driver_sql(f"ALTER TABLE kgot_migrations RENAME TO {PRE_RELEASE_TABLE}")
            for number in range(1, version + 1):
                connection.execute(
                    text(
                        f"INSERT INTO {PRE_RELEASE_TABLE} (version, description, applied_at) "
                        "VALUES (:v, 'old', CURRENT_TIMESTAMP)"
                    ),
                    {"v": number},
                )
            connection.exec_driver_sql(
                "INSERT INTO kgot_entities (name, description, version, created_at, updated_at) "
                "VALUES ('old', '', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("version", [2, 4])
def test_a_database_of_a_development_version_is_refused_and_left_alone(
    kind: str, version: int, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    make_pre_release_database(url, version)
    for create in (True, False):
        with pytest.raises(StoreError) as raised:
            open_store(url, create=create)
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(f"database {parse_target(url).display} was written by a ")
        assert f"development version of kgot (pre-release schema {version})" in message
        assert "kgot graph export --entity NAME FILE" in message
        assert "delete the database or point --db / KGOT_DB elsewhere" in message
    from kgot.persistence.engine import create_store_engine, read_transaction

    target = parse_target(url)
    engine = create_store_engine(target)
    try:
        with read_transaction(engine, target) as connection:
            assert not connection.dialect.has_table(connection, "kgot_migrations")
            assert connection.exec_driver_sql("SELECT name FROM kgot_entities").scalars().all() == [
                "old"
            ]
    finally:
        engine.dispose()


def test_the_cli_refuses_a_development_database_in_one_line(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from kgot.cli.main import main

    make_pre_release_database(sqlite_url, 4)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code = main(["entities", "list", "--db", sqlite_url])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("kgot: error: database ") and "pre-release schema 4" in err


OPEN_AND_COUNT = (
    "import sys; from kgot.persistence import open_store; "
    "s = open_store(sys.argv[1]); print(len(s.type_catalog())); s.close()"
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_processes_opening_a_new_database_migrate_it_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_COUNT, url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    counts = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        counts.append(int(out))
    store = open_store(url)
    assert counts == [len(store.type_catalog())] * 2  # starter types seeded exactly once
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_database_at_migration_1_is_upgraded_keeping_its_facts(
    kind: str, request: pytest.FixtureRequest
) -> None:
    from kgot.graph_model import Changeset, Node
    from kgot.persistence import Provenance
    from kgot.persistence.engine import create_store_engine

    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    target = parse_target(url)
    if target.sqlite_path is not None:
        target.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_store_engine(target)
    try:
        migrate(engine, target, through=1)  # the frozen version-1 tables, starter types
        with engine.connect() as connection:
            if target.schema:
                connection.exec_driver_sql(f'SET search_path TO "{target.schema}"')
            v1 = inspect(connection)
            assert "closed_reason" not in {c["name"] for c in v1.get_columns("kgot_nodes")}
            assert not v1.has_table("kgot_suggestions")
    finally:
        engine.dispose()

    store = open_store(url)  # migrates 1 -> the latest
    try:
        store.create_entity("old")
        session = store.session("old")
        session.commit(
            Changeset(added_nodes=(Node("ada", "Person", {"name": "Ada"}),)),
            Provenance(run_id="", step="test"),
        )
        session.commit(
            Changeset(changed_nodes=(Node("ada", "Person", {"name": "Ada L."}),)),
            Provenance(run_id="", step="test"),
        )
        history = session.node_history("ada")
        assert [entry["closed_reason"] for entry in history] == ["changed", None]
        person = store.type_catalog().get("node", "Person")
        assert person is not None and person.upkeep.functional == ("born", "died")
        with store._context.engine.connect() as connection:
            applied = connection.execute(
                text("SELECT version FROM kgot_migrations ORDER BY version")
            ).scalars()
            assert list(applied) == list(range(1, latest_version() + 1))
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_database_at_migration_2_is_upgraded_keeping_its_runs(
    kind: str, request: pytest.FixtureRequest
) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from kgot.persistence.engine import create_store_engine, write_transaction
    from kgot.persistence.schema import define_tables

    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    target = parse_target(url)
    if target.sqlite_path is not None:
        target.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_store_engine(target)
    now = datetime.now(UTC)
    try:
        migrate(engine, target, through=2)  # every part of versions 1 and 2
        with write_transaction(engine, target) as connection:
            v2_runs = define_tables(MetaData(), version=2).runs
            connection.execute(
                insert(v2_runs).values(
                    run_id="old-run",
                    question="Before events were kept?",
                    options={},
                    status="answered",
                    answer="yes",
                    started_at=now,
                    updated_at=now,
                    finished_at=now,
                )
            )
            assert not inspect(connection).has_table("kgot_run_events")
    finally:
        engine.dispose()

    store = open_store(url)  # migrates 2 -> the latest
    try:
        old = store.get_run("old-run")
        assert old is not None and old.answer == "yes"
        assert store.run_events("old-run") == []  # recorded before events were kept
        assert store.append_run_events("old-run", [{"type": "run_started"}]) == 1
        assert store.run_events("old-run") == [{"type": "run_started"}]
        with store._context.engine.connect() as connection:
            applied = connection.execute(
                text("SELECT version FROM kgot_migrations ORDER BY version")
            ).scalars()
            assert list(applied) == list(range(1, latest_version() + 1))
    finally:
        store.close()
