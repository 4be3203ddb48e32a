"""The figures performance scripts report, and how they are printed."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
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


# Lines stay this wide at most, whatever the terminal: longer ones are hard to scan.
MAX_WIDTH = 100
_MIN_NAME_WIDTH = 24
_INDENT = "  "


def print_figures(
    figures: Sequence[Figure], *, as_json: bool = False, width: int | None = None
) -> None:
    """A table on stdout (or JSON lines), marking each target as met or missed; ``width``
    defaults to the terminal's (``$COLUMNS``), at most :data:`MAX_WIDTH`."""
    if as_json:
        for figure in figures:
            sys.stdout.write(json.dumps({**asdict(figure), "ok": figure.meets_target}) + "\n")
        return
    if width is None:
        width = min(shutil.get_terminal_size((MAX_WIDTH, 24)).columns, MAX_WIDTH)
    for line in format_figures(figures, width=width):
        sys.stdout.write(line + "\n")


def format_figures(figures: Sequence[Figure], *, width: int = MAX_WIDTH) -> list[str]:
    """The figures as lines of at most ``width`` characters: a heading per area, then one
    row per figure (its name, wrapped when long, the value and unit right-aligned, and the
    verdict on its target), the columns lined up across areas."""
    values = [_value(figure) for figure in figures]
    verdicts = [_verdict(figure) for figure in figures]
    value_width = max((len(value) for value in values), default=0)
    verdict_width = max((len(verdict) for verdict in verdicts), default=0)
    gaps = 2 + (2 if verdict_width else 0)
    name_width = max(width - len(_INDENT) - value_width - verdict_width - gaps, _MIN_NAME_WIDTH)
    lines: list[str] = []
    area = None
    for figure, value, verdict in zip(figures, values, verdicts, strict=True):
        if figure.area != area:
            area = figure.area
            lines.append(area)
        names = textwrap.wrap(figure.name, name_width, break_on_hyphens=False) or [""]
        row = f"{_INDENT}{names[0]:<{name_width}}  {value:>{value_width}}"
        if verdict:
            row += f"  {verdict}"
        lines.append(row.rstrip())
        lines += [
            f"{_INDENT}  {more}"
            for more in textwrap.wrap(" ".join(names[1:]), name_width - 2, break_on_hyphens=False)
        ]
    return lines


def _value(figure: Figure) -> str:
    number = f"{figure.value:,.3f}".rstrip("0").rstrip(".")
    return f"{number} {figure.unit}"


def _verdict(figure: Figure) -> str:
    if figure.target is None:
        return ""
    sign = "≤" if figure.direction == "max" else "≥"
    verdict = "ok" if figure.meets_target else "MISSED"
    return f"{verdict} ({sign} {figure.target:g})"  # the unit is the value's, just before


def p95(values: Sequence[float]) -> float:
    """The 95th percentile of ``values`` (nearest rank: a value that was measured)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


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
