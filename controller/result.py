"""What a finished run returns: :class:`AskResult` (also the `kgot ask --json` document)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from kgot.tracing import TraceEvent, dump_trace

RunStatus = Literal["answered", "forced", "failed", "interrupted"]


@dataclass
class AskResult:
    """The outcome of one question.

    Attributes:
        answer: the final answer ("" when the run failed before producing one).
        run_id: checkpoint thread id; ``kgot ask --resume RUN_ID`` continues an interrupted run.
        status: ``answered`` (retrieval succeeded), ``forced`` (max iterations forced a
            solution), ``failed`` (see ``error``), ``interrupted`` (resumable).
        iterations: INSERT/RETRIEVE decision rounds taken.
        tool_calls: tool calls executed (cached duplicates not counted).
        llm_calls, input_tokens, output_tokens: totals over both roles (``llm_calls`` counts
            every request: retries and re-asks too; ``failed_llm_calls`` those that failed).
        cost_usd: total cost, ``None`` when any model's price is unknown.
        usage_by_step: per step (``decide``, ``update_graph``, …): requests, failed requests,
            input and output tokens.
        duration_s: wall time of the run, over every invocation (resumes included).
        graph: the final knowledge graph as node-link JSON (``networkx.node_link_data``); for
            an entity larger than ``controller.working_set_nodes``, the run's working set.
        error: one line explaining a failed run.
        resumable: the run stopped before its end and ``kgot ask --resume RUN_ID`` continues it.
        trace: this invocation's events, as models of :mod:`kgot.tracing.events`
            (``to_dict(include_trace=True)`` gives them as JSON-ready dicts).
    """

    answer: str
    run_id: str
    status: RunStatus
    iterations: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    failed_llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    usage_by_step: dict[str, dict[str, int]] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    resumable: bool = False
    trace: list[TraceEvent] = field(default_factory=list)

    def to_dict(self, *, include_trace: bool = False) -> dict[str, Any]:
        # Shallow on purpose: `asdict` would deep-copy the whole graph (slow at 2,000 nodes).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if include_trace:
            data["trace"] = dump_trace(self.trace)
        else:
            data.pop("trace")
        return data
