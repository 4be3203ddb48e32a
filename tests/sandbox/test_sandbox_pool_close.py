"""Closing a pool while its workers warm up (a run that ends before they are ready) is silent:
no "the sandbox worker did not start" after the run, however the starting workers then end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kgot.tests.sandbox.conftest import make_sandbox

# Closes a warming pool, then does what a process exit does to workers still starting (the
# thread that spawned them ends, so bubblewrap's --die-with-parent kills them): kills every
# process it started. Logging goes to stderr, as in the CLI.
_CHILD = """
import logging, os, signal, sys, threading, time
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
from kgot.config import SandboxSettings
from kgot.sandbox import open_sandbox

box = open_sandbox(SandboxSettings(kind=sys.argv[1], pool_size=2, preload=["networkx"]))
box.warm_up(wait=False)
time.sleep(0.3)  # the workers are spawned and pre-importing
box.close()
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            parent = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid():
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass
for thread in threading.enumerate():
    if thread.name.startswith("kgot-sandbox-warm"):
        thread.join(timeout=30)
print("done")
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bwrap", "fallback"])
def test_closing_a_warming_pool_is_silent(kind: str) -> None:
    make_sandbox(kind).close()  # skips with the reason where this kind cannot run
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, kind],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "done"
    assert child.stderr.strip() == "", child.stderr
