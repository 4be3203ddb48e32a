"""The part of a benchmark run both GAIA and SimpleQA share.

Given the questions to ask, a function that answers one question and a function that turns an
answer into a result record, :func:`run_benchmark` skips what the output folder already holds
(by ``task_id``), runs the rest ``concurrency`` at a time with a progress bar, appends each
record the moment it is judged, and writes the summary and reports — also after Ctrl-C, which
leaves a folder the same command resumes.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kgot.benchmarks.datasets import BenchTask
from kgot.benchmarks.progress import ProgressView
from kgot.benchmarks.results import (
    RESULTS_FILE,
    ResultsLog,
    check_manifest,
    check_out_dir,
    folder_lock,
    read_manifest,
    write_atomic,
)
from kgot.errors import ConfigError, KgotError, SandboxUnavailableError, StoreError, UsageError

if TYPE_CHECKING:
    from kgot.controller import AskResult

__all__ = [
    "SETUP_ERRORS",
    "STOP_AFTER_SAME_ERROR",
    "AnswerFn",
    "Attempt",
    "BenchInterrupted",
    "BenchOutcome",
    "BenchStopped",
    "Benchmark",
    "base_record",
    "check_run_options",
    "run_benchmark",
    "run_tasks",
    "split_recorded",
    "write_outputs",
]

AnswerFn = Callable[[BenchTask], Awaitable["AskResult"]]
SUMMARY_FILE = "summary.json"


class BenchInterrupted(KgotError):
    """The run was stopped (Ctrl-C); what finished is saved and the same command resumes."""

    exit_code = 130


class BenchStopped(KgotError):
    """Several questions in a row failed with the same error, so the run stopped early."""


# Problems with the set-up rather than the question: every question would hit them alike.
SETUP_ERRORS: tuple[type[KgotError], ...] = (ConfigError, SandboxUnavailableError, StoreError)
# Records in a row with one and the same error after which a run stops (see `_ErrorStreak`).
STOP_AFTER_SAME_ERROR = 3


@dataclass
class Attempt:
    """One question asked: the run's result, or why there is none.

    Attributes:
        task: the question.
        result: what the run returned; ``None`` when it raised or timed out.
        error: one line when the task failed (raised, timed out, or a failed run).
        duration_s: wall time of the attempt.
        timed_out: the harness's ``--timeout`` ended it.
    """

    task: BenchTask
    result: AskResult | None
    error: str | None
    duration_s: float
    timed_out: bool = False


class Benchmark(Protocol):
    """What makes GAIA and SimpleQA differ inside :func:`run_benchmark`."""

    name: str

    async def judge(self, attempt: Attempt) -> dict[str, Any]:
        """The result record for one attempt (scoring or grading it); must not raise."""
        ...

    def is_correct(self, record: Mapping[str, Any]) -> bool | None:
        """Whether a record counts as correct; ``None`` when it cannot be scored."""
        ...

    def summarize(
        self, records: Sequence[Mapping[str, Any]], run: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Benchmark figures over all records of the folder; ``run`` is its ``run.json``."""
        ...

    def write_reports(
        self,
        out_dir: Path,
        summary: Mapping[str, Any],
        records: Sequence[Mapping[str, Any]],
    ) -> list[Path]:
        """Report files beside the results (markdown, chart, …); returns their paths."""
        ...


@dataclass
class BenchOutcome:
    """What :func:`run_benchmark` did.

    Attributes:
        summary: the figures written to ``summary.json``.
        out_dir: the output folder.
        files: every file written or updated (results, summary, reports).
        ran: tasks asked in this invocation.
        skipped: selected tasks already recorded (resumed past).
    """

    summary: dict[str, Any]
    out_dir: Path
    files: list[Path] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0


def run_benchmark(
    benchmark: Benchmark,
    tasks: Sequence[BenchTask],
    *,
    answer: AnswerFn,
    out_dir: Path,
    manifest: Mapping[str, Any],
    concurrency: int = 1,
    timeout: float | None = None,
    retry_errors: bool = False,
    progress: ProgressView | None = None,
) -> BenchOutcome:
    """Run ``tasks`` not yet recorded in ``out_dir``, then write the summary and reports.

    Nothing is written before the options are checked; the folder is locked for the whole run.

    Args:
        benchmark: scoring and reporting of one benchmark.
        tasks: the selected questions.
        answer: answers one question (each call its own run and graph).
        out_dir: where ``results.jsonl`` and the reports live; resumed when it has results.
        manifest: identity of the experiment (benchmark, mode, dataset, models, …) for
            ``run.json``; a folder holding results of a different experiment is refused.
        concurrency: questions in flight at once.
        timeout: seconds allowed per question (``None``: no limit besides the run's own).
        retry_errors: also re-run selected tasks whose record has an error.
        progress: where progress goes (default: a rich bar on stderr).

    Raises:
        UsageError: bad concurrency/timeout, ``out_dir`` is a file, holds a different
            experiment, or is in use by another run.
        ConfigError, SandboxUnavailableError, StoreError: a setup problem raised while
            answering (nothing else is asked; the task is not recorded).
        BenchStopped: the same error ended several questions in a row.
        BenchInterrupted: Ctrl-C; the records so far and the reports are saved first.
    """
    check_run_options(concurrency=concurrency, timeout=timeout)
    check_out_dir(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--out {out_dir} cannot be created: {error.strerror}") from None
    with folder_lock(out_dir):
        log = ResultsLog(out_dir / RESULTS_FILE)
        recorded = log.load()
        now = _now()
        check_manifest(
            out_dir, {**manifest, "created_at": now, "updated_at": now}, has_records=bool(recorded)
        )
        pending, done = split_recorded(tasks, recorded, retry_errors=retry_errors)
        view = progress or ProgressView()
        view.start(benchmark.name, total=len(tasks), done=done, is_correct=benchmark.is_correct)
        interrupted = False
        stopped: BenchStopped | None = None
        try:
            asyncio.run(
                run_tasks(
                    pending,
                    answer=answer,
                    judge=benchmark.judge,
                    log=log,
                    concurrency=concurrency,
                    timeout=timeout,
                    on_record=view.advance,
                )
            )
        except KeyboardInterrupt:
            interrupted = True
        except BenchStopped as error:
            stopped = error
        finally:
            view.stop()
        outcome = write_outputs(benchmark, out_dir, repair=True)
    outcome.ran = len(pending)
    outcome.skipped = len(tasks) - len(pending)
    if stopped is not None:
        raise stopped
    if interrupted:
        done_count = outcome.summary.get("recorded", 0)
        raise BenchInterrupted(
            f"interrupted: {done_count} task(s) are recorded in {out_dir}; run the same command "
            "again to resume"
        )
    return outcome


def check_run_options(*, concurrency: int, timeout: float | None) -> None:
    """Validate the options every benchmark shares.

    Raises:
        UsageError: ``concurrency`` below 1, or ``timeout`` not a finite positive number.
    """
    if concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {concurrency}")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(
            f"--timeout must be a positive number of seconds, got {timeout:g} "
            "(leave it out for no limit)"
        )


def split_recorded(
    tasks: Sequence[BenchTask],
    recorded: Mapping[str, Mapping[str, Any]],
    *,
    retry_errors: bool = False,
) -> tuple[list[BenchTask], list[Mapping[str, Any]]]:
    """The tasks still to run, and the records of the others.

    A task runs when it has no record, or (with ``retry_errors``) when its record has an error.
    """

    def to_run(task: BenchTask) -> bool:
        record = recorded.get(task.task_id)
        return record is None or (retry_errors and bool(record.get("error")))

    pending = [task for task in tasks if to_run(task)]
    done = [recorded[task.task_id] for task in tasks if not to_run(task)]
    return pending, done


def write_outputs(benchmark: Benchmark, out_dir: Path, *, repair: bool = False) -> BenchOutcome:
    """(Re)write ``summary.json`` and the reports from the folder's ``results.jsonl``.

    Args:
        benchmark: scoring and reporting of the folder's benchmark.
        out_dir: the output folder.
        repair: cut a torn last line from the results file. Only the run holding the folder
            may do that: for anyone else the "torn" line may be a record being appended right
            now, so it is just left out of the figures.

    Raises:
        DatasetError: the results file or ``run.json`` cannot be read.
    """
    records = list(ResultsLog(out_dir / RESULTS_FILE).load(repair=repair).values())
    summary = benchmark.summarize(records, read_manifest(out_dir))
    summary_path = out_dir / SUMMARY_FILE
    write_atomic(summary_path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    files = [out_dir / RESULTS_FILE, summary_path]
    files += benchmark.write_reports(out_dir, summary, records)
    return BenchOutcome(summary=summary, out_dir=out_dir, files=files)


async def run_tasks(
    tasks: Sequence[BenchTask],
    *,
    answer: AnswerFn,
    judge: Callable[[Attempt], Awaitable[dict[str, Any]]],
    log: ResultsLog,
    concurrency: int = 1,
    timeout: float | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int = STOP_AFTER_SAME_ERROR,
) -> None:
    """Answer and judge every task, ``concurrency`` at a time, appending each record to ``log``.

    A task that raises, times out or returns a failed run is recorded with its error and the
    others go on. Cancellation (Ctrl-C) stops the tasks in flight without recording them.

    Raises:
        ConfigError, SandboxUnavailableError, StoreError: from answering (a setup problem every
            task would hit); the task is not recorded.
        BenchStopped: ``stop_after`` records in a row ended with the same error (an expired
            API key, an endpoint that is down): the run stops instead of failing every
            question alike. Those records are kept, so ``--retry-errors`` asks them again.
    """
    queue = iter(tasks)
    streak = _ErrorStreak(stop_after)

    async def worker() -> None:
        # All workers draw from one iterator; the event loop runs one at a time, so no lock.
        for task in queue:
            attempt = await _attempt(task, answer, timeout)
            record = await judge(attempt)
            log.append(record)
            if on_record is not None:
                on_record(record)
            streak.add(record, timed_out=attempt.timed_out)

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(tasks)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for running in workers:
            running.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


class _ErrorStreak:
    """Counts records in a row that failed with the same error."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.error: str | None = None
        self.count = 0

    def add(self, record: Mapping[str, Any], *, timed_out: bool) -> None:
        """Count ``record``.

        Raises:
            BenchStopped: the streak reached the limit.
        """
        error = record.get("error")
        # A time limit is the question's own: hard questions time out alike, and that is a
        # result, not a broken setup.
        if not error or timed_out:
            self.error, self.count = None, 0
            return
        self.count = self.count + 1 if error == self.error else 1
        self.error = str(error)
        if self.count >= self.limit:
            raise BenchStopped(
                f"stopped: {self.count} questions in a row failed with the same error "
                f"({self.error}); fix the cause, then run the same command with --retry-errors"
            )


async def _attempt(task: BenchTask, answer: AnswerFn, timeout: float | None) -> Attempt:
    started = time.perf_counter()
    result: AskResult | None = None
    error: str | None = None
    timed_out = False
    try:
        async with asyncio.timeout(timeout) as deadline:
            result = await answer(task)
    except SETUP_ERRORS:
        raise
    except Exception as exception:  # one crashing task must not end the benchmark
        # Only the harness's own deadline is a time-out; a TimeoutError raised inside the
        # run (a tool, a model call) is an error like any other.
        if isinstance(exception, TimeoutError) and deadline.expired():
            timed_out = True
            error = f"timed out after {timeout:g} s"
        else:
            error = f"{type(exception).__name__}: {_one_line(str(exception))}"
    if result is not None and result.status in ("failed", "interrupted"):
        error = result.error or f"the run ended as {result.status}"
    return Attempt(task, result, error, time.perf_counter() - started, timed_out=timed_out)


def base_record(attempt: Attempt, prediction: str, **details: Any) -> dict[str, Any]:
    """The fields every benchmark's record has, with ``details`` right after the question."""
    result = attempt.result
    task = attempt.task
    return {
        "task_id": task.task_id,
        "index": task.index,
        "question": task.question,
        **details,
        "prediction": prediction,
        "raw_answer": result.answer if result else None,
        "truth": task.truth,
        "error": attempt.error,
        "status": result.status if result else "error",
        "iterations": result.iterations if result else 0,
        "tool_calls": result.tool_calls if result else 0,
        "llm_calls": result.llm_calls if result else 0,
        "input_tokens": result.input_tokens if result else 0,
        "output_tokens": result.output_tokens if result else 0,
        "cost_usd": result.cost_usd if result else None,
        "duration_s": round(attempt.duration_s, 3),
        "run_id": result.run_id if result else None,
        "graph": result.graph if result else {},
        "trace": [event.model_dump(mode="json") for event in result.trace] if result else [],
        "finished_at": _now(),
    }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _one_line(text: str) -> str:
    return " ".join(text.split())
