"""The unisolated subprocess kind: its job contract, its timeout and the processes it kills."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from kgot.config import SandboxSettings
from kgot.sandbox import Job, Limits
from kgot.sandbox.subprocess_runner import SubprocessSandbox


@pytest.fixture
def box() -> SubprocessSandbox:
    return SubprocessSandbox(SandboxSettings(kind="subprocess", timeout=10.0, memory_mb=256))


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_a_timeout_kills_processes_that_left_the_group_and_returns_on_time(
    box: SubprocessSandbox,
) -> None:
    marker = f"kgot-escaped-{uuid.uuid4().hex}"
    code = f"""
import os, subprocess
subprocess.Popen(["{marker}", "60"], executable="sleep", start_new_session=True)
if os.fork() == 0:  # a daemon: new session, parent gone
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["{marker}", "61"])
    os._exit(0)
print("spawned", flush=True)
while True:
    pass
"""
    started = time.monotonic()
    result = box.run(Job(code, limits=Limits(timeout_s=1.0)))
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code is None, result
    assert "spawned" in result.stdout
    assert result.error == (
        "timed out after 1 s (wall clock); the job and every process it started were killed"
    )
    assert elapsed < 3.5, elapsed
    assert processes_with(marker) == []


def test_stragglers_of_a_finished_job_are_killed(box: SubprocessSandbox) -> None:
    marker = f"kgot-straggler-{uuid.uuid4().hex}"
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['{marker}', '60'], executable='sleep', start_new_session=True)\n"
        "print('bye')\n"
    )
    started = time.monotonic()
    result = box.run(Job(code))
    assert result.ok and result.stdout == "bye\n", result
    assert time.monotonic() - started < 5
    assert processes_with(marker) == []


def test_inputs_outputs_and_mounted_files(box: SubprocessSandbox, tmp_path: Path) -> None:
    attachment = tmp_path / "table.csv"
    attachment.write_text("a,b\n1,2\n")
    code = """
import os
print(open("in/data.txt").read(), open("inputs/table.csv").read().split()[1])
print(os.path.exists("/mnt/inputs/table.csv"), os.environ["KGOT_INPUTS"].endswith("/inputs"))
print("/mnt/inputs stays as written")
open("out/result.txt", "w").write("done")
"""
    result = box.run(Job(code, files={"data.txt": b"payload"}, mounts=(attachment,)))
    assert result.ok, result
    assert result.stdout.splitlines() == [
        "payload 1,2",
        "False True",  # no mount namespace: the documented place is inputs/, not /mnt/inputs
        "/mnt/inputs stays as written",  # the code is never rewritten
    ]
    assert result.outputs == {"result.txt": b"done"}


def test_the_environment_is_the_job_environment(
    box: SubprocessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGOT_TEST_HOST_SECRET", "do-not-pass-3b1d")
    code = "import os, json\nprint(json.dumps(dict(os.environ)))"
    result = box.run(Job(code))
    assert result.ok, result
    env = __import__("json").loads(result.stdout)
    assert "KGOT_TEST_HOST_SECRET" not in env
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["MPLBACKEND"] == "Agg"
    assert env["HOME"] == env["TMPDIR"] and env["HOME"] != "/tmp"  # private to the job
    assert not os.path.exists(env["HOME"])  # and gone with it


def test_failures_of_the_code_never_raise(box: SubprocessSandbox) -> None:
    surrogate = box.run(Job("x = '\ud800'\n"))
    assert surrogate.exit_code == 1 and not surrogate.ok
    assert box.run(Job("import sys\nsys.exit(3)")).exit_code == 3
    stopped = box.run(Job("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"))
    assert not stopped.ok and "ended without a report" in (stopped.error or ""), stopped
