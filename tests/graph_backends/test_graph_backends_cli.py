"""`kgot graph convert | query | stats`, including bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.graph_backends import read_graph, write_graph
from kgot.tests.graph_backends.graph_fixtures import people_graph, snapshot
from kgot.tests.support.openai_server import OpenAIServer


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "people.json"
    write_graph(people_graph(), path)
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("suffix", [".graphml", ".ttl", ".nt", ".json"])
def test_convert_between_formats(graph_file, tmp_path, capsys, suffix):
    target = tmp_path / f"converted{suffix}"
    code, _, err = run(["graph", "convert", str(graph_file), str(target)], capsys)
    assert code == 0
    assert err.strip() == f"wrote {target}: 4 nodes, 4 edges"
    assert snapshot(read_graph(target)) == snapshot(people_graph())


def test_stats_prints_counts_per_label_and_relationship(graph_file, capsys):
    code, out, _ = run(["graph", "stats", str(graph_file)], capsys)
    assert code == 0
    assert json.loads(out) == {
        "nodes": 4,
        "edges": 4,
        "nodes_by_label": {"City": 1, "Document": 1, "Person": 2},
        "edges_by_relationship": {"KNEW": 1, "LIVED_IN": 2, "WROTE": 1},
    }


@pytest.mark.slow
def test_query_with_python(graph_file, capsys):
    code, out, _ = run(
        ["graph", "query", str(graph_file), "result = sorted(G.successors('ada'))"], capsys
    )
    assert code == 0
    assert json.loads(out) == ["charles", "london", "note_g"]


@pytest.mark.slow
def test_query_with_sparql_from_a_file(graph_file, tmp_path, capsys):
    query = tmp_path / "q.rq"
    query.write_text("SELECT ?t WHERE { node:ada rel:WROTE ?d . ?d prop:title ?t }")
    code, out, _ = run(["graph", "query", "--backend", "rdf", str(graph_file), f"@{query}"], capsys)
    assert code == 0
    assert json.loads(out) == [{"t": "Note G"}]


@pytest.mark.slow
def test_query_from_standard_input(graph_file, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("result = G.number_of_nodes()"))
    code, out, _ = run(["graph", "query", str(graph_file), "-"], capsys)
    assert code == 0 and json.loads(out) == 4


@pytest.mark.slow
def test_backend_comes_from_the_environment(graph_file, capsys, monkeypatch):
    monkeypatch.setenv("KGOT_BACKEND", "rdf")
    code, out, _ = run(["graph", "query", str(graph_file), "ASK { node:ada ?p ?o }"], capsys)
    assert code == 0 and json.loads(out) is True


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        (["graph", "stats", "{dir}/missing.json"], "missing.json: no such file", 2),
        (["graph", "stats", "{dir}/graph.txt"], "unknown graph format", 2),
        (["graph", "convert", "{file}", "{dir}/out.docx"], "unknown graph format", 2),
        (
            ["graph", "query", "{file}", "SELECT ?x WHERE { ?x ?p ?o }"],
            "for SPARQL pass --backend rdf",
            2,
        ),
        (
            ["graph", "query", "--backend", "rdf", "{file}", "result = list(G)"],
            "for Python pass --backend networkx",
            2,
        ),
        (
            ["graph", "query", "-b", "rdf", "{file}", "SELECT * WHERE { SERVICE <http://x> {} }"],
            "SERVICE",
            2,
        ),
        (["graph", "query", "{file}", "   "], "the query is empty", 2),
        (["graph", "query", "{file}", "@{dir}/none.py"], "cannot read the query file", 2),
        (["graph", "query", "-b", "neo4j", "{file}", "MATCH (n) RETURN n"], "backend", 2),
        (["graph", "query", "{file}", "result = G.nodes['nobody']"], "line 1: KeyError", 2),
    ],
)
def test_bad_input_fails_in_one_line(graph_file, tmp_path, capsys, case):
    argv, fragment, exit_code = case
    argv = [a.replace("{dir}", str(tmp_path)).replace("{file}", str(graph_file)) for a in argv]
    code, out, err = run(argv, capsys)
    assert code == exit_code
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kgot: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err


def test_a_failed_convert_leaves_no_output(tmp_path, capsys):
    source = tmp_path / "broken.ttl"
    source.write_text("<urn:kgot:node:a> <urn:kgot:prop:x> .\n")
    target = tmp_path / "out.json"
    code, _, err = run(["graph", "convert", str(source), str(target)], capsys)
    assert code == 2 and "broken.ttl" in err  # a bad file is bad input
    assert not target.exists()


@pytest.mark.slow
def test_a_cut_result_warns_on_stderr_and_max_items_raises_the_cap(graph_file, capsys):
    code, out, err = run(
        ["graph", "query", str(graph_file), "result = list(range(200_000))"], capsys
    )
    assert code == 0
    assert json.loads(out) == list(range(20_000))
    assert err == (
        "kgot: warning: the result was cut to its first 20,000 items; pass --max-items N for more\n"
    )
    code, out, err = run(
        [
            "graph",
            "query",
            "--max-items",
            "200000",
            str(graph_file),
            "result = list(range(200_000))",
        ],
        capsys,
    )
    assert code == 0 and err == ""
    assert len(json.loads(out)) == 200_000


@pytest.mark.slow
def test_cut_objects_and_sparql_rows_are_flagged_too(graph_file, capsys):
    code, out, err = run(
        ["graph", "query", "--max-items", "3", str(graph_file), "result = {n: 1 for n in G}"],
        capsys,
    )
    assert code == 0 and len(json.loads(out)) == 3 and "cut to its first 3 items" in err
    code, out, err = run(
        [
            "graph",
            "query",
            "-b",
            "rdf",
            "--max-items",
            "2",
            str(graph_file),
            "SELECT ?n WHERE { ?n a ?type }",
        ],
        capsys,
    )
    assert code == 0 and len(json.loads(out)) == 2 and "cut to its first 2 items" in err
    code, out, err = run(
        ["graph", "query", "--max-items", "4", str(graph_file), "result = sorted(G)"], capsys
    )
    assert code == 0 and len(json.loads(out)) == 4 and err == ""  # exactly the cap: not cut


@pytest.fixture
def duplicate_ids(tmp_path: Path) -> Path:
    path = tmp_path / "dup.json"
    path.write_text('{"nodes": [{"id": 1, "label": "T"}, {"id": "1", "label": "T"}]}')
    return path


def test_repeated_ids_stop_convert(duplicate_ids, tmp_path, capsys):
    target = tmp_path / "out.ttl"
    code, out, err = run(["graph", "convert", str(duplicate_ids), str(target)], capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"kgot: error: {duplicate_ids}: nodes[1] repeats the id '1'")
    assert not target.exists()


@pytest.mark.slow
def test_repeated_ids_stop_an_entity_import(duplicate_ids, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    assert run(["entities", "create", "acme"], capsys)[0] == 0
    code, _, err = run(["graph", "import", "--entity", "acme", str(duplicate_ids)], capsys)
    assert code != 0 and "nodes[1] repeats the id '1'" in err
    assert len(err.strip().splitlines()) == 1


def test_repeated_ids_stop_ask_before_any_model_call(duplicate_ids, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with OpenAIServer() as server:  # reachable, so only the graph file can stop the run
        argv = ["ask", "--graph", str(duplicate_ids), "--model", "openai:gpt-4o-mini"]
        code, out, err = run([*argv, "--base-url", server.url, "Who is 1?"], capsys)
        assert server.completions == []
    assert (code, out) == (2, "")
    assert "nodes[1] repeats the id '1'" in err and "Traceback" not in err
