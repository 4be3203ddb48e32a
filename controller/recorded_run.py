"""Ingestions and aide cycles as recorded runs, traced like a question's run.

A question's run is recorded by :mod:`kgot.controller.run` (the runs table, its events as it
goes). Ingestions (:class:`kgot.controller.ingest.Ingestor`) and aide cycles
(:mod:`kgot.aides.runtime`) write to entities too, so `kgot runs show` must explain them the
same way: :class:`RecordedRun` starts such a run in the store (``kind`` ``ingest`` or
``aide_cycle``), opens its root span, keeps every event raised inside it (steps, model calls,
tool calls, code, failures) through the same :class:`~kgot.controller.run_record.EventRecorder`,
and records how it ended (``done``, ``failed`` or ``interrupted``) with its totals. The commits
it wrote name its run id, which is how `kgot runs show` lists them.

:func:`traced_step` brackets a piece of such a run as a step (``step_started`` …
``step_finished`` with the model and tool calls made in it), as the controller's node wrapper
does for a question's steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from kgot.controller.run import finish_in_thread
from kgot.controller.run_record import EventRecorder
from kgot.tracing import (
    EventSink,
    ModelCall,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCall,
    Usage,
    add_usage,
    current_span,
    empty_usage,
    span,
)

if TYPE_CHECKING:
    from kgot.persistence import Store

log = logging.getLogger(__name__)

RecordedKind = Literal["ingest", "aide_cycle"]

# The recorded run in progress in this context (its id), for work that writes under the same
# run id and so belongs to it (an aide cycle's ingestions) rather than to a run of its own.
_recording: ContextVar[str | None] = ContextVar("kgot_recorded_run", default=None)


def recording(run_id: str) -> bool:
    """Whether the recorded run in progress in this context is ``run_id``."""
    return _recording.get() == run_id


class RecordedRun:
    """One ingestion or aide cycle as a run of the store (module docstring). An async context
    manager; inside it the run's span is current, so whatever runs there reports to it::

        async with RecordedRun(store, run_id, kind="ingest", question="…", entity="acme") as run:
            with traced_step("ingest"):
                ...  # model calls, commits naming run_id
            run.outcome = "1 commit: 3 nodes"

    Args:
        store: an open store (the entity must exist).
        run_id: the run's id, also what its commits name as their run.
        kind: ``ingest`` or ``aide_cycle``.
        question: what the run is of, one line (`kgot runs list` shows it as the question).
        entity: the entity it writes to.
        options: what the runs table keeps about it (JSON).
        backend: the graph backend, for its ``run_started`` event.
        on_event: also handed every event (a display); one that raises gets no more.
        exporter: also handed every event: the OpenTelemetry exporter when it is on
            (:func:`kgot.controller.run.otel_sink`).
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        kind: RecordedKind,
        question: str,
        entity: str,
        options: dict[str, Any] | None = None,
        backend: str = "",
        on_event: EventSink | None = None,
        exporter: EventSink | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.kind = kind
        self.question = question
        self.entity = entity
        self.options = options or {}
        self.backend = backend
        self.on_event = on_event
        self.exporter = exporter
        self.outcome = ""  # the run's answer line: what it wrote, set by its owner
        self.usage: Usage = empty_usage()  # its model and tool calls so far
        self._recorder = EventRecorder(store, run_id)
        self._scope = ExitStack()
        self._started = 0.0

    async def __aenter__(self) -> RecordedRun:
        await finish_in_thread(
            lambda: self.store.start_run(
                self.run_id, self.question, self.entity, self.options, kind=self.kind
            )
        )
        self._started = time.perf_counter()
        self._scope.enter_context(span(sink=self))
        token = _recording.set(self.run_id)
        self._scope.callback(_recording.reset, token)
        self(
            RunStarted(
                kind=self.kind,
                question=self.question,
                run_id=self.run_id,
                resumed=False,
                backend=self.backend,
                entity=self.entity,
            )
        )
        return self

    async def __aexit__(self, raised: type[BaseException] | None, error: Any, _tb: Any) -> None:
        if raised is None:
            status = "done"
        elif issubclass(raised, asyncio.CancelledError | KeyboardInterrupt):
            status = "interrupted"
        else:
            status = "failed"
        message = None if error is None else (str(error) or type(error).__name__)
        if status == "interrupted":
            message = "stopped before it ended"
        self(RunFinished(status=status, answer=self.outcome, error=message))
        self._scope.close()
        totals: dict[str, Any] = {
            **self.usage,
            "duration_s": time.perf_counter() - self._started,
        }
        if message is not None:
            totals["error"] = message
        # A store write (it may wait for the database's lock): on a thread, seen through.
        await finish_in_thread(self._recorder.flush)
        await finish_in_thread(
            lambda: self.store.finish_run(self.run_id, status, self.outcome or None, totals)
        )

    def __call__(self, event: Any) -> None:
        """The run's sink: count a call, record the event, show it."""
        self.usage = add_usage(self.usage, usage_of(event))
        self._recorder.add(event)
        if self.exporter is not None:
            try:
                self.exporter(event)
            except Exception:  # a trace back end must not end the run
                log.exception("exporting the trace failed; run %s exports no more", self.run_id)
                self.exporter = None
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # nor a broken display
                log.exception("on_event failed on a %s event; it gets no more", event.type)
                self.on_event = None


def usage_of(event: Any) -> Usage | None:
    """What one model or tool call event adds to its step's and run's usage (``None`` for any
    other event)."""
    if isinstance(event, ModelCall):
        usage = empty_usage()
        usage["llm_calls"] = 1
        usage["failed_llm_calls"] = int(not event.ok)
        usage["input_tokens"] = event.input_tokens
        usage["output_tokens"] = event.output_tokens
        usage["cost_usd"] = event.cost_usd
        usage["by_step"] = {
            event.step: {
                "calls": 1,
                "failed": int(not event.ok),
                "input_tokens": event.input_tokens,
                "output_tokens": event.output_tokens,
            }
        }
        return usage
    if isinstance(event, ToolCall):
        usage = empty_usage()
        usage["tool_calls"] = 1
        return usage
    return None


@contextmanager
def traced_step(name: str) -> Iterator[None]:
    """Bracket the ``with`` block as step ``name`` of the run in progress: a child span whose
    ``step_finished`` carries the model and tool calls made inside it. Outside any span it
    only runs the block (an Ingestor used with no run around it still works)."""
    parent = current_span()
    if parent is None or parent.sink is None:
        yield
        return
    forward = parent.sink
    tally: list[Usage] = [empty_usage()]

    def counting(event: Any) -> None:
        tally[0] = add_usage(tally[0], usage_of(event))
        forward(event)

    with span(sink=counting):
        counting(StepStarted(step=name))
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            yield
        except BaseException as raised:
            error = raised
            raise
        finally:
            duration = time.perf_counter() - started
            usage = tally[0]
            usage["duration_s"] = duration
            counting(
                StepFinished(
                    step=name,
                    duration_s=duration,
                    ok=error is None,
                    error=None if error is None else (str(error) or type(error).__name__),
                    usage=usage,
                )
            )
