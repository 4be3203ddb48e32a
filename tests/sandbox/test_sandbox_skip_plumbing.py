"""On a machine that cannot have a sandbox at all, tests that need one skip with the reason
(tests/conftest.py); wherever a sandbox can open, or CI requires one, kgot's refusal of a sandbox
stays a failure, also when the test caught it and skipped itself."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # each test runs a pytest session of its own

_REFUSAL = "no isolating sandbox can run here (bubblewrap is missing)"
_TESTS = f"""
import pytest

from kgot.errors import SandboxUnavailableError


def test_opens_a_sandbox():
    raise SandboxUnavailableError({_REFUSAL!r})


def test_runs_the_cli():
    stderr = "kgot: error: " + {_REFUSAL!r}
    assert stderr == "", stderr


def test_skips_itself_when_refused():
    try:
        raise SandboxUnavailableError({_REFUSAL!r})
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {{error}}")


@pytest.fixture
def box():
    try:
        raise SandboxUnavailableError({_REFUSAL!r})
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {{error}}")


def test_uses_a_fixture_that_skips_when_refused(box):
    pass


def test_skips_for_another_reason():
    pytest.skip("needs write access to /var")


def test_fails_for_another_reason():
    assert "the answer" == "Paris", "the sandbox ran but the answer is wrong"
"""


def _conftest(problem: str | None, required_by: str | None = None) -> str:
    """The shared hook, with the machine probe's answer to "can a sandbox open here?" and the
    variable requiring a sandbox fixed."""
    return (
        "import kgot.tests.conftest as shared\n"
        "from kgot.tests.conftest import pytest_runtest_makereport  # noqa: F401\n"
        f"shared.sandbox_problem = lambda: {problem!r}\n"
        f"shared.SANDBOX_REQUIRED_BY = {required_by!r}\n"
    )


def test_tests_skip_with_the_reason_where_no_sandbox_can_run(pytester: pytest.Pytester) -> None:
    reason = "bubblewrap is not installed; and unshare not found"
    pytester.makeconftest(_conftest(reason))
    pytester.makepyfile(test_needs_sandbox=_TESTS)
    result = pytester.runpytest_subprocess("-rsf", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=5, failed=1)
    result.stdout.fnmatch_lines([f"SKIPPED*:6: no sandbox can run here: {reason}"])
    result.stdout.fnmatch_lines(["SKIPPED*needs write access to /var*"])
    result.stdout.fnmatch_lines(["FAILED*test_fails_for_another_reason*"])


def test_sandbox_errors_stay_failures_where_a_sandbox_can_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_conftest(None))
    pytester.makepyfile(test_needs_sandbox=_TESTS)
    result = pytester.runpytest_subprocess("-rsfE", "-p", "no:cacheprovider")
    # The two tests that caught kgot's refusal and skipped themselves fail too.
    result.assert_outcomes(skipped=1, failed=4, errors=1)
    result.stdout.fnmatch_lines(["*kgot refused a sandbox that this machine can have*"])
    result.stdout.fnmatch_lines(["FAILED*test_skips_itself_when_refused*"])
    result.stdout.fnmatch_lines(["ERROR*test_uses_a_fixture_that_skips_when_refused*"])


def test_a_missing_sandbox_fails_the_run_where_ci_requires_one(pytester: pytest.Pytester) -> None:
    reason = "bubblewrap is not installed; and unshare not found"
    pytester.makeconftest(_conftest(reason, "CI"))
    pytester.makepyfile(test_needs_sandbox=_TESTS)
    result = pytester.runpytest_subprocess("-rsfE", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1, failed=4, errors=1)
    result.stdout.fnmatch_lines(
        [f"*CI is set, so the tests need a sandbox*cannot have one: {reason}*"]
    )
