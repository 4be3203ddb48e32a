"""Keeping a run's trace in the store as the run goes, for ``kgot runs show``.

The events are buffered and appended in batches: at the end of a step once
:data:`FLUSH_INTERVAL_S` has passed since the last write, and always when the run ends or
stops. A write is a transaction of its own beside the checkpoints (0.5 to 2.5 ms measured,
more on a busy machine); one per event, or one per step, would add a few milliseconds to
every round when steps are quick (the controller's own overhead is about 5 ms a round),
while steps that wait for a model (seconds) are still each written as they end. A process
killed outright loses at most the events of the last interval.

Stored events are the trace's JSON dumps with every long text cut (see
:data:`STORED_TEXT_CHARS`); they keep their shape, so they read back through
:data:`~kgot.tracing.events.TRACE_ADAPTER`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from kgot.tracing import RunFinished, StepFinished, TraceEvent, excerpt

if TYPE_CHECKING:
    from kgot.persistence import Store

log = logging.getLogger(__name__)

# The longest text a stored event keeps in any one field. Code, tool outputs, questions and
# answers can run to many kilobytes per event; a run of 20 rounds keeps a few hundred events,
# so this keeps the worst run's trace to a few megabytes while still showing the start of
# every piece of code (about 50 lines) and every output. Only the stored copy is cut: the
# events handed to ``on_event`` and the result's trace keep their whole texts.
STORED_TEXT_CHARS = 2_000

# The shortest time between two writes of the buffer at a step's end.
FLUSH_INTERVAL_S = 1.0


def stored_event(event: TraceEvent) -> dict[str, object]:
    """``event`` as the run's record keeps it: its JSON dump, with every string longer than
    :data:`STORED_TEXT_CHARS` cut to an excerpt that says how much was left out."""
    capped = _capped(event.model_dump(mode="json"))
    assert isinstance(capped, dict)  # a model dumps to a dict
    return capped


def _capped(value: object) -> object:
    if isinstance(value, str):
        return excerpt(value, STORED_TEXT_CHARS)
    if isinstance(value, dict):
        return {key: _capped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_capped(item) for item in value]
    return value


class EventRecorder:
    """Buffers one run's events and appends them to its record in the store in batches."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        # One list, so an event added from another thread during a write is not lost.
        self._pending: list[TraceEvent] = []
        self._flushed_at = time.monotonic()
        self._writing = threading.Lock()  # one write at a time, batches in order
        self._writer: threading.Thread | None = None

    def add(self, event: TraceEvent) -> None:
        """Buffer ``event``; write the buffer when it ends the run, or ends a step
        :data:`FLUSH_INTERVAL_S` or more after the last write.

        The write runs on a thread of its own: ``add`` is called on the run's event loop,
        and a write may wait for the database's lock (SQLite: up to its busy timeout while
        another process writes), which would stall every other call an MCP server serves.
        """
        self._pending.append(event)
        if isinstance(event, RunFinished) or (
            isinstance(event, StepFinished)
            and time.monotonic() - self._flushed_at >= FLUSH_INTERVAL_S
        ):
            self._flushed_at = time.monotonic()
            if self._writer is None or not self._writer.is_alive():  # else it is due again
                self._writer = threading.Thread(
                    target=self.flush, name=f"kgot-trace-{self.run_id}", daemon=True
                )
                self._writer.start()

    def wait(self) -> None:
        """Return once the write :meth:`add` started (if any) has ended."""
        writer = self._writer
        if writer is not None:
            writer.join()

    def flush(self) -> None:
        """Append the buffered events to the run's record (after a write in progress).

        A failed write is logged and the events stay buffered for the next flush: the trace
        is a record of the run, and a database that is briefly locked must not end a run
        whose own checkpoints went through.
        """
        with self._writing:
            self._flush()

    def _flush(self) -> None:
        self._flushed_at = time.monotonic()
        batch = self._pending[:]
        if not batch:
            return
        events = [stored_event(event) for event in batch]
        times = [event.timestamp for event in batch]
        try:
            self.store.append_run_events(self.run_id, events, recorded_at=times)
        except Exception as error:  # any failure: the run matters more than its record
            log.warning(
                "could not record %d trace events of run %s (kept for the next try): %s",
                len(events),
                self.run_id,
                error,
            )
            return
        del self._pending[: len(batch)]  # events added meanwhile wait for the next write
