"""What a run, or one step of it, used: model requests, tokens, cost, tool calls, time.

A step's :class:`~kgot.tracing.events.StepFinished` carries its :class:`Usage` delta; a run's
totals are the sum of its steps' (:func:`add_usage`, also the reducer of the controller's
checkpointed ``usage`` channel).
"""

from __future__ import annotations

# typing's TypedDict before Python 3.12 cannot be a Pydantic field (Usage is one, in the
# trace's step_finished events).
from typing_extensions import TypedDict


class Usage(TypedDict):
    """What a run (or one step of it) used."""

    llm_calls: int  # requests, retries and re-asks included
    failed_llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None: some model's price is unknown (never a silent 0)
    tool_calls: int  # run (exact repeats of earlier successful calls are skipped, not counted)
    duration_s: float  # wall time over every invocation of the run (resumes included)
    by_step: dict[str, dict[str, int]]  # step -> calls, failed, input_tokens, output_tokens


def empty_usage() -> Usage:
    return Usage(
        llm_calls=0,
        failed_llm_calls=0,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        tool_calls=0,
        duration_s=0.0,
        by_step={},
    )


def add_usage(total: Usage | None, delta: Usage | None) -> Usage:
    """``total`` plus ``delta`` (the reducer of the controller state's ``usage`` channel: each
    step's node wrapper writes that step's delta, so a checkpoint holds the run's totals so
    far)."""
    if not total:
        return delta or empty_usage()
    if not delta:
        return total
    by_step = {step: dict(figures) for step, figures in total["by_step"].items()}
    for step, figures in delta["by_step"].items():
        into = by_step.setdefault(step, {})
        for name, value in figures.items():
            into[name] = into.get(name, 0) + value
    cost_total, cost_delta = total["cost_usd"], delta["cost_usd"]
    return Usage(
        llm_calls=total["llm_calls"] + delta["llm_calls"],
        failed_llm_calls=total["failed_llm_calls"] + delta["failed_llm_calls"],
        input_tokens=total["input_tokens"] + delta["input_tokens"],
        output_tokens=total["output_tokens"] + delta["output_tokens"],
        cost_usd=None if cost_total is None or cost_delta is None else cost_total + cost_delta,
        tool_calls=total["tool_calls"] + delta["tool_calls"],
        duration_s=total["duration_s"] + delta["duration_s"],
        by_step=by_step,
    )
