"""The controller's LangGraph: nodes, routes and the recursion limit derived from the limits.

```
START ─▶ decide ──INSERT: choose and run tools──▶ update_graph ──▶ decide …
           │  └─ no calls / no results ──▶ decide
           │
           └──RETRIEVE (or forced)──▶ retrieve ──found──▶ math_check ──▶ [math] ──▶ solve ─▶ END
                                         │ empty ──▶ decide
                                         └ empty and forced ──▶ solve (best answer from the graph)
```

One node is one checkpoint, and an INSERT round is two of them, cut where a round produces
something worth keeping: ``decide`` holds the vote and, on INSERT, chooses and runs the tool
calls (their results are saved with the checkpoint); ``update_graph`` turns those results into
graph changes. An interruption during the votes or the tools costs that step's model calls
again (the votes are one concurrent round); finished tool results are never fetched twice.
Each LangGraph step costs about a millisecond of bookkeeping and checkpointing, so a third
step per round between voting and tools would buy nothing but that.

Routing is done by the node itself: a routed node returns a LangGraph ``Command`` naming the
next node along with its state update. A conditional edge would do the same job as a separate
runnable per step, with its own callbacks and a fresh read of the state.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from kgot.config import ControllerSettings
from kgot.controller.context import RunContext
from kgot.controller.decide import decide
from kgot.controller.insert import update_graph, use_tools
from kgot.controller.retrieve import (
    math,
    math_check,
    retrieve,
    route_after_math_check,
    route_after_retrieve,
)
from kgot.controller.solve import solve
from kgot.controller.state import RunState
from kgot.tracing import StepFinished, StepStarted, span

# Supersteps one INSERT round can take: decide (with the tools), update_graph.
_STEPS_PER_ROUND = 2
# The forced end: decide, retrieve, math_check, math, solve.
_FINAL_STEPS = 5


def recursion_limit(limits: ControllerSettings) -> int:
    """The most supersteps a run can take under these limits (so none can loop forever)."""
    return _STEPS_PER_ROUND * limits.max_iterations + _FINAL_STEPS + 1


def run_config(run_id: str, limits: ControllerSettings) -> RunnableConfig:
    """LangGraph's config for one run: its checkpoint thread and the recursion limit."""
    return {"configurable": {"thread_id": run_id}, "recursion_limit": recursion_limit(limits)}


def build_controller_graph(
    checkpointer: BaseCheckpointSaver | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(RunState, context_schema=RunContext)
    builder.add_node(
        "decide",
        _spanned("decide", _decide_and_gather),
        destinations=("update_graph", "decide", "retrieve"),
    )
    builder.add_node("update_graph", _spanned("update_graph", update_graph))
    builder.add_node(
        "retrieve",
        _spanned("retrieve", _routed(retrieve, route_after_retrieve)),
        destinations=("math_check", "solve", "decide"),
    )
    builder.add_node(
        "math_check",
        _spanned("math_check", _routed(math_check, route_after_math_check)),
        destinations=("math", "solve"),
    )
    builder.add_node("math", _spanned("math", math))
    builder.add_node("solve", _spanned("solve", solve))

    builder.add_edge(START, "decide")
    builder.add_edge("update_graph", "decide")
    builder.add_edge("math", "solve")
    builder.add_edge("solve", END)
    return builder.compile(checkpointer=checkpointer, name="kgot")


class _Step(Protocol):
    def __call__(
        self, state: RunState, runtime: Runtime[RunContext]
    ) -> Awaitable[dict[str, Any]]: ...


class _Node(Protocol):
    """A node as the wrapper calls it: its update, or a ``Command`` naming the next node."""

    def __call__(
        self, state: RunState, runtime: Runtime[RunContext]
    ) -> Awaitable[dict[str, Any] | Command[Any]]: ...


def _spanned(name: str, node: _Node) -> Callable[..., Awaitable[Any]]:
    """``node`` bracketed by step_started / step_finished events, with the step's usage delta
    added to its update (the state's ``usage`` channel sums them).

    The step's events go through LangGraph's stream writer, so ``astream`` in
    :mod:`kgot.controller.run` hands them to the run's collector in order. A step that raises
    still reports what it used (``ok`` false) before the error goes on.
    """

    async def step(state: RunState, *, runtime: Runtime[RunContext]) -> Any:
        ctx = runtime.context
        ctx.write = runtime.stream_writer
        ctx.step_tool_calls = 0
        # The step's span: its events (and the model and tool calls made in it, which find
        # it through the context) go through ctx.emit to the stream writer set above.
        with span(sink=ctx.emit, iteration=lambda: ctx.iteration):
            ctx.emit(StepStarted(step=name))
            calls_before = len(ctx.ledger)
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                outcome = await node(state, runtime)
            except BaseException as raised:
                error = raised
                raise
            finally:
                ended = time.perf_counter()
                usage = ctx.step_usage(ctx.ledger.calls[calls_before:], ctx.step_tool_calls, ended)
                ctx.emit(
                    StepFinished(
                        iteration=ctx.iteration,
                        step=name,
                        duration_s=ended - started,
                        ok=error is None,
                        error=None if error is None else (str(error) or type(error).__name__),
                        usage=usage,
                    )
                )
                ctx.write = ctx.collect
        if isinstance(outcome, Command):
            return Command(update={**(outcome.update or {}), "usage": usage}, goto=outcome.goto)
        return {**outcome, "usage": usage}

    step.__name__ = step.__qualname__ = name
    step.__doc__ = node.__doc__
    return step


def _routed(node: _Step, route: Callable[[RunState], str]) -> _Node:
    """``node`` followed by ``route``, applied to the state as the node's update leaves it
    (routes read only plain fields, which an update replaces)."""

    async def routed(state: RunState, runtime: Runtime[RunContext]) -> Command[Any]:
        update = await node(state, runtime)
        return Command(update=update, goto=route({**state, **(update or {})}))  # type: ignore[typeddict-item]

    routed.__doc__ = node.__doc__
    return routed


async def _decide_and_gather(state: RunState, runtime: Runtime[RunContext]) -> Command[Any]:
    """The vote and, on INSERT, the tool calls: one step, one checkpoint."""
    update = await decide(state, runtime)
    if update["decision"] == "RETRIEVE":
        return Command(update=update, goto="retrieve")
    # decide writes none of the fields use_tools appends to, so the two updates merge by key.
    gathered = await use_tools({**state, **update}, runtime)  # type: ignore[typeddict-item]
    goto = "update_graph" if gathered.get("pending_results") else "decide"
    return Command(update={**update, **gathered}, goto=goto)
