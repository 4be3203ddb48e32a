"""Every performance figure kgot tracks, from one command.

Runs every perf area and prints all their figures with
:func:`~kgot.benchmarks.figures.print_figures`, marking each target met or missed. The areas are
kgot's own, one ``kgot.benchmarks.perf_<area>`` module each (controller overhead, views,
sandbox, store, …), then those other packages declare in the ``kgot.perf_areas`` entry-point
group (:data:`PERF_AREAS`; the advisor's is ``kgot.aides.advisor.perf``)::

    python -m kgot.benchmarks.run_all [--quick] [--json] [--only AREA ...] [--sandbox KIND]

An area's script is a function ``run(quick=False) -> list[Figure]``; scripts that run
sandbox jobs take the sandbox kind (a ``sandbox`` parameter of their ``run``):
``--sandbox``, else ``sandbox.kind`` from the settings (``KGOT_SANDBOX``, the config file).
A script that fails (or an area that cannot be loaded) is reported on stderr and the others
still run. The exit status is 0 when
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

from kgot.benchmarks.figures import Figure, print_figures
from kgot.errors import ConfigError, KgotError, UsageError
from kgot.extension_points import PERF_AREAS as PERF_AREA_GROUP
from kgot.extension_points import Registry, function_check

__all__ = ["PERF_AREAS", "PerfReport", "PerfScript", "discover", "main", "run_all"]

PREFIX = "perf_"  # kgot's own areas: kgot.benchmarks.perf_<area>

# run(quick=False[, sandbox="auto"]) -> figures
PerfScript = Callable[..., Sequence[Figure]]

PERF_AREAS: Registry[PerfScript] = Registry(
    PERF_AREA_GROUP, "perf area", function_check("run(quick=False) -> list[Figure]")
)


@dataclass
class PerfReport:
    """What :func:`run_all` measured.

    Attributes:
        figures: every figure, in area order.
        failures: area → one line saying why it produced no figures.
        seconds: area → how long its script took.
    """

    figures: list[Figure] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def missed(self) -> list[Figure]:
        return [figure for figure in self.figures if figure.meets_target is False]


def discover() -> list[str]:
    """Every area, sorted: kgot's own (the ``perf_<area>`` modules of this package) and the
    installed ones (:data:`PERF_AREAS`), none imported.

    Raises:
        ConfigError: an installed area has the name of one of kgot's (its figures would hide
            or be hidden by kgot's).
    """
    clash = sorted(set(_own_areas()) & set(PERF_AREAS.names()))
    if clash:
        raise ConfigError(
            f"an installed package declares the perf area {clash[0]!r} (entry-point group "
            f"{PERF_AREA_GROUP}), which is one of kgot's own; that package must rename it"
        )
    return sorted({*_own_areas(), *PERF_AREAS.names()})


def _own_areas() -> list[str]:
    import kgot.benchmarks as package

    return [
        info.name.removeprefix(PREFIX)
        for info in pkgutil.iter_modules(package.__path__)
        if info.name.startswith(PREFIX) and not info.ispkg
    ]


def _script(area: str) -> PerfScript:
    """The ``run`` of ``area`` (imported now)."""
    if area in _own_areas():
        run: PerfScript = importlib.import_module(f"kgot.benchmarks.{PREFIX}{area}").run
        return run
    found = PERF_AREAS.get(area)
    if found is None:  # discover() listed it, so it was unregistered since
        raise ConfigError(f"the perf area {area!r} is no longer installed")
    return found


def run_all(
    *,
    quick: bool = False,
    only: Sequence[str] = (),
    on_start: Callable[[str], object] | None = None,
    sandbox: str = "auto",
) -> PerfReport:
    """Run every area's script (or those of the areas in ``only``).

    Args:
        quick: ask each script for its short version.
        only: areas (``controller``, ``sandbox``, …) to run.
        on_start: called with each area before its script runs.
        sandbox: the sandbox kind for scripts that run sandbox jobs.

    Raises:
        UsageError: an area in ``only`` is not installed.
        ConfigError: an installed area has the name of one of kgot's.
    """
    available = discover()
    unknown = sorted(set(only) - set(available))
    if unknown:
        listed = ", ".join(available) or "none"
        raise UsageError(f"no perf area {unknown[0]!r} is installed (areas: {listed})")
    report = PerfReport()
    for area in available:
        if only and area not in only:
            continue
        if on_start is not None:
            on_start(area)
        started = time.perf_counter()
        try:
            figures = list(_run_script(_script(area), quick=quick, sandbox=sandbox))
        except Exception as error:  # one broken script must not hide the others' figures
            report.failures[area] = f"{type(error).__name__}: {' '.join(str(error).split())}"
        else:
            report.figures += figures
        report.seconds[area] = time.perf_counter() - started
    return report


def _run_script(run: PerfScript, *, quick: bool, sandbox: str) -> Sequence[Figure]:
    """The script's figures; a script whose ``run`` takes ``sandbox`` runs jobs in that kind."""
    if "sandbox" in inspect.signature(run).parameters:
        return run(quick=quick, sandbox=sandbox)
    return run(quick=quick)


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
        UsageError: an area in ``only`` is not installed.
        ConfigError: an installed area has the name of one of kgot's.
    """
    report = run_all(
        quick=quick,
        only=only,
        on_start=lambda name: sys.stderr.write(f"running {name} …\n"),
        sandbox=sandbox,
    )
    print_figures(report.figures, as_json=as_json)
    for area, reason in report.failures.items():
        sys.stderr.write(f"{area} failed: {reason}\n")
    if report.seconds:
        timings = ", ".join(f"{area} {seconds:.1f} s" for area, seconds in report.seconds.items())
        sys.stderr.write(f"time per area: {timings}\n")
    else:
        sys.stderr.write("no perf areas are installed\n")
    return report


def report_exit_code(report: PerfReport) -> int:
    if report.failures:
        return 2
    return 1 if report.missed else 0


if __name__ == "__main__":
    sys.exit(main())
