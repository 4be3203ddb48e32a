"""Graph files: formats, foreign files, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import networkx as nx
import pytest

from kgot.errors import GraphFileError
from kgot.graph_backends import read_graph, write_graph
from kgot.tests.graph_backends.graph_fixtures import people_graph, snapshot


def test_unknown_extension_names_the_known_ones(tmp_path: Path):
    path = tmp_path / "graph.csv"
    path.write_text("a,b\n")
    with pytest.raises(GraphFileError) as caught:
        read_graph(path)
    message = str(caught.value)
    assert "graph.csv" in message and ".graphml" in message and ".ttl" in message
    assert "\n" not in message
    with pytest.raises(GraphFileError):
        write_graph(people_graph(), tmp_path / "out.xlsx")
    assert not (tmp_path / "out.xlsx").exists()


def test_missing_file(tmp_path: Path):
    with pytest.raises(GraphFileError, match="no such file"):
        read_graph(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("bad.json", '{"nodes": [\n  {"id": "a",}\n]}', "line 2, column"),
        ("bad.json", '{"edges": []}', 'expected an object with a "nodes" list'),
        ("bad.json", '{"nodes": [{"label": "X"}]}', 'nodes[0] is not an object with an "id"'),
        (
            "bad.json",
            '{"nodes": [{"id": "a", "label": "X"}], "edges": [{"source": "a", "target": "b"}]}',
            "refers to node 'b'",
        ),
        ("bad.json", '{"nodes": [{"id": "a"}]}', "node 'a': missing `label`"),
        ("bad.graphml", "<graphml><graph>\n<node id='a'></graph>", "line 2, column"),
        ("bad.ttl", "@prefix n: <urn:kgot:node:> .\nn:a a <urn:kgot:type:X> ;\n", "line 3"),
        ("bad.nt", "<urn:kgot:node:a> <urn:x> oops .\n", "line 1"),
        (
            "bad.ttl",
            "<urn:kgot:node:a> <http://www.w3.org/2000/01/rdf-schema#label> 'A' .\n",
            "outside the kgot vocabulary",
        ),
        ("bad.json", b"\xff\xfe not utf-8", "not UTF-8"),
    ],
)
def test_malformed_files_fail_in_one_line(tmp_path: Path, name: str, content, fragment: str):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(GraphFileError) as caught:
        read_graph(path)
    message = str(caught.value)
    assert str(path) in message
    assert fragment in message
    assert "\n" not in message


def test_networkx_node_link_files_with_numeric_ids_are_read(tmp_path: Path):
    graph = nx.MultiDiGraph()
    graph.add_node(1, label="Item")
    graph.add_node(2, label="Item")
    graph.add_edge(1, 2, relationship="NEXT")
    document = nx.node_link_data(graph, edges="links")
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(document))
    read = read_graph(path)
    assert sorted(read.nodes) == ["1", "2"]
    assert list(read.edges(keys=True)) == [("1", "2", "NEXT")]


def test_graphml_keeps_value_types(tmp_path: Path):
    graph = nx.MultiDiGraph()
    graph.add_node("a", label="X", n=1, f=1.0, b=True, s="1", lst=[1, "1"], obj={"k": None})
    graph.add_node("b", label="X", n="mixed type", f=2)
    path = tmp_path / "typed.graphml"
    write_graph(graph, path)
    assert snapshot(read_graph(path)) == snapshot(graph)


def test_writes_are_atomic_and_keep_the_file_mode(tmp_path: Path):
    path = tmp_path / "graph.json"
    write_graph(people_graph(), path)
    os.chmod(path, 0o640)
    before = path.read_bytes()
    bad = nx.MultiDiGraph()
    bad.add_node("x")  # no label: refused before anything is written
    with pytest.raises(GraphFileError, match="missing `label`"):
        write_graph(bad, path)
    assert path.read_bytes() == before
    small = nx.MultiDiGraph()
    small.add_node("only", label="Thing")
    write_graph(small, path)
    assert list(read_graph(path).nodes) == ["only"]
    assert (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json"]  # no temporary left


def test_writing_into_a_missing_directory_fails_cleanly(tmp_path: Path):
    with pytest.raises(GraphFileError, match="does not exist"):
        write_graph(people_graph(), tmp_path / "nowhere" / "graph.ttl")


def test_turtle_output_uses_the_kgot_prefixes(tmp_path: Path):
    path = tmp_path / "graph.ttl"
    write_graph(people_graph(), path)
    text = path.read_text(encoding="utf-8")
    assert "@prefix node: <urn:kgot:node:> ." in text
    assert "node:ada a type:Person" in text
    assert "node:ada rel:WROTE node:note_g ." in text


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        (
            "ids.json",
            '{"nodes": [{"id": 1, "label": "T"}, {"id": "1", "label": "T"}]}',
            "nodes[1] repeats the id '1' of nodes[0]",
        ),
        (
            "same.json",
            '{"nodes": [{"id": "a", "label": "Person"}, {"id": "b", "label": "X"},'
            ' {"id": "a", "label": "City"}]}',
            "nodes[2] repeats the id 'a' of nodes[0]",
        ),
        (
            "keys.json",
            '{"nodes": [{"id": "a", "label": "T"}], "edges": ['
            '{"source": "a", "target": "a", "relationship": "R", "key": "k", "w": 1},'
            '{"source": "a", "target": "a", "relationship": "R", "key": "k", "w": 2}]}',
            "edges[1] repeats the key 'k' of edges[0]",
        ),
        (
            "ids.graphml",
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
            '<key id="l" for="node" attr.name="label" attr.type="string"/>'
            '<graph edgedefault="directed"><node id="a"><data key="l">X</data></node>'
            '<node id="a"><data key="l">Y</data></node></graph></graphml>',
            "<node> #2 repeats the id 'a' of <node> #1",
        ),
        (
            "keys.graphml",
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
            '<key id="l" for="node" attr.name="label" attr.type="string"/>'
            '<key id="r" for="edge" attr.name="relationship" attr.type="string"/>'
            '<graph edgedefault="directed"><node id="a"><data key="l">X</data></node>'
            '<edge id="k" source="a" target="a"><data key="r">R</data></edge>'
            '<edge id="k" source="a" target="a"><data key="r">S</data></edge></graph></graphml>',
            "<edge> #2 repeats the id 'k' of <edge> #1",
        ),
    ],
)
def test_repeated_ids_and_edge_keys_are_refused_not_merged(
    tmp_path: Path, name: str, content: str, fragment: str
):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GraphFileError) as caught:
        read_graph(path)
    message = str(caught.value)
    assert fragment in message and str(path) in message
    assert "\n" not in message


def test_unkeyed_parallel_edges_from_other_tools_are_kept_apart(tmp_path: Path):
    path = tmp_path / "parallel.json"
    path.write_text(
        '{"nodes": [{"id": "a", "label": "T"}, {"id": "b", "label": "T"}], "links": ['
        '{"source": "a", "target": "b", "relationship": "R", "key": 0, "w": 1},'
        '{"source": "a", "target": "b", "relationship": "R", "key": 1, "w": 2}]}'
    )
    graph = read_graph(path)
    assert sorted(graph.edges(keys=True, data="w")) == [("a", "b", "R", 1), ("a", "b", "R~2", 2)]


def test_deeply_nested_json_is_one_line_not_a_crash(tmp_path: Path):
    path = tmp_path / "deep.json"
    path.write_text('{"nodes": [{"id": "a", "label": "T", "x": ' + "[" * 5000 + "]" * 5000 + "}]}")
    with pytest.raises(GraphFileError, match="nests arrays or objects too deeply"):
        read_graph(path)
    deep_value = tmp_path / "deep_value.json"
    deep_value.write_text(
        '{"nodes": [{"id": "a", "label": "T", "x": ' + "[" * 150 + "]" * 150 + "}]}"
    )
    with pytest.raises(GraphFileError, match="more than 100 levels deep"):
        read_graph(deep_value)


def test_undirected_graphs_are_refused_in_every_format(tmp_path: Path):
    json_path = tmp_path / "undirected.json"
    json_path.write_text('{"directed": false, "nodes": [{"id": "a", "label": "T"}]}')
    graphml_path = tmp_path / "undirected.graphml"
    graphml_path.write_text(
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<graph edgedefault="undirected"><node id="a"/></graph></graphml>'
    )
    for path in (json_path, graphml_path):
        with pytest.raises(GraphFileError, match="undirected"):
            read_graph(path)


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path: Path):
    previous = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh.json"
        write_graph(people_graph(), fresh)
        assert fresh.stat().st_mode & 0o777 == 0o640
        os.umask(0o002)
        shared = tmp_path / "shared.ttl"
        write_graph(people_graph(), shared)
        assert shared.stat().st_mode & 0o777 == 0o664
        os.chmod(shared, 0o600)
        write_graph(people_graph(), shared)
        assert shared.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(previous)


def test_turtle_errors_name_the_position_once(tmp_path: Path):
    path = tmp_path / "bad.ttl"
    path.write_text(
        '@prefix node: <urn:kgot:node:> .\nnode:a a <urn:kgot:type:T> ;\n  <urn:x> "open .\n'
    )
    with pytest.raises(GraphFileError) as caught:
        read_graph(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line 3, column ")
    assert message.count("line") == 1 and "invalid Turtle (" in message


@pytest.mark.parametrize(
    ("label", "relationship"),
    [
        ('Person\n"forged" -KNOWS-> "ada"', "KNOWS"),
        ("Person", 'KNOWS-> "x"\n"y" -R'),
        ("Two Words", "KNOWS"),
        ("Person", "tab\there"),
        ('Quote"d', "KNOWS"),
        ("Person", "<angle>"),
    ],
)
def test_labels_and_relationships_are_single_words(tmp_path: Path, label: str, relationship: str):
    graph = nx.MultiDiGraph()
    graph.add_node("a", label=label)
    graph.add_node("b", label="Person")
    graph.add_edge("a", "b", key="k", relationship=relationship)
    with pytest.raises(GraphFileError, match="is not a type name"):
        write_graph(graph, tmp_path / "g.json")
    path = tmp_path / "g.json"
    path.write_text(
        json.dumps(
            {
                "nodes": [{"id": "a", "label": label}, {"id": "b", "label": "Person"}],
                "edges": [{"source": "a", "target": "b", "relationship": relationship}],
            }
        )
    )
    with pytest.raises(GraphFileError, match="is not a type name"):
        read_graph(path)


def test_type_names_allow_what_schemas_and_rdf_use(tmp_path: Path):
    graph = nx.MultiDiGraph()
    for index, label in enumerate(["Person", "schema:CreativeWork", "Città", "P31", "web-page"]):
        graph.add_node(f"n{index}", label=label)
    for target, relationship in (("n1", "works_for"), ("n2", "LIVES_IN"), ("n3", "rdfs:seeAlso")):
        graph.add_edge("n0", target, key=relationship, relationship=relationship)
    for suffix in (".json", ".ttl"):
        write_graph(graph, tmp_path / f"ok{suffix}")
        assert snapshot(read_graph(tmp_path / f"ok{suffix}")) == snapshot(graph)


def test_integers_outside_64_bits_are_refused_with_their_place(tmp_path: Path):
    # Such integers were read, committed, and then broke the run's checkpoint (exit 70).
    wide = tmp_path / "wide.json"
    wide.write_text(
        '{"directed": true, "nodes": [{"id": "a", "label": "Thing", "n": [1, '
        + str(2**64)
        + "]}]}",
        encoding="utf-8",
    )
    with pytest.raises(GraphFileError) as wide_error:
        read_graph(wide)
    assert "node 'a': property `n` at $.n[1] is an integer of 20 digits, outside the signed " in (
        str(wide_error.value)
    )
    huge = tmp_path / "huge.json"
    huge.write_text(
        '{"directed": true, "nodes": [{"id": "a", "label": "Thing", "n": ' + "9" * 5000 + "}]}",
        encoding="utf-8",
    )
    with pytest.raises(GraphFileError) as huge_error:  # was a ValueError: exit 70
        read_graph(huge)
    assert "an integer of 5,000 digits (999999999999…) is outside the signed 64-bit range" in (
        str(huge_error.value)
    )
    edge = tmp_path / "edge.json"
    edge.write_text(
        json.dumps(
            {
                "directed": True,
                "nodes": [
                    {"id": "a", "label": "Thing", "n": 2**63 - 1},
                    {"id": "b", "label": "Thing", "n": -(2**63)},
                ],
                "edges": [],
            }
        ),
        encoding="utf-8",
    )
    graph = read_graph(edge)  # the bounds themselves are fine
    assert graph.nodes["a"]["n"] == 2**63 - 1 and graph.nodes["b"]["n"] == -(2**63)


def test_a_file_breaking_one_rule_many_times_is_one_line_with_the_full_count(tmp_path: Path):
    path = tmp_path / "nolabel.json"
    nodes = [{"id": f"n{i}", "name": "x"} for i in range(1000)]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "edges": []}), encoding="utf-8")
    with pytest.raises(GraphFileError) as error:
        read_graph(path)
    assert str(error.value) == (
        f"{path}: nodes 'n0', 'n1', 'n2' and 997 more: missing `label` (every node needs a "
        "non-empty string label: its type)"
    )
