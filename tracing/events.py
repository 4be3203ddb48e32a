"""Trace events: what a run and each of its steps did, for `--trace`, `--json`, `kgot runs
show`, benchmark logs, ``on_event`` and the OpenTelemetry export.

One Pydantic model per kind of event, told apart by ``type``; :data:`TraceEvent` is their
union and :data:`TRACE_ADAPTER` reads a stored trace (a list of event dicts) back into models.
Every event names its span, that span's parent, its time and its ``iteration`` (decision
round; see :mod:`kgot.tracing.event_base`).

Every node's work is bracketed by :class:`StepStarted` and :class:`StepFinished` (same
``span_id``, a child of the run's), the shape of an OpenTelemetry span: the exporter
(:mod:`kgot.tracing.otel`) turns each pair into a span, model and tool calls (the events of
:mod:`kgot.tracing.call_events`) into child spans and the events between them into span
events, without touching the nodes. The step's
:class:`StepFinished` also carries its usage delta; the run's totals are the sum of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from kgot.tracing.call_events import ModelCall, ToolCall
from kgot.tracing.event_base import EventBase, EventPart
from kgot.tracing.step_usage import Usage

# ----------------------------------------------------------------- parts of events


class Vote(EventPart):
    decision: str = Field(description="``INSERT`` or ``RETRIEVE``.")
    reason: str = Field(description="Why: for INSERT, what the graph is missing.")


class FailedVote(EventPart):
    failed: str = Field(description="Why the vote produced no usable decision.")


class ChosenToolCall(EventPart):
    """A call the execution model chose (the runner's :class:`ToolCall` event is its run)."""

    name: str = Field(description="The tool's name.")
    args: dict[str, object] = Field(description="Its arguments as the model gave them.")


class Sample(EventPart):
    answer: str = Field(description="The sample's answer.")
    reasoning: str = Field(description="Its reasoning (an excerpt).")


class FailedSample(EventPart):
    failed: str = Field(description="Why the sample is not an answer.")
    answer: str | None = Field(
        default=None, description="An excerpt of an answer that was refused (too long)."
    )


# ----------------------------------------------------------------- the events


class RunStarted(EventBase):
    """The run started or was resumed."""

    type: Literal["run_started"] = "run_started"
    kind: Literal["ask", "ingest", "aide_cycle"] = Field(
        description="What kind of run: a question (``ask``), an ingestion or an aide's cycle."
    )
    question: str = Field(description="The question (what an ingestion or cycle is of).")
    run_id: str = Field(description="The run's id (its checkpoint thread).")
    resumed: bool = Field(description="This invocation continues an interrupted run.")
    backend: str = Field(description="The graph backend (``networkx``, ``rdflib``, …).")
    entity: str | None = Field(description="The entity whose graph the run works on, if any.")


class Votes(EventBase):
    """The vote of one round (none when the iteration limit forced retrieval)."""

    type: Literal["votes"] = "votes"
    votes: list[Vote | FailedVote] = Field(description="Each vote, in the order they came.")
    decision: str = Field(description="The outcome: ``INSERT`` or ``RETRIEVE``.")
    forced: bool = Field(description="Retrieval was forced by the iteration limit (no vote).")


class ToolCalls(EventBase):
    """The tool calls the execution model chose for what is missing."""

    type: Literal["tool_calls"] = "tool_calls"
    calls: list[ChosenToolCall] = Field(description="The calls that will run.")
    rejected: list[str] = Field(
        default_factory=list,
        description="Calls whose arguments were not JSON: ``name: error`` (shown to the model).",
    )
    dropped: int = Field(
        default=0, description="Calls proposed beyond ``controller.max_tool_calls``, not run."
    )


class ToolResult(EventBase):
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


class Code(EventBase):
    """Code the planning model wrote."""

    type: Literal["code"] = "code"
    purpose: Literal["update_graph", "query", "math"] = Field(description="What the code is for.")
    attempt: int | str = Field(
        description="Attempt number; for queries ``generation.fix`` (``1.0``, ``1.1``, ``2.0``…)."
    )
    code: str = Field(description="The code.")


class CodeFailed(EventBase):
    """Code that failed (the model is asked to fix it while attempts remain)."""

    type: Literal["code_failed"] = "code_failed"
    purpose: Literal["update_graph", "query", "math"] = Field(description="What the code was for.")
    attempt: int | str = Field(description="The attempt, numbered as in :class:`Code`.")
    error: str = Field(description="What went wrong.")


class GraphUpdated(EventBase):
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


class GraphRefreshed(EventBase):
    """Other writers' commits to the entity were applied to the run's graph."""

    type: Literal["graph_refreshed"] = "graph_refreshed"
    summary: str = Field(description="What changed, in words.")
    reason: str = Field(description="Why the graph caught up.")
    nodes: int = Field(description="Nodes in the graph afterwards.")
    edges: int = Field(description="Edges in the graph afterwards.")


class QueryResult(EventBase):
    """What a read query returned."""

    type: Literal["query_result"] = "query_result"
    attempt: str = Field(description="The query's attempt, ``generation.fix``.")
    empty: bool = Field(description="The query found nothing.")
    result: str = Field(description="The result (an excerpt).")


class Math(EventBase):
    """Whether a calculation was needed, and its output."""

    type: Literal["math"] = "math"
    needs_math: bool = Field(description="The answer needs a calculation.")
    output: str = Field(description="The calculation's printout (an excerpt), ``(failed)``, or ''.")


class Solutions(EventBase):
    """The solution samples and the majority answer."""

    type: Literal["solutions"] = "solutions"
    samples: list[Sample | FailedSample] = Field(description="Each sample, in order.")
    answer: str | None = Field(
        description="The majority answer; ``None`` when every sample failed."
    )


class StepFailed(EventBase):
    """Part of a step gave up; the run goes on."""

    type: Literal["step_failed"] = "step_failed"
    step: str = Field(description="The step (``update_graph``, ``retrieve``, ``math_check``).")
    error: str = Field(description="What failed.")


class RunFinished(EventBase):
    """The run ended (answered, forced, failed or stopped)."""

    type: Literal["run_finished"] = "run_finished"
    status: str = Field(description="``answered``, ``forced``, ``failed`` or ``interrupted``.")
    answer: str = Field(description="The answer ('' without one).")
    error: str | None = Field(description="Why the run failed, if it did.")


class StepStarted(EventBase):
    """A LangGraph node began (the start of a span)."""

    type: Literal["step_started"] = "step_started"
    step: str = Field(description="The node: ``decide``, ``update_graph``, ``retrieve``, …")


class StepFinished(EventBase):
    """A LangGraph node ended (the end of its span), with what it used."""

    type: Literal["step_finished"] = "step_finished"
    step: str = Field(description="The node, as in its :class:`StepStarted`.")
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
    | ModelCall
    | ToolCall
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
