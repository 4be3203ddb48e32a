"""The rdf backend against a SPARQL 1.1 endpoint over loopback HTTP.

The endpoint is a small SPARQL Protocol server backed by an Oxigraph store, run in a thread:
queries and updates travel as real HTTP requests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pyoxigraph as ox
import pytest

from kgot.errors import ChangesetError, QueryError, StoreError
from kgot.graph_backends import open_backend
from kgot.graph_backends.jobs.rdf_decode import decode
from kgot.graph_backends.jobs.rdf_model import graph_ntriples
from kgot.graph_model import Changeset, Node
from kgot.tests.graph_backends.graph_fixtures import people_graph, snapshot


class Endpoint:
    """A SPARQL endpoint on 127.0.0.1: /sparql for queries, /update for updates."""

    def __init__(self) -> None:
        self.store = ox.Store()
        self.hang = threading.Event()  # set: queries wait until released
        self.release = threading.Event()
        self.refuse_updates = False
        self.queries: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                url = urlparse(self.path)
                if url.path == "/update":
                    self._update(body)
                else:
                    self._query(body, parse_qs(url.query))

            def _update(self, body: str) -> None:
                if endpoint.refuse_updates:
                    self._send(403, b"read-only endpoint", "text/plain")
                    return
                try:
                    endpoint.store.update(body)
                except SyntaxError as error:
                    self._send(400, str(error).encode(), "text/plain")
                    return
                self._send(204, b"", "text/plain")

            def _query(self, body: str, params: dict[str, list[str]]) -> None:
                endpoint.queries.append(body)
                if endpoint.hang.is_set():
                    endpoint.release.wait(30)
                    return
                graphs = params.get("default-graph-uri")
                options = {"default_graph": [ox.NamedNode(g) for g in graphs]} if graphs else {}
                try:
                    results = endpoint.store.query(body, **options)
                except SyntaxError as error:
                    self._send(400, str(error).encode(), "text/plain")
                    return
                if isinstance(results, ox.QueryTriples):
                    payload = results.serialize(format=ox.RdfFormat.N_TRIPLES)
                    self._send(200, payload, "application/n-triples")
                else:
                    payload = results.serialize(format=ox.QueryResultsFormat.JSON)
                    self._send(200, payload, "application/sparql-results+json")

            def _send(self, status: int, payload: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def graph(self, named: str | None = None) -> tuple[dict, dict]:
        """What the endpoint holds, decoded as a property graph (snapshot form)."""
        where = ox.NamedNode(named) if named else ox.DefaultGraph()
        decoded = decode(self.store.quads_for_pattern(None, None, None, where))
        assert decoded.problems == []
        import networkx as nx

        graph = nx.MultiDiGraph()
        graph.add_nodes_from(decoded.nodes.items())
        graph.add_edges_from((s, t, k, a) for (s, t, k), a in decoded.edges.items())
        return snapshot(graph)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.close()


def open_remote(sandbox, endpoint: Endpoint, graph=None, **options):
    return open_backend(
        "rdf",
        sandbox,
        graph,
        endpoint=f"{endpoint.url}/sparql",
        endpoint_update=f"{endpoint.url}/update",
        **options,
    )


@pytest.mark.slow
def test_a_given_graph_is_written_to_the_endpoint(sandbox, endpoint):
    open_remote(sandbox, endpoint, people_graph())
    assert endpoint.graph() == snapshot(people_graph())


@pytest.mark.slow
def test_an_existing_remote_graph_is_the_starting_point(sandbox, endpoint):
    graph = people_graph()
    endpoint.store.load(
        graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True)).encode(),
        ox.RdfFormat.N_TRIPLES,
    )
    backend = open_remote(sandbox, endpoint)
    assert snapshot(backend.to_networkx()) == snapshot(graph)


@pytest.mark.slow
def test_queries_run_at_the_endpoint(sandbox, endpoint):
    backend = open_remote(sandbox, endpoint, people_graph())
    endpoint.store.update(
        'INSERT DATA { <urn:kgot:node:ada> <urn:kgot:prop:nickname> "Enchantress" }'
    )
    rows = backend.query("SELECT ?n WHERE { node:ada prop:nickname ?n }").value
    assert rows == [{"n": "Enchantress"}]
    assert backend.query("ASK { node:ada rel:KNEW node:charles }").value is True
    assert any("nickname" in q for q in endpoint.queries)
    with pytest.raises(QueryError, match="SERVICE"):
        backend.query("SELECT * WHERE { SERVICE <http://x> { ?s ?p ?o } }")


@pytest.mark.slow
def test_the_endpoint_gets_the_text_the_guard_checked(sandbox, endpoint):
    """Escapes are decoded once, by the guard; the endpoint never sees them (an endpoint that
    decodes them itself, as Jena does, would run something else than was checked)."""
    backend = open_remote(sandbox, endpoint, people_graph())
    rows = backend.query(r"SELECT ?\u006E WHERE { ?n a type:Person } ORDER BY ?n").value
    assert rows == [{"n": "node:ada"}, {"n": "node:charles"}]
    assert endpoint.queries[-1].endswith("SELECT ?n WHERE { ?n a type:Person } ORDER BY ?n")


@pytest.mark.slow
def test_only_standard_sparql_is_sent_to_an_endpoint(sandbox, endpoint):
    """An endpoint may have extensions that reach out without any keyword the guard looks for
    (Virtuoso's `DEFINE input:grab-all` dereferences IRIs): text for an endpoint is always
    parsed, and what the SPARQL 1.1 grammar rejects is not sent."""
    backend = open_remote(sandbox, endpoint, people_graph())
    sent = len(endpoint.queries)
    for query in (
        'DEFINE input:grab-all "yes" SELECT * WHERE { ?s ?p ?o }',
        "SELECT * WHERE { ?s ?p ?o } LIMIT",
    ):
        with pytest.raises(QueryError, match="SPARQL syntax error"):
            backend.query(query)
    assert len(endpoint.queries) == sent


@pytest.mark.slow
def test_applied_changes_reach_the_endpoint(sandbox, endpoint):
    backend = open_remote(sandbox, endpoint, people_graph())
    for update in (
        'INSERT DATA { node:grace a type:Person ; prop:name "Grace Hopper" . '
        "node:grace rel:KNEW node:ada }",
        "DELETE { ?e prop:year ?y } INSERT { ?e prop:year 1842 } WHERE "
        "{ ?e kg:source node:ada ; kg:relationship rel:WROTE ; prop:year ?y }",
        "DELETE WHERE { node:london ?p ?o } ; DELETE WHERE { ?s ?p node:london }",
        "INSERT DATA { [] kg:source node:ada ; kg:relationship rel:WROTE ; "
        'kg:target node:note_g ; kg:key "draft" ; prop:pages 3 }',
    ):
        backend.apply(backend.propose(update))
        assert endpoint.graph() == snapshot(backend.to_networkx())
    assert backend.stats().nodes_by_label == {"Document": 1, "Person": 3}


@pytest.mark.slow
def test_a_named_graph_keeps_kgot_apart(sandbox, endpoint):
    endpoint.store.update('INSERT DATA { <urn:other> <urn:p> "unrelated" }')
    named = "urn:kgot:graph:test"
    backend = open_remote(sandbox, endpoint, people_graph(), endpoint_graph=named)
    backend.apply(backend.propose('INSERT DATA { node:x a type:Thing ; prop:v "1" }'))
    assert endpoint.graph(named) == snapshot(backend.to_networkx())
    assert backend.query("SELECT ?v WHERE { node:x prop:v ?v }").value == [{"v": "1"}]
    assert len(list(endpoint.store.quads_for_pattern(None, None, None, ox.DefaultGraph()))) == 1


@pytest.mark.slow
def test_a_refused_update_changes_nothing(sandbox, endpoint):
    backend = open_remote(sandbox, endpoint, people_graph())
    endpoint.refuse_updates = True
    changeset = Changeset(added_nodes=(Node("grace", "Person"),))
    with pytest.raises(StoreError, match="refused an update"):
        backend.apply(changeset)
    assert not backend.to_networkx().has_node("grace")
    with pytest.raises(ChangesetError):
        backend.apply(Changeset(changed_nodes=(Node("ghost", "Person"),)))


@pytest.mark.slow
def test_a_hanging_endpoint_times_out(sandbox, endpoint):
    # Loading the graph goes through the same timeout: 2 s leaves a busy machine room for it,
    # while the hung query below would never answer.
    backend = open_remote(sandbox, endpoint, people_graph(), timeout_s=2)
    endpoint.hang.set()
    with pytest.raises(QueryError, match=r"did not answer within 2 s"):
        backend.query("SELECT * WHERE { ?s ?p ?o }")


def test_an_unreachable_endpoint_is_named(sandbox):
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:9/sparql is unreachable"):
        open_backend("rdf", sandbox, endpoint="http://127.0.0.1:9/sparql")


@pytest.mark.slow
def test_a_query_cannot_read_another_named_graph(sandbox, endpoint):
    """Another run's graph lives in the same endpoint: no spelling of GRAPH reaches it, and
    what the guard lets through only sees kgot's own graph."""
    endpoint.store.update(
        "INSERT DATA { GRAPH <urn:kgot:graph:other-run> { <urn:kgot:node:secret> "
        '<urn:kgot:prop:pw> "tenant-B secret" } }'
    )
    named = "urn:kgot:graph:my-run"
    backend = open_remote(sandbox, endpoint, people_graph(), endpoint_graph=named)
    sent = len(endpoint.queries)
    for query in (
        "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
        "SELECT ?g ?s ?o WHERE { ?x ?y ?z .GRAPH ?g { ?s ?p ?o } }",
        r"SELECT * WHERE { ?x ?y ?z . \u0047RAPH ?g { ?s ?p ?o } }",
        "SELECT * FROM <urn:kgot:graph:other-run> WHERE { ?s ?p ?o }",
        "SELECT * FROM NAMED <urn:kgot:graph:other-run> WHERE { GRAPH ?g { ?s ?p ?o } }",
    ):
        with pytest.raises(QueryError, match=r"GRAPH|FROM"):
            backend.query(query)
    assert len(endpoint.queries) == sent  # refused before anything was sent
    rows = backend.query("SELECT ?o WHERE { ?s ?p ?o }").value
    assert rows and all("secret" not in str(row["o"]) for row in rows)


@pytest.mark.slow
def test_the_endpoint_is_never_made_to_fetch_a_url(sandbox, endpoint):
    from kgot.tests.graph_backends.test_graph_backends_rdf import Canary

    canary = Canary()
    try:
        backend = open_remote(sandbox, endpoint, people_graph())
        url = f"{canary.url}/internal-admin"
        for query in (
            f"SELECT * WHERE {{ ?x ?y ?z .SERVICE SILENT <{url}> {{ ?a ?b ?c }} }}",
            rf"SELECT * WHERE {{ \u0053ERVICE <{url}> {{ ?a ?b ?c }} }}",
        ):
            with pytest.raises(QueryError, match="SERVICE"):
                backend.query(query)
        assert canary.hits == []
    finally:
        canary.close()


@pytest.mark.slow
def test_construct_returns_the_same_triples_as_locally(sandbox, endpoint):
    query = "CONSTRUCT WHERE { node:ada rel:KNEW ?x }"
    remote = open_remote(sandbox, endpoint, people_graph()).query(query)
    local = open_backend("rdf", sandbox, people_graph()).query(query)
    assert remote.value == local.value == [["node:ada", "rel:KNEW", "node:charles"]]
    assert not remote.truncated


@pytest.mark.slow
def test_remote_rows_are_cut_at_the_cap(sandbox, endpoint):
    backend = open_remote(sandbox, endpoint, people_graph())
    result = backend.query("SELECT ?s ?p ?o WHERE { ?s ?p ?o }", max_items=3)
    assert len(result.value) == 3 and result.truncated
