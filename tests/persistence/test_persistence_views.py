"""The base a commit is checked against is explicit: a second load, an export or an import never
makes a caller's graph silently miss another writer's change; conflicts are never reported as
the model's mistakes."""

from __future__ import annotations

import pytest

from kgot.errors import ChangesetError
from kgot.graph_model import Changeset, Edge, Node, apply_to_networkx
from kgot.persistence import (
    CommitConflictError,
    Provenance,
    Store,
    export_graph,
    import_graph,
)
from kgot.persistence import transfer as transfer_module

PROV = Provenance(run_id="r", step="test")


def counter(store: Store) -> None:
    store.create_entity("e")
    store.session("e").commit(Changeset(added_nodes=(Node("c", "Quantity", {"value": 0}),)), PROV)


def increment(graph) -> Changeset:
    value = graph.nodes["c"]["value"] + 1
    return Changeset(changed_nodes=(Node("c", "Quantity", {"value": value}),))


@pytest.mark.slow
def test_an_export_on_the_session_does_not_hide_another_writers_update(store: Store) -> None:
    counter(store)
    a = store.session("e")
    graph = a.load_graph()
    b = store.session("e")
    b_graph = b.load_graph()
    b.commit(increment(b_graph), PROV)
    exported = export_graph(a)  # e.g. a progress export on the same session
    assert exported.nodes["c"]["value"] == 1
    with pytest.raises(CommitConflictError, match="another writer changed it at version 2"):
        a.commit(increment(graph), PROV)  # computed from the stale graph
    apply_to_networkx(graph, a.refresh())
    a.commit(increment(graph), PROV)
    assert store.session("e").load_graph().nodes["c"]["value"] == 2  # no increment lost


def test_a_second_graph_commits_against_its_own_version(store: Store) -> None:
    counter(store)
    session = store.session("e")
    tracked = session.load_graph()
    other = store.session("e")
    other.commit(increment(other.load_graph()), PROV)
    second = session.load_graph(track=False)  # a look at the current state
    assert second.graph["kgot_version"] == 2 and session.version == 1
    session.commit(increment(second), PROV, base=second.graph["kgot_version"])
    with pytest.raises(CommitConflictError):
        session.commit(increment(tracked), PROV)  # the tracked graph is still at version 1
    delta = session.refresh()  # brings both other commits, the explicit-base one included
    assert [n.properties["value"] for n in delta.changed_nodes] == [2]
    apply_to_networkx(tracked, delta)
    session.commit(increment(tracked), PROV)
    assert store.session("e").load_graph().nodes["c"]["value"] == 3


@pytest.mark.slow
def test_an_edge_to_a_node_another_writer_removed_is_a_conflict(store: Store) -> None:
    store.create_entity("e")
    store.session("e").commit(
        Changeset(
            added_nodes=(Node("x", "Concept", {"name": "x"}), Node("y", "Concept", {"name": "y"}))
        ),
        PROV,
    )
    a, b = store.session("e"), store.session("e")
    a.load_graph()
    b.load_graph()
    b.commit(Changeset(removed_nodes=("x",)), PROV)
    link = Changeset(added_edges=(Edge("y", "x", "related_to", "related_to"),))
    assert a.check(link) == []  # not the writer's mistake: it reaches commit as a conflict
    with pytest.raises(CommitConflictError) as raised:
        a.commit(link, PROV)
    assert "target node 'x': another writer removed it at version 2" in str(raised.value)
    # A node that was never there is the writer's mistake, as before.
    with pytest.raises(ChangesetError) as raised:
        b.commit(Changeset(added_edges=(Edge("y", "ghost", "related_to", "related_to"),)), PROV)
    assert not isinstance(raised.value, CommitConflictError)
    assert "target node 'ghost' does not exist in this graph" in str(raised.value)


def test_an_import_racing_another_writer_starts_over_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter(store)
    session = store.session("e")
    session.load_graph()
    incoming = store.session("e").load_graph(track=False)
    incoming.nodes["c"]["value"] = 10
    incoming.add_node("n", label="Concept", name="new")
    original = transfer_module.diff_graphs
    calls = []

    def racing_diff(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # another writer changes the counter mid-import
            other = store.session("e")
            other.commit(increment(other.load_graph()), PROV)
        return original(*args, **kwargs)

    monkeypatch.setattr(transfer_module, "diff_graphs", racing_diff)
    result = import_graph(session, incoming, Provenance(run_id="", step="import"))
    assert len(calls) == 2 and result.version_before == 2 and result.version_after == 3
    graph = store.session("e").load_graph()
    assert graph.nodes["c"]["value"] == 10 and "n" in graph
    assert session.version == 1  # the tracked view is untouched: refresh brings the import
    assert {n.id for n in session.refresh().added_nodes} == {"n"}


@pytest.mark.slow
def test_many_missing_edge_ends_are_reported_in_a_capped_list(store: Store) -> None:
    from kgot.persistence.validation import MAX_PROBLEMS

    store.create_entity("e")
    session = store.session("e")
    session.commit(Changeset(added_nodes=(Node("y", "Concept", {"name": "y"}),)), PROV)
    dangling = Changeset(
        added_edges=tuple(Edge("y", f"ghost{i}", "related_to", f"r{i}") for i in range(200))
    )
    with pytest.raises(ChangesetError) as raised:
        session.commit(dangling, PROV)
    for problems in (session.check(dangling), raised.value.problems):
        assert len(problems) == MAX_PROBLEMS + 1
        assert "target node 'ghost0' does not exist in this graph" in problems[0]
        assert problems[-1] == f"… and {200 - MAX_PROBLEMS} more problems of the same kinds"
