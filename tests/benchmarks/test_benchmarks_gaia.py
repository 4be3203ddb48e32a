"""The GAIA harness end to end: scoring, reports, concurrency, failures, resume, Ctrl-C."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.benchmarks.datasets import BenchTask
from kgot.benchmarks.gaia import run_gaia
from kgot.benchmarks.harness import STOP_AFTER_SAME_ERROR, BenchInterrupted, BenchStopped
from kgot.benchmarks.progress import ProgressView
from kgot.config import Settings, load_settings
from kgot.controller.result import AskResult
from kgot.errors import ConfigError, ModelError, SandboxUnavailableError, StoreError, UsageError
from kgot.llm.scripted import ScriptedCall, ScriptedChatModel
from kgot.tests.benchmarks.bench_fixtures import GAIA_VALIDATION

QUIET = ProgressView(enabled=False)

# What the scripted baseline model answers, keyed by a word of each question.
DIRECT_REPLIES = {
    "spider": "Spiders are arachnids.\nFINAL ANSWER: 8",
    "secret word": "The notes say so.\nFINAL ANSWER: Heliotrope",
    "planets": "FINAL ANSWER: Mercury, Venus, Earth",
    "Louvre": "FINAL ANSWER: Pariss",  # a close call, not correct
    "1,000 times": "FINAL ANSWER: 1,234,000",  # commas are dropped for numbers
    "sea mew": "FINAL ANSWER: sea gulls",  # a close call
}


@pytest.fixture
def settings() -> Settings:
    return load_settings({}, environ={})


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def scripted_baseline() -> ScriptedChatModel:
    def reply(call: ScriptedCall) -> str:
        question = call.messages[-1].content
        for key, answer in DIRECT_REPLIES.items():
            if key in question:
                if key == "secret word" and "heliotrope" not in question:
                    return "FINAL ANSWER: unknown"  # the attachment text was not shown
                return answer
        return "FINAL ANSWER: ?"

    return ScriptedChatModel(script={"direct_answer": [reply]})


def test_direct_mode_end_to_end(gaia_root: Path, tmp_path: Path, settings: Settings) -> None:
    model = scripted_baseline()
    out = tmp_path / "out"
    outcome = run_gaia(
        gaia_root,
        settings=settings,
        out_dir=out,
        mode="direct",
        models={"planning": model, "execution": model},
        progress=QUIET,
    )
    records = {r["task_id"]: r for r in read_jsonl(out / "results.jsonl")}
    assert len(records) == 6
    assert {k for k, r in records.items() if r["correct"]} == {
        "task-l1-a",
        "task-l1-b",
        "task-l2-a",
        "task-l3-a",
    }
    # KGoT's close calls include the correct answers; the near misses are the other two.
    assert {k for k, r in records.items() if r["close_call"] and not r["correct"]} == {
        "task-l2-b",
        "task-l3-b",
    }
    assert all(r["close_call"] for r in records.values() if r["correct"])
    attached = records["task-l1-b"]
    assert attached["attachment"] == "notes.txt"
    assert attached["prediction"] == "Heliotrope"
    assert attached["raw_answer"].startswith("The notes say so.")
    for field in (
        "question", "level", "truth", "error", "iterations", "tool_calls", "llm_calls",
        "input_tokens", "output_tokens", "cost_usd", "duration_s", "run_id", "graph", "trace",
    ):  # fmt: skip
        assert field in attached
    assert attached["llm_calls"] == 1 and attached["input_tokens"] > 0
    assert attached["cost_usd"] == 0.0  # scripted models are free
    assert attached["run_id"].startswith("direct-")

    summary = outcome.summary
    assert summary == json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["recorded"], summary["scored"], summary["correct"]) == (6, 6, 4)
    assert summary["accuracy"] == pytest.approx(4 / 6)
    assert summary["near_misses"] == 2  # reported, never counted
    assert summary["close_calls"] == 6  # KGoT's figure: correct + near misses
    assert {k: v["correct"] for k, v in summary["by_level"].items()} == {"1": 2, "2": 1, "3": 1}
    assert summary["by_level"]["2"]["accuracy"] == 0.5
    assert summary["llm_calls"] == 6
    assert summary["run"]["mode"] == "direct"
    assert summary["run"]["models"] == {"planning": "scripted"}

    report = (out / "report.md").read_text(encoding="utf-8")
    assert "# GAIA results: direct mode" in report
    assert "| strict accuracy | 66.7% (4/6) |" in report
    assert "| near misses (not counted) | 2 |" in report
    assert "| KGoT's close calls (correct + near misses) | 6 |" in report
    assert "wrong (near miss)" in report
    assert (out / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    submission = read_jsonl(out / "submission.jsonl")
    assert [s["task_id"] for s in submission][:2] == ["task-l1-a", "task-l1-b"]
    assert submission[1]["model_answer"] == "Heliotrope"
    assert "direct_answer" in submission[1]["reasoning_trace"]
    assert set(submission[0]) == {"task_id", "model_answer", "reasoning_trace"}
    assert {p.name for p in outcome.files} >= {"results.jsonl", "summary.json", "chart.png"}


def answer_with(
    replies: dict[str, str | BaseException], *, status: str = "answered"
) -> Callable[[BenchTask], Any]:
    """An answering function that returns (or raises) a fixed reply per task id."""
    calls: list[str] = []

    async def answer(task: BenchTask) -> AskResult:
        calls.append(task.task_id)
        reply = replies.get(task.task_id, "nothing")
        if isinstance(reply, BaseException):
            raise reply
        return AskResult(answer=reply, run_id=f"run-{task.task_id}", status=status, cost_usd=0.0)

    answer.calls = calls  # type: ignore[attr-defined]
    return answer


def test_failures_are_recorded_and_the_run_goes_on(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    answer = answer_with(
        {"task-l1-a": "8", "task-l2-a": RuntimeError("tool\nexploded"), "task-l3-a": "1234000"}
    )
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET
    )
    records = {r["task_id"]: r for r in read_jsonl(tmp_path / "results.jsonl")}
    assert len(records) == 6
    crashed = records["task-l2-a"]
    assert crashed["error"] == "RuntimeError: tool exploded"  # one line
    assert crashed["correct"] is False and crashed["status"] == "error"
    assert crashed["cost_usd"] is None  # unknown: the run never reported
    assert outcome.summary["errors"] == 1
    assert outcome.summary["failed_tasks"] == [
        {"task_id": "task-l2-a", "error": "RuntimeError: tool exploded"}
    ]
    assert outcome.summary["correct"] == 2
    assert outcome.summary["cost_unknown_tasks"] == 1
    assert "- `task-l2-a`: RuntimeError: tool exploded" in (tmp_path / "report.md").read_text()


def test_a_failed_run_is_an_error(gaia_root: Path, tmp_path: Path, settings: Settings) -> None:
    async def answer(task: BenchTask) -> AskResult:
        return AskResult(answer="", run_id="r", status="failed", error="model unreachable")

    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, limit=1, progress=QUIET
    )
    assert outcome.summary["failed_tasks"] == [
        {"task_id": "task-l1-a", "error": "model unreachable"}
    ]


def test_a_configuration_error_stops_the_run(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    answer = answer_with({"task-l1-a": ConfigError("no model configured")})
    with pytest.raises(ConfigError, match="no model configured"):
        run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET)
    assert answer.calls == ["task-l1-a"]  # type: ignore[attr-defined]
    assert not (tmp_path / "results.jsonl").exists()


def test_a_task_over_its_time_limit_is_an_error(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    never = asyncio.Event()

    async def answer(task: BenchTask) -> AskResult:
        if task.task_id == "task-l1-b":
            await never.wait()
        return AskResult(answer="8", run_id="r", status="answered")

    outcome = run_gaia(
        gaia_root,
        settings=settings,
        out_dir=tmp_path,
        answer=answer,
        limit=2,
        timeout=0.05,
        progress=QUIET,
    )
    assert outcome.summary["failed_tasks"] == [
        {"task_id": "task-l1-b", "error": "timed out after 0.05 s"}
    ]


def test_concurrency_runs_questions_at_once(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    in_flight = 0
    peak = 0
    three_running = asyncio.Event()

    async def answer(task: BenchTask) -> AskResult:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            three_running.set()
        # Each question waits until three are in flight together (never more than three).
        await asyncio.wait_for(three_running.wait(), timeout=10)
        in_flight -= 1
        return AskResult(answer=task.truth or "", run_id=task.task_id, status="answered")

    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, concurrency=3, progress=QUIET
    )
    assert peak == 3
    assert outcome.summary["correct"] == 6
    assert len(read_jsonl(tmp_path / "results.jsonl")) == 6


@pytest.mark.slow
def test_resume_by_task_id_and_retry_errors(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    first = answer_with({"task-l1-a": "8", "task-l1-b": ValueError("flaky")})
    run_gaia(
        gaia_root,
        settings=settings,
        out_dir=tmp_path,
        answer=first,
        task_ids=["task-l1-b", "task-l1-a"],
        progress=QUIET,
    )
    assert sorted(first.calls) == ["task-l1-a", "task-l1-b"]  # type: ignore[attr-defined]

    second = answer_with({"task-l2-a": "Mercury, Venus, Earth"})
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=second, progress=QUIET
    )
    # The two recorded tasks (even the failed one) are not asked again.
    assert second.calls == ["task-l2-a", "task-l2-b", "task-l3-a", "task-l3-b"]  # type: ignore[attr-defined]
    assert (outcome.ran, outcome.skipped) == (4, 2)
    assert outcome.summary["errors"] == 1

    third = answer_with({"task-l1-b": "heliotrope"})
    outcome = run_gaia(
        gaia_root,
        settings=settings,
        out_dir=tmp_path,
        answer=third,
        retry_errors=True,
        progress=QUIET,
    )
    assert third.calls == ["task-l1-b"]  # type: ignore[attr-defined]
    assert outcome.summary["errors"] == 0
    assert outcome.summary["recorded"] == 6
    assert outcome.summary["correct"] == 3
    assert len(read_jsonl(tmp_path / "results.jsonl")) == 7  # the retry appended a line


@pytest.mark.slow
def test_ctrl_c_leaves_a_resumable_folder(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    asked: list[str] = []
    cancelled: list[str] = []

    async def answer(task: BenchTask) -> AskResult:
        asked.append(task.task_id)
        if len(asked) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(task.task_id)
                raise
        return AskResult(answer=task.truth or "", run_id=task.task_id, status="answered")

    with pytest.raises(BenchInterrupted) as caught:
        run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET)
    assert caught.value.exit_code == 130
    assert "2 task(s) are recorded" in str(caught.value) and "resume" in str(caught.value)
    assert cancelled == ["task-l2-a"]
    raw = (tmp_path / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and len(read_jsonl(tmp_path / "results.jsonl")) == 2
    assert json.loads((tmp_path / "summary.json").read_text())["recorded"] == 2

    asked.clear()
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), progress=QUIET
    )
    assert outcome.skipped == 2 and outcome.ran == 4
    assert outcome.summary["recorded"] == 6


def test_test_split_has_no_accuracy_but_a_submission(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    answer = answer_with({"test-1": "FINAL ANSWER: blue", "test-2": "7"})
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, split="test", answer=answer, progress=QUIET
    )
    assert outcome.summary["scored"] == 0 and outcome.summary["accuracy"] is None
    assert not (tmp_path / "chart.png").exists()
    submission = read_jsonl(tmp_path / "submission.jsonl")
    assert [(s["task_id"], s["model_answer"]) for s in submission] == [
        ("test-1", "blue"),
        ("test-2", "7"),
    ]
    assert "hides the answers" in (tmp_path / "report.md").read_text()


def test_an_output_folder_keeps_one_experiment(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), limit=1,
        progress=QUIET,
    )  # fmt: skip
    with pytest.raises(UsageError, match="already holds a run with mode"):
        run_gaia(
            gaia_root, settings=settings, out_dir=tmp_path, mode="direct",
            answer=answer_with({}), progress=QUIET,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("concurrency", "timeout"),
    [(0, None), (1, 0.0), (1, float("nan")), (1, float("inf")), (1, -1.0)],
)
def test_bad_run_options(
    gaia_root: Path, tmp_path: Path, settings: Settings, concurrency: int, timeout: float | None
) -> None:
    with pytest.raises(UsageError, match=r"--concurrency|--timeout"):
        run_gaia(
            gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}),
            concurrency=concurrency, timeout=timeout, progress=QUIET,
        )  # fmt: skip


def test_progress_lines_show_running_accuracy_and_cost(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    from rich.console import Console

    stream = io.StringIO()
    view = ProgressView(Console(file=stream, force_terminal=False, width=200))

    async def answer(task: BenchTask) -> AskResult:
        right = task.task_id != "task-l1-b"
        return AskResult(
            answer=(task.truth or "") if right else "no", run_id="r", status="answered",
            cost_usd=0.25,
        )  # fmt: skip

    run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer, limit=3, progress=view)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "gaia 1/3 ✓ task-l1-a  acc 100.0% (1/1)  cost $0.2500"
    assert lines[1] == "gaia 2/3 ✗ task-l1-b  acc 50.0% (1/2)  cost $0.5000"
    assert lines[2].endswith("acc 66.7% (2/3)  cost $0.7500")

    stream = io.StringIO()
    resumed = ProgressView(Console(file=stream, force_terminal=False, width=200))
    run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, limit=4, progress=resumed
    )
    lines = stream.getvalue().splitlines()
    assert lines[0] == "gaia: resuming; 3 of 4 task(s) already recorded"
    assert lines[1] == "gaia 4/4 ✓ task-l2-b  acc 75.0% (3/4)  cost $1.0000"


def test_live_progress_bar_on_a_terminal(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    from rich.console import Console

    stream = io.StringIO()
    view = ProgressView(Console(file=stream, force_terminal=True, width=160))
    run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), progress=view)
    screen = stream.getvalue()
    assert "6/6" in screen and "acc 0.0% (0/6)" in screen


def test_direct_mode_names_attachments_it_cannot_show(tmp_path: Path, settings: Settings) -> None:
    from kgot.tests.benchmarks.bench_fixtures import gaia_rows, write_parquet

    rows = gaia_rows([("task-img", 1, "What animal is in the photo?", "cat", "photo.png")], "x")
    metadata = write_parquet(tmp_path / "data" / "metadata.parquet", rows)
    (tmp_path / "data" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    model = ScriptedChatModel(script={"direct_answer": ["FINAL ANSWER: dog"]})
    run_gaia(
        metadata, settings=settings, out_dir=tmp_path / "out", mode="direct",
        models={"planning": model, "execution": model}, progress=QUIET,
    )  # fmt: skip
    [call] = model.calls
    assert "[Attached file photo.png (image) cannot be shown without tools]" in call.prompt


# ---------------------------------------------------------------- errors inside tasks


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_timeout_error_inside_a_task_is_an_ordinary_error(
    gaia_root: Path, tmp_path: Path, settings: Settings, timeout: float | None
) -> None:
    # A tool or model call giving up raises TimeoutError inside the run: that is the task's
    # error, not the harness's --timeout (and without --timeout it must not crash the run).
    answer = answer_with({"task-l1-a": TimeoutError("the page took too long"), "task-l1-b": "x"})
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, limit=2,
        timeout=timeout, progress=QUIET,
    )  # fmt: skip
    assert outcome.summary["failed_tasks"] == [
        {"task_id": "task-l1-a", "error": "TimeoutError: the page took too long"}
    ]
    assert outcome.summary["recorded"] == 2


def test_time_outs_do_not_stop_the_run(gaia_root: Path, tmp_path: Path, settings: Settings) -> None:
    never = asyncio.Event()

    async def answer(task: BenchTask) -> AskResult:
        await never.wait()  # every question is too hard
        raise AssertionError("unreachable")

    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, timeout=0.01,
        concurrency=3, progress=QUIET,
    )  # fmt: skip
    assert outcome.summary["errors"] == outcome.summary["recorded"] == 6


@pytest.mark.parametrize(
    "error",
    [
        SandboxUnavailableError("no sandbox can run here: install bubblewrap"),
        StoreError("the database at postgresql://db/kgot cannot be reached"),
    ],
)
def test_a_setup_error_stops_the_run_at_once(
    gaia_root: Path, tmp_path: Path, settings: Settings, error: Exception
) -> None:
    answer = answer_with({"task-l1-a": error})
    with pytest.raises(type(error), match=str(error)):
        run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET)
    assert answer.calls == ["task-l1-a"]  # type: ignore[attr-defined]
    assert not (tmp_path / "results.jsonl").exists()


def test_the_same_error_in_a_row_stops_the_run(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    refused = ModelError("model endpoint http://x/v1 (openai:m) failed: HTTP 401: bad key")
    answer = answer_with({task_id: refused for task_id, *_ in GAIA_VALIDATION})
    with pytest.raises(BenchStopped) as caught:
        run_gaia(gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"stopped: {STOP_AFTER_SAME_ERROR} questions in a row failed")
    assert "HTTP 401: bad key" in message and "--retry-errors" in message
    assert len(answer.calls) == STOP_AFTER_SAME_ERROR  # type: ignore[attr-defined]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["recorded"] == summary["errors"] == STOP_AFTER_SAME_ERROR


def test_different_errors_do_not_stop_the_run(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    answer = answer_with(
        {task_id: RuntimeError(f"tool failed on {task_id}") for task_id, *_ in GAIA_VALIDATION}
    )
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer, progress=QUIET
    )
    assert outcome.summary["errors"] == 6


# ---------------------------------------------------------------- run identity


def test_resuming_with_other_controller_settings_is_refused(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), limit=1,
        progress=QUIET,
    )  # fmt: skip
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["controller"]["votes"] == 5 and manifest["dataset"]["split"] == "validation"
    assert manifest["tools"] == {"enabled": None, "disabled": []}
    fewer_votes = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"votes": 3})}
    )
    with pytest.raises(UsageError, match=r"already holds a run with controller\.votes 5 "):
        run_gaia(
            gaia_root, settings=fewer_votes, out_dir=tmp_path, answer=answer_with({}),
            progress=QUIET,
        )  # fmt: skip
    with pytest.raises(UsageError, match="already holds a run with gaia_format true"):
        run_gaia(
            gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}),
            gaia_format=False, progress=QUIET,
        )  # fmt: skip
    # The same experiment resumes.
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), limit=2,
        progress=QUIET,
    )  # fmt: skip
    assert (outcome.ran, outcome.skipped) == (1, 1)


def test_an_output_folder_without_records_takes_the_new_experiment(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    # What an invocation that stopped before its first record leaves behind must not block
    # the corrected command.
    (tmp_path / "run.json").write_text(
        json.dumps({"benchmark": "gaia", "mode": "kgot", "models": {"planning": "x"}}),
        encoding="utf-8",
    )
    outcome = run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, mode="direct", answer=answer_with({}),
        limit=1, progress=QUIET,
    )  # fmt: skip
    assert outcome.summary["run"]["mode"] == "direct"


def test_records_keep_the_annotator_metadata(
    gaia_root: Path, tmp_path: Path, settings: Settings
) -> None:
    run_gaia(
        gaia_root, settings=settings, out_dir=tmp_path, answer=answer_with({}), limit=1,
        progress=QUIET,
    )  # fmt: skip
    [record] = read_jsonl(tmp_path / "results.jsonl")
    assert record["annotator_metadata"] == {
        "Steps": "1. Think",
        "Number of steps": "1",
        "Tools": "None",
    }
