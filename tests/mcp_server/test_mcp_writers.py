"""Concurrent writer processes on one database (issue 26, item 2).

Three ``kgot mcp serve`` processes (one per editor window, as real clients run them) write the
same node at once: each ``save_facts`` call changes a functional property of ``apple`` and adds
an edge. Every call must either succeed or come back as a readable error that names the
conflict and says to call again; no server prints a traceback; and the graph stays consistent
(one current row per fact, every successful call's facts current or superseded, nothing of a
refused call written). Over stdio and over Streamable HTTP, on SQLite and PostgreSQL. Then the
three propose the same type at once: one creates it, the others are told the name is taken.

In-process tests pin down the retry itself: a writer that keeps losing gets the conflict error
(naming the facts) after the policy's tries, one that loses a few times is written once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from sqlalchemy import func, select

from kgot.config import Trust
from kgot.errors import WriteConflictError
from kgot.graph_model import Changeset, Node
from kgot.mcp_server import writes
from kgot.mcp_server.tokens import add_token
from kgot.mcp_server.tool_schemas import EdgeIn, NodeIn
from kgot.memory import Memory
from kgot.persistence import Provenance, Store, open_store
from kgot.persistence.schema import TABLES
from kgot.tests.mcp_server.mcp_support import (
    http_server,
    http_session,
    kgot_command,
    run,
    seed,
    text_of,
)

WRITERS = 3
CALLS = 30
ENTITY = "e"
# What a refused call must say: the conflict, and that calling again is the fix.
_CONFLICT = re.compile(r"another writer changed .+ of entity 'e' meanwhile; call save_facts again")
_SUPPLIER = {
    "kind": "node",
    "name": "Supplier",
    "description": "A company that supplies another.",
    "justification": "no type says who supplies whom",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}},
    },
    "example": {"name": "Foxconn"},
}


@dataclass
class Outcomes:
    """What one writer's calls returned."""

    saved: list[int] = field(default_factory=list)  # call numbers that were written
    conflicts: list[str] = field(default_factory=list)  # readable conflict errors
    other: list[str] = field(default_factory=list)  # anything else (a failure of the test)
    proposed: Any = None  # the result of its propose_type


@contextlib.asynccontextmanager
async def _stdio_session(arguments: Sequence[str], errlog: TextIO) -> AsyncIterator[Any]:
    """``mcp_support.stdio_session`` with the server's stderr kept in ``errlog``."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command = kgot_command(*arguments)
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with (
        stdio_client(parameters, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _arguments(writer: int, call: int) -> dict[str, Any]:
    return {
        "nodes": [{"id": "apple", "label": "Company", "properties": {"ceo": _ceo(writer, call)}}],
        "edges": [
            {
                "source": "apple",
                "target": "cupertino",
                "relationship": "related_to",
                "key": _key(writer, call),
            }
        ],
        "source_ref": f"writer-{writer}",
    }


def _ceo(writer: int, call: int) -> str:
    return f"CEO {writer}.{call}"


def _key(writer: int, call: int) -> str:
    return f"w{writer}-{call}"


class _AllWritten:
    """Lets the writers propose their type together, once every one has written."""

    def __init__(self) -> None:
        self.waiting = WRITERS
        self.event = anyio.Event()

    async def wait(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.event.set()
        await self.event.wait()


async def _write(session: Any, writer: int, outcomes: Outcomes, together: _AllWritten) -> None:
    for call in range(CALLS):
        result = await session.call_tool("save_facts", _arguments(writer, call))
        text = text_of(result)
        if not result.is_error and (result.structured_content or {}).get("written"):
            outcomes.saved.append(call)
        elif result.is_error and _CONFLICT.search(text):
            outcomes.conflicts.append(text)
        else:
            outcomes.other.append(f"call {call}: {text[:500]}")
    await together.wait()
    outcomes.proposed = await session.call_tool("propose_type", _SUPPLIER)


async def _run_writers(open_session: Any, outcomes: Sequence[Outcomes]) -> None:
    together = _AllWritten()

    async def writer(number: int) -> None:
        async with open_session(number) as session:
            await _write(session, number, outcomes[number], together)

    async with anyio.create_task_group() as group:
        for number in range(WRITERS):
            group.start_soon(writer, number)


def _check(store_url: str, outcomes: Sequence[Outcomes], stderr: str) -> None:
    """Every call accounted for, no traceback, and a consistent graph."""
    print(_summary(outcomes))  # shown with -s: how often the retries were not enough
    other = [line for found in outcomes for line in found.other]
    assert not other, "calls that neither succeeded nor said to call again:\n" + "\n".join(other)
    assert "Traceback" not in stderr and "Error executing tool" not in stderr, stderr[-5000:]
    assert sum(len(found.saved) for found in outcomes) > 0
    proposed = [found.proposed for found in outcomes]
    assert sum(not result.is_error for result in proposed) == 1
    for result in proposed:
        assert not result.is_error or "the name is not new" in text_of(result), text_of(result)
    with open_store(store_url) as store:
        session = store.session(ENTITY)
        with store._context.engine.connect() as connection:
            for table, columns in (
                (TABLES.nodes, ("node_id",)),
                (TABLES.edges, ("source", "target", "key")),
            ):
                keys = [table.c[name] for name in columns]
                doubled = connection.execute(
                    select(*keys, func.count())
                    .where(
                        table.c.entity_id == session._entity_id, table.c.valid_to_version.is_(None)
                    )
                    .group_by(*keys)
                    .having(func.count() > 1)
                ).all()
                assert not doubled, f"facts with more than one current row: {doubled}"
        history = session.node_history("apple")
        edge_keys = {key for _, _, key in session.load_graph().out_edges("apple", keys=True)}
    ceos = [(row.get("properties") or {}).get("ceo") for row in history]
    current = [row for row in history if row.get("valid_to_version") is None]
    assert len(current) == 1
    written = set()
    for writer, found in enumerate(outcomes):
        for call in range(CALLS):
            if call in found.saved:  # its edge is current, its value current or superseded
                assert _key(writer, call) in edge_keys and _ceo(writer, call) in ceos
                written.add(_ceo(writer, call))
            else:  # a refused call wrote nothing
                assert _key(writer, call) not in edge_keys and _ceo(writer, call) not in ceos
    assert current[0]["properties"]["ceo"] in written


def _summary(outcomes: Sequence[Outcomes]) -> str:
    return ", ".join(
        f"writer {n}: {len(o.saved)} saved, {len(o.conflicts)} conflicts, {len(o.other)} other"
        for n, o in enumerate(outcomes)
    )


@pytest.mark.slow
def test_three_stdio_writers_on_one_node(store_url: str, tmp_path: Path) -> None:
    seed(store_url, ENTITY)
    logs = [tmp_path / f"server-{n}.err" for n in range(WRITERS)]
    outcomes = [Outcomes() for _ in range(WRITERS)]

    @contextlib.asynccontextmanager
    async def stdio(number: int) -> AsyncIterator[Any]:
        arguments = ["mcp", "serve", "--entity", ENTITY, "--label", f"w{number}"]
        with logs[number].open("w") as errlog:
            async with _stdio_session([*arguments, "--db", store_url], errlog) as session:
                yield session

    run(lambda: _run_writers(stdio, outcomes))
    _check(store_url, outcomes, "".join(log.read_text() for log in logs))


@pytest.mark.slow
def test_three_http_writers_on_one_node(store_url: str, tmp_path: Path) -> None:
    seed(store_url, ENTITY)
    tokens = tmp_path / "tokens.toml"
    token, _ = add_token(tokens, "writer", [ENTITY], ["read", "write"])
    outcomes = [Outcomes() for _ in range(WRITERS)]
    with (
        http_server(store_url, tokens) as first,
        http_server(store_url, tokens) as second,
        http_server(store_url, tokens) as third,
    ):
        urls = [first.url, second.url, third.url]
        run(lambda: _run_writers(lambda number: http_session(urls[number], token), outcomes))
    _check(store_url, outcomes, "".join(line for s in (first, second, third) for line in s.stderr))


# ------------------------------------------------------------------------ the retry, in-process


@pytest.fixture
def seeded(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The seeded entity, with the retry policy's waits taken out (its tries stay)."""
    seed(store_url, ENTITY)
    monkeypatch.setattr(
        writes, "RETRY_POLICY", dataclasses.replace(writes.RETRY_POLICY, backoff_base=0.0)
    )
    with open_store(store_url) as store:
        yield store


class _Racing(Memory):
    """A memory whose first ``losses`` commits another writer beats: just before each, a
    second session (another process, as far as this one can tell) sets apple's CEO."""

    def __init__(self, store: Store, losses: int) -> None:
        super().__init__(store.session(ENTITY))
        self.other = store.session(ENTITY)
        self.losses = losses
        self.tries = 0

    def commit(self, changeset: Changeset, provenance: Provenance) -> Any:
        self.tries += 1
        if self.tries <= self.losses:
            self.other.refresh()
            self.other.commit(
                Changeset(changed_nodes=(_apple(f"Other {self.tries}"),)),
                Provenance(run_id="other", step="test", confidence=0.7),
            )
        return super().commit(changeset, provenance)


def _apple(ceo: str) -> Node:
    return Node("apple", "Company", {"name": "Apple Inc.", "symbol": "AAPL", "ceo": ceo})


def _save(memory: Memory, ceo: str) -> Any:
    return writes.save_facts(
        memory,
        [NodeIn(id="apple", label="Company", properties={"ceo": ceo})],
        [EdgeIn(source="apple", target="cupertino", relationship="related_to", key="mine")],
        label="me",
        trust=Trust(confidence=0.7),
    )


@pytest.mark.slow
def test_a_writer_that_keeps_losing_is_told_what_changed_and_to_call_again(
    seeded: Store,
) -> None:
    memory = _Racing(seeded, losses=1_000)
    with pytest.raises(WriteConflictError) as raised:
        _save(memory, "Mine")
    tries = writes.RETRY_POLICY.max_retries + 1
    assert memory.tries == tries
    assert str(raised.value) == (
        "another writer changed 'apple' of entity 'e' meanwhile; call save_facts again "
        f"(nothing was written; tried {tries} times)"
    )
    ceos = [row["properties"].get("ceo") for row in memory.session.node_history("apple")]
    assert "Mine" not in ceos and ceos[-1] == f"Other {tries}"
    assert ("apple", "cupertino", "mine") not in memory.session.load_graph().edges


@pytest.mark.slow
def test_a_writer_that_loses_a_few_times_is_written_once(seeded: Store) -> None:
    memory = _Racing(seeded, losses=3)
    saved = _save(memory, "Mine")
    assert saved.written and memory.tries == 4
    assert saved.updated == ["apple"] and saved.superseded == ["apple"]
    history = memory.session.node_history("apple")
    assert [row["properties"].get("ceo") for row in history][-2:] == ["Other 3", "Mine"]
    assert [row["valid_to_version"] is None for row in history].count(True) == 1
    assert len(memory.session.edge_history("apple", "cupertino", "mine")) == 1
