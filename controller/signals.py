"""SIGTERM and SIGHUP stop a run the way Ctrl-C does.

Under ``asyncio.run`` Ctrl-C cancels the main task, so a run records itself as ``interrupted``,
kills its sandbox jobs and leaves its checkpoint resumable. By default SIGTERM (``kill``, a
service manager, a CI timeout) and SIGHUP (a closed terminal) end the process on the spot: the
run stayed ``running`` forever and its tool directory stayed in ``$TMPDIR``. While a run is
going, those signals cancel it instead; the run then raises :class:`RunTerminated`, a
``KeyboardInterrupt``, so callers handle both alike.

Only when asked (``kgot ask`` asks; the Python API does only with ``handle_signals=True``: a
program embedding kgot keeps its signals as it set them), only signals still at their default
action (a program that set its own handler, or ``nohup``, keeps it), only in the main thread
(where Python handles signals), and only while a run is going: then the default action is
restored.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class RunTerminated(KeyboardInterrupt):
    """The run was stopped by a signal (its number in ``signum``) and recorded as
    interrupted; it can be resumed."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _Watch:
    """The runs of one event loop that the signals stop, and the signals taken over for them."""

    def __init__(self) -> None:
        self.tasks: dict[asyncio.Task[object], list[int]] = {}
        self.installed: list[int] = []

    def stop_all(self, signum: int) -> None:
        for task, received in self.tasks.items():
            received.append(signum)
            task.cancel()


_watches: dict[asyncio.AbstractEventLoop, _Watch] = {}


@contextlib.contextmanager
def stopped_by_termination(*, enabled: bool = True) -> Iterator[list[int]]:
    """While inside, SIGTERM and SIGHUP cancel the current task (unless not ``enabled``: then
    nothing is touched); yields the list the signals received are appended to (empty when none
    came)."""
    received: list[int] = []
    task = asyncio.current_task()
    if not enabled or task is None or threading.current_thread() is not threading.main_thread():
        yield received
        return
    loop = asyncio.get_running_loop()
    watch = _watches.setdefault(loop, _Watch())
    if not watch.tasks:
        watch.installed = [s for s in _SIGNALS if _take_over(loop, s, watch)]
    watch.tasks[task] = received
    try:
        yield received
    finally:
        del watch.tasks[task]
        if not watch.tasks:
            for signum in watch.installed:
                loop.remove_signal_handler(signum)  # back to the default action
            del _watches[loop]


def _take_over(loop: asyncio.AbstractEventLoop, signum: int, watch: _Watch) -> bool:
    if signal.getsignal(signum) is not signal.SIG_DFL:
        return False
    try:
        loop.add_signal_handler(signum, watch.stop_all, signum)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True
