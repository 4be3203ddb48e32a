"""Warm workers and the pool that hands them out; shared by the bwrap and fallback kinds.

A :class:`WorkerProcess` is one sandbox (one bubblewrap or unshare process tree) running
:mod:`kgot.sandbox.worker`, which has pre-imported the libraries LLM code uses and runs every job
in fresh processes. :class:`PooledSandbox` keeps up to ``pool_size`` of them idle, serves
concurrent ``run`` calls from many threads, replaces a worker after ``recycle_after`` jobs or
whenever one misbehaves, and keeps one warm worker for the latest set of host mounts (the
python tool's attachments), since mounts are fixed when a sandbox starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError
from kgot.sandbox import worker as wire
from kgot.sandbox.base import ExecResult, Job, Limits
from kgot.sandbox.cgroups import Cgroup, open_cgroup
from kgot.sandbox.common import (
    failed_result,
    job_frame,
    memory_exceeded,
    resolve_limits,
    result_from_reply,
    validate_job,
)
from kgot.sandbox.packages import PackageCache, PackageRefused

if TYPE_CHECKING:
    from kgot.sandbox.resident import ResidentWorker

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(wire.__file__).resolve()
STARTUP_TIMEOUT_S = 90.0  # importing pandas + sympy on a loaded 2-core machine can take a while
_PIPE_BYTES = 1 << 20  # /proc/sys/fs/pipe-max-size's default: allowed without privilege
REPLY_GRACE_S = 5.0  # the worker enforces the deadline; the host waits this much longer
_BASELINE_PROCESSES = 4  # bubblewrap or unshare outside, zygote, supervisor, one spare
_MEMORY_SLACK = 64 * 1024 * 1024
# Since this kernel, RLIMIT_NPROC counts a user's processes per user namespace.
_PER_NAMESPACE_NPROC = (5, 14)
# Standard-library modules every worker imports up front, on top of the configured preload list.
STDLIB_PRELOAD = (
    "json",
    "math",
    "cmath",
    "re",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "statistics",
    "fractions",
    "decimal",
    "random",
    "string",
    "textwrap",
    "csv",
    "io",
    "heapq",
    "bisect",
    "copy",
    "operator",
    "hashlib",
    "base64",
    "unicodedata",
    "dataclasses",
    "typing",
    "traceback",
    "linecache",
    "types",
    "importlib",
)
# How a failed result begins when the worker itself (not the job's code) died mid-job; callers
# that may retry on a fresh worker look for it (document conversion does).
WORKER_DIED = "the sandbox worker died during the job"
# Libraries kgot's own jobs import (the RDF backend's queries and updates).
KGOT_JOB_PRELOAD = ("pyoxigraph",)

MountKey = tuple[tuple[str, str, int, int], ...]


@dataclass
class LaunchPlan:
    """How to start one worker: the command, its environment and the descriptors it inherits."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    host_uid: int = 0  # the uid the worker's processes have on the host


class Launcher(Protocol):
    """Builds the command that starts a worker inside one kind of isolation."""

    name: str
    # "cgroup+rlimit", "rlimit", "cgroup" or "none": what caps a job's processes (`check`)
    process_cap: str
    userns_per_worker: bool  # each worker is a user namespace of its own

    def plan(
        self,
        *,
        preload: list[str],
        mounts: tuple[Path, ...],
        cgroup: Cgroup | None = None,
        resident: bool = False,
    ) -> LaunchPlan:
        """The command for a worker pre-importing ``preload`` with ``mounts`` visible, joining
        ``cgroup`` before anything else runs; ``resident`` workers accept state frames."""
        ...


class WorkerCrashed(Exception):
    """The worker process died, hung or sent something that is not a valid reply."""


class WorkerSilent(WorkerCrashed):
    """No reply by the job's deadline plus grace: its supervisor did not act (a job can stop
    it, being the same user); the whole worker is killed instead."""


class PoolClosed(SandboxUnavailableError):
    """The pool was closed while a worker started for it (the start was stopped on purpose)."""


class WorkerProcess:
    """One running sandbox with a zygote inside, used by one thread at a time."""

    def __init__(self, plan: LaunchPlan, cgroup: Cgroup | None, mounts: MountKey = ()) -> None:
        self.plan = plan
        self.cgroup = cgroup
        self.mounts = mounts
        self.host_uid = plan.host_uid
        self.jobs_done = 0
        self.info: dict[str, Any] = {}
        self.last_state: dict[str, Any] | None = None  # the last job's state update answer
        # Closed in _release(); holds the worker's own diagnostics (never job output).
        self._stderr = tempfile.TemporaryFile(prefix="kgot-worker-")  # noqa: SIM115
        self._memory_baseline: int | None = None
        self._memory_limit: int | None = None
        self._pids_max: int | None = None
        if cgroup is not None:
            cgroup.set_pids_max(64 + _BASELINE_PROCESSES)  # until the first job sets its own
        try:
            self.process = _SPAWNER.submit(
                subprocess.Popen,
                plan.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=plan.env,
                cwd="/",  # the host's working directory must not show up anywhere inside
                pass_fds=plan.pass_fds,
                start_new_session=True,
                close_fds=True,
            ).result()
        except OSError as error:
            self._release()
            raise SandboxUnavailableError(
                f"cannot start the sandbox ({error}); run `kgot sandbox check` for details"
            ) from None
        except RuntimeError:  # the interpreter is exiting: a warm-up raced it, nobody waits
            self._release()
            raise PoolClosed("the process is exiting") from None
        finally:
            for action in plan.cleanup:
                with contextlib.suppress(OSError):
                    action()
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in_fd = self.process.stdin.fileno()
        self._out_fd = self.process.stdout.fileno()
        os.set_blocking(self._in_fd, False)
        os.set_blocking(self._out_fd, False)
        # Larger pipes move a job's input files (a staged document of tens of MB) and its
        # outputs in fewer wake-ups than the default 64 KiB; the kernel may refuse the size.
        for fd in (self._in_fd, self._out_fd):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)

    # -- start-up -------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
        """Block until the worker says it is ready.

        Raises:
            SandboxUnavailableError: it exited or stayed silent (its stderr tail is quoted).
        """
        try:
            header, _ = self._receive(time.monotonic() + timeout_s, max_total=1 << 20)
        except WorkerCrashed as why:
            detail = self.stderr_tail() or str(why)
            self.close()
            raise SandboxUnavailableError(
                f"the sandbox worker did not start: {detail} "
                "(run `kgot sandbox check`; `--sandbox subprocess` accepts weaker isolation)"
            ) from None
        if not header.get(wire.READY):
            self.close()
            raise SandboxUnavailableError("the sandbox worker sent an unexpected greeting")
        self.info = header
        if self.cgroup is not None:
            self._memory_baseline = self.cgroup.memory_usage()
        return header

    # -- resident state -------------------------------------------------------------------

    def send_state(
        self, hook: str, request: dict[str, Any], blobs: list[bytes], timeout_s: float
    ) -> dict[str, Any]:
        """Hand resident state to the zygote (see :func:`kgot.sandbox.worker._apply_state`);
        its answer, ``{"ok": True, …}`` or ``{"ok": False, "error": …}``.

        Raises:
            WorkerCrashed: the worker died or did not answer in time.
        """
        frame = wire.encode_frame({"state": {"hook": hook, "request": request}}, blobs)
        deadline = time.monotonic() + timeout_s
        self._send(frame, deadline)
        header, _ = self._receive(deadline, max_total=1 << 20)
        answer = header.get("state")
        if not isinstance(answer, dict):
            raise WorkerCrashed("the worker answered a state update with something else")
        if answer.get("ok") and self.cgroup is not None:
            # Jobs may use their memory allowance on top of the state, not inside it.
            self._memory_baseline = self.cgroup.memory_usage()
            self._memory_limit = None
        return answer

    # -- jobs -----------------------------------------------------------------------------

    def run(
        self,
        job: Job,
        limits: Limits,
        nproc_base: int | None = None,
        state: tuple[str, dict[str, Any], list[bytes]] | None = None,
    ) -> ExecResult:
        """Run one job (after a resident-state update, in the same exchange, when ``state``
        is given: its answer is then in :attr:`last_state`); a dead or hung worker raises
        ``WorkerCrashed``."""
        self.last_state = None
        frame, deadline, kills_before, started = self._start_job(job, limits, nproc_base, state)
        try:
            self._send(frame, deadline)
            reply, blobs = self._receive(deadline, _reply_cap(limits))
        except WorkerCrashed as why:
            raise self._crash_cause(why, limits, kills_before) from None
        return self._finish_job(reply, blobs, limits, kills_before, started)

    async def arun(self, job: Job, limits: Limits, nproc_base: int | None = None) -> ExecResult:
        """:meth:`run` on the event loop: the loop watches the pipes, so no thread has to
        block in ``select`` for the reply (and hand it back to the loop). Cancelling it leaves
        the worker mid-job: the caller must discard the worker."""
        frame, deadline, kills_before, started = self._start_job(job, limits, nproc_base)
        try:
            await self._asend(frame, deadline)
            reply, blobs = await self._areceive(deadline, _reply_cap(limits))
        except WorkerCrashed as why:
            raise self._crash_cause(why, limits, kills_before) from None
        return self._finish_job(reply, blobs, limits, kills_before, started)

    def _start_job(
        self,
        job: Job,
        limits: Limits,
        nproc_base: int | None,
        state: tuple[str, dict[str, Any], list[bytes]] | None = None,
    ) -> tuple[bytes, float, int, float]:
        """The job's frame, its reply deadline, the OOM kill count before it, its start."""
        self._apply_cgroup_limits(limits)
        kills_before = self.cgroup.oom_kills() if self.cgroup else 0
        frame = job_frame(job, limits, nproc_base=nproc_base, state=state)
        started = time.monotonic()
        deadline = started + (limits.timeout_s or 30.0) + REPLY_GRACE_S
        return frame, deadline, kills_before, started

    def _crash_cause(self, why: WorkerCrashed, limits: Limits, kills_before: int) -> WorkerCrashed:
        """What to report for a worker that died mid-job: the memory limit when it was that."""
        if self.cgroup is not None and self.cgroup.oom_kills() > kills_before:
            return WorkerCrashed(memory_exceeded(limits))
        return why

    def _finish_job(
        self,
        reply: dict[str, Any],
        blobs: list[bytes],
        limits: Limits,
        kills_before: int,
        started: float,
    ) -> ExecResult:
        self.jobs_done += 1
        answer = reply.get("state")
        self.last_state = answer if isinstance(answer, dict) else None
        memory_hit = bool(self.cgroup and self.cgroup.oom_kills() > kills_before)
        try:
            result = result_from_reply(reply, blobs, limits, memory_hit=memory_hit)
        except ValueError as why:
            raise WorkerCrashed(str(why)) from None
        result.duration_ms = (time.monotonic() - started) * 1000
        return result

    def _apply_cgroup_limits(self, limits: Limits) -> None:
        if self.cgroup is None:
            return
        pids_max = (limits.max_processes or 64) + _BASELINE_PROCESSES
        if pids_max != self._pids_max:
            self.cgroup.set_pids_max(pids_max)
            self._pids_max = pids_max
        if self._memory_baseline is not None and limits.memory_mb:
            limit = self._memory_baseline + limits.memory_mb * 1024 * 1024 + _MEMORY_SLACK
            if limit != self._memory_limit and self.cgroup.set_memory_max(limit):
                self._memory_limit = limit

    # -- the pipe protocol ----------------------------------------------------------------

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerCrashed("the worker stopped reading jobs")
            _, writable, _ = select.select([], [self._in_fd], [], remaining)
            if not writable:
                continue
            try:
                written = os.write(self._in_fd, view)
            except BlockingIOError:
                continue
            except OSError as error:
                raise WorkerCrashed(f"the worker's input closed ({error})") from None
            view = view[written:]

    def _receive(self, deadline: float, max_total: int) -> tuple[dict[str, Any], list[bytes]]:
        reads = _reply_reads(max_total)
        try:
            size = next(reads)
            while True:
                size = reads.send(self._read_exact(size, deadline))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _read_exact(self, size: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise WorkerSilent("no reply before the deadline")
            readable, _, _ = select.select([self._out_fd], [], [], wait)
            chunk = self._read_some(remaining) if readable else None
            if chunk is not None:
                chunks.append(chunk)
                remaining -= len(chunk)
        return b"".join(chunks)

    def _read_some(self, limit: int) -> bytes | None:
        """Up to ``limit`` bytes of the reply, ``None`` when none are there yet."""
        try:
            chunk = os.read(self._out_fd, min(limit, 1 << 20))
        except BlockingIOError:
            return None
        if not chunk:
            raise WorkerCrashed("the worker exited")
        return chunk

    # -- the pipe protocol on the event loop ------------------------------------------------

    async def _asend(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._in_fd, view)
            except BlockingIOError:
                if not await _fd_ready(self._in_fd, deadline, for_reading=False):
                    raise WorkerCrashed("the worker stopped reading jobs") from None
                continue
            except OSError as error:
                raise WorkerCrashed(f"the worker's input closed ({error})") from None
            view = view[written:]

    async def _areceive(
        self, deadline: float, max_total: int
    ) -> tuple[dict[str, Any], list[bytes]]:
        reads = _reply_reads(max_total)
        try:
            size = next(reads)
            while True:
                size = reads.send(await self._aread_exact(size, deadline))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _aread_exact(self, size: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = self._read_some(remaining)
            if chunk is None:
                if not await _fd_ready(self._out_fd, deadline, for_reading=True):
                    raise WorkerSilent("no reply before the deadline")
                continue
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    # -- shutdown -------------------------------------------------------------------------

    def stderr_tail(self, limit: int = 400) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", errors="replace").strip()
            return " | ".join(text.splitlines()[-4:])[-limit:]
        return ""

    def kill(self) -> None:
        """Kill the worker's processes now, from any thread; the thread waiting for its reply
        sees the worker die (a failed result) and cleans up with :meth:`close`."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, 9)

    def close(self) -> None:
        """Stop the worker and everything it started; safe to call twice."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=2)
        with contextlib.suppress(OSError):
            self.process.stdout.close()  # type: ignore[union-attr]
        self._release()

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        with contextlib.suppress(OSError):
            self._stderr.close()


def _reply_cap(limits: Limits) -> int:
    """The most reply bytes a job may send: its outputs, stdout and stderr, each up to the cap."""
    return 3 * (limits.max_output_bytes or 1_000_000) + (1 << 16)


def _reply_reads(max_total: int) -> Generator[int, bytes, tuple[dict[str, Any], list[bytes]]]:
    """The worker's reply format, apart from how bytes arrive: yields how many bytes it needs
    next, is sent them, and returns the header and the blobs (so the blocking and the event-loop
    readers share it)."""
    length = int.from_bytes((yield 4), "big")
    if length > wire.MAX_HEADER_BYTES:
        raise WorkerCrashed(f"reply header of {length} bytes")
    raw_header = yield length
    try:
        header = wire.decode_header(raw_header)
    except ValueError as error:
        raise WorkerCrashed(f"malformed reply ({error})") from None
    sizes = header["blobs"]
    if sum(sizes) > max_total:
        raise WorkerCrashed(f"reply of {sum(sizes)} bytes exceeds the output cap")
    blobs = []
    for size in sizes:
        blobs.append((yield size))
    return header, blobs


async def _fd_ready(fd: int, deadline: float, *, for_reading: bool) -> bool:
    """Wait on the running loop until ``fd`` is readable (or writable); False once the
    deadline (a ``time.monotonic`` value) has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bool] = loop.create_future()

    def settle(value: bool) -> None:
        if not ready.done():
            ready.set_result(value)

    if for_reading:
        loop.add_reader(fd, settle, True)
    else:
        loop.add_writer(fd, settle, True)
    timer = loop.call_later(remaining, settle, False)
    try:
        return await ready
    finally:
        timer.cancel()
        if for_reading:
            loop.remove_reader(fd)
        else:
            loop.remove_writer(fd)


# Every worker is started from this one long-lived thread. bubblewrap's --die-with-parent
# (PR_SET_PDEATHSIG) fires when the *thread* that forked it exits, so a worker started from a
# short-lived warm-up thread would be killed as soon as that thread finished.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgot-sandbox-spawner")


def mount_key(mounts: tuple[Path, ...]) -> MountKey:
    """What identifies a set of mounts: names, real paths and the files they are now (a path
    replaced since a worker bound it must not be served by that worker)."""
    key = []
    for mount in mounts:
        real = os.path.realpath(mount)
        info = os.stat(real)
        key.append((Path(mount).name, real, info.st_dev, info.st_ino))
    return tuple(sorted(key))


@dataclass
class _PoolState:
    """Everything a pool must stop when it is closed or garbage-collected (no reference to
    the pool itself, so a forgotten pool can still be collected)."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    idle: list[WorkerProcess] = field(default_factory=list)
    busy: set[WorkerProcess] = field(default_factory=set)
    mounted: list[WorkerProcess] = field(default_factory=list)  # at most one idle
    starting: set[WorkerProcess] = field(default_factory=set)  # not ready yet
    # Runs' own workers (resident graphs): they stop with the pool at the latest.
    residents: weakref.WeakSet[ResidentWorker] = field(default_factory=weakref.WeakSet)

    def stop(self) -> None:
        for resident in list(self.residents):
            resident.close()
        with self.cond:
            idle = [*self.idle, *self.mounted]
            self.idle.clear()
            self.mounted.clear()
            # Their starting threads see them die and give up quietly (see _start_worker).
            stopped = [*self.busy, *self.starting]
            self.cond.notify_all()
        for worker in idle:
            worker.close()
        for worker in stopped:
            worker.kill()


class PooledSandbox:
    """A :class:`~kgot.sandbox.base.Sandbox` backed by a pool of warm workers.

    Thread-safe: ``run`` may be called from many threads at once; each job gets a worker of its
    own (an idle one, or a new one when all are busy, up to ``max_workers``).
    """

    def __init__(
        self,
        launcher: Launcher,
        settings: SandboxSettings,
        packages: PackageCache | None = None,
    ) -> None:
        self.launcher = launcher
        self.settings = settings
        self.packages = packages
        self.preload = list(dict.fromkeys([*STDLIB_PRELOAD, *KGOT_JOB_PRELOAD, *settings.preload]))
        self.max_workers = max(settings.pool_size, os.cpu_count() or 2)
        self._state = _PoolState()
        self._cond = self._state.cond
        self._live = 0  # idle + busy + starting default (mount-less) workers
        self._closed = False
        self._closings = 0  # close() calls so far: waiters for a worker notice a close
        self._waiting = 0  # jobs waiting for a worker right now
        self._warming = False
        self._starting = 0  # background starts under way (counted in _live too)
        # A resident worker started ahead for the next run (see prepare_resident).
        self._spare_resident: tuple[tuple[str, ...], ResidentWorker] | None = None
        # Workers and their cgroups go with the pool, at the latest when the host exits; the
        # finalizer holds the state, not the pool, so an unclosed pool can be collected.
        self._finalizer = weakref.finalize(self, _stop_at_exit, self._state)

    @property
    def name(self) -> str:
        return self.launcher.name

    @property
    def file_uid(self) -> int | None:
        """The host uid jobs read mounted files as, when it is not kgot's own (or root's)."""
        return getattr(self.launcher, "file_uid", None)

    def hides_from_jobs(self, path: Path) -> bool:
        """Whether jobs cannot see the host path ``path`` unless it is mounted for them (true
        for bubblewrap, which shows only system directories; the fallback shows the host)."""
        hides = getattr(self.launcher, "hides_from_jobs", None)
        return True if hides is None else bool(hides(path))

    @property
    def idle_workers(self) -> int:
        """How many warm workers wait for a job right now (mount-less ones)."""
        with self._cond:
            return len(self._state.idle)

    # -- the Sandbox protocol ---------------------------------------------------------------

    def run(self, job: Job) -> ExecResult:
        """Run ``job`` in fresh processes of a warm worker.

        Raises:
            SandboxUnavailableError: no worker could be started.
            ValueError: the job itself is malformed (escaping file names, missing mounts).
        """
        validate_job(job)
        limits = resolve_limits(job.limits, self.settings)
        if job.packages:
            refusal = ensure_packages(self.packages, job.packages)
            if refusal is not None:
                return failed_result(refusal)
        if self.settings.pool_size == 0:
            return self._run_one_shot(job, limits)
        key = mount_key(tuple(Path(m) for m in job.mounts))
        worker = self._acquire_mounted(key, job.mounts) if key else self._acquire()
        with self._cond:
            self._state.busy.add(worker)
        try:
            result = worker.run(job, limits, self._nproc_base(worker))
        except BaseException as error:
            return self._job_failed(worker, key, limits, error)
        finally:
            with self._cond:
                self._state.busy.discard(worker)
        self._put_back(worker, key)
        return result

    async def arun(self, job: Job) -> ExecResult:
        """:meth:`run` for the event loop. With a warm worker free, the job runs on the loop
        itself (see :meth:`WorkerProcess.arun`); one that must wait for a worker, install
        packages or mount folders runs :meth:`run` on a thread."""
        validate_job(job)
        worker = None if job.packages or job.mounts else self._take_idle()
        if worker is None:
            return await asyncio.to_thread(self.run, job)
        limits = resolve_limits(job.limits, self.settings)
        with self._cond:
            self._state.busy.add(worker)
        try:
            result = await worker.arun(job, limits, self._nproc_base(worker))
        except asyncio.CancelledError:
            # Mid-job, so the worker goes. Killing it is instant; waiting for its processes to
            # end and removing its cgroup (~15 ms) is left to a thread: the loop serves others.
            worker.kill()
            threading.Thread(target=self._discard, args=(worker,), name="kgot-discard").start()
            raise
        except BaseException as error:
            return self._job_failed(worker, (), limits, error)
        finally:
            with self._cond:
                self._state.busy.discard(worker)
        self._put_back(worker, ())
        return result

    def _take_idle(self) -> WorkerProcess | None:
        """A warm worker if one is free right now (never waits, never starts one)."""
        with self._cond:
            return self._state.idle.pop() if self._state.idle else None

    def _job_failed(
        self, worker: WorkerProcess, key: MountKey, limits: Limits, error: BaseException
    ) -> ExecResult:
        """Discard the worker a job failed on; a failed result for a worker that went silent
        or died, any other error raised again."""
        if not isinstance(error, WorkerCrashed):
            worker.kill()  # stopped from outside mid-job (Ctrl-C, cancelled): no reason to wait
        self._discard(worker, replace=not key)  # kills every process of the job with it
        if isinstance(error, WorkerSilent):
            return silent_worker_result(limits)
        if isinstance(error, WorkerCrashed):
            return failed_result(f"{WORKER_DIED} ({error}); it was replaced")
        raise error

    def _put_back(self, worker: WorkerProcess, key: MountKey) -> None:
        if key:
            self._release_mounted(worker)
        else:
            self._release(worker)

    def close(self) -> None:
        """Stop every worker; jobs still running are killed (their callers get a failed
        result saying so). ``run`` restarts the pool.

        Killing running jobs matters on Ctrl-C: the threads waiting for them would otherwise
        keep the interpreter alive until each job's own timeout.
        """
        with self._cond:
            self._live -= len(self._state.idle)
            self._closed = True
            self._warming = False
            self._closings += 1
            self._cond.notify_all()  # jobs waiting for a worker give up (see _acquire)
        self._state.stop()

    @property
    def waiting_for_worker(self) -> int:
        """How many jobs are waiting for a worker to become free."""
        with self._cond:
            return self._waiting

    def warm_up(self, *, wait: bool = True) -> None:
        """Start ``pool_size`` workers now instead of at the first job.

        Raises:
            SandboxUnavailableError: (with ``wait``) a worker could not start.
        """
        with self._cond:
            self._closed = False
            self._warming = True
            missing = self.settings.pool_size - self._live
            self._live += max(missing, 0)
            closings = self._closings
        starters = [
            functools.partial(self._start_into_pool, closings) for _ in range(max(missing, 0))
        ]
        if wait:
            for start in starters:
                start(raise_errors=True)
        elif starters:
            # One after the other: starting them all at once would take every core from the
            # run they warm up for (pre-importing pandas and sympy costs ~0.5 s of CPU each).
            def start_all() -> None:
                for left, start in zip(range(len(starters), 0, -1), starters, strict=True):
                    with self._cond:
                        if self._closings != closings:  # closed meanwhile: start no more
                            self._live -= left
                            self._cond.notify_all()
                            return
                    start()

            threading.Thread(target=start_all, daemon=True, name="kgot-sandbox-warm").start()

    def wait_warm(self, count: int | None = None, timeout_s: float = STARTUP_TIMEOUT_S) -> bool:
        """Block until ``count`` (default ``pool_size``) workers are idle; False on timeout."""
        wanted = self.settings.pool_size if count is None else count
        with self._cond:
            return self._cond.wait_for(lambda: len(self._state.idle) >= wanted, timeout_s)

    # -- pool mechanics -------------------------------------------------------------------

    def _nproc_base(self, worker: WorkerProcess) -> int | None:
        """How many processes of the worker's host user count against a job's RLIMIT_NPROC
        before it starts, when the worker cannot see them all (``None``: it can)."""
        if worker.host_uid == 0:
            return None  # root: RLIMIT_NPROC does not bind it (the pids cgroup does)
        if self.launcher.userns_per_worker and _kernel_at_least(_PER_NAMESPACE_NPROC):
            return None  # counted per user namespace: the sandbox's own processes only
        # Counted across the host: all of the user's processes, this worker's included.
        return _processes_of_user(worker.host_uid)

    def _acquire(self) -> WorkerProcess:
        """A warm worker, or a new one.

        Raises:
            SandboxUnavailableError: the sandbox was closed while this job waited for a worker
                (on Ctrl-C: the waiting thread must not keep the interpreter alive).
        """
        with self._cond:
            closings = self._closings
            self._closed = False
            if not self._warming:
                self._warming = True
                extra = self.settings.pool_size - 1 - self._live
                if extra > 0:  # the first job starts one worker; the rest warm up behind it
                    self._live += extra
                    for _ in range(extra):
                        threading.Thread(
                            target=self._start_into_pool,
                            args=(closings,),
                            daemon=True,
                            name="kgot-sandbox-warm",
                        ).start()
            while True:
                if self._state.idle:
                    return self._state.idle.pop()
                # A replacement already starting will be ready as soon as a new one would be.
                if self._live < self.max_workers and self._starting == 0:
                    self._live += 1
                    break
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1
                if self._closings != closings:
                    raise SandboxUnavailableError(
                        "the sandbox was closed while the job waited for a worker"
                    )
        try:
            worker = self._start_worker(closings=closings)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            closed_meanwhile = self._closings != closings
            if closed_meanwhile:
                self._live -= 1
        if closed_meanwhile:  # closed while this worker started: the job must not run now
            worker.close()
            raise PoolClosed(_CLOSED_WHILE_STARTING)
        return worker

    def _release(self, worker: WorkerProcess) -> None:
        recycle = worker.jobs_done >= self.settings.recycle_after
        with self._cond:
            idle = self._state.idle
            keep = not recycle and not self._closed and len(idle) < self.settings.pool_size
            if keep:
                idle.append(worker)
                self._cond.notify()
                return
        self._discard(worker, replace=recycle)

    def _acquire_mounted(self, key: MountKey, mounts: tuple[Path, ...]) -> WorkerProcess:
        """The warm worker for these mounts, or a new one (pre-importing like the others)."""
        with self._cond:
            self._closed = False
            mounted = self._state.mounted
            if mounted and mounted[0].mounts == key:
                return mounted.pop()
        return self._start_worker(mounts=tuple(Path(m) for m in mounts), key=key)

    def _release_mounted(self, worker: WorkerProcess) -> None:
        """Keep the most recently used mounted worker; any other goes."""
        retired: list[WorkerProcess] = []
        with self._cond:
            if worker.jobs_done >= self.settings.recycle_after or self._closed:
                retired.append(worker)
            else:
                retired += self._state.mounted
                self._state.mounted[:] = [worker]
        for old in retired:
            old.close()

    def _discard(self, worker: WorkerProcess, *, replace: bool = True) -> None:
        worker.close()
        if worker.mounts:
            return  # not counted in the mount-less pool
        with self._cond:
            self._live -= 1
            refill = replace and not self._closed and self._live < self.settings.pool_size
            if refill:
                self._live += 1
            closings = self._closings
            self._cond.notify()
        if refill:  # keep the pool warm: start the successor off the caller's thread
            threading.Thread(target=self._start_into_pool, args=(closings,), daemon=True).start()

    def _start_into_pool(self, closings: int, *, raise_errors: bool = False) -> None:
        """Start a worker for the pool's slot reserved (counted in ``_live``) before the
        ``closings``-th close; a close since then cancels the start quietly."""
        with self._cond:
            self._starting += 1
        try:
            worker = self._start_worker(closings=closings)
        except SandboxUnavailableError as error:
            with self._cond:
                self._starting -= 1
                self._live -= 1
                self._cond.notify_all()
            if raise_errors:
                raise
            if not isinstance(error, PoolClosed):  # closing a warming pool is no failure
                log.warning("%s", error)
            return
        with self._cond:
            self._starting -= 1
            if self._closed:
                self._live -= 1
            else:
                self._state.idle.append(worker)
                self._cond.notify_all()
                return
        worker.close()

    def prepare_resident(self, preload: tuple[str, ...]) -> None:
        """Start the next run's own worker now (the first :meth:`open_resident` with the same
        ``preload`` takes it), so it warms while the run opens its store and builds its
        graph."""
        with self._cond:
            if self._spare_resident is not None:
                return
        spare = self.open_resident(preload)
        if spare is not None:
            with self._cond:
                self._spare_resident = (preload, spare)

    def open_resident(self, preload: tuple[str, ...]) -> ResidentWorker | None:
        """A worker of its own for one run's resident state (see
        :mod:`kgot.sandbox.resident`), pre-importing ``preload`` and the standard library;
        it starts in the background and stops with the pool at the latest. ``None`` when
        resident state is off (``sandbox.resident_graph``) or nothing is kept warm
        (``pool_size`` 0)."""
        from kgot.sandbox.resident import ResidentWorker

        if not self.settings.resident_graph or self.settings.pool_size == 0:
            return None
        with self._cond:
            spare, self._spare_resident = self._spare_resident, None
        if spare is not None and spare[0] == preload:
            return spare[1]
        if spare is not None:
            spare[1].close()
        modules = list(dict.fromkeys([*STDLIB_PRELOAD, *preload]))

        def start() -> WorkerProcess:
            return self._start_worker(preload=modules, resident=True)

        resident = ResidentWorker(
            start, self.settings, nproc_base=self._nproc_base, closed=lambda: self._closed
        )
        self._state.residents.add(resident)
        return resident

    def _start_worker(
        self,
        *,
        preload: list[str] | None = None,
        mounts: tuple[Path, ...] = (),
        key: MountKey = (),
        resident: bool = False,
        closings: int | None = None,
    ) -> WorkerProcess:
        """Start a worker (serving jobs whose mounts match ``key``) and wait until it is ready.

        ``closings`` is the count of closes when the start was asked for (default: now). A
        worker that fails to start because the pool was closed since, or because the
        interpreter is exiting, raises :class:`PoolClosed`: nobody waits for it, and the
        failure says nothing about the sandbox (so no warning may suggest weaker isolation).

        Raises:
            PoolClosed: closed since ``closings``, or the process is exiting.
            SandboxUnavailableError: the worker genuinely could not start.
        """
        with self._cond:
            if closings is None:
                closings = self._closings
            elif self._closings != closings:  # closed before this start began: skip it
                raise PoolClosed(_CLOSED_WHILE_STARTING)
        label = re.sub(r"[^a-z0-9]+", "-", self.launcher.name.lower()).strip("-")[:24]
        cgroup = open_cgroup(label) if "cgroup" in self.launcher.process_cap else None
        try:
            plan = self.launcher.plan(
                preload=self.preload if preload is None else preload,
                mounts=mounts,
                cgroup=cgroup,
                resident=resident,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        worker = WorkerProcess(plan, cgroup, key)
        with self._cond:
            self._state.starting.add(worker)
        try:
            worker.wait_ready()
        except SandboxUnavailableError:
            with self._cond:
                closed_meanwhile = self._closings != closings
            if closed_meanwhile:  # close() stopped it: that is why it did not start
                raise PoolClosed(_CLOSED_WHILE_STARTING) from None
            if interpreter_exiting():
                raise PoolClosed("the process is exiting") from None
            raise
        finally:
            with self._cond:
                self._state.starting.discard(worker)
        return worker

    def _run_one_shot(self, job: Job, limits: Limits) -> ExecResult:
        """A worker of its own, with the job's mounts and nothing pre-imported (``pool_size``
        0: one job, so nothing is worth importing ahead)."""
        started = time.monotonic()
        worker = self._start_worker(preload=[], mounts=tuple(Path(m) for m in job.mounts))
        with self._cond:
            self._state.busy.add(worker)
        try:
            result = worker.run(job, limits, self._nproc_base(worker))
        except WorkerSilent:
            worker.kill()
            return silent_worker_result(limits, (time.monotonic() - started) * 1000)
        except WorkerCrashed as why:
            return failed_result(
                f"{WORKER_DIED} ({why})",
                (time.monotonic() - started) * 1000,
            )
        finally:
            with self._cond:
                self._state.busy.discard(worker)
            worker.close()
        result.duration_ms = (time.monotonic() - started) * 1000
        return result


_CLOSED_WHILE_STARTING = "the sandbox was closed while the job's worker started"


def interpreter_exiting() -> bool:
    """Whether Python is exiting (its main thread has finished).

    At exit the interpreter shuts :data:`_SPAWNER` down, and the end of its thread kills every
    bubblewrap it started (``--die-with-parent``), workers still starting in background
    warm-ups included: such a worker "did not start" because the command was over, which is no
    failure of the sandbox (a short ``kgot tools run`` ends while the document parsers warm).
    """
    return not threading.main_thread().is_alive()


def silent_worker_result(limits: Limits, duration_ms: float = 0.0) -> ExecResult:
    """A job whose worker went silent past its deadline: the whole worker was killed."""
    result = failed_result(
        f"timed out after {limits.timeout_s:g} s (wall clock) and the sandbox's supervisor did "
        "not report (the job may have stopped it): the whole worker was killed, with every "
        "process of the job",
        duration_ms,
    )
    result.timed_out = True
    return result


def ensure_packages(cache: PackageCache | None, names: tuple[str, ...]) -> str | None:
    """Install a job's packages into the cache; the refusal as one line, or ``None``."""
    if cache is None or not cache.enabled:
        return (
            f"packages {', '.join(names)} cannot be installed: no packages are allowed in this "
            "sandbox (sandbox.allow_packages is empty); use the libraries already available"
        )
    try:
        cache.ensure(names)
    except PackageRefused as refusal:
        return str(refusal)
    return None


def _kernel_at_least(version: tuple[int, int]) -> bool:
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return release is not None and (int(release[1]), int(release[2])) >= version


def _processes_of_user(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


__all__ = [
    "KGOT_JOB_PRELOAD",
    "STDLIB_PRELOAD",
    "WORKER_DIED",
    "LaunchPlan",
    "Launcher",
    "PoolClosed",
    "PooledSandbox",
    "WorkerCrashed",
    "WorkerProcess",
    "mount_key",
]


def _stop_at_exit(state: Any) -> None:
    """Stop a pool nobody closed (collected, or still open when the interpreter exits, e.g.
    after a signal cancelled its user). A failure here can be acted on by nobody: it is said
    in one line on stderr instead of a traceback after the command's own last words."""
    try:
        state.stop()
    except Exception as error:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"kgot: warning: sandbox clean-up failed: {error}\n")
