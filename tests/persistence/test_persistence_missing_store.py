"""Commands that only look never create a store: a mistyped KGOT_DB / --db is reported, not
silently replaced by a new, empty database (and new directories) at the wrong place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.persistence import StoreNotFoundError, open_store


@pytest.fixture
def kgot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys):
    """Run the CLI with KGOT_DB at a file (and directory) that does not exist."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user config
    missing = tmp_path / "typo" / "kgot.db"
    monkeypatch.setenv("KGOT_DB", str(missing))

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    run.missing = missing  # type: ignore[attr-defined]
    return run


def test_entities_list_on_a_missing_store_creates_nothing(kgot) -> None:
    code, out, _err = kgot("entities", "list")
    assert code == 0 and "no entities yet" in out and str(kgot.missing) in out
    assert kgot("entities", "list", "--json")[:2] == (0, "[]\n")
    assert not kgot.missing.parent.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("entities", "show", "acme"),
        ("entities", "history", "acme", "n1"),
        ("entities", "delete", "acme", "--yes"),
        ("graph", "stats", "--entity", "acme"),
        ("graph", "export", "--entity", "acme", "OUT"),
        ("graph", "import", "--entity", "acme", "IN"),
        ("types", "list", "--entity", "acme"),
        ("types", "add", "TYPES", "--entity", "acme"),
        ("ask", "--model", "MODEL", "--entity", "acme", "What is known?"),
    ],
)
def test_entity_commands_on_a_missing_store(kgot, tmp_path: Path, args: tuple[str, ...]) -> None:
    graph_file = tmp_path / "in.json"
    graph_file.write_text('{"directed": true, "multigraph": true, "nodes": [], "edges": []}')
    types_file = tmp_path / "types.yaml"
    types_file.write_text("{kind: node, name: Fund, description: A fund.}")
    model = Path(__file__).resolve().parents[2] / "examples" / "quickstart.json"
    replaced = {
        "OUT": str(tmp_path / "out.json"),
        "IN": str(graph_file),
        "TYPES": str(types_file),
        "MODEL": f"scripted:{model}",
    }
    code, _out, err = kgot(*(replaced.get(a, a) for a in args))
    assert code == 2, err
    assert err.count("\n") == 1 and "no entity named 'acme'" in err
    assert f"no kgot database at {kgot.missing}" in err
    assert "kgot entities create acme" in err
    assert not kgot.missing.parent.exists()
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    "args", [("types", "list"), ("types", "show", "Person"), ("types", "remove", "Person")]
)
def test_type_commands_on_a_missing_store(kgot, args: tuple[str, ...]) -> None:
    code, _out, err = kgot(*args)
    assert code == 2 and err.count("\n") == 1
    assert f"no kgot database at {kgot.missing}" in err and "KGOT_DB" in err
    assert not kgot.missing.parent.exists()


@pytest.mark.slow
def test_creating_commands_still_create_the_store(kgot) -> None:
    kgot.missing.parent.mkdir()  # a folder named by KGOT_DB / --db must exist already
    assert kgot("entities", "create", "acme")[0] == 0
    assert kgot.missing.is_file()
    _code, out, _ = kgot("entities", "list", "--json")
    assert [entity["name"] for entity in json.loads(out)] == ["acme"]


def test_open_store_without_create_on_sqlite(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "kgot.db"
    with pytest.raises(StoreNotFoundError, match="no kgot database at"):
        open_store(str(missing), create=False)
    assert not missing.parent.exists()
    missing.parent.mkdir()
    open_store(str(missing)).close()  # the default creates it
    open_store(str(missing), create=False).close()  # and now it opens


@pytest.mark.slow
@pytest.mark.postgres
def test_open_store_without_create_on_postgres(fresh_postgres_url: str) -> None:
    import psycopg

    schema = fresh_postgres_url.rsplit("schema=", 1)[1]
    with pytest.raises(StoreNotFoundError, match="no kgot database at"):
        open_store(fresh_postgres_url, create=False)
    with psycopg.connect(fresh_postgres_url.split("?", maxsplit=1)[0]) as connection:
        found = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    assert found == (0,)  # not even the schema was created
    open_store(fresh_postgres_url).close()
    open_store(fresh_postgres_url, create=False).close()
