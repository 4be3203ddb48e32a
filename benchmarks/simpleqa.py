"""The SimpleQA harness: ask each question, have a grader model grade the answer, and report
SimpleQA's figures (correct, incorrect, not attempted, accuracy given attempted, F1).

Output folder (``--out``): ``results.jsonl`` (one record per question, with the grader's raw
reply), ``summary.json``, ``report.md``, ``chart.png``, ``run.json`` and ``runs.db``.

A question whose run or grading failed is recorded with its error and counts as not attempted
until ``--retry-errors`` runs it again.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.benchmarks.answer_scoring import Grade, simpleqa_metrics, strip_final_answer
from kgot.benchmarks.answerers import (
    Grader,
    Mode,
    check_models,
    direct_answerer,
    kgot_answerer,
    model_names,
    run_settings,
)
from kgot.benchmarks.datasets import BenchTask, dataset_identity, load_simpleqa, sample_tasks
from kgot.benchmarks.gaia import answer_identity
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
    describe_cost,
    error_list,
    markdown_table,
    percent,
    run_lines,
    usage_figures,
    usage_lines,
)
from kgot.benchmarks.results import write_atomic
from kgot.config import Settings
from kgot.errors import UsageError
from kgot.version import __version__

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "KGOT_SAMPLE_FRACTION",
    "KGOT_SEED",
    "SimpleQABenchmark",
    "plan_simpleqa",
    "run_simpleqa",
]

# KGoT's published protocol: a 10 % sample drawn with this seed.
KGOT_SAMPLE_FRACTION = 0.1
KGOT_SEED = 123456
REPORT_FILE = "report.md"
CHART_FILE = "chart.png"
_GRADE_COLORS = {
    Grade.CORRECT.value: "#2e7d32",
    Grade.INCORRECT.value: "#c62828",
    Grade.NOT_ATTEMPTED.value: "#9e9e9e",
}


class SimpleQABenchmark:
    """Grading and reporting for SimpleQA.

    Args:
        grader: grades answers; ``None`` only for re-reporting an existing folder.
    """

    name = "simpleqa"

    def __init__(self, grader: Grader | None = None) -> None:
        self.grader = grader

    async def judge(self, attempt: Attempt) -> dict[str, Any]:
        """The record for one question, graded (never raises: a grading failure is an error)."""
        task = attempt.task
        prediction = strip_final_answer(attempt.result.answer) if attempt.result else ""
        grading: dict[str, Any] = {
            "grade": Grade.NOT_ATTEMPTED.value,
            "grader_reply": None,
            "grader_model": self.grader.name if self.grader else None,
            "grader_input_tokens": 0,
            "grader_output_tokens": 0,
            "grader_cost_usd": 0.0,
        }
        error = attempt.error
        if error is None and self.grader is not None:
            try:
                graded = await self.grader.grade(task.question, task.truth or "", prediction)
            except Exception as exception:  # the answer stands; only its grade is missing
                error = f"grader: {type(exception).__name__}: {' '.join(str(exception).split())}"
            else:
                grading.update(
                    grade=graded.grade.value,
                    grader_reply=graded.reply,
                    grader_parsed=graded.parsed,
                    grader_input_tokens=graded.input_tokens,
                    grader_output_tokens=graded.output_tokens,
                    grader_cost_usd=graded.cost_usd,
                )
        record = base_record(
            attempt, prediction, topic=task.topic, answer_type=task.answer_type, **grading
        )
        record["error"] = error
        return record

    def is_correct(self, record: Mapping[str, Any]) -> bool | None:
        return record.get("grade") == Grade.CORRECT.value

    def summarize(
        self, records: Sequence[Mapping[str, Any]], run: Mapping[str, Any]
    ) -> dict[str, Any]:
        """SimpleQA's metrics overall and per topic, plus usage and grading costs."""
        topics = sorted({str(r.get("topic") or "unknown") for r in records})
        by_topic = {
            topic: _metrics([r for r in records if str(r.get("topic") or "unknown") == topic])
            for topic in topics
        }
        grading_cost = [r.get("grader_cost_usd") for r in records]
        return {
            "benchmark": "simpleqa",
            "run": dict(run),
            "recorded": len(records),
            **_metrics(records),
            "errors": sum(bool(r.get("error")) for r in records),
            "grader_unparsed": sum(r.get("grader_parsed") is False for r in records),
            "by_topic": by_topic,
            **usage_figures(records),
            "grading": {
                "input_tokens": sum(int(r.get("grader_input_tokens") or 0) for r in records),
                "output_tokens": sum(int(r.get("grader_output_tokens") or 0) for r in records),
                "cost_usd": round(sum(c for c in grading_cost if c is not None), 6),
                "cost_unknown_tasks": sum(c is None for c in grading_cost),
            },
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
        files = [report]
        if summary["recorded"]:
            files.append(_chart(out_dir / CHART_FILE, summary))
        return files


def _metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    grades = [str(r.get("grade") or Grade.NOT_ATTEMPTED.value) for r in records]
    metrics = simpleqa_metrics(grades)
    counts = {grade.value.lower(): grades.count(grade.value) for grade in Grade}
    return {**metrics, "counts": counts}


def _markdown(summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    run = summary["run"]
    counts = summary["counts"]
    grading = summary["grading"]
    overview = [
        *run_lines(run),
        ("questions recorded", f"{summary['recorded']} ({summary['errors']} with errors)"),
        ("correct", f"{percent(summary['correct'])} ({counts['correct']})"),
        ("incorrect", f"{percent(summary['incorrect'])} ({counts['incorrect']})"),
        ("not attempted", f"{percent(summary['not_attempted'])} ({counts['not_attempted']})"),
        ("accuracy given attempted", percent(summary["accuracy_given_attempted"])),
        ("F1", f"{summary['f1']:.3f}"),
        *usage_lines(summary),
        (
            "grading cost",
            describe_cost(grading["cost_usd"], grading["cost_unknown_tasks"], summary["recorded"])
            + " (included in cost above)",
        ),
    ]
    if summary["grader_unparsed"]:
        overview.append(
            ("grader replies without a grade", f"{summary['grader_unparsed']} (counted as C)")
        )
    parts = [
        f"# SimpleQA results: {run.get('mode', '?')} mode",
        markdown_table(["", ""], overview, cell_limit=None),
    ]
    if len(summary["by_topic"]) > 1:
        rows = [
            [
                topic,
                data["count"],
                percent(data["correct"]),
                percent(data["incorrect"]),
                percent(data["not_attempted"]),
                percent(data["accuracy_given_attempted"]),
                f"{data['f1']:.3f}",
            ]
            for topic, data in summary["by_topic"].items()
        ]
        headers = [
            "topic",
            "questions",
            "correct",
            "incorrect",
            "not attempted",
            "acc. given att.",
            "F1",
        ]
        parts += ["## By topic", markdown_table(headers, rows)]
    if summary["failed_tasks"]:
        parts += [
            "## Errors",
            "\n".join(f"- `{f['task_id']}`: {f['error']}" for f in summary["failed_tasks"]),
        ]
    rows = [
        [r["task_id"], r.get("question"), r.get("prediction"), r.get("truth"), r.get("grade")]
        for r in records
    ]
    parts += [
        "## Questions",
        markdown_table(["task", "question", "prediction", "gold", "grade"], rows),
    ]
    return "\n\n".join(parts) + "\n"


def _chart(path: Path, summary: Mapping[str, Any]) -> Path:
    groups = [("all", summary), *summary["by_topic"].items()]
    return bar_chart(
        path,
        title=f"SimpleQA grades ({summary['run'].get('mode', '?')} mode)",
        categories=[name for name, _ in groups],
        stacks={grade.value: [data[grade.value.lower()] for _, data in groups] for grade in Grade},
        colors=_GRADE_COLORS,
        labels=[f"F1 {data['f1']:.2f}" for _, data in groups],
    )


# ---------------------------------------------------------------- running


def plan_simpleqa(
    data: Path,
    *,
    sample_fraction: float | None = None,
    seed: int = KGOT_SEED,
    limit: int | None = None,
) -> list[BenchTask]:
    """The selected questions: all of them, or a seeded sample; then the first ``limit``.

    Raises:
        DatasetError: the CSV cannot be used.
        UsageError: a fraction outside (0, 1] or a negative limit.
    """
    from kgot.benchmarks.datasets import select_tasks

    tasks = load_simpleqa(data)
    if sample_fraction is None:
        return select_tasks(tasks, limit=limit)
    return sample_tasks(tasks, sample_fraction, seed, limit=limit)


def _with_grader(settings: Settings, model: str | None, base_url: str | None) -> Settings:
    """``settings`` with the grader's model and endpoint overridden where given.

    Raises:
        UsageError: an endpoint without a grader model (whose model would it serve?).
    """
    if base_url and not (model or settings.llm.grader.model):
        raise UsageError(
            "--grader-base-url needs a grader model: pass --grader-model (or set "
            "KGOT_GRADER_MODEL) too"
        )
    update = {key: value for key, value in (("model", model), ("base_url", base_url)) if value}
    if not update:
        return settings
    grader = settings.llm.grader.model_copy(update=update)
    return settings.model_copy(update={"llm": settings.llm.model_copy(update={"grader": grader})})


def run_simpleqa(
    data: Path,
    *,
    settings: Settings,
    out_dir: Path,
    sample_fraction: float | None = None,
    seed: int = KGOT_SEED,
    limit: int | None = None,
    mode: Mode = "kgot",
    grader_model: str | None = None,
    grader_base_url: str | None = None,
    concurrency: int = 1,
    timeout: float | None = None,
    retry_errors: bool = False,
    db: str | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    grader: BaseChatModel | None = None,
    answer: AnswerFn | None = None,
    progress: ProgressView | None = None,
) -> BenchOutcome:
    """Run SimpleQA questions into ``out_dir`` (resuming what it holds) and write the reports.

    Args:
        data: the SimpleQA CSV.
        settings: configuration (models, controller, sandbox, tools).
        out_dir: output folder; an existing one is resumed by ``task_id``.
        sample_fraction, seed: a seeded random sample (KGoT: 0.1 and 123456).
        limit: keep the first ``limit`` selected questions.
        mode: ``kgot`` (the controller) or ``direct`` (the plain planning model).
        grader_model: ``provider:name`` of the grader, overriding ``[llm.grader] model``
            (default: the planning model, with a warning on stderr that it grades itself).
        grader_base_url: the grader's endpoint, overriding ``[llm.grader] base_url``.
        concurrency: questions in flight at once.
        timeout: seconds per question (grading not included).
        retry_errors: re-run recorded questions that failed.
        db: store for the runs' checkpoints (default ``out_dir/runs.db``).
        models: injected chat models per role (tests).
        grader: an injected grader chat model (tests).
        answer: replaces the answering function entirely (tests).
        progress: progress display (default: a bar on stderr).

    Raises:
        DatasetError, UsageError, ConfigError, BenchStopped, BenchInterrupted: see
            :func:`run_benchmark`.
    """
    tasks = plan_simpleqa(data, sample_fraction=sample_fraction, seed=seed, limit=limit)
    check_run_options(concurrency=concurrency, timeout=timeout)
    settings = _with_grader(run_settings(settings, out_dir, db=db), grader_model, grader_base_url)
    if answer is None:
        check_models(settings, mode, models)
        answer = (
            kgot_answerer(settings, models=models)
            if mode == "kgot"
            else direct_answerer(settings, models=models)
        )
    names = model_names(settings, models)
    if grader is None and not settings.llm.grader.model:
        grader = (models or {}).get("planning")  # an injected planning model grades itself
    judge = Grader(settings, model=grader)
    if judge.grades_itself and grader is (models or {}).get("planning"):
        sys.stderr.write(
            f"kgot: warning: the planning model {judge.name} grades its own answers; pass "
            "--grader-model (or set KGOT_GRADER_MODEL) for an independent grader\n"
        )
    manifest = {
        "benchmark": "simpleqa",
        "mode": mode,
        "models": {
            **(names if mode == "kgot" else {"planning": names["planning"]}),
            "grader": judge.name,
        },
        "grader_endpoint": judge.endpoint,
        "dataset": dataset_identity(data),
        "sample": {"fraction": sample_fraction, "seed": seed} if sample_fraction else None,
        **answer_identity(settings, mode),
        "kgot_version": __version__,
    }
    return run_benchmark(
        SimpleQABenchmark(judge),
        tasks,
        answer=answer,
        out_dir=out_dir,
        manifest=manifest,
        concurrency=concurrency,
        timeout=timeout,
        retry_errors=retry_errors,
        progress=progress,
    )
