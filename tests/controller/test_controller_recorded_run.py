"""A recorded run (an ingestion's, an aide cycle's) ends as its block ends: done, failed with
the error, or interrupted when cancelled; its steps close as spans either way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kgot.controller.recorded_run import RecordedRun, recording, traced_step
from kgot.persistence import Store, open_store
from kgot.tracing import current_span
from kgot.tracing.events import TRACE_ADAPTER, RunFinished, RunStarted, StepFinished, StepStarted


def _record(store: Store, run_id: str, error: BaseException | None) -> None:
    async def go() -> None:
        async with RecordedRun(
            store, run_id, kind="ingest", question="ingestion into acme", entity="acme"
        ) as run:
            assert recording(run_id) and not recording("another")
            with traced_step("ingest"):
                assert current_span() is not None
                if error is not None:
                    raise error
            run.outcome = "a.md: +1 node"

    asyncio.run(go())


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (None, "done"),
        (ValueError("the model said no"), "failed"),
        (KeyboardInterrupt(), "interrupted"),
    ],
)
def test_a_recorded_run_ends_as_its_block_ends(
    tmp_path: Path, error: BaseException | None, status: str
) -> None:
    with open_store(str(tmp_path / "kgot.db")) as store:
        store.create_entity("acme")
        if error is None:
            _record(store, "r", error)
        else:
            with pytest.raises(type(error)):
                _record(store, "r", error)
        record = store.get_run("r")
        events = TRACE_ADAPTER.validate_python(store.run_events("r"))
    assert current_span() is None and not recording("r")
    assert record is not None and (record.kind, record.status) == ("ingest", status)
    assert [event.type for event in events] == [
        "run_started",
        "step_started",
        "step_finished",
        "run_finished",
    ]
    started, step, finished, ended = events
    assert isinstance(started, RunStarted) and isinstance(ended, RunFinished)
    assert isinstance(step, StepStarted) and isinstance(finished, StepFinished)
    assert step.parent_span_id == started.span_id == ended.span_id
    assert finished.ok is (error is None) and ended.status == status
    if status == "done":
        assert record.answer == "a.md: +1 node" and "error" not in (record.totals or {})
    elif status == "failed":
        assert finished.error == "the model said no" == (record.totals or {})["error"]
    else:
        assert ended.error == "stopped before it ended"
