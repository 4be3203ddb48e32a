"""`python -m kgot.benchmarks.perf_aides` measures a real cycle: its figures come from items
that were ingested (a cycle that ingested nothing would make the per-item cost meaningless)."""

from __future__ import annotations

import pytest

from kgot.benchmarks import perf_aides


@pytest.mark.slow
def test_the_figures_come_from_a_cycle_that_ingested_every_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cycles = []
    original = perf_aides.create_aide

    def watched(*args: object, **kwargs: object) -> object:
        aide = original(*args, **kwargs)  # type: ignore[arg-type]
        run_cycle = aide.run_cycle

        def recorded(*a: object, **k: object) -> object:
            report = run_cycle(*a, **k)  # type: ignore[arg-type]
            cycles.append(report)
            return report

        aide.run_cycle = recorded  # type: ignore[method-assign]
        return aide

    monkeypatch.setattr(perf_aides, "create_aide", watched)

    figures = perf_aides.measure(200, items=3)

    assert [cycle.ingested for cycle in cycles] == [1, 3, 0]
    assert [f.unit for f in figures] == ["ms"] * 5  # item, first cycle, idle, upkeep, waiting
    assert figures[0].target == 50 and figures[0].value > 0
