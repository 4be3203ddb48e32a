"""A run's recorded events as a step timeline (`kgot runs show`), one line per step.

Each line gives the step's iteration, name, wall time, tokens and cost (from the usage its
step_finished event carries) and what came of it, read from the events inside the step's span.
Before it, the commits the run wrote (:func:`commit_lines`). Lines fit 80 columns; every
model-written text is stripped of control characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kgot.cli.common import printable
from kgot.cli.layout import plural
from kgot.errors import StoreError
from kgot.tracing import (
    TRACE_ADAPTER,
    CodeFailed,
    GraphRefreshed,
    GraphUpdated,
    Math,
    QueryResult,
    RunFinished,
    RunStarted,
    Solutions,
    StepFailed,
    StepFinished,
    StepStarted,
    ToolCalls,
    ToolResult,
    TraceEvent,
    Votes,
)

if TYPE_CHECKING:
    from kgot.persistence import RunCommit
from kgot.tracing import ModelCall, ToolCall

WIDTH = 80
_KINDS = {"ask": "run", "ingest": "ingestion", "aide_cycle": "aide cycle"}
_HEADER = f"  {'iter':>4}  {'step':<12} {'time':>8} {'tokens in/out':>13} {'cost':>8}  outcome"


def read_events(run_id: str, stored: Sequence[dict[str, Any]]) -> list[TraceEvent]:
    """The run's stored events as trace event models.

    Raises:
        StoreError: a stored event is not a trace event this kgot knows (recorded by another
            version): said in one line, never shown as something it is not.
    """
    try:
        return TRACE_ADAPTER.validate_python(list(stored))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StoreError(
            f"run {run_id}'s recorded events do not read as this kgot's trace events (at "
            f"{where}: {first['msg']}); they were recorded by another version of kgot"
        ) from None


def timeline_lines(events: Sequence[TraceEvent]) -> list[str]:
    """The timeline of ``events``: a header, one line per step, and a line where the run
    started, resumed and ended; ``no events recorded`` when there are none.

    A step's line comes when it ends, summing up the events of its span (a model or tool
    call by its parent, the step); a step the process never finished is shown as such when
    the run is resumed, or at the end.
    """
    if not events:
        return ["timeline     no events recorded"]
    lines = ["timeline", _HEADER]
    open_steps: dict[str, tuple[StepStarted, _Notes]] = {}  # by span id, oldest first

    def unfinished() -> None:
        for started, _ in open_steps.values():
            lines.append(_row(started.iteration, started.step, None, "(no end recorded)"))
        open_steps.clear()

    for event in events:
        if isinstance(event, StepStarted):
            open_steps[event.span_id] = (event, _Notes())
        elif isinstance(event, StepFinished):
            _, notes = open_steps.pop(event.span_id, (None, _Notes()))
            outcome = notes.summary() if event.ok else f"ERROR {event.error or ''}"
            lines.append(_row(event.iteration, event.step, event, outcome))
        elif isinstance(event, RunStarted):
            unfinished()  # the invocation before this one stopped inside them
            said = "resumed" if event.resumed else "started"
            lines.append(f"  {event.iteration:>4}  — {_KINDS[event.kind]} {said}")
        elif isinstance(event, RunFinished):
            unfinished()
            ended = f"  {event.iteration:>4}  — run {event.status}"
            lines.append(_fit(ended + (f": {event.error}" if event.error else "")))
        else:
            owner = event.parent_span_id if isinstance(event, ModelCall | ToolCall) else None
            step = open_steps.get(owner or event.span_id)
            if step is not None:
                step[1].add(event)
    unfinished()
    return lines


def commit_lines(commits: Sequence[RunCommit]) -> list[str]:
    """What the run wrote: a line per commit (entity, version, step and the commit's
    summary) and one with its source, nothing for a run that wrote none."""
    if not commits:
        return []
    lines = [f"commits      {plural(len(commits), 'commit')}"]
    for commit in commits:
        summary = " ".join(commit.summary.split())
        lines.append(_fit(f"  {commit.entity} v{commit.version} {commit.step}: {summary}"))
        if commit.source_ref:
            lines.append(_fit(f"      from {commit.source_ref}"))
    return lines


def _row(iteration: int, step: str, finished: StepFinished | None, outcome: str) -> str:
    if finished is None:
        figures = f"{'':>8} {'':>13} {'':>8}"
    else:
        usage = finished.usage
        tokens = f"{_count(usage['input_tokens'])}/{_count(usage['output_tokens'])}"
        figures = f"{finished.duration_s:>6.2f} s {tokens:>13} {_cost(usage['cost_usd']):>8}"
    return _fit(f"  {iteration:>4}  {step[:12]:<12} {figures}  {outcome}")


def _fit(line: str) -> str:
    line = printable(" ".join(line.split("\n"))).replace("\t", " ")
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def _count(number: int) -> str:
    if number < 10_000:
        return str(number)
    if number < 1_000_000:
        return f"{number / 1000:.1f}k"
    return f"{number / 1_000_000:.1f}M"


def _cost(cost: float | None) -> str:
    if cost is None:
        return "?"  # some model's price is unknown
    if cost == 0:
        return "$0"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


class _Notes:
    """What the events inside one step say came of it, in a few words."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.tools_ok = 0
        self.tools_failed = 0
        self.code_failures = 0
        self.retries = 0

    def add(self, event: TraceEvent) -> None:
        if isinstance(event, Votes):
            self.parts.append(event.decision + (" (forced)" if event.forced else ""))
        elif isinstance(event, ToolCalls):
            self.parts.append(plural(len(event.calls), "tool call"))
        elif isinstance(event, ToolResult):
            if event.ok:
                self.tools_ok += 1
            else:
                self.tools_failed += 1
        elif isinstance(event, CodeFailed):
            self.code_failures += 1
        elif isinstance(event, ModelCall) and not event.ok:
            self.retries += 1
        elif isinstance(event, GraphUpdated | GraphRefreshed):
            verb = "graph" if isinstance(event, GraphUpdated) else "refreshed"
            self.parts.append(f"{verb} {event.nodes}n/{event.edges}e")
        elif isinstance(event, QueryResult):
            self.parts.append("empty result" if event.empty else "result")
        elif isinstance(event, Math):
            self.parts.append("math" if event.needs_math else "no math")
        elif isinstance(event, Solutions):
            answer = " ".join((event.answer or "").split())
            self.parts.append(f"answer {answer!r}" if event.answer is not None else "no answer")
        elif isinstance(event, StepFailed):
            self.parts.append(f"gave up: {event.error}")

    def summary(self) -> str:
        parts = list(self.parts)
        if self.tools_failed:
            parts.append(f"{self.tools_ok} ok, {self.tools_failed} failed")
        if self.code_failures:
            parts.append(plural(self.code_failures, "code failure"))
        if self.retries:
            parts.append(plural(self.retries, "retry", "retries"))
        return "; ".join(parts) or "ok"
