"""A run's trace as spans: the run is the root, each step a child, every model request and
tool call a child of the step that made it; every event has a UTC timestamp."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from kgot.controller import AskResult
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.controller.scripts import paris_in_one_round
from kgot.tracing import ModelCall, ToolCall
from kgot.tracing.events import RunFinished, RunStarted, StepFinished, StepStarted

Run = Callable[..., AskResult]


@pytest.mark.slow
def test_steps_are_children_of_the_run_and_calls_children_of_their_step(
    run: Run, facts_file: Path
) -> None:
    scripted = ScriptedChatModel(script=paris_in_one_round(facts_file))
    result = run(scripted)
    trace = result.trace

    started, finished = trace[0], trace[-1]
    assert isinstance(started, RunStarted) and isinstance(finished, RunFinished)
    root = started.span_id
    assert started.parent_span_id is None and finished.span_id == root
    assert started.kind == "ask"
    steps = {e.span_id: e.step for e in trace if isinstance(e, StepStarted)}
    assert len(steps) == 6 and root not in steps
    assert all(e.parent_span_id == root for e in trace if isinstance(e, StepStarted | StepFinished))
    # Every other event belongs to a step: its own span, or (a call) its parent's.
    for event in trace[1:-1]:
        if isinstance(event, ModelCall | ToolCall):
            assert event.parent_span_id in steps and event.span_id not in steps
        else:
            assert event.span_id in steps, event
    # Ids are OpenTelemetry-sized and the calls' are their own.
    ids = [e.span_id for e in trace if isinstance(e, ModelCall | ToolCall)] + [root, *steps]
    assert len(ids) == len(set(ids)) and all(len(i) == 16 for i in ids)

    # Timestamps: aware UTC, in order, within the run.
    times = [e.timestamp for e in trace]
    assert all(t.utcoffset() == timedelta(0) for t in times)
    assert times == sorted(times)
    assert times[-1] - times[0] <= timedelta(seconds=result.duration_s + 1)
    assert started.timestamp.tzinfo is not None and started.timestamp.astimezone(UTC)

    # One model_call per request the model saw, each under the step that asked, with usage.
    calls = [e for e in trace if isinstance(e, ModelCall)]
    assert len(calls) == len(scripted.calls) == result.llm_calls
    by_step = {steps[c.parent_span_id] for c in calls if c.step == "decide"}
    assert by_step == {"decide"}
    assert sum(c.input_tokens for c in calls) == result.input_tokens > 0
    assert sum(c.output_tokens for c in calls) == result.output_tokens > 0
    assert all(c.ok and c.role in ("planning", "execution") and c.model for c in calls)
    # The tool call, under the decide step that chose it.
    [tool] = [e for e in trace if isinstance(e, ToolCall)]
    assert tool.name == "inspect_file" and tool.ok and not tool.cached
    assert steps[tool.parent_span_id] == "decide" and str(facts_file) in tool.args
    assert tool.duration_s > 0


@pytest.mark.slow
def test_a_failed_request_is_a_model_call_that_is_not_ok(run: Run, facts_file: Path) -> None:
    script = paris_in_one_round(facts_file)
    script["math_check"] = ["not json at all", *script["math_check"]]
    result = run(ScriptedChatModel(script=script))

    failed = [e for e in result.trace if isinstance(e, ModelCall) and not e.ok]
    assert [(e.step, e.attempt) for e in failed] == [("math_check", 1)]
    assert failed[0].error and result.failed_llm_calls == 1
