"""The Docker isolation (``--sandbox docker``): one throw-away container per job.

The container runs the same worker as the other kinds (:mod:`kgot.sandbox.worker`), passed as
``python -c`` source so the image needs nothing but Python, with: no network
(``network_mode="none"``), a read-only root file system, private size-capped tmpfs at ``/work``
and ``/tmp``, memory and pids limits, every capability dropped, ``no-new-privileges``, uid 65534,
and ``Job.mounts`` bound read-only under ``/mnt/inputs``. Jobs and results travel over the
container's attached stdin/stdout with the same framing as the pipes of the local kinds.

Each job starts a container (typically 0.3–1 s), so this kind trades speed for the strongest
separation from the host kernel configuration Docker offers; the image (``sandbox.docker_image``)
must provide ``python3`` plus whatever libraries the job imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError
from kgot.sandbox import worker as wire
from kgot.sandbox.base import ExecResult, Job, Limits
from kgot.sandbox.common import (
    JOB_ENV,
    failed_result,
    job_frame,
    resolve_limits,
    result_from_reply,
    validate_job,
)

_PING_TIMEOUT_S = 5
_START_GRACE_S = 60.0  # pulling nothing, but a cold engine may take a while to start a container


# Containers run as nobody, not as the local kinds' dedicated sandbox.host_uid: a container
# sees none of the host's processes and no host file but its read-only mounts, so sharing the
# uid with the host's nobody opens nothing in either direction.
DOCKER_UID = 65534


def docker_problem() -> str | None:
    """Why no Docker engine can be used (``None`` when one answers a ping)."""
    try:
        import docker

        client = docker.from_env(timeout=_PING_TIMEOUT_S)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # the SDK raises many types; all mean "no engine"
        text = str(error).strip().splitlines()
        return text[0] if text else type(error).__name__
    return None


def container_config(
    job: Job, limits: Limits, settings: SandboxSettings, worker_source: str
) -> dict[str, Any]:
    """Keyword arguments for ``containers.create`` that isolate one job (pure, testable)."""
    tmpfs_size = f"size={settings.work_dir_mb}m"
    config = {
        "work": "/work",
        "scratch": ["/tmp"],
        "env": JOB_ENV,
        "preload": [],
        "extra_paths": [],
    }
    memory = f"{(limits.memory_mb or settings.memory_mb) + 128}m"  # + the interpreter itself
    return {
        "image": settings.docker_image,
        "command": ["python3", "-I", "-B", "-c", worker_source, json.dumps(config)],
        "stdin_open": True,
        "tty": False,
        "network_mode": "none",
        "read_only": True,
        "user": f"{DOCKER_UID}:{DOCKER_UID}",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": memory,
        "memswap_limit": memory,  # no swap: the memory limit is real
        "pids_limit": (limits.max_processes or settings.max_processes) + 2,
        "tmpfs": {
            "/work": f"{tmpfs_size},mode=1777",
            "/tmp": f"{tmpfs_size},mode=1777",
        },
        "working_dir": "/work",
        "environment": dict(JOB_ENV),
        "volumes": {
            os.path.realpath(mount): {"bind": f"/mnt/inputs/{Path(mount).name}", "mode": "ro"}
            for mount in job.mounts
        },
        "labels": {"kgot.sandbox": "job"},
    }


class DockerSandbox:
    """Runs each job in a fresh, locked-down container."""

    # Mounted files are read as the container's user: Docker (without user-namespace
    # remapping) gives it the same uid on the host.
    file_uid: int | None = DOCKER_UID

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        problem = docker_problem()
        if problem is not None:
            raise SandboxUnavailableError(
                f"no Docker engine is reachable ({problem}); start Docker, or use "
                "--sandbox auto for the local bubblewrap sandbox"
            )
        import docker

        self._client = docker.from_env()
        self._source = inspect.getsource(wire)

    @property
    def name(self) -> str:
        return "docker"

    def warm_up(self, *, wait: bool = True) -> None:
        """Nothing is kept warm: every job starts fresh."""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()

    def run(self, job: Job) -> ExecResult:
        """Run ``job`` in a new container and remove it afterwards.

        Raises:
            SandboxUnavailableError: the engine refused to create or start the container.
            ValueError: the job itself is malformed.
        """
        validate_job(job)
        if job.packages:
            return failed_result(
                "the docker sandbox installs no packages; bake them into the image instead"
            )
        limits = resolve_limits(job.limits, self.settings)
        started = time.monotonic()
        try:
            container = self._client.containers.create(
                **container_config(job, limits, self.settings, self._source)
            )
        except Exception as error:
            raise SandboxUnavailableError(
                f"Docker could not create the sandbox container ({error}); check that image "
                f"{self.settings.docker_image!r} exists and provides python3"
            ) from None
        try:
            return self._converse(container, job, limits, started)
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)

    def _converse(self, container: Any, job: Job, limits: Limits, started: float) -> ExecResult:
        attached = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
        raw: socket.socket = getattr(attached, "_sock", attached)
        container.start()
        stream = _DemuxReader(raw)
        cap = limits.max_output_bytes or 1_000_000
        try:
            stream.read_frame(time.monotonic() + _START_GRACE_S, 1 << 20)  # the ready greeting
            # The container's pids limit caps processes; RLIMIT_NPROC would count every process
            # of uid 65534 on the host, other containers' included.
            raw.sendall(job_frame(job, dataclasses.replace(limits, max_processes=None)))
            deadline = time.monotonic() + (limits.timeout_s or 30.0) + 5.0
            reply, blobs = stream.read_frame(deadline, 3 * cap + (1 << 16))
            result = result_from_reply(reply, blobs, limits)
        except (OSError, EOFError, ValueError, TimeoutError) as error:
            with contextlib.suppress(Exception):
                container.kill()
            return failed_result(
                f"the docker sandbox failed during the job ({error})",
                (time.monotonic() - started) * 1000,
            )
        finally:
            with contextlib.suppress(OSError):
                raw.close()
        result.duration_ms = (time.monotonic() - started) * 1000
        return result


class _DemuxReader:
    """Reads the container's stdout out of Docker's multiplexed attach stream."""

    _HEADER = struct.Struct(">BxxxL")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def read_frame(self, deadline: float, max_total: int) -> tuple[dict[str, Any], list[bytes]]:
        length = int.from_bytes(self._stdout_bytes(4, deadline), "big")
        if length > wire.MAX_HEADER_BYTES:
            raise ValueError(f"reply header of {length} bytes")
        header = wire.decode_header(self._stdout_bytes(length, deadline))
        if sum(header["blobs"]) > max_total:
            raise ValueError("reply exceeds the output cap")
        return header, [self._stdout_bytes(size, deadline) for size in header["blobs"]]

    def _stdout_bytes(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            kind, length = self._HEADER.unpack(self._raw(8, deadline))
            payload = self._raw(length, deadline)
            if kind == 1:  # stdout; the worker writes nothing else to it
                self.buffer += payload
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def _raw(self, size: int, deadline: float) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply from the container before the deadline")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise EOFError("the container closed its output")
            chunks += chunk
        return bytes(chunks)
