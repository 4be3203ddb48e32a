"""Spans carried by a context variable: ids nest, events default to the span in progress,
and tasks and threads started inside a span report to it."""

from __future__ import annotations

import asyncio
from typing import Any

from kgot.tracing import ModelCall, child_span_ids, current_span, emit, span
from kgot.tracing.call_events import ToolCall


def _call(**fields: Any) -> ToolCall:
    return ToolCall(name="t", args="{}", duration_s=0.0, ok=True, cached=False, **fields)


def test_spans_nest_and_events_take_the_span_in_progress() -> None:
    seen: list[Any] = []
    assert current_span() is None
    with span(sink=seen.append, iteration=3) as run:
        assert run.parent_span_id is None
        with span() as step:
            assert (step.parent_span_id, step.sink, step.iteration) == (run.span_id, seen.append, 3)
            emit(_call())  # a point event: the step's span
            emit(_call(**child_span_ids()))  # a whole span: a child of the step
        emit(_call())
    assert current_span() is None
    inside, own, after = seen
    assert (inside.span_id, inside.parent_span_id, inside.iteration) == (
        step.span_id,
        run.span_id,
        3,
    )
    assert own.parent_span_id == step.span_id and own.span_id not in (step.span_id, run.span_id)
    assert (after.span_id, after.parent_span_id) == (run.span_id, None)
    assert inside.timestamp <= own.timestamp <= after.timestamp
    assert inside.timestamp.utcoffset() is not None


def test_an_event_outside_any_span_is_dropped_and_stands_alone() -> None:
    emit(_call())  # nowhere to go: no error
    alone = _call()
    assert alone.parent_span_id is None and len(alone.span_id) == 16 and alone.iteration == 0


def test_a_round_read_when_asked_follows_the_step() -> None:
    seen: list[Any] = []
    rounds = iter([1, 2])
    with span(sink=seen.append, iteration=lambda: next(rounds)):
        emit(_call())
        emit(_call())
    assert [event.iteration for event in seen] == [1, 2]


def test_tasks_and_threads_report_to_the_span_they_start_in() -> None:
    seen: list[Any] = []

    def model_call(step: str) -> None:
        emit(
            ModelCall(
                **child_span_ids(),
                role="planning",
                step=step,
                model="scripted",
                attempt=1,
                input_tokens=1,
                output_tokens=1,
                estimated=False,
                cost_usd=None,
                duration_s=0.0,
                ok=True,
            )
        )

    async def main() -> str:
        with span(sink=seen.append), span() as step:
            await asyncio.gather(
                asyncio.to_thread(model_call, "thread"), asyncio.create_task(_later(model_call))
            )
            return step.span_id

    step_id = asyncio.run(main())
    assert sorted(e.step for e in seen) == ["task", "thread"]
    assert {e.parent_span_id for e in seen} == {step_id}


async def _later(call: Any) -> None:
    await asyncio.sleep(0)
    call("task")
