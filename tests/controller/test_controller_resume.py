"""Checkpoints: an interrupted run continues where it stopped; finished runs are reported."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult, ask_async, resume_async
from kgot.errors import UsageError
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.controller.scripts import (
    ADD_PARIS,
    QUERY_PARIS,
    inspect_call,
    paris_in_one_round,
    solution,
    votes,
)

NO_MATH = {"needs_math": False, "reason": "stated"}


def _interrupt(_: Any) -> Any:
    raise KeyboardInterrupt  # what Ctrl-C raises in the middle of a model call


def _ask_until_interrupted(
    run_id: str, settings: Settings, facts_file: Path, model: ScriptedChatModel
) -> None:
    """Ask for Paris's population with ``facts_file`` attached; ``model`` stops the run with
    Ctrl-C somewhere."""
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            ask_async(
                "What is the population of Paris?",
                settings=settings,
                attachments=[facts_file],
                run_id=run_id,
                models={"planning": model, "execution": model},
            )
        )


def _resume_answering_paris(
    run_id: str, settings: Settings, **earlier_steps: list[Any]
) -> tuple[AskResult, ScriptedChatModel]:
    """Resume ``run_id`` with a model that retrieves Paris's population (2102650), after
    ``earlier_steps`` (step -> script) if the resumed part starts before retrieval."""
    model = ScriptedChatModel(
        script={
            **earlier_steps,
            "query": [QUERY_PARIS],
            "math_check": [NO_MATH],
            "solve": [solution("2102650")],
        }
    )
    models = {"planning": model, "execution": model}
    return asyncio.run(resume_async(run_id, settings=settings, models=models)), model


@pytest.mark.slow
def test_interrupted_run_resumes_from_its_last_checkpoint(
    settings: Settings, facts_file: Path
) -> None:
    first = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [ADD_PARIS],
            "query": [_interrupt],
        }
    )
    _ask_until_interrupted("run-to-resume", settings, facts_file, first)
    with open_store(settings.store.db) as store:
        record = store.get_run("run-to-resume")
    assert record is not None and record.status == "interrupted"

    result, second = _resume_answering_paris("run-to-resume", settings)

    assert result.status == "answered"
    assert result.answer == "2102650"
    # Nothing before the interrupted step ran again: no votes, no tool calls, no graph code.
    assert {call.step for call in second.calls} == {"query", "math_check", "solve"}
    # The ephemeral graph was rebuilt from the checkpoint, so the query found Paris: in the
    # prompt's view and in the resumed run's own sandbox worker, which ran the query.
    assert "paris" in second.calls_for("query")[0].prompt
    queried = [e for e in result.trace if e.type == "query_result"]
    assert [json.loads(e.result) for e in queried] == [{"population": 2102650}]
    assert {node["id"] for node in result.graph["nodes"]} == {"paris", "france"}
    # Totals cover the whole run, not only the resumed part (the interrupted call never
    # finished, so it has no usage to count).
    assert result.llm_calls == (len(first.calls) - 1) + len(second.calls)
    assert result.tool_calls == 1
    assert result.iterations == 2
    with open_store(settings.store.db) as store:
        record = store.get_run("run-to-resume")
    assert record is not None and record.status == "answered"
    assert record.answer == "2102650"


@pytest.mark.slow
def test_resuming_a_finished_run_reports_it_without_model_calls(
    settings: Settings, facts_file: Path
) -> None:
    model = ScriptedChatModel(script=paris_in_one_round(facts_file))
    done = asyncio.run(
        ask_async(
            "What is the population of Paris?",
            settings=settings,
            attachments=[facts_file],
            models={"planning": model, "execution": model},
        )
    )
    idle = ScriptedChatModel(script={})
    again = asyncio.run(
        resume_async(done.run_id, settings=settings, models={"planning": idle, "execution": idle})
    )
    assert again.answer == done.answer == "2102650"
    assert again.status == "answered"
    assert idle.calls == []
    assert {node["id"] for node in again.graph["nodes"]} == {"paris", "france"}


def test_resuming_an_unknown_run_is_a_clear_error(settings: Settings) -> None:
    idle = ScriptedChatModel(script={})
    with pytest.raises(UsageError, match="no run 'nope' to resume"):
        asyncio.run(
            resume_async("nope", settings=settings, models={"planning": idle, "execution": idle})
        )


def test_a_bug_inside_the_loop_never_leaves_the_run_recorded_as_running(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.controller import graph

    async def broken_decide(state: Any, runtime: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(graph, "decide", broken_decide)
    idle = ScriptedChatModel(script={})
    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(
            ask_async(
                "q?",
                settings=settings,
                run_id="buggy",
                models={"planning": idle, "execution": idle},
            )
        )
    with open_store(settings.store.db) as store:
        record = store.get_run("buggy")
    assert record is not None and record.status == "failed"
    assert record.totals["error"] == "internal error: RuntimeError"


@pytest.mark.slow
def test_a_run_id_cannot_be_reused(settings: Settings, facts_file: Path) -> None:
    model = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": ["```python\nresult = 'A1'\n```"],
            "math_check": [NO_MATH],
            "solve": [solution("A1")],
        }
    )
    models = {"planning": model, "execution": model}
    asyncio.run(ask_async("Question one?", settings=settings, run_id="same", models=models))
    with pytest.raises(UsageError, match=r"run 'same' already exists.*--resume same"):
        asyncio.run(ask_async("Question two?", settings=settings, run_id="same", models=models))
    with open_store(settings.store.db) as store:
        record = store.get_run("same")
    assert record is not None and record.question == "Question one?"


@pytest.mark.slow
def test_resume_continues_with_the_runs_own_options(settings: Settings, facts_file: Path) -> None:
    from kgot.config import load_settings

    started = settings.model_copy(
        update={
            "controller": settings.controller.model_copy(
                update={"gaia_format": True, "solution_samples": 2}
            )
        }
    )
    first = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": ["```python\nresult = []\n```", _interrupt],  # empty, then Ctrl-C
        }
    )
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            ask_async(
                "What is the population of Paris?",
                settings=started,
                run_id="options-run",
                models={"planning": first, "execution": first},
            )
        )
    second = ScriptedChatModel(
        script={
            "query": ["```python\nresult = 2102650\n```"],
            "math_check": [NO_MATH],
            "solve": [solution("2102650")],
        }
    )
    # The environment no longer asks for GAIA answers; the run still does. A flag given now
    # (more votes) applies to the rest of the run.
    plain = load_settings({"store.db": settings.store.db}, environ={})
    result = asyncio.run(
        resume_async(
            "options-run",
            settings=plain,
            overrides={"controller.solution_samples": 3},
            models={"planning": second, "execution": second},
        )
    )
    assert result.answer == "2102650"
    solve_calls = second.calls_for("solve")
    assert len(solve_calls) == 3
    assert "no thousands separators" in solve_calls[0].prompt
