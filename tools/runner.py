"""Running tool calls for the loop: validation, deadlines, output caps, a per-run cache.

:meth:`ToolRunner.run` never raises because a tool failed: every problem — an unknown tool, bad
arguments, a timeout, a network error, a bug in a tool — becomes a :class:`ToolOutcome` with
``ok=False`` and a message the model can act on. Identical successful calls (same name, same
arguments after defaults are filled in) are answered from the cache; concurrent identical
calls share one execution, which runs as a task of the runner: a caller that is cancelled (or
times out) stops waiting without cancelling it for the others. Failures are never cached.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ValidationError

from kgot.errors import ToolError
from kgot.tools.argument_schemas import explain_validation, signature
from kgot.tools.base import MORE_HINT_KEY, NATIVE_KEY, ToolFailure, ToolOutcome
from kgot.tools.flight import SingleFlight, interrupted_from_outside
from kgot.tracing import ARGS_EXCERPT_CHARS, ToolCall, child_span_ids, emit, excerpt

_NOTICE_ROOM = 300  # characters kept free for the truncation notice


class ToolRunner:
    """Runs named tools with a deadline and an output cap; safe to call concurrently.

    Args:
        tools: the run's tools (from :func:`kgot.tools.build_tools`).
        timeout: seconds per call.
        max_output_chars: longer outputs are cut, with a notice saying how to get more.
    """

    def __init__(self, tools: Sequence[BaseTool], *, timeout: float, max_output_chars: int) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self._cache: dict[str, ToolOutcome] = {}
        self._flights: SingleFlight[ToolOutcome] = SingleFlight()
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self.tools)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    async def run(self, name: str, args: dict[str, Any] | None = None) -> ToolOutcome:
        """Run one call and describe what happened; the call is traced as a
        :class:`~kgot.tracing.call_events.ToolCall` event, a child of the span in progress.

        Args:
            name: the tool's name.
            args: its arguments (JSON-like values).

        Returns:
            The outcome; ``ok=False`` with an actionable ``output`` for any failure.

        Raises:
            asyncio.CancelledError: only when the caller itself is cancelled; an identical call
                it shared keeps running for its other callers.
        """
        started = time.perf_counter()
        outcome = await self._run(name, args)
        emit(
            ToolCall(
                **child_span_ids(),
                name=name,
                args=excerpt(_args_text(args), ARGS_EXCERPT_CHARS),
                duration_s=time.perf_counter() - started,
                ok=outcome.ok,
                cached=outcome.cached,
                error_kind=outcome.error_kind,
            )
        )
        return outcome

    async def _run(self, name: str, args: dict[str, Any] | None) -> ToolOutcome:
        given = dict(args or {})
        tool = self.tools.get(name)
        if tool is None:
            return self._unknown(name, given)
        try:
            canonical, values = _validate(tool, given)
        except ValidationError as error:
            return self._failure(name, given, _explain_validation(tool, error), "input")

        key = _key(name, canonical)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return _served_from_cache(cached, given)

        async def execute() -> ToolOutcome:
            outcome = await self._execute(tool, name, given, canonical, values)
            if outcome.ok:
                with self._lock:
                    self._cache[key] = outcome
            return outcome

        try:
            outcome, started = await self._flights.run(key, execute)
        except asyncio.CancelledError:
            if not interrupted_from_outside():
                raise
            return self._failure(
                name, given, f"{name} was interrupted; try the call again", "internal"
            )
        except Exception as error:  # the runner's own bug: still only an outcome
            return self._failure(
                name,
                given,
                f"{name} failed unexpectedly ({type(error).__name__}: {error})",
                "internal",
            )
        if started:
            return outcome
        return (
            _served_from_cache(outcome, given)
            if outcome.ok
            else dataclasses.replace(outcome, args=given)
        )

    def waiting(self, name: str, args: dict[str, Any] | None = None) -> int:
        """Callers currently waiting on the in-flight call ``name(args)`` (0 when none)."""
        tool = self.tools.get(name)
        if tool is None:
            return 0
        try:
            return self._flights.waiting(_key(name, _validate(tool, dict(args or {}))[0]))
        except ValidationError:
            return 0

    def _unknown(self, name: str, given: dict[str, Any]) -> ToolOutcome:
        return self._failure(
            name,
            given,
            f"there is no tool named {name!r}; available tools: {', '.join(self.names)}",
            "unknown_tool",
        )

    async def _execute(
        self,
        tool: BaseTool,
        name: str,
        given: dict[str, Any],
        canonical: dict[str, Any],
        values: BaseModel | None,
    ) -> ToolOutcome:
        started = time.perf_counter()
        try:
            text, artifact = await asyncio.wait_for(
                _invoke(tool, name, canonical, values), timeout=self.timeout
            )
        except TimeoutError:
            return self._failure(
                name,
                given,
                f"{name} did not finish within {self.timeout:g} s and was stopped; try a "
                "narrower request (a more specific query, a smaller file, another source)",
                "timeout",
                started=started,
            )
        except ToolFailure as failure:
            return self._failure(
                name,
                given,
                str(failure),
                failure.kind,
                started=started,
                source_ref=failure.source_ref,
            )
        except (ToolError, ToolException) as failure:  # tools written outside this package
            return self._failure(name, given, str(failure), "input", started=started)
        except ValidationError as error:
            return self._failure(
                name, given, _explain_validation(tool, error), "input", started=started
            )
        except Exception as error:  # a bug in a tool must not end the run
            return self._failure(
                name,
                given,
                f"{name} failed unexpectedly ({type(error).__name__}: {error}); try different "
                "arguments or another tool",
                "internal",
                started=started,
            )
        output, cut = self._cap(text, tool)
        return ToolOutcome(
            name=name,
            args=given,
            output=output,
            ok=True,
            duration_ms=(time.perf_counter() - started) * 1000,
            truncated_chars=cut,
            source_ref=artifact.get("source_ref") if isinstance(artifact, dict) else None,
        )

    def _cap(self, text: str, tool: BaseTool | None) -> tuple[str, int]:
        if len(text) <= self.max_output_chars:
            return text, 0
        keep = max(0, self.max_output_chars - _NOTICE_ROOM)
        # Prefer to cut at a line end so the last line shown is whole.
        boundary = text.rfind("\n", int(keep * 0.8), keep)
        if boundary > 0:
            keep = boundary
        cut = len(text) - keep
        hint = ((tool.metadata or {}).get(MORE_HINT_KEY) if tool else None) or "ask for less"
        notice = f"\n[output truncated: {cut:,} more characters not shown; to get more, {hint}]"
        return text[:keep] + notice, cut

    def _failure(
        self,
        name: str,
        args: dict[str, Any],
        message: str,
        kind: str,
        *,
        started: float | None = None,
        source_ref: str | None = None,
    ) -> ToolOutcome:
        tool = self.tools.get(name)
        output, cut = self._cap(f"Error: {message}", tool)
        return ToolOutcome(
            name=name,
            args=args,
            output=output,
            ok=False,
            duration_ms=(time.perf_counter() - started) * 1000 if started else 0.0,
            truncated_chars=cut,
            error_kind=kind,
            source_ref=source_ref,
        )


async def _invoke(
    tool: BaseTool, name: str, canonical: dict[str, Any], values: BaseModel | None
) -> tuple[str, Any]:
    """Run ``tool`` on validated arguments (``canonical``, their JSON form; ``values``, the
    validated schema instance when the tool has one): its text and artifact (``None`` if none).

    kgot's own tools are called directly: the arguments were validated already, and LangChain's
    ``ainvoke`` inspects the function's signature and type hints on every call, which cost more
    than the runner itself. (Those tools therefore send no LangChain callback events; kgot's
    trace records every call.) Other tools go through ``ainvoke`` with all it supports.
    """
    native = _native(tool)
    if native is not None and values is not None:
        text, artifact = await native(**{key: getattr(values, key) for key in canonical})
    else:
        call = {
            "name": name,
            "args": canonical,
            "id": f"kgot-{uuid.uuid4().hex[:12]}",
            "type": "tool_call",
        }
        message = await tool.ainvoke(call)
        text, artifact = message.content, getattr(message, "artifact", None)
    return (text if isinstance(text, str) else str(text)), artifact


def _native(tool: BaseTool) -> Callable[..., Awaitable[Any]] | None:
    """The coroutine of one of kgot's own tools; ``None`` for others."""
    if not (tool.metadata or {}).get(NATIVE_KEY) or not isinstance(tool, StructuredTool):
        return None
    return tool.coroutine


def _validate(tool: BaseTool, args: dict[str, Any]) -> tuple[dict[str, Any], BaseModel | None]:
    """The arguments in canonical JSON form (defaults filled in), and the validated schema
    instance (``None`` for a tool without a Pydantic schema)."""
    schema = tool.args_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        values = schema.model_validate(args)
        return values.model_dump(mode="json"), values
    return args, None


def _served_from_cache(outcome: ToolOutcome, args: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        name=outcome.name,
        args=args,
        output=outcome.output,
        ok=outcome.ok,
        cached=True,
        duration_ms=0.0,
        truncated_chars=outcome.truncated_chars,
        error_kind=outcome.error_kind,
        source_ref=outcome.source_ref,
    )


def _explain_validation(tool: BaseTool, error: ValidationError) -> str:
    return explain_validation(tool.name, error, describe_signature(tool))


def describe_signature(tool: BaseTool) -> str:
    """``url (string, required), page (integer, default 1), …`` from the tool's schema."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return signature(schema.model_json_schema())
    return signature(dict(schema) if isinstance(schema, dict) else {})


def _args_text(args: dict[str, Any] | None) -> str:
    """The arguments as the trace shows them: JSON, anything else by its text."""
    return json.dumps(args or {}, ensure_ascii=False, default=str)


def _key(name: str, canonical: dict[str, Any]) -> str:
    return name + "\x00" + json.dumps(canonical, sort_keys=True, separators=(",", ":"))
