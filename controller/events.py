"""Trace events: what each step of a run did, for `--trace`, `--json`, benchmark logs and
``on_event``.

One Pydantic model per kind of event, told apart by ``type``; :data:`TraceEvent` is their
union and :data:`TRACE_ADAPTER` reads a stored trace (a list of event dicts) back into models.
Every event names the ``iteration`` (decision round) it belongs to.

Every node's work is bracketed by :class:`StepStarted` and :class:`StepFinished` (same
``span_id``), the shape of an OpenTelemetry span: an exporter can turn each pair into a span
and the events between them into span events without touching the nodes. The step's
:class:`StepFinished` also carries its usage delta; the run's totals are the sum of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from kgot.controller.state import Usage

EXCERPT_CHARS = 600


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text``, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


class _Record(BaseModel):
    # Frozen: an event handed to ``on_event`` is the same object the trace keeps.
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Event(_Record):
    iteration: int = Field(
        description="The decision round the event belongs to (0 before the first)."
    )


# ----------------------------------------------------------------- parts of events


class Vote(_Record):
    decision: str = Field(description="``INSERT`` or ``RETRIEVE``.")
    reason: str = Field(description="Why: for INSERT, what the graph is missing.")


class FailedVote(_Record):
    failed: str = Field(description="Why the vote produced no usable decision.")


class ToolCall(_Record):
    name: str = Field(description="The tool's name.")
    args: dict[str, object] = Field(description="Its arguments as the model gave them.")


class Sample(_Record):
    answer: str = Field(description="The sample's answer.")
    reasoning: str = Field(description="Its reasoning (an excerpt).")


class FailedSample(_Record):
    failed: str = Field(description="Why the sample is not an answer.")
    answer: str | None = Field(
        default=None, description="An excerpt of an answer that was refused (too long)."
    )


# ----------------------------------------------------------------- the events


class RunStarted(_Event):
    """The run started or was resumed."""

    type: Literal["run_started"] = "run_started"
    question: str = Field(description="The question.")
    run_id: str = Field(description="The run's id (its checkpoint thread).")
    resumed: bool = Field(description="This invocation continues an interrupted run.")
    backend: str = Field(description="The graph backend (``networkx``, ``rdflib``, …).")
    entity: str | None = Field(description="The entity whose graph the run works on, if any.")


class Votes(_Event):
    """The vote of one round (none when the iteration limit forced retrieval)."""

    type: Literal["votes"] = "votes"
    votes: list[Vote | FailedVote] = Field(description="Each vote, in the order they came.")
    decision: str = Field(description="The outcome: ``INSERT`` or ``RETRIEVE``.")
    forced: bool = Field(description="Retrieval was forced by the iteration limit (no vote).")


class ToolCalls(_Event):
    """The tool calls the execution model chose for what is missing."""

    type: Literal["tool_calls"] = "tool_calls"
    calls: list[ToolCall] = Field(description="The calls that will run.")
    rejected: list[str] = Field(
        default_factory=list,
        description="Calls whose arguments were not JSON: ``name: error`` (shown to the model).",
    )
    dropped: int = Field(
        default=0, description="Calls proposed beyond ``controller.max_tool_calls``, not run."
    )


class ToolResult(_Event):
    """One tool call's outcome."""

    type: Literal["tool_result"] = "tool_result"
    name: str = Field(description="The tool's name.")
    args: dict[str, object] = Field(description="Its arguments.")
    ok: bool = Field(description="The call succeeded.")
    cached: bool = Field(description="The output came from the tool runner's cache.")
    skipped: bool = Field(
        description="Not run: the same call succeeded earlier in the run (not a tool call)."
    )
    output: str = Field(description="The output or error (an excerpt).")


class Code(_Event):
    """Code the planning model wrote."""

    type: Literal["code"] = "code"
    purpose: Literal["update_graph", "query", "math"] = Field(description="What the code is for.")
    attempt: int | str = Field(
        description="Attempt number; for queries ``generation.fix`` (``1.0``, ``1.1``, ``2.0``…)."
    )
    code: str = Field(description="The code.")


class CodeFailed(_Event):
    """Code that failed (the model is asked to fix it while attempts remain)."""

    type: Literal["code_failed"] = "code_failed"
    purpose: Literal["update_graph", "query", "math"] = Field(description="What the code was for.")
    attempt: int | str = Field(description="The attempt, numbered as in :class:`Code`.")
    error: str = Field(description="What went wrong.")


class GraphUpdated(_Event):
    """A tool result's changes were applied to the graph."""

    type: Literal["graph_updated"] = "graph_updated"
    summary: str = Field(description="What changed, in words.")
    nodes: int = Field(description="Nodes in the graph afterwards.")
    edges: int = Field(description="Edges in the graph afterwards.")
    reused_version: int | None = Field(
        default=None,
        description="The entity version an interrupted invocation committed these changes as "
        "(the result was not applied again).",
    )


class GraphRefreshed(_Event):
    """Other writers' commits to the entity were applied to the run's graph."""

    type: Literal["graph_refreshed"] = "graph_refreshed"
    summary: str = Field(description="What changed, in words.")
    reason: str = Field(description="Why the graph caught up.")
    nodes: int = Field(description="Nodes in the graph afterwards.")
    edges: int = Field(description="Edges in the graph afterwards.")


class QueryResult(_Event):
    """What a read query returned."""

    type: Literal["query_result"] = "query_result"
    attempt: str = Field(description="The query's attempt, ``generation.fix``.")
    empty: bool = Field(description="The query found nothing.")
    result: str = Field(description="The result (an excerpt).")


class Math(_Event):
    """Whether a calculation was needed, and its output."""

    type: Literal["math"] = "math"
    needs_math: bool = Field(description="The answer needs a calculation.")
    output: str = Field(description="The calculation's printout (an excerpt), ``(failed)``, or ''.")


class Solutions(_Event):
    """The solution samples and the majority answer."""

    type: Literal["solutions"] = "solutions"
    samples: list[Sample | FailedSample] = Field(description="Each sample, in order.")
    answer: str | None = Field(
        description="The majority answer; ``None`` when every sample failed."
    )


class StepFailed(_Event):
    """Part of a step gave up; the run goes on."""

    type: Literal["step_failed"] = "step_failed"
    step: str = Field(description="The step (``update_graph``, ``retrieve``, ``math_check``).")
    error: str = Field(description="What failed.")


class LlmRetry(_Event):
    """A model request failed or its output was unusable; it is retried or re-asked."""

    type: Literal["llm_retry"] = "llm_retry"
    role: str = Field(description="``planning`` or ``execution``.")
    step: str = Field(description="What the request was for (``decide``, ``fix_code``, …).")
    attempt: int = Field(description="The request's number within its call (1-based).")
    error: str = Field(description="What went wrong.")


class RunFinished(_Event):
    """The run ended (answered, forced, failed or stopped)."""

    type: Literal["run_finished"] = "run_finished"
    status: str = Field(description="``answered``, ``forced``, ``failed`` or ``interrupted``.")
    answer: str = Field(description="The answer ('' without one).")
    error: str | None = Field(description="Why the run failed, if it did.")


class StepStarted(_Event):
    """A LangGraph node began (the start of a span)."""

    type: Literal["step_started"] = "step_started"
    step: str = Field(description="The node: ``decide``, ``update_graph``, ``retrieve``, …")
    span_id: str = Field(description="Shared with the step's :class:`StepFinished`.")
    started_at: float = Field(description="UNIX time the step began.")


class StepFinished(_Event):
    """A LangGraph node ended (the end of its span), with what it used."""

    type: Literal["step_finished"] = "step_finished"
    step: str = Field(description="The node, as in its :class:`StepStarted`.")
    span_id: str = Field(description="Shared with the step's :class:`StepStarted`.")
    duration_s: float = Field(description="Wall time of the step's own work.")
    ok: bool = Field(description="The step ended normally (its update was checkpointed).")
    error: str | None = Field(default=None, description="What stopped the step, when not ok.")
    usage: Usage = Field(
        description="The step's share of the run's totals: model requests and tokens made "
        "during it, tool calls run, and the wall time since the previous step ended (so the "
        "steps' durations add up to the run's, checkpoints and routing included).",
    )


TraceEvent = Annotated[
    RunStarted
    | Votes
    | ToolCalls
    | ToolResult
    | Code
    | CodeFailed
    | GraphUpdated
    | GraphRefreshed
    | QueryResult
    | Math
    | Solutions
    | StepFailed
    | LlmRetry
    | RunFinished
    | StepStarted
    | StepFinished,
    Field(discriminator="type"),
]
"""Any trace event; ``type`` says which."""

EventSink = Callable[[TraceEvent], None]

#: Reads a stored trace (``[event.model_dump(mode="json"), …]``) back into event models.
TRACE_ADAPTER: TypeAdapter[list[TraceEvent]] = TypeAdapter(list[TraceEvent])
EVENT_ADAPTER: TypeAdapter[TraceEvent] = TypeAdapter(TraceEvent)


def dump_trace(trace: list[TraceEvent]) -> list[dict[str, object]]:
    """The trace as JSON-ready dicts (what ``--json`` and benchmark records hold)."""
    return [event.model_dump(mode="json") for event in trace]
