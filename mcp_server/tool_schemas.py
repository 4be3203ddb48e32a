"""The typed inputs and outputs of the MCP tools (their JSON Schemas are what clients see)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

from kgot.persistence import MAX_ID_LENGTH

JsonValue = Any

# ---------------------------------------------------------------------------- inputs


def _folded(data: Any, fields: frozenset[str]) -> Any:
    """A flat node-link object (``{"id": "acme", "label": "Organization", "name": "Acme"}``,
    as kgot's own graph files hold them) with its other keys moved into ``properties``.

    Raises:
        ValueError: a key given both flat and in ``properties`` with different values.
    """
    if not isinstance(data, Mapping):
        return data
    flat = {key: value for key, value in data.items() if key not in fields}
    nested = data.get("properties")
    if not flat or not (nested is None or isinstance(nested, Mapping)):
        return data  # nothing to fold, or a malformed properties the schema check names
    nested = nested or {}
    clashes = sorted(key for key in flat if key in nested and nested[key] != flat[key])
    if clashes:
        raise ValueError(
            f"{', '.join(clashes)} given both beside id and in properties, with different "
            "values; give each property once"
        )
    kept = {key: value for key, value in data.items() if key in fields}
    return {**kept, "properties": {**flat, **nested}}


_FLAT: JsonDict = {
    "additionalProperties": {
        "description": "Any other key is a property (the flat node-link form of kgot's graph "
        "files)."
    }
}


class NodeIn(BaseModel):
    """A node: {id, label, properties}, or flat node-link (other keys are properties)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_FLAT)

    id: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, description="The node's id, e.g. 'acme'."
    )
    label: str = Field(
        min_length=1,
        max_length=200,
        description="Its type (see list_types), e.g. 'Organization'.",
    )
    properties: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Property values checked against the type's JSON Schema, e.g. "
        '{"name": "Acme Corp"}; _confidence (0-1) sets this fact\'s own trust.',
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        return _folded(data, frozenset({"id", "label", "properties"}))


class EdgeIn(BaseModel):
    """An edge: {source, target, relationship, key, properties}, or flat node-link."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_FLAT)

    source: str = Field(min_length=1, max_length=MAX_ID_LENGTH, description="The source node's id.")
    target: str = Field(min_length=1, max_length=MAX_ID_LENGTH, description="The target node's id.")
    relationship: str = Field(
        min_length=1, max_length=200, description="Its type, e.g. 'located_in'."
    )
    key: str | None = Field(
        default=None,
        max_length=MAX_ID_LENGTH,
        description="Tells parallel edges apart (default: the relationship).",
    )
    properties: dict[str, JsonValue] = Field(
        default_factory=dict, description="Property values checked against the edge type."
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        return _folded(data, frozenset({"source", "target", "relationship", "key", "properties"}))


# ---------------------------------------------------------------------------- outputs


class RelatedEdgeOut(BaseModel):
    id: str = Field(description="'source -[key]-> target'.")
    relationship: str
    direction: Literal["out", "in"] = Field(description="out: from the hit; in: to it.")
    other: str = Field(description="The id of the node at the other end.")
    other_name: str
    confidence: float
    properties: dict[str, JsonValue]


class EndOut(BaseModel):
    id: str
    name: str


class EndsOut(BaseModel):
    source: EndOut
    target: EndOut


class SearchHitOut(BaseModel):
    id: str = Field(description="A node's id, or an edge as 'source -[key]-> target'.")
    kind: Literal["node", "edge"]
    label: str = Field(description="The node's type or the edge's relationship.")
    name: str
    score: float
    relevance: float
    rank_weight: float
    confidence: float
    freshness: float
    properties: dict[str, JsonValue] = Field(
        default_factory=dict, description="The fact's properties (e.g. ceo: Tim Cook)."
    )
    matched_properties: list[str] = Field(
        default_factory=list, description="The properties the query matched, by name or value."
    )
    key_properties: list[str] = Field(
        default_factory=list,
        description="Properties its type marks as identifying or single-valued.",
    )
    edges: list[RelatedEdgeOut] = Field(
        default_factory=list,
        description="A node: its current edges the query matched (relationship or other end), "
        "best first.",
    )
    edges_matched: int = Field(default=0, description="How many edges matched in all.")
    ends: EndsOut | None = Field(default=None, description="An edge: its two ends by name.")


class SearchOut(BaseModel):
    entity: str
    hits: list[SearchHitOut]


class FactProvenance(BaseModel):
    confidence: float | None = None
    source_kind: str | None = None
    source_ref: str | None = None
    run_id: str | None = Field(default=None, description="Who wrote it: a run, mcp:<label>, …")
    step: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    corroborations: int | None = Field(
        default=None, description="Distinct sources that stated this fact."
    )
    version: int | None = Field(default=None, description="The graph version it was written at.")
    sources: list[dict[str, JsonValue]] = Field(default_factory=list)


class EdgeOut(BaseModel):
    id: str = Field(description="'source -[key]-> target'.")
    source: str
    target: str
    relationship: str
    key: str
    properties: dict[str, JsonValue]
    provenance: FactProvenance


class NodeOut(BaseModel):
    entity: str
    id: str = Field(description="The node's id (the canonical one when an alias was asked).")
    requested_id: str = Field(description="The id asked for; an alias when it differs from id.")
    label: str
    properties: dict[str, JsonValue]
    provenance: FactProvenance
    edges_out: list[EdgeOut]
    edges_in: list[EdgeOut]
    edges_out_total: int
    edges_in_total: int


class TraverseNode(BaseModel):
    id: str
    label: str
    name: str
    depth: int


class TraverseEdge(BaseModel):
    id: str
    source: str
    target: str
    relationship: str


class TraverseOut(BaseModel):
    entity: str
    start: str
    nodes: list[TraverseNode]
    edges: list[TraverseEdge]
    truncated: bool = Field(description="Stopped at max_nodes or max_edges; go deeper from a node.")


class Landing(BaseModel):
    id: str = Field(description="The id given in the call.")
    into: str = Field(description="The existing node the write landed on.")


class SaveOut(BaseModel):
    entity: str
    written: bool = Field(description="False: nothing was written (see violations).")
    version: int | None = Field(default=None, description="The entity's version after the write.")
    inserted: list[str] = Field(default_factory=list, description="Facts new to the graph.")
    updated: list[str] = Field(default_factory=list, description="Nodes with changed properties.")
    merged: list[Landing] = Field(
        default_factory=list,
        description="Nodes that were an existing node (a duplicate, an alias).",
    )
    corroborated: list[str] = Field(
        default_factory=list, description="Facts the graph held already, stated again."
    )
    superseded: list[str] = Field(
        default_factory=list, description="Facts closed as contradicted by a new value."
    )
    queued: int = Field(default=0, description="Suggestions filed for a person to review.")
    notes: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)


class RememberOut(BaseModel):
    entity: str
    ok: bool
    version: int | None = None
    inserted_nodes: list[str] = Field(default_factory=list)
    inserted_edges: list[str] = Field(
        default_factory=list, description="Edges new to the graph, as 'source -[key]-> target'."
    )
    updated_nodes: list[str] = Field(default_factory=list)
    updated_edges: list[str] = Field(default_factory=list)
    merged: list[Landing] = Field(
        default_factory=list,
        description="Node ids the text's facts gave that were an existing node (a duplicate, an "
        "alias).",
    )
    restated: list[str] = Field(
        default_factory=list,
        description="Facts the text stated again as the graph holds them (node ids, "
        "'source -[key]-> target'): nothing new written, counted as corroborated or reinforced.",
    )
    corroborated: int = Field(default=0, description="Facts found again by a new source.")
    reinforced: int = Field(default=0, description="Facts found again by the same source.")
    superseded: list[str] = Field(default_factory=list)
    queued: int = 0
    notes: list[str] = Field(default_factory=list)
    failed: str | None = None
    llm_calls: int = 0
    cost_usd: float | None = None
    parts: int = Field(default=1, description="Pieces the text was cut into.")
    parts_done: int = Field(default=0, description="Pieces ingested before the end or a cap.")
    stopped_by: str | None = Field(
        default=None, description="The cap that stopped the call before its last piece."
    )


class VerdictOut(BaseModel):
    verdict: Literal["corroborated", "contradicted", "mixed", "inconclusive"]
    supporting: list[str]
    contradicting: list[str]
    confidence: float
    claim: dict[str, JsonValue] | None
    subject_id: str | None
    candidates: list[str]
    superseded: list[dict[str, JsonValue]]
    notes: list[str]


class TypesOut(BaseModel):
    entity: str
    node_types: list[dict[str, JsonValue]]
    edge_types: list[dict[str, JsonValue]]


class TypeOut(BaseModel):
    entity: str
    created: dict[str, JsonValue]
    summary: str


class ForgetOut(BaseModel):
    entity: str
    kind: Literal["node", "property", "edge"]
    fact: str = Field(description="What was forgotten: node id, node.property or edge id.")
    version: int = Field(description="The entity's version after the forgetting.")
    closed: list[str] = Field(
        description="Every fact retired (a node's edges go with it); history keeps them."
    )
    closed_reason: Literal["forgotten"]
    value: JsonValue = Field(default=None, description="A forgotten property's value.")


class HistoryVersion(BaseModel):
    properties: dict[str, JsonValue]
    type: str
    valid_from_version: int
    valid_to_version: int | None
    closed_reason: str | None
    superseded_at: str | None
    canonical_id: str | None = None
    provenance: FactProvenance


class HistoryOut(BaseModel):
    entity: str
    fact: str
    current_id: str | None = Field(
        description="The node the fact is now (an alias leads to its canonical node); null when "
        "it is not current."
    )
    versions: list[HistoryVersion]


class AskOut(BaseModel):
    entity: str
    run_id: str
    status: str = Field(
        description="answered, forced, failed, interrupted, or stopped (the cap was reached)."
    )
    answer: str
    error: str | None = None
    iterations: int = 0
    llm_calls: int = 0
    cost_usd: float | None = None
    stopped_by: str | None = Field(default=None, description="Which cap stopped the run.")


class QueryOut(BaseModel):
    entity: str
    value: JsonValue
    truncated: bool
