"""Ships graph jobs into the sandbox and turns what comes back into results or step failures.

The job code lives in :mod:`kgot.graph_backends.jobs`; it is zipped once per process and sent as
``in/kgotjob.zip`` next to the graph and the model's code, so the sandbox needs nothing of kgot
installed. Whatever the job writes is untrusted (the model's code ran in the same process): the
host parses it defensively and checks every changeset again before applying it.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import marshal
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgot.errors import ChangesetError, CodeExecutionError, QueryError
from kgot.sandbox import ExecResult, Job, Limits, Sandbox, run_async

_JOBS_DIR = Path(__file__).with_name("jobs")
# The modules of kgot that jobs import (the record rules, the NetworkX fast paths): they
# travel in the bundle at their own paths, beside empty package markers, so a job imports them
# without kgot being installed where the job runs.
_GRAPH_MODEL = Path(__file__).parent.parent / "graph_model"
_SHIPPED_GRAPH_MODEL = ("records.py", "nx_fast.py")
_BOOTSTRAP = """import os, sys
sys.path.insert(0, os.path.abspath("in/kgotjob.zip"))
from kgotjob.{module} import main
main({mode!r})
"""
# A changeset can be as large as the graph it came from; give the output channel room for it.
_MIN_OUTPUT_BYTES = 64 * 1024 * 1024


class GraphCodeError(CodeExecutionError):
    """Write code failed. ``str()`` is the detail for fix-code; ``summary`` is one line."""

    def __init__(self, summary: str, detail: str | None = None) -> None:
        super().__init__(detail or summary)
        self.summary = summary


class FactsNeededError(Exception):
    """Graph code on a working set asked for facts the host has not read yet: ``request`` is
    the ``find``/``neighbours`` call (:mod:`kgot.graph_backends.jobs.lookups`). Whoever set
    the job's ``lookups`` answers it and runs the code again."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__(f"graph code asked for {request}")
        self.request = request


class GraphQueryError(QueryError):
    """A read query failed. ``str()`` is the detail for a fix; ``summary`` is one line."""

    def __init__(self, summary: str, detail: str | None = None) -> None:
        super().__init__(detail or summary)
        self.summary = summary


@dataclass(frozen=True)
class JobSpec:
    """One graph job: which job module, read or write, and its input files."""

    module: str  # "python_job" | "sparql_job"
    mode: str  # "read" | "write" | "check" (sparql_job: the guard only)
    files: dict[str, bytes]
    timeout_s: float | None = None


@functools.cache
def job_bundle() -> bytes:
    """The job package, and the graph-model modules it imports, as a zip (built once per process).

    Each module travels as source and as unchecked hash-based bytecode (PEP 552), so a job
    skips compiling ~1,500 lines; an interpreter of another version ignores the bytecode and
    compiles the source.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        members = [(source, f"kgotjob/{source.name}") for source in sorted(_JOBS_DIR.glob("*.py"))]
        members.extend(
            (_GRAPH_MODEL / name, f"kgot/graph_model/{name}") for name in _SHIPPED_GRAPH_MODEL
        )
        archive.writestr("kgot/__init__.py", "")
        archive.writestr("kgot/graph_model/__init__.py", "")
        for source, name in members:
            text = source.read_bytes()
            archive.writestr(name, text)
            archive.writestr(name.removesuffix(".py") + ".pyc", _unchecked_hash_pyc(text, name))
    return buffer.getvalue()


def _unchecked_hash_pyc(source: bytes, name: str) -> bytes:
    """``source`` compiled into the bytes of a PEP 552 unchecked hash-based ``.pyc``.

    Built in memory rather than with :mod:`py_compile`, whose scratch directory a process
    stopped mid-build (a signal while a worker thread bundles) left for an exit-time cleanup
    that raced the still-writing thread.
    """
    code = compile(source, name, "exec", dont_inherit=True)
    unchecked_hash_flags = (0b01).to_bytes(4, "little")  # hash-based, check_source off
    return (
        importlib.util.MAGIC_NUMBER
        + unchecked_hash_flags
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def run_job(sandbox: Sandbox, spec: JobSpec) -> dict[str, Any]:
    """Run a graph job and return its outcome when it succeeded.

    Raises:
        GraphQueryError: a read job failed (the model's query is at fault).
        GraphCodeError: a write job's code failed.
        ChangesetError: a write job's changes break the graph rules.
        SandboxUnavailableError: the sandbox itself cannot run.
    """
    return _successful_outcome(sandbox.run(_job(spec)), spec)


async def run_job_async(sandbox: Sandbox, spec: JobSpec) -> dict[str, Any]:
    """:func:`run_job` without blocking the event loop (see :func:`kgot.sandbox.run_async`)."""
    return _successful_outcome(await run_async(sandbox, _job(spec)), spec)


def resident_job(spec: JobSpec) -> Job:
    """The job for a resident worker, whose zygote holds kgot's job code and the graph: only
    the model's code and options travel."""
    return _job(spec, with_bundle=False)


def job_outcome(result: ExecResult, spec: JobSpec) -> dict[str, Any]:
    """What a job reported, failures included (a ``resident_stale`` one means the worker must
    get the graph again); :func:`successful_outcome` turns failures into errors.

    Raises:
        GraphQueryError, GraphCodeError: the job left no outcome (a limit, a crash).
    """
    error_type = GraphQueryError if spec.mode in ("read", "check") else GraphCodeError
    return _parse_outcome(result, error_type)


def successful_outcome(outcome: dict[str, Any], spec: JobSpec) -> dict[str, Any]:
    """``outcome`` when it is a success; else the error it describes, raised (see
    :func:`run_job`).

    Raises:
        FactsNeededError: the code called ``find``/``neighbours`` on a working set, and the
            host has not answered that call yet (``jobs/lookups.py``).
    """
    if outcome.get("ok") is True:
        return outcome
    if outcome.get("kind") == "needs" and isinstance(outcome.get("request"), dict):
        raise FactsNeededError(outcome["request"])
    error_type = GraphQueryError if spec.mode in ("read", "check") else GraphCodeError
    summary = str(outcome.get("summary") or "the code failed")
    detail = str(outcome.get("detail") or summary)
    if outcome.get("kind") == "violations" and spec.mode == "write":
        problems = outcome.get("problems")
        if isinstance(problems, list) and problems:
            raise ChangesetError([str(p) for p in problems])
        raise ChangesetError([summary])
    raise error_type(summary, detail)


def _job(spec: JobSpec, *, with_bundle: bool = True) -> Job:
    input_bytes = sum(len(content) for content in spec.files.values())
    bundle = {"kgotjob.zip": job_bundle()} if with_bundle else {}
    return Job(
        code=_BOOTSTRAP.format(module=spec.module, mode=spec.mode),
        files={**bundle, **spec.files},
        limits=Limits(
            timeout_s=spec.timeout_s,
            max_output_bytes=max(_MIN_OUTPUT_BYTES, 4 * input_bytes),
        ),
    )


def _successful_outcome(result: ExecResult, spec: JobSpec) -> dict[str, Any]:
    error_type = GraphQueryError if spec.mode in ("read", "check") else GraphCodeError
    return successful_outcome(_parse_outcome(result, error_type), spec)


def _parse_outcome(
    result: ExecResult, error_type: type[GraphCodeError | GraphQueryError]
) -> dict[str, Any]:
    raw = result.outputs.get("result.json")
    outcome = _decoded(raw) if raw is not None else None
    if outcome is not None:
        return outcome
    if raw is None or not _ended_cleanly(result):
        # A job stopped while writing (a limit, a crash) leaves part of its result: the
        # reason is how it ended, not the code writing to the file.
        raise error_type(_why_unfinished(result))
    # The job's own writer leaves a whole outcome or none: only the code can have put this.
    raise error_type("the code overwrote the job's result file; do not write to out/result.json")


def _decoded(raw: bytes) -> dict[str, Any] | None:
    try:
        outcome = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return outcome if isinstance(outcome, dict) and "ok" in outcome else None


def _ended_cleanly(result: ExecResult) -> bool:
    return (
        result.exit_code == 0
        and not result.timed_out
        and result.error is None
        and not result.truncated
    )


def _why_unfinished(result: ExecResult) -> str:
    """Why a job left no result: timeout, a limit, an early exit or a crash."""
    if result.timed_out:
        return (
            f"the code did not finish in time ({result.error or 'timed out'}); "
            "make it do less work (no unbounded loops or all-pairs computations)"
        )
    if result.error:
        return f"the code was stopped: {result.error}"
    if result.truncated:
        return "the result was larger than the sandbox output limit; return less data"
    if result.exit_code == 0:
        return "the code ended the job early (sys.exit or os._exit); remove that call"
    tail = [line for line in result.stderr.strip().splitlines() if line.strip()][-1:]
    reason = tail[0] if tail else f"exit code {result.exit_code}"
    return f"the job crashed before reporting a result: {reason}"
