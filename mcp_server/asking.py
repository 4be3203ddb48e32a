"""The model-backed tools: ``ask`` (the KGoT loop on an entity, with progress and a cap) and
``remember`` (the ingestion primitive: a text becomes facts).

``ask`` runs :func:`kgot.controller.ask_async` on the entity with the server's store (with
the tools the entity's tool providers offer, as every run on an entity has them). Each
finished step of the loop becomes an MCP progress notification (its name, the round, model
calls and cost so far). Two caps bound a run: its model cost in USD (needs known prices:
``[llm.prices]``) and its number of model requests (works with any model). They are checked at
every step's end, so a run stops at the first step end at or past a cap: one step's requests
may overshoot it. A stopped run is recorded as interrupted; ``kgot ask --resume RUN_ID``
continues it.

``remember`` runs the controller's ingestion (:class:`kgot.controller.ingest.Ingestor`, what the
aide runtime and ``kgot ingest`` use) as a recorded run ``mcp:<label>/<uuid>`` (`kgot runs
show`), one piece of the text at a time (pieces of ``tools.max_output_chars``, as ``kgot
ingest`` cuts them). The fix-code retries
bound the requests per piece, and the same two caps as ``ask`` are checked between pieces: a
call whose cost or requests reached a cap stops before its next piece (``stopped_by``), keeping
what the pieces before committed.

A call the client cancels (``notifications/cancelled``; the TypeScript SDK sends one after 60 s
by default) cancels its run or ingestion once and waits for it to unwind: the sandbox job is
killed, the run recorded as interrupted and the sandbox closed, all on worker threads, so the
server goes on serving every other call meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from kgot.errors import UsageError
from kgot.mcp_server.calls import note_run
from kgot.mcp_server.tool_schemas import AskOut, Landing, RememberOut

if TYPE_CHECKING:
    from kgot.config import Settings
    from kgot.controller import IngestReport
    from kgot.persistence import Store

__all__ = ["AskLimits", "Progress", "ask", "remember"]

log = logging.getLogger(__name__)

Progress = Callable[[float, float | None, str], Awaitable[None]]

# How long a cancelled call waits for its work to unwind (the job killed, the run recorded,
# the sandbox closed): well under a second; past this the unwinding goes on unwatched.
_UNWIND_S = 10.0


@dataclass(frozen=True)
class AskLimits:
    """The server's caps on one ``ask`` run (a call may lower the cost cap, never raise it)."""

    max_cost_usd: float = 1.0
    max_llm_calls: int = 200
    max_question_chars: int = 4_000
    remember_max_chars: int = 50_000


class _Caps:
    """Totals of a running ask, from its ``step_finished`` events."""

    def __init__(self, max_cost_usd: float, max_llm_calls: int) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_llm_calls = max_llm_calls
        self.cost = 0.0
        self.cost_known = True
        self.calls = 0
        self.steps = 0
        self.stopped_by: str | None = None

    def add(self, usage: Any) -> None:
        self.steps += 1
        self.calls += int(usage.get("llm_calls") or 0)
        cost = usage.get("cost_usd")
        if cost is None:
            self.cost_known = False
        else:
            self.cost += float(cost)
        if self.cost_known and self.cost >= self.max_cost_usd:
            self.stopped_by = f"max_cost_usd {self.max_cost_usd:g} (spent ${self.cost:.4f})"
        elif self.calls >= self.max_llm_calls:
            self.stopped_by = f"max_llm_calls {self.max_llm_calls} ({self.calls} requests)"

    def line(self, step: str, iteration: int) -> str:
        cost = f"${self.cost:.4f}" if self.cost_known else "cost unknown"
        return f"{step} done (round {iteration}; {self.calls} model requests, {cost})"


async def ask(
    store: Store,
    settings: Settings,
    entity: str,
    question: str,
    *,
    limits: AskLimits,
    max_cost_usd: float | None,
    progress: Progress,
) -> AskOut:
    """Answer ``question`` with the KGoT loop on ``entity`` (module docstring).

    Raises:
        UsageError: an empty or too long question, a negative cap.
        KgotError: the run could not start (no model, no sandbox, …).
    """
    # The controller's first import (LangGraph, LangChain: ~1.2 s) on a thread, not on the
    # event loop every tenant shares; later calls find it imported.
    await asyncio.to_thread(importlib.import_module, "kgot.controller")
    from kgot.controller import ask_async
    from kgot.tracing import StepFinished

    question = question.strip()
    if not question:
        raise UsageError("the question is empty")
    if len(question) > limits.max_question_chars:
        raise UsageError(
            f"the question has {len(question)} characters; at most {limits.max_question_chars}"
        )
    if max_cost_usd is not None and max_cost_usd <= 0:
        raise UsageError(f"max_cost_usd must be above 0, not {max_cost_usd}")
    cap = min(max_cost_usd, limits.max_cost_usd) if max_cost_usd else limits.max_cost_usd
    caps = _Caps(cap, limits.max_llm_calls)
    notes: asyncio.Queue[str | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    run_id = f"mcp-{uuid.uuid4()}"
    running: asyncio.Task[Any] | None = None

    def on_event(event: Any) -> None:
        if not isinstance(event, StepFinished):
            return
        caps.add(event.usage)
        loop.call_soon_threadsafe(notes.put_nowait, caps.line(event.step, event.iteration))
        if caps.stopped_by is not None and running is not None:
            loop.call_soon_threadsafe(running.cancel)

    running = asyncio.ensure_future(
        ask_async(
            question,
            settings=settings,
            entity=entity,
            store=store,
            run_id=run_id,
            on_event=on_event,
        )
    )
    note_run(run_id, running)  # a server that stops this call names the run in its answer
    running.add_done_callback(lambda _task: notes.put_nowait(None))
    try:
        while (line := await notes.get()) is not None:
            await progress(float(caps.steps), None, line)
        result = await running
    except asyncio.CancelledError:
        if caps.stopped_by is None or not running.cancelled():
            raise  # the client cancelled the call: the run is interrupted (below), resumable
        return AskOut(
            entity=entity,
            run_id=run_id,
            status="stopped",
            answer="",
            error=f"stopped at the cap {caps.stopped_by}; continue with kgot ask --resume {run_id}",
            llm_calls=caps.calls,
            cost_usd=caps.cost if caps.cost_known else None,
            stopped_by=caps.stopped_by,
        )
    finally:
        await _unwound(running)
    return AskOut(
        entity=entity,
        run_id=result.run_id,
        status=result.status,
        answer=result.answer,
        error=result.error,
        iterations=result.iterations,
        llm_calls=result.llm_calls,
        cost_usd=result.cost_usd,
    )


async def remember(
    store: Store,
    settings: Settings,
    entity: str,
    text: str,
    *,
    label: str,
    source_ref: str | None,
    limits: AskLimits,
) -> RememberOut:
    """Ingest ``text`` into ``entity``'s graph (module docstring).

    Raises:
        UsageError: an empty or too long text.
        KgotError: no model, no sandbox, …
    """
    await asyncio.to_thread(importlib.import_module, "kgot.controller.ingest")  # as in ask
    from kgot.controller import Ingestor, IngestReport, split_text

    if not text.strip():
        raise UsageError("the text to remember is empty")
    if len(text) > limits.remember_max_chars:
        raise UsageError(
            f"the text has {len(text)} characters; remember takes at most "
            f"{limits.remember_max_chars} per call (split it)"
        )
    parts = split_text(text.strip(), settings.tools.max_output_chars)
    caps = _Caps(limits.max_cost_usd, limits.max_llm_calls)
    total = RememberOut(entity=entity, ok=True, parts=len(parts), cost_usd=0.0)

    async def ingest_parts() -> RememberOut:
        # A recorded run of its own (`kgot runs show`), named after the client's grant.
        run_id = f"mcp:{label}/{uuid.uuid4()}"
        combined = IngestReport(entity=entity, source_ref=source_ref, parts=len(parts))
        async with Ingestor(store, entity, settings, run_id=run_id) as ingestor:
            for number, part in enumerate(parts, 1):
                if caps.stopped_by is not None:  # checked between parts, like ask between steps
                    total.stopped_by = caps.stopped_by
                    combined.notes.append(
                        f"stopped at the cap {caps.stopped_by} after part {number - 1} of "
                        f"{len(parts)}; remember the rest in another call"
                    )
                    break
                report = await ingestor.ingest(
                    part,
                    source_ref=source_ref or f"mcp:{label}",
                    title=None if len(parts) == 1 else f"text, part {number} of {len(parts)}",
                )
                caps.add({"llm_calls": report.llm_calls, "cost_usd": report.cost_usd})
                combined.add_part(report, None if len(parts) == 1 else f"part {number}")
                total.parts_done = number
        return _told(total, combined)

    # A task of its own, like ask's run: a cancelled call cancels it once (see _unwound).
    ingesting = asyncio.ensure_future(ingest_parts())
    try:
        return await asyncio.shield(ingesting)
    finally:
        await _unwound(ingesting)


async def _unwound(work: asyncio.Future[Any]) -> None:
    """Cancel ``work`` (a run or an ingestion of the call's) once, if it still goes, and wait
    for it to end, shielded from the call's own cancellation.

    The SDK cancels a call through an anyio cancel scope, which cancels whatever the handler
    awaits again and again until the handler returns: awaited there unshielded, the work's
    unwinding (killing its sandbox job, recording the run, closing the sandbox) was cancelled
    at each of its steps. That unwinding runs on worker threads and never holds the event
    loop, so waiting for it keeps nobody else waiting.
    """
    if work.done():
        return
    work.cancel()
    with anyio.move_on_after(_UNWIND_S, shield=True):
        await asyncio.wait([work])
    if work.done() and not work.cancelled() and work.exception() is not None:
        log.warning("a cancelled call's work failed as it stopped: %s", work.exception())


def _told(total: RememberOut, combined: IngestReport) -> RememberOut:
    """``total`` with what the parts did (``combined``, added up by the ingestion's own
    report), facts named as clients see them (:func:`kgot.persistence.fact_id`)."""
    named = combined.to_json()
    return total.model_copy(
        update={
            "ok": combined.ok,
            "version": combined.version,
            "inserted_nodes": named["inserted_nodes"],
            "inserted_edges": named["inserted_edges"],
            "updated_nodes": named["updated_nodes"],
            "updated_edges": named["updated_edges"],
            "merged": [Landing(id=merged.given, into=merged.into) for merged in combined.merged],
            "restated": named["restated"],
            "superseded": named["superseded"],
            "notes": combined.notes,
            "corroborated": combined.corroborated,
            "reinforced": combined.reinforced,
            "queued": combined.queued,
            "llm_calls": combined.llm_calls,
            "cost_usd": combined.cost_usd,
            "failed": combined.failed,
        }
    )
