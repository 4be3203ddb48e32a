"""The fast tier's rules: PostgreSQL cases are slow (tests/conftest.py), and the check that
keeps the tier fast (tests/support/fast_tier.py): with KGOT_CHECK_FAST_TIER=SECONDS, an unmarked
test slower than that fails and names the fix; marked, quick or failing tests keep their
outcome; without the variable nothing is timed."""

from __future__ import annotations

import pytest

from kgot.tests.support.fast_tier import FastTierCheck, limit_from

pytest_plugins = ["pytester"]

_TESTS = """
import time

import pytest


def test_quick():
    pass


def test_unmarked_and_slow():
    time.sleep(0.6)


@pytest.fixture
def slow_to_set_up():
    time.sleep(0.6)


def test_slow_in_its_set_up(slow_to_set_up):
    pass


@pytest.mark.slow
def test_marked_and_slow():
    time.sleep(0.6)


def test_slow_and_failing():
    time.sleep(0.6)
    assert 1 == 2, "its own failure"
"""

# The suite's own hook, which registers the check when the variable is set.
_CONFTEST = "from kgot.tests.conftest import pytest_configure  # noqa: F401\n"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = --strict-markers\nmarkers =\n    slow: slow\n")
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_tier=_TESTS)
    return pytester


@pytest.mark.slow
def test_unmarked_slow_tests_fail_when_the_check_is_on(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGOT_CHECK_FAST_TIER", "0.3")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_tier.py::test_unmarked_and_slow took * s (set-up and call), more than the "
            "fast tier's 0.3 s (KGOT_CHECK_FAST_TIER): mark it @pytest.mark.slow or make it "
            "faster*",
            "*test_tier.py::test_slow_in_its_set_up took * s*",
            "*its own failure*",
        ],
        consecutive=False,
    )


@pytest.mark.slow
def test_nothing_is_timed_without_the_variable(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KGOT_CHECK_FAST_TIER", raising=False)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)


@pytest.mark.slow
def test_a_bad_limit_stops_the_session_before_any_test(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGOT_CHECK_FAST_TIER", "soon")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*KGOT_CHECK_FAST_TIER='soon' is not a number of seconds*"])
    result.stdout.no_fnmatch_line("*passed*")


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_a_limit_that_is_not_a_number_of_seconds_is_refused(value: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"KGOT_CHECK_FAST_TIER='{value}' is not a"):
        limit_from({"KGOT_CHECK_FAST_TIER": value})


def test_the_limit_is_read_from_the_variable() -> None:
    assert limit_from({}) is None
    assert limit_from({"KGOT_CHECK_FAST_TIER": " "}) is None
    assert limit_from({"KGOT_CHECK_FAST_TIER": "2.5"}) == 2.5
    assert FastTierCheck(2.5).limit == 2.5


@pytest.mark.slow
def test_the_fast_tier_leaves_out_every_postgresql_case(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\naddopts = --strict-markers\nmarkers =\n    slow: slow\n    postgres: pg\n"
    )
    pytester.makeconftest(
        "from kgot.tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    pytester.makepyfile(
        test_stores="""
import pytest

@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_on_both(kind):
    pass

@pytest.mark.postgres
def test_postgres_only():
    pass
"""
    )
    fast = pytester.runpytest_inprocess("-m", "not slow", "-p", "no:cacheprovider")
    fast.assert_outcomes(passed=1, deselected=2)
    slow = pytester.runpytest_inprocess("-m", "slow", "-p", "no:cacheprovider", "-v")
    slow.assert_outcomes(passed=2, deselected=1)
    slow.stdout.fnmatch_lines(
        ["*::test_on_both?postgres? PASSED*", "*::test_postgres_only PASSED*"]
    )
