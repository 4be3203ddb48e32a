"""The processes that run inside a sandbox: a warm zygote, a supervisor, one job at a time.

This file is executed *inside* the sandbox as a plain script, so it uses the standard library
only and never imports ``kgot``. The host imports it too, for the framing functions, so both
sides share one definition of the wire format.

Wire format (both directions, over the worker's stdin/stdout pipes)::

    frame := u32 header_length (big-endian) | header (UTF-8 JSON) | blob_0 | blob_1 | …

``header["blobs"]`` lists the byte length of each blob, so code and file contents travel raw
(no base64, no size limit from the header). Host → worker: one job per frame (``files`` names
and ``limits`` in the header; the code, then each file's content, as blobs). Worker → host: a
``ready`` frame once, then one result frame per job (``stdout``, ``stderr`` and every file of
``out/`` as blobs). The host parses replies with size caps and never unpickles anything: a worker
is only as trustworthy as the code it ran.

Three kinds of process, so that no job can see another job's data:

* the **zygote** (the namespace's pid 1, so jobs cannot signal it) pre-imports the libraries and
  forks a job whenever the supervisor asks. It never reads a frame, a job's output or its files:
  it only receives a request and three pipe descriptors, so nothing of an earlier job is in the
  memory later jobs are forked from;
* the **supervisor**, forked from the zygote *before* the pre-imports (small, cheap), owns the
  host's pipes for the worker's whole life: it reads each frame, writes the input files, sends
  the job its code over a pipe, collects its output under the wall-clock deadline, kills every
  process the job left (``kill(-1)`` spares only itself and init), collects ``out/``, wipes every
  writable directory and replies. Jobs are never forked from it;
* the **job**, forked from the zygote, with its own limits, no descriptor but its stdio, and an
  ``oom_score_adj`` of 1000 so that a memory overrun kills the job rather than the worker.

A **resident** worker (started with ``"resident": true``, one per run, see
:mod:`kgot.sandbox.resident`) also accepts *state* frames: the supervisor relays each to the
zygote over a pipe and the zygote hands it to a hook in kgot's job bundle, which keeps the run's
graph in the zygote's memory. Jobs forked afterwards start with that graph (a copy-on-write copy
they cannot write back), so a job ships only the model's code. State is the host's own data,
never a job's output: what a job computes reaches the zygote only after the host checked it and
sent it again as state.

The zygote and the supervisor are non-dumpable: a job, running as the same user, cannot open
their ``/proc`` files (descriptors, memory, environment). A job that kills the supervisor ends
the worker (the host replaces it); one fork per job keeps a warm job at a few milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import importlib.abc
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

_LENGTH = struct.Struct(">I")
MAX_HEADER_BYTES = 1 << 20
READY = "ready"
MAX_FD = 1 << 20

# prctl(2) options and friends (linux/prctl.h, linux/seccomp.h).
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2

_SUPERVISOR_OOM_SCORE = 500  # the memory cgroup kills the job first, then the supervisor,
_JOB_OOM_SCORE = 1000  # never the zygote (0)


# --------------------------------------------------------------------------- framing


def encode_frame(header: dict[str, Any], blobs: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    """One frame: the header (with the blob sizes added) followed by the raw blobs.

    Raises:
        ValueError: the header alone exceeds :data:`MAX_HEADER_BYTES`.
    """
    header = {**header, "blobs": [len(blob) for blob in blobs]}
    # ASCII escapes keep any string (even a lone surrogate in a file name) encodable.
    head = json.dumps(header, separators=(",", ":")).encode("ascii")
    if len(head) > MAX_HEADER_BYTES:
        raise ValueError(f"frame header of {len(head)} bytes is too large")
    return b"".join((_LENGTH.pack(len(head)), head, *blobs))


def decode_header(raw: bytes) -> dict[str, Any]:
    """Parse and sanity-check a frame header.

    Raises:
        ValueError: not a JSON object with a list of non-negative blob sizes.
    """
    header = json.loads(raw.decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("frame header is not a JSON object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise ValueError("frame header has an invalid blob list")
    return header


def read_frame(fd: int) -> tuple[dict[str, Any], list[bytes]] | None:
    """Read one frame from a blocking descriptor; ``None`` at a clean end of stream.

    Raises:
        EOFError: the stream ended inside a frame.
        ValueError: the header is malformed or too large.
    """
    prefix = _read_exact(fd, _LENGTH.size, allow_eof=True)
    if prefix is None:
        return None
    (length,) = _LENGTH.unpack(prefix)
    if length > MAX_HEADER_BYTES:
        raise ValueError(f"frame header of {length} bytes is too large")
    header = decode_header(_read_exact(fd, length) or b"")
    blobs = [_read_exact(fd, size) or b"" for size in header["blobs"]]
    return header, blobs


def _read_exact(fd: int, size: int, *, allow_eof: bool = False) -> bytes | None:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            if allow_eof and remaining == size:
                return None
            raise EOFError("stream ended inside a frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# --------------------------------------------------------------------------- process helpers


@functools.cache
def _libc_prctl() -> Any:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    # All five arguments, zeroed: several options fail with EINVAL on garbage in the unused ones.
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    return prctl


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    if _libc_prctl()(option, arg2, arg3, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}) failed: {os.strerror(code)}")


def _set_oom_score(score: int) -> None:
    """Raise this process's OOM score (allowed unprivileged; lowering it again is not).

    The ``/proc/self`` files of a non-dumpable process belong to root, so the write happens
    while the process is briefly dumpable; callers do this before any job code runs.
    """
    _prctl(_PR_SET_DUMPABLE, 1)
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as handle:
            handle.write(str(score))
    except OSError:
        pass  # a read-only /proc: the memory cgroup then picks its victim by size alone
    finally:
        _prctl(_PR_SET_DUMPABLE, 0)


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def install_seccomp(program: bytes) -> None:
    """Install a compiled classic-BPF seccomp program on this process and its future children.

    Raises:
        OSError: the kernel refused the program.
    """
    count = len(program) // ctypes.sizeof(_SockFilter)
    instructions = (_SockFilter * count).from_buffer_copy(program)
    fprog = _SockFprog(count, instructions)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


def _vm_size_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _live_pids() -> list[int]:
    """Processes of this pid namespace that have not exited (zombies excluded)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            alive.append(int(entry))
    return alive


def kill_everything_else(grace_s: float = 3.0) -> bool:
    """SIGKILL every process of the namespace but init and ourselves; wait until all are gone.

    ``kill(-1)`` reaches every process we may signal except init and the caller. The
    supervisor has no children: jobs and their orphans belong to the zygote (the namespace's
    init), which reaps them, so a killed process that is only a zombie counts as gone.

    Returns:
        True when none is left; False if some survived ``grace_s`` (the worker must then quit).
    """
    keep = {1, os.getpid()}
    deadline = time.monotonic() + grace_s
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not [pid for pid in _live_pids() if pid not in keep]:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def wipe(directory: str, keep: str | None = None) -> None:
    """Delete everything inside ``directory`` (not the directory itself, nor the entry named
    ``keep``), whatever the modes the job left.

    An entry that is a mount point of its own stays: the sandbox mounts the Python
    environment read-only where it lives on the host, inside these directories when it lives
    in ``/tmp`` or ``/work`` (a job cannot mount anything, so every such entry is the
    sandbox's)."""

    def unlock_and_retry(function: Any, path: str, _info: Any) -> None:
        parent = os.path.dirname(path)
        with contextlib.suppress(OSError):
            os.chmod(parent, 0o700)
            os.chmod(path, 0o700)
        with contextlib.suppress(FileNotFoundError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=unlock_and_retry)
            else:
                os.unlink(path)

    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return
    except PermissionError:
        os.chmod(directory, 0o700)
        entries = os.listdir(directory)
    device = os.lstat(directory).st_dev
    for name in entries:
        path = os.path.join(directory, name)
        if name == keep or _is_mount_point(path, device):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=unlock_and_retry)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _is_mount_point(path: str, parent_device: int) -> bool:
    try:
        return os.lstat(path).st_dev != parent_device
    except FileNotFoundError:
        return False


def collect_outputs(out_dir: str, cap: int, max_files: int) -> tuple[list[str], list[bytes], bool]:
    """Regular files under ``out_dir`` (symlinks and special files skipped), within caps.

    Returns:
        The relative names, their contents (same order) and whether anything was left out.
    """
    names: list[str] = []
    blobs: list[bytes] = []
    total = 0
    cut = False
    for path in _walk_regular_files(out_dir):
        if len(names) >= max_files:
            cut = True
            break
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                continue
            size = os.fstat(handle.fileno()).st_size
            if total + size > cap:
                cut = True
                continue
            content = handle.read(cap - total + 1)
        if total + len(content) > cap:
            cut = True
            continue
        names.append(os.path.relpath(path, out_dir))
        blobs.append(content)
        total += len(content)
    return names, blobs, cut


def _walk_regular_files(root: str) -> Iterator[str]:
    for directory, subdirs, files in os.walk(root, followlinks=False):
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(path).st_mode):
                    yield path


# --------------------------------------------------------------------------- the zygote


class Zygote:
    """The namespace's init: pre-imported, forks a job whenever the supervisor asks.

    It never reads a frame, a job's output or its files: all it receives from the supervisor is
    a one-word request and three pipe descriptors for the job (its job data, stdout, stderr).
    """

    def __init__(self, channel: socket.socket, supervisor: int, config: dict[str, Any]) -> None:
        self.channel = channel
        self.supervisor = supervisor
        self.config = config

    def serve(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # init ignores signals it has no handler for
        current: int | None = None
        while True:
            channel = self.channel.fileno()
            ready, _, _ = select.select([channel, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
                for pid, status in _reap_all():
                    if pid == self.supervisor:
                        return  # the supervisor is gone: the worker ends
                    if pid == current:
                        current = None
                        self._tell({"exited": pid, "status": status})
            if channel in ready:
                message, fds, _, _ = socket.recv_fds(self.channel, 64, 3)
                if not message:
                    return  # the supervisor closed its end
                if message == b"state":
                    self._tell({"state": _apply_state(fds[0], self.config)})
                    continue
                _reap_all()  # stragglers of the last job: they would count against RLIMIT_NPROC
                pid = os.fork()
                if pid == 0:  # the job: never returns
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _become_job(fds, self.config)
                for fd in fds:
                    os.close(fd)
                current = pid
                self._tell({"started": pid})

    def _tell(self, message: dict[str, Any]) -> None:
        self.channel.send(json.dumps(message).encode())


def _apply_state(fd: int, config: dict[str, Any]) -> dict[str, Any]:
    """Apply one resident-state frame the host sent (through the supervisor) and close ``fd``.

    Only a worker started as resident accepts state. The frame names a hook,
    ``"module:function"``, in kgot's job bundle (shipped as ``blobs[0]`` the first time and
    imported from memory); the hook keeps whatever the host sent in this process, so every job
    forked afterwards starts with it. No job's code or output ever reaches this function: its
    input is the host's own data, relayed by the supervisor.
    """
    try:
        with os.fdopen(fd, "rb", closefd=True) as stream:
            frame = read_frame(stream.fileno())
        if not config.get("resident"):
            return {"ok": False, "error": "this worker does not hold resident state"}
        if frame is None:
            return {"ok": False, "error": "empty state frame"}
        header, blobs = frame
        if blobs and blobs[0]:
            _BundleFinder.install(blobs[0])
        module_name, _, function = str(header["hook"]).partition(":")
        module = __import__(module_name, fromlist=[function])
        reply = getattr(module, function)(header.get("request", {}), blobs[1:])
        return {"ok": True, **reply}
    except BaseException as error:  # the zygote must survive any failure of a state update
        return {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}


class _BundleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the modules of a zip held in memory (kgot's job bundle) to ``import``.

    The resident state's code must be importable in the zygote before any job runs, and no
    file a job can reach may provide it: the bundle arrives over the protocol and never
    touches the disk.
    """

    _installed: _BundleFinder | None = None

    def __init__(self, sources: dict[str, str], packages: set[str]) -> None:
        self.sources = sources
        self.packages = packages

    @classmethod
    def install(cls, bundle: bytes) -> None:
        if cls._installed is not None:
            return  # one bundle per worker: the code never changes under a live state
        import io
        import zipfile

        sources: dict[str, str] = {}
        packages: set[str] = set()
        with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
            for name in archive.namelist():
                if not name.endswith(".py"):
                    continue
                module = name[: -len(".py")].replace("/", ".")
                if module.endswith(".__init__"):
                    module = module[: -len(".__init__")]
                    packages.add(module)
                sources[module] = archive.read(name).decode("utf-8")
        finder = cls(sources, packages)
        sys.meta_path.insert(0, finder)
        cls._installed = finder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.sources:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname in self.packages)

    def create_module(self, spec: Any) -> None:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        name = module.__name__
        exec(compile(self.sources[name], f"<kgot bundle>/{name}", "exec"), module.__dict__)


def _reap_all() -> list[tuple[int, int]]:
    reaped = []
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reaped.append((pid, status))
    return reaped


def _become_job(fds: list[int], config: dict[str, Any]) -> None:
    """In a fresh fork of the zygote: read this job's limits and code from the supervisor,
    then run it. Never returns."""
    exit_code = 1
    try:
        data, stdout, stderr = fds
        frame = read_frame(data)
        os.close(data)
        if frame is None:
            raise EOFError("no job data")
        header, blobs = frame
        code = blobs[0].decode("utf-8", errors="surrogatepass")
        env = dict(config.get("env", {}))
        # "out" runs the code in the output directory (Job.cwd); anything else in /work.
        work = config["work"]
        if header.get("cwd") == "out":
            work = os.path.join(work, "out")
        exit_code = _run_child(code, header["limits"], work, env, (stdout, stderr))
    finally:
        os._exit(exit_code)


# --------------------------------------------------------------------------- the supervisor


class Supervisor:
    """Serves the host's frames for the worker's whole life, one job at a time.

    Forked from the zygote before the pre-imports, so it is small; jobs are never forked from
    it, so what it holds of earlier jobs is out of later jobs' reach (and it is non-dumpable).
    """

    def __init__(
        self, config: dict[str, Any], inbox: int, outbox: int, channel: socket.socket
    ) -> None:
        self.work = config["work"]
        self.scratch = list(config.get("scratch", []))
        self.max_files = int(config.get("max_output_files", 64))
        self.inbox = inbox
        self.outbox = outbox
        self.channel = channel

    def serve(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        _set_oom_score(_SUPERVISOR_OOM_SCORE)
        for directory in (self.work, *self.scratch):
            wipe(directory)
        ready = json.loads(self.channel.recv(1 << 16) or b"{}")  # the zygote's pre-imports
        if not ready:
            return
        _write_all(self.outbox, encode_frame({READY: True, **ready}))
        while True:
            frame = read_frame(self.inbox)
            if frame is None:
                return
            header, blobs = frame
            if "job_state" in header:  # state for the zygote, then the job, in one exchange
                count = int(header["job_state"].get("blobs", 0))
                answer = self.relay_state({"state": header["job_state"]}, blobs[:count])
                if not answer["state"].get("ok"):
                    refusal = f"the worker did not take the run's graph: {answer['state']}"
                    reply = {**answer, "exit_code": None, "outputs": [], "failure": refusal}
                    _write_all(self.outbox, encode_frame(reply, [b"", b""]))
                    continue
                header, blobs = {**header, **answer}, blobs[count:]
            elif "state" in header:
                _write_all(self.outbox, encode_frame(self.relay_state(header, blobs)))
                continue
            reply, reply_blobs, healthy = self.run_job(header, blobs)
            if "state" in header:
                reply["state"] = header["state"]
            _write_all(self.outbox, encode_frame(reply, reply_blobs))
            if not healthy:
                return  # something survived the clean-up: let the host replace this worker

    def run_job(
        self, header: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes], bool]:
        limits = dict(header.get("limits", {}))
        cap = int(limits.get("max_output_bytes") or 1_000_000)
        timeout_s = float(limits.get("timeout_s") or 30.0)
        try:
            self._prepare(list(header.get("files", [])), blobs[1:])
        except OSError as error:  # e.g. input files larger than the work directory
            for directory in (self.work, *self.scratch):
                wipe(directory)
            refusal = f"the input files could not be written ({error.strerror})"
            return {"exit_code": None, "outputs": [], "failure": refusal}, [b"", b""], True
        if limits.get("max_processes"):
            # RLIMIT_NPROC counts the processes of the user: those of this namespace when each
            # sandbox is a user namespace of its own (Linux 5.14+), else all the host's, which
            # the host counted for us.
            base = limits.get("nproc_base")
            existing = len(_live_pids()) if base is None else int(base)
            limits["nproc"] = existing + int(limits["max_processes"])
        data_r, data_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # What fits in the pipe goes before the fork: a small job finds its code waiting.
        job = {"limits": limits, "cwd": header.get("cwd")}
        job_data = memoryview(encode_frame(job, blobs[:1]))
        os.set_blocking(data_w, False)
        with contextlib.suppress(BlockingIOError):
            job_data = job_data[os.write(data_w, job_data) :]
        os.set_blocking(data_w, True)
        socket.send_fds(self.channel, [b"fork"], [data_r, out_w, err_w])
        for fd in (data_r, out_w, err_w):
            os.close(fd)
        started = time.monotonic()
        pid = json.loads(self.channel.recv(1 << 16))["started"]
        with contextlib.suppress(BrokenPipeError):  # the job died before reading its code
            _write_all(data_w, bytes(job_data))
        os.close(data_w)
        streams = _Streams(out_r, err_r, cap)
        timed_out, killed = _supervise(pid, streams, started + timeout_s)
        status = self._exit_status(pid)
        duration_ms = (time.monotonic() - started) * 1000
        healthy = kill_everything_else()
        streams.drain()
        # Free what the job wrote to memory-backed directories before reading its outputs.
        for directory in self.scratch:
            wipe(directory)
        wipe(self.work, keep="out")
        names, files, files_cut = collect_outputs(
            os.path.join(self.work, "out"), cap, self.max_files
        )
        wipe(self.work)
        reply: dict[str, Any] = {
            "exit_code": os.waitstatus_to_exitcode(status) if status is not None else None,
            "timed_out": timed_out,
            "duration_ms": duration_ms,
            "stdout_bytes": streams.totals[0],
            "stderr_bytes": streams.totals[1],
            "outputs": names,
            "outputs_cut": files_cut,
            "killed": killed,
        }
        return reply, [streams.buffers[0], streams.buffers[1], *files], healthy

    def relay_state(self, header: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Pass a resident-state frame to the zygote (over a pipe) and return its answer."""
        state_r, state_w = os.pipe()
        socket.send_fds(self.channel, [b"state"], [state_r])
        os.close(state_r)
        with contextlib.suppress(BrokenPipeError):
            _write_all(state_w, encode_frame(header["state"], blobs))
        os.close(state_w)
        while True:  # skip a late "exited" note of an earlier job
            message = json.loads(self.channel.recv(1 << 16) or b"{}")
            if not message:
                return {"state": {"ok": False, "error": "the zygote is gone"}}
            if "state" in message:
                return {"state": message["state"]}

    def _exit_status(self, pid: int) -> int | None:
        """The job's wait status, as the zygote (its parent) reaped it."""
        ready, _, _ = select.select([self.channel], [], [], 5.0)
        if not ready:
            return None
        message = json.loads(self.channel.recv(1 << 16) or b"{}")
        return message.get("status") if message.get("exited") == pid else None

    def _prepare(self, names: list[str], contents: list[bytes]) -> None:
        for directory in (self.work, *self.scratch):
            wipe(directory)
        inbox = os.path.join(self.work, "in")
        os.makedirs(inbox, exist_ok=True)
        os.makedirs(os.path.join(self.work, "out"), exist_ok=True)
        for name, content in zip(names, contents, strict=False):
            target = os.path.normpath(os.path.join(inbox, name))
            if not target.startswith(inbox + os.sep):
                continue  # the host validates names; this is a second line of defence
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(content)


class _Streams:
    """Reads a job's stdout and stderr pipes, keeping at most ``cap`` bytes of each."""

    def __init__(self, out_fd: int, err_fd: int, cap: int) -> None:
        self.fds = [out_fd, err_fd]
        self.cap = cap
        self.buffers = [b"", b""]
        self.totals = [0, 0]
        self.open = {out_fd, err_fd}

    def read_ready(self, ready: list[int]) -> None:
        for index, fd in enumerate(self.fds):
            if fd not in ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self.open.discard(fd)
                os.close(fd)
                continue
            self.totals[index] += len(chunk)
            room = self.cap - len(self.buffers[index])
            if room > 0:
                self.buffers[index] += chunk[:room]

    def drain(self) -> None:
        """Read what is left once every writer is dead (so end-of-file is near)."""
        deadline = time.monotonic() + 1.0
        while self.open and time.monotonic() < deadline:
            ready, _, _ = select.select(list(self.open), [], [], 0.05)
            self.read_ready(ready)
        for fd in list(self.open):
            os.close(fd)
        self.open.clear()


def _supervise(pid: int, streams: _Streams, deadline: float) -> tuple[bool, int | None]:
    """Read the job's output until it exits or its deadline passes (then kill it). Returns
    whether the deadline passed and, if so, how many processes of the job were running then
    (everything in the namespace but init and this supervisor). The zygote reaps the job."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False, None  # already gone
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                running = len([p for p in _live_pids() if p not in (1, os.getpid())])
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return True, running
            ready, _, _ = select.select([*streams.open, pidfd], [], [], remaining)
            streams.read_ready(ready)
            if pidfd in ready:
                return False, None
    finally:
        os.close(pidfd)


# --------------------------------------------------------------------------- the job


def _run_child(
    code: str, limits: dict[str, Any], work: str, env: dict[str, str], pipes: tuple[int, int]
) -> int:
    """Become the job: set limits, wire up the pipes, run the code; its exit code."""
    exit_code = 1
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(pipes[0], 1)
        os.dup2(pipes[1], 2)
        os.closerange(3, MAX_FD)  # the zygote's channel must be unreachable from job code
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        _set_oom_score(_JOB_OOM_SCORE)
        # The zygote and the supervisor are non-dumpable (so jobs cannot open their /proc
        # files); the job itself need not be, and some libraries read their own /proc/self.
        _prctl(_PR_SET_DUMPABLE, 1)
        _apply_rlimits(limits)
        os.chdir(work)
        os.environ.clear()
        os.environ.update(env)
        exit_code = _execute(code)
    except BaseException:  # the job must never fall back into the zygote's loop
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
    return exit_code


def _apply_rlimits(limits: dict[str, Any]) -> None:
    def cap(name: str, value: int | None, hard_extra: int = 0) -> None:
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value + hard_extra))

    memory_mb = limits.get("memory_mb")
    # Address space is counted from what the zygote already maps (pre-imported libraries), so
    # `memory_mb` means "what this job may allocate", whatever was pre-imported.
    cap("RLIMIT_AS", _vm_size_bytes() + memory_mb * 1024 * 1024 if memory_mb else None)
    cap("RLIMIT_CPU", limits.get("cpu_seconds"), hard_extra=1)  # SIGXCPU, then SIGKILL
    file_mb = limits.get("max_file_mb")
    cap("RLIMIT_FSIZE", file_mb * 1024 * 1024 if file_mb else None)
    cap("RLIMIT_NOFILE", limits.get("max_open_files"))
    cap("RLIMIT_NPROC", limits.get("nproc"))
    cap("RLIMIT_CORE", 0)


def _execute(code: str) -> int:
    """Run job source as ``__main__``; the exit status it asks for, or 1 on an exception."""
    import importlib
    import linecache
    import random
    import traceback
    import types

    filename = "job.py"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    importlib.invalidate_caches()  # packages installed into a mounted cache since start-up
    random.seed()  # a fork copies the zygote's generator state; every job gets fresh entropy
    if "numpy" in sys.modules:
        with contextlib.suppress(Exception):
            sys.modules["numpy"].random.seed()
    stdout = sys.stdout
    if hasattr(stdout, "reconfigure"):
        stdout.reconfigure(line_buffering=True)  # keep output up to a timeout kill
    sys.argv = [filename]
    module = types.ModuleType("__main__")
    module.__file__ = filename
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    try:
        exec(compile(code, filename, "exec"), module.__dict__)  # inside the sandbox only
    except SystemExit as done:
        if done.code is None:
            return 0
        if isinstance(done.code, int):
            return done.code & 0xFF
        print(done.code, file=sys.stderr)
        return 1
    except BaseException as error:
        # From the job's own frames on: the worker's frame above them is noise to the reader.
        tb = error.__traceback__.tb_next if error.__traceback__ else None
        traceback.print_exception(type(error), error, tb)
        return 1
    return 0


def _preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    loaded: list[str] = []
    failed: dict[str, str] = {}
    for name in modules:
        try:
            __import__(name)
            loaded.append(name)
        except Exception as error:  # a missing optional library must not stop the worker
            failed[name] = f"{type(error).__name__}: {error}"
    return loaded, failed


def main(argv: list[str]) -> int:
    """Entry point inside the sandbox: ``worker.py CONFIG_JSON``."""
    config = json.loads(argv[1])
    for path in config.get("extra_paths", []):
        if path not in sys.path:
            sys.path.append(path)
    # Before any import: OpenBLAS and OpenMP size their thread pools from these at load time.
    os.environ.update(config.get("env", {}))
    # The protocol moves off fds 0/1 so that nothing printed by accident can corrupt it.
    inbox = os.dup(0)
    outbox = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    # As the namespace's init, the zygote ignores signals it has no handler for; Python's own
    # SIGINT handler would let a job stop it with a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    seccomp_fd = config.get("seccomp_fd")
    if seccomp_fd is not None:  # the fallback: no bubblewrap to load the filter for us
        with os.fdopen(int(seccomp_fd), "rb") as handle:
            install_seccomp(handle.read())
    # Non-dumpable: jobs run under the same uid but cannot open the zygote's or the
    # supervisor's /proc files (memory, descriptors, environment).
    _prctl(_PR_SET_DUMPABLE, 0)
    zygote_end, supervisor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    supervisor = os.fork()
    if supervisor == 0:
        zygote_end.close()
        with contextlib.suppress(BrokenPipeError, ConnectionError):
            Supervisor(config, inbox, outbox, supervisor_end).serve()
        os._exit(0)
    supervisor_end.close()
    os.close(inbox)  # the zygote never touches the protocol
    os.close(outbox)
    loaded, failed = _preload(list(config.get("preload", [])))
    # What the zygote loaded moves out of the collector's reach: a job's full collection would
    # otherwise walk (and so copy into the job) every page of it.
    gc.collect()
    gc.freeze()
    ready = {"pid": os.getpid(), "uid": os.getuid(), "preloaded": loaded, "failed": failed}
    zygote_end.send(json.dumps({**ready, "python": sys.version.split()[0]}).encode())
    with contextlib.suppress(BrokenPipeError, ConnectionError):
        Zygote(zygote_end, supervisor, config).serve()
    # Out at once, without the interpreter's finalisation: tearing down the pre-imported
    # modules took ~250 ms per worker, and every `kgot ask` waits for its workers to stop.
    # Nothing is buffered (the protocol fds are closed, fd 1 is /dev/null), and what the
    # namespace still runs dies with its init.
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main(sys.argv))
