"""Optional export of kgot's trace to OpenTelemetry (``pip install -e '.[otel]'``).

:class:`OtelExporter` is a sink: handed every event of a run, it turns each kgot span into an
OpenTelemetry span with the event's own times, so a trace viewer shows the run, its steps and
every model and tool call under the step that made it:

* ``run_started`` … ``run_finished``: the span ``kgot.<kind>`` (``kgot.ask``, ``kgot.ingest``,
  ``kgot.aide_cycle``); a run started inside an application's span is its child;
* ``step_started`` … ``step_finished``: ``kgot.step <name>``, with the step's usage;
* ``model_call``: ``chat <model>`` with the GenAI semantic conventions' attributes
  (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, …) and its cost;
* ``tool_call``: ``execute_tool <name>``;
* every other event: a span event (named by its ``type``) on the span it belongs to.

kgot's span ids are kept as the attribute ``kgot.span_id``; OpenTelemetry gives its own ids.
The exporter only makes spans: where they go (OTLP, the console, an in-memory exporter in
tests) is the tracer provider's business, set up by the application or by
``opentelemetry-instrument`` (``OTEL_*`` variables). Runs export when ``[tracing] otel`` is true
(``KGOT_OTEL=1``): :func:`shared_exporter` is then added to every run's sinks.
"""

from __future__ import annotations

import functools
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kgot.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer, TracerProvider

# The longest text an attribute keeps (questions, code, outputs): trace back ends cap
# attribute sizes, and the full texts are in kgot's own record (`kgot runs show --json`).
ATTRIBUTE_CHARS = 1_000
_INSTALL_HINT = (
    "exporting the trace to OpenTelemetry needs the opentelemetry-api and opentelemetry-sdk "
    "packages: pip install -e '.[otel]' (or turn [tracing] otel / KGOT_OTEL off)"
)


class OtelExporter:
    """Turns kgot trace events into OpenTelemetry spans (module docstring).

    Args:
        tracer_provider: where the spans go; default: OpenTelemetry's global provider.

    Raises:
        ConfigError: the OpenTelemetry API is not installed.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            raise ConfigError(_INSTALL_HINT) from None
        from kgot.version import __version__

        provider = tracer_provider or trace.get_tracer_provider()
        self._trace = trace
        self.tracer: Tracer = provider.get_tracer("kgot", __version__)
        # kgot span id -> the OpenTelemetry span open for it. Events may come from several
        # runs on several threads (an MCP server), hence the lock.
        self._open: dict[str, OtelSpan] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind in ("run_started", "step_started"):
            name = f"kgot.{event.kind}" if kind == "run_started" else f"kgot.step {event.step}"
            opened = self._start(event, name, _nanos(event.timestamp))
            opened.set_attributes(_attributes(event))
            with self._lock:
                self._open[event.span_id] = opened
        elif kind in ("run_finished", "step_finished"):
            with self._lock:
                closing = self._open.pop(event.span_id, None)
            if closing is None:
                return  # its start went to another sink (a resumed run's first invocation)
            closing.set_attributes(_attributes(event))
            error = event.error if kind == "step_finished" and not event.ok else None
            if kind == "run_finished" and event.status in ("failed", "interrupted"):
                error = event.error or event.status
            self._status(closing, error)
            closing.end(end_time=_nanos(event.timestamp))
        elif kind in ("model_call", "tool_call"):
            self._whole_span(event)
        else:
            with self._lock:
                owner = self._open.get(event.span_id)
            if owner is not None:
                owner.add_event(
                    kind, attributes=_attributes(event), timestamp=_nanos(event.timestamp)
                )

    def _start(self, event: Any, name: str, start: int) -> OtelSpan:
        with self._lock:
            parent = self._open.get(event.parent_span_id) if event.parent_span_id else None
        # No kgot parent: OpenTelemetry's current context decides (an application's span).
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, start_time=start)

    def _whole_span(self, event: Any) -> None:
        end = _nanos(event.timestamp)
        start = end - int(event.duration_s * 1e9)
        if event.type == "model_call":
            name = f"chat {event.model}"
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": event.model,
                "gen_ai.usage.input_tokens": event.input_tokens,
                "gen_ai.usage.output_tokens": event.output_tokens,
            }
        else:
            name = f"execute_tool {event.name}"
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name}
        made = self._start(event, name, start)
        made.set_attributes({**_attributes(event), **attributes})
        self._status(made, None if event.ok else (getattr(event, "error", None) or "failed"))
        made.end(end_time=end)

    def _status(self, span: OtelSpan, error: str | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error[:ATTRIBUTE_CHARS]))


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp() * 1e9)


def _attributes(event: Any) -> dict[str, Any]:
    """The event's scalar fields as ``kgot.*`` attributes (texts cut; lists and dicts as
    their size, usage flattened), ``kgot.span_id`` included."""
    attributes: dict[str, Any] = {}
    for name, value in event:
        if name in ("type", "timestamp", "parent_span_id"):
            continue
        key = f"kgot.{name}"
        if isinstance(value, bool | int | float):
            attributes[key] = value
        elif isinstance(value, str):
            attributes[key] = value[:ATTRIBUTE_CHARS]
        elif name == "usage" and isinstance(value, dict):
            for figure, amount in value.items():
                if isinstance(amount, int | float):  # cost None: unknown, left out
                    attributes[f"kgot.usage.{figure}"] = amount
        elif isinstance(value, list | dict):
            attributes[f"{key}.count"] = len(value)
    return attributes


@functools.cache
def shared_exporter() -> OtelExporter:
    """The exporter on OpenTelemetry's global tracer provider, made once per process, which
    every run hands its events to when ``[tracing] otel`` is on.

    Raises:
        ConfigError: the OpenTelemetry API is not installed.
    """
    return OtelExporter()
