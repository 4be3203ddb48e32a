"""Host side of document parsing: conversion jobs run in the project's sandbox.

Why the sandbox: the files come from the web or from a question's attachments, and parsers of
PDF, Office and HTML are large C-backed code bases. A parser that a crafted file takes over must
find what model-written code finds: no network, none of the user's files (only the document,
copied into the job's private ``/work/in``), memory and time caps, and every process killed at
the deadline. So conversions go through the same warm-worker pool as the python tool
(:class:`kgot.sandbox.pool.PooledSandbox`), an instance of its own whose workers pre-import the
parser libraries (:data:`kgot.documents.convert.PRELOAD`): a warm conversion pays a fork, not ~1 s
of imports.

The conversion code itself travels with each job as a small zip (:func:`job_bundle`, like the
graph jobs of :mod:`kgot.graph_backends.runner`): the sandbox shows the installed libraries
read-only, but not kgot's checkout. The job writes its reply to ``out/result.json``; the host
reads it as untrusted data.

The document is copied in, not bind-mounted: a sandbox's mounts are fixed when its worker
starts, so a mounted document would need a fresh (cold) worker per file, and a directory
mounted into every worker would show each job the documents of the jobs running beside it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import py_compile
import re
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

from kgot.config import SandboxSettings
from kgot.daemon_threads import run_blocking
from kgot.errors import SandboxUnavailableError, ToolFailure
from kgot.sandbox import WORKER_DIED, ExecResult, Job, Limits, Sandbox, run_async

_PACKAGE = "kgotconvert"
_MODULES = ("convert.py", "formats.py", "convert_worker.py")
_BOOTSTRAP = f"""import os, sys
sys.path.insert(0, os.path.abspath("in/{_PACKAGE}.zip"))
from {_PACKAGE}.convert_worker import main
main()
"""
_RESULT = "result.json"
_MIN_OUTPUT_BYTES = 64 * 1024 * 1024  # the text of a document, or its rendered pages
_FAILURE_KINDS = frozenset({"corrupt", "unsupported", "timeout", "internal"})


@functools.cache
def job_bundle() -> bytes:
    """The conversion code as a zip package (built once per process).

    Each module travels as source and as unchecked hash-based bytecode (PEP 552), so a job
    does not compile ~700 lines; another interpreter version ignores the bytecode.
    """
    here = Path(__file__).parent
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive,
        tempfile.TemporaryDirectory(prefix="kgot-convert-") as scratch,
    ):
        archive.writestr(f"{_PACKAGE}/__init__.py", b"")
        for name in _MODULES:
            source = here / name
            compiled = Path(scratch) / f"{source.stem}.pyc"
            py_compile.compile(
                str(source),
                cfile=str(compiled),
                dfile=f"{_PACKAGE}/{name}",
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            archive.writestr(f"{_PACKAGE}/{name}", source.read_bytes())
            archive.writestr(f"{_PACKAGE}/{source.stem}.pyc", compiled.read_bytes())
    return buffer.getvalue()


def converter_settings(
    base: SandboxSettings | None, *, max_workers: int, memory_mb: int, recycle_after: int
) -> SandboxSettings:
    """The sandbox settings of the conversion workers: the project's isolation, the parser
    libraries pre-imported, no packages to install.

    A ``docker`` sandbox becomes ``auto`` (bubblewrap, else the fallback): a container per
    document would cost seconds, and the job image need not hold the parsers.
    """
    from kgot.documents.convert import PRELOAD

    base = base or SandboxSettings()
    return base.model_copy(
        update={
            "kind": "auto" if base.kind == "docker" else base.kind,
            "preload": list(PRELOAD),
            "pool_size": max_workers,
            "recycle_after": recycle_after,
            "memory_mb": memory_mb,
            "allow_packages": [],
        }
    )


class ConverterPool:
    """Warm sandbox workers that parse documents with a deadline and a memory cap.

    Args:
        max_workers: warm workers kept ready (more start when requests overlap).
        memory_mb: memory a parse may use on top of the pre-imported libraries (the staged
            copy of the document counts too).
        recycle_after: requests served before a worker is replaced (bounds leaks).
        sandbox: the project's sandbox settings (isolation kind, uid, tmpfs size); default
            settings when not given.
    """

    def __init__(
        self,
        *,
        max_workers: int = 2,
        memory_mb: int = 2048,
        recycle_after: int = 200,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self.max_workers = max_workers
        self.memory_mb = memory_mb
        self.recycle_after = recycle_after
        self.settings = converter_settings(
            sandbox, max_workers=max_workers, memory_mb=memory_mb, recycle_after=recycle_after
        )
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()

    def convert(
        self, fmt: str, path: Path, options: dict[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """Parse one file in a sandbox job.

        Args:
            fmt: the format to read it as (see :mod:`kgot.documents.convert`).
            path: the file; it is read (copied into the job) before this returns.
            options: converter options (``name``, ``url``, ``full_page``, ``links``, …).
            timeout: seconds the parse may take; on expiry every process of the job is killed.

        Returns:
            The converter's result dictionary.

        Raises:
            ToolFailure: ``timeout``, ``corrupt``, ``unsupported`` or ``internal``.
        """
        name, job = self._job(fmt, path, options, timeout)
        sandbox = self._open()
        for attempt in (1, 2):
            try:
                result = sandbox.run(job)
            except SandboxUnavailableError as error:
                raise _cannot_start(error) from None
            if attempt == 1 and _worker_died(result):
                continue  # it died while idle (killed, recycled by the OS): use a fresh one
            break
        return _outcome(result, name, timeout)

    async def aconvert(
        self, fmt: str, path: Path, options: dict[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """:meth:`convert` without blocking the event loop (a warm worker's reply is awaited
        on the loop itself)."""
        name, job = await run_blocking(self._job, fmt, path, options, timeout)
        sandbox = await run_blocking(self._open)
        for attempt in (1, 2):
            try:
                result = await run_async(sandbox, job)
            except SandboxUnavailableError as error:
                raise _cannot_start(error) from None
            if attempt == 1 and _worker_died(result):
                continue
            break
        return _outcome(result, name, timeout)

    def prewarm(self) -> None:
        """Start the workers now, in the background, so their imports overlap other work."""

        def warm() -> None:
            # A sandbox that cannot start is reported by the first conversion.
            with contextlib.suppress(SandboxUnavailableError, ToolFailure):
                self._open().warm_up(wait=False)

        threading.Thread(target=warm, daemon=True, name="kgot-convert-warm").start()

    def close(self) -> None:
        """Stop every worker; later requests start new ones."""
        with self._lock:
            sandbox = self._sandbox
        if sandbox is not None:
            sandbox.close()

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the conversions run in (opened on first use)."""
        return self._open()

    def _open(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                from kgot.sandbox import open_sandbox

                try:
                    self._sandbox = open_sandbox(self.settings)
                except SandboxUnavailableError as error:
                    raise _cannot_start(error) from None
            return self._sandbox

    def _job(
        self, fmt: str, path: Path, options: dict[str, Any], timeout: float
    ) -> tuple[str, Job]:
        name = str(options.get("name") or path.name)
        try:
            content = path.read_bytes()
        except OSError as error:
            raise ToolFailure(
                f"cannot read {name} ({error.strerror or error}); check the path", kind="input"
            ) from None
        # The job's /work is a tmpfs of work_dir_mb; the document and the reply must fit in it.
        room = self.settings.work_dir_mb * 1024 * 1024 // 2
        if len(content) > room:
            raise ToolFailure(
                f"{name} is too large to parse ({len(content) / 1e6:.0f} MB; the sandbox takes "
                f"documents up to {room / 1e6:.0f} MB, half of sandbox.work_dir_mb); extract "
                "what you need with the python tool",
                kind="unsupported",
            )
        document = "document" + _safe_suffix(path.suffix)
        request = {"format": fmt, "path": f"in/{document}", "options": {**options, "name": name}}
        size_mb = len(content) // (1024 * 1024)
        return name, Job(
            code=_BOOTSTRAP,
            files={
                f"{_PACKAGE}.zip": job_bundle(),
                "request.json": json.dumps(request).encode("utf-8"),
                document: content,
            },
            limits=Limits(
                timeout_s=timeout,
                memory_mb=self.memory_mb,
                max_output_bytes=max(_MIN_OUTPUT_BYTES, 8 * len(content)),
                max_file_mb=max(self.settings.max_file_mb, 8 * size_mb + 64),
            ),
        )


def _safe_suffix(suffix: str) -> str:
    """The file's extension when it is a plain one (parsers may look at it), else none."""
    return suffix.lower() if re.fullmatch(r"\.[A-Za-z0-9]{1,10}", suffix) else ""


def _worker_died(result: ExecResult) -> bool:
    return bool(result.error and result.error.startswith(WORKER_DIED))


class ParserUnavailable(ToolFailure):
    """The conversion workers cannot start: no sandbox can run here, or not with these
    settings. The machine's problem, not the document's, so a caller that gives up on bad files
    must not give up on this one (:func:`kgot.documents.read_document` reports it apart)."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"cannot start the document parser: {cause}", kind="internal")


def _cannot_start(error: Exception) -> ParserUnavailable:
    return ParserUnavailable(str(error))


def _outcome(result: ExecResult, name: str, timeout: float) -> dict[str, Any]:
    """The converter's result, or the failure the job reported or ran into."""
    if result.timed_out:
        raise ToolFailure(
            f"reading {name} took longer than {timeout:g} s and was stopped; try a "
            "smaller file or page, or extract only what you need with the python tool",
            kind="timeout",
        )
    reply = _decoded(result.outputs.get(_RESULT))
    if reply is None:
        raise ToolFailure(_why_no_reply(result, name), kind="corrupt")
    if reply.get("ok") is True and isinstance(reply.get("result"), dict):
        return reply["result"]  # type: ignore[no-any-return]
    kind = reply.get("kind")
    raise ToolFailure(
        str(reply.get("error") or "the document parser failed"),
        kind=kind if kind in _FAILURE_KINDS else "internal",
    )


def _decoded(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        reply = json.loads(raw.decode("utf-8", errors="surrogatepass"))
    except (ValueError, RecursionError):
        return None
    return reply if isinstance(reply, dict) and "ok" in reply else None


def _why_no_reply(result: ExecResult, name: str) -> str:
    """Why a conversion job ended without a reply: memory, a crash, a sandbox failure."""
    error = result.error or ""
    if "memory" in error or "MemoryError" in result.stderr:
        return f"parsing {name} needed too much memory; the file is probably damaged or a bomb"
    if result.exit_code is not None and result.exit_code < 0:
        cause = f"the document parser crashed (signal {-result.exit_code})"
    else:
        cause = "the document parser stopped unexpectedly"
        if error:
            cause += f" ({error})"
    return (
        f"{cause} while reading {name}; the file is probably damaged — try another source or "
        "read it with the python tool"
    )


_shared: dict[tuple[int, str], ConverterPool] = {}  # (memory cap, sandbox settings) -> pool
_shared_lock = threading.Lock()


def shared_pool(memory_mb: int = 2048, sandbox: SandboxSettings | None = None) -> ConverterPool:
    """The process-wide pool for this memory cap and sandbox (its workers stop at exit)."""
    key = (memory_mb, (sandbox or SandboxSettings()).model_dump_json())
    with _shared_lock:
        pool = _shared.get(key)
        if pool is None:
            pool = _shared[key] = ConverterPool(memory_mb=memory_mb, sandbox=sandbox)
        return pool


@atexit.register
def _close_shared() -> None:
    for pool in _shared.values():
        pool.close()
