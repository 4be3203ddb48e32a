"""The resident graph: a run's worker holds its graph between jobs and never diverges from
the host's, whatever happens to a job, a changeset or the worker; and it never holds two runs'
graphs."""

from __future__ import annotations

import json
from typing import Any

import networkx as nx
import pytest

from kgot.config import SandboxSettings
from kgot.errors import ChangesetError, CodeExecutionError
from kgot.graph_backends import open_backend
from kgot.graph_backends.common import PropertyGraphBackend
from kgot.graph_backends.jobs.resident import HOOK
from kgot.graph_backends.runner import job_bundle
from kgot.graph_model import Changeset, Edge, Node
from kgot.sandbox import Job, open_sandbox
from kgot.sandbox.resident import StateRefused
from kgot.tests.graph_backends.graph_fixtures import chain_graph
from kgot.tests.support.sandbox_probe import machine_problem

pytestmark = pytest.mark.skipif(
    machine_problem("auto") is not None,
    reason=f"resident workers need an isolating sandbox: {machine_problem('auto')}",
)


@pytest.fixture(scope="module")
def pool():
    box = open_sandbox(SandboxSettings(timeout=20, pool_size=1))
    yield box
    box.close()


def _backend(pool, name: str, graph: nx.MultiDiGraph | None = None) -> PropertyGraphBackend:
    backend = open_backend(name, pool, graph if graph is not None else chain_graph(6))
    assert isinstance(backend, PropertyGraphBackend)
    return backend


def _held_graph(backend: PropertyGraphBackend) -> Any:
    """The graph as a job on the resident worker sees it, in a comparable form."""
    if backend.name == "networkx":
        value = backend.query(
            "result = {'nodes': [[n, d] for n, d in G.nodes(data=True)], "
            "'edges': [[s, t, k, d] for s, t, k, d in G.edges(keys=True, data=True)]}"
        ).value
        return (
            sorted(json.dumps(n, sort_keys=True) for n in value["nodes"]),
            sorted(json.dumps(e, sort_keys=True) for e in value["edges"]),
        )
    rows = backend.query("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", max_items=100_000).value
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def _host_graph(backend: PropertyGraphBackend) -> Any:
    """The host's graph of record in the same form."""
    graph = backend.to_networkx()
    if backend.name == "networkx":
        return (
            sorted(json.dumps([n, d], sort_keys=True) for n, d in graph.nodes(data=True)),
            sorted(
                json.dumps([s, t, k, d], sort_keys=True)
                for s, t, k, d in graph.edges(keys=True, data=True)
            ),
        )
    fresh = open_backend("rdf", open_sandbox(SandboxSettings(pool_size=0)), graph)
    rows = fresh.query("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", max_items=100_000).value
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def _writes(name: str) -> list[str]:
    """Adds, changes, parallel edges and removals, in each backend's language."""
    if name == "networkx":
        return [
            "G.add_node('x', label='Item', name='new', tags=['a', 'b'])\n"
            "G.add_edge('x', 'n0', relationship='NEXT')",
            "G.nodes['n1']['name'] = 'renamed'\nG.nodes['x']['tags'].append('c')",
            "G.add_edge('n0', 'n1', relationship='NEXT', weight=2)\n"
            "G.add_edge('n0', 'n1', relationship='LINKS')",
            "G.remove_node('n3')",
            "G.remove_edge('n0', 'n1', key='NEXT')\nG.nodes['n4'].pop('number')",
        ]
    return [
        'INSERT DATA { node:x a type:Item ; prop:name "new" . node:x rel:NEXT node:n0 . }',
        'DELETE { node:n1 prop:name ?o } INSERT { node:n1 prop:name "renamed" } '
        "WHERE { node:n1 prop:name ?o }",
        "INSERT DATA { node:n0 rel:LINKS node:n1 . }",
        "DELETE WHERE { node:n3 ?p ?o } ; DELETE WHERE { ?s ?q node:n3 }",
        "DELETE WHERE { node:n4 prop:number ?o }",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["networkx", "rdf"])
def test_the_held_graph_follows_every_applied_change(pool, name):
    backend = _backend(pool, name, chain_graph(40))  # large enough for deltas to pay
    for code in _writes(name):
        backend.apply(backend.propose(code))
        assert _held_graph(backend) == _host_graph(backend)
    assert backend.resident is not None
    assert backend.resident.loads == 1  # loaded once, then only the changes travelled
    assert backend.resident.deltas >= len(_writes(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["networkx", "rdf"])
def test_changes_applied_from_elsewhere_and_a_replaced_graph_reach_the_worker(pool, name):
    backend = _backend(pool, name, chain_graph(40))
    _held_graph(backend)
    assert backend.resident is not None
    resident = backend.resident
    # Another writer's changeset (as a concurrent commit on the entity arrives): no job ran.
    backend.apply(
        Changeset(
            added_nodes=(Node("w", "Item", {"name": "from elsewhere"}),),
            added_edges=(Edge("w", "n2", "NEXT"),),
            removed_edges=(("n1", "n2", "NEXT"),),
        )
    )
    assert _held_graph(backend) == _host_graph(backend)
    assert (resident.loads, resident.deltas) == (1, 1)
    backend.load(chain_graph(3, label="Other"))
    assert _held_graph(backend) == _host_graph(backend)
    assert resident.loads == 2  # a replaced graph travels whole


@pytest.mark.slow
@pytest.mark.parametrize("name", ["networkx", "rdf"])
def test_rejected_and_unapplied_changes_never_reach_the_worker(pool, name):
    backend = _backend(pool, name)
    before = _host_graph(backend)
    bad = (
        "G.add_node('orphan', name='no label')"
        if name == "networkx"
        else 'INSERT DATA { node:orphan prop:name "no label" }'
    )
    with pytest.raises(ChangesetError):
        backend.propose(bad)
    backend.propose(_writes(name)[0])  # proposed, never applied
    assert _held_graph(backend) == before == _host_graph(backend)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["networkx", "rdf"])
def test_a_job_that_writes_to_its_graph_and_fails_leaves_the_held_graph_alone(pool, name):
    backend = _backend(pool, name)
    before = _host_graph(backend)
    if name == "networkx":
        code = "G.remove_node('n0')\nG.nodes['n1']['name'] = 'x'\nraise ValueError('late')"
        with pytest.raises(CodeExecutionError):
            backend.propose(code)
        # A read may change its copy too: nothing of it survives the job.
        backend.query("G.clear()\nresult = 0")
    else:
        backend.query("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    assert _held_graph(backend) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", ["networkx", "rdf"])
def test_a_killed_job_and_a_lost_worker_cost_a_reload_not_a_wrong_graph(pool, name):
    backend = _backend(pool, name)
    backend.apply(backend.propose(_writes(name)[0]))
    assert backend.resident is not None
    worker = backend.resident.worker
    generation = worker.generation
    # A job that kills everything it can reach, its worker's supervisor included.
    result = worker.run(Job(code="import os, signal\nos.kill(-1, signal.SIGKILL)"))
    assert not result.ok
    assert worker.generation == generation + 1  # the worker was replaced
    assert _held_graph(backend) == _host_graph(backend)
    assert backend.resident.loads == 2  # the new worker got the graph whole


@pytest.mark.slow
def test_a_code_timeout_is_reported_and_the_graph_stays(pool):
    backend = _backend(pool, "networkx")
    backend.timeout_s = 1.0
    with pytest.raises(CodeExecutionError, match="did not finish in time"):
        backend.propose("G.add_node('y', label='Item')\nwhile True:\n    pass")
    backend.timeout_s = None
    assert _held_graph(backend) == _host_graph(backend)


@pytest.mark.slow
def test_a_worker_never_holds_two_runs_graphs(pool):
    first, second = _backend(pool, "networkx"), _backend(pool, "networkx", chain_graph(2))
    assert _held_graph(first) != _held_graph(second)
    assert first.resident is not None and second.resident is not None
    assert first.resident.worker is not second.resident.worker
    # The state hook refuses another run's key on a worker that holds one.
    request = {"op": "load", "key": "another-run", "kind": "networkx", "version": 1, "base": None}
    with pytest.raises(StateRefused, match="another run's graph"):
        first.resident.worker.set_state(HOOK, request, [b"", b"[]"])
    assert _held_graph(first) == _host_graph(first)


@pytest.mark.slow
def test_shared_pool_workers_refuse_state_and_hold_no_graph(pool):
    backend = _backend(pool, "networkx")
    _held_graph(backend)
    # A job of the shared pool (the python tool's, say) sees nothing of any run's graph.
    probe = "import sys\nprint('kgotjob.resident' in sys.modules, 'kgotjob' in sys.modules)"
    assert pool.run(Job(code=probe)).stdout.split() == ["False", "False"]
    from kgot.sandbox.pool import PooledSandbox

    assert isinstance(pool, PooledSandbox)
    worker = pool._acquire()
    try:
        request = {"op": "load", "key": "k", "kind": "networkx", "version": 1, "base": None}
        answer = worker.send_state(HOOK, request, [job_bundle(), b"[]"], 30.0)
    finally:
        pool._release(worker)
    assert answer == {"ok": False, "error": "this worker does not hold resident state"}


@pytest.mark.slow
def test_resident_graph_can_be_turned_off():
    box = open_sandbox(SandboxSettings(pool_size=1, resident_graph=False))
    try:
        backend = _backend(box, "networkx")
        assert backend.query("result = G.number_of_nodes()").value == 6
        assert backend.resident is None
    finally:
        box.close()


@pytest.mark.slow
def test_a_worker_that_cannot_take_the_graph_leaves_the_old_way_working(pool, monkeypatch):
    backend = _backend(pool, "networkx")
    backend.apply(backend.propose(_writes("networkx")[0]))
    assert backend.resident is not None
    worker = backend.resident.worker

    def refuse(job, state):
        if state is not None:
            raise StateRefused("MemoryError: the graph does not fit")
        raise AssertionError("a job ran without its graph")

    monkeypatch.setattr(worker, "run_with_state", refuse)
    backend.load(chain_graph(4))  # the next job must send the whole graph: refused
    assert backend.query("result = sorted(G.nodes)").value == ["n0", "n1", "n2", "n3"]
    assert backend.resident is None  # from now on the graph travels with every job
    backend.apply(backend.propose(_writes("networkx")[0]))
    assert "x" in backend.to_networkx()
