"""A configured base URL is probed once before the requests fan out (issue 27, item 6): a
server that is down fails at once with one configuration error naming the URL, instead of
every vote retrying; a server that is up is probed once, not per vote or per role."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from kgot.errors import ConfigError
from kgot.llm import build_llm_clients
from kgot.llm import http as llm_http
from kgot.llm.http import ensure_reachable
from kgot.tests.support.openai_server import OpenAIServer, Reply, unreachable_url

QUESTION = [HumanMessage("What next?")]
VOTE = {"action": "RETRIEVE"}


class Vote(BaseModel):
    action: str


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs probed (each call of the probe itself, not of ``ensure_reachable``)."""
    probed: list[str] = []
    real = llm_http._probe

    async def counted(base_url: str) -> None:
        probed.append(base_url)
        await real(base_url)

    monkeypatch.setattr(llm_http, "_probe", counted)
    return probed


def test_a_reachable_server_is_probed_once_for_all_votes_and_both_roles(make_settings) -> None:
    with OpenAIServer(default=Reply.json(VOTE)) as server:
        roles = build_llm_clients(make_settings(llm__model="openai:m", llm__base_url=server.url))

        async def step() -> None:
            votes = await roles.planning.structured_samples(QUESTION, Vote, step="decide", count=5)
            assert votes == [Vote(**VOTE)] * 5
            await roles.execution.text(QUESTION, step="tools")

        asyncio.run(step())
        assert len(server.listings) == 1  # one GET /models for six concurrent requests
        assert len(server.completions) == 6


def test_the_commands_probe_vouches_for_the_run_on_another_loop(make_settings) -> None:
    with OpenAIServer() as server:
        asyncio.run(ensure_reachable(server.url))  # what `kgot ask` does before the run
        llm = build_llm_clients(
            make_settings(llm__model="openai:m", llm__base_url=server.url)
        ).planning
        assert asyncio.run(llm.text(QUESTION, step="answer")) == "ok"
        assert len(server.listings) == 1


def test_votes_against_a_server_that_is_down_share_one_failed_probe(
    make_settings, probes: list[str]
) -> None:
    url = unreachable_url()
    llm = build_llm_clients(
        make_settings(llm__model="openai:m", llm__base_url=url, llm__max_retries=4)
    ).planning
    with pytest.raises(ConfigError) as caught:
        asyncio.run(llm.structured_samples(QUESTION, Vote, step="decide", count=5))
    message = str(caught.value)
    assert message.startswith(f"model endpoint {url} is unreachable (")
    assert "check that the server is running" in message and "\n" not in message
    assert probes == [url]  # not 5 votes x 5 attempts
    assert llm.ledger.calls == []  # no chat request was sent

    # A failure is not remembered: the server may be up by the next call.
    with pytest.raises(ConfigError):
        asyncio.run(llm.text(QUESTION, step="answer"))
    assert probes == [url, url]


def test_transient_errors_on_a_reachable_server_keep_their_retries(make_settings) -> None:
    with OpenAIServer(Reply.error(503, "busy"), Reply.error(502, "bad gateway")) as server:
        llm = build_llm_clients(
            make_settings(llm__model="openai:m", llm__base_url=server.url)
        ).planning
        assert asyncio.run(llm.text(QUESTION, step="answer")) == "ok"
        assert [r.reply.status for r in server.completions if r.reply] == [503, 502, 200]
        assert len(server.listings) == 1


@pytest.mark.parametrize("url", ["localhost:8080/v1", "ftp://127.0.0.1/v1"])
def test_a_base_url_that_is_not_http_is_refused(make_settings, url: str) -> None:
    llm = build_llm_clients(make_settings(llm__model="openai:m", llm__base_url=url)).planning
    with pytest.raises(ConfigError, match=r"is not an http\(s\) URL"):
        asyncio.run(llm.text(QUESTION, step="answer"))


def test_models_handed_in_ready_made_are_not_probed(make_settings, probes: list[str]) -> None:
    from langchain_openai import ChatOpenAI

    with OpenAIServer() as server:
        model: Any = ChatOpenAI(model="m", base_url=server.url, api_key="x", max_retries=0)
        llm = build_llm_clients(make_settings(), models={"planning": model, "execution": model})
        assert asyncio.run(llm.planning.text(QUESTION, step="answer")) == "ok"
        assert probes == [] and server.listings == []
