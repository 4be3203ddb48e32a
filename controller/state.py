"""The LangGraph state of one run: everything a checkpoint must hold to resume it.

Services (models, sandbox, backend, tools, store) are *not* state; they live in
:class:`kgot.controller.context.RunContext` and are rebuilt on resume. The graph itself is
rebuilt from ``changesets`` (ephemeral runs) or from the entity's store (persistent runs).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

# typing's TypedDict before Python 3.12 cannot be a Pydantic field (Usage is one, in the
# trace's step_finished events).
from typing_extensions import TypedDict

Step = Literal["INSERT", "RETRIEVE"]


class ToolCallRecord(TypedDict):
    name: str
    args: dict[str, Any]
    ok: bool
    iteration: int
    source_ref: str | None
    summary: str  # an excerpt of the output; for failures, the error the model should see


class PendingResult(TypedDict):
    name: str
    args: dict[str, Any]
    output: str
    source_ref: str | None


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
    """``total`` plus ``delta`` (the reducer of the state's ``usage`` channel: each step's node
    wrapper writes that step's delta, so a checkpoint holds the run's totals so far)."""
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


class RunState(TypedDict, total=False):
    # Set once at the start.
    options: dict[str, Any]  # the run's settings without secrets (reapplied on resume)
    question: str
    attachments: list[str]
    entity: str | None
    backend: str
    graph_file: str | None  # an ephemeral run's starting graph
    # Loop bookkeeping.
    iteration: int
    decision: Step
    forced: bool
    missing: list[str]  # merged INSERT reasons of the latest vote round
    notes: Annotated[list[str], operator.add]  # findings shown to later votes
    tool_history: Annotated[list[ToolCallRecord], operator.add]
    pending_results: list[PendingResult]
    changesets: Annotated[list[dict[str, Any]], operator.add]  # applied, in order
    # Retrieval and answer.
    retrieved: str | None
    retrieved_nodes: list[str]  # entity runs: the nodes the retrieved result named by id
    math_needed: bool
    math_output: str | None
    answer: str | None
    status: str
    error: str | None
    usage: Annotated[Usage, add_usage]  # the run's totals: the sum of every step's delta
