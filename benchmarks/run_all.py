"""Every performance figure kgot tracks, from one command.

Runs each ``kgot.benchmarks.perf_<area>`` module present (controller overhead, views, sandbox,
store, …) and prints all their figures with :func:`~kgot.benchmarks.figures.print_figures`,
marking each target met or missed::

    python -m kgot.benchmarks.run_all [--quick] [--json] [--only AREA ...] [--sandbox KIND]

Scripts that run sandbox jobs take the sandbox kind (a ``sandbox`` parameter of their ``run``):
``--sandbox``, else ``sandbox.kind`` from the settings (``KGOT_SANDBOX``, the config file).
A script that fails is reported on stderr and the others still run. The exit status is 0 when
every script ran and every target was met, 1 when a target was missed, 2 when a script failed.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgot.benchmarks.figures import Figure, print_figures
from kgot.errors import KgotError

__all__ = ["PerfReport", "discover", "main", "run_all"]

PREFIX = "perf_"


@dataclass
class PerfReport:
    """What :func:`run_all` measured.

    Attributes:
        figures: every figure, in script order.
        failures: script name → one line saying why it produced no figures.
        seconds: script name → how long it took.
    """

    figures: list[Figure] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def missed(self) -> list[Figure]:
        return [figure for figure in self.figures if figure.meets_target is False]


def discover() -> list[str]:
    """Names of the ``perf_*`` modules in this package, sorted."""
    import kgot.benchmarks as package

    return sorted(
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if info.name.startswith(PREFIX) and not info.ispkg
    )


def run_all(
    *,
    quick: bool = False,
    only: Sequence[str] = (),
    on_start: Callable[[str], object] | None = None,
    sandbox: str = "auto",
) -> PerfReport:
    """Import and run every perf script (or those whose area is in ``only``).

    Args:
        quick: ask each script for its short version.
        only: areas (``controller``, ``sandbox``, …) or module names to run.
        on_start: called with each module name before it runs.
        sandbox: the sandbox kind for scripts that run sandbox jobs.

    Raises:
        UsageError: an area in ``only`` has no script.
    """
    available = discover()
    wanted = {name.removeprefix(PREFIX) for name in only}
    unknown = sorted(wanted - {name.removeprefix(PREFIX) for name in available})
    if unknown:
        from kgot.errors import UsageError

        listed = ", ".join(name.removeprefix(PREFIX) for name in available) or "none"
        raise UsageError(f"no perf script for area {unknown[0]!r} (available: {listed})")
    report = PerfReport()
    for name in available:
        if wanted and name.removeprefix(PREFIX) not in wanted:
            continue
        if on_start is not None:
            on_start(name)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"kgot.benchmarks.{name}")
            figures = list(_run_script(module, quick=quick, sandbox=sandbox))
        except Exception as error:  # one broken script must not hide the others' figures
            report.failures[name] = f"{type(error).__name__}: {' '.join(str(error).split())}"
        else:
            report.figures += figures
        report.seconds[name] = time.perf_counter() - started
    return report


def _run_script(module: Any, *, quick: bool, sandbox: str) -> Any:
    """The script's figures; a script whose ``run`` takes ``sandbox`` runs jobs in that kind."""
    if "sandbox" in inspect.signature(module.run).parameters:
        return module.run(quick=quick, sandbox=sandbox)
    return module.run(quick=quick)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kgot.benchmarks.run_all",
        description="Run every kgot performance script and print its figures.",
    )
    parser.add_argument("--quick", action="store_true", help="short runs (smoke check)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    parser.add_argument(
        "--only", action="append", default=[], metavar="AREA", help="run only this area"
    )
    parser.add_argument(
        "--sandbox", metavar="KIND", help="sandbox kind (default: KGOT_SANDBOX / config, auto)"
    )
    args = parser.parse_args(argv)
    try:
        from kgot.config import load_settings

        kind = load_settings({"sandbox.kind": args.sandbox}).sandbox.kind
        report = execute(quick=args.quick, as_json=args.json, only=args.only, sandbox=kind)
    except KgotError as error:
        sys.stderr.write(f"error: {error}\n")
        return error.exit_code
    return report_exit_code(report)


def execute(
    *, quick: bool, as_json: bool, only: Sequence[str], sandbox: str = "auto"
) -> PerfReport:
    """Run the scripts, printing figures to stdout and progress and failures to stderr.

    Raises:
        UsageError: an area in ``only`` has no script.
    """
    report = run_all(
        quick=quick,
        only=only,
        on_start=lambda name: sys.stderr.write(f"running {name} …\n"),
        sandbox=sandbox,
    )
    print_figures(report.figures, as_json=as_json)
    for name, reason in report.failures.items():
        sys.stderr.write(f"{name} failed: {reason}\n")
    if report.seconds:
        timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.seconds.items())
        sys.stderr.write(f"time per script: {timings}\n")
    else:
        sys.stderr.write("no perf_* scripts are installed in kgot.benchmarks\n")
    return report


def report_exit_code(report: PerfReport) -> int:
    if report.failures:
        return 2
    return 1 if report.missed else 0


if __name__ == "__main__":
    sys.exit(main())
