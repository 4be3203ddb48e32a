"""The figures performance scripts report, and how they are printed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Direction = Literal["max", "min"]


@dataclass(frozen=True)
class Figure:
    """One measured number, optionally checked against a target.

    Attributes:
        area: which part of kgot it measures ("controller", "harness", "sandbox", "store",
            "tools", "views"); `--only` selects scripts by it.
        name: what was measured, e.g. "warm graph update p50".
        value: the measurement.
        unit: "ms", "s", "tokens", "ratio", …
        target: the goal, if the issues set one.
        direction: "max" when the value must stay at or below the target, "min" at or above.
    """

    area: str
    name: str
    value: float
    unit: str
    target: float | None = None
    direction: Direction = "max"

    @property
    def meets_target(self) -> bool | None:
        if self.target is None:
            return None
        return self.value <= self.target if self.direction == "max" else self.value >= self.target


def print_figures(figures: Sequence[Figure], *, as_json: bool = False) -> None:
    """A table on stdout (or JSON lines), marking each target as met or missed."""
    if as_json:
        for figure in figures:
            sys.stdout.write(json.dumps({**asdict(figure), "ok": figure.meets_target}) + "\n")
        return
    width = max((len(f"{f.area}: {f.name}") for f in figures), default=10)
    for figure in figures:
        label = f"{figure.area}: {figure.name}".ljust(width)
        value = f"{figure.value:,.3f}".rstrip("0").rstrip(".")
        line = f"{label}  {value} {figure.unit}"
        if figure.target is not None:
            sign = "≤" if figure.direction == "max" else "≥"
            verdict = "ok" if figure.meets_target else "MISSED"
            line += f"   (target {sign} {figure.target:g} {figure.unit}: {verdict})"
        sys.stdout.write(line + "\n")


def perf_main(
    run: Callable[..., Sequence[Figure]],
    *,
    prog: str,
    quick_help: str,
    argv: Sequence[str] | None = None,
) -> int:
    """The command line every plain perf script has: ``--quick`` (``quick_help`` says what it
    measures instead) and ``--json``; prints ``run(quick=…)``'s figures."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", action="store_true", help="JSON lines")
    args = parser.parse_args(argv)
    print_figures(run(quick=args.quick), as_json=args.json)
    return 0
