"""Listings fit 80 columns, one line per item, and count in good English (issue 27, item 11):
`kgot types list` of twenty types with long descriptions, `kgot runs list`, `entities list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.cli.layout import Column, plural, table_lines
from kgot.persistence import open_store
from tests.support.command_line import run_cli

LONG = (
    "A description long enough to wrap many times in a narrow column, as the starter types' "
    "descriptions do: it names what the type means, when to use it and what not to confuse "
    "it with, in a few sentences."
)


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "80")
    database = str(tmp_path / "kgot.db")
    monkeypatch.setenv("KGOT_DB", database)
    return database


def _widths_and_count(out: str) -> tuple[int, int]:
    lines = out.splitlines()
    return max(len(line) for line in lines), len(lines)


@pytest.mark.slow
def test_types_list_is_one_line_per_type_at_80_columns(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    types = [
        {"kind": "node", "name": f"Kind{n:02}", "description": f"{n}: {LONG}"} for n in range(10)
    ]
    types.append({"kind": "node", "name": "Short", "description": "Fits."})
    with open_store(db) as store:
        store.create_entity("acme")
        catalog = store.type_catalog("acme")
    path = tmp_path / "types.json"
    path.write_text(json.dumps(types), encoding="utf-8")
    assert run_cli(capsys, "types", "add", "--entity", "acme", str(path))[0] == 0
    code, out, err = run_cli(capsys, "types", "list", "--entity", "acme")
    assert code == 0, err
    every = len(catalog.node_types) + len(catalog.edge_types) + len(types)
    assert every >= 20
    widest, count = _widths_and_count(out)
    assert widest <= 80
    # Each type once, on a line of its own; two sections, each a title and a heading, a blank
    # line between them and the note on where the cut descriptions are whole.
    assert count == every + 2 * 2 + 1 + 2, out
    lines = out.splitlines()
    assert lines[0] == f"{len(catalog.node_types) + len(types)} node types:"
    for type_def in (*catalog.node_types.values(), *catalog.edge_types.values()):
        assert sum(line.split()[:1] == [type_def.name] for line in lines) == 1, type_def.name
    kind03 = next(line for line in lines if line.startswith("Kind03 "))
    assert "3: A description long" in kind03 and kind03.endswith("…")
    assert next(line for line in lines if line.startswith("Short ")).endswith("Fits.")
    assert "`kgot types show NAME` prints a type whole" in lines[-1]
    # The whole description is one command away.
    code, shown, _ = run_cli(capsys, "types", "show", "--entity", "acme", "Kind03", "--json")
    assert json.loads(shown)["description"] == f"3: {LONG}"


@pytest.mark.slow
def test_runs_list_is_one_line_per_run_at_80_columns(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        store.create_entity("acme-portfolio-2024")
        for n in range(5):
            run_id = f"{n}0000000-aaaa-4aaa-8aaa-00000000000{n}"
            store.start_run(run_id, f"Question {n}: {LONG}", "acme-portfolio-2024", {})
            store.finish_run(run_id, "answered", f"Answer {n}: {LONG}", {})
    code, out, err = run_cli(capsys, "runs", "list")
    assert code == 0, err
    widest, count = _widths_and_count(out)
    assert widest <= 80 and count == 1 + 5, out
    for n, line in enumerate(reversed(out.splitlines()[1:])):
        run_id, status, _day, _time, entity, *_ = line.split()
        assert run_id == f"{n}0000000" and status == "answered"
        assert entity == "acme-portfolio-…"  # the name whole is in `runs show`
        assert f"Question {n}: A" in line and f"Answer {n}" in line


@pytest.mark.slow
def test_entities_list_is_one_line_per_entity(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(db) as store:
        for name in ("acme", "globex"):
            store.create_entity(name, LONG)
    code, out, err = run_cli(capsys, "entities", "list")
    assert code == 0, err
    widest, count = _widths_and_count(out)
    assert widest <= 80 and count == 3, out
    assert [line.split()[0] for line in out.splitlines()] == ["entity", "acme", "globex"]


@pytest.mark.slow
def test_counts_are_singular_for_one(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        store.create_entity("acme")
    graph = tmp_path / "one.json"
    graph.write_text(
        json.dumps(
            {
                "directed": True,
                "multigraph": True,
                "graph": {},
                "nodes": [{"id": "a", "label": "Thing", "name": "A"}],
                "edges": [],
            }
        ),
        encoding="utf-8",
    )
    assert run_cli(capsys, "graph", "import", "--entity", "acme", str(graph))[0] == 0
    exported = tmp_path / "out.json"
    _code, _out, err = run_cli(capsys, "graph", "export", "--entity", "acme", str(exported))
    assert f"wrote {exported}: 1 node, 0 edges of entity 'acme'" in err
    _code, _out, err = run_cli(capsys, "graph", "convert", str(graph), str(tmp_path / "o.ttl"))
    assert ": 1 node, 0 edges" in err
    _code, out, _err = run_cli(capsys, "entities", "show", "acme")
    assert "facts        1 node, 0 edges" in out


def test_plural_and_table_lines() -> None:
    assert [plural(n, "node") for n in (0, 1, 2, 1200)] == [
        "0 nodes",
        "1 node",
        "2 nodes",
        "1,200 nodes",
    ]
    assert plural(1, "retry", "retries") == "1 retry" and plural(3, "retry", "retries") == (
        "3 retries"
    )
    columns = [Column("id", clip=False), Column("question", share=2), Column("answer", share=1)]
    rows = [["0123456789abcdef", "q " * 100, "short"], ["x", "why?", "a\nb\x1b[31m " * 30]]
    lines = table_lines(columns, rows, 60)
    assert all(len(line) <= 60 for line in lines) and len(lines) == 3
    assert lines[1].startswith("0123456789abcdef  ") and lines[1].endswith("short")
    assert "\x1b" not in lines[2] and "\n" not in lines[2] and lines[2].endswith("…")
