"""A client that goes away in the middle of a call is no error (issue 26).

Over stdio a client that dies (both its pipe ends close) made the server exit 70 with
"internal error … please report it": the SDK's transport failed writing the answer to the
broken pipe. Now the server cancels the call (its ``ask`` run recorded ``interrupted``) and
exits 0 without a word; a client that only closes stdin still reads the answer. Over HTTP a
dropped connection left the call's run going (a model could be paid for an answer nobody
reads); now that request's work is cancelled and the server goes on serving others. Real
server subprocesses and stores (SQLite and PostgreSQL); the model never answers, which keeps
the call pending.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from kgot.mcp_server.tokens import add_token
from kgot.tests.mcp_server.mcp_support import http_server, http_session, run
from kgot.tests.mcp_server.test_mcp_signals import (
    QUESTION,
    Served,
    assert_quiet,
    interrupted_run,
    only_run,
    serving,
    stdio_client,
    wait_for_running_ask,
)

GONE_S = 5.0  # the client gone to the server's exit, or to the run recorded interrupted


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[Served]:
    """Entity ``a`` in a store (SQLite and PostgreSQL) and a model that never answers."""
    with serving(store_url, tmp_path) as found:
        yield found


@pytest.mark.slow
def test_stdio_client_dying_mid_call_ends_the_server_quietly(served: Served) -> None:
    with stdio_client(served) as client:
        client.ask()
        wait_for_running_ask(served)
        gone = time.monotonic()
        client.die()
        code, took = client.exit_code(gone)
    assert code == 0, client.stderr
    assert took < GONE_S, f"exit took {took:.1f} s"
    assert client.stderr.decode().strip() == ""
    assert only_run(served.store_url)[1] == "interrupted"


@pytest.mark.slow
def test_stdio_client_closing_stdin_mid_call_gets_the_answer(served: Served) -> None:
    with stdio_client(served) as client:
        client.ask()
        wait_for_running_ask(served)
        gone = time.monotonic()
        assert client.process.stdin is not None
        client.process.stdin.close()
        answer = client.answer(2, timeout=GONE_S)
        code, took = client.exit_code(gone)
    text = answer["result"]["content"][0]["text"]
    assert answer["result"]["isError"] is True
    assert text.startswith("the client closed the connection: run mcp-"), text
    interrupted_run(text, served.store_url)
    assert code == 0, client.stderr
    assert took < GONE_S, f"exit took {took:.1f} s"
    assert client.stderr.decode().strip() == ""


class _RawClient:
    """An MCP client over Streamable HTTP written with http.client, so that a test can drop
    the connection of one request in the middle of it, as a client that dies does."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port or 80, parts.path
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }

    def post(self, message: dict[str, Any]) -> tuple[http.client.HTTPConnection, Any]:
        """Send ``message``; the connection and the response, its head read."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        body = json.dumps({"jsonrpc": "2.0", **message})
        connection.request("POST", self.path, body=body, headers=self.headers)
        return connection, connection.getresponse()

    def initialize(self) -> None:
        connection, response = self.post(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "disconnect-test", "version": "1"},
                },
            }
        )
        assert response.status == 200, response.read()
        response.read()
        connection.close()
        self.headers["mcp-session-id"] = response.getheader("mcp-session-id")
        self.headers["mcp-protocol-version"] = "2025-06-18"
        connection, response = self.post({"method": "notifications/initialized"})
        assert response.status == 202, response.read()
        connection.close()


@pytest.mark.slow
def test_http_dropped_request_is_cancelled_and_the_server_serves_on(served: Served) -> None:
    tokens = served.tmp_path / "tokens.toml"
    token, _ = add_token(tokens, "agent-x", ["a"], ["read", "ask"])
    with http_server(served.store_url, tokens, config=served.config) as server:
        client = _RawClient(server.url, token)
        client.initialize()
        connection, response = client.post(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"question": QUESTION}},
            }
        )
        assert response.status == 200
        assert response.getheader("content-type").startswith("text/event-stream")
        wait_for_running_ask(served)
        gone = time.monotonic()
        with contextlib.suppress(OSError):
            assert connection.sock is not None
            connection.sock.shutdown(2)  # both ways, as the kernel does for a dead client
        connection.close()
        response.close()
        while only_run(served.store_url)[1] == "running" and time.monotonic() - gone < GONE_S:
            time.sleep(0.1)
        took = time.monotonic() - gone
        status = only_run(served.store_url)[1]

        async def search() -> Any:
            async with http_session(server.url, token) as session:
                return await session.call_tool("search_memory", {"query": "apple"})

        hits = run(search)
        process = server.process
        assert process is not None
        alive = process.poll() is None
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        time.sleep(0.2)  # the stderr reader's last lines
    assert status == "interrupted", f"the run is {status} {took:.1f} s after the drop"
    assert not hits.is_error and hits.structured_content["hits"]
    assert alive
    assert code == 143
    stderr = "".join(server.stderr)
    assert_quiet(stderr)
    assert "ERROR" not in stderr, stderr
