"""The two events that are spans by themselves: a request to a chat model (:class:`ModelCall`,
raised by the model client, :mod:`kgot.llm.client`) and a tool call (:class:`ToolCall`, raised
by the tool runner, :mod:`kgot.tools.runner`). Each is a child of the span in progress, so the
step that asked owns it whichever layer made it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kgot.tracing.event_base import EventBase

# The longest text kept of a tool call's arguments in its event.
ARGS_EXCERPT_CHARS = 300


class ModelCall(EventBase):
    """One request to a chat model, failed, retried or re-asked ones included."""

    type: Literal["model_call"] = "model_call"
    role: str = Field(description="``planning`` or ``execution``.")
    step: str = Field(description="What the request was for (``decide``, ``fix_code``, …).")
    model: str = Field(description="``provider:name`` of the model.")
    attempt: int = Field(description="The request's number within its call (1-based).")
    input_tokens: int = Field(description="Tokens sent (estimated when ``estimated``).")
    output_tokens: int = Field(description="Tokens received (estimated when ``estimated``).")
    estimated: bool = Field(description="The endpoint reported no usage; tokens are estimates.")
    cost_usd: float | None = Field(description="Its cost; ``None`` when the price is unknown.")
    duration_s: float = Field(description="Wall time of the request.")
    ok: bool = Field(description="It succeeded and its output was usable.")
    error: str | None = Field(default=None, description="What went wrong, when not ok.")
    method: str | None = Field(
        default=None, description="The structured-output method, for structured requests."
    )


class ToolCall(EventBase):
    """One tool call the tool runner ran (or answered from its cache)."""

    type: Literal["tool_call"] = "tool_call"
    name: str = Field(description="The tool's name.")
    args: str = Field(description="Its arguments as JSON (an excerpt).")
    duration_s: float = Field(description="Wall time of the call (waiting for a shared one too).")
    ok: bool = Field(description="The tool did what was asked.")
    cached: bool = Field(description="Answered from the runner's cache of identical calls.")
    error_kind: str | None = Field(
        default=None, description="The failure's kind (``timeout``, ``input``, …) when not ok."
    )
