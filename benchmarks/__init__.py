"""Benchmarks: GAIA and SimpleQA harnesses, their scorers, and performance scripts.

Harnesses: :func:`run_gaia` and :func:`run_simpleqa` (``kgot bench gaia|simpleqa``) ask every
selected question, score it, append one JSONL record per task and write a summary, a markdown
report and a chart; an interrupted run resumes by ``task_id``. Scorers live in
:mod:`kgot.benchmarks.answer_scoring`.

Performance scripts are modules ``kgot.benchmarks.perf_<area>`` runnable with
``python -m kgot.benchmarks.perf_<area>``; each exposes ``run(quick: bool = False) ->
list[Figure]`` so one runner (:mod:`kgot.benchmarks.run_all`) prints every figure (see
:mod:`kgot.benchmarks.figures`).

Names are loaded on first use: importing this package (as every perf script does) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.benchmarks.datasets import BenchTask, load_gaia, load_simpleqa
    from kgot.benchmarks.figures import Figure, perf_main, print_figures
    from kgot.benchmarks.gaia import GaiaBenchmark, plan_gaia, run_gaia
    from kgot.benchmarks.harness import (
        BenchInterrupted,
        BenchOutcome,
        check_run_options,
        split_recorded,
        write_outputs,
    )
    from kgot.benchmarks.progress import ProgressView
    from kgot.benchmarks.report import describe_cost
    from kgot.benchmarks.results import (
        MANIFEST_FILE,
        RESULTS_FILE,
        ResultsLog,
        check_out_dir,
        read_manifest,
    )
    from kgot.benchmarks.run_all import execute as run_perf
    from kgot.benchmarks.run_all import report_exit_code
    from kgot.benchmarks.scoring import (
        Grade,
        gaia_question_scorer,
        simpleqa_metrics,
        strip_final_answer,
    )
    from kgot.benchmarks.simpleqa import SimpleQABenchmark, plan_simpleqa, run_simpleqa

__all__ = [
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "BenchInterrupted",
    "BenchOutcome",
    "BenchTask",
    "Figure",
    "GaiaBenchmark",
    "Grade",
    "ProgressView",
    "ResultsLog",
    "SimpleQABenchmark",
    "check_out_dir",
    "check_run_options",
    "describe_cost",
    "gaia_question_scorer",
    "load_gaia",
    "load_simpleqa",
    "perf_main",
    "plan_gaia",
    "plan_simpleqa",
    "print_figures",
    "read_manifest",
    "report_exit_code",
    "run_gaia",
    "run_perf",
    "run_simpleqa",
    "simpleqa_metrics",
    "split_recorded",
    "strip_final_answer",
    "write_outputs",
]

_HOME = {
    "BenchInterrupted": "harness",
    "BenchOutcome": "harness",
    "BenchTask": "datasets",
    "Figure": "figures",
    "GaiaBenchmark": "gaia",
    "Grade": "scoring",
    "MANIFEST_FILE": "results",
    "ProgressView": "progress",
    "RESULTS_FILE": "results",
    "ResultsLog": "results",
    "SimpleQABenchmark": "simpleqa",
    "check_out_dir": "results",
    "check_run_options": "harness",
    "describe_cost": "report",
    "gaia_question_scorer": "scoring",
    "load_gaia": "datasets",
    "load_simpleqa": "datasets",
    "perf_main": "figures",
    "plan_gaia": "gaia",
    "plan_simpleqa": "simpleqa",
    "print_figures": "figures",
    "read_manifest": "results",
    "report_exit_code": "run_all",
    "run_gaia": "gaia",
    "run_perf": "run_all",
    "run_simpleqa": "simpleqa",
    "simpleqa_metrics": "scoring",
    "split_recorded": "harness",
    "strip_final_answer": "scoring",
    "write_outputs": "harness",
}

_ATTRIBUTE = {"run_perf": "execute"}  # exported under a name that says what it runs


__getattr__ = lazy_exports(
    __name__, {name: f".{home}:{_ATTRIBUTE.get(name, name)}" for name, home in _HOME.items()}
)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
