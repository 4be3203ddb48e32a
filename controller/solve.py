"""The answer: k solution samples in parallel, then a majority pick."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from kgot.controller.context import RunContext
from kgot.controller.schemas import Solution
from kgot.controller.state import RunState
from kgot.controller.views import fact_lens, graph_view
from kgot.prompts import prompt_text, render_prompt
from kgot.tracing import FailedSample, Sample, Solutions, excerpt


async def solve(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Sample the final answer k times concurrently and keep the most frequent one.

    With retrieved facts the answer is parsed from them (and any maths output); without (a
    forced end after retrieval found nothing) it is the best answer the graph supports.
    """
    ctx = runtime.context
    iteration = state.get("iteration", 0)
    answer_format = prompt_text("gaia_format") if ctx.settings.controller.gaia_format else ""
    forced = bool(state.get("forced"))
    if state.get("retrieved"):
        math_output = state.get("math_output")
        messages = render_prompt(
            "solve",
            question=state["question"],
            retrieved=state["retrieved"],
            math_output=f"\nCalculation output:\n{math_output}" if math_output else "",
            answer_format=answer_format,
        )
    else:
        messages = render_prompt(
            "forced_solution",
            question=state["question"],
            graph_view=await graph_view(ctx, state["question"], focus=state.get("notes", [])[-3:]),
            retrieved="",
            answer_format=answer_format,
        )
    samples = await ctx.planning.structured_samples(
        messages, Solution, step="solve", count=ctx.settings.controller.solution_samples
    )
    answers: list[str] = []
    shown: list[Sample | FailedSample] = []
    failures: list[str] = []
    limit = ctx.settings.controller.max_answer_chars
    for sample in samples:
        if isinstance(sample, Solution) and len(sample.answer) > limit:
            # Model output, like a sample that is not JSON: it fails, the run goes on.
            failures.append(oversized_answer(len(sample.answer), limit))
            shown.append(FailedSample(failed=failures[-1], answer=excerpt(sample.answer, 200)))
        elif isinstance(sample, Solution):
            answers.append(sample.answer.strip())
            shown.append(Sample(answer=sample.answer, reasoning=excerpt(sample.reasoning, limit)))
        else:
            failures.append(str(sample))
            shown.append(FailedSample(failed=failures[-1]))
    answer = pick_majority(answers)
    ctx.emit(Solutions(iteration=iteration, samples=shown, answer=answer))
    if answer is not None and state.get("retrieved"):
        await _reinforce(ctx, state.get("retrieved_nodes") or [])
    if answer is None:
        error = "every solution sample failed to produce a valid answer"
        if failures and all(failure == failures[0] for failure in failures):
            error += f": {failures[0]}"
        return {"answer": None, "status": "failed", "error": error}
    return {"answer": answer, "status": "forced" if forced else "answered", "error": None}


async def _reinforce(ctx: RunContext, node_ids: list[str]) -> None:
    """Count a use of the facts the answer was drawn from (entity runs): the nodes the
    retrieved result named and the edges between them gain strength (+0.10, once per run: this
    step ends it), which keeps them fresh in later views and upkeep."""
    lens = fact_lens(ctx)
    if lens is None or not node_ids:
        return
    keys = lens.used_facts(node_ids)
    if keys:
        assert ctx.session is not None
        await asyncio.to_thread(ctx.session.record_use, keys)


def oversized_answer(length: int, limit: int) -> str:
    return (
        f"the answer is {length:,} characters long, over the limit of {limit:,} "
        "(controller.max_answer_chars; raise it for questions that need long answers)"
    )


def pick_majority(answers: list[str]) -> str | None:
    """The most frequent answer, comparing case-, space- and punctuation-insensitively (a minus
    sign before a number still counts); ties go to the answer seen first. The winner is shown
    in the spelling most of its samples used (the first of those on a tie)."""
    if not answers:
        return None
    keys = [_normalise(answer) for answer in answers]
    counts = Counter(keys)
    best = max(counts.values())
    winner = next(key for key in keys if counts[key] == best)
    spellings = Counter(answer for answer, key in zip(answers, keys, strict=True) if key == winner)
    return spellings.most_common(1)[0][0]  # Counter keeps first-seen order among equals


# A minus sign opening a number ("-5", "−3.5"): not punctuation, the number's sign.
_NEGATIVE_NUMBER = re.compile(r"(?<!\w)[-−](?=\d)")


def _normalise(answer: str) -> str:
    signed = _NEGATIVE_NUMBER.sub(" minus ", answer.casefold())
    return re.sub(r"[\s\W_]+", " ", signed).strip()
