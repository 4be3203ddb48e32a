"""Closing a run's resident worker never waits for its job (issue 26: a cancelled MCP ``ask``
closed the worker on the event loop while the job held the worker's lock, so every tenant
waited for the job's timeout). The close kills the job; the thread running it gets a failed
result and cleans up. Real workers of both hardened kinds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kgot.errors import SandboxUnavailableError
from kgot.sandbox.base import ExecResult, Job, Limits
from kgot.sandbox.pool import PooledSandbox
from kgot.sandbox.resident import CLOSED_DURING_JOB, ResidentWorker
from kgot.tests.sandbox.conftest import make_sandbox

LONG_JOB = Job(code="import time\ntime.sleep(25)\nprint('finished')", limits=Limits(timeout_s=40))
PROMPT_S = 2.0  # "at once", with room for a loaded 2-core machine; the job would take 25 s


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``call`` in a thread; the dict gets its ``value`` or ``error`` and ``seconds``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        started = time.monotonic()
        try:
            outcome["value"] = call()
        except BaseException as error:
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def _timed_close(resident: ResidentWorker) -> float:
    started = time.monotonic()
    resident.close()
    return time.monotonic() - started


@pytest.fixture(params=["bwrap", "fallback"])
def pool(request: pytest.FixtureRequest) -> Any:
    box = make_sandbox(request.param, pool_size=1, resident_graph=True)
    assert isinstance(box, PooledSandbox)
    yield box
    box.close()


@pytest.mark.slow
def test_closing_during_a_job_kills_it_and_its_caller_gets_a_failed_result(
    pool: PooledSandbox,
) -> None:
    resident = pool.open_resident(())
    assert resident is not None
    resident.warm_up()
    worker = resident._worker
    assert worker is not None
    thread, outcome = _in_thread(lambda: resident.run(LONG_JOB))
    time.sleep(1.0)  # the job is sleeping in the sandbox now
    assert thread.is_alive()

    assert _timed_close(resident) < PROMPT_S
    thread.join(PROMPT_S)
    assert not thread.is_alive(), "the job's caller still waits after the close"
    result: ExecResult = outcome["value"]
    assert not result.ok and "finished" not in result.stdout
    assert result.error is not None and result.error.startswith(CLOSED_DURING_JOB)
    # The job's thread closed the dead worker: its process is gone, nothing replaced it.
    assert worker.process.poll() is not None
    assert resident._worker is None and resident._pending is None
    with pytest.raises(SandboxUnavailableError):
        resident.run(Job(code="print(1)"))


@pytest.mark.slow
def test_a_state_update_queued_behind_the_job_is_refused_at_the_close(
    pool: PooledSandbox,
) -> None:
    resident = pool.open_resident(())
    assert resident is not None
    resident.warm_up()
    job_thread, job_outcome = _in_thread(lambda: resident.run(LONG_JOB))
    time.sleep(1.0)
    update_thread, update_outcome = _in_thread(
        lambda: resident.set_state("kgot.graph_backends.jobs.resident", {}, [b""])
    )
    time.sleep(0.2)  # waiting for the job to end

    assert _timed_close(resident) < PROMPT_S
    job_thread.join(PROMPT_S)
    update_thread.join(PROMPT_S)
    assert not job_thread.is_alive() and not update_thread.is_alive()
    assert not job_outcome["value"].ok
    assert isinstance(update_outcome["error"], SandboxUnavailableError)


@pytest.mark.slow
def test_closing_while_a_job_waits_for_the_worker_to_start_refuses_it_at_once(
    pool: PooledSandbox,
) -> None:
    """A job that waits for the worker (still starting) is refused at the close, not when the
    start ends; the worker that starts afterwards is stopped."""
    gate = threading.Event()
    started: list[Any] = []

    def slow_start() -> Any:
        gate.wait(30)  # a start on a loaded machine: seconds
        worker = pool._start_worker(preload=["json"], resident=True)
        started.append(worker)
        return worker

    resident = ResidentWorker(slow_start, pool.settings, nproc_base=pool._nproc_base)
    thread, outcome = _in_thread(lambda: resident.run(Job(code="print(1)")))
    time.sleep(0.5)
    assert thread.is_alive()

    assert _timed_close(resident) < PROMPT_S
    thread.join(PROMPT_S)
    assert not thread.is_alive(), "the job still waits for the start after the close"
    assert isinstance(outcome["error"], SandboxUnavailableError)

    gate.set()  # the start ends now: the worker it made is stopped, not kept
    deadline = time.monotonic() + 30
    while not (started and started[0].process.poll() is not None):
        assert time.monotonic() < deadline, "the worker started after the close still runs"
        time.sleep(0.1)


def test_closing_an_idle_worker_stops_it(pool: PooledSandbox) -> None:
    resident = pool.open_resident(())
    assert resident is not None
    assert resident.run(Job(code="print(1)")).stdout.strip() == "1"
    worker = resident._worker
    assert worker is not None
    assert _timed_close(resident) < PROMPT_S
    assert worker.process.poll() is not None
    resident.close()  # twice is fine
