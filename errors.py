"""Every error kgot raises on purpose.

Two families, kept apart on purpose:

* :class:`KgotError` and its children are *user-facing*: ``str(error)`` is one line that names the
  problem and, where there is one, the fix. The CLI prints it without a traceback and exits ≠ 0.
* :class:`StepFailure` children are *model-facing*: they describe what went wrong with something
  an LLM produced (bad code, an empty query, malformed JSON) so the loop can show it to the model
  and try again, or record the step as failed. They never escape a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal


class KgotError(Exception):
    """A problem the user must fix; the message is one line naming the problem and the fix."""

    exit_code = 1


class ConfigError(KgotError):
    """Missing or invalid configuration (no model, bad TOML, unknown option)."""

    exit_code = 2


class UsageError(KgotError):
    """Bad command-line input (an empty question, an unknown run id)."""

    exit_code = 2


class ModelError(KgotError):
    """The model endpoint could not be used (unreachable after retries, auth refused, …)."""


class SandboxUnavailableError(KgotError):
    """The requested sandbox cannot run on this machine (no bwrap, no Docker engine, …).

    The machine's set-up or the chosen ``sandbox.kind`` has to change: a configuration problem,
    exit code 2. (Inside a run the failure ends the run instead: exit code 1, resumable.)
    """

    exit_code = 2


class GraphFileError(KgotError):
    """A graph file could not be read or written (missing, unknown extension, malformed
    content, a value the store cannot hold, an unwritable target): the file or the path the
    user named has to change, so bad input, exit code 2."""

    exit_code = 2


class StoreError(KgotError):
    """The persistent store could not be used (unreachable database, failed migration)."""


class EntityNotFoundError(StoreError):
    """An entity name that does not exist in the store (bad input: exit code 2)."""

    exit_code = 2


class EntityNameError(StoreError):
    """An entity name kgot does not accept (bad input: exit code 2)."""

    exit_code = 2


class StoreLocationError(StoreError):
    """The store location (``KGOT_DB``, ``--db``, ``store.db``) is not a path or URL kgot can
    use: a configuration problem, exit code 2."""

    exit_code = 2


class WriteConflictError(KgotError):
    """Other writers kept changing the facts a write was based on, through every retry, so
    nothing was written. Nobody did anything wrong: the same call made again is the fix, and
    the message names the facts and says so."""


class DatasetError(KgotError):
    """A benchmark dataset or results file cannot be used (missing, malformed, wrong columns)."""

    exit_code = 2


class StepFailure(Exception):
    """Something an LLM produced did not work; the text is shown to the model on retry."""


class StructuredOutputError(StepFailure):
    """The model never produced output that validates against the requested schema.

    Attributes:
        attempts: one entry per attempt: the raw text received and the validation error.
        reasons: one entry per attempt: the kind of problem, in words (``"no JSON object in
            the reply"``, …); equal kinds mean re-asking did not help.
        methods: one entry per attempt: the structured-output method it was asked with.
    """

    def __init__(
        self,
        message: str,
        attempts: list[tuple[str, str]] | None = None,
        *,
        reasons: Sequence[str] = (),
        methods: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.attempts = attempts or []
        self.reasons = tuple(reasons)
        self.methods = tuple(methods)


class CodeExecutionError(StepFailure):
    """LLM-written code failed in the sandbox (exception, timeout, limit)."""


class QueryError(StepFailure):
    """A read query failed (syntax error, runtime error, forbidden clause)."""


class ChangesetError(StepFailure):
    """A proposed graph change was rejected; nothing was applied.

    Attributes:
        problems: one human-readable line per violation, each naming where and which rule.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems) if self.problems else "changeset rejected")


class ToolError(StepFailure):
    """A tool could not do what was asked; the message tells the model what to try instead."""


ErrorKind = Literal[
    "input",  # the call itself is wrong: bad arguments, a path that is not there
    "not_found",  # the thing asked for does not exist (HTTP 404, no such article)
    "network",  # unreachable host, refused connection, HTTP 5xx after retries
    "timeout",  # the tool ran out of time
    "unsupported",  # a format or content type this tool cannot read
    "corrupt",  # a file that claims a format but cannot be parsed
    "unavailable",  # the tool or capability is not configured (no vision model, no sandbox)
    "execution",  # code run by the python tool failed
    "unknown_tool",  # no tool by that name in this run
    "internal",  # a bug in kgot; reported to the model rather than crashing the run
]


class ToolFailure(ToolError):
    """A tool could not do what was asked (or the document reader or web client under it).

    The message is shown to the model: it says what failed and what to try instead.

    Attributes:
        kind: a machine-readable category (see :data:`ErrorKind`).
        source_ref: the URL or path involved, when there is one.
    """

    def __init__(self, message: str, *, kind: ErrorKind, source_ref: str | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.source_ref = source_ref


class TransientNetworkError(ToolFailure):
    """A network failure worth retrying (connection reset, 429, 502/503/504, timeouts).

    ``retry_after`` is the wait in seconds the server asked for, or ``None`` when it did not.
    """

    def __init__(
        self, message: str, *, source_ref: str | None = None, retry_after: float | None = None
    ):
        super().__init__(message, kind="network", source_ref=source_ref)
        self.retry_after = retry_after
