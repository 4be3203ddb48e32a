"""The LangGraph state of one run: everything a checkpoint must hold to resume it.

Services (models, sandbox, backend, tools, store) are *not* state; they live in
:class:`kgot.controller.context.RunContext` and are rebuilt on resume. The graph itself is
rebuilt from ``changesets`` (ephemeral runs) or from the entity's store (persistent runs).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

from kgot.tracing import Usage, add_usage

Step = Literal["INSERT", "RETRIEVE"]


class ToolCallRecord(TypedDict):
    name: str
    args: dict[str, Any]
    ok: bool
    iteration: int
    source_ref: str | None
    summary: str  # an excerpt of the output; for failures, the error the model should see


class PendingResult(TypedDict):
    name: str
    args: dict[str, Any]
    output: str
    source_ref: str | None


class RunState(TypedDict, total=False):
    # Set once at the start.
    options: dict[str, Any]  # the run's settings without secrets (reapplied on resume)
    question: str
    attachments: list[str]
    entity: str | None
    backend: str
    graph_file: str | None  # an ephemeral run's starting graph
    # Loop bookkeeping.
    iteration: int
    decision: Step
    forced: bool
    missing: list[str]  # merged INSERT reasons of the latest vote round
    notes: Annotated[list[str], operator.add]  # findings shown to later votes
    tool_history: Annotated[list[ToolCallRecord], operator.add]
    pending_results: list[PendingResult]
    changesets: Annotated[list[dict[str, Any]], operator.add]  # applied, in order
    # Retrieval and answer.
    retrieved: str | None
    retrieved_nodes: list[str]  # entity runs: the nodes the retrieved result named by id
    math_needed: bool
    math_output: str | None
    answer: str | None
    status: str
    error: str | None
    usage: Annotated[Usage, add_usage]  # the run's totals: the sum of every step's delta
