"""Bad input and unusable stores are refused as the README's table of exit codes says: exit 2,
one line naming the problem and the fix (issue 27, items 7 and 12). Each case goes through the
real `kgot` entry point and checks that nothing was written."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from kgot.persistence import open_store
from tests.support.command_line import refused, run_cli

BIG = 2**70


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No user config, no KGOT_DB, kgot's default data folder under ``tmp_path``."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("KGOT_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def acme_db(home: Path) -> str:
    """A store holding entity acme (version 0)."""
    database = str(home / "kgot.db")
    with open_store(database) as store:
        store.create_entity("acme")
    return database


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _graph_file(path: Path, value: object) -> Path:
    document = {
        "directed": True,
        "multigraph": True,
        "graph": {},
        "nodes": [{"id": "a", "label": "Thing", "name": "A", "count": value}],
        "edges": [],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("too-big-integer", f"property `count` is an integer of {len(str(BIG))} digits"),
        ("taken-name", "entity 'acme' already exists (pick another name"),
        ("taken-name-other-case", "names are unique without regard to case"),
        ("query-missing-file", "missing.json: no such file"),
        ("convert-missing-file", "missing.json: no such file"),
        ("stats-missing-file", "missing.json: no such file"),
        ("import-missing-file", "missing.json: no such file"),
        ("export-missing-folder", "directory"),
    ],
)
def test_bad_input_exits_2(
    case: str, message: str, acme_db: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = _graph_file(home / "big.json", BIG)
    argv = {
        "too-big-integer": ["graph", "import", "--entity", "acme", str(big), "--db", acme_db],
        "taken-name": ["entities", "create", "acme", "--db", acme_db],
        "taken-name-other-case": ["entities", "create", "ACME", "--db", acme_db],
        "query-missing-file": ["graph", "query", "missing.json", "result = 1"],
        "convert-missing-file": ["graph", "convert", "missing.json", "out.ttl"],
        "stats-missing-file": ["graph", "stats", "missing.json"],
        "import-missing-file": [
            "graph", "import", "--entity", "acme", "missing.json", "--db", acme_db,
        ],
        "export-missing-folder": [
            "graph", "export", "--entity", "acme", str(home / "no" / "out.json"), "--db", acme_db,
        ],
    }[case]  # fmt: skip
    refused(run_cli(capsys, *argv), message)
    assert not (home / "out.ttl").exists() and not (home / "no").exists()
    with open_store(acme_db) as store:
        assert [e.name for e in store.list_entities()] == ["acme"]
        assert store.get_entity("acme").version == 0  # the import wrote nothing


@pytest.mark.parametrize("case", ["closed-port", "directory", "not-a-database", "file-as-folder"])
@pytest.mark.parametrize(
    "command",
    [("entities", "list"), ("entities", "create", "acme"), ("types", "list"), ("runs", "list")],
)
def test_an_unusable_store_exits_2(
    case: str, command: tuple[str, ...], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "folder").mkdir()
    (home / "notes.db").write_bytes(b"these bytes are not a SQLite database\n" * 100)
    (home / "plain").write_text("a file\n", encoding="utf-8")
    location, message = {
        "closed-port": (
            f"postgresql://kgot@127.0.0.1:{_closed_port()}/kgot",
            "check the server is running and the URL in KGOT_DB / --db is right",
        ),
        "directory": (str(home / "folder"), "is a directory, not a database file"),
        "not-a-database": (str(home / "notes.db"), "is not a kgot database"),
        "file-as-folder": (str(home / "plain" / "kgot.db"), "is a file, not a folder"),
    }[case]
    refused(run_cli(capsys, *command, "--db", location), message)
    assert list((home / "folder").iterdir()) == []
    assert (home / "notes.db").read_bytes().startswith(b"these bytes")
    assert not (home / "data").exists()  # no store made elsewhere instead


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="no sysfs here to refuse a file")
@pytest.mark.parametrize("command", [("entities", "create", "acme"), ("types", "add", "TYPES")])
def test_a_store_without_permission_exits_2(
    command: tuple[str, ...], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sysfs refuses new files to every user, root included.
    types = home / "types.yaml"
    types.write_text("{kind: node, name: Fund, description: A fund.}", encoding="utf-8")
    argv = [str(types) if arg == "TYPES" else arg for arg in command]
    refused(
        run_cli(capsys, *argv, "--db", "/sys/kgot-test.db"),
        "cannot create database /sys/kgot-test.db: Permission denied",
    )


@pytest.mark.slow
def test_an_explicit_store_in_a_missing_folder_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = home / "nonexistent" / "dir" / "kgot.db"
    types = home / "types.yaml"
    types.write_text("{kind: node, name: Fund, description: A fund.}", encoding="utf-8")
    for argv in (
        ["entities", "create", "acme", "--db", str(typo)],
        ["types", "add", str(types), "--db", str(typo)],
    ):
        refused(
            run_cli(capsys, *argv),
            f"the folder {typo.parent} for database {typo} does not exist; create it first",
        )
    monkeypatch.setenv("KGOT_DB", str(typo))
    refused(run_cli(capsys, "entities", "create", "acme"), "correct KGOT_DB / --db")
    assert not (home / "nonexistent").exists()
    # Reading commands say there is no store there, and make none either.
    code, out, err = run_cli(capsys, "entities", "list")
    assert code == 0 and f"no kgot database at {typo}" in out, err
    assert not (home / "nonexistent").exists()
    # Once the folder exists, the same command creates the store.
    typo.parent.mkdir(parents=True)
    assert run_cli(capsys, "entities", "create", "acme")[0] == 0
    assert typo.is_file() and typo.stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_the_default_store_folder_is_still_created(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not (home / "data").exists()
    code, _out, err = run_cli(capsys, "entities", "create", "acme")
    assert code == 0, err
    assert (home / "data" / "kgot" / "kgot.db").is_file()
    assert os.stat(home / "data" / "kgot" / "kgot.db").st_mode & 0o777 == 0o600
