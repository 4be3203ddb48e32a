"""Keeping the fast tier fast: with ``KGOT_CHECK_FAST_TIER=SECONDS`` set, a test without the
``slow`` mark whose set-up and call took longer than SECONDS fails, saying so.

The tier is ``python -m pytest -m "not slow"`` (docs/testing.md): what a developer runs first.
A test that grows slow without its mark would quietly lengthen it; this check, run over the
fast tier now and then, names such tests. It is off by default: a timing limit in the normal
suite would fail tests on a busy machine for no fault of theirs.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from pluggy import Result

VARIABLE = "KGOT_CHECK_FAST_TIER"

# What the set-up phase took, kept for the call phase's verdict.
_SETUP_SECONDS = pytest.StashKey[float]()


def limit_from(environ: dict[str, str] | os._Environ[str]) -> float | None:
    """The limit in seconds that ``KGOT_CHECK_FAST_TIER`` sets (``None`` when it is unset or
    empty); anything but a positive number is a usage error that names the variable."""
    value = environ.get(VARIABLE, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise pytest.UsageError(
            f"{VARIABLE}={value!r} is not a number of seconds: set it to the longest an unmarked "
            "test may take, e.g. KGOT_CHECK_FAST_TIER=1"
        )
    return seconds


class FastTierCheck:
    """The pytest plugin behind ``KGOT_CHECK_FAST_TIER``: a passing test without the ``slow``
    mark that took longer than ``limit`` seconds (set-up and call) is turned into a failure."""

    def __init__(self, limit: float) -> None:
        self.limit = limit

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        report = outcome.get_result()
        if report.when == "setup":
            item.stash[_SETUP_SECONDS] = call.duration
            return
        if report.when != "call" or not report.passed or item.get_closest_marker("slow"):
            return
        took = item.stash.get(_SETUP_SECONDS, 0.0) + call.duration
        if took > self.limit:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} took {took:.2f} s (set-up and call), more than the fast tier's "
                f"{self.limit:g} s ({VARIABLE}): mark it @pytest.mark.slow or make it faster"
            )
