"""On a machine that cannot have a sandbox at all, tests that need one skip with the reason
(tests/conftest.py); wherever a sandbox can open, a sandbox error stays a failure."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # each test runs a pytest session of its own

_TESTS = """
from kgot.errors import SandboxUnavailableError


def test_opens_a_sandbox():
    raise SandboxUnavailableError("no isolating sandbox can run here (bubblewrap is missing)")


def test_runs_the_cli():
    stderr = "kgot: error: no isolating sandbox can run here (bubblewrap is missing)"
    assert stderr == "", stderr


def test_fails_for_another_reason():
    assert "the answer" == "Paris", "the sandbox ran but the answer is wrong"
"""


def _conftest(problem: str | None) -> str:
    """The shared hook, with the machine's answer to "can a sandbox open here?" fixed."""
    return (
        "import kgot.tests.conftest as shared\n"
        "from kgot.tests.conftest import pytest_runtest_makereport  # noqa: F401\n"
        f"shared.sandbox_problem = lambda: {problem!r}\n"
    )


def test_tests_skip_with_the_reason_where_no_sandbox_can_run(pytester: pytest.Pytester) -> None:
    reason = "no isolating sandbox can run here (bubblewrap is missing)"
    pytester.makeconftest(_conftest(reason))
    pytester.makepyfile(test_needs_sandbox=_TESTS)
    result = pytester.runpytest_subprocess("-rsf", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2, failed=1)
    result.stdout.fnmatch_lines([f"SKIPPED*no sandbox can run here: {reason}*"])
    result.stdout.fnmatch_lines(["FAILED*test_fails_for_another_reason*"])


def test_sandbox_errors_stay_failures_where_a_sandbox_can_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_conftest(None))
    pytester.makepyfile(test_needs_sandbox=_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
