"""The property-graph ↔ RDF mapping, the SPARQL guard, and RDF-specific update semantics."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import networkx as nx
import pyoxigraph as ox
import pytest

from kgot.config import SandboxSettings
from kgot.errors import ChangesetError, QueryError
from kgot.graph_backends import open_backend
from kgot.graph_backends.jobs import rdf_model
from kgot.graph_backends.jobs.rdf_decode import decode
from kgot.graph_backends.jobs.rdf_model import (
    PREFIXES,
    decode_local,
    encode_local,
    graph_ntriples,
    literal_parts,
)
from kgot.graph_backends.jobs.sparql_guard import check, form_of, keywords, may_leave_graph
from kgot.graph_backends.runner import GraphCodeError
from kgot.graph_model import Changeset, Edge, Node
from kgot.sandbox import open_sandbox
from kgot.tests.graph_backends.graph_fixtures import people_graph, snapshot

TRICKY_IDS = [
    "plain",
    "with space",
    "dots.and:colons/slashes",
    "-leading-dash",
    "trailing.",
    "100%",
    "Zürich",
    "東京",
    "emoji 🙂",
    'quote " and <angle>',
    "a%62",
    "tab\tnew\nline",
]


@pytest.mark.parametrize("text", TRICKY_IDS)
def test_local_names_round_trip_and_are_valid_prefixed_names(text):
    local = encode_local(text)
    assert decode_local(local) == text
    query = f"PREFIX node: <{rdf_model.NODE}>\nASK {{ node:{local} ?p ?o }}"
    assert ox.Store().query(query) is not None  # parses as SPARQL


def test_literal_typing():
    assert literal_parts("1815-12-10")[1].endswith("#date")
    assert literal_parts("2024-02-29T12:30:00Z")[1].endswith("#dateTime")
    assert literal_parts("2024-02-30")[1].endswith("#string")  # not a real date
    assert literal_parts("2024-02-29T12:30:00+02:00")[1].endswith("#string")  # not canonical
    assert literal_parts(True)[1].endswith("#boolean")
    assert literal_parts(3)[1].endswith("#integer")
    assert literal_parts(0.5)[1].endswith("#double")
    assert literal_parts([1])[1].endswith("#JSON")


def test_typed_literals_come_back_unchanged_through_oxigraph():
    graph = nx.MultiDiGraph()
    graph.add_node(
        "x",
        label="T",
        date="1815-12-10",
        stamp="2024-02-29T12:30:00.5Z",
        small=1e-05,
        big=2**63 - 1,  # the widest integers a property may hold
        low=-(2**63),
        neg=-0.0,
        flag=True,
        obj={"b": [1, 2], "a": None},
    )
    store = ox.Store()
    store.load(graph_ntriples(graph.nodes(data=True), []).encode(), ox.RdfFormat.N_TRIPLES)
    decoded = decode(store.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    assert decoded.problems == []
    nodes, _ = snapshot(graph)
    again = nx.MultiDiGraph()
    again.add_nodes_from(decoded.nodes.items())
    assert snapshot(again)[0] == nodes


def test_decoding_reports_every_rule_with_its_subject():
    text = """
    @prefix node: <urn:kgot:node:> . @prefix type: <urn:kgot:type:> .
    @prefix prop: <urn:kgot:prop:> . @prefix rel: <urn:kgot:rel:> .
    @prefix kg: <urn:kgot:vocab:> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
    node:two a type:A, type:B .
    node:many a type:A ; prop:p "1", "2" .
    node:bad a type:A ; prop:n "abc"^^xsd:integer .
    node:link a type:A ; rel:R "literal" ; rel:S node:ghost .
    <http://example.org/x> prop:p "x" .
    [] kg:source node:link .
    """
    decoded = decode(ox.parse(text.encode(), format=ox.RdfFormat.TURTLE))
    joined = "\n".join(decoded.problems)
    assert "node 'two': has several types (A, B)" in joined
    assert "property `p` has 2 values" in joined
    assert '"abc" is not a valid xsd:integer' in joined
    assert "rel: links two nodes" in joined
    assert "endpoint 'ghost' is not a node" in joined
    assert "<http://example.org/x> is neither a node" in joined
    assert "lacks kg:target" in joined


def test_language_tags_and_foreign_numeric_types_are_read():
    text = """
    <urn:kgot:node:p> a <urn:kgot:type:City> ;
        <urn:kgot:prop:name> "Paris"@fr ;
        <urn:kgot:prop:area> "105.4"^^<http://www.w3.org/2001/XMLSchema#decimal> ;
        <urn:kgot:prop:rank> "3"^^<http://www.w3.org/2001/XMLSchema#int> ;
        <urn:kgot:prop:site> <https://paris.fr> .
    """
    decoded = decode(ox.parse(text.encode(), format=ox.RdfFormat.TURTLE))
    assert decoded.problems == []
    assert decoded.nodes["p"] == {
        "label": "City",
        "name": "Paris",
        "area": 105.4,
        "rank": 3,
        "site": "https://paris.fr",
    }


def test_parallel_edges_and_keys_use_descriptions():
    graph = people_graph()
    graph.add_edge("ada", "note_g", key="WROTE~2", relationship="WROTE")
    text = graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True))
    assert text.count("<urn:kgot:rel:WROTE>") == 3  # one triple + two descriptions
    decoded = decode(ox.parse(text.encode(), format=ox.RdfFormat.N_TRIPLES))
    assert decoded.problems == []
    assert set(decoded.edges) == set(graph.edges(keys=True))


# Texts that must be refused, with the keyword the refusal names.
FORBIDDEN = [
    ("SELECT * WHERE { SERVICE <http://x/sparql> { ?s ?p ?o } }", "SERVICE"),
    ("select * where { service silent <http://x> { ?s ?p ?o } }", "SERVICE"),
    ("LOAD <http://example.org/data.ttl>", "LOAD"),
    ("LOAD SILENT <http://x> INTO GRAPH <urn:g>", "LOAD"),
    ("SELECT * FROM <urn:g> WHERE { ?s ?p ?o }", "FROM"),
    ("SELECT * FROM NAMED <urn:g> WHERE { ?s ?p ?o }", "FROM"),
    ("DESCRIBE <urn:x> FROM <urn:g>", "FROM"),
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", "GRAPH"),
    ("ASK { FILTER EXISTS { GRAPH ?g { ?s ?p ?o } } }", "GRAPH"),
    ("SELECT * WHERE { { SELECT * WHERE { SERVICE <x:y> { } } } }", "SERVICE"),
    ("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }", "GRAPH"),
    ("DELETE WHERE { GRAPH ?g { ?s ?p ?o } }", "GRAPH"),
    ("WITH <urn:g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }", "WITH"),
    ("DELETE { ?s ?p ?o } USING <urn:g> WHERE { ?s ?p ?o }", "USING"),
    ("CREATE GRAPH <urn:g>", "CREATE"),
    ("COPY DEFAULT TO <urn:g>", "COPY"),
    ("MOVE DEFAULT TO <urn:g>", "MOVE"),
    ("ADD DEFAULT TO <urn:g>", "ADD"),
    ("DROP NAMED", "DROP"),
    ("CLEAR GRAPH <urn:g>", "CLEAR"),
    # ALL is every graph of the store: at a shared endpoint, other runs' graphs too.
    ("CLEAR ALL", "CLEAR"),
    ("DROP ALL", "DROP"),
    ("drop silent all", "DROP"),
    ("INSERT DATA { node:a a type:X } ;\nLOAD <http://x>", "LOAD"),
    ("PREFIX x: <urn:x>\n# comment\nSELECT * WHERE {\n  SERVICE <http://a> {} }", "SERVICE"),
]


@pytest.mark.parametrize(("query", "word"), FORBIDDEN)
def test_guard_rejects_clauses_that_leave_the_graph(query, word):
    expected = "update" if form_of(query) == "update" else "query"
    finding = check(query, expected).finding
    assert finding is not None and finding.kind == "forbidden"
    assert str(finding).split(": ", 1)[1].startswith(word)
    assert finding.line >= 1 and finding.column >= 1


@pytest.mark.parametrize(
    "query",
    [
        # The review's bypasses: a statement separator glued to the keyword…
        "SELECT ?g ?s ?o WHERE { ?x ?y ?z .GRAPH ?g { ?s ?p ?o } }",
        "SELECT * WHERE { ?x ?y ?z .SERVICE SILENT <http://127.0.0.1:9/admin> { ?a ?b ?c } }",
        # … and codepoint escapes, which SPARQL decodes before parsing.
        r"SELECT * WHERE { \u0053ERVICE <http://127.0.0.1:9/> { ?a ?b ?c } }",
        r"SELECT * WHERE { \u0047\u0052APH ?g { ?s ?p ?o } }",
        r"SELECT * WHERE { \U00000053ERVICE <http://127.0.0.1:9/> { } }",
        "SELECT * WHERE { ?s ?p ?o . OPTIONAL{GRAPH?g{?a ?b ?c}} }",
    ],
)
def test_guard_cannot_be_evaded(query):
    checked = check(query, "query")
    assert checked.finding is not None
    assert checked.finding.kind == "forbidden"
    assert "\\u" not in checked.text and "\\U" not in checked.text  # the engine runs this


@pytest.mark.parametrize(
    "query",
    [
        "SELECT ?n ?name WHERE { ?n a type:Person ; prop:name ?name } ORDER BY ?name LIMIT 5",
        'INSERT DATA { node:grace a type:Person ; prop:name "Grace" . node:grace rel:KNEW node:a }',
        "DELETE { ?n prop:born ?b } INSERT { ?n prop:born 1816 } WHERE { ?n prop:born ?b }",
        'SELECT ?a WHERE { ?a prop:address ?x FILTER(CONTAINS(?x, "Loader")) }',
    ],
)
def test_texts_without_a_forbidden_keyword_skip_the_parse(query):
    """The guard parses only texts that spell a keyword some forbidden construct needs; the
    prefilter errs on the side of parsing (words inside names and strings count)."""
    assert not may_leave_graph(query)
    assert check(query, form_of(query) or "query").finding is None


def test_every_forbidden_construct_is_parsed_whatever_surrounds_its_keyword():
    for spelled in (".GRAPH", "}SERVICE", "_:graph", "prop:from", '"Load"', "?with", "1ADD"):
        assert may_leave_graph(f"SELECT * WHERE {{ ?s ?p ?o {spelled} }}"), spelled
    for query, _ in FORBIDDEN:
        assert may_leave_graph(query)


@pytest.mark.slow
def test_only_texts_that_may_leave_the_graph_import_rdflib():
    probe = (
        "import sys\n"
        "from kgot.graph_backends.jobs.sparql_guard import check\n"
        "assert check('SELECT ?s WHERE { ?s a type:Person }', 'query').finding is None\n"
        "print('rdflib' in sys.modules)\n"
        "assert check('SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }', 'query').finding\n"
        "print('rdflib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_escapes_are_decoded_and_what_runs_is_what_was_checked():
    checked = check(r'SELECT * WHERE { ?s prop:name "Z\u00FCrich" }', "query")
    assert checked.finding is None
    assert checked.text == 'SELECT * WHERE { ?s prop:name "Zürich" }'
    spelled = check(r'INSERT DATA { <urn:a> <urn:b> "\u005Cu0041" }', "update").finding
    assert spelled is not None and "escape" in spelled.message  # no second round of decoding
    bad = check(r'SELECT * WHERE { ?s ?p "\uD800" }', "query").finding
    assert bad is not None and bad.kind == "syntax"


@pytest.mark.parametrize(
    "query",
    [
        'SELECT ?service WHERE { ?s prop:service ?service . FILTER(?service != "LOAD") }',
        "SELECT * WHERE { ?s ?p <http://example.org/graph/from> }",
        "SELECT * WHERE { ?s prop:note ?n } # SERVICE in a comment",
        "SELECT * WHERE { ?s prop:n ?n FILTER(?n < 5 && ?n > 1) }",
        "SELECT * WHERE { _:graph prop:x ?y }",
        'SELECT * WHERE { ?s prop:t "x"@en }',
        "SELECT * WHERE { ?s prop:t '''multi\nline LOAD\n''' }",
        "SELECT ?graph WHERE { ?graph prop:from ?with }",
    ],
)
def test_guard_ignores_words_in_names_strings_iris_and_comments(query):
    assert check(query, "query").finding is None


def test_the_default_graph_may_be_cleared():
    assert check("CLEAR DEFAULT", "update").finding is None
    assert check("DROP SILENT DEFAULT", "update").finding is None
    assert check("clear default", "update").finding is None


def test_clearing_every_graph_is_refused_with_the_allowed_form():
    finding = check("DROP ALL", "update").finding
    assert finding is not None
    assert str(finding) == (
        "line 1, column 1: DROP of anything but DEFAULT (a named graph, NAMED or ALL) is not "
        "allowed; kgot uses only the default graph, so write DROP DEFAULT"
    )


def test_guard_tells_queries_from_updates_and_python():
    assert check("INSERT DATA { node:a a type:X }", "query").finding.kind == "wrong_form"
    assert check("SELECT * WHERE { ?s ?p ?o }", "update").finding.kind == "wrong_form"
    assert check("result = [n for n in G.nodes]", "query").finding.kind == "wrong_language"
    assert [w for w, _ in keywords("PREFIX a: <x> SELECT ?x")] == ["PREFIX", "SELECT"]


def test_the_engine_runs_the_decoded_text(sandbox):
    """Oxigraph decodes escapes only inside strings and IRIs; the guard decodes them everywhere,
    as SPARQL prescribes, and hands the engine that text."""
    backend = open_backend("rdf", sandbox, people_graph())
    rows = backend.query(r"SELECT ?\u006E WHERE { ?n a type:Person } ORDER BY ?n").value
    assert rows == [{"n": "node:ada"}, {"n": "node:charles"}]


def test_syntax_errors_name_the_position_oxigraph_finds(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    with pytest.raises(QueryError) as caught:
        backend.query("SELECT ?n WHERE {\n  ?n a type:Person .\n  FILTER(?n = }")
    summary = caught.value.summary
    # Oxigraph points after `= }`, where an expression is missing (the guard's grammar alone
    # would point at FILTER, column 3).
    assert summary.startswith("SPARQL syntax error at line 3, column 16: the text ends too early")
    assert "\n" not in summary


@pytest.mark.slow
def test_deeply_nested_texts_are_checked_in_the_sandbox(sandbox):
    """The guard's parser recurses per bracket; the job gives it a deep stack."""
    backend = open_backend("rdf", sandbox, people_graph())
    nested = "SELECT * WHERE " + "{ " * 150 + "?s ?p ?o " + "} " * 150
    assert len(backend.query(nested).value) == len(list(_triples(people_graph())))
    hidden = "SELECT * WHERE " + "{ " * 150 + "SERVICE <http://x> { } " + "} " * 150
    with pytest.raises(QueryError, match="SERVICE"):
        backend.query(hidden)
    # Deeper than any parser copes with (Oxigraph's crashes its process): refused up front,
    # with or without a keyword that would call for the guard's parse.
    for inner in ("?s ?p ?o ", "SERVICE <http://x> { } "):
        abyss = "SELECT * WHERE " + "{ " * 20_000 + inner + "} " * 20_000
        with pytest.raises(QueryError, match=r"column 1016: the text nests brackets more than"):
            backend.query(abyss)


def _triples(graph: nx.MultiDiGraph) -> list[str]:
    text = graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True))
    return [line for line in text.splitlines() if line]


class Canary:
    """An HTTP server on 127.0.0.1 standing for an internal service: it records every hit."""

    def __init__(self) -> None:
        hits: list[str] = []
        self.hits = hits

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                self.do_GET()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def canary() -> Iterator[Canary]:
    server = Canary()
    yield server
    server.close()


@pytest.mark.slow
def test_the_network_is_never_reached_even_without_isolation(canary):
    """LOAD and SERVICE in every disguise are refused before Oxigraph (which would fetch the
    URL) runs them. The subprocess sandbox has the host's network, so the canary shows that
    the guard, not network isolation, stops them."""
    box = open_sandbox(SandboxSettings(kind="subprocess", timeout=60))
    try:
        backend = open_backend("rdf", box, people_graph())
        url = f"{canary.url}/internal-admin"
        for update in (
            f"LOAD <{url}>",
            f"INSERT DATA {{ node:x a type:X }} ;\nLOAD SILENT <{url}>",
            rf"\u004COAD <{url}>",
        ):
            with pytest.raises(GraphCodeError, match="LOAD"):
                backend.propose(update)
        for query in (
            f"SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
            f"SELECT * WHERE {{ ?x ?y ?z .SERVICE SILENT <{url}> {{ ?a ?b ?c }} }}",
            rf"SELECT * WHERE {{ \u0053ERVICE <{url}> {{ ?a ?b ?c }} }}",
        ):
            with pytest.raises(QueryError, match="SERVICE"):
                backend.query(query)
        assert canary.hits == []
        # Oxigraph itself does fetch the URL when asked directly: the test can fail.
        with pytest.raises(OSError):
            list(ox.Store().query(f"SELECT * WHERE {{ SERVICE <{url}/direct> {{ ?s ?p ?o }} }}"))
        assert canary.hits == ["/internal-admin/direct"]
    finally:
        box.close()


def test_deleting_an_edge_triple_deletes_the_edge_and_its_description(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    changeset = backend.propose("DELETE DATA { node:ada rel:WROTE node:note_g }")
    assert changeset.removed_edges == (("ada", "note_g", "WROTE"),)
    backend.apply(changeset)
    assert "edge:ada.WROTE.note_g" not in backend.ntriples().decode()


def test_edge_properties_are_written_through_descriptions(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    changeset = backend.propose(
        "DELETE { ?e prop:year ?y } INSERT { ?e prop:year 1842 } WHERE {\n"
        "  ?e kg:source node:ada ; kg:relationship rel:WROTE ; prop:year ?y }"
    )
    assert [(e.ident, e.properties) for e in changeset.changed_edges] == [
        (("ada", "note_g", "WROTE"), {"year": 1842})
    ]
    parallel = backend.propose(
        "INSERT DATA { [] kg:source node:ada ; kg:relationship rel:WROTE ; "
        'kg:target node:note_g ; kg:key "draft" ; prop:year 1840 }'
    )
    assert [(e.ident, e.properties) for e in parallel.added_edges] == [
        (("ada", "note_g", "draft"), {"year": 1840})
    ]


def test_an_update_that_names_a_type_twice_is_rejected(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    with pytest.raises(ChangesetError, match="several types"):
        backend.propose("INSERT DATA { node:ada a type:Robot }")


@pytest.mark.slow
def test_query_results_use_the_views_names(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    rows = backend.query(
        "SELECT ?who ?born WHERE { ?who a type:Person ; prop:born ?born } ORDER BY ?born"
    ).value
    assert rows == [
        {"who": "node:charles", "born": "1791-12-26"},
        {"who": "node:ada", "born": "1815-12-10"},
    ]
    assert backend.query("ASK { node:ada rel:KNEW node:charles }").value is True
    triples = backend.query("CONSTRUCT WHERE { node:ada rel:KNEW ?x }").value
    assert triples == [["node:ada", "rel:KNEW", "node:charles"]]


def test_to_rdflib_gives_an_oxigraph_backed_graph(sandbox):
    backend = open_backend("rdf", sandbox, people_graph())
    graph = backend.to_rdflib()
    assert graph.store.__class__.__name__ == "OxigraphStore"
    rows = list(
        graph.query(
            "SELECT ?n WHERE { ?p a type:Person ; prop:name ?n } ORDER BY ?n",
            initNs=PREFIXES,
        )
    )
    assert [str(row[0]) for row in rows] == ["Ada Lovelace", "Charles Babbage"]


def _reference_write(data: bytes, update: str) -> tuple[dict, list[str]]:
    """What an update changes, by decoding the whole store before and after (slow, simple)."""
    from kgot.graph_model.records import diff_graphs

    store = ox.Store()
    store.load(data, ox.RdfFormat.N_TRIPLES)
    before = decode(store.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    store.update(update, prefixes=PREFIXES)
    after = decode(
        store.quads_for_pattern(None, None, None, ox.DefaultGraph()), before.descriptions
    )
    changes, problems = diff_graphs(before.nodes, before.edges, after.nodes, after.edges)
    return changes, after.problems + problems


def _random_updates(graph: nx.MultiDiGraph, rng) -> list[str]:
    """One update of each kind, on randomly chosen nodes and edges of ``graph``."""
    nodes = sorted(graph.nodes)

    def pick() -> str:
        return encode_local(rng.choice(nodes))

    gone = pick()
    source, target, key = rng.choice(sorted(graph.edges(keys=True)))
    relationship = encode_local(graph.edges[source, target, key]["relationship"])
    respelled = pick().replace("-", "%2D")
    return [
        f"INSERT DATA {{ node:new{rng.randint(0, 9)} a type:Thing ; prop:v {rng.randint(0, 9)} }}",
        f"INSERT DATA {{ node:{pick()} prop:extra {rng.randint(0, 9)} }}",
        f'INSERT DATA {{ node:{pick()} prop:name "second name" }}',
        f"DELETE WHERE {{ node:{pick()} ?p ?o }}",
        f"DELETE WHERE {{ node:{gone} ?p ?o }} ; DELETE WHERE {{ ?s ?p node:{gone} }}",
        f"INSERT DATA {{ node:{pick()} rel:LINKS node:{pick()} }}",
        f"DELETE {{ ?s ?r ?o }} WHERE {{ ?s ?r ?o FILTER(?s = node:{pick()}) "
        "FILTER(STRSTARTS(STR(?r), STR(rel:))) }",
        f"INSERT DATA {{ node:{pick()} a type:Robot }}",
        "DELETE { ?e prop:w ?w } INSERT { ?e prop:w 7 } WHERE { ?e prop:w ?w }",
        f"DELETE WHERE {{ ?e kg:source node:{pick()} }}",
        f"INSERT DATA {{ [] kg:source node:{pick()} ; kg:relationship rel:LINKS ; "
        f'kg:target node:{pick()} ; kg:key "k{rng.randint(0, 3)}" ; prop:w 1 }}',
        f"INSERT DATA {{ node:{respelled} a type:Thing }}",
        f"DELETE DATA {{ node:{encode_local(source)} rel:{relationship} "
        f"node:{encode_local(target)} }}",
    ]


@pytest.mark.slow
def test_updates_decode_only_what_they_touch_yet_agree_with_a_full_decode():
    import random

    from kgot.graph_backends.jobs.sparql_job import run
    from kgot.graph_model.records import canonical_json

    rng = random.Random(7)
    graph = nx.MultiDiGraph()
    for i in range(40):
        graph.add_node(f"n-{i}", label=rng.choice(["Thing", "Place"]), name=f"name {i}", v=i)
    for _ in range(70):
        source, target = rng.sample(sorted(graph.nodes), 2)
        relationship = rng.choice(["LINKS", "NEAR"])
        key = rng.choice([relationship, relationship + "~2", "custom"])
        props = {"w": rng.randint(0, 3)} if rng.random() < 0.4 else {}
        graph.add_edge(source, target, key=key, relationship=relationship, **props)
    data = graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True)).encode()
    checked = rejected = 0
    for _ in range(8):
        for update in _random_updates(graph, rng):
            expected, expected_problems = _reference_write(data, update)
            outcome = run("write", data, update)
            assert bool(expected_problems) == (not outcome["ok"]), (update, expected_problems)
            rejected += not outcome["ok"]
            if outcome["ok"]:
                for field, items in expected.items():
                    got = sorted(map(canonical_json, outcome["changeset"][field]))
                    assert got == sorted(map(canonical_json, items)), (update, field)
            checked += 1
    assert checked > 90
    assert 10 < rejected < checked - 30  # both accepted and rejected updates were compared


def test_the_job_input_follows_changes_element_by_element(sandbox):
    """The N-Triples a job loads are kept as per-node and per-edge-group fragments; after
    additions, property changes, parallel edges, removals and re-additions they still say
    exactly what encoding the host's graph afresh says."""
    backend = open_backend("rdf", sandbox, people_graph())
    backend.ntriples()  # the first encoding; later ones follow changesets

    def fresh() -> set[str]:
        return set(_triples(backend.to_networkx()))

    steps = [
        Changeset(added_nodes=(Node("grace", "Person", {"name": "Grace"}),)),
        Changeset(added_edges=(Edge("grace", "ada", "KNEW"),)),
        Changeset(added_edges=(Edge("grace", "ada", "KNEW", "KNEW~2", {"year": 1950}),)),
        Changeset(changed_edges=(Edge("grace", "ada", "KNEW", "KNEW~2", {"year": 1951}),)),
        Changeset(changed_nodes=(Node("grace", "Person", {"name": "Grace Hopper"}),)),
        Changeset(removed_edges=(("grace", "ada", "KNEW"),)),
        Changeset(
            removed_nodes=("grace",),
            removed_edges=(("grace", "ada", "KNEW~2"),),
        ),
        Changeset(
            added_nodes=(Node("grace", "Robot", {}),),
            added_edges=(Edge("grace", "ada", "KNEW"),),
        ),
    ]
    for changeset in steps:
        backend.apply(changeset)
        assert set(_triples_of(backend.ntriples())) == fresh(), changeset.summary()


def _triples_of(ntriples: bytes) -> list[str]:
    return [line for line in ntriples.decode("utf-8").splitlines() if line]


@pytest.mark.parametrize(
    "lexical", [str(2**63), str(-(2**63) - 1), "9" * 5000], ids=["2**63", "-2**63-1", "5000 digits"]
)
def test_integer_literals_outside_64_bits_are_named_as_such(lexical):
    # A 5,000-digit literal was reported as "not a valid xsd:integer".
    integer = "<http://www.w3.org/2001/XMLSchema#integer>"
    text = (
        "<urn:kgot:node:x> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <urn:kgot:type:T> .\n"
        f'<urn:kgot:node:x> <urn:kgot:prop:n> "{lexical}"^^{integer} .\n'
    )
    store = ox.Store()
    store.load(text.encode(), ox.RdfFormat.N_TRIPLES)
    decoded = decode(store.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    (problem,) = decoded.problems
    assert "is an integer outside the signed 64-bit range" in problem
