"""llm_query: ask the execution model a question directly (no tools, no graph)."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import Field

from kgot.tools.base import ToolFailure, ToolResult
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.tool_session import ToolSession

STEP = "llm_query"
SYSTEM = (
    "You answer one sub-question for a research agent. Answer precisely and briefly. If you "
    "are not sure, say so and say what would settle it; never invent citations or numbers."
)


class LlmQueryArgs(ToolArgs):
    query: str = Field(
        min_length=1,
        description="A self-contained question or task, with all the context it needs.",
    )


def build(session: ToolSession) -> ToolFunction:
    client = session.ctx.llm
    if client is None:
        raise ToolFailure("llm_query needs a language model", kind="unavailable")

    async def llm_query(query: str) -> ToolResult:
        from langchain_core.messages import HumanMessage, SystemMessage

        messages = [SystemMessage(SYSTEM), HumanMessage(query)]
        try:
            answer = await _ask(client, messages)
        except ToolFailure:
            raise
        except Exception as error:
            # The LLM layer already retried transient errors; what reaches here is final.
            raise ToolFailure(
                f"the language model could not answer: {type(error).__name__}: {error}",
                kind="network",
            ) from None
        return ToolResult(answer.strip() or "(the model returned an empty answer)", "llm")

    return llm_query


async def _ask(client: Any, messages: list[Any]) -> str:
    """Works with kgot's LLMClient (``text``) and with any LangChain chat model."""
    if hasattr(client, "text"):
        reply = client.text(messages, step=STEP)
        if inspect.isawaitable(reply):
            reply = await reply
        return str(getattr(reply, "text", reply))
    reply = await client.ainvoke(messages, config={"metadata": {"kgot_step": STEP}})
    content = reply.content
    if isinstance(content, list):
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


SPEC = ToolSpec(
    name="llm_query",
    description=(
        "Ask a language model a self-contained question: reasoning, summarising, translating, "
        "or general knowledge. It cannot browse or read files, and it can be wrong about "
        "facts: prefer the other tools for facts that can be looked up."
    ),
    args_schema=LlmQueryArgs,
    more_hint="ask for a shorter answer",
    build=build,
    needs="llm",
    notes=lambda settings: [
        f"uses the execution model ({settings.llm.execution.model or 'none configured'})"
    ],
)
