"""Figures and report pieces both benchmarks share: usage totals, latency, markdown, charts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgot.benchmarks.progress import record_cost
from kgot.benchmarks.results import write_atomic

__all__ = [
    "bar_chart",
    "describe_cost",
    "error_list",
    "markdown_table",
    "percent",
    "ratio",
    "run_lines",
    "usage_figures",
    "usage_lines",
]


def ratio(part: int, whole: int) -> float | None:
    """``part / whole``, or ``None`` when there is nothing to divide by."""
    return part / whole if whole else None


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _nearest_rank(sorted_values: Sequence[float], quantile: float) -> float:
    rank = max(1, math.ceil(quantile * len(sorted_values)))
    return sorted_values[rank - 1]


def usage_figures(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Token, cost, call and latency totals over ``records``.

    ``cost_usd`` sums every known cost (answering and, for SimpleQA, grading);
    ``cost_unknown_tasks`` counts records whose model price is unknown, so a partial sum is
    never mistaken for the whole.
    """
    durations = sorted(float(r.get("duration_s") or 0.0) for r in records)
    cost = 0.0
    unknown = 0
    for record in records:
        amount, known = record_cost(record)
        cost += amount
        unknown += not known
    count = len(records)
    return {
        "llm_calls": sum(int(r.get("llm_calls") or 0) for r in records),
        "tool_calls": sum(int(r.get("tool_calls") or 0) for r in records),
        "iterations_mean": ratio(sum(int(r.get("iterations") or 0) for r in records), count),
        "tokens": {
            "input": sum(int(r.get("input_tokens") or 0) for r in records),
            "output": sum(int(r.get("output_tokens") or 0) for r in records),
        },
        "cost_usd": round(cost, 6),
        "cost_unknown_tasks": unknown,
        "latency_s": {
            "mean": round(sum(durations) / count, 3) if count else None,
            "p50": _nearest_rank(durations, 0.5) if count else None,
            "p90": _nearest_rank(durations, 0.9) if count else None,
            "max": durations[-1] if count else None,
            "total": round(sum(durations), 3),
        },
    }


def error_list(records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``task_id`` and error of every failed record, in dataset order."""
    failed = [r for r in records if r.get("error")]
    failed.sort(key=lambda r: r.get("index", 0))
    return [{"task_id": r["task_id"], "error": str(r["error"])} for r in failed]


def run_lines(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Report rows describing the experiment (from ``run.json``)."""
    models = run.get("models") or {}
    dataset = run.get("dataset") or {}
    rows = [("mode", str(run.get("mode", "?")))]
    rows += [(f"{role} model", str(name)) for role, name in models.items()]
    if dataset:
        rows.append(("dataset", f"{dataset.get('path')} (sha256 {dataset.get('sha256')})"))
        if dataset.get("split"):
            rows.append(("split", str(dataset["split"])))
    sample = run.get("sample")
    if isinstance(sample, Mapping):
        rows.append(("sample", f"fraction {sample.get('fraction')}, seed {sample.get('seed')}"))
    if "gaia_format" in run:
        rows.append(("GAIA answer format", "on" if run["gaia_format"] else "off"))
    controller = run.get("controller")
    if isinstance(controller, Mapping) and controller:
        rows.append(("controller", ", ".join(f"{k} {v}" for k, v in sorted(controller.items()))))
    if run.get("created_at"):
        rows.append(("started", str(run["created_at"])))
    return rows


def describe_cost(cost_usd: float, unknown: int, tasks: int) -> str:
    """The cost of ``tasks`` tasks when ``unknown`` of them have no known cost: the sum, a
    lower bound, or unknown (a sum over no known cost is not $0)."""
    if not unknown:
        return f"${cost_usd:.4f}"
    if unknown >= tasks:
        return f"unknown (no price known for any of the {tasks} task(s))"
    return f"at least ${cost_usd:.4f} (price unknown for {unknown} of {tasks} task(s))"


def usage_lines(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Report rows for tokens, cost, calls and latency."""
    tokens = summary["tokens"]
    latency = summary["latency_s"]
    cost = describe_cost(summary["cost_usd"], summary["cost_unknown_tasks"], summary["recorded"])
    if summary["cost_unknown_tasks"]:
        cost += (
            ": a run that failed before reporting, or a model with no known price, which "
            '[llm.prices."provider:name"] sets'
        )
    rows = [
        ("tokens", f"{tokens['input']:,} in / {tokens['output']:,} out"),
        ("cost", cost),
        ("LLM calls", f"{summary['llm_calls']:,}"),
        ("tool calls", f"{summary['tool_calls']:,}"),
    ]
    if latency["mean"] is not None:
        rows.append(
            (
                "latency per task",
                f"mean {latency['mean']:.1f} s, p50 {latency['p50']:.1f} s, "
                f"p90 {latency['p90']:.1f} s, max {latency['max']:.1f} s",
            )
        )
    return rows


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, cell_limit: int | None = 80
) -> str:
    """A GitHub-flavoured markdown table; cells are escaped, kept to one line and, with
    ``cell_limit``, cut to that many characters."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_cell(value, cell_limit) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any, limit: int | None) -> str:
    text = " ".join(str("" if value is None else value).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def bar_chart(
    path: Path,
    *,
    title: str,
    categories: Sequence[str],
    stacks: Mapping[str, Sequence[float]],
    colors: Mapping[str, str],
    labels: Sequence[str] = (),
    ylabel: str = "share of questions",
) -> Path:
    """A stacked bar chart (values 0–1, shown as %) written atomically as PNG.

    Args:
        path: where the PNG goes.
        title: chart title.
        categories: one bar each.
        stacks: series name → one value per category, stacked bottom-up in the given order.
        colors: series name → colour.
        labels: text above each bar (e.g. ``"12/40"``).
        ylabel: axis label.
    """
    import io

    # The object-oriented API renders with Agg without touching pyplot's global backend, so
    # a notebook calling the harness keeps its own.
    from matplotlib.figure import Figure as Canvas
    from matplotlib.ticker import PercentFormatter

    figure = Canvas(figsize=(max(5.0, 0.9 * len(categories) + 2.5), 4.6), layout="constrained")
    axes = figure.subplots()
    bottoms = [0.0] * len(categories)
    for name, values in stacks.items():
        axes.bar(categories, values, bottom=bottoms, label=name, color=colors.get(name))
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for x, (top, text) in enumerate(zip(bottoms, labels, strict=False)):
        axes.text(x, top + 0.015, text, ha="center", va="bottom", fontsize=9)
    axes.set_ylim(0, 1.1)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=11)
    if max((len(c) for c in categories), default=0) > 8:
        axes.tick_params(axis="x", labelrotation=30)
        for tick in axes.get_xticklabels():
            tick.set_horizontalalignment("right")
    axes.spines[["top", "right"]].set_visible(False)
    figure.legend(loc="outside lower center", ncols=len(stacks), fontsize=8, frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    write_atomic(path, buffer.getvalue())
    return path
