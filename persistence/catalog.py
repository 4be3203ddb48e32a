"""Node and edge types: their specification, the rules a new type must pass, and the catalog.

A type names a node label (PascalCase) or an edge relationship (snake_case) and describes its
properties with a JSON Schema (Draft 2020-12, formats checked, ``date-time`` included). Edge
types may restrict which node types they connect. Types are stored versioned (see
:mod:`kgot.persistence.schema`); this module is pure: no database access.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from referencing.exceptions import Unresolvable

from kgot.errors import KgotError
from kgot.graph_model import count_tokens
from kgot.persistence.timeutil import iso
from kgot.persistence.type_schema import (
    cycle_message,
    declared_property_names,
    error_order,
    example_problems,
    make_validator,
    schema_problems,
)

TypeKind = Literal["node", "edge"]
Creator = Literal["system", "agent", "user"]

# The optional upkeep settings a type definition takes at its top level (see UpkeepSettings).
UPKEEP_KEYS = (
    "identity",
    "functional",
    "half_life_days",
    "ttl_days",
    "rank_weight",
    "resolution",
)
# How entity resolution may be told to compare a property (kgot.memory.field_evidence's
# kinds; "ignore" leaves the property out), and its keys in a type file's `resolution`.
COMPARISONS = ("name", "date", "identifier", "postcode", "text", "number", "category", "ignore")
_RESOLUTION_KEYS = ("compare", "merge_at", "suggest_at")
DEFAULT_RANK_WEIGHT = 0.5

NODE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
EDGE_NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
MAX_NAME_LENGTH = 64
_SPEC_KEYS = frozenset(
    {
        "kind",
        "name",
        "description",
        "properties",
        "example",
        "source",
        "target",
        "source_types",
        "target_types",
        *UPKEEP_KEYS,
    }
)


def creator(value: str) -> Creator:
    """``value`` checked as a :data:`Creator` (``system``, ``agent`` or ``user``).

    Raises:
        ValueError: any other value (a programming error, not user input).
    """
    if value not in ("system", "agent", "user"):
        raise ValueError(f"created_by must be system, agent or user, not {value!r}")
    return value  # type: ignore[return-value]


def kind_of(name: str) -> TypeKind:
    """The kind a type name implies: PascalCase names are node types, others edge types."""
    return "node" if name[:1].isupper() else "edge"


@dataclass(frozen=True)
class UpkeepSettings:
    """How memory upkeep treats the facts of one type (all optional; the defaults change
    nothing).

    Attributes:
        identity: node types: properties that identify one real thing (an Asset's ``symbol``):
            equal non-empty values mean the same thing, different ones never the same thing.
        functional: node types: single-valued properties (a Company's ``ceo``); a new value
            from a new write supersedes the old one.
        functional_edge: edge types (``functional: true`` in a type file): at most one current
            edge of this relationship per source node.
        half_life_days: freshness halves every N days (``0.5 ** (age_days / half_life_days)``);
            ``None`` = evergreen (never decays, never pruned).
        ttl_days: a fact expires N days after it was last written or reinforced; ``None`` =
            never.
        rank_weight: how much the type matters in ranking, 0 to 1.
        compare: node types: how entity resolution compares a property
            (:data:`COMPARISONS`), over what it infers; ``ignore`` leaves one out.
        merge_at / suggest_at: node types: the probability of one thing at which resolution's
            field model merges a pair, and suggests it (default 0.95 and 0.5).
    """

    identity: tuple[str, ...] = ()
    functional: tuple[str, ...] = ()
    functional_edge: bool = False
    half_life_days: float | None = None
    ttl_days: float | None = None
    rank_weight: float = DEFAULT_RANK_WEIGHT
    compare: tuple[tuple[str, str], ...] = ()
    merge_at: float | None = None
    suggest_at: float | None = None

    @property
    def evergreen(self) -> bool:
        return self.half_life_days is None

    @property
    def is_default(self) -> bool:
        return self == UpkeepSettings()

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], kind: TypeKind | None, problems: list[str]
    ) -> UpkeepSettings:
        """The settings among ``data``'s keys (a type definition's top level); each malformed
        one appends a line to ``problems`` and keeps its default."""
        identity: tuple[str, ...] = ()
        if data.get("identity") is not None:
            if kind == "edge":
                problems.append(
                    "`identity` is for node types (the properties that identify one real thing)"
                )
            else:
                identity = _property_list(data["identity"], "identity", problems)
        functional, functional_edge = _functional(data.get("functional"), kind, problems)
        rank_weight = DEFAULT_RANK_WEIGHT
        if data.get("rank_weight") is not None:
            weight = data["rank_weight"]
            if not _is_number(weight) or not 0 <= weight <= 1:
                problems.append(f"`rank_weight` must be a number from 0 to 1, not {weight!r}")
            else:
                rank_weight = float(weight)
        compare, merge_at, suggest_at = _resolution(data.get("resolution"), kind, problems)
        return cls(
            identity=identity,
            functional=functional,
            functional_edge=functional_edge,
            half_life_days=_positive_days(data, "half_life_days", problems),
            ttl_days=_positive_days(data, "ttl_days", problems),
            rank_weight=rank_weight,
            compare=compare,
            merge_at=merge_at,
            suggest_at=suggest_at,
        )

    def to_dict(self, kind: TypeKind) -> dict[str, Any]:
        """The settings as a type file spells them (every key, defaults included)."""
        data: dict[str, Any] = {}
        if kind == "node":
            data["identity"] = list(self.identity)
            data["functional"] = list(self.functional)
            data["resolution"] = {
                "compare": dict(self.compare),
                "merge_at": self.merge_at,
                "suggest_at": self.suggest_at,
            }
        else:
            data["functional"] = self.functional_edge
        data["half_life_days"] = self.half_life_days
        data["ttl_days"] = self.ttl_days
        data["rank_weight"] = self.rank_weight
        return data

    def stored(self, kind: TypeKind) -> dict[str, Any] | None:
        """The value of the type row's ``upkeep`` column: ``None`` for the defaults."""
        return None if self.is_default else self.to_dict(kind)

    @classmethod
    def from_stored(cls, value: Mapping[str, Any] | None, kind: TypeKind) -> UpkeepSettings:
        """The settings of a type row (``None``: the defaults); stored rows were validated."""
        if not value:
            return cls()
        return cls.from_mapping(value, kind, [])

    def problems(self, properties: Mapping[str, Any]) -> list[str]:
        """Settings naming properties ``properties`` (the type's schema) does not declare."""
        declared = set(declared_property_names(properties))
        return [
            f"{field_name} names property {name!r} the schema lacks (declare it under "
            f"`properties` or drop it from `{field_name}`)"
            for field_name, names in (
                ("identity", self.identity),
                ("functional", self.functional),
                ("resolution.compare", tuple(prop for prop, _ in self.compare)),
            )
            for name in names
            if name not in declared
        ]


def _resolution(
    value: Any, kind: TypeKind | None, problems: list[str]
) -> tuple[tuple[tuple[str, str], ...], float | None, float | None]:
    """``resolution`` of a type file: ``{compare: {property: comparison}, merge_at: p,
    suggest_at: p}``, all optional (entity resolution's hints for the type's nodes)."""
    if value is None:
        return (), None, None
    if kind == "edge" or not isinstance(value, Mapping):
        problems.append(
            "`resolution` is for node types: {compare: {property: "
            f"{'|'.join(COMPARISONS)}}}, merge_at: 0-1, suggest_at: 0-1}}, not {value!r}"
        )
        return (), None, None
    unknown = sorted(set(value) - set(_RESOLUTION_KEYS))
    if unknown:
        problems.append(
            f"`resolution` takes {', '.join(_RESOLUTION_KEYS)}, not {', '.join(unknown)}"
        )
    compare: list[tuple[str, str]] = []
    given = value.get("compare") or {}
    if not isinstance(given, Mapping):
        problems.append("`resolution.compare` maps property names to comparisons")
        given = {}
    for prop, how in given.items():
        if how not in COMPARISONS:
            problems.append(
                f"`resolution.compare` of {prop!r} must be one of {', '.join(COMPARISONS)}, "
                f"not {how!r}"
            )
        else:
            compare.append((str(prop), str(how)))
    chances: list[float | None] = []
    for key in ("merge_at", "suggest_at"):
        chance = value.get(key)
        if chance is not None and (not _is_number(chance) or not 0 < chance < 1):
            problems.append(f"`resolution.{key}` must be a probability above 0 and below 1")
            chance = None
        chances.append(None if chance is None else float(chance))
    merge_at, suggest_at = chances
    if merge_at is not None and suggest_at is not None and suggest_at > merge_at:
        problems.append("`resolution.suggest_at` must not be above `merge_at`")
    return tuple(sorted(compare)), merge_at, suggest_at


def _functional(
    value: Any, kind: TypeKind | None, problems: list[str]
) -> tuple[tuple[str, ...], bool]:
    """``functional`` of a type file: a property list for node types, a bool for edge types."""
    if value is None:
        return (), False
    if kind == "edge":
        if isinstance(value, bool):
            return (), value
        problems.append(
            "`functional` of an edge type must be true or false (true: at most one current "
            f"edge of it per source node), not {value!r}"
        )
        return (), False
    if isinstance(value, bool):
        problems.append(
            "`functional` of a node type lists its single-valued properties (e.g. [ceo]); "
            "true/false is for edge types"
        )
        return (), False
    return _property_list(value, "functional", problems), False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive_days(data: Mapping[str, Any], key: str, problems: list[str]) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not _is_number(value) or value <= 0:
        problems.append(
            f"`{key}` must be a number of days greater than 0, or null (never), not {value!r}"
        )
        return None
    return float(value)


def _property_list(value: Any, key: str, problems: list[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"`{key}` must be a property name or a list of them, not {value!r}")
        return ()
    return tuple(dict.fromkeys(value))


class TypeRejectedError(KgotError):
    """A type definition broke one of the rules; nothing was stored.

    Attributes:
        problems: one line per broken rule, each naming where (JSON path) and what to change.
    """

    exit_code = 2

    def __init__(self, name: str, problems: Sequence[str]) -> None:
        self.type_name = name
        self.problems = list(problems)
        super().__init__(f"type {name!r} rejected: " + "; ".join(self.problems))


@dataclass(frozen=True)
class TypeSpec:
    """What a user, a seed file or the agent proposes as a type.

    Attributes:
        kind: ``"node"`` or ``"edge"``.
        name: PascalCase for nodes (``Company``), snake_case for edges (``works_for``).
        description: what the type means; shown to the model, must not be empty.
        properties: JSON Schema (Draft 2020-12) for the properties object.
        example: example properties, validated against ``properties``.
        source_types: node types an edge may start from (empty = any).
        target_types: node types an edge may point to (empty = any).
        upkeep: how memory upkeep treats the type's facts (identity, functional properties,
            half-life, time to live, rank weight).
    """

    kind: TypeKind
    name: str
    description: str
    properties: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    example: Mapping[str, Any] | None = None
    source_types: tuple[str, ...] = ()
    target_types: tuple[str, ...] = ()
    upkeep: UpkeepSettings = field(default_factory=UpkeepSettings)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, kind: TypeKind | None = None) -> TypeSpec:
        """Build a spec from parsed JSON/YAML.

        ``kind`` (``"node"``/``"edge"``) comes from the mapping or, for sections of a seed file,
        from the argument. Edges accept ``source``/``target`` (or ``source_types``/
        ``target_types``) as a name or a list of names.

        Raises:
            TypeRejectedError: the mapping is not shaped like a type definition.
        """
        if not isinstance(data, Mapping):
            raise TypeRejectedError("?", [f"a type definition must be an object, got {data!r}"])
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise TypeRejectedError(
                "?", ["every type needs a `name` (PascalCase node type or snake_case edge type)"]
            )
        problems = [
            f"unknown field {key!r} (allowed: {', '.join(sorted(_SPEC_KEYS))})"
            for key in data
            if key not in _SPEC_KEYS
        ]
        declared = data.get("kind", kind)
        if declared is None:
            problems.append(
                "`kind` is missing: set it to 'node' or 'edge' (or list the type under "
                "node_types / edge_types)"
            )
        elif declared not in ("node", "edge"):
            problems.append(f"`kind` must be 'node' or 'edge', not {declared!r}")
        description = data.get("description", "")
        if not isinstance(description, str):
            problems.append("`description` must be a string")
            description = ""
        properties = data.get("properties", {"type": "object"})
        if not isinstance(properties, Mapping):
            problems.append('`properties` must be a JSON Schema object (e.g. {"type": "object"})')
            properties = {"type": "object"}
        example = data.get("example")
        if example is not None and not isinstance(example, Mapping):
            problems.append("`example` must be an object of example properties")
            example = None
        sources = _name_list(data, "source", "source_types", problems)
        targets = _name_list(data, "target", "target_types", problems)
        if declared == "node" and (sources or targets):
            problems.append("only edge types take `source`/`target` node types")
        upkeep = UpkeepSettings.from_mapping(
            data, declared if declared in ("node", "edge") else None, problems
        )
        if problems:
            raise TypeRejectedError(name, problems)
        return cls(
            kind=declared,
            name=name,
            description=description,
            properties=dict(properties),
            example=dict(example) if example is not None else None,
            source_types=sources,
            target_types=targets,
            upkeep=upkeep,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
            "properties": dict(self.properties),
        }
        if self.example is not None:
            data["example"] = dict(self.example)
        if self.kind == "edge":
            data["source"] = list(self.source_types)
            data["target"] = list(self.target_types)
        data.update(self.upkeep.to_dict(self.kind))
        return data


def _name_list(
    data: Mapping[str, Any], short: str, long: str, problems: list[str]
) -> tuple[str, ...]:
    value = data.get(short, data.get(long))
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"`{short}` must be a node type name or a list of them")
        return ()
    return tuple(dict.fromkeys(value))


def spec_problems(spec: TypeSpec, known_node_types: Collection[str] | None = None) -> list[str]:
    """Every rule ``spec`` breaks by itself (empty when it may be stored).

    Pure and possibly slow (it compiles the schema and validates the example), so the store
    runs it *before* taking any lock; what depends on the database — the name being new where
    the type would live, edge ends naming existing node types — is checked under the lock
    (:func:`edge_end_problems`).

    Args:
        spec: the proposed type.
        known_node_types: when given, also check the edge ends against these node types.
    """
    problems: list[str] = []
    pattern, style, sample = (
        (NODE_NAME, "PascalCase", "Company")
        if spec.kind == "node"
        else (EDGE_NAME, "snake_case", "works_for")
    )
    if not pattern.match(spec.name) or len(spec.name) > MAX_NAME_LENGTH:
        problems.append(
            f"{spec.kind} type names must be {style} (like {sample!r}), at most "
            f"{MAX_NAME_LENGTH} characters; got {spec.name!r}"
        )
    if not spec.description.strip():
        problems.append("the description is empty (say what the type means and when to use it)")
    problems.extend(schema_problems(spec.properties, spec.kind))
    problems.extend(spec.upkeep.problems(spec.properties))
    if spec.example is not None and not problems:
        problems.extend(example_problems(spec.properties, spec.example))
    if known_node_types is not None:
        problems.extend(edge_end_problems(spec, known_node_types))
    return problems


def edge_end_problems(spec: TypeSpec, known_node_types: Collection[str]) -> list[str]:
    """Edge ends of ``spec`` that name no visible node type."""
    problems: list[str] = []
    for role, names in (("source", spec.source_types), ("target", spec.target_types)):
        for name in names:
            if name not in known_node_types:
                problems.append(
                    f"{role} node type {name!r} does not exist (create it first or use one of: "
                    f"{_some(sorted(known_node_types))})"
                )
    return problems


@dataclass(frozen=True)
class TypeDef:
    """A stored type, one version of it.

    Attributes:
        spec: the definition.
        id: row id (unique per version).
        version: 1 for the first definition, +1 per change.
        scope: the entity that owns the type, ``None`` for a global type.
        created_by: ``system`` (seed), ``user`` (CLI/API) or ``agent`` (type tools).
        justification: why the type was added (required from the agent).
        run_id: the run that created it, if any.
        created_at: when this version was stored.
    """

    spec: TypeSpec
    id: int
    version: int
    scope: str | None
    created_by: Creator
    justification: str = ""
    run_id: str | None = None
    created_at: datetime | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> TypeKind:
        return self.spec.kind

    @property
    def upkeep(self) -> UpkeepSettings:
        return self.spec.upkeep

    @cached_property
    def validator(self) -> Any:
        return make_validator(self.spec.properties)

    def property_problems(self, properties: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """``(json_path, message, rule)`` for each way ``properties`` breaks the schema.

        Never raises for any JSON value: validation that cannot end (a ``$ref`` cycle in a
        type stored before such cycles were refused, values nested too deeply) or a reference
        that does not resolve is reported as a violation.
        """
        try:
            errors = sorted(self.validator.iter_errors(properties), key=error_order)
        except RecursionError:
            return [("$", cycle_message(), "finite validation")]
        except Unresolvable as error:
            return [("$", f"the type's schema has a broken reference ({error})", "$ref")]
        return [(error.json_path, error.message, str(error.validator)) for error in errors]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.spec.to_dict(),
            "version": self.version,
            "scope": self.scope or "global",
            "created_by": self.created_by,
            "justification": self.justification,
            "run_id": self.run_id,
            "created_at": iso(self.created_at),
        }


@dataclass(frozen=True)
class TypeCatalog:
    """The types visible to one entity: its own plus the global ones it does not shadow."""

    node_types: Mapping[str, TypeDef]
    edge_types: Mapping[str, TypeDef]

    def get(self, kind: TypeKind, name: str) -> TypeDef | None:
        return (self.node_types if kind == "node" else self.edge_types).get(name)

    def __len__(self) -> int:
        return len(self.node_types) + len(self.edge_types)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_types": [t.to_dict() for t in self.node_types.values()],
            "edge_types": [t.to_dict() for t in self.edge_types.values()],
        }

    def render_for_prompt(self, max_tokens: int, *, focus: Collection[str] = ()) -> str:
        """The types as prompt text within ``max_tokens`` (kgot's conservative estimate).

        Every type gets the most detail the budget allows, in priority order: types named in
        ``focus`` (e.g. labels already in the graph) first, then node types, then edge types.
        Detail levels: full (description, required and optional properties, example), without
        the example, a short description, the name alone. When even the names do not fit, the
        text ends with how many types were left out.
        """
        ordered = [
            *_focus_first(self.node_types, focus),
            *_focus_first(self.edge_types, focus),
        ]
        ordered.sort(key=lambda t: t.name not in focus)  # stable: focus first, kinds kept
        levels = ("full", "no_example", "short", "name")
        variants = {t.id: [_entry(t, level) for level in levels] for t in ordered}
        costs = {key: [count_tokens(text) for text in texts] for key, texts in variants.items()}
        headers = count_tokens("Node types:\nEdge types:") + 2  # "(none)" for an empty section
        floor = len(levels) - 1
        chosen = {t.id: floor for t in ordered}
        spent = headers + sum(costs[t.id][floor] for t in ordered)
        if spent > max_tokens:
            return _names_within(ordered, max_tokens)
        # Focus types first get the most detail that fits, then every type is upgraded one
        # level at a time, in priority order, while the budget allows.
        for type_def in ordered:
            if type_def.name not in focus:
                break
            for level in range(floor):
                extra = costs[type_def.id][level] - costs[type_def.id][floor]
                if spent + extra <= max_tokens:
                    chosen[type_def.id] = level
                    spent += extra
                    break
        for level in range(floor - 1, -1, -1):
            for type_def in ordered:
                extra = costs[type_def.id][level] - costs[type_def.id][chosen[type_def.id]]
                if chosen[type_def.id] == level + 1 and spent + extra <= max_tokens:
                    chosen[type_def.id] = level
                    spent += extra
        nodes = [variants[t.id][chosen[t.id]] for t in ordered if t.kind == "node"]
        edges = [variants[t.id][chosen[t.id]] for t in ordered if t.kind == "edge"]
        return "\n".join(
            [
                "Node types:" if nodes else "Node types: (none)",
                *nodes,
                "Edge types:" if edges else "Edge types: (none)",
                *edges,
            ]
        )


def _focus_first(types: Mapping[str, TypeDef], focus: Collection[str]) -> list[TypeDef]:
    return sorted(types.values(), key=lambda t: (t.name not in focus, t.name))


def _entry(type_def: TypeDef, detail: str) -> str:
    spec = type_def.spec
    head = f"- {spec.name}"
    if spec.kind == "edge":
        sources = " | ".join(spec.source_types) or "any"
        targets = " | ".join(spec.target_types) or "any"
        head += f" ({sources} -> {targets})"
    if detail == "name":
        return head
    description = " ".join(spec.description.split())
    if detail == "short":
        return f"{head}: {_clip(description, 80)}"
    required, optional, closed = describe_properties(spec.properties)
    parts = [f"{head}: {description}"]
    parts.append(f"  required: {', '.join(required) or 'none'}")
    if optional:
        parts.append(f"  optional: {', '.join(optional)}" + ("" if closed else ", …"))
    elif not closed:
        parts.append("  optional: any")
    if detail == "full" and spec.example:
        parts.append(f"  example: {json.dumps(spec.example, ensure_ascii=False)}")
    return "\n".join(parts)


def describe_properties(schema: Mapping[str, Any]) -> tuple[list[str], list[str], bool]:
    """``(required, optional, closed)``: property summaries like ``founded (date-time)`` and
    whether properties beyond the declared ones are refused."""
    found = schema.get("properties")
    declared: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    required_names = [n for n in schema.get("required", []) if isinstance(n, str)]
    required = [_describe(name, declared.get(name, {})) for name in required_names]
    optional = [
        _describe(name, sub) for name, sub in declared.items() if name not in required_names
    ]
    closed = schema.get("additionalProperties") is False or (
        schema.get("unevaluatedProperties") is False
    )
    return required, optional, closed


def _describe(name: str, schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return name
    details: list[str] = []
    if "enum" in schema and isinstance(schema["enum"], list):
        details.append(
            "one of " + "/".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:8])
        )
    elif "const" in schema:
        details.append(f"= {json.dumps(schema['const'], ensure_ascii=False)}")
    else:
        kind = schema.get("format") or schema.get("type")
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        if kind == "array" and isinstance(schema.get("items"), Mapping):
            item = schema["items"].get("format") or schema["items"].get("type")
            kind = f"list of {item}" if item else "list"
        if kind:
            details.append(str(kind))
    for keyword, sign in (("minimum", ">="), ("maximum", "<=")):
        if isinstance(schema.get(keyword), int | float):
            details.append(f"{sign} {schema[keyword]}")
    if isinstance(schema.get("pattern"), str):
        details.append(f"pattern {schema['pattern']}")
    return f"{name} ({', '.join(details)})" if details else name


def _names_within(ordered: Sequence[TypeDef], max_tokens: int) -> str:
    """As many type names as fit (priority order), then how many were left out."""
    names: list[str] = []
    for index, type_def in enumerate(ordered):
        left = len(ordered) - index - 1
        candidate = "Types (names only): " + ", ".join([*names, type_def.name])
        tail = f"\n… {left} more types not shown" if left else ""
        if count_tokens(candidate + tail) > max_tokens:
            break
        names.append(type_def.name)
    text = "Types (names only): " + ", ".join(names)
    if len(names) < len(ordered):
        text += f"\n… {len(ordered) - len(names)} more types not shown"
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _some(names: Sequence[str], limit: int = 30) -> str:
    if not names:
        return "(none)"
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def load_type_file(path: Path) -> list[TypeSpec]:
    """Read type definitions from a JSON or YAML file.

    The file holds one definition, a list of them, or ``{"node_types": [...], "edge_types":
    [...]}`` (the seed format).

    Raises:
        TypeRejectedError: a definition is malformed (names the file and the type).
        KgotError: the file is missing or not valid JSON/YAML.
    """
    from kgot.errors import UsageError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"type file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read type file {path}: {error}") from None
    data = parse_type_document(text, str(path))
    return specs_from_document(data, str(path))


def parse_type_document(text: str, origin: str) -> Any:
    """Parse JSON or YAML text (YAML is a superset, but JSON errors read better as JSON)."""
    from kgot.errors import UsageError

    if origin.endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            if origin.endswith(".json"):
                raise UsageError(
                    f"{origin} is not valid JSON: {error.msg} at line {error.lineno}, "
                    f"column {error.colno}"
                ) from None
    import yaml

    # libyaml's parser where PyYAML was built with it: the pure-Python one takes ~0.25 s for
    # the starter types every new store installs.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "malformed"
        raise UsageError(f"{origin} is not valid YAML: {problem}{where}") from None


def specs_from_document(data: Any, origin: str) -> list[TypeSpec]:
    """Type specs from a parsed seed/type document (see :func:`load_type_file`)."""
    from kgot.errors import UsageError

    items: list[tuple[Any, TypeKind | None]] = []
    if isinstance(data, Mapping) and ("node_types" in data or "edge_types" in data):
        unknown = set(data) - {"node_types", "edge_types"}
        if unknown:
            raise UsageError(
                f"{origin}: unknown top-level keys {sorted(unknown)} (use node_types, edge_types)"
            )
        sections: tuple[tuple[str, TypeKind], ...] = (
            ("node_types", "node"),
            ("edge_types", "edge"),
        )
        for key, kind in sections:
            section = data.get(key) or []
            if not isinstance(section, list):
                raise UsageError(f"{origin}: `{key}` must be a list of type definitions")
            items.extend((item, kind) for item in section)
    elif isinstance(data, Mapping):
        items.append((data, None))
    elif isinstance(data, list):
        items.extend((item, None) for item in data)
    # Neither, or empty: adding "nothing" successfully would hide a wrong or truncated file.
    if not items:
        raise UsageError(
            f"{origin} holds no type definitions (expected an object, a list, or "
            "node_types/edge_types lists)"
        )
    specs: list[TypeSpec] = []
    for item, item_kind in items:
        try:
            specs.append(TypeSpec.from_mapping(item, kind=item_kind))
        except TypeRejectedError as error:
            problems = [f"in {origin}: {p}" for p in error.problems]
            raise TypeRejectedError(error.type_name, problems) from None
    return specs
