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

import importlib
from typing import Any

__all__ = [
    "BenchInterrupted",
    "BenchOutcome",
    "BenchTask",
    "Figure",
    "Grade",
    "gaia_question_scorer",
    "load_gaia",
    "load_simpleqa",
    "print_figures",
    "run_gaia",
    "run_simpleqa",
    "simpleqa_metrics",
    "strip_final_answer",
]

_HOME = {
    "BenchInterrupted": "harness",
    "BenchOutcome": "harness",
    "BenchTask": "datasets",
    "Figure": "figures",
    "Grade": "scoring",
    "gaia_question_scorer": "scoring",
    "load_gaia": "datasets",
    "load_simpleqa": "datasets",
    "print_figures": "figures",
    "run_gaia": "gaia",
    "run_simpleqa": "simpleqa",
    "simpleqa_metrics": "scoring",
    "strip_final_answer": "scoring",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
