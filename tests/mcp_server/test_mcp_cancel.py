"""A client cancelling ``ask`` or ``remember`` while the call's sandbox job runs (issue 26).

The server used to close the run's sandbox on its event loop while the job held the worker's
lock, so the whole server (``ping`` included) stood still until the job ended; another
tenant's search waited 15-17 s. Here the scripted model makes each call run graph code that
sleeps 25 s in the sandbox; the client cancels the call mid-job (``notifications/cancelled``,
as the TypeScript SDK does after 60 s) while another client keeps searching. Every one of
those searches must answer within a second, the job must be killed (the server's sandbox
processes gone) and a cancelled ``ask`` recorded as ``interrupted``. Over Streamable HTTP the
other client is another tenant (entity ``b``, its own token); stdio serves one entity, so
there the same client pings and searches. Real server subprocess, sandbox and store (SQLite
and PostgreSQL); only the model is scripted.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from kgot.mcp_server.tokens import add_token
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import (
    B_ONLY_WORDS,
    http_server,
    http_session,
    run,
    seed,
    stdio_session,
)
from kgot.tests.mcp_server.test_mcp_models import _structured
from kgot.tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

JOB_S = 25  # how long the model's code sleeps in the sandbox (its limit: 40 s)
SLOW_QUERY = f"""```python
import time
time.sleep({JOB_S})
result = {{"ceo": G.nodes["apple"]["ceo"]}}
```"""
SLOW_WRITE = f"""```python
import time
time.sleep({JOB_S})
G.add_node("slowco", label="Company", name="Slow Co")
```"""
QUESTION = "Who is the CEO of Apple?"
LATENCY_S = 1.0  # what every search and ping must stay under, before and after the cancel
JOB_RUNNING_S = 3.0  # after the model sent the code: the job runs in the sandbox by then
WINDOW_S = 6.0  # how long the other client keeps measuring after the cancel
GIVE_UP_S = 5.0  # a probe slower than this is recorded as stuck (the old stall took ~20 s)
STOPPED_S = 10.0  # the job's sandbox processes are gone and the run recorded within this


class _SlowModel:
    """Plans a retrieval, then answers every code prompt with code sleeping ``JOB_S``."""

    def __init__(self) -> None:
        self.code_sent = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        system = request.messages[0].get("content", "") if request.messages else ""
        if "You are the planner" in system:
            return _structured(request, {"decision": "RETRIEVE", "reason": "the graph has it"})
        if "You keep a knowledge graph up to date" in system:
            self.code_sent.set()
            return Reply.text(SLOW_WRITE)
        if "You answer questions from a knowledge graph" in system:
            self.code_sent.set()
            return Reply.text(SLOW_QUERY)
        if "needs a calculation" in system:
            return _structured(request, {"needs_math": False, "reason": "stated"})
        if "Give the final answer" in system:
            return _structured(request, {"answer": "Tim Cook", "reasoning": "from the graph"})
        return Reply.error(400, "unexpected prompt")


@dataclass
class _Setup:
    store_url: str
    config: Path
    model: _SlowModel
    tmp_path: Path


@pytest.fixture
def setup(store_url: str, tmp_path: Path) -> Iterator[_Setup]:
    seed(store_url, "a")
    seed(store_url, "b", own_company=True)
    model = _SlowModel()
    with OpenAIServer(responder=model) as endpoint:
        config = tmp_path / "config.toml"
        config.write_text(
            "[llm]\n"
            'model = "openai:local-model"\n'
            f'base_url = "{endpoint.url}"\n'
            "retry_backoff = 0.001\n"
            "[controller]\n"
            "votes = 1\n"
            "[sandbox]\n"
            "timeout = 40\n"
        )
        yield _Setup(store_url, config, model, tmp_path)


Probe = Callable[[], Awaitable[Any]]


async def _latencies(seconds: float, probe: Probe) -> list[float]:
    """Run ``probe`` again and again for ``seconds``; the wall time of each call (``inf`` for
    one still waiting after ``GIVE_UP_S``, which ends the measuring)."""
    found: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        with anyio.move_on_after(GIVE_UP_S) as waiting:
            await probe()
        if waiting.cancelled_caught:
            found.append(math.inf)
            break
        found.append(time.monotonic() - started)
        await anyio.sleep(0.1)
    return found


async def _cancel_mid_job(
    session: Any,
    tool: str,
    arguments: dict[str, Any],
    *,
    model: _SlowModel,
    probe: Probe,
    server_pid: int,
) -> tuple[list[float], list[float]]:
    """Call ``tool``, cancel the call while its sandbox job sleeps in the resident worker of
    the server ``server_pid``, and measure ``probe`` during the job and after the cancel."""
    cancel = anyio.CancelScope()
    answered: list[Any] = []

    async def call() -> None:
        with cancel:  # cancelling it makes the client send notifications/cancelled
            answered.append(await session.call_tool(tool, arguments))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        sent = await anyio.to_thread.run_sync(lambda: model.code_sent.wait(120))
        assert sent, f"the {tool} call never asked the model for code"
        await anyio.sleep(JOB_RUNNING_S)
        assert _resident_workers(server_pid), "no resident worker runs the job"
        during = await _latencies(1.0, probe)
        cancel.cancel()
        after = await _latencies(WINDOW_S, probe)
    assert answered == [], "the call ended before it was cancelled"
    return during, after


def _assert_quick(during: list[float], after: list[float]) -> None:
    assert during and max(during) < LATENCY_S, f"slow during the job: {during}"
    assert len(after) > 5 and max(after) < LATENCY_S, (
        f"the cancel stalled the server: seconds per call after it {after}"
    )


def _resident_workers(pid: int) -> list[int]:
    """The resident sandbox workers ``pid`` started: those of runs (and ``remember`` calls),
    each holding one graph. The shared document-conversion pool's workers, kept for the
    server's life, are not among them."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                resident = b'"resident": true' in cmdline.read()
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid and resident:
            found.append(int(entry))
    return found


def _pid_running(marker: str) -> int:
    """The process whose command line holds ``marker`` (a stdio server the SDK started)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        return int(entry)
            except OSError:
                continue
    raise AssertionError(f"no process runs with {marker}")


def _assert_sandbox_stopped(server_pid: int) -> None:
    """The worker that ran the cancelled call's job is gone well before the job would have
    ended."""
    deadline = time.monotonic() + STOPPED_S
    while _resident_workers(server_pid):
        assert time.monotonic() < deadline, (
            f"resident workers {_resident_workers(server_pid)} still run after the cancel"
        )
        time.sleep(0.2)


def _assert_interrupted(store_url: str) -> None:
    """The cancelled ask's run is recorded as interrupted (resumable), soon."""
    deadline = time.monotonic() + STOPPED_S
    while True:
        with open_store(store_url) as store:
            runs = [run for run in store.list_runs(entity="a") if run.question == QUESTION]
        assert len(runs) == 1
        if runs[0].status == "interrupted":
            return
        assert time.monotonic() < deadline, f"the cancelled run is {runs[0].status!r}"
        time.sleep(0.2)


def _assert_nothing_written(store_url: str) -> None:
    with open_store(store_url) as store:
        assert "slowco" not in store.session("a").load_graph()


def _http_cancel(setup: _Setup, tool: str, arguments: dict[str, Any]) -> None:
    """Cancel ``tool`` of tenant ``a`` while tenant ``b`` searches."""
    tokens = setup.tmp_path / "tokens.toml"
    token_a, _ = add_token(tokens, "agent-a", ["a"], ["read", "write", "ask"])
    token_b, _ = add_token(tokens, "agent-b", ["b"], ["read"])
    with http_server(setup.store_url, tokens, config=setup.config) as server:

        async def go() -> tuple[list[float], list[float]]:
            async with (
                http_session(server.url, token_a) as client_a,
                http_session(server.url, token_b) as client_b,
            ):

                async def search_b() -> None:
                    found = await client_b.call_tool("search_memory", {"query": B_ONLY_WORDS})
                    assert found.structured_content["hits"], found

                await search_b()  # the index is built before anything is measured
                return await _cancel_mid_job(
                    client_a,
                    tool,
                    arguments,
                    model=setup.model,
                    probe=search_b,
                    server_pid=server_pid,
                )

        assert server.process is not None
        server_pid = server.process.pid
        during, after = run(go)
        _assert_quick(during, after)
        _assert_sandbox_stopped(server_pid)


def _stdio_cancel(setup: _Setup, tool: str, arguments: dict[str, Any]) -> None:
    """Cancel ``tool`` over stdio while the same client pings and searches."""
    label = f"cancel-{uuid.uuid4().hex[:12]}"  # finds the server's process
    serve = ["mcp", "serve", "--entity", "a", "--label", label, "--db", setup.store_url]

    async def go() -> None:
        async with stdio_session(serve, config=setup.config) as session:
            server_pid = _pid_running(label)

            async def ping_and_search() -> None:
                await session.send_ping()
                found = await session.call_tool("search_memory", {"query": "Apple"})
                assert found.structured_content["hits"], found

            await ping_and_search()
            during, after = await _cancel_mid_job(
                session,
                tool,
                arguments,
                model=setup.model,
                probe=ping_and_search,
                server_pid=server_pid,
            )
            _assert_quick(during, after)
            # Checked while the server still runs: its sandbox is gone, not the server.
            await anyio.to_thread.run_sync(lambda: _assert_sandbox_stopped(server_pid))

    run(go)


@pytest.mark.slow
def test_a_cancelled_ask_over_http_stalls_no_other_tenant(setup: _Setup) -> None:
    _http_cancel(setup, "ask", {"question": QUESTION})
    _assert_interrupted(setup.store_url)


@pytest.mark.slow
def test_a_cancelled_remember_over_http_stalls_no_other_tenant(setup: _Setup) -> None:
    _http_cancel(setup, "remember", {"text": "Slow Co makes slow things."})
    _assert_nothing_written(setup.store_url)


@pytest.mark.slow
def test_a_cancelled_ask_over_stdio_stalls_neither_ping_nor_search(setup: _Setup) -> None:
    _stdio_cancel(setup, "ask", {"question": QUESTION})
    _assert_interrupted(setup.store_url)


@pytest.mark.slow
def test_a_cancelled_remember_over_stdio_stalls_neither_ping_nor_search(setup: _Setup) -> None:
    _stdio_cancel(setup, "remember", {"text": "Slow Co makes slow things."})
    _assert_nothing_written(setup.store_url)


@pytest.mark.slow
def test_work_seen_through_ends_even_when_cancelled_again_and_again() -> None:
    """What a cancelled run does on its way out (close its sandbox, record itself) runs on a
    thread through ``finish_in_thread``. Under an anyio cancel scope, as in the SDK's handlers,
    every await is cancelled again until the task leaves the scope: the call still runs to its
    end, and the cancel is raised after it."""
    from kgot.controller.run import finish_in_thread

    ended: list[float] = []

    def slow_close() -> None:
        time.sleep(0.5)
        ended.append(time.monotonic())

    async def go() -> tuple[bool, float]:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await finish_in_thread(slow_close)
            raise AssertionError("the cancel was not raised")
        return scope.cancelled_caught, time.monotonic()

    caught, after = run(go)
    assert caught and len(ended) == 1 and ended[0] <= after
