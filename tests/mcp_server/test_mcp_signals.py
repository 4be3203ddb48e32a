"""Signals stop ``kgot mcp serve`` the way they stop ``kgot ask`` (issue 26).

SIGINT, SIGTERM and SIGHUP with an ``ask`` call in flight: the client gets an error result for
it naming the interrupted run and ``kgot ask --resume``, the run is recorded ``interrupted``,
and the server exits 128 + the signal's number within seconds, with no traceback. Before, over
stdio Ctrl-C waited for the client's next line and was never answered, and SIGTERM killed the
server at once, leaving the run ``running``; over HTTP the call got no answer and SIGTERM ended
the process with the signal. The server is a real subprocess on a real store (SQLite and
PostgreSQL); only the model is scripted, and it never answers, which keeps the call pending.

The stdio client here speaks JSON-RPC itself (:class:`StdioClient`), so a test can signal the
server and read exactly what it wrote; ``test_mcp_disconnect`` reuses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from kgot.mcp_server.tokens import add_token
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import (
    http_server,
    http_session,
    kgot_command,
    run,
    seed,
    text_of,
)
from kgot.tests.support.openai_server import OpenAIServer, Reply

QUESTION = "Who is the CEO of Apple?"
STOP_S = 5.0  # signal to exit, at most (about 1 s measured; margin for a loaded machine)
RESUME = re.compile(r"run (mcp-[0-9a-f-]+) is interrupted; continue it with `kgot ask --resume \1`")


@dataclass
class Served:
    """A seeded store (entity ``a``), a model that never answers, and a config naming it."""

    store_url: str
    config: Path
    model: OpenAIServer
    tmp_path: Path


@contextlib.contextmanager
def serving(store_url: str, tmp_path: Path) -> Iterator[Served]:
    seed(store_url, "a")
    with OpenAIServer(responder=lambda _request: Reply.hanging()) as model:
        config = tmp_path / "config.toml"
        config.write_text(f'[llm]\nmodel = "openai:local-model"\nbase_url = "{model.url}"\n')
        yield Served(store_url, config, model, tmp_path)


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[Served]:
    with serving(store_url, tmp_path) as found:
        yield found


class StdioClient:
    """``kgot mcp serve --entity a`` with this test as its client, speaking JSON-RPC on the
    server's pipes: what the server writes is collected by a thread, one message a line."""

    def __init__(self, served: Served) -> None:
        command = kgot_command(
            "mcp", "serve", "--entity", "a", "--db", served.store_url, config=served.config
        )
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        self.messages: list[dict[str, Any]] = []
        self.stderr = b""
        self.changed = threading.Condition()
        self.stop_reading = threading.Event()
        self.threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _read_stdout(self) -> None:
        # select with a timeout, so that `die` can stop this thread before closing the pipe
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not self.stop_reading.is_set():
                if not selector.select(0.05):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    with self.changed:
                        self.messages.append(json.loads(line))
                        self.changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := self.process.stderr.read1(65536):
            self.stderr += chunk

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: int, timeout: float = 120.0) -> dict[str, Any]:
        """The server's answer to request ``request_id``."""
        with self.changed:
            found = self.changed.wait_for(
                lambda: any(m.get("id") == request_id for m in self.messages), timeout
            )
        assert found, f"no answer to request {request_id}: {self.messages} {self.stderr!r}"
        return next(m for m in self.messages if m.get("id") == request_id)

    def initialize(self) -> None:
        self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "signals-test", "version": "1"},
                },
            }
        )
        assert "result" in self.answer(1)
        self.send({"method": "notifications/initialized"})

    def ask(self, request_id: int = 2) -> None:
        self.send(
            {
                "id": request_id,
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"question": QUESTION}},
            }
        )

    def exit_code(self, since: float, timeout: float = 30.0) -> tuple[int | None, float]:
        """The server's exit code (``None``: still running after ``timeout``) and the seconds
        from ``since`` to its exit."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - since
        took = time.monotonic() - since
        for thread in self.threads:
            thread.join(timeout=5)
        return code, took

    def die(self) -> None:
        """What the kernel does when the client process dies: both its pipe ends close."""
        self.stop_reading.set()
        self.threads[0].join(timeout=5)
        for pipe in (self.process.stdin, self.process.stdout):
            assert pipe is not None
            with contextlib.suppress(OSError):
                pipe.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stop_reading.set()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]


@contextlib.contextmanager
def stdio_client(served: Served) -> Iterator[StdioClient]:
    client = StdioClient(served)
    try:
        client.initialize()
        yield client
    finally:
        client.close()


def _name(signum: signal.Signals) -> str:
    return signum.name


def run_status(store_url: str, run_id: str) -> str | None:
    with open_store(store_url) as store:
        record = store.get_run(run_id)
    return None if record is None else record.status


def only_run(store_url: str) -> tuple[str, str]:
    """The one run of the store: its id and status."""
    with open_store(store_url) as store:
        runs = store.list_runs()
    assert len(runs) == 1, runs
    return runs[0].run_id, runs[0].status


def wait_for_running_ask(served: Served) -> None:
    """Until the ask's run is asking the model (and recorded ``running``)."""
    served.model.wait_for_requests(1, timeout=120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(AssertionError):
            if only_run(served.store_url)[1] == "running":
                return
        time.sleep(0.1)
    raise AssertionError("the ask's run was never recorded running")


def interrupted_run(text: str, store_url: str) -> str:
    """The run an answer names as interrupted, checked against the store."""
    found = RESUME.search(text)
    assert found, text
    assert run_status(store_url, found.group(1)) == "interrupted"
    assert only_run(store_url) == (found.group(1), "interrupted")
    return found.group(1)


def assert_quiet(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=_name)
def test_stdio_signal_answers_the_pending_ask_and_exits(
    served: Served, signum: signal.Signals
) -> None:
    with stdio_client(served) as client:
        client.ask()
        wait_for_running_ask(served)
        sent = time.monotonic()
        client.process.send_signal(signum)
        answer = client.answer(2, timeout=STOP_S)
        code, took = client.exit_code(sent)
    result = answer["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert text.startswith(f"the MCP server is stopping ({signum.name})"), text
    run_id = interrupted_run(text, served.store_url)
    assert code == 128 + signum, client.stderr
    assert took < STOP_S, f"exit took {took:.1f} s"
    stderr = client.stderr.decode()
    assert_quiet(stderr)
    assert f"kgot: stopped by {signum.name}; interrupted run(s) {run_id}" in stderr


@pytest.mark.slow
def test_stdio_sigint_with_nothing_pending_exits_at_once(served: Served) -> None:
    """stdin idle, no call: Ctrl-C no longer waits for the client's next line."""
    with stdio_client(served) as client:
        sent = time.monotonic()
        client.process.send_signal(signal.SIGINT)
        code, took = client.exit_code(sent)
    assert code == 130, client.stderr
    assert took < STOP_S, f"exit took {took:.1f} s"
    assert client.stderr.decode().strip().endswith("kgot: stopped by SIGINT")
    assert_quiet(client.stderr.decode())


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=_name)
def test_http_signal_answers_the_pending_ask_and_exits(
    served: Served, signum: signal.Signals
) -> None:
    tokens = served.tmp_path / "tokens.toml"
    token, _ = add_token(tokens, "agent-x", ["a"], ["read", "ask"])
    with http_server(served.store_url, tokens, config=served.config) as server:
        process = server.process
        assert process is not None
        sent: list[float] = []

        async def go() -> Any:
            async with http_session(server.url, token) as session, anyio.create_task_group() as tg:

                async def signal_once_running() -> None:
                    await anyio.to_thread.run_sync(wait_for_running_ask, served)
                    sent.append(time.monotonic())
                    process.send_signal(signum)

                tg.start_soon(signal_once_running)
                with anyio.fail_after(120):
                    return await session.call_tool("ask", {"question": QUESTION})

        result = run(go)
        code, took = _exit_code(process, sent[0])
    text = text_of(result)
    assert result.is_error
    assert text.startswith(f"the MCP server is stopping ({signum.name})"), text
    run_id = interrupted_run(text, served.store_url)
    assert code == 128 + signum, server.stderr
    assert took < STOP_S, f"exit took {took:.1f} s"
    stderr = "".join(server.stderr)
    assert_quiet(stderr)
    assert "ERROR" not in stderr, stderr  # uvicorn's "ASGI callable returned without …"
    assert f"kgot: stopped by {signum.name}; interrupted run(s) {run_id}" in stderr


def _exit_code(process: subprocess.Popen[str], since: float) -> tuple[int | None, float]:
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - since
    took = time.monotonic() - since
    time.sleep(0.2)  # the stderr reader's last lines
    return code, took


@pytest.mark.slow
def test_http_sigterm_with_nothing_pending_exits_at_once(served: Served) -> None:
    """A client's open notification stream (the SDK client opens one) does not hold the
    server up: uvicorn alone would wait for it without limit."""
    tokens = served.tmp_path / "tokens.toml"
    token, _ = add_token(tokens, "agent-x", ["a"], ["read"])
    with http_server(served.store_url, tokens, config=served.config) as server:
        process = server.process
        assert process is not None
        found: dict[str, Any] = {}

        async def go() -> None:
            async with http_session(server.url, token) as session:
                hits = await session.call_tool("search_memory", {"query": "apple"})
                found["hits"] = hits.structured_content["hits"]
                found["sent"] = time.monotonic()
                process.send_signal(signal.SIGTERM)
                found["code"], found["took"] = await anyio.to_thread.run_sync(
                    _exit_code, process, found["sent"]
                )

        run(go)
    assert found["hits"]
    assert found["code"] == 143, server.stderr
    assert found["took"] < STOP_S, f"exit took {found['took']:.1f} s"
    assert_quiet("".join(server.stderr))
