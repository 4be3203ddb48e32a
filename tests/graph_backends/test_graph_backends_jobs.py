"""Graph jobs: the code that runs in the sandbox, and how the host reads what comes back."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np
import pytest

from kgot.errors import ChangesetError, CodeExecutionError, QueryError
from kgot.graph_backends import open_backend
from kgot.graph_backends.graph_state import changeset_problems, normalized_copy
from kgot.graph_backends.jobs import python_job, sparql_job
from kgot.graph_backends.jobs.outcome import describe_exception, is_empty, to_jsonable
from kgot.graph_backends.jobs.rdf_model import graph_ntriples
from kgot.graph_model import Changeset, Edge, Node
from kgot.graph_model.records import (
    diff_graphs,
    edge_record,
    edge_removal_record,
    node_record,
    parse_records,
    records_text,
    removal_record,
)
from kgot.tests.graph_backends.graph_fixtures import people_graph


def records(graph: nx.MultiDiGraph) -> str:
    return records_text(
        [node_record(n, d) for n, d in graph.nodes(data=True)]
        + [edge_record(s, t, k, d) for s, t, k, d in graph.edges(keys=True, data=True)]
    )


def test_results_become_json_data():
    value, cut = to_jsonable(
        {
            "set": {3, 1, 2},
            "tuple": (1, "a"),
            "gen": (i * i for i in range(3)),
            "np": np.arange(3),
            "scalar": np.float64(1.5),
            "nan": float("nan"),
            (1, 2): "tuple key",
            "object": object,
        }
    )
    assert not cut
    assert value["set"] == [1, 2, 3]
    assert value["tuple"] == [1, "a"]
    assert value["gen"] == [0, 1, 4]
    assert value["np"] == [0, 1, 2]
    assert value["scalar"] == 1.5
    assert value["nan"] == "nan"
    assert value["(1, 2)"] == "tuple key"
    assert value["object"] == "<class 'object'>"
    big, cut = to_jsonable(list(range(50)), max_items=10)
    assert cut and len(big) < 50


@pytest.mark.parametrize(
    ("value", "empty"),
    [(None, True), ("", True), ("  ", True), ([], True), ({}, True), (0, False), (False, False)],
)
def test_empty_means_no_answer_at_all(value, empty):
    assert is_empty(value) is empty


def test_tracebacks_count_lines_of_the_models_code():
    code = "x = 1\n\ndef f(d):\n    return d['missing']\n\nf({})\n"
    try:
        exec(compile(code, "<graph code>", "exec"), {})
    except KeyError as error:
        summary, detail = describe_exception(error, "<graph code>")
    assert summary == "line 4: KeyError: 'missing'"
    assert "line 6:" in detail and "line 4:" in detail


def test_read_jobs_fall_back_to_printed_text():
    outcome = python_job.run("read", records(people_graph()), "print('hello from print')")
    assert outcome["value"] == "hello from print"
    missing = python_job.run("read", records(people_graph()), "x = 1")
    assert missing["ok"] is False and missing["kind"] == "no_result"


def test_write_jobs_key_edges_by_relationship_and_report_restatements():
    code = (
        "G.add_edge('ada', 'note_g', relationship='WROTE', year=1843)\n"  # restated
        "G.add_edge('ada', 'note_g', relationship='WROTE', year=1844)\n"  # a parallel edge
        "G.add_edge('charles', 'ada', relationship='KNEW')\n"
    )
    outcome = python_job.run("write", records(people_graph()), code)
    changes = Changeset.from_dict(outcome["changeset"])
    # The restated edge is not a second edge: it comes back as the edge it repeats.
    assert {e.ident for e in changes.added_edges} == {
        ("ada", "note_g", "WROTE"),
        ("ada", "note_g", "WROTE~2"),
        ("charles", "ada", "KNEW"),
    }


def _assert_one_inert_restatement(backend, changes, graph):
    """``changes`` restate one fact of ``graph`` with the attributes it holds, and applying
    them leaves the backend's version and graph as they were."""
    assert not changes.changed_nodes and not changes.changed_edges
    restated = [*changes.added_nodes, *changes.added_edges]
    assert len(restated) == 1  # the node or edge, with the attributes the graph holds
    for node in changes.added_nodes:
        assert {"label": node.label, **node.properties} == graph.nodes[node.id]
    for edge in changes.added_edges:
        assert {"relationship": edge.relationship, **edge.properties} == graph.edges[edge.ident]
    version = backend.version
    backend.apply(changes)
    assert backend.version == version  # nothing to apply
    assert nx.utils.graphs_equal(backend.to_networkx(), graph)


@pytest.mark.slow
@pytest.mark.parametrize(
    "code",
    [
        "G.add_node('ada', label='Person', name='Ada Lovelace')",
        "G.add_node('ada', name='Ada Lovelace')",  # some of its attributes, as they are
        "G.add_nodes_from([('ada', {'name': 'Ada Lovelace'})])",
        "G.add_edge('ada', 'note_g', relationship='WROTE', year=1843)",
        "G.add_edge('ada', 'note_g', key='WROTE', relationship='WROTE', year=1843)",
        "G.add_edges_from([('ada', 'note_g', 'WROTE', {'relationship': 'WROTE'})])",
    ],
)
def test_facts_stated_again_unchanged_are_reported_and_applying_them_changes_nothing(sandbox, code):
    graph = normalized_copy(people_graph())
    backend = open_backend("networkx", sandbox, graph, timeout_s=30)
    changes = backend.propose(code)  # through the sandbox and the host's checks
    _assert_one_inert_restatement(backend, changes, graph)
    # Stated with other values, the same fact is a change again, never a silent addition.
    other = Changeset(added_nodes=(Node("ada", "Person", {"name": "Ada"}),))
    assert changeset_problems(graph, other) == ["node 'ada': already exists, so it cannot be added"]


def test_a_changed_or_bare_statement_is_no_restatement():
    code = (
        "G.add_node('ada', name='Ada King')\n"  # a change
        "G.add_node('charles')\n"  # names the node, states nothing about it
        "G.add_edge('ada', 'note_g', key='WROTE', relationship='WROTE', year=1842)\n"
    )
    changes = Changeset.from_dict(
        python_job.run("write", records(people_graph()), code)["changeset"]
    )
    assert changes.added_nodes == () and changes.added_edges == ()
    assert [n.id for n in changes.changed_nodes] == ["ada"]
    assert [e.ident for e in changes.changed_edges] == [("ada", "note_g", "WROTE")]


def ntriples(graph: nx.MultiDiGraph) -> bytes:
    return graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True)).encode()


WROTE = "<urn:kgot:edge:ada.WROTE.note_g>"  # the description of the edge with a property


@pytest.mark.slow
@pytest.mark.parametrize(
    "update",
    [
        'INSERT DATA { node:ada a type:Person ; prop:name "Ada Lovelace" }',
        'INSERT DATA { node:ada prop:name "Ada Lovelace" }',  # one of its statements
        'DELETE DATA { node:ada prop:name "Ada Lovelace" } ; '
        'INSERT DATA { node:ada prop:name "Ada Lovelace" }',  # taken out and put back
        "INSERT DATA { node:ada rel:KNEW node:charles }",
        "INSERT DATA { node:ada rel:WROTE node:note_g }",  # the edge with its description
        f"INSERT DATA {{ {WROTE} kg:source node:ada ; prop:year 1843 }}",
        f"INSERT DATA {{ node:ada rel:WROTE node:note_g . {WROTE} kg:source node:ada ; "
        "kg:target node:note_g ; kg:relationship rel:WROTE ; prop:year 1843 }",
    ],
)
def test_triples_inserted_again_unchanged_are_reported_and_applying_them_changes_nothing(
    sandbox, update
):
    graph = normalized_copy(people_graph())
    backend = open_backend("rdf", sandbox, graph, timeout_s=30)
    changes = backend.propose(update)  # on the resident graph statement by statement, if held
    # The job on a graph of its own runs the update whole: the same report.
    whole = sparql_job.run("write", ntriples(graph), update)
    assert Changeset.from_dict(whole["changeset"]) == replace(changes, base=None)
    _assert_one_inert_restatement(backend, changes, graph)
    # The worker's graph is still the graph: the next update sees the facts as they are.
    again = backend.propose(update)
    assert again == changes


def test_a_changed_or_templated_insert_is_no_restatement():
    data = ntriples(people_graph())
    changed = sparql_job.run(
        "write",
        data,
        'DELETE DATA { node:ada prop:name "Ada Lovelace" } ; '
        'INSERT DATA { node:ada prop:name "Ada King" ; a type:Person } ; '
        f"INSERT DATA {{ node:ada rel:WROTE node:note_g }} ; "
        f"DELETE DATA {{ {WROTE} prop:year 1843 }} ; INSERT DATA {{ {WROTE} prop:year 1842 }}",
    )
    changes = Changeset.from_dict(changed["changeset"])
    assert changes.added_nodes == () and changes.added_edges == ()
    assert [n.id for n in changes.changed_nodes] == ["ada"]
    assert [e.ident for e in changes.changed_edges] == [("ada", "note_g", "WROTE")]
    # What an INSERT … WHERE template inserts is not worked out: no re-statement reported.
    templated = sparql_job.run(
        "write", data, 'INSERT { node:ada prop:name "Ada Lovelace" } WHERE {}'
    )
    assert Changeset.from_dict(templated["changeset"]).is_empty


def test_in_place_changes_to_nested_values_are_seen():
    graph = people_graph()
    graph.nodes["ada"]["tags"] = ["math"]
    outcome = python_job.run("write", records(graph), "G.nodes['ada']['tags'].append('poetry')")
    changed = Changeset.from_dict(outcome["changeset"]).changed_nodes
    assert changed[0].properties["tags"] == ["math", "poetry"]


def test_type_changes_count_as_changes():
    graph = people_graph()
    graph.nodes["note_g"]["pages"] = 1
    outcome = python_job.run("write", records(graph), "G.nodes['note_g']['pages'] = True")
    assert Changeset.from_dict(outcome["changeset"]).changed_nodes[0].properties["pages"] is True


def test_replacing_g_with_another_graph_type_is_a_violation():
    outcome = python_job.run("write", records(people_graph()), "G = nx.Graph(G)")
    assert outcome["kind"] == "violations" and "MultiDiGraph" in outcome["problems"][0]


def test_identity_attributes_that_repeat_the_key_are_accepted():
    code = "G.add_node('grace', id='grace', label='Person')\nG.add_node('x', id='y', label='P')"
    outcome = python_job.run("write", records(people_graph()), code)
    assert outcome["kind"] == "violations"
    assert outcome["problems"] == [
        "node 'x': `id` is reserved (it is the element's identity), store this value under "
        "another property name"
    ]


def test_diff_only_checks_what_changed():
    before = {"old": {"label": ""}}  # already broken: not the new code's fault
    changes, problems = diff_graphs(before, {}, {"old": {"label": ""}}, {})
    assert problems == [] and changes["added_nodes"] == []


def test_host_checks_changesets_against_the_current_graph():
    graph = normalized_copy(people_graph())
    problems = changeset_problems(
        graph,
        Changeset(
            added_nodes=(Node("ada", "Person"), Node("new", "", {"label": "x"})),
            changed_nodes=(Node("ghost", "Person"),),
            removed_nodes=("charles",),
            added_edges=(Edge("new", "nowhere", "R"),),
            removed_edges=(("ada", "london", "NOPE"),),
        ),
    )
    joined = "\n".join(problems)
    assert "node 'ada': already exists" in joined
    assert "node 'new': missing `label`" in joined
    assert "`label` is reserved" in joined
    assert "node 'ghost': does not exist" in joined
    assert "node 'charles': removed, but its edge 'ada' -[KNEW]-> 'charles' is not" in joined
    assert "endpoint 'nowhere' is not a node" in joined
    assert "-[NOPE]->" in joined


def test_loading_assigns_string_keys_and_rejects_bad_graphs():
    graph = nx.MultiDiGraph()
    graph.add_node("a", label="X")
    graph.add_node("b", label="X")
    graph.add_edge("a", "b", relationship="R")
    graph.add_edge("a", "b", relationship="R", w=1)
    assert sorted(normalized_copy(graph).edges(keys=True)) == [
        ("a", "b", "R"),
        ("a", "b", "R~2"),
    ]
    graph.add_node("c", label="X", when=object())
    with pytest.raises(ChangesetError, match="no JSON form"):
        normalized_copy(graph)


# -- through the sandbox: what the host makes of jobs that misbehave ------------------------------


@pytest.fixture
def networkx_backend(sandbox):
    return open_backend("networkx", sandbox, people_graph(), timeout_s=10)


@pytest.mark.slow
def test_code_that_kills_its_process_is_reported(networkx_backend):
    with pytest.raises(CodeExecutionError, match="ended the job early"):
        networkx_backend.propose("import os\nos._exit(0)")


@pytest.mark.slow
def test_code_that_forges_the_result_is_not_trusted(networkx_backend):
    forged = (
        "import json, os\n"
        "path = os.path.abspath('out/result.json')\n"
        "json.dump({'ok': True, 'changeset': {'added_nodes': [{'id': 'x', 'label': ''}]}},"
        " open(path, 'w'))\n"
        "os._exit(0)\n"
    )
    with pytest.raises(ChangesetError, match="missing `label`"):
        networkx_backend.propose(forged)
    garbage = "import os\nopen(os.path.abspath('out/result.json'), 'w').write('{')\nos._exit(0)"
    with pytest.raises(CodeExecutionError, match="overwrote the job's result file"):
        networkx_backend.propose(garbage)
    assert networkx_backend.stats().nodes == 4


@pytest.mark.slow
def test_a_query_exception_names_the_library_function(networkx_backend):
    with pytest.raises(QueryError) as caught:
        networkx_backend.query("result = nx.shortest_path(G, 'ada', 'nobody')")
    message = str(caught.value)
    assert "line 1" in message and "NodeNotFound" in message
    assert getattr(caught.value, "summary", "").startswith("line 1: ")


def test_the_item_cap_counts_items_at_every_depth():
    assert to_jsonable(list(range(200_000)), 20_000) == (list(range(20_000)), True)
    assert to_jsonable(list(range(5)), 5) == (list(range(5)), False)  # exactly the cap
    value, cut = to_jsonable({f"k{i}": [i, i] for i in range(10)}, 9)  # 3 items per entry
    assert cut and value == {"k0": [0, 0], "k1": [1, 1], "k2": [2, 2]}
    assert to_jsonable((n for n in range(10**9)), 3) == ([0, 1, 2], True)  # a generator stops


def test_later_records_replace_and_remove_earlier_ones():
    base = records_text(
        [
            node_record("a", {"label": "T", "v": 1}),
            node_record("b", {"label": "T"}),
            edge_record("a", "b", "R", {"relationship": "R"}),
        ]
    )
    delta = records_text(
        [
            edge_removal_record("a", "b", "R"),
            removal_record("b"),
            node_record("a", {"label": "T", "v": 2}),
            node_record("b", {"label": "U"}),
        ]
    )
    nodes, edges = parse_records(base, delta)
    assert nodes == {"a": {"label": "T", "v": 2}, "b": {"label": "U"}}
    assert list(nodes) == ["a", "b"] and edges == {}


@pytest.mark.slow
def test_jobs_see_the_graph_after_many_changes(sandbox):
    """The job input is the first encoding plus appended change records; after removals,
    re-additions and a re-encoding, jobs still see exactly the host's graph."""
    backend = open_backend("networkx", sandbox, people_graph())
    read = "result = sorted([n, sorted(d.items())] for n, d in G.nodes(data=True))"
    edges = (
        "result = sorted([s, t, k, d['relationship']] "
        "for s, t, k, d in G.edges(keys=True, data=True))"
    )
    backend.query(read)  # the first encoding
    for step in range(12):  # enough appended records to trigger a fresh encoding
        backend.apply(backend.propose(f"G.remove_node('ada')\nG.add_node('n{step}', label='T')"))
        backend.apply(
            backend.propose(
                "G.add_node('ada', label='Person', name='Ada')\n"
                f"G.add_edge('ada', 'n{step}', relationship='MET', step={step})"
            )
        )
        host = backend.to_networkx()
        expected = sorted([n, sorted(d.items())] for n, d in host.nodes(data=True))
        assert backend.query(read).value == [[n, [list(i) for i in d]] for n, d in expected]
        host_edges = sorted(
            [s, t, k, d["relationship"]] for s, t, k, d in host.edges(keys=True, data=True)
        )
        assert backend.query(edges).value == host_edges


def test_the_value_rules_accept_exactly_what_checkpoints_serialize():
    """Property values pass the rules only if LangGraph's checkpoint serializer takes them: a
    value it refuses would be applied (and committed) and then end the run at the checkpoint."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from kgot.graph_model.records import INT_MAX, INT_MIN, node_problems

    serializer = JsonPlusSerializer()
    for value in (INT_MIN, INT_MAX, [INT_MAX, {"x": INT_MIN}]):
        assert node_problems("a", {"label": "Thing", "n": value}) == []
        assert serializer.loads_typed(serializer.dumps_typed({"n": value})) == {"n": value}
    for value in (INT_MAX + 1, INT_MIN - 1, 2**64, 10**5000):
        (problem,) = node_problems("a", {"label": "Thing", "n": value})
        assert "outside the signed 64-bit range" in problem
    (nested,) = node_problems("a", {"label": "Thing", "n": [1, {"x": 2**64}]})
    assert nested.startswith("node 'a': property `n` at $.n[1].x is an integer of 20 digits")


@pytest.mark.slow
def test_many_elements_breaking_one_rule_are_one_line(networkx_backend):
    # One line per node: 80 nodes without a label were 80 lines for the model to read.
    code = "for i in range(80):\n    G.add_node(f'n{i}', name='x')\n"
    with pytest.raises(ChangesetError) as error:
        networkx_backend.propose(code)
    assert error.value.problems == [
        "nodes 'n0', 'n1', 'n2' and 77 more: missing `label` (every node needs a non-empty "
        "string label: its type)"
    ]


def test_grouping_keeps_distinct_violations_apart_and_in_order():
    from kgot.graph_model.records import cap_problems, group_problems

    lines = [
        "node 'a' (Security) at $.price: -1 is less than the minimum of 0 (rule: minimum)",
        "node 'b' (Person): 'name' is a required property (rule: required)",
        "node 'c' (Security) at $.price: -1 is less than the minimum of 0 (rule: minimum)",
        "node 'd' (Security) at $.price: -2 is less than the minimum of 0 (rule: minimum)",
        "node 'e' (Fund) at $.price: -1 is less than the minimum of 0 (rule: minimum)",
        "edge 'a' -[owns]-> 'b': target 'b' is labelled Person (rule: target types)",
        "edge 'c' -[owns]-> 'b' key 'owns~2': target 'b' is labelled Person (rule: target types)",
        "the graph has been changed by another writer",
        "the graph has been changed by another writer",
    ]
    assert group_problems(lines) == [
        "nodes 'a', 'c' (Security) at $.price: -1 is less than the minimum of 0 (rule: minimum)",
        "node 'b' (Person): 'name' is a required property (rule: required)",
        "node 'd' (Security) at $.price: -2 is less than the minimum of 0 (rule: minimum)",
        "node 'e' (Fund) at $.price: -1 is less than the minimum of 0 (rule: minimum)",
        "edges 'a' -[owns]-> 'b', 'c' -[owns]-> 'b' key 'owns~2': target 'b' is labelled "
        "Person (rule: target types)",
        "the graph has been changed by another writer (2 times)",
    ]
    # The cap counts grouped lines, so a capped list never hides a kind of problem that fits.
    many = [f"node 'n{i}' (T): bad (rule: r)" for i in range(500)] + ["node 'x' (U): other"]
    assert cap_problems(many, 2) == [
        "nodes 'n0', 'n1', 'n2' and 497 more (T): bad (rule: r)",
        "node 'x' (U): other",
    ]


def test_the_job_bundle_carries_bytecode_the_interpreter_accepts_as_its_own(tmp_path):
    # The bundle compiles in memory; each .pyc must carry the header py_compile writes for an
    # unchecked hash-based file (else every job would silently recompile, or fail on a
    # malformed header) and the code of its source. Marshal's bytes depend on reference counts,
    # so the code is compared as code.
    import io
    import marshal
    import py_compile
    import zipfile

    from kgot.graph_backends.runner import job_bundle

    archive = zipfile.ZipFile(io.BytesIO(job_bundle()))
    # The package markers are empty; every module with code travels compiled.
    sources = [n for n in archive.namelist() if n.endswith(".py") and archive.read(n).strip()]
    assert "kgotjob/python_job.py" in sources
    for name in sources:
        source = tmp_path / name.replace("/", "_")
        source.write_bytes(archive.read(name))
        expected = tmp_path / (source.name + "c")
        py_compile.compile(
            str(source),
            cfile=str(expected),
            dfile=name,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        shipped = archive.read(name.removesuffix(".py") + ".pyc")
        assert shipped[:16] == expected.read_bytes()[:16], name
        assert marshal.loads(shipped[16:]) == marshal.loads(expected.read_bytes()[16:]), name


def test_find_and_neighbours_answer_from_a_whole_graph() -> None:
    code = (
        'result = [find("Person"), find(born="1815-12-10"), find("City", population=8_900_000.5),'
        ' find("Document", pages="65"), find("Person", limit=1), neighbours("ada"),'
        ' neighbours("nobody")]'
    )
    outcome = python_job.run("read", records(people_graph()), code)
    assert outcome["value"] == [
        ["ada", "charles"], ["ada"], ["london"], [], ["ada"],
        ["charles", "london", "note_g"], [],
    ]  # fmt: skip


def test_a_lookup_a_working_set_has_not_answered_stops_the_code_before_it_writes() -> None:
    code = (
        'G.add_node("x", label="Person", name="X")\nfor n in find("Person"):\n    G.remove_node(n)'
    )
    stopped = python_job.run("write", records(people_graph()), code, answers={})
    assert stopped["ok"] is False and stopped["kind"] == "needs"
    assert stopped["request"] == {"find": {"label": "Person", "limit": 100, "properties": {}}}
    # Code catching Exception does not swallow the stop.
    caught = python_job.run(
        "read", records(people_graph()), 'try:\n    find("Person")\nexcept Exception:\n    pass',
        answers={},
    )  # fmt: skip
    assert caught["kind"] == "needs"
    # With the answer sent, the same code runs to its end on it.
    answers = {python_job.lookups.request_key(stopped["request"]): ["ada"]}
    done = python_job.run("write", records(people_graph()), code, answers=answers)
    assert done["ok"] is True
    assert done["changeset"]["removed_nodes"] == ["ada"]


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("find()", "needs a label or a property"),
        ("find('Person', limit=0)", "from 1 to 1000"),
        ("find('Person', tags=['a'])", "string, number or boolean"),
        ("find(3)", "the label must be a string"),
        ("neighbours(3)", "node ids are strings"),
    ],
)
def test_lookups_refuse_arguments_they_cannot_answer(call: str, problem: str) -> None:
    outcome = python_job.run("read", records(people_graph()), f"result = {call}")
    assert outcome["ok"] is False and problem in outcome["detail"]
