"""The run record: typed trace events, steps bracketed like spans, usage summed from the steps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kgot.config import Settings
from kgot.controller import AskResult, ask_async, resume_async
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.controller.scripts import (
    ADD_PARIS,
    QUERY_PARIS,
    inspect_call,
    paris_in_one_round,
    solution,
    votes,
)
from kgot.tracing import Usage, add_usage, empty_usage
from kgot.tracing.events import (
    TRACE_ADAPTER,
    StepFinished,
    StepStarted,
    ToolCalls,
    TraceEvent,
)

Run = Callable[..., AskResult]
NO_MATH = {"needs_math": False, "reason": "stated"}


def _steps(trace: list[TraceEvent]) -> list[tuple[StepStarted, StepFinished]]:
    """The trace's step brackets, checked to pair up: each started step finishes (same span,
    same step) before the next one starts."""
    pairs: list[tuple[StepStarted, StepFinished]] = []
    open_step: StepStarted | None = None
    for event in trace:
        if isinstance(event, StepStarted):
            assert open_step is None, f"{event.step} started inside {open_step}"
            open_step = event
        elif isinstance(event, StepFinished):
            assert open_step is not None, f"{event.step} finished without starting"
            assert (event.step, event.span_id) == (open_step.step, open_step.span_id)
            pairs.append((open_step, event))
            open_step = None
    assert open_step is None, f"{open_step.step} never finished"
    return pairs


def _summed(trace: list[TraceEvent], start: Usage | None = None) -> Usage:
    total = start or empty_usage()
    for event in trace:
        if isinstance(event, StepFinished):
            total = add_usage(total, event.usage)
    return total


@pytest.mark.slow
def test_a_runs_trace_is_typed_events_and_every_step_is_bracketed(
    run: Run, facts_file: Path
) -> None:
    seen: list[Any] = []
    result = run(ScriptedChatModel(script=paris_in_one_round(facts_file)), on_event=seen.append)

    assert result.status == "answered"
    # on_event got the models themselves, the very objects the result's trace keeps.
    assert all(isinstance(event, BaseModel) for event in seen)
    assert [id(event) for event in seen] == [id(event) for event in result.trace]
    # Stored as JSON and read back, the trace is the same events (the union covers them all).
    stored = result.to_dict(include_trace=True)["trace"]
    assert all(isinstance(event, dict) for event in stored)
    assert TRACE_ADAPTER.validate_python(stored) == result.trace
    pairs = _steps(result.trace)
    assert [started.step for started, _ in pairs] == [
        "decide", "update_graph", "decide", "retrieve", "math_check", "solve"
    ]  # fmt: skip
    assert all(finished.ok and finished.duration_s >= 0 for _, finished in pairs)
    assert len({started.span_id for started, _ in pairs}) == len(pairs)
    # The content events of a step come between its brackets.
    first_decide = result.trace.index(pairs[0][0]), result.trace.index(pairs[0][1])
    [tool_calls] = [e for e in result.trace if isinstance(e, ToolCalls)]
    assert first_decide[0] < result.trace.index(tool_calls) < first_decide[1]
    assert tool_calls.rejected == [] and tool_calls.dropped == 0


@pytest.mark.slow
def test_the_totals_are_the_sum_of_the_steps_usage(run: Run, facts_file: Path) -> None:
    scripted = ScriptedChatModel(script=paris_in_one_round(facts_file))
    result = run(scripted)

    summed = _summed(result.trace)
    assert result.llm_calls == summed["llm_calls"] == len(scripted.calls) == 17
    assert result.tool_calls == summed["tool_calls"] == 1
    assert result.input_tokens == summed["input_tokens"] > 0
    assert result.output_tokens == summed["output_tokens"] > 0
    assert result.usage_by_step == summed["by_step"]
    assert result.usage_by_step["decide"]["calls"] == 10
    assert result.duration_s == pytest.approx(summed["duration_s"])
    # The step that ran the tool is the one that counts it.
    [(_, tools_step)] = [pair for pair in _steps(result.trace) if pair[1].usage["tool_calls"]]
    assert tools_step.step == "decide" and tools_step.iteration == 1


def test_a_failing_step_still_reports_what_it_used(run: Run) -> None:
    result = run(ScriptedChatModel(script={"decide": ["I think we should insert."]}))

    assert result.status == "failed"
    [(_, finished)] = _steps(result.trace)
    assert not finished.ok and "no usable answer" in (finished.error or "")
    assert finished.usage["llm_calls"] == result.llm_calls == 10
    assert finished.usage["failed_llm_calls"] == result.failed_llm_calls == 10
    assert result.trace[-1].type == "run_finished"


@pytest.mark.slow
def test_usage_survives_a_resume_without_double_counting(
    settings: Settings, facts_file: Path
) -> None:
    def stop(_: Any) -> Any:
        raise KeyboardInterrupt

    first = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [ADD_PARIS],
            "query": [stop],
        }
    )
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            ask_async(
                "What is the population of Paris?",
                settings=settings,
                attachments=[facts_file],
                run_id="usage-resume",
                models={"planning": first, "execution": first},
            )
        )
    with open_store(settings.store.db) as store:
        record = store.get_run("usage-resume")
    assert record is not None and record.status == "interrupted"
    # Recorded at the interruption: every finished call of the first invocation, once.
    finished_calls = len(first.calls) - 1  # the interrupted call never finished
    assert record.totals["llm_calls"] == finished_calls
    assert record.totals["tool_calls"] == 1

    second = ScriptedChatModel(
        script={"query": [QUERY_PARIS], "math_check": [NO_MATH], "solve": [solution("2102650")]}
    )
    seen: list[TraceEvent] = []
    result = asyncio.run(
        resume_async(
            "usage-resume",
            settings=settings,
            models={"planning": second, "execution": second},
            on_event=seen.append,
        )
    )
    assert result.status == "answered"
    # The resumed invocation's steps add to what the checkpoint carried, nothing more.
    resumed_steps = _summed(result.trace)
    assert resumed_steps["llm_calls"] == len(second.calls)
    assert result.llm_calls == finished_calls + len(second.calls)
    assert result.tool_calls == 1
    # The first invocation's votes, once.
    assert result.usage_by_step["decide"]["calls"] == len(first.calls_for("decide"))
    assert result.usage_by_step["solve"]["calls"] == len(second.calls_for("solve"))
    assert sum(step["calls"] for step in result.usage_by_step.values()) == result.llm_calls
    with open_store(settings.store.db) as store:
        record = store.get_run("usage-resume")
    assert record is not None and record.totals["llm_calls"] == result.llm_calls
    assert seen == result.trace and seen[0].type == "run_started"
