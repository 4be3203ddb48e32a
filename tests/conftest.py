"""Shared fixtures: every test runs with an isolated configuration and data directory.

A test that fails only because this machine cannot have a sandbox at all is reported as
skipped, with the reason (see :func:`pytest_runtest_makereport`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from pluggy import Result

_HOST_VARIABLES = ("KGOT_", "OPENAI_")


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
    """Why the default sandbox cannot open on this machine (``None`` when it can): asked once,
    and only after a test failed on a sandbox error."""
    from kgot.config import SandboxSettings
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import open_sandbox

    try:
        open_sandbox(SandboxSettings()).close()
    except SandboxUnavailableError as error:
        return str(error)
    return None


def _failed_for_want_of_a_sandbox(call: pytest.CallInfo[None], report: pytest.TestReport) -> str:
    """The reason, when the failure is this machine having no sandbox (empty otherwise): a
    ``SandboxUnavailableError`` escaped, or the output shows the sandbox's refusal (a CLI test).
    Where a sandbox can open, every failure stays a failure."""
    from kgot.errors import SandboxUnavailableError

    text = "\n".join([report.longreprtext, *(content for _, content in report.sections)])
    raised = call.excinfo is not None and call.excinfo.errisinstance(SandboxUnavailableError)
    if not raised and "sandbox" not in text.lower():
        return ""
    problem = sandbox_problem()
    if problem is None or not (raised or problem in text):
        return ""
    return problem


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    """Tests that need a sandbox skip, saying why, on a machine that cannot have one."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    problem = _failed_for_want_of_a_sandbox(call, report)
    if problem:
        path, line, _ = item.location
        report.outcome = "skipped"
        report.longrepr = (path, (line or 0) + 1, f"Skipped: no sandbox can run here: {problem}")
