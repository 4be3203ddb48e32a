"""The sandbox contract: every line of LLM-written code runs through :class:`Sandbox`.

Inside a job the code sees (the documented contract, see docs/sandbox.md):

* its working directory ``/work`` — private, writable, empty at the start of every job
  (``/work/out`` for a job that asks for it with :attr:`Job.cwd`);
* input files given in :attr:`Job.files` under ``/work/in/`` (written before the code starts);
* host files given in :attr:`Job.mounts`, read-only, under ``/mnt/inputs/<name>``;
* an output directory ``/work/out/``: every regular file there when the job ends comes back in
  :attr:`ExecResult.outputs` (the only channel besides stdout/stderr).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

WORK_DIR = "/work"
# Private, writable directories every local sandbox gives a job besides WORK_DIR, emptied after
# each job (a kind without one of them simply has no such directory).
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
INPUT_DIR = "/work/in"
OUTPUT_DIR = "/work/out"
MOUNT_DIR = "/mnt/inputs"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one job; ``None`` means the sandbox's configured default."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    cpu_seconds: int | None = None
    max_output_bytes: int | None = None
    max_file_mb: int | None = None
    max_open_files: int | None = None
    max_processes: int | None = None


@dataclass(frozen=True)
class Job:
    """One piece of Python source to run.

    Attributes:
        code: Python source, run as ``__main__`` with ``/work`` as working directory.
        files: file name -> content, placed under ``/work/in/`` before the code starts.
        mounts: host files or directories shown read-only under ``/mnt/inputs/<basename>``.
        limits: per-job overrides of the sandbox defaults.
        packages: extra packages the code imports; each must be on
            ``SandboxSettings.allow_packages`` (installed on the host into a read-only cache).
        cwd: the code's working directory, ``/work`` or ``/work/out``; in the latter every file
            the code writes under a relative name comes back (the python tool's choice, so
            ``open("result.csv", "w")`` is kept like ``/work/out/result.csv``).
    """

    code: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    mounts: tuple[Path, ...] = ()
    limits: Limits = Limits()
    packages: tuple[str, ...] = ()
    cwd: str = WORK_DIR


# The working directories a job may ask for (Job.cwd), as the worker names them: relative to
# WORK_DIR.
JOB_CWDS = {WORK_DIR: ".", OUTPUT_DIR: "out"}


@dataclass
class ExecResult:
    """What came back from a job. Never raises for failures of the *code*; see ``error``."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    error: str | None = None  # why the job failed, in one line (limit hit, killed, crash)
    duration_ms: float = 0.0
    outputs: dict[str, bytes] = field(default_factory=dict)
    truncated: bool = False  # stdout/stderr/outputs were cut at the output cap

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted Python. Implementations: bwrap (default), fallback, docker, subprocess.

    A sandbox that can wait for a job on the event loop also offers ``async arun(job)`` with
    :meth:`run`'s contract; :func:`run_async` uses it when present.
    """

    @property
    def name(self) -> str:
        """Short identifier of the isolation in use, e.g. ``bwrap+seccomp``."""
        ...

    def run(self, job: Job) -> ExecResult:
        """Run one job to completion (or its limits) and return its result.

        Raises:
            SandboxUnavailableError: the sandbox itself cannot run (not the code failing).
        """
        ...

    def warm_up(self, *, wait: bool = True) -> None:
        """Get ready for the first job now (start warm workers); a no-op where nothing is
        kept warm. With ``wait=False`` it returns at once and the work goes on in the
        background, so a caller can overlap it with other work."""
        ...

    def close(self) -> None:
        """Stop warm workers and free resources; further ``run`` calls may restart them."""
        ...


async def run_async(sandbox: Sandbox, job: Job) -> ExecResult:
    """Run ``job`` without blocking the event loop: on the loop itself where the sandbox can
    (its ``arun``), else on a worker thread."""
    arun = getattr(sandbox, "arun", None)
    if arun is not None:
        return await arun(job)  # type: ignore[no-any-return]
    return await asyncio.to_thread(sandbox.run, job)
