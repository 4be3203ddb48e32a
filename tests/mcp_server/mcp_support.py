"""Helpers of the MCP server tests: two seeded entities, a tokens file, the server as a real
subprocess (``python -m kgot mcp serve``) and real MCP client sessions over Streamable HTTP and
stdio."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, open_store
from kgot.tests.memory.conftest import UPKEEP_TYPES

T = TypeVar("T")

B_ONLY_WORDS = "Zanzibar Quokka"  # words only entity b holds


def seed(store_url: str, entity: str, *, own_company: bool = False) -> None:
    """The same shape in both entities: Apple (with the merged-away id ``apple_old``),
    Cupertino, the headquarters edge; ``b`` also holds a company whose words ``a`` lacks."""
    with open_store(store_url) as store:
        store.create_entity(entity, types=UPKEEP_TYPES)
        session = store.session(entity)
        session.load_graph()
        nodes = [
            Node("apple", "Company", {"name": "Apple Inc.", "symbol": "AAPL", "ceo": "Tim Cook"}),
            Node("apple_old", "Company", {"name": "Apple Computer"}),
            Node("cupertino", "Place", {"name": "Cupertino"}),
        ]
        if own_company:
            nodes.append(Node("quokka", "Company", {"name": f"{B_ONLY_WORDS} Holdings"}))
        session.commit(
            Changeset(
                added_nodes=tuple(nodes),
                added_edges=(Edge("apple", "cupertino", "headquartered_in"),),
            ),
            Provenance(run_id="seed", step="seed", source_ref="file:seed", confidence=0.9),
        )
        session.merge_nodes(
            "apple",
            ["apple_old"],
            Provenance(run_id="seed", step="seed"),
            properties={
                "name": "Apple Inc.",
                "symbol": "AAPL",
                "ceo": "Tim Cook",
                "aliases": ["Apple Computer"],
            },
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kgot_command(*arguments: str, config: Path | None = None) -> list[str]:
    top = ["--config", str(config)] if config is not None else []
    return [sys.executable, "-m", "kgot", *top, *arguments]


@dataclass
class ServerProcess:
    """``kgot mcp serve --http`` in a subprocess; ``url`` once it listens."""

    command: list[str]
    url: str
    stderr: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 90.0) -> ServerProcess:
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        ready = threading.Event()

        def read() -> None:
            assert self.process is not None and self.process.stderr is not None
            for line in self.process.stderr:
                self.stderr.append(line)
                if "MCP server at" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the MCP server did not start: {''.join(self.stderr)}")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def http_server(
    store_url: str, tokens: Path, *extra: str, config: Path | None = None
) -> Iterator[ServerProcess]:
    port = free_port()
    command = kgot_command(
        "mcp",
        "serve",
        "--http",
        f"127.0.0.1:{port}",
        "--tokens",
        str(tokens),
        "--db",
        store_url,
        *extra,
        config=config,
    )
    server = ServerProcess(command, f"http://127.0.0.1:{port}/mcp").start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[Any]:
    """An initialised MCP ``ClientSession`` over Streamable HTTP with ``token``."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(arguments: Sequence[str], config: Path | None = None) -> AsyncIterator[Any]:
    """An initialised MCP ``ClientSession`` with ``python -m kgot ARGUMENTS`` over stdio."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command = kgot_command(*arguments, config=config)
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(parameters, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def run(work: Callable[[], Awaitable[T]]) -> T:
    """Run an async test body."""
    return anyio.run(work)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
