"""What every trace event has: where it belongs (its span and that span's parent), when it
happened and the decision round it belongs to.

The fields default to the span in progress (:mod:`kgot.tracing.spans`): an event raised inside
a step carries the step's ``span_id`` and the run's as ``parent_span_id``, without the code that
raises it passing either. An event that *is* a span by itself (a model request, a tool call)
is given a fresh id as a child of the span in progress (:func:`~kgot.tracing.spans.child_span_ids`).
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from kgot.tracing.spans import current_span, new_span_id, utc_now

EXCERPT_CHARS = 600


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text``, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


class EventPart(BaseModel):
    """A frozen piece of an event (an event handed to ``on_event`` is the same object the
    trace keeps, so nothing may change it afterwards)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _span_id() -> str:
    span = current_span()
    return span.span_id if span is not None else new_span_id()


def _parent_span_id() -> str | None:
    span = current_span()
    return span.parent_span_id if span is not None else None


def _iteration() -> int:
    span = current_span()
    return span.iteration if span is not None else 0


class EventBase(EventPart):
    """The fields every trace event has."""

    iteration: int = Field(
        default_factory=_iteration,
        description="The decision round the event belongs to (0 before the first, and in "
        "ingestions and aide cycles, which have none).",
    )
    span_id: str = Field(
        default_factory=_span_id,
        description="The span the event belongs to (16 hex digits): the step it was raised "
        "in, the run for run_started/run_finished, its own for a model or tool call.",
    )
    parent_span_id: str | None = Field(
        default_factory=_parent_span_id,
        description="The parent of ``span_id``: the run's span for a step, the step's for a "
        "model or tool call; ``None`` for the run itself.",
    )
    timestamp: AwareDatetime = Field(
        default_factory=utc_now,
        description="When the event was raised (UTC); a model or tool call's is when it "
        "ended, ``duration_s`` before which it began.",
    )
