"""Shared vocabulary of the tool belt: the run context, outcomes, descriptions and failures.

A tool is a LangChain :class:`~langchain_core.tools.BaseTool` whose coroutine either returns
``(text, artifact)`` (``response_format="content_and_artifact"``; the artifact carries
provenance) or raises a :class:`ToolFailure`. :class:`~kgot.tools.runner.ToolRunner` turns both
into a :class:`ToolOutcome`; nothing a tool does ever escapes a run as an exception.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.config import ModelSettings, Settings, ToolsSettings

# The failure vocabulary lives in kgot.errors, beneath the document reader and the web client
# that raise it too; the tools name it from here, as before (a re-export).
from kgot.errors import ErrorKind, ToolFailure, TransientNetworkError  # noqa: F401

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.documents import ConverterPool
    from kgot.sandbox import Sandbox

# Metadata keys on a BaseTool that the runner reads.
MORE_HINT_KEY = "kgot_more_hint"  # how to get the rest of a truncated output
# Set on kgot's own tools (a StructuredTool whose coroutine returns (text, artifact)): the
# runner calls that coroutine itself with the arguments it has validated.
NATIVE_KEY = "kgot_native"


@dataclass
class ToolResult:
    """What a tool coroutine returns before the runner caps it (text plus provenance)."""

    text: str
    source_ref: str | None = None

    def as_content_and_artifact(self) -> tuple[str, dict[str, Any]]:
        return self.text, {"source_ref": self.source_ref}


@dataclass
class ToolOutcome:
    """The result of one tool call, success or not; what the controller records and shows.

    Attributes:
        name: the tool called.
        args: the arguments as given.
        output: the text for the model (an actionable error message when ``ok`` is false),
            already capped at ``max_output_chars`` with a notice when cut.
        ok: whether the tool did what was asked.
        cached: served from this run's cache of identical successful calls.
        duration_ms: wall time of the call (0 when cached).
        truncated_chars: characters cut from the output.
        error_kind: the failure category when ``ok`` is false (see :data:`ErrorKind`).
        source_ref: URL or file path the data came from (provenance for the graph).
    """

    name: str
    args: dict[str, Any]
    output: str
    ok: bool
    cached: bool = False
    duration_ms: float = 0.0
    truncated_chars: int = 0
    error_kind: str | None = None
    source_ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ToolArgument:
    """One argument of a tool, as shown by ``kgot tools list``."""

    name: str
    type: str
    required: bool
    description: str = ""
    default: Any = None


@dataclass(frozen=True)
class ToolInfo:
    """A tool as configured: what it does, its arguments, and whether it is enabled (and why).

    Attributes:
        enabled: configuration turns it on and what it needs is there.
        reason: why it is not enabled (configuration, or the missing model or sandbox).
        notes: how it is set up and which capabilities are off ("images: no vision model").
        available: ``False`` when configuration turns it on but what it needs (a model, a
            working sandbox) is missing; ``reason`` then says what.
    """

    name: str
    description: str
    arguments: tuple[ToolArgument, ...]
    enabled: bool
    reason: str | None = None
    notes: tuple[str, ...] = ()
    available: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Transcriber = Callable[[Path], Awaitable[str]]


@dataclass
class ToolContext:
    """Everything the tools of one run may use.

    Attributes:
        settings: the ``[tools]`` settings.
        sandbox: where the python tool runs code; without one the python tool is left out.
        llm: the execution-role client (``kgot.llm.LLMClient``) or any LangChain chat model;
            without one llm_query is left out.
        attachments: files named in the question (GAIA); tools read them by path or basename,
            and the python tool sees them read-only under ``/mnt/inputs/<basename>``.
        endpoint: connection defaults (base URL, key, timeout) for the vision and transcription
            models; normally the execution role's settings.
        vision_model: a multimodal chat model for images; built from ``settings.vision_model``
            when not given.
        transcriber: ``async (path) -> text`` for audio; built from
            ``settings.transcription_model`` when not given.
        ddgs: a ``ddgs.DDGS``-compatible client (has ``.text(query, **options)``); built on
            first use when not given.
        converter: the sandboxed workers that parse documents; a shared pool by default.
        workspace: a directory for downloads and extracted archive members, kept after the
            run; by default a private temporary directory removed with the run's tools.
    """

    settings: ToolsSettings = field(default_factory=ToolsSettings)
    sandbox: Sandbox | None = None
    llm: Any | None = None
    attachments: tuple[Path, ...] = ()
    endpoint: ModelSettings | None = None
    vision_model: BaseChatModel | None = None
    transcriber: Transcriber | None = None
    ddgs: Any | None = None
    converter: ConverterPool | None = None
    workspace: Path | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        sandbox: Sandbox | None = None,
        llm: Any | None = None,
        attachments: tuple[Path, ...] | list[Path] = (),
        workspace: Path | None = None,
    ) -> ToolContext:
        """A context for one run from the full settings (the execution role is the endpoint
        the vision and transcription models use unless ``tools.vision_base_url`` etc. say
        otherwise)."""
        return cls(
            settings=settings.tools,
            sandbox=sandbox,
            llm=llm,
            attachments=tuple(Path(p) for p in attachments),
            endpoint=settings.llm.execution,
            workspace=workspace,
        )
