"""Running a run's coroutine to its end from synchronous code, with or without an event loop.

:func:`kgot.ask` is for code that does not await: a script, a notebook cell, a synchronous
web handler. In a plain script it is ``asyncio.run``: Ctrl-C cancels the run, which records
itself as interrupted, and raises ``KeyboardInterrupt``. Where an event loop is already running
in the calling thread (Jupyter, a FastAPI handler, a LangGraph node), ``asyncio.run`` refuses to
start; the run then goes on a thread of its own with a loop of its own while the caller waits.
Waiting blocks the caller's loop, as any synchronous call does: async code should
``await kgot.ask_async(...)`` instead.

While it waits, the caller can still stop the run: a ``KeyboardInterrupt`` in the waiting thread
(Ctrl-C in a notebook or a script) or a cancellation of the task that called (``asyncio.run``'s
own Ctrl-C handling, a server dropping the request) cancels the run, waits until it has
recorded itself as interrupted, and is raised again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# How often a waiting caller looks whether its own task was cancelled meanwhile (its loop is
# blocked by the wait, so nothing else would tell it).
_POLL_S = 0.05


def run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end and return its result (module docstring)."""
    try:
        caller: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        caller = None
    if caller is None:
        # Outside the `except`: the run's own errors must not show "no running event loop"
        # as the exception they happened during.
        return asyncio.run(coroutine)
    return _OwnLoopThread(coroutine).wait(asyncio.current_task(caller))


class _OwnLoopThread:
    """One coroutine on a new thread with a new event loop, started at once."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        # The caller's context variables (tracing, a request id) reach the run as they reach
        # a task the caller creates.
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._main,), name="kgot-ask", daemon=False
        )
        self._thread.start()

    def _main(self) -> None:
        try:
            self._outcome.set_result(asyncio.run(self._tracked()))
        except BaseException as error:  # handed to the waiting caller as it is
            self._outcome.set_exception(error)
        finally:
            self._started.set()  # also when the loop could not start

    async def _tracked(self) -> Any:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._started.set()
        return await self._coroutine

    def wait(self, caller_task: asyncio.Task[Any] | None) -> Any:
        """The coroutine's result (or its exception), once it ended. A ``KeyboardInterrupt`` in
        this thread or a cancellation of ``caller_task`` stops it first (module docstring)."""
        try:
            while True:
                try:
                    return self._outcome.result(timeout=_POLL_S)
                except concurrent.futures.TimeoutError:
                    if caller_task is not None and caller_task.cancelling():
                        self._stop()
                        raise asyncio.CancelledError from None
        except KeyboardInterrupt:
            self._stop()
            raise

    def _stop(self) -> None:
        """Cancel the run and wait until it has unwound (recorded itself as interrupted,
        stopped its sandbox jobs). What it ends with is not the caller's answer any more."""
        self._started.wait()
        if self._loop is not None and self._task is not None and not self._outcome.done():
            self._loop.call_soon_threadsafe(self._task.cancel)
        concurrent.futures.wait([self._outcome])
