"""`kgot bench …`: run GAIA and SimpleQA, re-report a run folder, print performance figures."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli.common import print_json, settings_from
from kgot.errors import UsageError

if TYPE_CHECKING:
    from kgot.benchmarks import BenchOutcome, BenchTask, ProgressView

app = typer.Typer(
    help="Benchmarks: GAIA, SimpleQA, and kgot's performance figures.", no_args_is_help=True
)

_MODEL = "Model"
_RUN = "Run"
_SELECT = "Which questions"
_MODES = ("kgot", "direct")
DEFAULT_OUT_ROOT = Path("bench-runs")

# Options every benchmark command shares, declared once.
ModelOption = Annotated[
    str | None,
    typer.Option(
        help="`provider:name` for both roles, e.g. openai:gpt-4o-mini.", rich_help_panel=_MODEL
    ),
]
PlanningOption = Annotated[
    str | None, typer.Option(help="Model for decisions and code.", rich_help_panel=_MODEL)
]
ExecutionOption = Annotated[
    str | None, typer.Option(help="Model for tool calls.", rich_help_panel=_MODEL)
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint (vLLM, Ollama, …).", rich_help_panel=_MODEL),
]
ModeOption = Annotated[
    str,
    typer.Option(
        help="kgot (the KGoT loop) or direct (the plain planning model: the baseline).",
        rich_help_panel=_RUN,
    ),
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        help="Output folder; an existing one is resumed (default: a folder in bench-runs named "
        "after the benchmark and mode).",
        rich_help_panel=_RUN,
    ),
]
ConcurrencyOption = Annotated[
    int,
    typer.Option(
        "--concurrency",
        "-j",
        help="Questions in flight at once (each its own run).",
        rich_help_panel=_RUN,
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(help="Seconds allowed per question (default: no limit).", rich_help_panel=_RUN),
]
RetryOption = Annotated[
    bool,
    typer.Option(
        "--retry-errors", help="Also re-run recorded questions that failed.", rich_help_panel=_RUN
    ),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        help="Store for the runs' checkpoints (default: runs.db in the output folder).",
        rich_help_panel=_RUN,
    ),
]
LimitOption = Annotated[
    int | None, typer.Option(help="Only the first N selected questions.", rich_help_panel=_SELECT)
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print how many questions would run, then exit.",
        rich_help_panel=_SELECT,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]


@app.command("gaia")
def gaia(
    ctx: typer.Context,
    data: Annotated[
        Path,
        typer.Option(
            help="metadata.parquet / metadata.jsonl, its folder, or the dataset root.",
            rich_help_panel=_SELECT,
        ),
    ],
    split: Annotated[
        str | None,
        typer.Option(
            help="validation or test, when --data is the dataset root (default validation); "
            "a metadata file's folder names its split.",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    level: Annotated[
        list[int] | None,
        typer.Option(help="Only this level, 1–3 (repeatable).", rich_help_panel=_SELECT),
    ] = None,
    task_id: Annotated[
        list[str] | None,
        typer.Option(help="Only this task (repeatable).", rich_help_panel=_SELECT),
    ] = None,
    limit: LimitOption = None,
    dry_run: DryRunOption = False,
    mode: ModeOption = "kgot",
    out: OutOption = None,
    concurrency: ConcurrencyOption = 1,
    timeout: TimeoutOption = None,
    retry_errors: RetryOption = False,
    db: DbOption = None,
    gaia_format: Annotated[
        bool,
        typer.Option(
            "--gaia-format/--no-gaia-format",
            help="Ask for answers in GAIA's format (default on).",
            rich_help_panel=_RUN,
        ),
    ] = True,
    model: ModelOption = None,
    planning_model: PlanningOption = None,
    execution_model: ExecutionOption = None,
    base_url: BaseUrlOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run GAIA: strict leaderboard scoring per level, close calls apart, cost and latency."""
    from kgot.benchmarks import check_run_options, plan_gaia, run_gaia

    _check_mode(mode)
    check_run_options(concurrency=concurrency, timeout=timeout)
    plan = plan_gaia(data, split=split, levels=level or (), task_ids=task_id or (), limit=limit)
    out_dir = out or DEFAULT_OUT_ROOT / f"gaia-{plan.split}-{mode}"
    if dry_run:
        by_level: dict[str, int] = {}
        for task in plan.tasks:
            by_level[str(task.level)] = by_level.get(str(task.level), 0) + 1
        _print_plan(
            {
                "benchmark": "gaia",
                "dataset": str(plan.metadata),
                "split": plan.split,
                "selected": len(plan.tasks),
                "by_level": dict(sorted(by_level.items())),
                "with_attachment": sum(task.attachment is not None for task in plan.tasks),
            },
            plan.tasks,
            out_dir,
            retry_errors,
            as_json,
        )
        return
    settings = settings_from(
        ctx, _model_overrides(model, planning_model, execution_model, base_url)
    )
    outcome = run_gaia(
        data,
        settings=settings,
        out_dir=out_dir,
        split=split,
        levels=level or (),
        task_ids=task_id or (),
        limit=limit,
        mode=mode,  # type: ignore[arg-type]
        concurrency=concurrency,
        timeout=timeout,
        retry_errors=retry_errors,
        db=db,
        gaia_format=gaia_format,
        progress=_progress(quiet),
    )
    _print_outcome(outcome, as_json)


@app.command("simpleqa")
def simpleqa(
    ctx: typer.Context,
    data: Annotated[
        Path,
        typer.Option(help="The SimpleQA CSV (metadata,problem,answer).", rich_help_panel=_SELECT),
    ],
    sample_fraction: Annotated[
        float | None,
        typer.Option(
            help="Random sample of this share of the questions (KGoT: 0.1).",
            rich_help_panel=_SELECT,
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the sample (KGoT: 123456).", rich_help_panel=_SELECT)
    ] = 123456,
    limit: LimitOption = None,
    dry_run: DryRunOption = False,
    mode: ModeOption = "kgot",
    grader_model: Annotated[
        str | None,
        typer.Option(
            help="`provider:name` of the grader (default: the llm.grader settings, else the "
            "planning model grades itself).",
            rich_help_panel=_MODEL,
        ),
    ] = None,
    grader_base_url: Annotated[
        str | None,
        typer.Option(
            help="The grader's OpenAI-compatible endpoint (default: llm.grader.base_url).",
            rich_help_panel=_MODEL,
        ),
    ] = None,
    out: OutOption = None,
    concurrency: ConcurrencyOption = 1,
    timeout: TimeoutOption = None,
    retry_errors: RetryOption = False,
    db: DbOption = None,
    model: ModelOption = None,
    planning_model: PlanningOption = None,
    execution_model: ExecutionOption = None,
    base_url: BaseUrlOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run SimpleQA: a grader model grades each answer; SimpleQA's F1 and accuracy figures."""
    from kgot.benchmarks import check_run_options, plan_simpleqa, run_simpleqa

    _check_mode(mode)
    check_run_options(concurrency=concurrency, timeout=timeout)
    out_dir = out or DEFAULT_OUT_ROOT / f"simpleqa-{mode}"
    if dry_run:
        tasks = plan_simpleqa(data, sample_fraction=sample_fraction, seed=seed, limit=limit)
        _print_plan(
            {
                "benchmark": "simpleqa",
                "dataset": str(data),
                "selected": len(tasks),
                "sample_fraction": sample_fraction,
                "seed": seed if sample_fraction is not None else None,
            },
            tasks,
            out_dir,
            retry_errors,
            as_json,
        )
        return
    settings = settings_from(
        ctx, _model_overrides(model, planning_model, execution_model, base_url)
    )
    outcome = run_simpleqa(
        data,
        settings=settings,
        out_dir=out_dir,
        sample_fraction=sample_fraction,
        seed=seed,
        limit=limit,
        mode=mode,  # type: ignore[arg-type]
        grader_model=grader_model,
        grader_base_url=grader_base_url,
        concurrency=concurrency,
        timeout=timeout,
        retry_errors=retry_errors,
        db=db,
        progress=_progress(quiet),
    )
    _print_outcome(outcome, as_json)


@app.command("report")
def report(
    out: Annotated[Path, typer.Argument(help="A benchmark output folder.")],
    as_json: JsonOption = False,
) -> None:
    """Rewrite the summary, report and chart of an output folder from its results.jsonl."""
    from kgot.benchmarks import (
        MANIFEST_FILE,
        GaiaBenchmark,
        SimpleQABenchmark,
        read_manifest,
        write_outputs,
    )

    if not out.is_dir():
        raise UsageError(f"{out} is not a folder; pass the --out folder of a benchmark run")
    kind = read_manifest(out).get("benchmark")
    benchmarks = {"gaia": GaiaBenchmark, "simpleqa": SimpleQABenchmark}
    if kind not in benchmarks:
        raise UsageError(
            f"{out} has no {MANIFEST_FILE} naming gaia or simpleqa; pass the --out folder "
            "of a benchmark run"
        )
    # Read only (repair=False): a run may be appending to the folder while this reports on it.
    _print_outcome(write_outputs(benchmarks[kind](), out, repair=False), as_json)


@app.command("perf")
def perf(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="Short runs (a smoke check).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            help="Only this area: kgot's aides, controller, harness, mcp, memory, resolution, "
            "sandbox, scale, store, tools, views, or an installed package's (repeatable; an "
            "unknown area lists them all)."
        ),
    ] = None,
    sandbox: Annotated[
        str | None,
        typer.Option(
            help="Sandbox for the jobs measured: auto | bwrap | fallback | docker | subprocess "
            "(default: KGOT_SANDBOX / config)."
        ),
    ] = None,
) -> None:
    """Print every performance figure (all perf scripts), each target marked met or missed.

    Exit status: 0 all met, 1 a target missed, 2 a script failed.
    """
    from kgot.benchmarks import report_exit_code, run_perf

    kind = settings_from(ctx, {"sandbox.kind": sandbox}).sandbox.kind
    report = run_perf(quick=quick, as_json=as_json, only=only or (), sandbox=kind)
    code = report_exit_code(report)
    if code:
        raise typer.Exit(code)


# ---------------------------------------------------------------- helpers


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise UsageError(f"--mode must be kgot or direct, got {mode!r}")


def _model_overrides(
    model: str | None, planning: str | None, execution: str | None, base_url: str | None
) -> dict[str, Any]:
    return {
        "llm.model": model,
        "llm.planning.model": planning,
        "llm.execution.model": execution,
        "llm.base_url": base_url,
    }


def _progress(quiet: bool) -> ProgressView:
    from kgot.benchmarks import ProgressView

    return ProgressView(enabled=not quiet)


def _print_plan(
    plan: dict[str, Any], tasks: list[BenchTask], out_dir: Path, retry_errors: bool, as_json: bool
) -> None:
    from kgot.benchmarks import RESULTS_FILE, ResultsLog, check_out_dir, split_recorded

    check_out_dir(out_dir)
    # Read only: a run may be appending to this folder right now (its last line may be a
    # record in the middle of being written, which is left out, never cut).
    recorded = ResultsLog(out_dir / RESULTS_FILE).load(repair=False)
    pending, done = split_recorded(tasks, recorded, retry_errors=retry_errors)
    plan.update(out=str(out_dir), recorded=len(done), to_run=len(pending))
    if as_json:
        print_json(plan)
        return
    details = ""
    if plan.get("by_level"):
        details = " (" + ", ".join(f"level {k}: {v}" for k, v in plan["by_level"].items()) + ")"
    sys.stdout.write(
        f"{plan['selected']} question(s) selected from {plan['dataset']}{details}; "
        f"{plan['recorded']} already recorded in {out_dir}; {plan['to_run']} to run\n"
    )


def _print_outcome(outcome: BenchOutcome, as_json: bool) -> None:
    from kgot.benchmarks import describe_cost

    summary = outcome.summary
    if as_json:
        print_json({**summary, "files": [str(path) for path in outcome.files]})
        return
    lines = [f"{summary['benchmark']}: {summary['recorded']} task(s) recorded in {outcome.out_dir}"]
    if summary["benchmark"] == "gaia":
        lines.append(_gaia_headline(summary))
    else:
        lines.append(
            f"correct {summary['correct']:.1%}, incorrect {summary['incorrect']:.1%}, "
            f"not attempted {summary['not_attempted']:.1%}, "
            f"accuracy given attempted {summary['accuracy_given_attempted']:.1%}, "
            f"F1 {summary['f1']:.3f}"
        )
    cost = describe_cost(summary["cost_usd"], summary["cost_unknown_tasks"], summary["recorded"])
    lines.append(
        f"errors {summary['errors']}; tokens {summary['tokens']['input']:,} in / "
        f"{summary['tokens']['output']:,} out; cost {cost}"
    )
    lines.append("files: " + ", ".join(str(path) for path in outcome.files))
    sys.stdout.write("\n".join(lines) + "\n")


def _gaia_headline(summary: Mapping[str, Any]) -> str:
    if not summary["scored"]:
        return "no ground truth in this split: submit submission.jsonl to the leaderboard"
    levels = ", ".join(
        f"level {level} {data['accuracy']:.1%}"
        for level, data in summary["by_level"].items()
        if data["accuracy"] is not None
    )
    return (
        f"strict accuracy {summary['accuracy']:.1%} ({summary['correct']}/{summary['scored']})"
        f"; {levels}; near misses (not counted) {summary['near_misses']}"
    )
