"""Identical data on both databases, counts that match the loaded graph, corroboration by
distinct sources, owner-only checkpoints, deletion that leaves nothing readable, shadowed
starter types, and the Python example of docs/persistence.md."""

from __future__ import annotations

import asyncio
import os
import re
import stat
from pathlib import Path

import pytest

from kgot.errors import StoreError
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import (
    Provenance,
    Store,
    TypeRejectedError,
    open_checkpointer,
    open_store,
)

PROV = Provenance(run_id="r1", step="test", source_ref="https://a.example/1")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "persistence.md"
FLOATS = {
    "name": "f",
    "a": 1.0,
    "b": 2.5e-8,
    "c": 1e22,
    "d": -0.0,
    "e": 2**63 - 1,  # the widest integers a property may hold
    "e2": -(2**63),
    "f": 0.1 + 0.2,
    "g": 1.7976931348623157e308,
    "z": "last key first",
    "m": {"y": 1, "b": 2},
}


def test_values_read_back_exactly_as_written_on_both_databases(store: Store) -> None:
    store.create_entity("floats")
    session = store.session("floats")
    session.load_graph()
    session.commit(Changeset(added_nodes=(Node("f", "Thing", FLOATS),)), PROV)
    got = {k: v for k, v in store.session("floats").load_graph().nodes["f"].items()}
    assert got.pop("label") == "Thing"
    assert list(got) == list(FLOATS)  # key order kept (JSONB would sort keys)
    assert list(got["m"]) == ["y", "b"]
    for key, value in FLOATS.items():
        assert type(got[key]) is type(value) and got[key] == value, key
    assert str(got["d"]) == "-0.0"
    # Writing the same data again is a no-op, not a change (and not a conflict).
    version = session.commit(Changeset(changed_nodes=(Node("f", "Thing", FLOATS),)), PROV).version
    assert version == 1 and len(session.node_history("f")) == 1


def test_counts_leave_out_edges_of_expired_nodes(store: Store) -> None:
    store.create_entity("e")
    session = store.session("e")
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=tuple(Node(i, "Concept", {"name": i}) for i in ("y", "z", "w")),
            added_edges=(
                Edge("y", "z", "related_to", "related_to"),
                Edge("z", "w", "part_of", "part_of"),
                Edge("y", "w", "related_to", "related_to"),
            ),
        ),
        PROV,
    )
    expired = {"name": "z", "_expires_at": "2000-01-01T00:00:00Z"}
    session.commit(Changeset(changed_nodes=(Node("z", "Concept", expired),)), PROV)
    graph = session.load_graph()
    stats = session.stats()
    assert graph.number_of_edges() == stats.edges == store.get_entity("e").edges == 1
    assert stats.edges_by_relationship == {"related_to": 1}
    assert stats.nodes == graph.number_of_nodes() == 2
    assert [e.edges for e in store.list_entities()] == [1]


@pytest.mark.slow
def test_corroboration_counts_distinct_sources_and_keeps_them(store: Store) -> None:
    store.create_entity("e")
    fact = Changeset(added_nodes=(Node("ada", "Person", {"name": "Ada"}),))
    store.session("e").commit(fact, PROV)
    # The same page read again (another run): reinforcement, not independent confirmation.
    store.session("e").commit(fact, Provenance(run_id="r2", step="t", source_ref=PROV.source_ref))
    second = Changeset(
        added_nodes=(
            Node("ada", "Person", {"name": "Ada", "_source_ref": "b.pdf", "_confidence": 0.6}),
        )
    )
    store.session("e").commit(second, Provenance(run_id="r3", step="t"))
    store.session("e").commit(second, Provenance(run_id="r4", step="t"))  # b.pdf again
    session = store.session("e")
    (row,) = session.node_history("ada")
    assert row["corroborations"] == 2
    assert [(s["source_ref"], s["run_id"], s["confidence"]) for s in row["sources"]] == [
        ("b.pdf", "r3", 0.6)
    ]
    assert row["source_ref"] == PROV.source_ref and row["confidence"] == 1.0  # first writer's
    summaries = [c["summary"] for c in session.commits()]
    assert summaries[:3] == [
        "+1 node (1 reinforced)",
        "+1 node (1 corroborated)",
        "+1 node (1 reinforced)",
    ]


def test_checkpoints_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "kgot.db"
    open_store(str(db)).close()

    async def write_one() -> None:
        async with open_checkpointer(str(db)) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            from langgraph.checkpoint.base import empty_checkpoint

            await saver.aput(config, empty_checkpoint(), {}, {})
            files = sorted(tmp_path.glob("kgot.checkpoints.db*"))
            assert [f.name for f in files][:1] == ["kgot.checkpoints.db"]
            for file in files:
                assert stat.S_IMODE(file.stat().st_mode) == 0o600, file.name

    previous = os.umask(0o022)
    try:
        asyncio.run(write_one())
        # A file an older kgot created world-readable is made private on the next open.
        checkpoints = tmp_path / "kgot.checkpoints.db"
        checkpoints.chmod(0o644)
        asyncio.run(write_one())
    finally:
        os.umask(previous)
    with open_store(str(db)) as store, store._context.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA secure_delete").scalar() == 1


@pytest.mark.slow
def test_a_delete_whose_checkpoints_cannot_be_purged_deletes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.persistence import checkpoints

    store.create_entity("e")
    store.start_run("run-1", "q", "e", {})
    store.session("e").commit(Changeset(added_nodes=(Node("n", "Thing", {"name": "n"}),)), PROV)

    def unreachable(*_args, **_kwargs):
        raise StoreError("cannot delete checkpoints in x: disk I/O error")

    monkeypatch.setattr(checkpoints, "purge_checkpoints", unreachable)
    with pytest.raises(StoreError, match="disk I/O error"):
        store.delete_entity("e")
    assert store.get_entity("e").nodes == 1 and store.get_run("run-1") is not None
    monkeypatch.undo()
    store.delete_entity("e")  # the same call, retried, goes through
    assert store.list_entities() == []


def test_an_entity_type_may_shadow_a_global_starter_type_explicitly(store: Store) -> None:
    store.create_entity("acme")
    person = {
        "kind": "node",
        "name": "Person",
        "description": "A client of the fund.",
        "properties": {
            "type": "object",
            "required": ["name", "client_id"],
            "properties": {"name": {"type": "string"}, "client_id": {"type": "string"}},
        },
    }
    with pytest.raises(TypeRejectedError, match="--shadow") as raised:
        store.create_type(person, entity="acme")
    assert "node type 'Person' exists globally" in str(raised.value)
    store.create_type(person, entity="acme", shadow=True)
    assert store.type_catalog("acme").node_types["Person"].scope == "acme"
    store.create_entity("other")
    assert store.type_catalog("other").node_types["Person"].scope is None
    (problem,) = store.session("acme").check(
        Changeset(added_nodes=(Node("p", "Person", {"name": "P"}),))
    )
    assert "'client_id' is a required property" in problem


def test_an_entity_with_types_is_created_in_one_transaction(store: Store) -> None:
    bad_edge = {"kind": "edge", "name": "holds", "description": "d", "target": ["Security"]}
    with pytest.raises(TypeRejectedError, match="target node type 'Security' does not exist"):
        store.create_entity("fund", types=[bad_edge])
    assert store.list_entities() == []  # no entity left behind


def test_the_python_example_in_the_docs_runs(tmp_path: Path) -> None:
    (block,) = re.findall(r"## Using it from Python\n\n```python\n(.*?)```", DOCS.read_text(), re.S)
    code = block.replace('"~/kg/kgot.db"', repr(str(tmp_path / "kgot.db")))
    namespace: dict = {}
    exec(compile(code, "docs/persistence.md", "exec"), namespace)  # our own docs, not LLM output
    assert namespace["problems"] == [] and namespace["version"] == 1
    with open_store(str(tmp_path / "kgot.db")) as store:
        graph = store.session("acme-fund").load_graph()
    assert graph.has_edge("fund", "aapl", "owns")
