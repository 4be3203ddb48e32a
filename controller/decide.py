"""The vote on the next step: INSERT (gather more) or RETRIEVE (answer from the graph)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kgot.controller.context import RunContext
from kgot.controller.schemas import Decision
from kgot.controller.state import RunState
from kgot.controller.views import graph_view
from kgot.prompts import render_prompt
from kgot.tracing import FailedVote, Vote, Votes


async def decide(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run N votes concurrently and tally them; a tie goes to INSERT.

    When the iteration limit is reached no vote is held: retrieval is forced.
    """
    ctx = runtime.context
    limits = ctx.settings.controller
    iteration = state.get("iteration", 0) + 1
    ctx.iteration = iteration
    if iteration > limits.max_iterations:
        ctx.emit(Votes(iteration=iteration, votes=[], decision="RETRIEVE", forced=True))
        return {"iteration": iteration, "decision": "RETRIEVE", "forced": True, "missing": []}

    notes = state.get("notes", [])
    messages = render_prompt(
        "decide",
        question=state["question"],
        graph_view=await graph_view(ctx, state["question"], focus=notes[-3:]),
        notes=("Earlier findings:\n" + "\n".join(f"- {n}" for n in notes)) if notes else "",
        iteration=iteration,
        max_iterations=limits.max_iterations,
    )
    # A failed vote comes back as its error; the endpoint failing for good, or every vote
    # unusable for one reason (never any JSON), raises: the run stops, resumable.
    results = await ctx.planning.structured_samples(
        messages, Decision, step="decide", count=limits.votes
    )
    votes: list[Vote | FailedVote] = []
    inserts: list[str] = []
    retrieves = 0
    for result in results:
        if isinstance(result, Decision):
            votes.append(Vote(decision=result.decision, reason=result.reason))
            if result.decision == "INSERT":
                inserts.append(result.reason.strip())
            else:
                retrieves += 1
        else:
            votes.append(FailedVote(failed=str(result)))  # no vote; visible in the trace
    decision = "RETRIEVE" if retrieves > len(inserts) else "INSERT"
    missing = _merge_reasons(inserts)
    if decision == "INSERT" and not missing:
        missing = ["No usable vote explained what is missing; gather facts the question needs."]
    ctx.emit(Votes(iteration=iteration, votes=votes, decision=decision, forced=False))
    return {
        "iteration": iteration,
        "decision": decision,
        "forced": False,
        "missing": missing if decision == "INSERT" else [],
    }


def _merge_reasons(reasons: list[str]) -> list[str]:
    """Distinct reasons in first-seen order (votes often repeat each other word for word)."""
    seen: set[str] = set()
    merged = []
    for reason in reasons:
        key = " ".join(reason.casefold().split())
        if key and key not in seen:
            seen.add(key)
            merged.append(reason)
    return merged
