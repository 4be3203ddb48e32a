"""The LLM layer over real HTTP: ChatOpenAI against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from kgot.errors import ConfigError, ModelError, StructuredOutputError
from kgot.llm import LLMClient, build_llm_clients
from kgot.tests.support.openai_server import OpenAIServer, Reply, unreachable_url

pytestmark = pytest.mark.anyio

QUESTION = [SystemMessage("You decide."), HumanMessage("What next?")]
GOOD = {"action": "RETRIEVE", "reason": "the graph answers it"}


class Vote(BaseModel):
    """A decision on the next step."""

    action: str = Field(pattern="^(INSERT|RETRIEVE)$")
    reason: str


@pytest.fixture
def planning(make_settings, openai_server: OpenAIServer):
    """A planning client for the loopback server; call it with extra settings overrides."""

    def build(**overrides: Any) -> LLMClient:
        settings = make_settings(
            llm__model="openai:test-model", llm__base_url=openai_server.url, **overrides
        )
        return build_llm_clients(settings).planning

    return build


async def test_json_schema_mode(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.json(GOOD))
    llm = planning(llm__structured_output="json_schema")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    [request] = openai_server.completions
    assert request.model == "test-model"
    fmt = request.response_format
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Vote"
    assert fmt["json_schema"]["schema"]["properties"]["action"]["pattern"] == "^(INSERT|RETRIEVE)$"
    assert not request.tools
    assert [m["role"] for m in request.messages] == ["system", "user"]


async def test_tool_calling_mode(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.tool_call("Vote", GOOD))
    llm = planning(llm__structured_output="tool_calling")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    [request] = openai_server.completions
    assert request.tool_choice == {"type": "function", "function": {"name": "Vote"}}
    [offered] = request.tools
    assert offered["function"]["name"] == "Vote"
    assert set(offered["function"]["parameters"]["required"]) == {"action", "reason"}
    assert request.response_format is None


async def test_json_object_mode(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.json(GOOD))
    llm = planning(llm__structured_output="json_object")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    [request] = openai_server.completions
    fmt = request.response_format
    assert fmt["type"] == "json_object"
    assert fmt["schema"]["title"] == "Vote"  # what llama.cpp turns into a grammar
    assert "JSON" in request.messages[-1]["content"]
    assert not request.tools


async def test_prompt_mode(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(
        Reply.text(f"<think>hmm</think>Answer:\n```json\n{json.dumps(GOOD)}\n```")
    )
    llm = planning(llm__structured_output="prompt")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    [request] = openai_server.completions
    assert request.response_format is None and not request.tools
    assert '"title":"Vote"' in request.prompt


async def test_auto_falls_back_from_a_server_refusing_json_schema(
    make_settings,
) -> None:
    with OpenAIServer(reject_json_schema=True) as server:
        server.enqueue(Reply.tool_call("Vote", GOOD), Reply.tool_call("Vote", GOOD))
        settings = make_settings(llm__model="openai:llama", llm__base_url=server.url)
        llm = build_llm_clients(settings).planning
        assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
        assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
        requests = server.completions
        assert [r.reply.status for r in requests] == [500, 200, 200]
        assert requests[0].response_format["type"] == "json_schema"
        assert requests[1].tools and requests[2].tools  # json_schema never tried again
        assert llm.structured_method == "tool_calling"
        failed = llm.ledger.calls[0]
        assert not failed.ok and failed.method == "json_schema"


async def test_auto_reaches_json_object_on_a_llama_cpp_like_server(make_settings) -> None:
    with OpenAIServer(reject_json_schema=True, reject_tools=True) as server:
        server.enqueue(Reply.json(GOOD))
        settings = make_settings(llm__model="openai:llama", llm__base_url=server.url)
        llm = build_llm_clients(settings).planning
        assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
        kinds = [
            (r.response_format or {}).get("type") or ("tools" if r.tools else "text")
            for r in server.completions
        ]
        assert kinds == ["json_schema", "tools", "json_object"]
        assert llm.structured_method == "json_object"


async def test_500_then_success_is_retried(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(500, "overloaded"), Reply.text("fine"))
    llm = planning()
    assert await llm.text(QUESTION, step="answer") == "fine"
    assert len(openai_server.completions) == 2
    records = llm.ledger.calls
    assert [r.ok for r in records] == [False, True]
    assert records[0].error == "HTTP 500: overloaded"


@pytest.mark.slow
async def test_429_retry_after_is_honoured(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(429, "slow down", retry_after=0.3), Reply.text("ok"))
    llm = planning()  # backoff base is 1 ms: only Retry-After explains a longer wait
    started = time.perf_counter()
    assert await llm.text(QUESTION, step="answer") == "ok"
    first, second = openai_server.completions
    assert second.received_at - first.received_at >= 0.3
    assert time.perf_counter() - started < 3


async def test_dropped_connection_is_retried(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.disconnecting(), Reply.text("ok"))
    llm = planning()
    assert await llm.text(QUESTION, step="answer") == "ok"
    assert "cannot connect" in (llm.ledger.calls[0].error or "")


@pytest.mark.slow
async def test_hanging_server_hits_the_timeout_fast(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.hanging())
    llm = planning(llm__timeout=0.5, llm__max_retries=0)
    started = time.perf_counter()
    with pytest.raises(ModelError) as caught:
        await llm.text(QUESTION, step="answer")
    elapsed = time.perf_counter() - started
    assert 0.45 <= elapsed < 2.0
    message = str(caught.value)
    assert "no answer within 0.5 s" in message
    assert openai_server.url in message
    assert "KGOT_LLM_TIMEOUT" in message


@pytest.mark.slow
async def test_a_timeout_is_retried(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.hanging(), Reply.text("second try"))
    llm = planning(llm__timeout=0.5, llm__max_retries=1)
    assert await llm.text(QUESTION, step="answer") == "second try"
    assert [r.ok for r in llm.ledger.calls] == [False, True]


async def test_unreachable_endpoint_fails_at_once_naming_the_url(make_settings) -> None:
    url = unreachable_url()
    settings = make_settings(llm__model="openai:m", llm__base_url=url, llm__max_retries=2)
    llm = build_llm_clients(settings).planning
    with pytest.raises(ConfigError) as caught:
        await llm.text(QUESTION, step="answer")
    message = str(caught.value)
    assert url in message and "unreachable" in message
    assert "KGOT_BASE_URL" in message
    assert "\n" not in message
    assert llm.ledger.calls == []  # the probe refused it: no chat request was sent, or retried


@pytest.mark.slow
async def test_refused_api_key_fails_at_once_with_a_hint(make_settings) -> None:
    with OpenAIServer(api_key="sk-right") as server:
        wrong = make_settings(llm__model="openai:m", llm__base_url=server.url, llm__api_key="x")
        with pytest.raises(ModelError, match=r"HTTP 401.*KGOT_API_KEY"):
            await build_llm_clients(wrong).planning.text(QUESTION, step="answer")
        assert len(server.completions) == 1  # not retried

        right = make_settings(
            llm__model="openai:m", llm__base_url=server.url, llm__api_key="sk-right"
        )
        assert await build_llm_clients(right).planning.text(QUESTION, step="answer") == "ok"
        assert server.completions[-1].headers["authorization"] == "Bearer sk-right"


async def test_unknown_model_404_points_at_model_and_url(
    planning, openai_server: OpenAIServer
) -> None:
    openai_server.enqueue(Reply.error(404, "model 'test-model' not found"))
    with pytest.raises(ModelError, match=r"HTTP 404: model 'test-model' not found.*KGOT_MODEL"):
        await planning().text(QUESTION, step="answer")


async def test_malformed_output_recovered_over_the_wire(
    planning, openai_server: OpenAIServer
) -> None:
    openai_server.enqueue(Reply.text("RETRIEVE, I guess"), Reply.json(GOOD))
    llm = planning(llm__structured_output="json_schema")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    retry = openai_server.completions[1]
    assert [m["role"] for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2]["content"] == "RETRIEVE, I guess"
    assert "no JSON object found" in retry.messages[3]["content"]


@pytest.mark.parametrize("method", ["json_schema", "tool_calling"])
async def test_deeply_nested_output_over_the_wire_is_re_asked(
    planning, openai_server: OpenAIServer, method: str
) -> None:
    deep = '{"action": "INSERT", "reason": ' + "[" * 5000 + "]" * 5000 + "}"
    first = Reply.text(deep) if method == "json_schema" else Reply.tool_call("Vote", deep)
    good = Reply.json(GOOD) if method == "json_schema" else Reply.tool_call("Vote", GOOD)
    openai_server.enqueue(first, good)
    llm = planning(llm__structured_output=method)
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    retry = openai_server.completions[1]
    assert retry.messages[2]["content"] == deep  # the unusable answer, shown back verbatim
    assert not llm.ledger.calls[0].ok


async def test_malformed_tool_arguments_recovered(planning, openai_server: OpenAIServer) -> None:
    broken = '{"action": "RETR'
    openai_server.enqueue(Reply.tool_call("Vote", broken), Reply.tool_call("Vote", GOOD))
    llm = planning(llm__structured_output="tool_calling")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    retry = openai_server.completions[1]
    assert retry.messages[2] == {"role": "assistant", "content": broken}
    assert "not valid JSON" in retry.messages[3]["content"]


async def test_malformed_output_exhausted_over_the_wire(
    planning, openai_server: OpenAIServer
) -> None:
    openai_server.default = Reply.json({"action": "PANIC", "reason": "?"})
    llm = planning(llm__structured_output="json_schema", llm__structured_retries=1)
    with pytest.raises(StructuredOutputError) as caught:
        await llm.structured(QUESTION, Vote, step="decide")
    assert len(caught.value.attempts) == 2
    assert "`action`" in caught.value.attempts[-1][1]
    assert len(openai_server.completions) == 2
    assert llm.ledger.totals().failed_calls == 2


async def test_usage_and_cost_are_recorded(make_settings, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.text("hi", prompt_tokens=1000, completion_tokens=500))
    settings = make_settings(
        llm__model="openai:test-model",
        llm__base_url=openai_server.url,
        llm__prices={"openai:test-model": {"input": 1.0, "output": 2.0}},  # USD per 1M tokens
    )
    llm = build_llm_clients(settings).planning
    await llm.text(QUESTION, step="answer")
    [record] = llm.ledger.calls
    assert (record.input_tokens, record.output_tokens) == (1000, 500)
    assert not record.estimated
    assert record.cost_usd == pytest.approx(0.002)
    assert llm.ledger.totals().cost_usd == pytest.approx(0.002)


async def test_unknown_price_is_none(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.text("hi", prompt_tokens=10, completion_tokens=5))
    llm = planning()
    await llm.text(QUESTION, step="answer")
    [record] = llm.ledger.calls
    assert record.input_tokens == 10
    assert record.cost_usd is None
    assert llm.ledger.totals().cost_usd is None


async def test_missing_usage_is_estimated(planning, openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.text("a short answer", usage=False))
    llm = planning()
    await llm.text(QUESTION, step="answer")
    [record] = llm.ledger.calls
    assert record.estimated and record.output_tokens > 0


@pytest.mark.slow
async def test_five_votes_overlap_on_the_wire(planning, openai_server: OpenAIServer) -> None:
    openai_server.default = Reply.json(GOOD).delayed(0.4)
    llm = planning(llm__structured_output="json_schema")
    started = time.perf_counter()
    votes = await asyncio.gather(*(llm.structured(QUESTION, Vote, step="decide") for _ in range(5)))
    elapsed = time.perf_counter() - started
    assert len(votes) == 5
    arrivals = [r.received_at for r in openai_server.completions]
    assert max(arrivals) - min(arrivals) < 0.3  # all five were in flight together
    assert elapsed < 0.4 * 2.5, f"5 votes of 0.4 s took {elapsed:.2f} s"


async def test_tool_calls_over_the_wire(make_settings, openai_server: OpenAIServer) -> None:
    @tool
    def web_search(query: str) -> str:
        """Search the web for a query."""
        return query

    openai_server.enqueue(Reply.tool_call("web_search", {"query": "kgot"}))
    settings = make_settings(llm__model="openai:test-model", llm__base_url=openai_server.url)
    execution = build_llm_clients(settings).execution
    message = await execution.tool_calls(QUESTION, [web_search], step="define_tools")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("web_search", {"query": "kgot"})
    ]
    [request] = openai_server.completions
    assert request.tool_choice == "auto"
    assert request.tools[0]["function"]["name"] == "web_search"
    assert execution.ledger.calls[0].role == "execution"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "reply"),
    [
        ("json_schema", Reply.json(GOOD, prompt_tokens=3, completion_tokens=2)),
        ("tool_calling", Reply.tool_call("Vote", GOOD, prompt_tokens=3, completion_tokens=2)),
        ("json_object", Reply.json(GOOD, prompt_tokens=3, completion_tokens=2)),
    ],
)
async def test_streaming_clients_get_server_sent_events(
    openai_server: OpenAIServer, method: str, reply: Reply
) -> None:
    """A model in streaming mode (e.g. under LangGraph's message streaming) works the same."""
    openai_server.enqueue(reply)
    model = ChatOpenAI(
        model="test-model",
        base_url=openai_server.url,
        api_key="none",
        streaming=True,
        stream_usage=True,
        max_retries=0,
    )
    llm = LLMClient(
        model,
        role="planning",
        model_name="openai:test-model",
        endpoint="loopback",
        structured_output=method,  # type: ignore[arg-type]
    )
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    assert openai_server.completions[0].body["stream"] is True
    assert llm.ledger.calls[0].output_tokens == 2


@pytest.mark.slow
@pytest.mark.parametrize("model", ["openai:test-model", "gpt-4o-mini"])
def test_one_client_serves_successive_event_loops(make_settings, model: str) -> None:
    """`asyncio.run` twice in a process (two `kgot.ask()` calls) must not hit a dead loop."""
    with OpenAIServer() as server:
        settings = make_settings(llm__model=model, llm__base_url=server.url, llm__api_key="k")
        llm = build_llm_clients(settings).planning
        for _ in range(3):
            assert asyncio.run(llm.text(QUESTION, step="answer")) == "ok"
        again = build_llm_clients(settings).planning  # a fresh client, same URL and timeout
        assert asyncio.run(again.text(QUESTION, step="answer")) == "ok"
        assert len(server.completions) == 4


def test_provider_models_get_a_loop_safe_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgot.config import ModelSettings
    from kgot.llm import build_chat_model
    from kgot.llm.http import LoopLocalTransport

    for name in ("openai:gpt-4o-mini", "gpt-4o-mini"):
        model = build_chat_model(ModelSettings(model=name, api_key="sk-test"))
        assert isinstance(model.http_async_client._transport, LoopLocalTransport)


async def test_unknown_model_404_is_not_a_structured_method_problem(
    planning, openai_server: OpenAIServer
) -> None:
    openai_server.enqueue(Reply.error(404, "The model `test-model` does not exist"))
    with pytest.raises(ModelError, match="HTTP 404"):
        await planning().structured(QUESTION, Vote, step="decide")
    # The auto mode did not walk through the other methods: one request, then the error.
    assert len(openai_server.completions) == 1


LOGIN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in</title><style>body {color: red}</style></head>"
    b"<body>\n<h1>Guest Wi-Fi</h1>\t<p>Accept the terms to continue</p></body></html>"
)


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
async def test_an_html_page_instead_of_json_is_named_with_an_excerpt(
    planning, openai_server: OpenAIServer, content_type: str
) -> None:
    openai_server.default = Reply.body(LOGIN_PAGE, content_type=content_type)
    with pytest.raises(ModelError) as caught:
        await planning().text(QUESTION, step="answer")
    message = str(caught.value)
    assert "HTTP 200 with a body that is not JSON" in message
    assert '"Sign in Guest Wi-Fi Accept the terms to continue"' in message  # text, no markup
    assert content_type in message and openai_server.url in message
    assert "KGOT_BASE_URL" in message
    assert "rejected the request" not in message
    assert "\n" not in message
    assert len(openai_server.completions) == 1  # a web page does not turn into an API on retry


async def test_garbage_body_excerpt_is_printable_and_short(
    planning, openai_server: OpenAIServer
) -> None:
    openai_server.default = Reply.body(
        b"\x1b[2J\x00garbage\xff\xfe" + b"x" * 5000, content_type="application/octet-stream"
    )
    with pytest.raises(ModelError) as caught:
        await planning(llm__structured_output="json_schema").structured(
            QUESTION, Vote, step="decide"
        )
    message = str(caught.value)
    assert "HTTP 200 with a body that is not JSON (application/octet-stream)" in message
    assert '"[2J garbage' in message and "…" in message
    assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in message)
    assert len(message) < 600
    assert "KGOT_STRUCTURED_OUTPUT" not in message  # the method was not the problem


async def test_an_error_page_with_a_5xx_status_is_retried_and_quoted(
    planning, openai_server: OpenAIServer
) -> None:
    page = b"<html><body><center><h1>502 Bad Gateway</h1></center><hr>nginx</body></html>"
    openai_server.default = Reply.body(page, status=502)
    with pytest.raises(ModelError) as caught:
        await planning(llm__max_retries=1).text(QUESTION, step="answer")
    assert 'failed after 2 attempts: HTTP 502: "502 Bad Gateway nginx"' in str(caught.value)


async def test_a_body_nested_too_deeply_is_named(planning, openai_server: OpenAIServer) -> None:
    openai_server.default = Reply.body(
        b'{"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}", content_type="application/json"
    )
    with pytest.raises(ModelError, match="HTTP 200 with JSON nested too deeply to read"):
        await planning().text(QUESTION, step="answer")


def _waiting_notices(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kgot.llm.waiting"]


@pytest.mark.slow
async def test_a_slow_endpoint_gets_one_waiting_notice(
    planning, openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.default = Reply.json(GOOD).delayed(0.8)
    llm = planning(llm__structured_output="json_schema", llm__waiting_notice_after=0.2)
    with caplog.at_level(logging.INFO, logger="kgot.llm.waiting"):
        votes = await asyncio.gather(
            *(llm.structured(QUESTION, Vote, step="decide") for _ in range(3))
        )
    assert len(votes) == 3
    [notice] = _waiting_notices(caplog)  # three votes waiting together: one line
    message = notice.getMessage()
    assert message.startswith(f"still waiting for model endpoint {openai_server.url} ")
    assert "(openai:test-model): 3 requests for step decide, try 1 of 5" in message
    assert "each try gives up after 120 s" in message
    assert 0.2 <= notice.elapsed_s < 0.8  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_no_waiting_notice_for_answers_within_the_threshold(
    planning, openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.default = Reply.text("ok").delayed(0.1)
    llm = planning(llm__waiting_notice_after=0.3)
    with caplog.at_level(logging.INFO, logger="kgot.llm.waiting"):
        assert await llm.text(QUESTION, step="answer") == "ok"
        await asyncio.sleep(0.4)  # a notice left armed after the answer would fire here
    assert not _waiting_notices(caplog)


@pytest.mark.slow
async def test_each_try_of_a_hung_endpoint_gets_its_notice(
    planning, openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.default = Reply.hanging()
    llm = planning(llm__timeout=0.5, llm__max_retries=1, llm__waiting_notice_after=0.2)
    with (
        caplog.at_level(logging.INFO, logger="kgot.llm.waiting"),
        pytest.raises(ModelError, match="failed after 2 attempts"),
    ):
        await llm.text(QUESTION, step="answer")
    notices = [r.getMessage() for r in _waiting_notices(caplog)]
    assert len(notices) == 2
    assert "a request for step answer, try 1 of 2" in notices[0]
    assert "try 2 of 2" in notices[1]
