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

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports
from kgot.tracing.call_events import ARGS_EXCERPT_CHARS, ModelCall, ToolCall
from kgot.tracing.event_base import EventBase, EventPart, excerpt
from kgot.tracing.spans import Span, child_span_ids, current_span, emit, new_span_id, span
from kgot.tracing.step_usage import Usage, add_usage, empty_usage

if TYPE_CHECKING:
    from kgot.tracing.events import (
        EVENT_ADAPTER,
        TRACE_ADAPTER,
        ChosenToolCall,
        Code,
        CodeFailed,
        EventSink,
        FailedSample,
        FailedVote,
        GraphRefreshed,
        GraphUpdated,
        Math,
        QueryResult,
        RunFinished,
        RunStarted,
        Sample,
        Solutions,
        StepFailed,
        StepFinished,
        StepStarted,
        ToolCalls,
        ToolResult,
        TraceEvent,
        Vote,
        Votes,
        dump_trace,
    )
    from kgot.tracing.otel import shared_exporter

# The step events and their adapters (pydantic's, built on import) and the exporter load on
# first use.
_LAZY = {
    "ChosenToolCall": "kgot.tracing.events",
    "Code": "kgot.tracing.events",
    "CodeFailed": "kgot.tracing.events",
    "EVENT_ADAPTER": "kgot.tracing.events",
    "EventSink": "kgot.tracing.events",
    "FailedSample": "kgot.tracing.events",
    "FailedVote": "kgot.tracing.events",
    "GraphRefreshed": "kgot.tracing.events",
    "GraphUpdated": "kgot.tracing.events",
    "Math": "kgot.tracing.events",
    "QueryResult": "kgot.tracing.events",
    "RunFinished": "kgot.tracing.events",
    "RunStarted": "kgot.tracing.events",
    "Sample": "kgot.tracing.events",
    "Solutions": "kgot.tracing.events",
    "StepFailed": "kgot.tracing.events",
    "StepFinished": "kgot.tracing.events",
    "StepStarted": "kgot.tracing.events",
    "TRACE_ADAPTER": "kgot.tracing.events",
    "ToolCalls": "kgot.tracing.events",
    "ToolResult": "kgot.tracing.events",
    "TraceEvent": "kgot.tracing.events",
    "Vote": "kgot.tracing.events",
    "Votes": "kgot.tracing.events",
    "dump_trace": "kgot.tracing.events",
    "shared_exporter": "kgot.tracing.otel",
}

__all__ = [
    "ARGS_EXCERPT_CHARS",
    "EVENT_ADAPTER",
    "TRACE_ADAPTER",
    "ChosenToolCall",
    "Code",
    "CodeFailed",
    "EventBase",
    "EventPart",
    "EventSink",
    "FailedSample",
    "FailedVote",
    "GraphRefreshed",
    "GraphUpdated",
    "Math",
    "ModelCall",
    "QueryResult",
    "RunFinished",
    "RunStarted",
    "Sample",
    "Solutions",
    "Span",
    "StepFailed",
    "StepFinished",
    "StepStarted",
    "ToolCall",
    "ToolCalls",
    "ToolResult",
    "TraceEvent",
    "Usage",
    "Vote",
    "Votes",
    "add_usage",
    "child_span_ids",
    "current_span",
    "dump_trace",
    "emit",
    "empty_usage",
    "excerpt",
    "new_span_id",
    "shared_exporter",
    "span",
]


__getattr__ = lazy_exports(__name__, _LAZY)
