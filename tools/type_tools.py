"""`create_node_type` / `create_edge_type`: the model proposes a new type for its entity.

Bound to one :class:`~kgot.persistence.EntitySession`; a proposal passes the same rules as any
other type (PascalCase / snake_case name that is new, valid Draft 2020-12 properties schema, a
description, an example that fits) plus a justification, and is stored scoped to the entity with
``created_by="agent"``. A rejected proposal comes back to the model as a tool error naming each
broken rule and the JSON path.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from kgot.tools.base import ToolFailure

if TYPE_CHECKING:
    from kgot.persistence import EntitySession, TypeDef

_PROPERTIES_HELP = (
    'JSON Schema (Draft 2020-12) of the properties object, e.g. {"type": "object", '
    '"required": ["name"], "properties": {"name": {"type": "string"}, "founded": '
    '{"type": "string", "format": "date"}}}. Property names must not start with \'_\'.'
)


class _TypeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(description="What the type means and when to use it.")
    properties: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}, description=_PROPERTIES_HELP
    )
    example: dict[str, Any] | None = Field(
        default=None, description="Example properties that satisfy the schema."
    )
    justification: str = Field(
        description="Why none of the existing types fits the facts you need to record."
    )
    half_life_days: float | None = Field(
        default=None,
        gt=0,
        description="Days in which its facts lose half their freshness (news ~7, prices ~21); "
        "omit for facts that do not age.",
    )
    ttl_days: float | None = Field(
        default=None,
        gt=0,
        description="Days after its last confirmation a fact expires; omit to keep it.",
    )
    rank_weight: float | None = Field(
        default=None, ge=0, le=1, description="How much the type matters in ranking (0.5)."
    )


class NodeTypeArgs(_TypeArgs):
    name: str = Field(description="PascalCase node label, e.g. Company, ClinicalTrial.")
    identity: list[str] | None = Field(
        default=None,
        description="Properties that identify one real thing (an Asset's symbol): equal values "
        "are the same thing, different values never are.",
    )
    functional: list[str] | None = Field(
        default=None,
        description="Single-valued properties (a Company's ceo): a new value replaces the old.",
    )


class EdgeTypeArgs(_TypeArgs):
    name: str = Field(description="snake_case relationship, e.g. works_for, holds_shares_of.")
    source_types: list[str] = Field(
        default_factory=list, description="Node types the edge may start from (empty = any)."
    )
    target_types: list[str] = Field(
        default_factory=list, description="Node types the edge may point to (empty = any)."
    )
    functional: bool | None = Field(
        default=None,
        description="True when a source has at most one current edge of it (a new target "
        "replaces the old).",
    )


def build_type_tools(session: EntitySession, run_id: str | None = None) -> list[BaseTool]:
    """The two type tools, writing into ``session``'s entity.

    Args:
        session: the entity whose graph the run grows.
        run_id: recorded on each type the tools create (provenance).
    """

    async def create(kind: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
        from kgot.persistence import TypeRejectedError, TypeSpec

        justification = str(arguments.pop("justification", ""))
        spec = {"kind": kind, **{k: v for k, v in arguments.items() if v is not None}}
        try:
            parsed = TypeSpec.from_mapping(spec)
            created = await asyncio.to_thread(
                session.create_type,
                parsed,
                created_by="agent",
                justification=justification,
                run_id=run_id,
            )
        except TypeRejectedError as rejected:
            raise ToolFailure(
                f"{rejected}. Fix the definition and call the tool again, or use an existing type.",
                kind="input",
            ) from None
        return _describe(created, session.entity), {"source_ref": None}

    async def create_node_type(**arguments: Any) -> tuple[str, dict[str, Any]]:
        return await create("node", **arguments)

    async def create_edge_type(**arguments: Any) -> tuple[str, dict[str, Any]]:
        return await create("edge", **arguments)

    return [
        StructuredTool.from_function(
            coroutine=create_node_type,
            name="create_node_type",
            description=(
                "Add a node type (label) to this knowledge graph when no existing type fits "
                "facts you must record. Every node must use a known type and is validated "
                "against its properties schema. Give a PascalCase name, a description, a JSON "
                "Schema for the properties, an example, and a justification."
            ),
            args_schema=NodeTypeArgs,
            response_format="content_and_artifact",
        ),
        StructuredTool.from_function(
            coroutine=create_edge_type,
            name="create_edge_type",
            description=(
                "Add an edge type (relationship) to this knowledge graph when no existing one "
                "fits. Give a snake_case name, a description, which node types it connects "
                "(source_types -> target_types; empty = any), a JSON Schema for its "
                "properties, and a justification."
            ),
            args_schema=EdgeTypeArgs,
            response_format="content_and_artifact",
        ),
    ]


def _describe(created: TypeDef, entity: str) -> str:
    from kgot.persistence import describe_properties

    spec = created.spec
    required, optional, _closed = describe_properties(spec.properties)
    text = f"Created {spec.kind} type {spec.name} (version {created.version}) for {entity}."
    if spec.kind == "edge":
        sources = " | ".join(spec.source_types) or "any"
        targets = " | ".join(spec.target_types) or "any"
        text += f" It connects {sources} -> {targets}."
    text += f" Required properties: {', '.join(required) or 'none'}."
    if optional:
        text += f" Optional: {', '.join(optional)}."
    upkeep = spec.upkeep
    if upkeep.identity:
        text += f" Identified by: {', '.join(upkeep.identity)}."
    if upkeep.functional or upkeep.functional_edge:
        single = ", ".join(upkeep.functional) or "one target per source"
        text += f" Single-valued: {single}."
    if upkeep.half_life_days is not None:
        text += f" Half-life: {upkeep.half_life_days:g} days."
    return text + " Use it in graph updates from now on."
