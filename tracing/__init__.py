"""Tracing: one event model for everything kgot does, and where the events go.

The event models are in :mod:`kgot.tracing.events` (their union :data:`~kgot.tracing.events.
TraceEvent` and the adapter that reads a stored trace back); the events that are spans by
themselves (:class:`ModelCall`, :class:`ToolCall`) in :mod:`kgot.tracing.call_events`.

Every event names its span (:mod:`kgot.tracing.spans`): a run is the root span, its steps
are children, and each model request (:class:`ModelCall`, raised by the model client) and tool
call (:class:`ToolCall`, raised by the tool runner) is a child of the step that made it. The
span in progress is a context variable, so no layer passes ids around. The optional exporter
(:mod:`kgot.tracing.otel`) turns the spans into OpenTelemetry spans.

This package sits low (beside ``config``): the model client and the tools raise their events
here without importing the controller.
"""

from kgot.tracing.call_events import ModelCall, ToolCall
from kgot.tracing.event_base import EventBase, EventPart, excerpt
from kgot.tracing.spans import Span, child_span_ids, current_span, emit, new_span_id, span
from kgot.tracing.step_usage import Usage, add_usage, empty_usage

__all__ = [
    "EventBase",
    "EventPart",
    "ModelCall",
    "Span",
    "ToolCall",
    "Usage",
    "add_usage",
    "child_span_ids",
    "current_span",
    "emit",
    "empty_usage",
    "excerpt",
    "new_span_id",
    "span",
]
