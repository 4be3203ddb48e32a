"""A write on the resident graph compares only what the code touched: that must give exactly
the changeset (or the rule violations) a comparison of the whole graph gives, whatever the code
does to ``G``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from kgot.graph_backends.jobs import python_job, resident, tracked
from kgot.graph_model.records import edge_record, node_record, records_text

NODES = {
    "a": {"label": "Person", "name": "Ada", "tags": ["x"]},
    "b": {"label": "Person", "name": "Bob", "meta": {"k": 1}},
    "c": {"label": "City", "name": "Cairo"},
    "7": {"label": "Item", "n": 7},
    "lonely": {"label": "Item"},
}
EDGES = {
    ("a", "b", "KNOWS"): {"relationship": "KNOWS"},
    ("a", "c", "LIVES_IN"): {"relationship": "LIVES_IN", "since": 1990},
    ("b", "c", "LIVES_IN"): {"relationship": "LIVES_IN"},
    ("b", "c", "LIVES_IN~2"): {"relationship": "LIVES_IN", "note": "again"},
    ("c", "a", "HOME_OF"): {"relationship": "HOME_OF", "w": [1, 2]},
}

CODES = [
    "pass",
    "G.add_node('d', label='City', name='Delhi')",
    "G.nodes['a']['name'] = 'Ada L.'",
    "del G.nodes['c']['name']",
    "G.nodes['b'].update(name='Robert', age=40)",
    "G.nodes['a']['tags'].append('y')",
    "G.nodes['b']['meta']['k'] = 2",
    "G.edges['c', 'a', 'HOME_OF']['w'].append(3)",
    "G.add_edge('a', 'c', relationship='VISITED')",
    "G.add_edge('a', 'c', relationship='LIVES_IN', since=1990)",  # a re-statement: dropped
    "G.add_edge('a', 'c', relationship='LIVES_IN', since=2000)",  # a parallel edge
    # Identity attributes go before keys are given: this one is a re-statement, dropped.
    "G.add_edge('a', 'c', relationship='LIVES_IN', since=1990, source='a')",
    "G.add_edge('lonely', 'a', relationship='KNOWS')",
    "G.remove_edge('b', 'c', key='LIVES_IN~2')",
    "G.remove_node('b')",
    "G.remove_nodes_from(['a', 'lonely'])",
    "del G._node['c']",  # leaves edges pointing at nothing: the rules say so
    "G.clear()",
    "G.add_node(7, label='Item')",  # 7 next to '7'
    "G.add_node('e')",  # no label
    "G.add_edge('a', 'ghost', relationship='KNOWS')",  # an endpoint without a label
    "G.nodes['a']['id'] = 'a'\nG.edges['a', 'b', 'KNOWS']['source'] = 'a'",
    "G.nodes['a']['id'] = 'other'",
    "G.nodes['c'].setdefault('pop', 9)",
    "G.nodes['c'].pop('name')",
    "G.nodes['c'] |= {'name': 'Al-Qahira'}",
    "G.nodes['c'].clear()",
    "G.nodes['a'].popitem()",
    "G._node['c'] = {'label': 'Town', 'name': 'Cairo'}",
    "G._succ['a']['b']['KNOWS']['weight'] = 0.5",
    "import networkx as nx\nnx.set_node_attributes(G, {'a': 1, 'c': 2}, 'rank')",
    "import networkx as nx\nnx.relabel_nodes(G, {'c': 'cairo'}, copy=False)",
    "near = {'relationship': 'NEAR'}\nG.add_edges_from([('c', 'b', near), ('c', 'b', dict(near))])",
    "G.update(edges=[('lonely', 'c', {'relationship': 'IN'})])",
    "import networkx as nx\nG = nx.MultiDiGraph()\nG.add_node('z', label='Z')",
    "G.remove_node('c')\nG.add_node('c', label='City', name='Cairo')",
    "G.add_node('n', label='Item')\nG.remove_node('n')",
    "for n in list(G.nodes):\n    G.nodes[n]['seen'] = True",
    # Facts stated again as they are: reported as added, with their loaded attributes.
    "G.add_node('c', label='City', name='Cairo')",
    "G.add_nodes_from([('b', {'name': 'Bob'}), 'lonely'])",
    "G.add_edge('a', 'c', key='LIVES_IN', relationship='LIVES_IN', since=1990)",
    "G.add_edges_from([('b', 'c', 'LIVES_IN~2'), ('c', 'a', {'relationship': 'HOME_OF'})])",
]


def _records() -> str:
    return records_text(
        [*(node_record(n, a) for n, a in NODES.items())]
        + [edge_record(s, t, k, a) for (s, t, k), a in EDGES.items()]
    )


def _normalized(outcome: dict[str, Any]) -> Any:
    if not outcome.get("ok"):
        # Blank nodes get fresh labels in every store.
        problems = [re.sub(r"_:\w+", "_:b", p) for p in outcome.get("problems") or []]
        return ("failed", outcome.get("kind"), sorted(problems))
    return {
        kind: sorted(json.dumps(item, sort_keys=True) for item in items)
        for kind, items in outcome["changeset"].items()
    }


@pytest.mark.parametrize("code", CODES)
def test_a_region_diff_equals_the_whole_graph_diff(code: str) -> None:
    text = _records()
    whole = python_job.run("write", text, code)
    held = resident._load("run", "networkx", 1, text)
    region = python_job.run_on("write", held.graph, held.nodes, held.edges, code, held=held)
    assert _normalized(region) == _normalized(whole)


def test_the_tracked_graph_names_what_the_code_touched() -> None:
    held = resident._load("run", "networkx", 1, _records())
    assert tracked.TOUCHED == {}  # loading is the baseline, not a change
    held.graph.nodes["a"]["name"] = "x"
    held.graph.add_edge("c", "b", relationship="NEAR")
    region = tracked.changed_region(held.graph, held.owners, held.incident)
    assert region is not None
    assert "a" in region.nodes and ("c", "b") in region.pairs
    assert "lonely" not in region.nodes  # untouched and holding no nested value
    tracked.TOUCHED.clear()


def test_a_delta_keeps_the_tracking_true() -> None:
    held = resident._load("run", "networkx", 1, _records())
    delta = records_text(
        [
            node_record("d", {"label": "City", "name": "Delhi"}),
            edge_record("d", "a", "HOME_OF", {"relationship": "HOME_OF"}),
            '["-e","a","b","KNOWS"]',
        ]
    )
    resident._apply_delta(held, delta)
    assert tracked.TOUCHED == {}
    code = "G.nodes['d']['name'] = 'New Delhi'\nG.remove_edge('d', 'a', key='HOME_OF')"
    region = python_job.run_on("write", held.graph, held.nodes, held.edges, code, held=held)
    nodes = {**NODES, "d": {"label": "City", "name": "Delhi"}}
    edges = {k: v for k, v in EDGES.items() if k != ("a", "b", "KNOWS")}
    edges[("d", "a", "HOME_OF")] = {"relationship": "HOME_OF"}
    text = records_text(
        [*(node_record(n, a) for n, a in nodes.items())]
        + [edge_record(s, t, k, a) for (s, t, k), a in edges.items()]
    )
    assert _normalized(region) == _normalized(python_job.run("write", text, code))


SPARQL_UPDATES = [
    'INSERT DATA { node:d a type:City ; prop:name "Delhi" . }',
    'INSERT DATA { node:c prop:name "Cairo" . }',  # already there: nothing changes
    'DELETE DATA { node:c prop:name "Cairo" . }',
    'DELETE DATA { node:c prop:name "Nowhere" . }',  # not there: nothing changes
    'INSERT DATA { node:a prop:nick "A" } ; DELETE DATA { node:a prop:nick "A" }',
    'DELETE DATA { node:a prop:name "Ada" } ; INSERT DATA { node:a prop:name "Ada L." }',
    "DELETE DATA { node:lonely a type:Item . }",  # a node left without a type
    "INSERT DATA { node:lonely rel:KNOWS node:a . }",
    "INSERT DATA { node:a rel:LIVES_IN node:c . node:b rel:KNOWS node:a }",
    "DELETE DATA { node:a rel:KNOWS node:b . }",
    "PREFIX ex: <urn:kgot:node:>\nINSERT DATA { ex:e a type:Item ; prop:flag true . }",
    'INSERT DATA { _:x a type:Item ; prop:name "blank" . }',  # blank node: run whole
    "INSERT DATA { node:a prop:name }",  # a syntax error, reported as usual
    "DELETE WHERE { node:c ?p ?o }",
    'DELETE { ?n prop:name ?v } INSERT { ?n prop:name "X" } '
    "WHERE { ?n a type:Person ; prop:name ?v }",
]


@pytest.mark.parametrize("update", SPARQL_UPDATES)
def test_a_resident_sparql_write_equals_a_write_on_a_fresh_store(update: str) -> None:
    from kgot.graph_backends.jobs import sparql_job
    from kgot.graph_backends.jobs.rdf_model import graph_ntriples

    nodes = {n: a for n, a in NODES.items() if n != "7"}
    edges = {k: v for k, v in EDGES.items() if "w" not in v and "note" not in v}
    data = graph_ntriples(nodes.items(), ((s, t, k, a) for (s, t, k), a in edges.items()))
    fresh = sparql_job.run("write", data.encode(), update)
    text = records_text(
        [*(node_record(n, a) for n, a in nodes.items())]
        + [edge_record(s, t, k, a) for (s, t, k), a in edges.items()]
    )
    held = resident._load("run", "rdf", 1, text)
    assert _normalized(sparql_job.run("write", b"", update, held=held)) == _normalized(fresh)
