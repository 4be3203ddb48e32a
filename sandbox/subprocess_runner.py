"""The plain subprocess sandbox: the weakest isolation kgot offers.

Each job gets a fresh ``python -I`` in a private temporary directory, a clean environment,
rlimits (address space, CPU, file size, open files; processes when kgot is not root), a
wall-clock timeout, and capped output. It does **not** hide the host file system or the network,
and it has no mount namespace: there is no ``/work`` and no ``/mnt/inputs``. The job's working
directory holds ``in/`` and ``out/`` as in every kind, and ``Job.mounts`` appear as links under
``inputs/<name>`` (also ``$KGOT_INPUTS``). It exists so kgot runs where neither bubblewrap nor
unshare is usable, for code you trust.

A small supervisor process runs the job as its child and is a *child subreaper*: whatever the
job starts, even in a new session, is re-parented to the supervisor when its parent exits, so on
timeout or exit the supervisor finds and kills every descendant. The host reads the job's output
with a deadline and never waits on pipes a stray process might hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgot.config import SandboxSettings
from kgot.sandbox.base import JOB_CWDS, ExecResult, Job, Limits
from kgot.sandbox.common import (
    JOB_ENV,
    OUTPUT_FILES_CAP,
    cap_text,
    describe_failure,
    failed_result,
    resolve_limits,
    validate_job,
)
from kgot.sandbox.worker import collect_outputs

__all__ = ["SubprocessSandbox"]

_GRACE_S = 3.0  # for the supervisor to kill and report after the job's deadline


class SubprocessSandbox:
    """Runs each job in a new interpreter process. Safe for *your* code, not for strangers'."""

    file_uid: int | None = None  # jobs run as kgot's own user

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()

    @property
    def name(self) -> str:
        return "subprocess"

    def warm_up(self, *, wait: bool = True) -> None:
        """Nothing is kept warm: every job starts fresh."""

    def close(self) -> None:
        """Nothing is kept between jobs."""

    def run(self, job: Job) -> ExecResult:
        """Run ``job`` in a new interpreter with rlimits and a timeout (no isolation).

        Raises:
            ValueError: the job itself is malformed (escaping file names, missing mounts).
        """
        validate_job(job)
        if job.packages:
            return failed_result("the subprocess sandbox installs no packages")
        limits = resolve_limits(job.limits, self.settings)
        # A host stopped by a signal mid-job removes this folder at exit while the job's own
        # session may still be writing into it: leave what is left rather than a traceback.
        with tempfile.TemporaryDirectory(prefix="kgot-job-", ignore_cleanup_errors=True) as root:
            work = Path(root) / "work"
            scratch = Path(root) / "tmp"
            scratch.mkdir()
            _prepare_work_dir(work, job)
            script = Path(root) / "job.py"
            script.write_bytes(job.code.encode("utf-8", errors="surrogatepass"))
            config = {"script": str(script), "timeout_s": limits.timeout_s, **_rlimits(limits)}
            started = time.perf_counter()
            status_r, status_w = os.pipe()
            try:
                # Limits are set by the supervisor inside the child: `preexec_fn` is unsafe when
                # the host runs jobs from several threads (the controller does).
                process = subprocess.Popen(
                    [sys.executable, "-I", "-c", _SUPERVISOR, json.dumps(config), str(status_w)],
                    cwd=work / JOB_CWDS[job.cwd],
                    env=_job_env(work, scratch),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(status_w,),
                    start_new_session=True,
                )
            finally:
                os.close(status_w)
            cap = limits.max_output_bytes or 1_000_000
            deadline = time.monotonic() + (limits.timeout_s or 30.0) + _GRACE_S
            stdout, stderr, report, expired = _collect(process, status_r, cap, deadline)
            duration_ms = (time.perf_counter() - started) * 1000
            names, blobs, outputs_cut = collect_outputs(str(work / "out"), cap, OUTPUT_FILES_CAP)
        status = report.get("status")
        timed_out = bool(report.get("timed_out")) or expired
        exit_code = None if timed_out or status is None else os.waitstatus_to_exitcode(status)
        # Without a report the supervisor was stopped too: nothing vouches for the job's children.
        all_killed = bool(report.get("all_killed"))
        error = describe_failure(exit_code, timed_out, limits, all_killed=all_killed)
        if not report and not expired:
            error = "the job's supervisor ended without a report (the job stopped it)"
        out_text, out_cut = cap_text(stdout[0], cap, stdout[1])
        err_text, err_cut = cap_text(stderr[0], cap, stderr[1])
        return ExecResult(
            stdout=out_text,
            stderr=err_text,
            exit_code=exit_code,
            timed_out=timed_out,
            error=error,
            duration_ms=duration_ms,
            outputs=dict(zip(names, blobs, strict=True)),
            truncated=out_cut or err_cut or outputs_cut,
        )


def _collect(
    process: subprocess.Popen[bytes], status_fd: int, cap: int, deadline: float
) -> tuple[tuple[bytes, int], tuple[bytes, int], dict[str, Any], bool]:
    """Read stdout, stderr (at most ``cap`` bytes each, counting the rest) and the supervisor's
    report until all are closed or ``deadline`` passes; then kill what is left and stop.

    Returns:
        stdout and stderr (kept bytes, total bytes), the report, whether the deadline passed.
    """
    assert process.stdout is not None and process.stderr is not None
    fds = {process.stdout.fileno(): 0, process.stderr.fileno(): 1, status_fd: 2}
    kept = [bytearray(), bytearray(), bytearray()]
    totals = [0, 0, 0]
    open_fds = set(fds)
    expired = False
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            expired = True
            break
        ready, _, _ = select.select(list(open_fds), [], [], remaining)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                continue
            index = fds[fd]
            totals[index] += len(chunk)
            room = (cap if index < 2 else 1 << 16) - len(kept[index])
            if room > 0:
                kept[index] += chunk[:room]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # a no-op unless the deadline passed
    process.stdout.close()
    process.stderr.close()
    os.close(status_fd)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=2)
    try:
        report = json.loads(bytes(kept[2]) or b"{}")
    except ValueError:
        report = {}
    return (bytes(kept[0]), totals[0]), (bytes(kept[1]), totals[1]), report, expired


def _prepare_work_dir(work: Path, job: Job) -> None:
    (work / "in").mkdir(parents=True)
    (work / "out").mkdir()
    for name, content in job.files.items():
        target = (work / "in" / name).resolve()
        if not target.is_relative_to(work / "in"):
            raise ValueError(f"input file name {name!r} escapes the input directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    inputs = work / "inputs"
    inputs.mkdir()
    for host_path in job.mounts:
        (inputs / Path(host_path).name).symlink_to(Path(host_path).resolve())


def _job_env(work: Path, scratch: Path) -> dict[str, str]:
    """The documented job environment, with the temporary directories made private."""
    return {
        **JOB_ENV,
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "MPLCONFIGDIR": str(scratch / "matplotlib"),
        "KGOT_WORK": str(work),
        "KGOT_INPUTS": str(work / "inputs"),
    }


def _rlimits(limits: Limits) -> dict[str, Any]:
    """Limits the supervisor applies to the job child before the code starts."""
    values: dict[str, Any] = {
        "memory_mb": limits.memory_mb or 1024,
        "cpu_seconds": limits.cpu_seconds or 60,
        "max_file_mb": limits.max_file_mb or 64,
        "max_open_files": limits.max_open_files or 256,
        # root ignores RLIMIT_NPROC; only the hardened kinds can cap root's processes
        "max_processes": (limits.max_processes or 64) if os.getuid() != 0 else None,
    }
    return {"limits": values}


# Runs as `python -I -c _SUPERVISOR CONFIG STATUS_FD`: forks the job, enforces the deadline,
# kills every descendant, and writes {"status", "timed_out", "all_killed"} to STATUS_FD.
_SUPERVISOR = r"""
import ctypes, json, os, resource, runpy, select, signal, sys, time, traceback

config = json.loads(sys.argv[1])
report_fd = int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the job come back to us

def vm_size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0

def descendants(me):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in (b"Z", b"X"):
                parents[int(entry)] = int(fields[1])
    found, frontier = set(), {me}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found

def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass

def kill_descendants(grace_s=2.0):
    me, deadline = os.getpid(), time.monotonic() + grace_s
    while True:
        left = descendants(me)
        if not left:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap()
        time.sleep(0.005)

pid = os.fork()
if pid == 0:
    os.close(report_fd)
    code = 1
    try:
        limits = config["limits"]
        def cap(name, value):
            if value is not None:
                resource.setrlimit(getattr(resource, name), (value, value))
        cap("RLIMIT_AS", vm_size() + limits["memory_mb"] * 1024 * 1024)
        cap("RLIMIT_CPU", limits["cpu_seconds"])
        cap("RLIMIT_FSIZE", limits["max_file_mb"] * 1024 * 1024)
        cap("RLIMIT_NOFILE", limits["max_open_files"])
        cap("RLIMIT_CORE", 0)
        if limits["max_processes"] is not None:  # RLIMIT_NPROC counts all of the user's
            uid, count = os.getuid(), 0
            for entry in os.listdir("/proc"):
                try:
                    count += entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid
                except OSError:
                    pass
            cap("RLIMIT_NPROC", count + limits["max_processes"])
        sys.argv = [config["script"]]
        runpy.run_path(config["script"], run_name="__main__")
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, (int, type(None))):
            print(done.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)

os.close(0)
pidfd = os.pidfd_open(pid)
ready, _, _ = select.select([pidfd], [], [], config["timeout_s"])
timed_out = not ready
if timed_out:
    os.kill(pid, signal.SIGKILL)
_, status = os.waitpid(pid, 0)
all_killed = kill_descendants()
os.write(report_fd, json.dumps(
    {"status": status, "timed_out": timed_out, "all_killed": all_killed}).encode())
os._exit(0)
"""
