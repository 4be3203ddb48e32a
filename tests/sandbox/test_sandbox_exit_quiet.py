"""A process that exits while its pool's workers still start says nothing about them (issue 27,
item 8): the end of the interpreter kills them, which is no failure of the sandbox, so no
"the sandbox worker did not start … `--sandbox subprocess`" may nudge anyone to weaker
isolation. A worker that genuinely cannot start is still reported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kgot.tests.sandbox.conftest import make_sandbox

# Warms a pool in the background and exits at once, without closing it (a short command whose
# document-parser pool was still warming). The atexit hook, registered after kgot's, runs
# first at exit, after the interpreter has stopped the thread that spawned the workers (so
# bubblewrap's --die-with-parent has killed them), and waits for the warm-up threads to see
# it: whatever they would log reaches stderr, as in the CLI.
_CHILD = """
import atexit, json, logging, sys, threading, time
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
from kgot.config import SandboxSettings
from kgot.sandbox import open_sandbox

kind, preload = sys.argv[1], json.loads(sys.argv[2])
box = open_sandbox(SandboxSettings(kind=kind, pool_size=2, preload=preload))

def see_the_warm_up_through():
    for thread in threading.enumerate():
        if thread.name.startswith("kgot-sandbox-warm"):
            thread.join(timeout=60)

atexit.register(see_the_warm_up_through)
box.warm_up(wait=False)
if sys.argv[3] == "settle":  # the warm-up ends before the process does
    see_the_warm_up_through()
else:
    time.sleep(float(sys.argv[3]))
print("done")
"""

# Importing venv's __main__ runs venv's command line, which exits (SystemExit) on the worker's
# own arguments: a worker that pre-imports it dies before it is ready, every time.
_DIES_AT_START = ["venv.__main__"]


def _exit_while_warming(kind: str, preload: list[str], wait: str) -> str:
    make_sandbox(kind).close()  # skips with the reason where this kind cannot run
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, json.dumps(preload), wait],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "done"
    return child.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bwrap", "fallback"])
@pytest.mark.parametrize("wait_s", ["0.05", "0.4"])  # before and after the workers spawned
def test_exiting_while_workers_start_is_silent(kind: str, wait_s: str) -> None:
    stderr = _exit_while_warming(kind, ["networkx", "pandas"], wait_s)
    assert "did not start" not in stderr, stderr
    assert stderr.strip() == "", stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bwrap", "fallback"])
def test_a_worker_that_cannot_start_is_still_reported(kind: str) -> None:
    # Its death is seen before the process exits: a genuine failure.
    stderr = _exit_while_warming(kind, _DIES_AT_START, "settle")
    assert "the sandbox worker did not start" in stderr, stderr


def test_a_job_on_a_worker_that_cannot_start_fails_with_the_reason() -> None:
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox.base import Job

    box = make_sandbox("bwrap", preload=_DIES_AT_START)
    try:
        with pytest.raises(SandboxUnavailableError, match="the sandbox worker did not start"):
            box.run(Job(code="print(1)"))
    finally:
        box.close()
