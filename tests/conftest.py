"""Shared fixtures: every test runs with an isolated configuration and data directory.

A test that fails only because this machine cannot have a sandbox at all is reported as
skipped, with the reason; whether it can is asked of an independent probe, never of kgot, and
where CI or KGOT_REQUIRE_SANDBOX is set such a test fails instead (see
:func:`pytest_runtest_makereport`). With KGOT_CHECK_FAST_TIER set, a test without the ``slow``
mark that takes longer than the fast tier allows fails (see :func:`pytest_configure`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from pluggy import Result

from kgot.tests.support.fast_tier import FastTierCheck, limit_from
from kgot.tests.support.sandbox_probe import machine_problem, sandbox_required

_HOST_VARIABLES = ("KGOT_", "OPENAI_")


def pytest_configure(config: pytest.Config) -> None:
    """``KGOT_CHECK_FAST_TIER=SECONDS`` (read here, before the tests drop KGOT_ variables):
    a test without the ``slow`` mark that takes longer fails (tests/support/fast_tier.py)."""
    limit = limit_from(os.environ)
    if limit is not None:
        config.pluginmanager.register(FastTierCheck(limit), "kgot-fast-tier")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: "not slow" must see these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every PostgreSQL case is slow: the fast tier runs the store on SQLite only, so it needs
    no PostgreSQL server; the PostgreSQL cases, and the few tests only PostgreSQL can run, are
    the full suite's (docs/testing.md)."""
    for item in items:
        if item.get_closest_marker("postgres") is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test reads the developer's config, keys or database, or writes to their home."""
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(_HOST_VARIABLES):
            del os.environ[name]
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")
    os.environ["XDG_DATA_HOME"] = str(home / "data")
    try:
        yield home
    finally:
        os.environ.clear()
        os.environ.update(saved)


@functools.cache
def sandbox_problem() -> str | None:
    """Why this machine cannot have any isolating sandbox (``None`` when it can): from the
    independent probe, never from kgot, and asked only after a test met a sandbox refusal."""
    return machine_problem("auto")


# Read now: the tests themselves run with KGOT_ variables removed (isolated_environment).
SANDBOX_REQUIRED_BY = sandbox_required(os.environ)

# How kgot words a refusal to open a sandbox, for a failure seen only as text (a CLI's stderr,
# a skip message that quotes it).
_REFUSAL = re.compile(
    r"sandbox cannot run|no isolating sandbox can run here|cannot build the seccomp filter"
    r"|cannot start the sandbox|sandbox worker did not start|no Docker engine is reachable",
    re.IGNORECASE,
)


def kgot_refusal(call: pytest.CallInfo[None], report: pytest.TestReport) -> str:
    """kgot's refusal to open a sandbox behind this failure or skip (empty when there is none):
    a ``SandboxUnavailableError`` raised, or caught and turned into a skip, or kgot's wording of
    one in the output or the skip message."""
    from kgot.errors import SandboxUnavailableError

    error = call.excinfo.value if call.excinfo is not None else None
    seen: set[int] = set()
    while isinstance(error, BaseException) and id(error) not in seen:
        if isinstance(error, SandboxUnavailableError):
            return str(error)
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    if not (report.failed or report.skipped):
        return ""
    said = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longreprtext
    text = "\n".join([said, *(content for _, content in report.sections)])
    for line in text.splitlines():
        if _REFUSAL.search(line):
            return line.strip()
    return ""


def sandbox_verdict(refusal: str, problem: str | None, required_by: str | None) -> tuple[str, str]:
    """What a test that met kgot's refusal ``refusal`` becomes, given the machine probe's
    ``problem`` (``None``: this machine can have the sandbox) and the variable that requires a
    sandbox (``None``: none does): ``("skipped", reason)`` only where the machine cannot have
    one and none is required, ``("failed", why)`` otherwise."""
    if problem is None:
        return (
            "failed",
            "kgot refused a sandbox that this machine can have (an independent probe ran "
            f"bubblewrap or unshare here): {refusal}",
        )
    if required_by is not None:
        return (
            "failed",
            f"{required_by} is set, so the tests need a sandbox, but this machine cannot have "
            f"one: {problem}",
        )
    return "skipped", f"no sandbox can run here: {problem}"


def _problem_for(refusal: str) -> str | None:
    if "docker" in refusal.lower():
        return machine_problem("docker")
    return sandbox_problem()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    """A test that failed or skipped because kgot refused a sandbox is skipped, saying why, only
    on a machine that cannot have one (and where CI or KGOT_REQUIRE_SANDBOX does not demand
    one); everywhere else it fails, saying that kgot refused."""
    outcome = yield
    report = outcome.get_result()
    if report.when not in ("setup", "call") or report.passed or hasattr(report, "wasxfail"):
        return
    refusal = kgot_refusal(call, report)
    if not refusal:
        return
    docker = "docker" in refusal.lower()
    required_by = None if docker else SANDBOX_REQUIRED_BY  # no CI machine has a Docker engine
    verdict, why = sandbox_verdict(refusal, _problem_for(refusal), required_by)
    if verdict == "skipped":
        if report.failed:
            path, line, _ = item.location
            report.outcome = "skipped"
            report.longrepr = (path, (line or 0) + 1, f"Skipped: {why}")
        return
    if report.skipped:
        report.outcome = "failed"
        said = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longreprtext
        report.longrepr = f"{why}\n(the test skipped itself: {said})"
    else:
        report.sections.append(("sandbox", why))
