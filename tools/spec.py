"""How a tool is declared: its name, its words for the model, its arguments, how to build it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from annotated_types import MinLen
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from kgot.tools.base import MORE_HINT_KEY, NATIVE_KEY, ToolResult

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from kgot.config import Settings
    from kgot.tools.tool_session import ToolSession

Need = Literal["sandbox", "llm"]

ToolFunction = Callable[..., Awaitable[ToolResult]]


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown arguments are errors the model gets to see, and
    so is a text that must not be empty but holds only whitespace (a search for "   " would
    otherwise go out to the network)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _not_blank(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields[info.field_name] if info.field_name else None
        must_hold_text = field is not None and any(
            isinstance(rule, MinLen) and rule.min_length > 0 for rule in field.metadata
        )
        if must_hold_text and isinstance(value, str) and not value.strip():
            raise ValueError("holds only whitespace; give the text itself")
        return value


@dataclass(frozen=True)
class ToolSpec:
    """One tool of the belt.

    Attributes:
        name: what the model calls it.
        description: what it does and when to use it, written for the model.
        args_schema: its arguments (a Pydantic model; its JSON schema goes to the model).
        more_hint: what to do when the output was cut (appended to the truncation notice).
        build: makes the tool's coroutine for one run's session.
        context_note: a sentence about this run added to the description (e.g. which
            attachments exist), or ``None``.
        needs: what the run must provide for the tool to exist (a sandbox, a model);
            :func:`~kgot.tools.build_tools` leaves the tool out without it.
        reads_documents: uses the document-parsing workers (started early when present).
        notes: remarks on its configuration for ``kgot tools list`` (e.g. which search
            providers are tried), from the full settings.
    """

    name: str
    description: str
    args_schema: type[ToolArgs]
    more_hint: str
    build: Callable[[ToolSession], ToolFunction]
    context_note: Callable[[ToolSession], str] | None = None
    needs: Need | None = None
    reads_documents: bool = False
    notes: Callable[[Settings], list[str]] | None = None

    def make(self, session: ToolSession) -> BaseTool:
        """The LangChain tool for one run's session."""
        from langchain_core.tools import StructuredTool  # only runs need LangChain, not listing

        function = self.build(session)

        async def call(**kwargs: Any) -> tuple[str, dict[str, Any]]:
            result = await function(**kwargs)
            return result.as_content_and_artifact()

        return StructuredTool.from_function(
            coroutine=call,
            name=self.name,
            description=self.description
            + (self.context_note(session) if self.context_note else ""),
            args_schema=self.args_schema,
            response_format="content_and_artifact",
            metadata={MORE_HINT_KEY: self.more_hint, NATIVE_KEY: True},
        )
