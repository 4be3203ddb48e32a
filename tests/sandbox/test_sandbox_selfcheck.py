"""`kgot sandbox check`'s "host files hidden" line: it probes host files the job's uid may read
(a file only root may read shows nothing about isolation), and says which of them a kind shows
by design (the fallback shows world-readable files outside the directories it covers)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import pytest

from kgot.cli.main import main
from kgot.sandbox import Job, Sandbox
from kgot.sandbox.base import ExecResult
from kgot.sandbox.selftest import CHECKS
from kgot.tests.sandbox.conftest import make_sandbox


def _world_readable(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IROTH) and os.path.getsize(path) > 0
    except OSError:
        return False


@pytest.fixture(scope="module")
def fallback() -> Iterator[Sandbox]:
    box = make_sandbox("fallback")
    yield box
    box.close()


class _ClaimsToHideEverything:
    """The fallback, claiming (as bubblewrap does) that jobs see no host file: the check must
    then fail on the world-readable files its jobs can still read."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.file_uid = getattr(box, "file_uid", None)

    def run(self, job: Job) -> ExecResult:
        return self.box.run(job)


def _files_check(box: object) -> tuple[bool, ...]:
    return tuple(dict(CHECKS)["host files hidden"](box))  # type: ignore[arg-type]


@pytest.mark.slow
def test_files_the_jobs_uid_can_read_are_probed(fallback: Sandbox) -> None:
    if not _world_readable("/etc/passwd"):
        pytest.skip("this host's /etc/passwd is not a world-readable file")
    passed, detail, *_ = _files_check(_ClaimsToHideEverything(fallback))
    assert not passed, detail
    assert "/etc/passwd" in str(detail).split("(")[0]


@pytest.mark.slow
def test_the_fallback_check_names_the_host_files_it_shows(
    fallback: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    if not _world_readable("/etc/passwd"):
        pytest.skip("this host's /etc/passwd is not a world-readable file")
    code = main(["sandbox", "check", "--sandbox", "fallback"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    files = [line for line in lines if "host files hidden" in line]
    assert files[0].startswith("PASS  host files hidden: readable: none ("), files
    warn = "WARN  host files hidden: not hidden (this kind shows world-readable host files): "
    assert len(files) == 2 and files[1].startswith(warn), files
    shown = files[1].removeprefix(warn).split()
    assert "/etc/passwd" in shown
    assert all(_world_readable(path) for path in shown), shown
    assert not [n for n in os.listdir("/tmp") if n.startswith(".kgot-check-")]  # probe removed


@pytest.mark.slow
def test_bubblewrap_hides_the_files_the_fallback_shows() -> None:
    box = make_sandbox("bwrap")
    try:
        outcome = _files_check(box)
    finally:
        box.close()
    passed, detail, warning = outcome
    assert passed, detail
    assert warning is None
    assert int(str(detail).split("(")[1].split()[0]) >= 2  # system files and the /tmp probe


def test_a_world_readable_file_in_the_host_tmp_is_probed() -> None:
    """The check plants one in /tmp (every isolating kind must hide it: a Python environment
    under /tmp is shown to jobs, nothing else of /tmp); the unisolated kind reads it."""
    from kgot.config import SandboxSettings
    from kgot.sandbox import open_sandbox

    box = open_sandbox(SandboxSettings(kind="subprocess"))
    try:
        passed, detail, *_ = _files_check(box)
    finally:
        box.close()
    assert not passed
    readable = str(detail).split("(")[0].split()
    assert [p for p in readable if p.startswith("/tmp/.kgot-check-")], detail
    assert not [n for n in os.listdir("/tmp") if n.startswith(".kgot-check-")]
