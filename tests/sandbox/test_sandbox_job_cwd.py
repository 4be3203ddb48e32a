"""``Job.cwd``: a job may run in its output directory, so every file it writes by a relative
name comes back (the python tool's jobs do; issue 27, item 10). Every kind honours it."""

from __future__ import annotations

import pytest

from kgot.config import SandboxSettings
from kgot.sandbox import Job, Sandbox
from kgot.sandbox.base import OUTPUT_DIR, WORK_DIR
from kgot.sandbox.subprocess_runner import SubprocessSandbox

WRITES = """
import os
open("made-here.txt", "w").write(os.getcwd())
print(os.getcwd())
"""


@pytest.mark.slow
def test_a_job_in_its_output_directory_returns_what_it_writes(sandbox: Sandbox) -> None:
    result = sandbox.run(Job(WRITES, files={"data.txt": b"input"}, cwd=OUTPUT_DIR))
    assert result.ok, result
    assert result.stdout.strip() == OUTPUT_DIR
    assert result.outputs == {"made-here.txt": OUTPUT_DIR.encode()}


def test_the_default_working_directory_is_unchanged(sandbox: Sandbox) -> None:
    result = sandbox.run(
        Job(WRITES + "print(open('in/data.txt').read())", files={"data.txt": b"x"})
    )
    assert result.ok, result
    assert result.stdout.split() == [WORK_DIR, "x"]
    assert result.outputs == {}  # written to /work, not to /work/out


def test_the_subprocess_kind_runs_in_the_output_directory_too() -> None:
    box = SubprocessSandbox(SandboxSettings(kind="subprocess", timeout=20))
    result = box.run(Job(WRITES, cwd=OUTPUT_DIR))
    assert result.ok, result
    assert result.stdout.strip().endswith("/work/out")
    assert set(result.outputs) == {"made-here.txt"}


@pytest.mark.parametrize("cwd", ["/", "/work/in", "/tmp", "out"])
def test_any_other_working_directory_is_refused(cwd: str) -> None:
    box = SubprocessSandbox(SandboxSettings(kind="subprocess"))
    with pytest.raises(ValueError, match="working directory"):
        box.run(Job("print(1)", cwd=cwd))
