"""Bearer tokens over Streamable HTTP: a missing, wrong or revoked token is refused before any
tool runs, all with one and the same answer; a tokens file that turns malformed or readable by
others while the server runs refuses every token until it is fixed; a token lacking a scope is
refused by the tool and writes nothing."""

from __future__ import annotations

import httpx
import pytest

from kgot.cli.main import main
from kgot.mcp_server.tokens import add_token
from kgot.persistence import open_store
from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import http_session, run, text_of

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


def _post(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=_INITIALIZE, headers=headers, timeout=30)


@pytest.mark.slow
def test_missing_and_wrong_tokens_are_refused(deployment: Deployment) -> None:
    assert _post(deployment.url, None).status_code == 401
    assert _post(deployment.url, "kgot_mcp_not-a-token").status_code == 401
    assert _post(deployment.url, deployment.token_a[:-1] + "x").status_code == 401
    assert _post(deployment.url, deployment.token_a).status_code == 200
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client fails on the 401

        async def go() -> None:
            async with http_session(deployment.url, "kgot_mcp_wrong"):
                pass

        run(go)


def _refusal(response: httpx.Response) -> tuple[int, str, str | None]:
    return response.status_code, response.text, response.headers.get("www-authenticate")


@pytest.mark.slow
def test_a_revoked_token_is_refused_from_its_next_request(deployment: Deployment) -> None:
    token, _ = add_token(deployment.tokens, "short-lived", ["a"], ["read"])
    assert _post(deployment.url, token).status_code == 200
    assert main(["mcp", "token", "revoke", "short-lived", "--tokens", str(deployment.tokens)]) == 0
    revoked = _refusal(_post(deployment.url, token))
    assert revoked[0] == 401
    # missing, wrong and revoked read alike: nothing tells a revoked token from a made-up one
    assert revoked == _refusal(_post(deployment.url, None))
    assert revoked == _refusal(_post(deployment.url, "kgot_mcp_" + "x" * 43))
    assert "short-lived" not in revoked[1] and "revoked" not in revoked[1]
    assert _post(deployment.url, deployment.token_a).status_code == 200  # the others still work


@pytest.mark.slow
def test_a_tokens_file_that_turns_bad_refuses_every_token_until_fixed(
    deployment: Deployment,
) -> None:
    path = deployment.tokens
    good = path.read_bytes()
    try:
        path.chmod(0o666)  # anyone could now grant themselves any entity
        assert _post(deployment.url, deployment.token_a).status_code == 401
        path.chmod(0o600)
        assert _post(deployment.url, deployment.token_a).status_code == 200
        path.write_text("[[tokens]]\nlabel = 3\n")
        assert _post(deployment.url, deployment.token_a).status_code == 401
    finally:
        path.write_bytes(good)
        path.chmod(0o600)
    assert _post(deployment.url, deployment.token_a).status_code == 200


@pytest.mark.slow
def test_a_read_only_token_cannot_write(deployment: Deployment) -> None:
    with open_store(deployment.store_url) as store:
        before = store.session("a").commits(limit=1)

    async def go() -> list[object]:
        async with http_session(deployment.url, deployment.token_a_read) as session:
            return [
                await session.call_tool(
                    "save_facts",
                    {"nodes": [{"id": "sneaky", "label": "Place", "properties": {"name": "S"}}]},
                ),
                await session.call_tool("ask", {"question": "What is Apple?"}),
                await session.call_tool("search_memory", {"query": "apple"}),
            ]

    save, ask, search = run(go)
    assert save.is_error and "needs the 'write' scope" in text_of(save)  # type: ignore[attr-defined]
    assert ask.is_error and "needs the 'ask' scope" in text_of(ask)  # type: ignore[attr-defined]
    assert not search.is_error  # type: ignore[attr-defined]
    with open_store(deployment.store_url) as store:
        assert store.session("a").commits(limit=1) == before
