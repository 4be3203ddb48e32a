"""`python -m kgot.benchmarks.perf_memory` at a tiny size: every figure is printed, with the
targets of issue 15 beside the ones that have one (timings are not asserted)."""

from __future__ import annotations

import pytest

from kgot.benchmarks import perf_memory
from kgot.benchmarks.figures import print_figures


@pytest.mark.slow
def test_perf_memory_prints_every_figure_at_a_tiny_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    figures = perf_memory.measure(300, queries=20, commits=3)
    names = [figure.name for figure in figures]
    assert all(figure.area == "memory" for figure in figures)
    assert names[:3] == [
        "resolution precision (labelled set)",
        "resolution recall (labelled set)",
        "SQLite: memory resolve over 300 nodes (dry run)",
    ]
    targets = {figure.name: figure.target for figure in figures if figure.target is not None}
    assert targets == {
        "resolution precision (labelled set)": 0.97,
        "resolution recall (labelled set)": 0.85,
        "SQLite: memory resolve over 300 nodes (dry run)": 3.0,
        "SQLite: memory search at 300 nodes / 300 edges, warm p95": 50.0,
        "write-time resolution per commit at 300 nodes, p50 (prepare_changeset)": 5.0,
    }
    assert len(figures) == 14 and all(figure.value >= 0 for figure in figures)
    precision, recall = figures[0].value, figures[1].value
    assert precision >= 0.97 and recall >= 0.85  # quality, unlike speed, does not vary

    print_figures(figures)
    out = capsys.readouterr().out
    assert out.startswith("memory\n")
    assert "  SQLite: memory search at 300 nodes / 300 edges, warm p95 " in out
    assert "(≤ 50)" in out
