"""The MCP server under load (issue 18): ``search_memory`` over Streamable HTTP.

Run: ``python -m kgot.benchmarks.perf_mcp`` (``--quick`` for 2,000 nodes, ``--json`` for JSON
lines). It builds an entity of 10,000 nodes and 10,000 edges on a temporary SQLite store (the
population of :mod:`kgot.benchmarks.perf_memory`), starts ``kgot mcp serve --http`` on a
loopback port in a subprocess with a bearer token, and prints:

* the first ``search_memory`` call (the server builds the entity's search index; paid once per
  server and again after a write);
* p50 and p95 of warm ``search_memory`` calls from one client, round trip through the SDK's
  client (target p95 ≤ 150 ms);
* requests per second with 8 concurrent clients (each its own MCP session), and their p95;
* after a ``save_facts`` write: the first ``get_node`` (it reads the node's rows from the
  store, so a write costs it nothing) and the first ``search_memory`` (the index is rebuilt);
* p50 and p95 of ``get_node`` and of ``traverse`` (depth 2) on random nodes.

Client and server share the machine's cores, so the figures include the client's own work.
Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from kgot.benchmarks.figures import Figure, p95, perf_main
from kgot.benchmarks.perf_memory import SEED, commit_population, user_queries
from kgot.memory import synthetic_nodes
from kgot.persistence import open_store

AREA = "mcp"
LABEL = "Organization"
CLIENTS = 8


def _serve(store_url: str, tokens: Path, port: int) -> object:
    import subprocess

    command = [
        sys.executable,
        "-m",
        "kgot",
        "mcp",
        "serve",
        "--http",
        f"127.0.0.1:{port}",
        "--tokens",
        str(tokens),
        "--db",
        store_url,
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    line = process.stderr.readline().decode()  # the server's one line once it listens
    if "MCP server at" not in line:
        process.kill()
        raise RuntimeError(f"the MCP server did not start: {line}{process.stderr.read().decode()}")
    return process


Call = tuple[str, dict[str, Any]]


def _searches(queries: Sequence[str]) -> list[Call]:
    return [("search_memory", {"query": query, "limit": 10}) for query in queries]


async def _session_calls(url: str, token: str, calls: Sequence[Call]) -> list[float]:
    """Milliseconds per tool call, in order, one MCP session."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    times: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for name, arguments in calls:
            started = time.perf_counter()
            result = await session.call_tool(name, arguments)
            times.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result.content}")
    return times


async def _concurrent(url: str, token: str, queries: Sequence[str]) -> tuple[float, list[float]]:
    """Requests per second of :data:`CLIENTS` sessions searching at once, and all latencies."""
    share = len(queries) // CLIENTS
    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]

    async def client(number: int) -> None:
        mine = queries[number * share : (number + 1) * share]
        latencies[number] = await _session_calls(url, token, _searches(mine))

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(CLIENTS):
            group.start_soon(client, number)
    seconds = time.perf_counter() - started
    done = [value for values in latencies for value in values]
    return len(done) / seconds, done


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(quick: bool = False) -> list[Figure]:
    """The figures at 10,000 nodes (``quick``: 2,000 nodes, fewer queries)."""
    import random

    from kgot.mcp_server import add_token

    size, count = (2_000, 120) if quick else (10_000, 400)
    population = synthetic_nodes(size, seed=SEED, label=LABEL)
    asked = user_queries(population, count, SEED + 2)
    picked = random.Random(SEED + 3).sample([node.id for node in population], count // 4)
    new_node = {"id": "bench_new", "label": LABEL, "properties": {"name": "Benchmark New Org"}}
    after_write: list[Call] = [
        ("save_facts", {"nodes": [new_node]}),
        ("get_node", {"id": picked[0]}),
        *_searches(asked[:1]),
    ]
    with tempfile.TemporaryDirectory(prefix="kgot-bench-mcp-") as folder:
        store_url = str(Path(folder) / "kgot.db")
        with open_store(store_url) as store:
            store.create_entity("bench")
            commit_population(store.session("bench"), population, size, SEED)
        tokens = Path(folder) / "tokens.toml"
        token, _ = add_token(tokens, "bench", ["bench"], ["read", "write"])
        port = _free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        process = _serve(store_url, tokens, port)
        try:
            first = anyio.run(_session_calls, url, token, _searches(asked[:1]))
            warm = anyio.run(_session_calls, url, token, _searches(asked))
            rate, loaded = anyio.run(_concurrent, url, token, asked)
            _write, node_after, search_after = anyio.run(_session_calls, url, token, after_write)
            nodes = anyio.run(_session_calls, url, token, [("get_node", {"id": i}) for i in picked])
            walks = anyio.run(
                _session_calls, url, token, [("traverse", {"start": i, "depth": 2}) for i in picked]
            )
        finally:
            process.terminate()  # type: ignore[attr-defined]
            process.wait(timeout=30)  # type: ignore[attr-defined]
    label = f"SQLite, {size:,} nodes / {size:,} edges"
    search = f"{label}: search_memory over Streamable HTTP"
    return [
        Figure(AREA, f"{search}, first call (index build)", first[0], "ms"),
        Figure(AREA, f"{search}, warm p50", statistics.median(warm), "ms"),
        Figure(AREA, f"{search}, warm p95", p95(warm), "ms", 150.0),
        Figure(AREA, f"{search}, {CLIENTS} concurrent clients", rate, "requests/s"),
        Figure(AREA, f"{search}, {CLIENTS} concurrent clients, p95", p95(loaded), "ms"),
        Figure(AREA, f"{label}: get_node, first call after a write", node_after, "ms"),
        Figure(AREA, f"{search}, first call after a write (index rebuild)", search_after, "ms"),
        Figure(AREA, f"{label}: get_node p50", statistics.median(nodes), "ms"),
        Figure(AREA, f"{label}: get_node p95", p95(nodes), "ms"),
        Figure(AREA, f"{label}: traverse depth 2 p95", p95(walks), "ms"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(
        run, prog="python -m kgot.benchmarks.perf_mcp", quick_help="2,000 nodes", argv=argv
    )


if __name__ == "__main__":
    sys.exit(main())
