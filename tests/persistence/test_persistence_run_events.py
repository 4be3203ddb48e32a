"""Run events: each run's trace kept in order, appended across resumes, gone with its run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from kgot.errors import StoreError
from kgot.persistence import Store
from kgot.persistence.schema import TABLES


def _event(kind: str, iteration: int = 0, **fields: object) -> dict[str, object]:
    return {"type": kind, "iteration": iteration, **fields}


def _count_rows(store: Store) -> int:
    with store._context.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(TABLES.run_events)).scalar())


def test_events_come_back_in_order_and_resumes_append(store: Store) -> None:
    store.start_run("r1", "Why?", None, {})
    first = [_event("run_started", question="Why?"), _event("step_started", step="decide")]
    assert store.append_run_events("r1", first) == 2
    assert store.append_run_events("r1", []) == 2  # nothing to add: the last number
    store.finish_run("r1", "interrupted", None, {})

    store.start_run("r1", "Why?", None, {})  # resumed: numbering goes on
    later = [_event("step_finished", 1, step="decide", nested={"a": [1, 2.5, None]})]
    assert store.append_run_events("r1", later) == 3

    assert store.run_events("r1") == first + later
    with store._context.engine.connect() as connection:
        rows = connection.execute(
            select(TABLES.run_events.c.seq, TABLES.run_events.c.kind)
            .where(TABLES.run_events.c.run_id == "r1")
            .order_by(TABLES.run_events.c.seq)
        ).all()
    assert [tuple(row) for row in rows] == [
        (1, "run_started"),
        (2, "step_started"),
        (3, "step_finished"),
    ]


@pytest.mark.slow
def test_runs_never_see_each_others_events(store: Store) -> None:
    store.start_run("a", "A?", None, {})
    store.start_run("b", "B?", None, {})
    store.append_run_events("a", [_event("run_started", question="A?")])
    store.append_run_events("b", [_event("run_started", question="B?")])
    store.append_run_events("a", [_event("run_finished", answer="a")])
    assert [e.get("question") or e.get("answer") for e in store.run_events("a")] == ["A?", "a"]
    assert [e.get("question") for e in store.run_events("b")] == ["B?"]
    assert store.run_events("no-such-run") == []


def test_times_are_kept_per_event(store: Store) -> None:
    store.start_run("t", "When?", None, {})
    then = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    store.append_run_events(
        "t", [_event("a"), _event("b")], recorded_at=[then, then + timedelta(seconds=2)]
    )
    with store._context.engine.connect() as connection:
        times = connection.execute(
            select(TABLES.run_events.c.recorded_at).order_by(TABLES.run_events.c.seq)
        ).scalars()
        seconds = [time.replace(tzinfo=UTC).second for time in times]
    assert seconds == [5, 7]


@pytest.mark.slow
def test_bad_events_are_refused_and_nothing_is_written(store: Store) -> None:
    with pytest.raises(StoreError, match="no run 'ghost' was started"):
        store.append_run_events("ghost", [_event("run_started")])
    store.start_run("r", "Q?", None, {})
    with pytest.raises(StoreError, match="has no 'type'"):
        store.append_run_events("r", [_event("run_started"), {"iteration": 1}])
    with pytest.raises(StoreError, match="1 times given for 2 run events"):
        store.append_run_events("r", [_event("a"), _event("b")], recorded_at=[datetime.now(UTC)])
    assert _count_rows(store) == 0


def test_deleting_an_entity_deletes_its_runs_events_only(store: Store) -> None:
    store.create_entity("acme")
    store.create_entity("other")
    store.start_run("on-acme", "Q?", "acme", {})
    store.start_run("on-other", "Q?", "other", {})
    store.start_run("no-entity", "Q?", None, {})
    for run_id in ("on-acme", "on-other", "no-entity"):
        store.append_run_events(run_id, [_event("run_started"), _event("run_finished")])

    store.delete_entity("acme")

    assert store.run_events("on-acme") == []
    assert len(store.run_events("on-other")) == len(store.run_events("no-entity")) == 2
    assert _count_rows(store) == 4
