"""LLMClient with the scripted model: structured output, fallback, re-asks, retries, timeouts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.tracers.context import collect_runs
from pydantic import BaseModel, Field

from kgot.errors import ModelError, StepFailure, StructuredOutputError
from kgot.llm import LLMClient, RetryPolicy, ScriptedChatModel, UsageLedger, build_llm_clients
from kgot.llm.scripted import ScriptedCall

pytestmark = pytest.mark.anyio

QUESTION = [SystemMessage("You decide."), HumanMessage("What next?")]
GOOD = {"action": "INSERT", "reason": "the graph is empty"}


class Vote(BaseModel):
    """A decision on the next step."""

    action: str = Field(pattern="^(INSERT|RETRIEVE)$")
    reason: str


def client(
    script: Any,
    *,
    method: str = "auto",
    retries: int = 2,
    structured_retries: int = 2,
    timeout: float = 5.0,
    latency: float = 0.0,
) -> tuple[LLMClient, ScriptedChatModel]:
    model = ScriptedChatModel(script=script, latency_s=latency)
    llm = LLMClient(
        model,
        role="planning",
        model_name="scripted",
        endpoint="scripted",
        ledger=UsageLedger(),
        timeout=timeout,
        retry=RetryPolicy(max_retries=retries, backoff_base=0.001),
        structured_output=method,  # type: ignore[arg-type]
        structured_retries=structured_retries,
    )
    return llm, model


async def test_auto_prefers_json_schema() -> None:
    llm, model = client({"decide": [GOOD]})
    vote = await llm.structured(QUESTION, Vote, step="decide")
    assert vote == Vote(**GOOD)
    [call] = model.calls
    assert call.response_format is not None
    assert call.response_format["type"] == "json_schema"
    assert call.response_format["json_schema"]["name"] == "Vote"
    assert call.response_format["json_schema"]["schema"]["required"] == ["action", "reason"]
    assert llm.structured_method == "json_schema"
    [record] = llm.ledger.calls
    assert (record.ok, record.method, record.step, record.attempt) == (
        True,
        "json_schema",
        "decide",
        1,
    )


async def test_tool_calling_forces_the_schema_tool() -> None:
    llm, model = client({"decide": [GOOD]}, method="tool_calling")
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    [call] = model.calls
    assert call.tools[0]["function"]["name"] == "Vote"
    assert call.tool_choice == "Vote"  # ChatOpenAI turns this into the forced-function form
    assert call.response_format is None


async def test_json_object_sends_the_schema_and_says_json() -> None:
    llm, model = client({"decide": [GOOD]}, method="json_object")
    await llm.structured(QUESTION, Vote, step="decide")
    [call] = model.calls
    assert call.response_format["type"] == "json_object"
    assert call.response_format["schema"]["title"] == "Vote"
    assert "JSON" in call.prompt
    # The instructions join the user turn instead of adding a second one in a row.
    assert [m.type for m in call.messages] == ["system", "human"]


async def test_prompt_method_reads_json_from_prose() -> None:
    reply = 'Sure!\n```json\n{"action": "RETRIEVE", "reason": "enough"}\n```\nDone.'
    llm, model = client({"decide": [reply]}, method="prompt")
    vote = await llm.structured(QUESTION, Vote, step="decide")
    assert vote.action == "RETRIEVE"
    [call] = model.calls
    assert call.response_format is None and not call.tools
    assert '"title":"Vote"' in call.prompt


async def test_auto_falls_back_when_a_method_fails_on_first_use_and_remembers() -> None:
    def script(call: ScriptedCall) -> Any:
        if call.response_format and call.response_format["type"] == "json_schema":
            return {"$error": "server"}
        return GOOD

    llm, model = client(script)
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    assert llm.structured_method == "tool_calling"
    await llm.structured(QUESTION, Vote, step="decide")
    kinds = [
        ("schema" if c.response_format else "tool" if c.tools else "text") for c in model.calls
    ]
    assert kinds == ["schema", "tool", "tool"]  # the second call went straight to tool calling
    records = llm.ledger.calls
    assert [r.ok for r in records] == [False, True, True]
    assert records[0].method == "json_schema" and "HTTP 500" in (records[0].error or "")


async def test_a_server_error_on_a_proven_method_is_retried_not_a_fallback() -> None:
    llm, model = client({"decide": [GOOD, {"$error": "server"}, GOOD]})
    await llm.structured(QUESTION, Vote, step="decide")
    await llm.structured(QUESTION, Vote, step="decide")
    assert all(c.response_format for c in model.calls)
    assert len(model.calls) == 3
    assert llm.structured_method == "json_schema"


async def test_model_without_tools_or_structured_output_falls_back_to_prompt() -> None:
    model = FakeListChatModel(responses=['Here: {"action": "INSERT", "reason": "r"} ok'])
    llm = LLMClient(model, role="planning", model_name="fake", endpoint="fake")
    assert (await llm.structured(QUESTION, Vote, step="decide")).action == "INSERT"
    assert llm.structured_method == "prompt"
    [record] = llm.ledger.calls
    assert record.estimated  # the fake model reports no usage; tokens are estimated, not 0
    assert record.input_tokens > 0 and record.output_tokens > 0


async def test_explicit_method_rejected_by_server_is_a_model_error_with_a_hint() -> None:
    llm, model = client({"decide": [{"$error": "bad_request"}]}, method="json_schema")
    with pytest.raises(ModelError, match="KGOT_STRUCTURED_OUTPUT=auto") as caught:
        await llm.structured(QUESTION, Vote, step="decide")
    assert "HTTP 400" in str(caught.value)
    assert len(model.calls) == 1  # not transient: no retry


async def test_malformed_output_is_re_asked_with_the_validation_error() -> None:
    bad = {"action": "DELETE", "reason": "x"}
    llm, model = client({"decide": ["I think INSERT", bad, GOOD]}, structured_retries=3)
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    calls = model.calls
    assert len(calls) == 3
    assert "no JSON object found" in calls[1].prompt
    assert "I think INSERT" in calls[1].prompt  # the bad answer is shown back
    assert "`action`" in calls[2].prompt and "pattern" in calls[2].prompt
    records = llm.ledger.calls
    assert [r.ok for r in records] == [False, False, True]
    assert [r.attempt for r in records] == [1, 2, 3]
    assert (records[0].error or "").startswith("invalid output:")


async def test_deeply_nested_output_is_re_asked_not_a_crash() -> None:
    deep = '{"action": "INSERT", "reason": ' + "[" * 5000 + "]" * 5000 + "}"
    llm, model = client({"decide": [deep, GOOD]})
    assert await llm.structured(QUESTION, Vote, step="decide") == Vote(**GOOD)
    assert "nested too deeply" in model.calls[1].prompt
    assert [r.ok for r in llm.ledger.calls] == [False, True]


async def test_exhausted_re_asks_raise_a_step_failure_with_every_attempt() -> None:
    llm, _ = client({"decide": ["nope"]}, structured_retries=2)
    with pytest.raises(StructuredOutputError) as caught:
        await llm.structured(QUESTION, Vote, step="decide")
    error = caught.value
    assert isinstance(error, StepFailure)
    assert len(error.attempts) == 3
    assert all(raw == "nope" for raw, _ in error.attempts)
    assert "decide" in str(error) and "Vote" in str(error)
    totals = llm.ledger.totals()
    assert (totals.calls, totals.failed_calls) == (3, 3)


async def test_zero_structured_retries_means_one_attempt() -> None:
    llm, model = client({"decide": ["nope", GOOD]}, structured_retries=0)
    with pytest.raises(StructuredOutputError):
        await llm.structured(QUESTION, Vote, step="decide")
    assert len(model.calls) == 1


async def test_transient_errors_are_retried_and_every_try_is_recorded() -> None:
    llm, model = client({"answer": [{"$error": "connection"}, {"$error": "rate_limit"}, "42"]})
    assert await llm.text(QUESTION, step="answer") == "42"
    records = llm.ledger.calls
    assert [r.ok for r in records] == [False, False, True]
    assert [r.attempt for r in records] == [1, 2, 3]
    assert "cannot connect" in (records[0].error or "")
    assert "HTTP 429" in (records[1].error or "")
    assert len(model.calls) == 3


async def test_retries_are_bounded_and_exhaustion_names_the_endpoint() -> None:
    llm, model = client({"answer": [{"$error": "server"}]}, retries=2)
    with pytest.raises(ModelError) as caught:
        await llm.text(QUESTION, step="answer")
    message = str(caught.value)
    assert "model endpoint scripted (scripted)" in message
    assert "failed after 3 attempts" in message and "HTTP 500" in message
    assert "\n" not in message
    assert len(model.calls) == 3
    assert llm.ledger.totals().failed_calls == 3


async def test_non_transient_errors_are_not_retried() -> None:
    llm, model = client({"answer": [{"$error": "bad_request"}, "ok"]})
    with pytest.raises(ModelError, match="HTTP 400"):
        await llm.text(QUESTION, step="answer")
    assert len(model.calls) == 1


async def test_kgot_deadline_applies_whatever_the_model_does() -> None:
    llm, _ = client({"answer": ["late"]}, latency=10.0, timeout=0.1, retries=1)
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"no answer within 0.1 s") as caught:
        await llm.text(QUESTION, step="answer")
    assert time.perf_counter() - started < 2.0
    assert "failed after 2 attempts" in str(caught.value)
    assert [r.ok for r in llm.ledger.calls] == [False, False]


@pytest.mark.slow
async def test_votes_run_concurrently() -> None:
    llm, model = client({"decide": [GOOD]}, latency=0.3)
    started = time.perf_counter()
    votes = await asyncio.gather(*(llm.structured(QUESTION, Vote, step="decide") for _ in range(5)))
    elapsed = time.perf_counter() - started
    assert len(votes) == 5 and len(model.calls) == 5
    assert elapsed < 0.3 * 2.5, f"5 votes of 0.3 s took {elapsed:.2f} s: not concurrent"


def samples_client(script: Any, **options: Any) -> tuple[LLMClient, ScriptedChatModel]:
    llm, model = client(script, structured_retries=1, **options)
    return llm, model


async def test_samples_that_all_fail_alike_end_the_step_with_advice() -> None:
    llm, model = samples_client({"decide": ["I would insert more facts."]})
    with pytest.raises(ModelError) as caught:
        await llm.structured_samples(QUESTION, Vote, step="decide", count=3)
    message = str(caught.value)
    assert message.startswith("model endpoint scripted (scripted) gave no usable answer")
    assert "step decide: all 6 requests returned no JSON object in the reply" in message
    assert "method tried: json_schema" in message
    assert "KGOT_STRUCTURED_OUTPUT=tool_calling, json_object or prompt" in message
    assert "llm.stop_on_invalid_output = false" in message
    assert "\n" not in message
    assert len(model.calls) == 6  # three samples, each asked once and re-asked once


async def test_a_fixed_method_suggests_the_other_methods() -> None:
    llm, _ = samples_client({"decide": [{"action": "PANIC", "reason": "?"}]}, method="prompt")
    with pytest.raises(ModelError) as caught:
        await llm.structured_samples(QUESTION, Vote, step="decide", count=2)
    message = str(caught.value)
    assert "returned JSON that does not match the schema" in message
    assert "method tried: prompt" in message
    assert "KGOT_STRUCTURED_OUTPUT=json_schema, tool_calling or json_object" in message


@pytest.mark.parametrize(
    "replies",
    [
        ["no json here", "no json here", GOOD, "no json here"],  # one sample succeeded
        ["no json here", "no json here", "", ""],  # two reasons: no JSON, then empty replies
    ],
    ids=["one-success", "mixed-reasons"],
)
async def test_samples_fail_alone_unless_all_fail_alike(replies: list[Any]) -> None:
    script = iter(replies)
    llm, _ = samples_client(lambda call: next(script))
    samples = await llm.structured_samples(QUESTION, Vote, step="decide", count=2)
    assert any(isinstance(sample, StructuredOutputError) for sample in samples)


async def test_stop_on_invalid_output_can_be_switched_off(make_settings) -> None:
    model = ScriptedChatModel(script={"decide": ["never JSON"]})
    settings = make_settings(llm__model="openai:m", llm__stop_on_invalid_output=False)
    llm = build_llm_clients(settings, models={"planning": model, "execution": model}).planning
    samples = await llm.structured_samples(QUESTION, Vote, step="decide", count=2)
    assert all(isinstance(sample, StructuredOutputError) for sample in samples)


async def test_samples_raise_an_endpoint_failure() -> None:
    llm, _ = samples_client({"decide": [{"$error": "bad_request"}]}, method="json_schema")
    with pytest.raises(ModelError, match="HTTP 400"):
        await llm.structured_samples(QUESTION, Vote, step="decide", count=2)


async def test_every_call_names_its_step_in_metadata_and_run_name() -> None:
    llm, model = client({"*": ["fine"]})
    with collect_runs() as collected:
        await llm.text(QUESTION, step="solve")
    assert model.calls[0].step == "solve"
    names = {run.name for run in collected.traced_runs}
    assert "kgot:solve" in names
    assert all(run.metadata.get("kgot_step") == "solve" for run in collected.traced_runs)


async def test_tool_calls_offers_tools_with_auto_choice() -> None:
    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        return query

    llm, model = client(
        {"define_tools": [{"$tool_calls": [{"name": "web_search", "args": {"query": "q"}}]}, "no"]}
    )
    message = await llm.tool_calls(QUESTION, [web_search], step="define_tools")
    assert message.tool_calls[0]["name"] == "web_search"
    assert message.tool_calls[0]["args"] == {"query": "q"}
    [call] = model.calls
    assert call.tool_choice == "auto"
    assert call.tools[0]["function"]["name"] == "web_search"
    second = await llm.tool_calls(QUESTION, [web_search], step="define_tools")
    assert second.tool_calls == [] and second.text == "no"


async def test_tool_calls_on_a_model_without_tools_is_a_model_error() -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    llm = LLMClient(
        FakeListChatModel(responses=["x"]), role="execution", model_name="fake", endpoint="fake"
    )
    with pytest.raises(ModelError, match="cannot call tools"):
        await llm.tool_calls(QUESTION, [noop], step="define_tools")


async def test_scripted_usage_is_recorded_at_zero_cost() -> None:
    llm, _ = client({"*": ["a reasonably long answer"]})
    await llm.text(QUESTION, step="answer")
    [record] = llm.ledger.calls
    assert record.input_tokens > 0 and record.output_tokens > 0
    assert record.cost_usd == 0.0
    assert not record.estimated
    assert record.duration_ms >= 0


async def test_a_cancelled_request_is_still_recorded() -> None:
    started = asyncio.Event()

    class Stalled(ScriptedChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            started.set()
            await asyncio.Event().wait()  # never answers

    llm = LLMClient(Stalled(script={}), role="planning", model_name="scripted", endpoint="scripted")
    task = asyncio.create_task(llm.text(QUESTION, step="answer"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [record] = llm.ledger.calls
    assert (record.ok, record.error) == (False, "cancelled")


async def test_text_drops_a_leading_reasoning_section() -> None:
    llm, _ = client({"answer": ["<think>\nlet me see\n</think>\n\nParis"]})
    assert await llm.text(QUESTION, step="answer") == "Paris"


def test_a_role_without_a_model_is_named(make_settings) -> None:
    from kgot.errors import ConfigError
    from kgot.llm import build_llm_clients

    only_planning = make_settings(**{"llm.planning.model": "scripted:/unused.json"})
    with pytest.raises(ConfigError, match="no model configured for the execution role"):
        build_llm_clients(only_planning)
    with pytest.raises(ConfigError, match=r"^no model configured: set KGOT_MODEL"):
        build_llm_clients(make_settings())
