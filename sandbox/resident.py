"""A worker of one run's own that keeps state between that run's jobs.

Graph jobs used to rebuild the whole graph in every job: its cost grew with the graph. A
:class:`ResidentWorker` is one more sandbox of exactly the same kind as the pool's (same
launcher, seccomp filter, cgroup, limits), started for one run only. Its zygote holds the run's
graph, sent by the host as *state* (see :mod:`kgot.sandbox.worker`), and every job is forked
from it, so a job receives only the model's code.

Why a worker of its own: the pool's workers serve every run of the process (the python tool,
document conversion, other runs' jobs) and must never hold a graph, or a job of one run could
read another run's graph out of its own memory. A resident worker serves one run's graph jobs
and is stopped with the run; it is never handed to anyone else, and the state hook refuses a
second run's state (:mod:`kgot.graph_backends.jobs.resident`).

The worker starts in the background as soon as the run opens, so it is warm (and, once the host
sends it, loaded) while the first votes are with the model.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError
from kgot.sandbox.base import ExecResult, Job
from kgot.sandbox.common import failed_result, resolve_limits, validate_job

if TYPE_CHECKING:
    from kgot.sandbox.pool import WorkerProcess

log = logging.getLogger(__name__)


# How a resident job's failed result begins when the worker was closed under it (the run ended
# or was cancelled): unlike a worker that died, nothing replaces it, so there is no retrying.
CLOSED_DURING_JOB = "the job was stopped: its sandbox worker was closed while it ran"


class StateRefused(Exception):
    """The worker did not take a state update (it names why); its state is unknown now."""


class ResidentWorker:
    """One dedicated warm worker; thread-safe, one job or state update at a time.

    :attr:`generation` changes whenever the worker was replaced (it died, or a job took it
    down): whatever state the caller had sent is gone then and must be sent again.

    Two locks: ``_lock`` lines jobs up and is held for a whole job; ``_guard`` protects the
    fields and is held for moments only. :meth:`close` takes only ``_guard``, so it never
    waits for a job: a run cancelled mid-job closes its worker as it unwinds, and waiting
    there for the job held the closing thread (once the MCP server's event loop, so every
    tenant) until the job's timeout.
    """

    def __init__(
        self,
        start: Callable[[], WorkerProcess],
        settings: SandboxSettings,
        *,
        nproc_base: Callable[[WorkerProcess], int | None],
        closed: Callable[[], bool] = lambda: False,
    ) -> None:
        self._start = start
        self._settings = settings
        self._nproc_base = nproc_base
        self._pool_closed = closed
        self._lock = threading.RLock()  # one job or state update at a time, for its whole length
        self._guard = threading.Lock()  # the fields below, for moments only
        self._worker: WorkerProcess | None = None
        self._pending: Future[WorkerProcess] | None = None
        self._busy: WorkerProcess | None = None  # the worker a job or state update is on now
        self._closed = False
        # Settled by close(): a job waiting for the worker to start stops waiting at once.
        self._closing: Future[None] = Future()
        self.generation = 0
        with self._guard:
            self._begin_start()

    @property
    def name(self) -> str:
        return "resident"

    # -- state ------------------------------------------------------------------------------

    def set_state(
        self, hook: str, request: dict[str, Any], blobs: list[bytes], timeout_s: float = 60.0
    ) -> dict[str, Any]:
        """Send state to the worker's zygote; the hook's answer.

        Raises:
            StateRefused: the hook failed (the worker lives on; send a full state next).
            SandboxUnavailableError: no worker could be started.
        """
        from kgot.sandbox.pool import WorkerCrashed

        with self._lock:
            worker = self._claim()
            try:
                answer = worker.send_state(hook, request, blobs, timeout_s)
            except WorkerCrashed as why:
                self._replace(worker)
                raise StateRefused(f"the resident worker died taking its state ({why})") from None
            finally:
                self._done_with(worker)
            if not answer.get("ok"):
                raise StateRefused(str(answer.get("error") or "refused"))
            return answer

    # -- jobs -------------------------------------------------------------------------------

    def run(self, job: Job) -> ExecResult:
        """Run ``job`` on the worker (forked from its zygote, with the state it holds).

        Raises:
            SandboxUnavailableError: no worker could be started.
            ValueError: the job mounts files or installs packages (resident jobs cannot).
        """
        return self.run_with_state(job, None)

    def run_with_state(
        self, job: Job, state: tuple[str, dict[str, Any], list[bytes]] | None
    ) -> ExecResult:
        """:meth:`run`, after updating the held state with ``state`` (hook, request, blobs)
        in the same exchange with the worker.

        Raises:
            StateRefused: the update failed; the job did not run.
            SandboxUnavailableError, ValueError: as :meth:`run`.
        """
        from kgot.sandbox.pool import (
            WORKER_DIED,
            WorkerCrashed,
            WorkerSilent,
            silent_worker_result,
        )

        validate_job(job)
        if job.mounts or job.packages:
            raise ValueError("a resident worker runs jobs without mounts or packages")
        limits = resolve_limits(job.limits, self._settings)
        with self._lock:
            worker = self._claim()
            try:
                result = worker.run(job, limits, self._nproc_base(worker), state)
                if state is not None and not (worker.last_state or {}).get("ok"):
                    raise StateRefused(str((worker.last_state or {}).get("error") or "refused"))
                return result
            except WorkerSilent:
                self._replace(worker)
                return silent_worker_result(limits)
            except WorkerCrashed as why:
                self._replace(worker)  # the new generation tells the caller its state is gone
                if self._closed:  # close() killed it: nothing replaces it
                    return failed_result(f"{CLOSED_DURING_JOB} ({why})")
                return failed_result(f"{WORKER_DIED} ({why}); it was replaced")
            except StateRefused:
                raise
            except BaseException:
                self._replace(worker)  # interrupted mid-job: the worker's state is unknown
                raise
            finally:
                self._done_with(worker)

    async def arun(self, job: Job) -> ExecResult:
        return await asyncio.to_thread(self.run, job)

    def warm_up(self, *, wait: bool = True) -> None:
        if wait:
            with self._lock:
                self._done_with(self._claim())

    def close(self) -> None:
        """Stop the worker (its state goes with it); safe to call twice, from any thread.

        It never waits for a job: one running now is killed with the worker (its caller gets
        a failed result, and the thread running it closes the dead worker), and one waiting
        for the worker to start is refused at once.
        """
        with self._guard:
            self._closed = True
            if not self._closing.done():
                self._closing.set_result(None)
            pending, worker, busy = self._pending, self._worker, self._busy
            self._pending = None
            if busy is None:
                self._worker = None  # idle: closed here; else its job's thread closes it
        if busy is not None:
            busy.kill()
        elif worker is not None:
            worker.close()
        if pending is not None:
            pending.add_done_callback(_close_started)

    # -- mechanics --------------------------------------------------------------------------

    def _begin_start(self) -> None:
        """Start a worker in the background (the caller holds ``_guard``)."""
        future: Future[WorkerProcess] = Future()

        def start() -> None:
            try:
                future.set_result(self._start())
            except BaseException as error:  # reported to whoever waits for the worker
                future.set_exception(error)

        self._pending = future
        threading.Thread(target=start, daemon=True, name="kgot-resident-start").start()

    def _claim(self) -> WorkerProcess:
        """The worker, started if need be, marked busy until :meth:`_done_with` (the caller
        holds ``_lock``).

        Raises:
            SandboxUnavailableError: the worker was closed, or could not be started.
        """
        while True:
            with self._guard:
                self._check_open()
                if self._worker is not None:
                    self._busy = self._worker
                    return self._worker
                if self._pending is None:
                    self._begin_start()
                pending = self._pending
                assert pending is not None
            # Not under _guard: a start takes seconds, and close() must be able to end it.
            either: list[Future[Any]] = [pending, self._closing]
            wait(either, return_when=FIRST_COMPLETED)
            with self._guard:
                self._check_open()  # closed meanwhile: close() stops the started worker
                if self._pending is pending:
                    self._pending = None
                if pending.exception() is None:
                    self._worker = pending.result()  # marked busy on the next turn
            pending.result()  # raises the start's SandboxUnavailableError

    def _done_with(self, worker: WorkerProcess) -> None:
        """The job or update on ``worker`` is over. A worker that close() only killed (its
        job was running) is closed here, by the thread that ran the job."""
        with self._guard:
            self._busy = None
            orphaned = self._closed and self._worker is worker
            if orphaned:
                self._worker = None
        if orphaned:
            worker.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxUnavailableError("the run's resident sandbox worker was closed")

    def _replace(self, worker: WorkerProcess) -> None:
        """Drop ``worker`` (its state is lost) and start a successor in the background."""
        worker.kill()
        worker.close()
        with self._guard:
            if self._worker is worker:
                self._worker = None
            self.generation += 1
            if not self._closed and not self._pool_closed():
                self._begin_start()


def _close_started(future: Future[WorkerProcess]) -> None:
    if future.exception() is None:
        future.result().close()
