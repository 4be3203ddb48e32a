"""The GAIA harness: ask each question (its own run and graph), score it exactly as the public
leaderboard does, and report strict accuracy per level with close calls kept apart.

Output folder (``--out``):

* ``results.jsonl`` — one record per task (see :meth:`GaiaBenchmark.judge`);
* ``summary.json`` — accuracy overall and per level, close calls, errors, tokens, cost, latency;
* ``report.md`` and ``chart.png`` — the same for people;
* ``submission.jsonl`` — ``task_id``, ``model_answer``, ``reasoning_trace`` per task, the file
  the leaderboard accepts (the test split hides answers, so it is scored only there);
* ``run.json`` — what the folder holds; ``runs.db`` — the runs' checkpoints (default store).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.benchmarks.answer_scoring import gaia_close_call, gaia_question_scorer, strip_final_answer
from kgot.benchmarks.answerers import (
    Mode,
    check_models,
    direct_answerer,
    kgot_answerer,
    model_names,
    run_settings,
)
from kgot.benchmarks.datasets import (
    BenchTask,
    dataset_identity,
    find_gaia_metadata,
    gaia_split,
    load_gaia,
)
from kgot.benchmarks.harness import (
    AnswerFn,
    Attempt,
    BenchOutcome,
    base_record,
    check_run_options,
    run_benchmark,
)
from kgot.benchmarks.progress import ProgressView
from kgot.benchmarks.report import (
    bar_chart,
    error_list,
    markdown_table,
    percent,
    ratio,
    run_lines,
    usage_figures,
    usage_lines,
)
from kgot.benchmarks.results import write_atomic
from kgot.config import Settings
from kgot.version import __version__

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["GaiaBenchmark", "GaiaPlan", "answer_identity", "plan_gaia", "run_gaia"]

LEVELS = (1, 2, 3)
REPORT_FILE = "report.md"
CHART_FILE = "chart.png"
SUBMISSION_FILE = "submission.jsonl"


class GaiaBenchmark:
    """Scoring and reporting for GAIA."""

    name = "gaia"

    async def judge(self, attempt: Attempt) -> dict[str, Any]:
        """The record for one task, scored with the leaderboard's rules.

        ``prediction`` is the answer with any ``FINAL ANSWER:`` prefix removed (``raw_answer``
        keeps it); ``correct`` and ``close_call`` (KGoT's measure, true for correct answers
        too) are ``None`` when the split hides the truth. ``annotator_metadata`` is GAIA's
        ``Annotator Metadata`` for the task.
        """
        task = attempt.task
        prediction = strip_final_answer(attempt.result.answer) if attempt.result else ""
        scored = task.truth is not None
        return base_record(
            attempt,
            prediction,
            level=task.level,
            attachment=task.attachment.name if task.attachment else None,
            correct=gaia_question_scorer(prediction, task.truth) if scored else None,
            close_call=gaia_close_call(prediction, task.truth) if scored else None,
            annotator_metadata=task.annotator,
        )

    def is_correct(self, record: Mapping[str, Any]) -> bool | None:
        return record.get("correct")

    def summarize(
        self, records: Sequence[Mapping[str, Any]], run: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Strict accuracy overall and per level, close calls apart, plus usage figures.

        ``close_calls`` is KGoT's count (correct answers plus near misses); ``near_misses`` is
        the part of it that is not correct.
        """

        def figures(subset: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
            scored = [r for r in subset if r.get("correct") is not None]
            correct = sum(bool(r["correct"]) for r in scored)
            near = sum(bool(r.get("close_call")) and not r["correct"] for r in scored)
            return {
                "recorded": len(subset),
                "scored": len(scored),
                "correct": correct,
                "accuracy": ratio(correct, len(scored)),
                "close_calls": correct + near,
                "near_misses": near,
                "errors": sum(bool(r.get("error")) for r in subset),
            }

        by_level = {
            str(level): figures([r for r in records if r.get("level") == level]) for level in LEVELS
        }
        return {
            "benchmark": "gaia",
            "run": dict(run),
            **figures(records),
            "by_level": {level: data for level, data in by_level.items() if data["recorded"]},
            **usage_figures(records),
            "failed_tasks": error_list(records),
        }

    def write_reports(
        self,
        out_dir: Path,
        summary: Mapping[str, Any],
        records: Sequence[Mapping[str, Any]],
    ) -> list[Path]:
        ordered = sorted(records, key=lambda r: r.get("index", 0))
        report = out_dir / REPORT_FILE
        write_atomic(report, _markdown(summary, ordered))
        submission = out_dir / SUBMISSION_FILE
        write_atomic(submission, "".join(_submission_line(r) for r in ordered))
        files = [report, submission]
        if summary["scored"]:
            files.append(_chart(out_dir / CHART_FILE, summary))
        return files


def _markdown(summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    run = summary["run"]
    accuracy = (
        f"{percent(summary['accuracy'])} ({summary['correct']}/{summary['scored']})"
        if summary["scored"]
        else "n/a: this split hides the answers; submit submission.jsonl to the leaderboard"
    )
    overview = [
        *run_lines(run),
        ("tasks recorded", f"{summary['recorded']} ({summary['errors']} with errors)"),
        ("strict accuracy", accuracy),
        ("near misses (not counted)", str(summary["near_misses"])),
        ("KGoT's close calls (correct + near misses)", str(summary["close_calls"])),
        *usage_lines(summary),
    ]
    parts = [
        f"# GAIA results: {run.get('mode', '?')} mode",
        markdown_table(["", ""], overview, cell_limit=None),
    ]
    if summary["by_level"]:
        rows = [
            [
                level,
                data["recorded"],
                data["correct"],
                percent(data["accuracy"]),
                data["near_misses"],
                data["errors"],
            ]
            for level, data in summary["by_level"].items()
        ]
        parts += [
            "## By level",
            markdown_table(
                ["level", "tasks", "correct", "accuracy", "near misses", "errors"], rows
            ),
        ]
    if summary["failed_tasks"]:
        parts += [
            "## Errors",
            "\n".join(f"- `{f['task_id']}`: {f['error']}" for f in summary["failed_tasks"]),
        ]
    verdicts = {True: "correct", False: "wrong", None: "–"}
    rows = [
        [
            r["task_id"],
            r.get("level"),
            "error"
            if r.get("error")
            else verdicts[r.get("correct")]
            + (" (near miss)" if r.get("close_call") and not r.get("correct") else ""),
            r.get("prediction"),
            r.get("truth"),
            f"{float(r.get('duration_s') or 0):.1f}",
            "?" if r.get("cost_usd") is None else f"{r['cost_usd']:.4f}",
        ]
        for r in records
    ]
    parts += [
        "## Tasks",
        markdown_table(
            ["task", "level", "result", "prediction", "truth", "time (s)", "cost ($)"], rows
        ),
    ]
    return "\n\n".join(parts) + "\n"


def _chart(path: Path, summary: Mapping[str, Any]) -> Path:
    groups = [("all", summary), *((f"level {k}", v) for k, v in summary["by_level"].items())]
    groups = [(name, data) for name, data in groups if data["scored"]]
    return bar_chart(
        path,
        title=f"GAIA strict accuracy ({summary['run'].get('mode', '?')} mode)",
        categories=[name for name, _ in groups],
        stacks={
            "correct": [data["accuracy"] or 0.0 for _, data in groups],
            "near miss (not counted)": [data["near_misses"] / data["scored"] for _, data in groups],
        },
        colors={"correct": "#2e7d32", "near miss (not counted)": "#c5e1a5"},
        labels=[f"{data['correct']}/{data['scored']}" for _, data in groups],
        ylabel="share of scored tasks",
    )


def _submission_line(record: Mapping[str, Any]) -> str:
    entry = {
        "task_id": record["task_id"],
        "model_answer": record.get("prediction") or "",
        "reasoning_trace": _reasoning_trace(record),
    }
    return json.dumps(entry, ensure_ascii=False) + "\n"


# What an event line leaves out: where and when it happened, not what was reasoned.
_NOT_REASONING = {"type", "iteration", "span_id", "parent_span_id", "timestamp"}


def _reasoning_trace(record: Mapping[str, Any]) -> str:
    """The run's steps as short text lines (the leaderboard shows it beside the answer): each
    step's name, then what it did (a step's usage is in the record's totals already)."""
    from pydantic import ValidationError

    from kgot.tracing import EVENT_ADAPTER, ModelCall, StepFinished, StepStarted, ToolCall

    lines = []
    for stored in record.get("trace") or []:
        try:
            event = EVENT_ADAPTER.validate_python(stored)
        except ValidationError:
            # Not an event this kgot knows (a results file from an earlier version): the
            # submission still gets the line, as stored.
            text = json.dumps(stored, ensure_ascii=False, default=str)
            lines.append(text if len(text) <= 300 else text[:299] + "…")
            continue
        if isinstance(event, StepFinished | ModelCall | ToolCall):
            continue  # figures, in the record's totals already
        if isinstance(event, StepStarted):
            lines.append(f"[{event.iteration}] step {event.step}")
            continue
        details = event.model_dump(mode="json", exclude=_NOT_REASONING)
        text = json.dumps(details, ensure_ascii=False, default=str)
        if len(text) > 300:
            text = text[:299] + "…"
        lines.append(f"[{event.iteration}] {event.type}: {text}")
    if record.get("error"):
        lines.append(f"error: {record['error']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- running


@dataclass
class GaiaPlan:
    """What a GAIA run will ask.

    Attributes:
        metadata: the metadata file.
        split: its split (see :func:`~kgot.benchmarks.datasets.gaia_split`).
        tasks: the selected questions, attachments resolved.
    """

    metadata: Path
    split: str
    tasks: list[BenchTask]


def plan_gaia(
    data: Path,
    *,
    split: str | None = None,
    levels: Sequence[int] = (),
    task_ids: Sequence[str] = (),
    limit: int | None = None,
) -> GaiaPlan:
    """The metadata file, its split and the selected questions (their attachments checked).

    Args:
        data: metadata file, split folder or dataset root.
        split: the split to read from a dataset root (default ``validation``); for a file or
            split folder it must agree with the folder, or be left out.
        levels, task_ids, limit: which questions (``limit`` applies last).

    Raises:
        DatasetError: the dataset cannot be used.
        UsageError: an unknown ``--task-id``, a level outside 1–3, a negative limit, or a
            split that contradicts the metadata file's folder.
    """
    from kgot.errors import UsageError

    bad = [level for level in levels if level not in LEVELS]
    if bad:
        raise UsageError(f"--level must be 1, 2 or 3, got {bad[0]}")
    metadata = find_gaia_metadata(data, split or "validation")
    resolved_split = gaia_split(metadata, data, split)
    tasks = load_gaia(metadata, task_ids=task_ids, levels=levels, limit=limit)
    return GaiaPlan(metadata.absolute(), resolved_split, tasks)


def answer_identity(settings: Settings, mode: Mode) -> dict[str, Any]:
    """The settings besides the models that change a kgot-mode answer (for ``run.json``): the
    controller's and the tool selection. The direct baseline uses neither."""
    if mode != "kgot":
        return {"controller": None, "tools": None}
    controller = settings.controller.model_dump(exclude={"gaia_format"})
    tools = {"enabled": settings.tools.enabled, "disabled": sorted(settings.tools.disabled)}
    return {"controller": controller, "tools": tools}


def run_gaia(
    data: Path,
    *,
    settings: Settings,
    out_dir: Path,
    split: str | None = None,
    levels: Sequence[int] = (),
    task_ids: Sequence[str] = (),
    limit: int | None = None,
    mode: Mode = "kgot",
    concurrency: int = 1,
    timeout: float | None = None,
    retry_errors: bool = False,
    db: str | None = None,
    gaia_format: bool = True,
    models: Mapping[str, BaseChatModel] | None = None,
    answer: AnswerFn | None = None,
    progress: ProgressView | None = None,
) -> BenchOutcome:
    """Run GAIA questions into ``out_dir`` (resuming what it holds) and write the reports.

    Everything that can be checked (dataset, options, models) is checked before the output
    folder is touched.

    Args:
        data: metadata file, split folder or dataset root (see :func:`find_gaia_metadata`).
        settings: configuration (models, controller, sandbox, tools).
        out_dir: output folder; an existing one is resumed by ``task_id``.
        split: the split (see :func:`plan_gaia`).
        levels, task_ids, limit: which questions (``limit`` applies last).
        mode: ``kgot`` (the controller) or ``direct`` (the plain planning model).
        concurrency: questions in flight at once, each its own run.
        timeout: seconds per question.
        retry_errors: re-run recorded tasks that failed.
        db: store for the runs' checkpoints (default ``out_dir/runs.db``).
        gaia_format: ask for answers in GAIA's format.
        models: injected chat models per role (tests).
        answer: replaces the answering function entirely (tests).
        progress: progress display (default: a bar on stderr).

    Raises:
        DatasetError, UsageError, ConfigError, BenchStopped, BenchInterrupted: see
            :func:`run_benchmark`.
    """
    plan = plan_gaia(data, split=split, levels=levels, task_ids=task_ids, limit=limit)
    check_run_options(concurrency=concurrency, timeout=timeout)
    settings = run_settings(settings, out_dir, db=db, gaia_format=gaia_format)
    if answer is None:
        check_models(settings, mode, models)
        answer = (
            kgot_answerer(settings, models=models)
            if mode == "kgot"
            else direct_answerer(settings, models=models, gaia_format=gaia_format)
        )
    names = model_names(settings, models)
    manifest = {
        "benchmark": "gaia",
        "mode": mode,
        "models": names if mode == "kgot" else {"planning": names["planning"]},
        "dataset": {**dataset_identity(plan.metadata), "split": plan.split},
        "gaia_format": gaia_format,
        **answer_identity(settings, mode),
        "kgot_version": __version__,
    }
    return run_benchmark(
        GaiaBenchmark(),
        plan.tasks,
        answer=answer,
        out_dir=out_dir,
        manifest=manifest,
        concurrency=concurrency,
        timeout=timeout,
        retry_errors=retry_errors,
        progress=progress,
    )
