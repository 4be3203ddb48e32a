"""Runs and LangGraph checkpoints kept by the store."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from kgot.errors import EntityNotFoundError, StoreError
from kgot.graph_model import Changeset, Node
from kgot.persistence import Provenance, Store, open_checkpointer, open_store
from kgot.persistence.target import parse_target


def test_runs_are_recorded_resumed_and_listed(store: Store) -> None:
    store.create_entity("alice")
    store.start_run("r1", "Who was Ada?", "alice", {"backend": "networkx"})
    store.start_run("r2", "What is 2+2?", None, {})
    record = store.get_run("r1")
    assert record is not None
    assert (record.status, record.entity, record.attempts) == ("running", "alice", 1)
    store.finish_run("r1", "interrupted", None, {"iterations": 2})
    store.start_run("r1", "Who was Ada?", "alice", {"backend": "networkx"})  # resumed
    store.finish_run("r1", "answered", "A mathematician", {"iterations": 3, "cost_usd": None})
    record = store.get_run("r1")
    assert record is not None
    assert (record.status, record.answer, record.attempts) == ("answered", "A mathematician", 2)
    assert record.totals == {"iterations": 3, "cost_usd": None}
    assert record.finished_at is not None and record.started_at <= record.finished_at
    assert [r.run_id for r in store.list_runs(entity="alice")] == ["r1"]
    assert {r.run_id for r in store.list_runs()} == {"r1", "r2"}
    assert len(store.list_runs(limit=1)) == 1
    assert store.get_run("nope") is None
    assert record.to_dict()["entity"] == "alice"


def test_run_errors_are_clear(store: Store) -> None:
    with pytest.raises(EntityNotFoundError, match="kgot entities create ghost"):
        store.start_run("r1", "q", "ghost", {})
    store.start_run("r1", "q", None, {})
    store.create_entity("alice")
    with pytest.raises(StoreError, match="run 'r1' was started for another entity"):
        store.start_run("r1", "q", "alice", {})
    with pytest.raises(StoreError, match="no run 'r9' was started"):
        store.finish_run("r9", "answered", "x", {})
    with pytest.raises(StoreError, match="unknown run status 'finished'"):
        store.finish_run("r1", "finished", "x", {})
    with pytest.raises(StoreError, match="unknown run kind 'cycle'"):
        store.start_run("r2", "q", None, {}, kind="cycle")
    with pytest.raises(StoreError, match="run id 'r1' is taken by a run of kind 'ask'"):
        store.start_run("r1", "q", None, {}, kind="ingest")


def test_ingestions_and_cycles_are_runs_whose_commits_are_found_by_run(store: Store) -> None:
    store.create_entity("alice")
    store.start_run("ingest-1", "ingestion into alice", "alice", {}, kind="ingest")
    session = store.session("alice")
    for number, run_id in enumerate(["ingest-1", "someone-else", "ingest-1"]):
        session.commit(
            Changeset(added_nodes=(Node(f"n{number}", "Thing", {"name": f"n{number}"}),)),
            Provenance(run_id=run_id, step="ingest", source_ref=f"doc{number}.md"),
        )
    store.finish_run("ingest-1", "done", "2 commits", {"llm_calls": 2})
    record = store.get_run("ingest-1")
    assert record is not None
    assert (record.kind, record.status, record.to_dict()["kind"]) == ("ingest", "done", "ingest")
    written = store.run_commits("ingest-1")
    assert [(c.entity, c.version, c.source_ref) for c in written] == [
        ("alice", 1, "doc0.md"),
        ("alice", 3, "doc2.md"),
    ]
    assert written[0].to_dict()["committed_at"].endswith("Z")
    assert store.run_commits("nothing") == []
    store.start_run("r-ask", "q", None, {})
    assert store.get_run("r-ask").kind == "ask"  # type: ignore[union-attr]


class Counter(TypedDict):
    steps: Annotated[list[str], operator.add]


def counting_graph(saver):
    builder = StateGraph(Counter)
    builder.add_node("step", lambda state: {"steps": ["did"]})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)


async def run_and_read(url: str, thread: str) -> list[str]:
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10}
    async with open_checkpointer(url) as saver:
        await counting_graph(saver).ainvoke({"steps": ["start"]}, config)
    async with open_checkpointer(url) as saver:  # a new process would see the same
        state = await counting_graph(saver).aget_state(config)
        return list(state.values["steps"])


async def has_checkpoint(url: str, thread: str) -> bool:
    async with open_checkpointer(url) as saver:
        return await saver.aget_tuple({"configurable": {"thread_id": thread}}) is not None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_checkpoints_persist_and_die_with_their_entity(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "fresh_postgres_url")
    store = open_store(url)
    store.create_entity("alice")
    store.start_run("run-a", "q", "alice", {})
    store.start_run("run-free", "q", None, {})
    assert asyncio.run(run_and_read(url, "run-a")) == ["start", "did"]
    assert asyncio.run(run_and_read(url, "run-free")) == ["start", "did"]
    if kind == "sqlite":
        assert parse_target(url).checkpoint_path.is_file()  # a sibling file, not the store
    store.delete_entity("alice")
    assert store.get_run("run-a") is None
    assert not asyncio.run(has_checkpoint(url, "run-a"))  # its graph state is gone too
    assert asyncio.run(has_checkpoint(url, "run-free"))
    store.close()


def test_an_unreachable_checkpoint_database_is_one_line() -> None:
    async def enter() -> None:
        async with open_checkpointer("postgresql://u:pw@127.0.0.1:1/db"):
            pass

    with pytest.raises(StoreError, match=r"cannot use database postgresql://u:\*\*\*@127"):
        asyncio.run(enter())
