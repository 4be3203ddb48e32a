"""Services a run uses, kept out of the checkpointed state (LangGraph's run context)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgot.llm import empty_step_figures
from kgot.tracing import ToolResult, TraceEvent, Usage, empty_usage

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from kgot.config import Settings
    from kgot.controller.trust import FactLens
    from kgot.graph_backends import GraphBackend
    from kgot.llm import LLMCall, LLMClient, UsageLedger
    from kgot.persistence import EntitySession
    from kgot.sandbox import Sandbox
    from kgot.tools import ToolRunner


@dataclass
class RunContext:
    """Everything the steps need besides the state. One per invocation (fresh on resume)."""

    settings: Settings
    run_id: str
    planning: LLMClient
    execution: LLMClient
    ledger: UsageLedger
    backend: GraphBackend
    sandbox: Sandbox
    tools: Sequence[BaseTool]
    runner: ToolRunner
    session: EntitySession | None = None
    # The run's one collector of events (kgot.controller.run), and where events go now:
    # inside a step LangGraph's stream writer (the node wrapper sets it), whose stream ends in
    # the collector; outside a step the collector itself.
    collect: Callable[[TraceEvent], None] = field(default=lambda event: None)
    write: Callable[[TraceEvent], None] = field(init=False)
    type_tool_names: frozenset[str] = frozenset()
    iteration: int = 0  # the round in progress (for events raised outside a step's code)
    # A resumed run waiting for update_graph may have committed some of that step's results
    # before it died (see kgot.controller.insert.update_graph).
    unsaved_commits_possible: bool = False
    step_tool_calls: int = 0  # tool calls run in the step in progress (counted from its events)
    step_ended: float = field(default_factory=time.perf_counter)  # the last step's end
    # An entity run's fact metadata for views (kgot.controller.trust), read on first use.
    fact_lens: FactLens | None = None

    def __post_init__(self) -> None:
        self.write = self.collect

    def emit(self, event: TraceEvent) -> None:
        if isinstance(event, ToolResult) and not event.skipped:
            self.step_tool_calls += 1
        self.write(event)

    def step_usage(self, calls: Sequence[LLMCall], tool_calls: int, ended: float) -> Usage:
        """A step's delta: the model requests recorded during it, the tool calls it ran and the
        wall time since the previous step ended (``ended`` becomes the new mark)."""
        usage = empty_usage()
        by_step: dict[str, dict[str, int]] = {}
        cost: float | None = 0.0
        for call in calls:
            usage["llm_calls"] += 1
            usage["failed_llm_calls"] += not call.ok
            usage["input_tokens"] += call.input_tokens
            usage["output_tokens"] += call.output_tokens
            cost = None if cost is None or call.cost_usd is None else cost + call.cost_usd
            figures = by_step.setdefault(call.step, empty_step_figures())
            figures["calls"] += 1
            figures["failed"] += not call.ok
            figures["input_tokens"] += call.input_tokens
            figures["output_tokens"] += call.output_tokens
        usage["cost_usd"] = cost
        usage["by_step"] = by_step
        usage["tool_calls"] = tool_calls
        usage["duration_s"] = ended - self.step_ended
        self.step_ended = ended
        return usage


def canonical_call(name: str, args: dict[str, Any]) -> str:
    """A stable text form of a tool call, used to spot exact duplicates."""
    return f"{name}:{json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)}"


def warm_pool_once_open(stack: Any, sandbox: Any) -> Callable[[], None]:
    """A callback that warms ``sandbox``'s shared pool unless ``stack`` (which closes the
    sandbox) has begun closing: a run's resident worker may finish taking the graph after the
    run ended, and warming a closed pool would start workers nobody stops."""
    import threading

    lock = threading.Lock()
    closing = [False]

    def closed() -> None:
        with lock:
            closing[0] = True

    def warm() -> None:
        with lock:
            if not closing[0]:
                sandbox.warm_up(wait=False)

    stack.callback(closed)
    return warm
