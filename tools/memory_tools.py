"""`verify_claim`: the model checks a claim against its entity's graph (issue 15, section 5).

Offered in entity runs only. The check itself lives in :mod:`kgot.memory.verify`, a sibling
layer this package may not import; the controller passes it in as ``check`` (a callable that
takes the claim's fields as keywords and returns the verdict's JSON), bound to the run's entity
session, so the tool can read no other entity. The tool returns the verdict as JSON text; its
result is not turned into graph facts (it only restates the graph).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from kgot.errors import UsageError
from kgot.tools.base import ToolFailure

__all__ = ["VERIFY_TOOL_NAME", "VerifyClaimArgs", "build_memory_tools"]

VERIFY_TOOL_NAME = "verify_claim"
ClaimCheck = Callable[..., Mapping[str, Any]]


class VerifyClaimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(description="The node the claim is about: its id or its name.")
    property: str | None = Field(
        default=None, description="A property claim: the property (e.g. ceo, founded)."
    )
    value: str | int | float | bool | None = Field(
        default=None, description="A property claim: the value claimed."
    )
    relation: str | None = Field(
        default=None,
        description="A relation claim: the relationship from subject to object (e.g. works_for).",
    )
    object: str | None = Field(
        default=None, description="A relation claim: the target node's id or name."
    )


def build_memory_tools(check: ClaimCheck) -> list[BaseTool]:
    """The ``verify_claim`` tool, answering with ``check(subject=…, property=…, value=…,
    relation=…, object=…)`` (the controller binds it to the run's entity)."""

    async def verify_claim(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            verdict = await asyncio.to_thread(check, **arguments)
        except UsageError as bad:
            raise ToolFailure(
                f"{bad}. Call verify_claim with subject plus either property and value, or "
                "relation and object.",
                kind="input",
            ) from None
        return json.dumps(dict(verdict), ensure_ascii=False, default=str), {"source_ref": None}

    return [
        StructuredTool.from_function(
            coroutine=verify_claim,
            name=VERIFY_TOOL_NAME,
            description=(
                "Check a claim against this entity's knowledge graph before relying on it or "
                "recording it: give subject plus either property and value (a property claim) "
                "or relation and object (a relation claim). Returns JSON with verdict "
                "(corroborated, contradicted, mixed or inconclusive), the supporting and "
                "contradicting fact ids, a confidence 0-1, values that held once but were "
                "superseded, and notes."
            ),
            args_schema=VerifyClaimArgs,
            response_format="content_and_artifact",
        )
    ]
