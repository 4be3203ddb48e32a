"""Asking a chat model for JSON in the four ways servers understand, and reading the answer back.

Methods, strongest first (``auto`` tries them in this order):

* ``json_schema`` — ``response_format={"type": "json_schema", …}`` (OpenAI, vLLM, recent
  Ollama/LM Studio); other providers go through LangChain's ``with_structured_output``.
* ``tool_calling`` — one forced tool whose parameters are the schema.
* ``json_object`` — ``response_format={"type": "json_object", "schema": …}``, what llama.cpp's
  server turns into a grammar (OpenAI-compatible endpoints only).
* ``prompt`` — the schema in the prompt; the JSON is read from plain text (a fenced block or the
  first balanced object), after dropping any ``<think>`` section.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
Method = Literal["json_schema", "tool_calling", "json_object", "prompt"]
AUTO_ORDER: tuple[Method, ...] = ("json_schema", "tool_calling", "json_object", "prompt")
_MAX_ERRORS_SHOWN = 8
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_LEADING_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)
TOO_DEEP = "the JSON is nested too deeply to read; answer with a flat JSON object"


# What kind of unusable answer it was, in words for the user (one of these per InvalidOutput):
# the same kind again and again means re-asking will not help.
NO_JSON = "no JSON object in the reply"
NESTED_TOO_DEEPLY = "JSON nested too deeply"
BAD_TOOL_ARGUMENTS = "tool call arguments that are not valid JSON"
REFUSAL = "a refusal"
EMPTY = "an empty reply"
SCHEMA_MISMATCH = "JSON that does not match the schema"


class InvalidOutput(Exception):
    """The model answered, but not with data that fits the schema.

    Attributes:
        raw: the text received (tool arguments as JSON text for tool calls).
        reason: the kind of problem (``NO_JSON``, ``SCHEMA_MISMATCH``, …); the message says
            the details.
    """

    def __init__(self, message: str, raw: str, reason: str) -> None:
        super().__init__(message)
        self.raw = raw
        self.reason = reason


def speaks_openai(model: BaseChatModel) -> bool:
    """Whether ``response_format`` can be passed straight to the model's endpoint."""
    from kgot.llm.scripted import ScriptedChatModel

    if isinstance(model, ScriptedChatModel):
        return True
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    return isinstance(model, BaseChatOpenAI)


def applicable_methods(model: BaseChatModel) -> tuple[Method, ...]:
    """The ``auto`` chain for this model (``json_object`` needs an OpenAI-compatible endpoint)."""
    if speaks_openai(model):
        return AUTO_ORDER
    return tuple(m for m in AUTO_ORDER if m != "json_object")


def schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    return schema.model_json_schema()


def bind_method(
    model: BaseChatModel, method: Method, schema: type[BaseModel]
) -> Runnable[Any, Any]:
    """A runnable that asks ``model`` for ``schema`` using ``method``.

    Its output is an :class:`AIMessage`, or LangChain's ``{"raw": AIMessage, …}`` dict for
    providers reached through ``with_structured_output``; :func:`raw_message` unwraps either.

    Raises:
        NotImplementedError: the model class cannot do ``method`` (e.g. no ``bind_tools``).
    """
    if method == "prompt":
        return model
    if method == "tool_calling":
        return model.bind_tools([schema], tool_choice=schema.__name__)
    if method == "json_object":
        if not speaks_openai(model):
            raise NotImplementedError("json_object needs an OpenAI-compatible endpoint")
        return model.bind(response_format={"type": "json_object", "schema": schema_of(schema)})
    if speaks_openai(model):
        return model.bind(
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": schema.__name__,
                    "description": (schema.__doc__ or "").strip()[:500],
                    "schema": schema_of(schema),
                },
            }
        )
    try:
        return model.with_structured_output(schema, method="json_schema", include_raw=True)
    except (ValueError, NotImplementedError) as error:  # the class has no structured output
        raise NotImplementedError(f"{type(model).__name__}: {error}") from error


def prepare_messages(
    messages: list[BaseMessage], method: Method, schema: type[BaseModel]
) -> list[BaseMessage]:
    """Add the schema instructions ``method`` needs to the conversation.

    ``prompt`` and ``json_object`` need the schema in the text (OpenAI's ``json_object`` also
    insists on the word "JSON" in the messages). The instructions join the last user message
    rather than following it, because some chat templates reject two user turns in a row.
    """
    if method not in ("prompt", "json_object"):
        return messages
    instructions = (
        "Answer with one JSON object that matches this JSON Schema, in a ```json fenced block, "
        "and nothing else:\n" + json.dumps(schema_of(schema), separators=(",", ":"))
    )
    return append_user_text(messages, instructions)


def append_user_text(messages: list[BaseMessage], text: str) -> list[BaseMessage]:
    """``messages`` with ``text`` added to the final user turn (or as a new user turn)."""
    if (
        messages
        and isinstance(messages[-1], HumanMessage)
        and isinstance(messages[-1].content, str)
    ):
        last = messages[-1]
        merged = last.model_copy(update={"content": f"{last.content}\n\n{text}"})
        return [*messages[:-1], merged]
    return [*messages, HumanMessage(content=text)]


def raw_message(output: Any) -> AIMessage:
    """The model's message from a runnable's output."""
    if isinstance(output, dict) and "raw" in output:
        output = output["raw"]
    if not isinstance(output, AIMessage):
        raise TypeError(f"expected an AIMessage from the model, got {type(output).__name__}")
    return output


def parse_output(message: AIMessage, method: Method, schema: type[M]) -> M:
    """Validate the model's answer against ``schema``.

    Raises:
        InvalidOutput: no JSON found, or it does not validate; the message says what to fix.
    """
    try:
        data, raw = _extract_data(message, method, schema)
        return schema.model_validate(data)
    except ValidationError as error:
        raise InvalidOutput(describe_validation_error(error), raw, SCHEMA_MISMATCH) from None
    except RecursionError:
        # Model output nested past Python's recursion limit (a thousand brackets is enough for
        # the JSON reader or Pydantic): an unusable answer like any other, never a crash.
        # The raw text only: printing parsed arguments this deep would recurse again.
        raise InvalidOutput(TOO_DEEP, message.text, NESTED_TOO_DEEPLY) from None


def _extract_data(message: AIMessage, method: Method, schema: type[BaseModel]) -> tuple[Any, str]:
    calls = [c for c in message.tool_calls if c.get("name") == schema.__name__] or list(
        message.tool_calls
    )
    if calls:
        args = calls[0].get("args")
        return args, json.dumps(args, ensure_ascii=False)
    if message.invalid_tool_calls:
        bad = message.invalid_tool_calls[0]
        raw = str(bad.get("args") or "")
        problem = f"the tool call arguments are not valid JSON: {bad.get('error')}"
        raise InvalidOutput(problem, raw, BAD_TOOL_ARGUMENTS)
    text = message.text
    refusal = message.additional_kwargs.get("refusal")
    if refusal and not text.strip():
        raise InvalidOutput(f"the model refused to answer: {refusal}", str(refusal), REFUSAL)
    if not text.strip():
        expected = "a tool call" if method == "tool_calling" else "a JSON object"
        raise InvalidOutput(f"the reply was empty; expected {expected}", text, EMPTY)
    try:
        return extract_json(text), text
    except ValueError as error:
        reason = NESTED_TOO_DEEPLY if str(error) == TOO_DEEP else NO_JSON
        raise InvalidOutput(str(error), text, reason) from None


def strip_reasoning(text: str) -> str:
    """``text`` without the ``<think>…</think>`` section reasoning models put before answers."""
    return _LEADING_THINK.sub("", text, count=1)


def extract_json(text: str) -> Any:
    """The JSON object in a model's plain-text answer.

    Tried in order: the whole text; a fenced ```json block; the first balanced ``{…}`` that
    parses. ``<think>…</think>`` sections of reasoning models are ignored.

    Raises:
        ValueError: no JSON object found, or it is nested too deeply for Python's JSON reader
            (the message is shown to the model).
    """
    text = _THINK_BLOCK.sub("", text).strip()
    fenced = (match.group(1) for match in _FENCED.finditer(text))
    for candidate in itertools.chain([text], fenced):
        try:
            return json.loads(candidate)
        except RecursionError:
            raise ValueError(TOO_DEEP) from None
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except RecursionError:
            # Every later start inside this object is nested as deeply: stop rather than
            # rescan the text once per brace.
            raise ValueError(TOO_DEEP) from None
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("no JSON object found in the reply; answer with a single JSON object")


def describe_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one compact line the model can act on."""
    parts = []
    for item in error.errors()[:_MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        parts.append(f"`{where}`: {item['msg']}")
    more = error.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "the JSON does not match the schema: " + "; ".join(parts)


def repair_messages(messages: list[BaseMessage], raw: str, problem: str) -> list[BaseMessage]:
    """The conversation for a re-ask: the bad answer, then what was wrong with it.

    The bad answer goes back as plain assistant text (not as a tool call) so the history stays
    valid for every server, whatever method produced it.
    """
    return [
        *messages,
        AIMessage(content=raw or "(empty reply)"),
        HumanMessage(
            content=f"That answer cannot be used: {problem}. Reply again with only the corrected "
            "JSON object, matching the schema exactly."
        ),
    ]
