"""Tenant isolation: nothing of one entity is reachable from another's session, graph queries
(Python and SPARQL) or sandboxed code. (The CLI paths are covered in the CLI tests.)"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgot.config import SandboxSettings
from kgot.errors import QueryError, StepFailure
from kgot.graph_backends import open_backend
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, Store, TypeRejectedError
from kgot.sandbox import Sandbox, open_sandbox
from kgot.sandbox.base import Job

PROV = Provenance(run_id="r", step="update_graph")


def two_tenants(store: Store) -> None:
    """Alice and Bob use the same ids; Bob also has facts Alice must never see."""
    for name in ("alice", "bob"):
        store.create_entity(name)
        store.session(name).commit(
            Changeset(
                added_nodes=(
                    Node("acct", "Concept", {"name": f"{name}-secret"}),
                    Node("hub", "Concept", {"name": f"{name}-hub"}),
                ),
                added_edges=(Edge("acct", "hub", "related_to", "related_to"),),
            ),
            PROV,
        )
    store.session("bob").commit(
        Changeset(added_nodes=(Node("bob-only", "Concept", {"name": "bob-private"}),)), PROV
    )


def names(graph) -> set[str]:
    return {str(data.get("name")) for _, data in graph.nodes(data=True)}


def test_the_python_api_never_crosses_entities(store: Store) -> None:
    two_tenants(store)
    alice, bob = store.session("alice"), store.session("bob")
    assert names(alice.load_graph()) == {"alice-secret", "alice-hub"}
    assert names(alice.load_graph(include_meta=True, as_of=1)) == {"alice-secret", "alice-hub"}
    assert [h["properties"]["name"] for h in alice.node_history("acct")] == ["alice-secret"]
    assert alice.node_history("bob-only") == []
    assert alice.stats().nodes == 2 and bob.stats().nodes == 3
    assert len(alice.commits()) == 1 and len(bob.commits()) == 2

    # Alice cannot link to, change or remove Bob's facts, even knowing their ids.
    problems = alice.check(Changeset(added_edges=(Edge("acct", "bob-only", "related_to"),)))
    assert any("target node 'bob-only' does not exist" in p for p in problems)
    assert alice.commit(Changeset(removed_nodes=("bob-only",)), PROV).version == 1  # nothing to do
    alice.commit(Changeset(changed_nodes=(Node("acct", "Concept", {"name": "changed"}),)), PROV)
    assert names(bob.load_graph()) == {"bob-secret", "bob-hub", "bob-private"}

    # Bob's commits are not "other writers" for Alice: catching up brings nothing of his.
    bob.commit(Changeset(added_nodes=(Node("new", "Concept", {"name": "bob-new"}),)), PROV)
    assert alice.refresh().is_empty

    # Types are scoped too.
    store.create_type(
        {"kind": "node", "name": "Account", "description": "A bank account."}, entity="bob"
    )
    assert "Account" not in alice.type_catalog().node_types
    assert alice.check(Changeset(added_nodes=(Node("x", "Account", {}),)))
    with pytest.raises(TypeRejectedError, match="no current node type 'Account' in entity"):
        store.remove_type("Account", entity="alice")
    assert "Account" in bob.type_catalog().node_types


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = open_sandbox(SandboxSettings(pool_size=0, timeout=60))
    yield box
    box.close()


@pytest.mark.slow
def test_graph_queries_only_see_the_loaded_entity(store: Store, sandbox: Sandbox) -> None:
    two_tenants(store)
    graph = store.session("alice").load_graph()
    python = open_backend("networkx", sandbox, graph)
    found = python.query("result = sorted(str(d.get('name')) for _, d in G.nodes(data=True))")
    assert found.value == ["alice-hub", "alice-secret"]
    sparql = open_backend("rdf", sandbox, graph)
    literals = sparql.query("SELECT ?o WHERE { ?s ?p ?o FILTER(isLiteral(?o)) }")
    text = json.dumps(literals.value)
    assert "alice-secret" in text
    assert "bob" not in text


@pytest.mark.slow
def test_sandboxed_code_cannot_reach_the_store(
    store: Store, store_url: str, sandbox: Sandbox
) -> None:
    if sandbox.name == "subprocess":
        pytest.skip("the plain subprocess sandbox does not isolate files or network")
    two_tenants(store)
    graph = store.session("alice").load_graph()
    backend = open_backend("networkx", sandbox, graph)
    if store.target.is_sqlite:
        path = store.target.sqlite_path
        with pytest.raises(QueryError, match="No such file or directory"):
            backend.query(f"result = open({str(path)!r}, 'rb').read(16)")
    else:
        host = store.target.url.host or "127.0.0.1"
        port = store.target.url.port or 5432
        code = (
            "import socket\n"
            f"socket.create_connection(({host!r}, {port}), timeout=3)\n"
            "result = 'connected'\n"
        )
        with pytest.raises(StepFailure):
            backend.query(code)
    # Raw jobs see no trace of any store either: /tmp is private, holding at most the Python
    # environment jobs run on when it lives there (mounted read-only over the private /tmp).
    result = sandbox.run(Job(code="import os\nprint(sorted(os.listdir('/tmp')))"))
    environments = {
        Path(prefix).resolve().relative_to("/tmp").parts[0]
        for prefix in {sys.prefix, sys.base_prefix}
        if Path(prefix).resolve().is_relative_to("/tmp")
    }
    assert result.ok and result.stdout.strip() == str(sorted(environments))
