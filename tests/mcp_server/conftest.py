"""Fixtures of the MCP server tests: the persistence tests' fresh stores (``store``, SQLite and
PostgreSQL) for in-process tests; and per database kind, a store with entities ``a`` and ``b``,
a tokens file with a token for each (and a read-only one for ``a``), and one HTTP server
subprocess for the module.

Tests that write use node ids of their own, so they share the module's server; isolation tests
compare ``b``'s rows before and after.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kgot.mcp_server.tokens import add_token
from kgot.tests.mcp_server.mcp_support import ServerProcess, http_server, seed
from kgot.tests.persistence.conftest import (  # noqa: F401  (fixtures, found by name)
    POSTGRES_URL,
    _shared_postgres_url,
    drop_schema,
    postgres_unreachable,
    postgres_url,
    store,
    store_url,
)


@dataclass
class Deployment:
    """A seeded store, its tokens and a running HTTP server."""

    store_url: str
    tokens: Path
    token_a: str
    token_b: str
    token_a_read: str
    server: ServerProcess

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """An empty store for the module, once per database kind."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("mcp-store") / "kgot.db")
        return
    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"kgot_test_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    drop_schema(schema)


@pytest.fixture(scope="module")
def deployment(
    module_store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    seed(module_store_url, "a")
    seed(module_store_url, "b", own_company=True)
    tokens = tmp_path_factory.mktemp("mcp-tokens") / "tokens.toml"
    token_a, _ = add_token(tokens, "client-a", ["a"], ["read", "write", "ask", "admin"])
    token_b, _ = add_token(tokens, "client-b", ["b"], ["read", "write"])
    token_a_read, _ = add_token(tokens, "reader-a", ["a"], ["read"])
    with http_server(module_store_url, tokens, "--allow-query") as server:
        yield Deployment(module_store_url, tokens, token_a, token_b, token_a_read, server)
