"""What the benchmark harness itself costs, apart from the model: per-task bookkeeping,
scoring, resuming a large results file, and writing the reports.

    python -m kgot.benchmarks.perf_harness [--quick] [--json]

The answering function returns at once, so every millisecond measured here is harness
overhead that a real run adds on top of its model calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kgot.benchmarks.datasets import BenchTask
from kgot.benchmarks.figures import Figure, print_figures
from kgot.tracing import TraceEvent, Vote, Votes

__all__ = ["run"]

AREA = "harness"  # the name `--only` selects it by (perf_harness)
# Shaped like real records: a small final graph and a short trace.
_GRAPH = {
    "directed": True,
    "multigraph": True,
    "nodes": [{"id": f"n{i}", "label": "Fact", "text": "x" * 80} for i in range(12)],
    "edges": [{"source": f"n{i}", "target": f"n{i + 1}", "key": 0} for i in range(11)],
}
_TRACE: list[TraceEvent] = [
    Votes(
        iteration=i, votes=[Vote(decision="INSERT", reason="more")], decision="INSERT", forced=False
    )
    for i in range(6)
]


def _tasks(count: int) -> list[BenchTask]:
    return [
        BenchTask(
            task_id=f"task-{i:05d}",
            question=f"Question {i}: how many legs does a spider have?",
            truth="8",
            index=i,
            level=1 + i % 3,
        )
        for i in range(count)
    ]


def _bookkeeping_ms_per_task(folder: Path, count: int, concurrency: int) -> float:
    from kgot.benchmarks.gaia import GaiaBenchmark
    from kgot.benchmarks.harness import run_tasks
    from kgot.benchmarks.results import ResultsLog
    from kgot.controller import AskResult

    async def answer(task: BenchTask) -> AskResult:
        return AskResult(
            answer="FINAL ANSWER: 8", run_id=task.task_id, status="answered", graph=_GRAPH,
            trace=_TRACE, cost_usd=0.0,
        )  # fmt: skip

    log = ResultsLog(folder / "bookkeeping.jsonl")
    started = time.perf_counter()
    asyncio.run(
        run_tasks(
            _tasks(count),
            answer=answer,
            judge=GaiaBenchmark().judge,
            log=log,
            concurrency=concurrency,
        )
    )
    return (time.perf_counter() - started) * 1000 / count


def _scorer_us_per_call(rounds: int) -> float:
    from kgot.benchmarks.answer_scoring import gaia_question_scorer

    cases = [
        ("$1,234", "1234"),
        ("Sea Gull, TERN, 3", "seagull, tern, 3"),
        ("The Beatles", "Beatles"),
        ("17 thousand", "17"),
    ]
    started = time.perf_counter()
    for _ in range(rounds):
        for answer, truth in cases:
            gaia_question_scorer(answer, truth)
    return (time.perf_counter() - started) * 1e6 / (rounds * len(cases))


def _resume_load_ms(folder: Path, count: int) -> float:
    import json

    from kgot.benchmarks.harness import Attempt, base_record
    from kgot.benchmarks.results import ResultsLog
    from kgot.controller import AskResult

    path = folder / "resume.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for task in _tasks(count):
            result = AskResult(
                answer="8", run_id=task.task_id, status="answered", graph=_GRAPH, trace=_TRACE
            )
            record = base_record(Attempt(task, result, None, 1.0), "8", level=task.level)
            handle.write(json.dumps(record) + "\n")
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        ResultsLog(path).load()
        timings.append((time.perf_counter() - started) * 1000)
    return min(timings)


def _report_ms(folder: Path, count: int) -> float:
    from kgot.benchmarks.gaia import GaiaBenchmark
    from kgot.benchmarks.harness import write_outputs
    from kgot.benchmarks.results import RESULTS_FILE

    out = folder / "report"
    out.mkdir()
    source = folder / "round0" / "bookkeeping.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()[:count]
    (out / RESULTS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_outputs(GaiaBenchmark(), out)  # warm: matplotlib's first import is not the report
    started = time.perf_counter()
    write_outputs(GaiaBenchmark(), out)
    return (time.perf_counter() - started) * 1000


def run(quick: bool = False) -> list[Figure]:
    """Measure the harness; ``quick`` uses fewer tasks and rounds."""
    tasks = 100 if quick else 1000
    with tempfile.TemporaryDirectory(prefix="kgot-perf-harness-") as temporary:
        folder = Path(temporary)
        rounds = []
        for number in range(1 if quick else 3):
            round_folder = folder / f"round{number}"
            round_folder.mkdir()
            rounds.append(_bookkeeping_ms_per_task(round_folder, tasks, concurrency=8))
        per_task = statistics.median(rounds)
        figures = [
            Figure(AREA, "bookkeeping per task (judge + durable append)", per_task, "ms"),
            Figure(AREA, "GAIA scorer per call", _scorer_us_per_call(rounds=tasks * 20), "µs"),
            Figure(AREA, "resume: load 4,326 records", _resume_load_ms(folder, 4326), "ms"),
            Figure(AREA, "summary + report + chart for 165 tasks", _report_ms(folder, 165), "ms"),
        ]
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgot.benchmarks.perf_harness")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    print_figures(run(quick=args.quick), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
