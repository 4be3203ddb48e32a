"""Pieces every sandbox kind shares: limit resolution, job validation and framing, output
capping, failure messages."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from kgot.config import SandboxSettings
from kgot.sandbox import worker as wire
from kgot.sandbox.base import JOB_CWDS, ExecResult, Job, Limits

OUTPUT_FILES_CAP = 64  # at most this many files come back from /work/out

# What job code finds in its environment, whatever the sandbox kind.
JOB_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/matplotlib",
}


def resolve_limits(limits: Limits, settings: SandboxSettings) -> Limits:
    """Fill the job's unset limits from the configured defaults."""
    return Limits(
        timeout_s=limits.timeout_s or settings.timeout,
        memory_mb=limits.memory_mb or settings.memory_mb,
        cpu_seconds=limits.cpu_seconds or settings.cpu_seconds,
        max_output_bytes=limits.max_output_bytes or settings.max_output_bytes,
        max_file_mb=limits.max_file_mb or settings.max_file_mb,
        max_open_files=limits.max_open_files or settings.max_open_files,
        max_processes=limits.max_processes or settings.max_processes,
    )


def validate_job(job: Job) -> None:
    """Refuse jobs the contract cannot honour, before anything starts.

    Raises:
        ValueError: an input file name escapes ``in/`` or is not valid text, a mount is
            missing, has no usable name (``/``, ``.``, ``..``) or clashes with another, or the
            working directory is neither ``/work`` nor ``/work/out``.
    """
    if job.cwd not in JOB_CWDS:
        raise ValueError(
            f"working directory {job.cwd!r} is not one a job may have: {', '.join(JOB_CWDS)}"
        )
    for name in job.files:
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or ".." in parts or "\x00" in name:
            raise ValueError(f"input file name {name!r} escapes the input directory")
        if not _encodable(name):
            raise ValueError(f"input file name {name!r} is not valid UTF-8 text")
    seen: set[str] = set()
    for host_path in job.mounts:
        path = Path(host_path)
        if path.name in ("", ".", ".."):
            raise ValueError(
                f"mount {str(host_path)!r} has no name to show under /mnt/inputs; "
                "name a file or a directory below it"
            )
        if not path.exists():
            raise ValueError(f"mount {path} does not exist")
        if path.name in seen:
            raise ValueError(f"two mounts are both named {path.name!r} under /mnt/inputs")
        seen.add(path.name)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def job_frame(
    job: Job,
    limits: Limits,
    *,
    nproc_base: int | None = None,
    state: tuple[str, dict[str, Any], list[bytes]] | None = None,
) -> bytes:
    """The frame that carries ``job`` to a worker (see :mod:`kgot.sandbox.worker`).

    ``nproc_base`` is how many processes of the sandbox's host user already exist, when the
    kernel counts them across the host rather than per sandbox (``None``: the worker counts its
    own namespace).

    The code travels as a blob, so its size is not bound by the header's; a lone surrogate in
    it arrives unchanged (and fails to compile there, as it would anywhere). ``state`` (a
    resident worker's hook, request and blobs) goes first in the same frame: the worker
    updates its held state, then runs the job.
    """
    header = {
        "files": list(job.files),
        "cwd": JOB_CWDS.get(job.cwd, "."),
        "limits": {
            "timeout_s": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "cpu_seconds": limits.cpu_seconds,
            "max_output_bytes": limits.max_output_bytes,
            "max_file_mb": limits.max_file_mb,
            "max_open_files": limits.max_open_files,
            "max_processes": limits.max_processes,
            "nproc_base": nproc_base,
        },
    }
    code = job.code.encode("utf-8", errors="surrogatepass")
    blobs = [code, *(bytes(v) for v in job.files.values())]
    if state is not None:
        hook, request, state_blobs = state
        header["job_state"] = {"hook": hook, "request": request, "blobs": len(state_blobs)}
        blobs = [*state_blobs, *blobs]
    return wire.encode_frame(header, blobs)


def result_from_reply(
    reply: dict[str, object], blobs: list[bytes], limits: Limits, *, memory_hit: bool = False
) -> ExecResult:
    """Turn a worker's reply frame into an :class:`ExecResult` (outputs capped again here:
    a worker is only as trustworthy as the code it ran).

    Raises:
        ValueError: the reply does not have the blobs its header announces.
    """
    names = reply.get("outputs") or []
    if not isinstance(names, list) or len(blobs) != 2 + len(names):
        raise ValueError("reply with a wrong number of blobs")
    cap = limits.max_output_bytes or 1_000_000
    stdout, out_cut = cap_text(blobs[0], cap, _int(reply.get("stdout_bytes")))
    stderr, err_cut = cap_text(blobs[1], cap, _int(reply.get("stderr_bytes")))
    timed_out = bool(reply.get("timed_out"))
    raw_exit = reply.get("exit_code")
    exit_code = None if timed_out or not isinstance(raw_exit, int) else raw_exit
    killed = reply.get("killed")
    error = describe_failure(
        exit_code,
        timed_out,
        limits,
        memory_hit=memory_hit,
        killed=killed if isinstance(killed, int) else None,
    )
    if reply.get("failure"):
        error = str(reply["failure"])
    return ExecResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=exit_code,
        timed_out=timed_out,
        error=error,
        outputs={str(n): b for n, b in zip(names, blobs[2:], strict=True)},
        truncated=out_cut or err_cut or bool(reply.get("outputs_cut")),
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def cap_text(raw: bytes, cap: int, total: int | None = None) -> tuple[str, bool]:
    """Decode at most ``cap`` bytes, noting the cut in the text itself.

    Args:
        raw: the bytes received (possibly already cut).
        cap: the most bytes to keep.
        total: how many bytes the job really wrote, when ``raw`` was cut upstream.
    """
    total = len(raw) if total is None else max(total, len(raw))
    if total <= cap:
        return raw.decode("utf-8", errors="replace"), False
    kept = raw[:cap].decode("utf-8", errors="ignore")
    return f"{kept}\n[output truncated: {total - cap} more bytes]", True


def memory_exceeded(limits: Limits) -> str:
    """What a job that hit its memory cgroup's limit is told."""
    return (
        f"memory limit of {limits.memory_mb} MB exceeded (files in /work, /tmp and /dev/shm "
        "count too)"
    )


def describe_failure(
    exit_code: int | None,
    timed_out: bool,
    limits: Limits,
    *,
    memory_hit: bool = False,
    all_killed: bool = True,
    killed: int | None = None,
) -> str | None:
    """One line saying why a job failed, from ``waitstatus_to_exitcode``-style exit codes.

    ``killed`` is how many of the job's processes were still running at its deadline (the job
    and those it started), when the sandbox counted them.
    """
    if timed_out:
        if not all_killed:
            outcome = "some of its processes may still run"
        elif killed is None:
            outcome = "the job and every process it started were killed"
        else:
            plural = "process" if killed == 1 else "processes"
            outcome = f"killed its {killed} running {plural} (the job and those it started)"
        return f"timed out after {limits.timeout_s:g} s (wall clock); {outcome}"
    if exit_code is None or exit_code >= 0:
        return None
    signal_number = -exit_code
    if signal_number == signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds} s exceeded"
    if signal_number == signal.SIGXFSZ:
        return f"file size limit of {limits.max_file_mb} MB exceeded"
    if signal_number == signal.SIGKILL:
        if memory_hit:
            return f"killed: {memory_exceeded(limits)}"
        return "killed (most likely the memory or CPU limit)"
    if signal_number == signal.SIGSYS:
        return "killed for making a forbidden system call"
    try:
        name = signal.Signals(signal_number).name
    except ValueError:
        name = str(signal_number)
    return f"killed by signal {name}"


def failed_result(message: str, duration_ms: float = 0.0) -> ExecResult:
    """A result for a job that could not run to completion for reasons of the sandbox."""
    return ExecResult(stdout="", stderr="", exit_code=None, error=message, duration_ms=duration_ms)
