"""A scripted chat model: the only stand-in kgot's tests, examples and benchmarks use for an LLM.

Select it like any provider: ``--model scripted:path/to/script.json`` (see :meth:`from_file`),
or build it in Python with a script mapping each *step* to its replies.

Every kgot call names its step in the run metadata (``metadata={"kgot_step": step}``), so a
script answers ``decide`` calls differently from ``write_code`` calls. Replies for a step are used
in order; when they run out the last one repeats. The key ``"*"`` answers any step without its
own entry. A call for a step the script has no reply for raises :class:`NoScriptedReplyError`, a
configuration error naming the step and the file to extend. A reply is one of:

* a ``str`` — the message content, verbatim (use it for malformed output too);
* a ``dict`` — structured data: returned as the forced tool's arguments when a tool call is
  forced, as JSON content otherwise;
* ``{"$tool_calls": [{"name": …, "args": {…}}, …]}`` — a message with those tool calls;
* ``{"$error": "connection" | "timeout" | "rate_limit" | "server" | "bad_request"}`` or an
  exception instance — the call raises that error;
* a callable taking :class:`ScriptedCall` and returning any of the above.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from kgot.errors import ConfigError

Reply = Any  # str | dict | BaseException | Callable[[ScriptedCall], Reply]
STEP_METADATA_KEY = "kgot_step"


class NoScriptedReplyError(ConfigError):
    """The script has no reply for a step the model was called for.

    The script, not the model, is what needs fixing, so this is a configuration error (exit code
    2), and the model client passes it on as it is instead of reporting a failed request.

    Attributes:
        step: the step of the call (``None``: a call that named no step).
        source: the script file, when the script came from one.
    """

    def __init__(self, step: str | None, number: int, source: str | None) -> None:
        self.step = step
        self.source = source
        script = source or "the script"
        if step:
            what = f"step {step!r} (call {number} of that step)"
            fix = f'add a "{step}" list of replies to {script} (or a "*" list, for any step)'
        else:  # called outside kgot's steps, e.g. straight through LangChain
            what = f"a call that names no step (no {STEP_METADATA_KEY} metadata)"
            fix = f'add a "*" list of replies to {script}'
        super().__init__(f"the scripted model has no reply for {what}: {fix}")


@dataclass
class ScriptedCall:
    """One call the scripted model received."""

    step: str | None
    messages: list[BaseMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    number: int = 0  # 1-based among calls for this step

    @property
    def prompt(self) -> str:
        """All message texts joined, for assertions and for rules that look at the prompt."""
        return "\n".join(str(m.content) for m in self.messages)


class ScriptedChatModel(BaseChatModel):
    """Answers from a script instead of a network; records every call it receives."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: Any  # Mapping[str, Sequence[Reply]] | Callable[[ScriptedCall], Reply]
    latency_s: float = 0.0
    model_name: str = "scripted"
    source: str | None = None  # the script's file, named when a step has no reply

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)
    _calls: list[ScriptedCall] = PrivateAttr(default_factory=list)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedChatModel:
        """Load a JSON script (``{"step": [reply, …], "*": [reply, …]}``).

        A relative ``path`` is read from the working directory, and named in messages as the
        absolute path it resolves to (kgot's settings store it absolute already).

        Raises:
            ConfigError: the file is missing or not a JSON object of lists.
        """
        try:
            script = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"scripted model file {path} does not exist") from None
        except (OSError, ValueError) as error:
            raise ConfigError(f"scripted model file {path} is not valid JSON: {error}") from None
        except RecursionError:
            raise ConfigError(
                f"scripted model file {path} is nested too deeply for Python's JSON reader; "
                "write a deeply nested reply as a string (the model's text, verbatim)"
            ) from None
        if not isinstance(script, dict) or not all(isinstance(v, list) for v in script.values()):
            raise ConfigError(
                f"scripted model file {path} must be a JSON object mapping steps to reply lists"
            )
        return cls(
            script=script,
            model_name=f"scripted:{path}",
            source=os.path.abspath(path),
            **kwargs,
        )

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in arrival order."""
        with self._lock:
            return list(self._calls)

    def calls_for(self, step: str) -> list[ScriptedCall]:
        return [c for c in self.calls if c.step == step]

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._answer(messages, run_manager, kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._answer(messages, run_manager, kwargs)

    def _answer(self, messages: list[BaseMessage], run_manager: Any, kwargs: dict) -> ChatResult:
        metadata = getattr(run_manager, "metadata", None) or {}
        step = metadata.get(STEP_METADATA_KEY)
        with self._lock:
            key = step or ""
            self._counts[key] = self._counts.get(key, 0) + 1
            call = ScriptedCall(
                step=step,
                messages=list(messages),
                tools=list(kwargs.get("tools") or []),
                tool_choice=kwargs.get("tool_choice"),
                response_format=kwargs.get("response_format"),
                number=self._counts[key],
            )
            self._calls.append(call)
        reply = self._pick(call)
        while callable(reply) and not isinstance(reply, BaseException):
            reply = reply(call)
        message = _to_message(reply, call)
        text = message.content if isinstance(message.content, str) else json.dumps(message.content)
        out_tokens = _rough_tokens(text) + sum(
            _rough_tokens(json.dumps(tc["args"])) for tc in message.tool_calls
        )
        in_tokens = sum(_rough_tokens(str(m.content)) for m in messages)
        message.usage_metadata = {
            "input_tokens": in_tokens,
            "output_tokens": out_tokens,
            "total_tokens": in_tokens + out_tokens,
        }
        message.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _pick(self, call: ScriptedCall) -> Reply:
        if callable(self.script):
            return self.script(call)
        script: Mapping[str, Sequence[Reply]] = self.script
        replies = script.get(call.step or "") or script.get("*")
        if not replies:
            raise NoScriptedReplyError(call.step, call.number, self.source)
        return replies[min(call.number, len(replies)) - 1]


_ids = itertools.count(1)


def _rough_tokens(text: str) -> int:
    """A stand-in's usage figure: about four characters a token. Deliberately cheap, so that
    benchmarks driven by the scripted model do not charge the model's bookkeeping to kgot."""
    return len(text) // 4 + 1


def _to_message(reply: Reply, call: ScriptedCall) -> AIMessage:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, AIMessage):
        return reply.model_copy()
    if isinstance(reply, str):
        return AIMessage(content=reply)
    if isinstance(reply, dict) and "$error" in reply:
        raise scripted_error(str(reply["$error"]))
    if isinstance(reply, dict) and "$tool_calls" in reply:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": tc["name"], "args": dict(tc.get("args") or {}), "id": f"call_{next(_ids)}"}
                for tc in reply["$tool_calls"]
            ],
        )
    if isinstance(reply, dict):
        forced = _forced_tool(call)
        if forced:
            return AIMessage(
                content="",
                tool_calls=[{"name": forced, "args": reply, "id": f"call_{next(_ids)}"}],
            )
        return AIMessage(content=json.dumps(reply))
    raise TypeError(f"unsupported scripted reply of type {type(reply).__name__}")


def _forced_tool(call: ScriptedCall) -> str | None:
    choice = call.tool_choice
    if isinstance(choice, dict):
        return choice.get("function", {}).get("name") or choice.get("name")
    if isinstance(choice, str) and choice not in ("auto", "none"):
        if choice in ("any", "required"):
            return call.tools[0]["function"]["name"] if len(call.tools) == 1 else None
        return choice
    return None


def scripted_error(kind: str) -> Exception:
    """The exception a real client raises for ``kind`` (used by ``{"$error": kind}``)."""
    import httpx
    import openai

    # openai's exceptions are typed against the HTTP client it ships with (httpx2 in recent
    # releases); they only keep the request and response for display, so httpx's do.
    request: Any = httpx.Request("POST", "http://scripted.invalid/v1/chat/completions")

    def status(code: int) -> Any:
        return httpx.Response(code, request=request, json={"error": {"message": kind}})

    by_status: dict[str, tuple[type[openai.APIStatusError], int]] = {
        "rate_limit": (openai.RateLimitError, 429),
        "server": (openai.InternalServerError, 500),
        "bad_request": (openai.BadRequestError, 400),
    }
    if kind == "connection":
        return openai.APIConnectionError(request=request)
    if kind == "timeout":
        return openai.APITimeoutError(request=request)
    if kind in by_status:
        error_class, code = by_status[kind]
        return error_class(kind, response=status(code), body=None)
    raise ValueError(
        f"unknown scripted error {kind!r}; use connection, timeout, {', '.join(by_status)}"
    )
