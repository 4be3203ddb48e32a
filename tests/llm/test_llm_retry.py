"""Which failures are retried, how long kgot waits, and what the final error says."""

from __future__ import annotations

import email.utils
import time

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage

from kgot.errors import ModelError
from kgot.llm import build_llm_clients
from kgot.llm.retry import RetryPolicy, classify
from kgot.llm.scripted import scripted_error
from kgot.tests.support.openai_server import OpenAIServer, Reply

QUESTION = [HumanMessage("What next?")]
REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def status_error(code: int, message: str = "boom", headers: dict[str, str] | None = None):
    response = httpx.Response(
        code, request=REQUEST, headers=headers or {}, json={"error": {"message": message}}
    )
    return openai.APIStatusError(message, response=response, body={"message": message})


@pytest.mark.parametrize(
    ("error", "transient", "method_signal"),
    [
        (scripted_error("connection"), True, False),
        (scripted_error("timeout"), True, False),
        (TimeoutError(), True, False),
        (httpx.ConnectError("refused"), True, False),
        (status_error(429), True, False),
        (status_error(500), True, True),
        (status_error(502), True, False),
        (status_error(503), True, False),
        (status_error(501), True, True),
        (status_error(408), True, False),
        (status_error(400), False, True),
        (status_error(422), False, True),
        (status_error(404), False, True),
        (status_error(401), False, False),
        (status_error(403), False, False),
        (NotImplementedError("no bind_tools"), False, True),
        (RuntimeError("surprise"), False, False),
    ],
)
def test_classification(error: BaseException, transient: bool, method_signal: bool) -> None:
    failure = classify(error, timeout=3)
    assert failure.transient is transient
    assert failure.method_signal is method_signal
    assert "\n" not in failure.detail and failure.hint


def test_details_and_hints_say_what_to_do() -> None:
    assert classify(status_error(401, "bad key"), timeout=1).detail == "HTTP 401: bad key"
    assert "KGOT_API_KEY" in classify(status_error(401), timeout=1).hint
    assert "KGOT_MODEL" in classify(status_error(404), timeout=1).hint
    assert classify(TimeoutError(), timeout=2.5).detail == "no answer within 2.5 s"
    refused = classify(scripted_error("connection"), timeout=1)
    assert refused.detail.startswith("cannot connect")
    assert "KGOT_BASE_URL" in refused.hint


def test_context_overflow_is_not_mistaken_for_an_unsupported_method() -> None:
    failure = classify(
        status_error(400, "This model's maximum context length is 8192 tokens"), timeout=1
    )
    assert not failure.transient and not failure.method_signal
    assert "graph_token_budget" in failure.hint


def test_long_server_messages_are_cut_to_one_line() -> None:
    detail = classify(status_error(500, "x\n" * 1000), timeout=1).detail
    assert "\n" not in detail and len(detail) < 300


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header(headers: dict[str, str], expected: float | None) -> None:
    assert classify(status_error(429, headers=headers), timeout=1).retry_after == expected


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    wait = classify(status_error(503, headers={"retry-after": when}), timeout=1).retry_after
    assert wait is not None and 25 <= wait <= 31


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=5.0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10, 5.0)]:
        waits = [policy.delay(retry) for _ in range(200)]
        assert all(ceiling * 0.5 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 1  # jittered, so concurrent votes do not retry in lock-step
    assert RetryPolicy(jitter=False).delay(3) == 4.0


def test_retry_after_wins_but_is_capped() -> None:
    policy = RetryPolicy(backoff_base=100.0, retry_after_cap=10.0)
    assert policy.delay(1, retry_after=0.5) == 0.5
    assert policy.delay(1, retry_after=3600) == 10.0


# Over real HTTP (the loopback OpenAI-compatible server): the shared retry helper as the model
# client uses it.


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _client(make_settings, openai_server: OpenAIServer, **overrides):
    settings = make_settings(
        llm__model="openai:test-model", llm__base_url=openai_server.url, **overrides
    )
    return build_llm_clients(settings).planning


@pytest.mark.slow
@pytest.mark.anyio
async def test_retry_after_as_an_http_date_is_waited_for(make_settings, openai_server) -> None:
    when = email.utils.formatdate(time.time() + 2, usegmt=True)  # whole seconds: 1-2 s ahead
    openai_server.enqueue(
        Reply(status=503, error_message="busy", headers={"Retry-After": when}), Reply.text("ok")
    )
    llm = _client(make_settings, openai_server)  # backoff base is 1 ms: only the date waits
    assert await llm.text(QUESTION, step="answer") == "ok"
    first, second = openai_server.completions
    assert 0.9 <= second.received_at - first.received_at < 3


@pytest.mark.anyio
async def test_every_failed_try_is_in_the_ledger_and_exhaustion_counts_them(
    make_settings, openai_server
) -> None:
    openai_server.default = Reply.error(502, "bad gateway")
    llm = _client(make_settings, openai_server, llm__max_retries=2)
    with pytest.raises(ModelError) as caught:
        await llm.text(QUESTION, step="answer")
    assert "failed after 3 attempts: HTTP 502: bad gateway" in str(caught.value)
    calls = llm.ledger.calls
    assert [(c.attempt, c.ok, c.error) for c in calls] == [
        (n, False, "HTTP 502: bad gateway") for n in (1, 2, 3)
    ]
    assert len(openai_server.completions) == 3


@pytest.mark.anyio
async def test_a_permanent_failure_is_one_try(make_settings, openai_server) -> None:
    openai_server.default = Reply.error(401, "bad key")
    llm = _client(make_settings, openai_server)
    with pytest.raises(ModelError, match=r"failed: HTTP 401: bad key; check KGOT_API_KEY"):
        await llm.text(QUESTION, step="answer")
    assert len(openai_server.completions) == 1 and len(llm.ledger.calls) == 1
