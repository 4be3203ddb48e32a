"""Services a run uses, kept out of the checkpointed state (LangGraph's run context)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgot.controller.events import Event, EventSink
from kgot.controller.state import Usage
from kgot.llm.usage import empty_step_figures

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from kgot.config import Settings
    from kgot.graph_backends.base import GraphBackend
    from kgot.llm import LLMClient, UsageLedger
    from kgot.persistence import EntitySession
    from kgot.sandbox.base import Sandbox
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
    sink: EventSink | None = None
    usage_base: Usage | None = None  # totals carried over from before a resume
    trace: list[Event] = field(default_factory=list)
    type_tool_names: frozenset[str] = frozenset()
    last_usage: Usage | None = None  # the latest totals any step reported
    iteration: int = 0  # the round in progress (for events raised outside a step's code)
    # A resumed run waiting for update_graph may have committed some of that step's results
    # before it died (see kgot.controller.insert.update_graph).
    unsaved_commits_possible: bool = False
    started: float = field(default_factory=time.perf_counter)  # this invocation's start

    def emit(self, event_type: str, iteration: int, **fields: Any) -> None:
        event: Event = {"type": event_type, "iteration": iteration, **fields}
        self.trace.append(event)
        if self.sink is None:
            return
        try:
            self.sink(event)
        except Exception:  # a broken display must not end the run
            log.exception("the trace sink failed on a %s event; the trace stops here", event_type)
            self.sink = None

    def usage(self, state_usage: Usage | None, tool_calls_delta: int = 0) -> Usage:
        """Run totals so far: LLM use carried over from before a resume plus this invocation's
        ledger, and the tool calls counted in the state plus ``tool_calls_delta``."""
        carried = self.usage_base or empty_usage()
        totals = self.ledger.totals()
        cost = None
        if carried["cost_usd"] is not None and totals.cost_usd is not None:
            cost = carried["cost_usd"] + totals.cost_usd
        self.last_usage = Usage(
            llm_calls=carried["llm_calls"] + totals.calls,
            failed_llm_calls=carried.get("failed_llm_calls", 0) + totals.failed_calls,
            input_tokens=carried["input_tokens"] + totals.input_tokens,
            output_tokens=carried["output_tokens"] + totals.output_tokens,
            cost_usd=cost,
            tool_calls=(state_usage or carried)["tool_calls"] + tool_calls_delta,
            # Checkpoints written before durations were tracked have none: count from zero.
            duration_s=carried.get("duration_s", 0.0) + time.perf_counter() - self.started,
            by_step=_merge_steps(carried.get("by_step", {}), self.ledger.by_step()),
        )
        return self.last_usage

    def report_failed_requests(self, call: Any) -> None:
        """Ledger listener: a failed or re-asked model request becomes a visible trace event."""
        if not call.ok:
            self.emit(
                "llm_retry",
                self.iteration,
                role=call.role,
                step=call.step,
                attempt=call.attempt,
                error=call.error or "failed",
            )


def _merge_steps(
    carried: dict[str, dict[str, int]], current: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """Requests and tokens per step: those carried over plus this invocation's ledger."""
    merged = {step: dict(figures) for step, figures in carried.items()}
    for step, figures in current.items():
        into = merged.setdefault(step, empty_step_figures())
        for name, value in figures.items():
            into[name] = into.get(name, 0) + value
    return merged


def empty_usage() -> Usage:
    return Usage(
        llm_calls=0,
        failed_llm_calls=0,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        tool_calls=0,
        duration_s=0.0,
        by_step={},
    )


def canonical_call(name: str, args: dict[str, Any]) -> str:
    """A stable text form of a tool call, used to spot exact duplicates."""
    return f"{name}:{json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)}"
