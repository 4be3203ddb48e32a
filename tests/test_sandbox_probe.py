"""The machine probe that decides whether a test needing a sandbox may skip (tests/conftest.py,
tests/sandbox/conftest.py) asks the tools and the kernel, never kgot: kgot refusing a sandbox
the machine can have fails the tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

import kgot.sandbox
from kgot.errors import SandboxUnavailableError
from kgot.tests import conftest as shared
from kgot.tests.sandbox import conftest as sandbox_conftest
from kgot.tests.support import sandbox_probe

pytest_plugins = ["pytester"]

_PROBES = (
    sandbox_probe.seccomp_problem,
    sandbox_probe.bwrap_problem,
    sandbox_probe.unshare_problem,
    sandbox_probe.docker_problem,
)
# The real bug this guards against: kgot refused a Python living under /tmp.
_TMP_PYTHON = "the Python installation at /tmp is the whole of /tmp, which jobs must not see"


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """The probe's answers are cached per process: forget them around a test that changes
    what it sees."""
    for probe in _PROBES:
        probe.cache_clear()
    yield
    for probe in _PROBES:
        probe.cache_clear()


def _refuse_python_location() -> None:
    raise SandboxUnavailableError(_TMP_PYTHON)


@pytest.mark.parametrize(
    ("environ", "required_by"),
    [
        ({}, None),
        ({"CI": "true"}, "CI"),
        ({"CI": "false"}, None),
        ({"CI": "0", "KGOT_REQUIRE_SANDBOX": "1"}, "KGOT_REQUIRE_SANDBOX"),
        ({"KGOT_REQUIRE_SANDBOX": ""}, None),
    ],
)
def test_ci_or_kgot_require_sandbox_demands_a_sandbox(
    environ: dict[str, str], required_by: str | None
) -> None:
    assert sandbox_probe.sandbox_required(environ) == required_by


def test_a_refusal_fails_where_the_machine_can_have_a_sandbox() -> None:
    verdict, why = shared.sandbox_verdict(_TMP_PYTHON, None, None)
    assert verdict == "failed"
    assert (
        why.startswith("kgot refused a sandbox that this machine can have") and _TMP_PYTHON in why
    )


def test_a_refusal_skips_only_where_the_machine_cannot_and_nothing_requires_one() -> None:
    problem = "bubblewrap is not installed; and unshare not found"
    assert shared.sandbox_verdict("refused", problem, None) == (
        "skipped",
        f"no sandbox can run here: {problem}",
    )
    verdict, why = shared.sandbox_verdict("refused", problem, "CI")
    assert verdict == "failed" and why.startswith("CI is set") and why.endswith(problem)


def test_the_probe_runs_no_kgot_sandbox_code() -> None:
    code = (
        "import sys\n"
        "from kgot.tests.support import sandbox_probe\n"
        "sandbox_probe.machine_problem('auto')\n"
        "print(sorted(m for m in sys.modules if m.startswith('kgot.sandbox')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_kgot_refusing_does_not_change_the_probe(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    before = {kind: sandbox_probe.machine_problem(kind) for kind in ("auto", "bwrap", "fallback")}
    sandbox_probe.bwrap_problem.cache_clear()
    sandbox_probe.unshare_problem.cache_clear()
    monkeypatch.setattr("kgot.sandbox.bwrap.bwrap_problem", lambda _path: "kgot says no")
    monkeypatch.setattr("kgot.sandbox.fallback.fallback_problem", lambda: "kgot says no")
    monkeypatch.setattr(kgot.sandbox, "_check_python_location", _refuse_python_location)
    after = {kind: sandbox_probe.machine_problem(kind) for kind in ("auto", "bwrap", "fallback")}
    assert after == before


def test_the_probe_names_a_missing_or_broken_bubblewrap(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    monkeypatch.setattr(sandbox_probe, "bwrap_binary", lambda: None)
    assert "bubblewrap is not installed" in (sandbox_probe.bwrap_problem() or "")
    sandbox_probe.bwrap_problem.cache_clear()
    monkeypatch.setattr(sandbox_probe, "bwrap_binary", lambda: "/bin/false")
    assert sandbox_probe.bwrap_problem() == "bubblewrap cannot create namespaces here: 1"


def test_the_default_needs_bubblewrap_or_unshare_and_libseccomp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox_probe, "seccomp_problem", lambda: None)
    monkeypatch.setattr(sandbox_probe, "bwrap_problem", lambda: "no bwrap")
    monkeypatch.setattr(sandbox_probe, "unshare_problem", lambda: None)
    assert sandbox_probe.machine_problem("auto") is None
    assert sandbox_probe.machine_problem("bwrap") == "no bwrap"
    monkeypatch.setattr(sandbox_probe, "unshare_problem", lambda: "no unshare")
    assert sandbox_probe.machine_problem("auto") == "no bwrap; and no unshare"
    monkeypatch.setattr(sandbox_probe, "seccomp_problem", lambda: "no libseccomp")
    assert sandbox_probe.machine_problem("auto") == "no libseccomp"
    assert sandbox_probe.machine_problem("fallback") == "no libseccomp"


def test_make_sandbox_fails_when_kgot_refuses_a_capable_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox_conftest, "machine_problem", lambda _kind: None)
    monkeypatch.setattr(kgot.sandbox, "_check_python_location", _refuse_python_location)
    with pytest.raises(SandboxUnavailableError, match="/tmp"):
        sandbox_conftest.make_sandbox("bwrap")


def test_make_sandbox_skips_or_fails_where_the_machine_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox_conftest, "machine_problem", lambda _kind: "no bubblewrap")
    monkeypatch.setattr(sandbox_conftest, "SANDBOX_REQUIRED_BY", None)
    with pytest.raises(pytest.skip.Exception, match="bwrap sandbox unavailable here: no bubble"):
        sandbox_conftest.make_sandbox("bwrap")
    monkeypatch.setattr(sandbox_conftest, "SANDBOX_REQUIRED_BY", "KGOT_REQUIRE_SANDBOX")
    with pytest.raises(pytest.fail.Exception, match=r"KGOT_REQUIRE_SANDBOX is set.*no bubblewrap"):
        sandbox_conftest.make_sandbox("bwrap")


_REGRESSION = f"""
import kgot.sandbox
from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError


def refuse():
    raise SandboxUnavailableError({_TMP_PYTHON!r})


def test_opens_the_default_sandbox(monkeypatch):
    monkeypatch.setattr(kgot.sandbox, "_check_python_location", refuse)
    kgot.sandbox.open_sandbox(SandboxSettings(pool_size=0)).close()
"""


@pytest.mark.slow
def test_a_kgot_regression_fails_the_suite_on_this_machine(pytester: pytest.Pytester) -> None:
    """The whole chain, unpatched: the real hook, the real probe, kgot's real refusal."""
    problem = sandbox_probe.machine_problem("auto")
    if problem is not None:
        pytest.skip(f"this machine cannot have a sandbox: {problem}")
    pytester.makeconftest("from kgot.tests.conftest import pytest_runtest_makereport  # noqa\n")
    pytester.makepyfile(test_regression=_REGRESSION)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kgot refused a sandbox that this machine can have*/tmp*"])
