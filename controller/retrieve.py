"""The RETRIEVE branch: query the graph, then do maths when the answer needs a calculation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.runtime import Runtime

from kgot.controller.aliases import canonical_code
from kgot.controller.codeblocks import extract_code
from kgot.controller.context import RunContext
from kgot.controller.schemas import NeedMath
from kgot.controller.state import RunState
from kgot.controller.views import fact_lens, graph_view
from kgot.errors import QueryError, StepFailure
from kgot.graph_backends import QueryResult
from kgot.prompts import render_prompt
from kgot.sandbox import Job, run_async
from kgot.tracing import Code, CodeFailed, Math, StepFailed, excerpt
from kgot.tracing import QueryResult as QueryResultEvent

RETRIEVED_CHARS = 8_000
# A calculation's printout goes into the solution prompt; the sandbox allows far more output
# (1 MB by default) than any prompt can hold.
MATH_OUTPUT_CHARS = 4_000


@dataclass
class Retrieval:
    """What one read pass over the graph found (:func:`query_graph`).

    Attributes:
        text: the first non-empty result as shown in prompts (cut to ``RETRIEVED_CHARS``);
            ``None`` when every query failed or came back empty.
        value: that result's JSON-compatible value (``None`` without one).
        nodes: the entity's nodes the result names by id (entity runs; ``None`` otherwise).
        queries: the queries written (each with its fixes).
        llm_calls: the model calls the pass made (queries and fixes).
    """

    text: str | None = None
    value: Any = None
    nodes: list[str] | None = None
    queries: int = 0
    llm_calls: int = 0

    @property
    def found(self) -> bool:
        return self.text is not None


async def retrieve(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Write a read query; fix it when it fails, write a new one when it finds nothing.

    ``retrieve_retries`` queries are tried; each may be fixed ``fix_code_retries`` times.
    """
    ctx = runtime.context
    iteration = state["iteration"]
    found = await query_graph(
        ctx, state["question"], iteration=iteration, focus=state.get("notes", [])[-3:]
    )
    if found.found:
        update: dict[str, Any] = {"retrieved": found.text}
        if found.nodes is not None:  # the facts an answer from this result uses (solve.py)
            update["retrieved_nodes"] = found.nodes
        return update
    note = f"Round {iteration}: retrieval found nothing after {found.queries} queries."
    ctx.emit(StepFailed(iteration=iteration, step="retrieve", error=note))
    if ctx.session is not None:
        return {"retrieved": None, "retrieved_nodes": [], "notes": [note]}
    return {"retrieved": None, "notes": [note]}


async def query_graph(
    ctx: RunContext,
    question: str,
    *,
    iteration: int,
    focus: Sequence[str] = (),
    max_calls: int | None = None,
) -> Retrieval:
    """The RETRIEVE path's read pass: the planning model writes a read query for ``question``
    against a view of the graph (seeded by the question and the ``focus`` texts), the query runs
    in the sandbox, a failing one goes back for a fix and an empty one is written anew.

    ``retrieve_retries`` queries are tried, each fixed up to ``fix_code_retries`` times, and at
    most ``max_calls`` model calls are made in all (``None``: no cap beyond the retries).
    """
    limits = ctx.settings.controller
    language = ctx.backend.language
    view = await graph_view(ctx, question, focus=focus)
    calls = _Calls(max_calls)
    tried: list[str] = []
    for generation in range(1, limits.retrieve_retries + 1):
        if calls.used_up:
            break
        messages: list[BaseMessage] = render_prompt(
            "query",
            question=question,
            language=language.display_name,
            fence=language.fence,
            read_contract=language.read_contract,
            read_example=language.read_example,
            graph_view=view,
            attempts=_format_attempts(tried),
        )
        result, code = await _run_query(ctx, iteration, messages, generation, calls)
        if result is not None and not result.empty:
            lens = fact_lens(ctx)
            return Retrieval(
                text=excerpt(result.text, RETRIEVED_CHARS),
                value=result.value,
                nodes=lens.named_nodes(result.value) if lens is not None else None,
                queries=generation,
                llm_calls=calls.made,
            )
        outcome = "returned an empty result" if result is not None else "kept failing"
        tried.append(f"```{language.fence}\n{code}\n```\n{outcome}")
    return Retrieval(queries=len(tried), llm_calls=calls.made)


@dataclass
class _Calls:
    """Model calls of one read pass, against an optional cap."""

    limit: int | None
    made: int = 0

    @property
    def used_up(self) -> bool:
        return self.limit is not None and self.made >= self.limit

    def take(self) -> bool:
        if self.used_up:
            return False
        self.made += 1
        return True


async def _run_query(
    ctx: RunContext,
    iteration: int,
    messages: list[BaseMessage],
    generation: int,
    calls: _Calls,
) -> tuple[QueryResult | None, str]:
    fence = ctx.backend.language.fence
    code = ""
    for fix in range(ctx.settings.controller.fix_code_retries + 1):
        if not calls.take():
            break
        step = "query" if fix == 0 else "fix_query"
        reply = await ctx.planning.text(messages, step=step)
        code = extract_code(reply, fence)
        attempt = f"{generation}.{fix}"
        ctx.emit(Code(iteration=iteration, purpose="query", attempt=attempt, code=code))
        try:
            result = await ctx.backend.aquery(await canonical_code(ctx, code))
        except QueryError as error:
            ctx.emit(
                CodeFailed(iteration=iteration, purpose="query", attempt=attempt, error=str(error))
            )
            messages = [
                *messages,
                AIMessage(reply),
                *render_prompt("fix_code", error=str(error), fence=fence),
            ]
            continue
        ctx.emit(
            QueryResultEvent(
                iteration=iteration,
                attempt=attempt,
                empty=result.empty,
                result=excerpt(result.text),
            )
        )
        return result, code
    return None, code


async def math_check(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask whether a calculation is needed; a failed answer counts as "no"."""
    ctx = runtime.context
    messages = render_prompt("math_check", question=state["question"], retrieved=state["retrieved"])
    try:
        verdict = await ctx.planning.structured(messages, NeedMath, step="math_check")
    except StepFailure as failure:
        ctx.emit(StepFailed(iteration=state["iteration"], step="math_check", error=str(failure)))
        return {"math_needed": False}
    if not verdict.needs_math:
        ctx.emit(Math(iteration=state["iteration"], needs_math=False, output=""))
    return {"math_needed": verdict.needs_math}


async def math(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Compute what the question asks from the retrieved facts, in the sandbox."""
    ctx = runtime.context
    output = await _compute(ctx, state)
    ctx.emit(
        Math(iteration=state["iteration"], needs_math=True, output=excerpt(output or "(failed)"))
    )
    return {"math_output": output}


async def _compute(ctx: RunContext, state: RunState) -> str | None:
    """Have the model write Python for the calculation and run it in the sandbox; its output
    is cut to ``MATH_OUTPUT_CHARS`` (with a note saying so)."""
    messages: list[BaseMessage] = render_prompt(
        "math", question=state["question"], retrieved=state["retrieved"]
    )
    attempts = ctx.settings.controller.fix_code_retries + 1
    for attempt in range(1, attempts + 1):
        reply = await ctx.planning.text(messages, step="math" if attempt == 1 else "fix_math")
        code = extract_code(reply, "python")
        ctx.emit(Code(iteration=state["iteration"], purpose="math", attempt=attempt, code=code))
        result = await run_async(ctx.sandbox, Job(code))
        if result.ok and result.stdout.strip():
            return excerpt(result.stdout.strip(), MATH_OUTPUT_CHARS)
        error = result.error or result.stderr.strip()[-2000:] or "the program printed nothing"
        ctx.emit(
            CodeFailed(iteration=state["iteration"], purpose="math", attempt=attempt, error=error)
        )
        messages = [
            *messages,
            AIMessage(reply),
            *render_prompt("fix_code", error=error, fence="python"),
        ]
    return None


def _format_attempts(tried: list[str]) -> str:
    if not tried:
        return ""
    listed = "\n\n".join(tried)
    return f"\nEarlier queries that did not work (write a different one):\n{listed}"


def route_after_retrieve(state: RunState) -> str:
    if state.get("retrieved"):
        return "math_check"
    return "solve" if state.get("forced") else "decide"


def route_after_math_check(state: RunState) -> str:
    return "math" if state.get("math_needed") else "solve"
