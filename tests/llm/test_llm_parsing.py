"""Reading JSON out of model answers, and describing what is wrong with it."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from kgot.llm.structured import (
    InvalidOutput,
    append_user_text,
    extract_json,
    parse_output,
    strip_reasoning,
)


class Pick(BaseModel):
    """A pick."""

    answer: str
    confidence: float = Field(ge=0, le=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  {"a": [1, 2]}\n', {"a": [1, 2]}),
        ('Here you go:\n```json\n{"a": 1}\n```\nAnything else?', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('The answer is {"a": "b}"} as requested.', {"a": "b}"}),  # brace inside a string
        ('{not json} then {"a": 1}', {"a": 1}),
        ('<think>maybe {"a": 0}</think>{"a": 2}', {"a": 2}),
        ('prefix {"outer": {"inner": 1}} suffix {"x": 2}', {"outer": {"inner": 1}}),
    ],
)
def test_extract_json(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "{broken", "[1, 2]  and more text"])
def test_extract_json_refuses_text_without_an_object(text: str) -> None:
    with pytest.raises(ValueError, match="no JSON object found"):
        extract_json(text)


def test_parse_output_reports_every_field_problem_in_one_line() -> None:
    with pytest.raises(InvalidOutput) as caught:
        parse_output(AIMessage(content='{"confidence": 7}'), "json_schema", Pick)
    message = str(caught.value)
    assert "`answer`: Field required" in message
    assert "`confidence`: Input should be less than or equal to 1" in message
    assert "\n" not in message
    assert caught.value.raw == '{"confidence": 7}'


def test_parse_output_prefers_the_schema_tool_call() -> None:
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "other", "args": {"x": 1}, "id": "1"},
            {"name": "Pick", "args": {"answer": "4", "confidence": 0.5}, "id": "2"},
        ],
    )
    assert parse_output(message, "tool_calling", Pick) == Pick(answer="4", confidence=0.5)


def test_parse_output_reads_content_when_a_tool_call_was_skipped() -> None:
    message = AIMessage(content='{"answer": "4", "confidence": 1}')
    assert parse_output(message, "tool_calling", Pick).answer == "4"


def test_empty_reply_is_invalid_output() -> None:
    with pytest.raises(InvalidOutput, match="empty; expected a tool call"):
        parse_output(AIMessage(content=""), "tool_calling", Pick)


def test_strip_reasoning_removes_only_a_leading_think_block() -> None:
    assert strip_reasoning("<think>\nplan\n</think>\n\nParis") == "Paris"
    assert strip_reasoning("Paris") == "Paris"
    assert strip_reasoning("Use <think> tags like <think>x</think>") == (
        "Use <think> tags like <think>x</think>"
    )


def test_instructions_join_the_last_user_turn() -> None:
    messages = [SystemMessage("s"), HumanMessage("question")]
    merged = append_user_text(messages, "format")
    assert len(merged) == 2
    assert merged[-1].content == "question\n\nformat"
    assert messages[-1].content == "question"  # the caller's list is untouched
    after_ai = append_user_text([HumanMessage("q"), AIMessage("a")], "format")
    assert [m.type for m in after_ai] == ["human", "ai", "human"]


def test_a_refusal_is_invalid_output_that_quotes_it() -> None:
    message = AIMessage(content="", additional_kwargs={"refusal": "I can't help with that."})
    with pytest.raises(InvalidOutput, match="refused to answer: I can't help with that"):
        parse_output(message, "json_schema", Pick)


# Model output nested past Python's recursion limit: an unusable answer, never a crash.
DEEP_TEXT = '{"answer": "4", "confidence": ' + "[" * 5000 + "]" * 5000 + "}"


def _nested(depth: int) -> list[object]:
    outer: list[object] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    return outer


@pytest.mark.parametrize(
    "text",
    [DEEP_TEXT, f"```json\n{DEEP_TEXT}\n```", "Here: {" + '"a": ' + "[" * 5000],
    ids=["whole", "fenced", "embedded"],
)
def test_extract_json_refuses_json_nested_too_deeply(text: str) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        extract_json(text)


def test_deeply_nested_text_is_invalid_output() -> None:
    with pytest.raises(InvalidOutput, match="nested too deeply") as caught:
        parse_output(AIMessage(content=DEEP_TEXT), "json_schema", Pick)
    assert caught.value.raw == DEEP_TEXT  # shown back to the model on the re-ask


def test_deeply_nested_tool_arguments_are_invalid_output() -> None:
    # Parsed arguments nested this deep (a client that parsed them with a higher limit).
    args = {"answer": "4", "confidence": _nested(5000)}
    message = AIMessage(content="", tool_calls=[{"name": "Pick", "args": args, "id": "1"}])
    with pytest.raises(InvalidOutput, match="nested too deeply"):
        parse_output(message, "tool_calling", Pick)
