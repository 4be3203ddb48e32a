"""Spans: which piece of work an event belongs to, carried by a context variable.

A run is the root span; each of its steps is a child; every model request and tool call is a
child of the step that made it. The span in progress lives in a :class:`~contextvars.ContextVar`,
so code deep inside a step (a model client, the tool runner) names its parent without being
handed any id: asyncio tasks and :func:`asyncio.to_thread` copy the context they start in, and
LangGraph runs a node's code in a task started inside the run's span.

A span also says where its events go (``sink``): the run's collector at the root, LangGraph's
stream writer inside a step (whose stream ends in the same collector, in order). A child
without a sink of its own uses its parent's. With no span open, :func:`emit` drops the event:
a model client or a tool used outside any run costs no tracing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Sink = Callable[[Any], None]
"""Where a span's events go (a trace event model in, nothing out)."""


def new_span_id() -> str:
    """A fresh span id: 16 hex digits, the size of an OpenTelemetry span id (8 bytes)."""
    return os.urandom(8).hex()


def utc_now() -> datetime:
    """Now, as an aware UTC time (what every event's ``timestamp`` holds)."""
    return datetime.now(UTC)


Round = int | Callable[[], int]
"""A decision round, or a function that reads it when asked (a step's round may move on
while the step runs: the vote starts the next one)."""


@dataclass(frozen=True)
class Span:
    """The span in progress: its id, its parent's, where its events go and the decision
    round it belongs to (events raised inside it default to that round)."""

    span_id: str
    parent_span_id: str | None
    sink: Sink | None
    round: Round = 0

    @property
    def iteration(self) -> int:
        """The decision round now."""
        return self.round() if callable(self.round) else self.round


_current: ContextVar[Span | None] = ContextVar("kgot_current_span", default=None)


def current_span() -> Span | None:
    """The span in progress in this context, ``None`` outside any."""
    return _current.get()


@contextmanager
def span(*, sink: Sink | None = None, iteration: Round | None = None) -> Iterator[Span]:
    """Open a child of the current span (a root span when none is open) for the ``with``
    block. ``sink`` and ``iteration`` default to the parent's (no sink, round 0 at a root)."""
    parent = _current.get()
    opened = Span(
        span_id=new_span_id(),
        parent_span_id=parent.span_id if parent is not None else None,
        sink=sink if sink is not None else (parent.sink if parent is not None else None),
        round=iteration if iteration is not None else (parent.round if parent is not None else 0),
    )
    token = _current.set(opened)
    try:
        yield opened
    finally:
        _current.reset(token)


def child_span_ids() -> dict[str, Any]:
    """``span_id`` and ``parent_span_id`` for an event that is a whole span by itself (a model
    request, a tool call): a fresh id, child of the span in progress."""
    parent = _current.get()
    return {
        "span_id": new_span_id(),
        "parent_span_id": parent.span_id if parent is not None else None,
    }


def emit(event: Any) -> None:
    """Hand ``event`` to the current span's sink (dropped when there is none)."""
    current = _current.get()
    if current is not None and current.sink is not None:
        current.sink(event)
