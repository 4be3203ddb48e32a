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

# Supersteps one INSERT round can take: decide (with the tools), update_graph.
_STEPS_PER_ROUND = 2
# The forced end: decide, retrieve, math_check, math, solve.
_FINAL_STEPS = 5
# A run resumed at a checkpoint written when tools were a step of their own takes one more.
_LEGACY_STEPS = 1


def recursion_limit(limits: ControllerSettings) -> int:
    """The most supersteps a run can take under these limits (so none can loop forever)."""
    return _STEPS_PER_ROUND * limits.max_iterations + _FINAL_STEPS + _LEGACY_STEPS + 1


def run_config(run_id: str, limits: ControllerSettings) -> RunnableConfig:
    """LangGraph's config for one run: its checkpoint thread and the recursion limit."""
    return {"configurable": {"thread_id": run_id}, "recursion_limit": recursion_limit(limits)}


def build_controller_graph(
    checkpointer: BaseCheckpointSaver | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(RunState, context_schema=RunContext)
    builder.add_node(
        "decide", _decide_and_gather, destinations=("update_graph", "decide", "retrieve")
    )
    # Only for checkpoints written before the tools ran inside ``decide`` (kgot 0.1.0 as first
    # committed): such a run may be waiting for this step.
    builder.add_node(
        "use_tools", _routed(use_tools, _route_after_tools), destinations=("update_graph", "decide")
    )
    builder.add_node("update_graph", update_graph)
    builder.add_node(
        "retrieve",
        _routed(retrieve, route_after_retrieve),
        destinations=("math_check", "solve", "decide"),
    )
    builder.add_node(
        "math_check", _routed(math_check, route_after_math_check), destinations=("math", "solve")
    )
    builder.add_node("math", math)
    builder.add_node("solve", solve)

    builder.add_edge(START, "decide")
    builder.add_edge("update_graph", "decide")
    builder.add_edge("math", "solve")
    builder.add_edge("solve", END)
    return builder.compile(checkpointer=checkpointer, name="kgot")


class _Step(Protocol):
    def __call__(
        self, state: RunState, runtime: Runtime[RunContext]
    ) -> Awaitable[dict[str, Any]]: ...


class _RoutedStep(Protocol):
    def __call__(self, state: RunState, *, runtime: Runtime[RunContext]) -> Awaitable[Any]: ...


def _routed(node: _Step, route: Callable[[RunState], str]) -> _RoutedStep:
    """``node`` followed by ``route``, applied to the state as the node's update leaves it
    (routes read only plain fields, which an update replaces)."""

    async def routed(state: RunState, *, runtime: Runtime[RunContext]) -> Any:
        update = await node(state, runtime)
        return Command(update=update, goto=route({**state, **(update or {})}))  # type: ignore[typeddict-item]

    routed.__name__ = routed.__qualname__ = getattr(node, "__name__", "node")
    routed.__doc__ = node.__doc__
    return routed


async def _decide_and_gather(state: RunState, *, runtime: Runtime[RunContext]) -> Command[Any]:
    """The vote and, on INSERT, the tool calls: one step, one checkpoint."""
    update = await decide(state, runtime)
    if update["decision"] == "RETRIEVE":
        return Command(update=update, goto="retrieve")
    # decide writes none of the fields use_tools appends to, so the two updates merge by key
    # (the later usage totals include the earlier ones).
    gathered = await use_tools({**state, **update}, runtime)  # type: ignore[typeddict-item]
    return Command(update={**update, **gathered}, goto=_route_after_tools(gathered))  # type: ignore[typeddict-item]


def _route_after_tools(state: RunState | dict[str, Any]) -> str:
    return "update_graph" if state.get("pending_results") else "decide"
