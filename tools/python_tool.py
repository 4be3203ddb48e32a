"""python: run code in the sandbox, with the run's files mounted read-only.

The code never runs in the kgot process: it goes to :class:`kgot.sandbox.Sandbox` like every
other piece of LLM-written code. Attachments appear at ``/mnt/inputs/<name>``, downloads and
extracted archive members under ``/mnt/inputs/workspace/``. The code runs in ``/work/out/``: every
file it writes there (by a relative name, or the full path) comes back into the workspace, so
inspect_file can read them, and ``kgot tools run python --workspace DIR`` leaves them in DIR.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from kgot.daemon_threads import run_blocking
from kgot.sandbox import MOUNT_DIR, OUTPUT_DIR, Job, Limits
from kgot.tools.base import ToolFailure, ToolResult
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.tool_session import ToolSession

TAIL_CHARS = 4000  # of stderr shown when code fails: the traceback's end is what matters


class PythonArgs(ToolArgs):
    code: str = Field(
        min_length=1,
        description="A complete Python 3 program. print() what you need: only stdout and "
        "stderr come back. numpy, pandas and sympy are available; there is no network.",
    )
    packages: list[str] = Field(
        default_factory=list,
        description="Extra PyPI packages the code imports, installed before it runs. Only "
        "packages the user allowed (sandbox.allow_packages) install; any other is refused. "
        "Usually leave empty.",
    )


def build(session: ToolSession) -> ToolFunction:
    sandbox = session.ctx.sandbox
    if sandbox is None:  # build_tools leaves the tool out; this guards direct use
        raise ToolFailure("the python tool needs a sandbox", kind="unavailable")

    async def python(code: str, packages: list[str] | None = None) -> ToolResult:
        timeout = session.settings.timeout
        configured = getattr(getattr(sandbox, "settings", None), "timeout", None)
        # Finish (and report) inside the runner's deadline, so the model sees the sandbox's
        # own "timed out" message rather than a bare cancellation.
        budget = max(1.0, timeout - 2.0)
        if isinstance(configured, int | float):
            budget = min(budget, float(configured))
        job = Job(
            code=code,
            mounts=session.sandbox_mounts(),
            limits=Limits(timeout_s=budget),
            packages=tuple(packages or ()),
            # Code that saves a file by a relative name (open("result.csv", "w")) means to
            # keep it: running in the output directory keeps it.
            cwd=OUTPUT_DIR,
        )
        result = await run_blocking(sandbox.run, job)
        saved = _save_outputs(session, result.outputs)
        report = _report(result.stdout, result.stderr, saved, session)
        if result.timed_out:
            raise ToolFailure(
                f"the code was stopped after {budget:g} s: {result.error or 'timed out'}. Make "
                f"it faster (smaller input, vectorised operations).\n{report}",
                kind="timeout",
            )
        if not result.ok:
            why = result.error or f"exit code {result.exit_code}"
            raise ToolFailure(f"the code failed ({why}).\n{report}", kind="execution")
        return ToolResult(
            report or "(the code printed nothing; print() the values you need)",
            f"sandbox:{sandbox.name}",
        )

    return python


def _save_outputs(session: ToolSession, outputs: dict[str, bytes]) -> list[Path]:
    saved = []
    for name, content in outputs.items():
        saved.append(session.save_bytes(Path(name).name, content))
    return saved


def _report(stdout: str, stderr: str, saved: list[Path], session: ToolSession) -> str:
    parts = []
    if stdout.strip():
        parts.append(stdout.rstrip())
    if stderr.strip():
        tail = stderr.rstrip()
        if len(tail) > TAIL_CHARS:
            tail = "…" + tail[-TAIL_CHARS:]
        parts.append(f"[stderr]\n{tail}")
    if saved:
        names = ", ".join(f"{session.model_path(p)} ({p.stat().st_size:,} bytes)" for p in saved)
        parts.append(f"[files written to {OUTPUT_DIR}, now readable with inspect_file: {names}]")
    return "\n".join(parts)


def describe_mounts(session: ToolSession) -> str:
    """A sentence for the model about which files the code can read."""
    if not session.attachments:
        return ""
    listed = ", ".join(f"{MOUNT_DIR}/{p.name}" for p in session.attachments)
    return f" This run's files are readable at: {listed}."


SPEC = ToolSpec(
    name="python",
    description=(
        "Run a Python 3 program in an isolated sandbox and get its printed output: for "
        "calculations, counting, dates, parsing data files, anything that must be exact. "
        "Files attached to the question are readable at /mnt/inputs/<file name>; downloads "
        "and extracted archive members at /mnt/inputs/workspace/. No network access. "
        "The working directory is /work/out/: files written there are kept."
    ),
    args_schema=PythonArgs,
    more_hint="print less: summarise, or print only the rows you need",
    build=build,
    context_note=describe_mounts,
    needs="sandbox",
    notes=lambda settings: [f"runs in the {settings.sandbox.kind} sandbox (sandbox.kind)"],
)
