"""The INSERT branch: choose tool calls, run them, and turn each result into graph changes."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.runtime import Runtime

from kgot.controller.aliases import canonical_code
from kgot.controller.codeblocks import extract_code
from kgot.controller.context import RunContext, canonical_call
from kgot.controller.state import PendingResult, RunState, ToolCallRecord
from kgot.controller.trust import producer_trust, trust_note
from kgot.controller.views import graph_view
from kgot.errors import ChangesetError, CodeExecutionError
from kgot.memory import WriteOutcome
from kgot.persistence import CommitConflictError, StoreBusyError
from kgot.prompts import render_prompt
from kgot.retrying import RetryPolicy
from kgot.tracing import (
    ChosenToolCall,
    Code,
    CodeFailed,
    GraphRefreshed,
    GraphUpdated,
    StepFailed,
    ToolCalls,
    ToolResult,
    excerpt,
)

if TYPE_CHECKING:
    from kgot.persistence import Provenance

HISTORY_EXCERPT = 200
# Commits lost to other writers (another MCP server or aide on the same entity) are redone after
# a jittered, growing wait: without one, a writer whose commits take longer than a busy
# neighbour's interval loses every instant retry, and the run pays a fix-code model request
# for what was not the model's mistake.
_CONFLICT_RETRIES = 6
_CONFLICT_WAITS = RetryPolicy(max_retries=_CONFLICT_RETRIES, backoff_base=0.05, backoff_max=1.0)


async def use_tools(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask the execution model which tools to call for what is missing, then run the calls.

    It runs as part of the ``decide`` step after an INSERT vote (see :mod:`kgot.controller.graph`
    for why), so the round's results are saved with that step's checkpoint. The tool calls it
    runs are counted from its ``tool_result`` events (see :meth:`RunContext.emit`).
    """
    ctx = runtime.context
    calls, rejected, notes = await _define_tool_calls(ctx, state)
    history, pending = await _run_tools(ctx, state, calls) if calls else ([], [])
    if calls and not history:
        notes.append(
            f"Round {state['iteration']}: every proposed call repeated one already done; ask for "
            "something not yet in the graph."
        )
    return {
        "tool_history": [*rejected, *history],
        "pending_results": pending,
        "notes": notes,
    }


async def _define_tool_calls(
    ctx: RunContext, state: RunState
) -> tuple[list[dict[str, Any]], list[ToolCallRecord], list[str]]:
    """The calls the execution model chose (at most ``max_tool_calls``), the calls it botched
    (arguments that are not JSON: recorded as failures the model sees next round), and notes
    for later votes."""
    iteration = state["iteration"]
    limit = ctx.settings.controller.max_tool_calls
    messages = render_prompt(
        "tool_calls",
        question=state["question"],
        # The view the votes just saw (same graph, same focus: served from the view cache);
        # what is missing is spelled out in the prompt itself.
        graph_view=await graph_view(ctx, state["question"], focus=state.get("notes", [])[-3:]),
        missing="\n".join(f"- {reason}" for reason in state.get("missing", [])),
        history=_format_history(state.get("tool_history", [])),
        attachments=_format_attachments(state.get("attachments", [])),
        max_calls=limit,
    )
    message = await ctx.execution.tool_calls(messages, ctx.tools, step="define_tool_calls")
    proposed = [
        {"name": call["name"], "args": dict(call.get("args") or {})} for call in message.tool_calls
    ]
    rejected = [
        ToolCallRecord(
            name=str(bad.get("name") or "?"),
            args={"unparsed": excerpt(str(bad.get("args") or ""), HISTORY_EXCERPT)},
            ok=False,
            iteration=iteration,
            source_ref=None,
            summary="Error: the arguments were not valid JSON "
            f"({bad.get('error') or 'unparsable'}); send them as a JSON object",
        )
        for bad in message.invalid_tool_calls
    ]
    calls = proposed[:limit]
    ctx.emit(
        ToolCalls(
            iteration=iteration,
            calls=[ChosenToolCall(name=call["name"], args=call["args"]) for call in calls],
            rejected=[f"{r['name']}: {r['summary']}" for r in rejected],
            dropped=len(proposed) - len(calls),
        )
    )
    notes = []
    if len(proposed) > limit:
        notes.append(
            f"Round {iteration}: {len(proposed)} tool calls were proposed; only the first "
            f"{limit} ran (tool calls per round are limited to {limit})."
        )
    if not proposed and not rejected:
        notes.append(f"Round {iteration}: no tool call was proposed.")
    return calls, rejected, notes


async def _run_tools(
    ctx: RunContext, state: RunState, calls: list[dict[str, Any]]
) -> tuple[list[ToolCallRecord], list[PendingResult]]:
    """Run the calls concurrently; skip exact repeats of earlier *successful* calls."""
    iteration = state["iteration"]
    done = {canonical_call(r["name"], r["args"]) for r in state.get("tool_history", []) if r["ok"]}
    to_run: dict[str, dict[str, Any]] = {}
    for call in calls:
        key = canonical_call(call["name"], call["args"])
        if key in done:
            ctx.emit(
                ToolResult(
                    iteration=iteration,
                    name=call["name"],
                    args=call["args"],
                    ok=True,
                    cached=True,
                    skipped=True,
                    output="(already done earlier in this run)",
                )
            )
        else:
            to_run.setdefault(key, call)
    outcomes = await asyncio.gather(
        *(ctx.runner.run(call["name"], call["args"]) for call in to_run.values())
    )
    history: list[ToolCallRecord] = []
    pending: list[PendingResult] = []
    for outcome in outcomes:
        ctx.emit(
            ToolResult(
                iteration=iteration,
                name=outcome.name,
                args=outcome.args,
                ok=outcome.ok,
                cached=outcome.cached,
                skipped=False,
                output=excerpt(outcome.output),
            )
        )
        history.append(
            ToolCallRecord(
                name=outcome.name,
                args=outcome.args,
                ok=outcome.ok,
                iteration=iteration,
                source_ref=outcome.source_ref,
                summary=excerpt(outcome.output, HISTORY_EXCERPT),
            )
        )
        if outcome.ok and outcome.name not in ctx.type_tool_names:
            pending.append(
                PendingResult(
                    name=outcome.name,
                    args=outcome.args,
                    output=outcome.output,
                    source_ref=outcome.source_ref,
                )
            )
    return history, pending


async def update_graph(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Turn each new tool result into a changeset, one after the other (each sees the last).

    An entity run commits each result's changeset as it goes, while the step's checkpoint
    comes at its end: a run that died in between is resumed at this step, with some of its
    results already in the store. Each commit carries the result's key, so the resumed step
    finds those commits and skips their results instead of applying them a second time.
    """
    ctx = runtime.context
    iteration = state["iteration"]
    applied: list[dict[str, Any]] = []
    notes: list[str] = []
    for position, result in enumerate(state.get("pending_results", [])):
        key = result_key(ctx.run_id, iteration, position)
        if ctx.unsaved_commits_possible and await _committed_before(ctx, state, result, key):
            continue
        outcome = await integrate(ctx, state, result, key)
        if not outcome.applied.is_empty:
            applied.append(outcome.applied.to_dict())
        # What the write-time upkeep did, or why the result is missing, for the next prompts.
        notes += [f"Round {iteration}: {note}" for note in outcome.notes]
        if outcome.failed is not None:
            call_text = canonical_call(result["name"], result["args"])
            notes.append(
                f"Round {iteration}: the result of {call_text} could not be added to the graph "
                f"({excerpt(outcome.failed, 200)})."
            )
    ctx.unsaved_commits_possible = False  # this step's checkpoint records the rest
    return {
        "changesets": applied,
        "notes": notes,
        "pending_results": [],
    }


def result_key(run_id: str, iteration: int, position: int) -> str:
    """What names one tool result's commit: the run, the round and the result's place in it."""
    return f"{run_id}/round {iteration}/result {position}"


async def _committed_before(
    ctx: RunContext, state: RunState, result: PendingResult, key: str
) -> bool:
    """Whether the result's changeset was committed by an earlier invocation of this run
    (which died before the step's checkpoint); the graph loaded from the store has it."""
    if ctx.session is None:
        return False  # an ephemeral graph was rebuilt from the checkpoint, without it
    earlier = await asyncio.to_thread(ctx.session.committed, key)
    if earlier is None:
        return False
    ctx.emit(
        GraphUpdated(
            iteration=state["iteration"],
            summary=f"{earlier['summary']} (committed as version {earlier['version']} before "
            f"the run was interrupted; {result['name']} not applied again)",
            reused_version=earlier["version"],
            **_counts(ctx),
        )
    )
    return True


async def integrate(
    ctx: RunContext, state: RunState, result: PendingResult, key: str
) -> WriteOutcome:
    """Write graph code for one tool result and apply it: the one write pipeline of runs and
    ingestion (:class:`kgot.controller.ingest.Ingestor`).

    The planning model writes code for the result; the code runs in the sandbox; an entity's
    memory rewrites the changeset and the store commits it under ``key`` with the producing
    tool's provenance (:func:`kgot.memory.commit_prepared`); the change is applied to the
    in-memory graph. Failing code goes back to the model for a fix, up to
    ``controller.fix_code_retries`` times.

    Returns what the write did (:class:`kgot.memory.WriteOutcome`; ``failed`` says why when
    every attempt failed, and nothing was written then).
    """
    iteration = state["iteration"]
    language = ctx.backend.language
    call_text = canonical_call(result["name"], result["args"])
    if ctx.session is not None:  # write against the entity's latest facts
        await catch_up(ctx, iteration, reason="other writers committed to this entity")
    messages: list[BaseMessage] = render_prompt(
        "write_code",
        question=state["question"],
        language=language.display_name,
        fence=language.fence,
        write_contract=language.write_contract,
        write_example=language.write_example,
        type_catalog=_type_catalog(ctx),
        graph_view=await graph_view(ctx, state["question"], focus=[result["output"]]),
        tool_call=call_text,
        tool_result=result["output"],
        trust_note=(
            trust_note(ctx.settings, language.name, result["name"])
            if ctx.session is not None
            else ""
        ),
    )
    attempts = ctx.settings.controller.fix_code_retries + 1
    last_error = ""
    for attempt in range(1, attempts + 1):
        step = "update_graph" if attempt == 1 else "fix_code"
        reply = await ctx.planning.text(messages, step=step)
        code = extract_code(reply, language.fence)
        ctx.emit(Code(iteration=iteration, purpose="update_graph", attempt=attempt, code=code))
        try:
            outcome = await _apply_code(ctx, code, result, iteration, key)
        except (CodeExecutionError, ChangesetError) as error:
            last_error = str(error)
            ctx.emit(
                CodeFailed(
                    iteration=iteration, purpose="update_graph", attempt=attempt, error=last_error
                )
            )
            messages = [
                *messages,
                AIMessage(reply),
                *render_prompt("fix_code", error=last_error, fence=language.fence),
            ]
            continue
        summary = outcome.applied.summary() if not outcome.applied.is_empty else "no changes"
        if outcome.notes:  # what the write-time upkeep did, for the trace
            summary += "; " + "; ".join(outcome.notes)
        ctx.emit(GraphUpdated(iteration=iteration, summary=summary, **_counts(ctx)))
        return outcome
    # "at the graph code": an aide's item line also counts its ingestion attempts.
    failed = (
        f"gave up after {attempts} {'attempt' if attempts == 1 else 'attempts'} at the "
        f"graph code: {excerpt(last_error, 300)}"
    )
    ctx.emit(StepFailed(iteration=iteration, step="update_graph", error=failed))
    return WriteOutcome(failed=failed)


async def _apply_code(
    ctx: RunContext, code: str, result: PendingResult, iteration: int, key: str
) -> WriteOutcome:
    """Run write code on a copy, check the changeset, commit it (entity runs) and apply it.

    In an entity run the entity's memory rewrites the changeset first
    (:func:`kgot.memory.prepare_changeset`): a node that is an existing one lands on it, ids
    merged away are followed, functional facts supersede. Its notes come back for the model.
    The commit's default trust is the producing tool's (:func:`_provenance`); the hook weighs
    a contradicting value with it.

    When another writer changed the same facts in the meantime, the graph catches up with the
    store and the same code runs again on the fresh graph — a conflict is not the model's
    mistake, so it costs no fix-code attempt (up to ``_CONFLICT_RETRIES`` times, after a
    jittered wait that grows, as for a busy store).

    Raises:
        CodeExecutionError, ChangesetError: for fix-code; nothing was applied.
    """
    from kgot.memory import commit_prepared, embedder_for_writes, prepare_changeset

    for conflicts in range(_CONFLICT_RETRIES + 1):
        changeset = await ctx.backend.apropose(await canonical_code(ctx, code))
        if ctx.session is None:
            if not changeset.is_empty:
                ctx.backend.apply(changeset)
            return WriteOutcome.unrecorded(changeset)
        if changeset.is_empty:
            return WriteOutcome()
        provenance = _provenance(ctx, result, key)
        prepared = await asyncio.to_thread(
            functools.partial(
                prepare_changeset, ctx.session, changeset, confidence=provenance.confidence
            )
        )
        problems = await asyncio.to_thread(ctx.session.check, prepared.changeset)
        if problems:
            raise ChangesetError(problems)
        try:
            outcome = await asyncio.to_thread(
                functools.partial(
                    commit_prepared,
                    ctx.session,
                    prepared,
                    provenance,
                    # Embedded after the commit, never failing it ([memory] embeddings).
                    embedder=embedder_for_writes(ctx.settings.memory),
                )
            )
        except (CommitConflictError, StoreBusyError) as conflict:
            if conflicts == _CONFLICT_RETRIES:
                raise
            await asyncio.sleep(_CONFLICT_WAITS.delay(conflicts + 1))
            await catch_up(ctx, iteration, reason=str(conflict))
            continue
        if outcome.already_committed or outcome.version is None:
            # Another worker committed this result first (nothing of ours was written), or the
            # memory left nothing to commit (e.g. only a refused, less trusted value).
            return outcome
        if ctx.fact_lens is not None:  # before the apply: the view lines it rebuilds use it
            ctx.fact_lens.committed(prepared.changeset, provenance)
        if not outcome.applied.is_empty:
            ctx.backend.apply(outcome.applied)
        return outcome
    raise AssertionError("unreachable: the loop returns or raises")


async def catch_up(ctx: RunContext, iteration: int, *, reason: str) -> None:
    """Apply other writers' commits to the in-memory graph (entity runs)."""
    assert ctx.session is not None
    delta = await asyncio.to_thread(ctx.session.refresh)
    if not delta.is_empty:
        ctx.backend.apply(delta)
        ctx.emit(
            GraphRefreshed(
                iteration=iteration, summary=delta.summary(), reason=reason, **_counts(ctx)
            )
        )


def _type_catalog(ctx: RunContext) -> str:
    if ctx.session is None:
        return ""
    budget = max(500, ctx.settings.controller.graph_token_budget // 4)
    text = ctx.session.type_catalog().render_for_prompt(budget)
    return (
        "\nThis graph is typed: use these node labels and edge relationships, not the example's "
        "(every write is validated against its type; propose a new type with the "
        f"create_node_type / create_edge_type tools only when none fits):\n{text}\n"
    )


def _provenance(ctx: RunContext, result: PendingResult, key: str) -> Provenance:
    """Where a result's facts come from, with the trust configured for the tool that produced
    it (``[memory.trust]``): facts that set no ``_confidence`` / ``_source_kind`` get these."""
    from kgot.persistence import Provenance

    trust = producer_trust(ctx.settings, result["name"])
    return Provenance(
        run_id=ctx.run_id,
        step="update_graph",
        tool_call=canonical_call(result["name"], result["args"]),
        source_ref=result["source_ref"],
        source_kind=trust.source_kind,
        confidence=trust.confidence,
        result_key=key,
    )


def _counts(ctx: RunContext) -> dict[str, int]:
    stats = ctx.backend.stats()
    return {"nodes": stats.nodes, "edges": stats.edges}


def _format_history(history: list[ToolCallRecord]) -> str:
    if not history:
        return "(none yet)"
    lines = []
    for record in history:
        status = "done" if record["ok"] else "FAILED"
        args = excerpt(json.dumps(record["args"], ensure_ascii=False, sort_keys=True), 300)
        line = f"- [{status}] {record['name']}({args})"
        if not record["ok"]:
            line += f": {record.get('summary', '')}"
        lines.append(line)
    return "\n".join(lines)


def _format_attachments(attachments: list[str]) -> str:
    if not attachments:
        return ""
    listed = "\n".join(f"- {path}" for path in attachments)
    return f"\nFiles attached to the question (pass these paths to the tools):\n{listed}"
