"""Jobs awaited on the event loop (``arun`` / ``run_async``): same results as ``run``, no
thread while a warm worker is free, and a cancelled job takes its worker down at once."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from kgot.sandbox import Job, Limits, Sandbox
from kgot.sandbox.base import ExecResult, run_async
from kgot.tests.sandbox.test_sandbox_contract import GRAPH_UPDATE, IDENTITY, small_graph


@pytest.mark.slow
def test_a_graph_update_awaited_on_the_loop_matches_run(sandbox: Sandbox) -> None:
    job = Job(GRAPH_UPDATE, files={"graph.json": small_graph()})
    awaited = asyncio.run(run_async(sandbox, job))
    assert awaited.ok, awaited
    assert awaited.stdout.strip() == "2 1"
    assert json.loads(awaited.outputs["graph.json"]) == json.loads(
        sandbox.run(job).outputs["graph.json"]
    )


@pytest.mark.slow
def test_a_warm_worker_serves_the_job_without_a_thread(sandbox: Sandbox) -> None:
    sandbox.run(Job("pass"))  # the pool is warm and its worker idle
    threads_seen: list[int] = []

    async def main() -> ExecResult:
        job = asyncio.ensure_future(run_async(sandbox, Job("import time; time.sleep(0.3)")))
        await asyncio.sleep(0.1)
        threads_seen.append(threading.active_count())
        return await job

    before = threading.active_count()
    result = asyncio.run(main())
    assert result.ok, result
    assert threads_seen == [before]  # no executor thread was started for the job


def test_big_inputs_and_outputs_cross_the_pipes_on_the_loop(sandbox: Sandbox) -> None:
    # Both directions exceed a pipe's buffer, so writing and reading must wait for the other
    # side several times.
    payload = bytes(range(256)) * 4096  # 1 MiB
    code = "data = open('in/blob', 'rb').read()\nopen('out/copy', 'wb').write(data[::-1])"
    result = asyncio.run(
        run_async(
            sandbox, Job(code, files={"blob": payload}, limits=Limits(max_output_bytes=2 << 20))
        )
    )
    assert result.ok, result
    assert result.outputs["copy"] == payload[::-1]


@pytest.mark.slow
def test_a_job_past_its_timeout_is_reported_as_timed_out(sandbox: Sandbox) -> None:
    job = Job("while True: pass", limits=Limits(timeout_s=1.0))
    result = asyncio.run(run_async(sandbox, job))
    assert result.timed_out and not result.ok
    assert asyncio.run(run_async(sandbox, Job("print('after')"))).stdout.strip() == "after"


@pytest.mark.slow
def test_cancelling_an_awaited_job_kills_its_worker_and_the_pool_recovers(
    sandbox_factory: object,
) -> None:
    box = sandbox_factory("bwrap")  # type: ignore[operator]
    first = box.run(Job(IDENTITY)).stdout.strip()

    async def cancel_midway() -> float:
        job = asyncio.ensure_future(run_async(box, Job("import time; time.sleep(30)")))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        job.cancel()
        try:
            await job
        except asyncio.CancelledError:
            return time.monotonic() - started
        raise AssertionError("the job was not cancelled")

    assert asyncio.run(cancel_midway()) < 2.0
    # The worker was killed and let go at once, not left to sleep out the job.
    assert not box._state.busy  # type: ignore[attr-defined]
    again = box.run(Job(IDENTITY))
    assert again.ok, again
    assert again.stdout.strip() != first  # a new worker replaced the killed one
