"""Checking a changeset against an entity's types, and kgot's reserved metadata attributes.

Graph code may set per-fact metadata through reserved attributes (names starting with ``_``),
which map to columns instead of being stored as properties:

=================  =============================================  ==============================
attribute          meaning                                        column
=================  =============================================  ==============================
``_confidence``    trust in the fact, a number from 0 to 1        ``confidence``
``_source_kind``   ``extracted`` / ``inferred`` / ``ambiguous``   ``source_kind``
``_source_ref``    where the fact came from (URL, file, …)        ``source_ref``
``_expires_at``    RFC 3339 date-time after which it is hidden     ``expires_at``
=================  =============================================  ==============================

Absent attributes keep the fact's previous value (or the commit's :class:`Provenance` default
for a new fact). Read-only attributes that :meth:`EntitySession.load_graph` adds on request
(``_created_at``, ``_updated_at``, ``_reinforced_at``, ``_run_id``, ``_corroborations``,
``_version``, ``_type_version``, ``_canonical_id``) are ignored on write. Any other ``_`` name
is refused, so the prefix stays free for later metadata.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kgot.config import DEFAULT_LIMITS, StoreLimits
from kgot.graph_model import (
    Changeset,
    Edge,
    Node,
    cap_problems,
    child_path,
    locate_value_problem,
    oversized_problem,
)
from kgot.persistence.catalog import TypeCatalog, TypeDef
from kgot.persistence.schema import SOURCE_KINDS
from kgot.persistence.type_schema import (
    MAX_VALUE_DEPTH,
    RESERVED_PREFIX,
    RESERVED_PROPERTY_NAMES,
    TYPE_CHECK_SECONDS,
    CheckTimeout,
    check_deadline,
    too_costly_message,
    value_depth_exceeds,
)

WRITABLE_META = ("_confidence", "_source_kind", "_source_ref", "_expires_at")
READ_ONLY_META = (
    "_created_at",
    "_updated_at",
    "_reinforced_at",
    "_run_id",
    "_corroborations",
    "_version",
    "_type_version",
    "_canonical_id",
)
MAX_ID_LENGTH = 512  # PostgreSQL b-tree entries cap near 2.7 kB; ids are keys, not documents
MAX_SOURCE_REF_LENGTH = 2048  # a URL, path or short citation; not the source's text
MAX_PROBLEMS = 40


@dataclass(frozen=True)
class FactMeta:
    """Metadata a write set explicitly (``None`` = not given, keep/derive the value)."""

    confidence: float | None = None
    source_kind: str | None = None
    source_ref: str | None = None
    expires_at: datetime | None = None
    expires_given: bool = False  # `_expires_at: null` clears an expiry


NO_META = FactMeta()


def split_properties(
    properties: Mapping[str, Any], where: str, problems: list[str], kind: str | None = None
) -> tuple[dict[str, Any], FactMeta]:
    """Separate plain properties from reserved metadata, reporting misuse into ``problems``.

    With ``kind`` (``"node"``/``"edge"``) the names graph files use for the fact itself
    (``id``, ``label``; ``relationship``, ``source``, ``target``, ``key``) are refused too: a
    property of that name would be overwritten on load or make the graph unexportable.
    """
    reserved = RESERVED_PROPERTY_NAMES.get(kind or "", frozenset())
    if all(
        isinstance(key, str) and not key.startswith(RESERVED_PREFIX) and key not in reserved
        for key in properties
    ):
        return dict(properties), NO_META  # the common case, kept cheap for bulk imports
    plain: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for key, value in properties.items():
        if not isinstance(key, str):
            problems.append(f"{where}: property name {key!r} is not a string (rule: names)")
        elif key.startswith(RESERVED_PREFIX):
            if key in WRITABLE_META:
                meta[key] = value
            elif key not in READ_ONLY_META:
                problems.append(
                    f"{where}: property {key!r} uses the reserved '_' prefix (rule: reserved "
                    f"names; writable metadata is {', '.join(WRITABLE_META)})"
                )
        elif key in reserved:
            problems.append(
                f"{where}: property {key!r} is reserved for the {kind} itself (rule: reserved "
                f"names: {', '.join(sorted(reserved))}; rename it, e.g. {key}_value)"
            )
        else:
            plain[key] = value
    return plain, _parse_meta(meta, where, problems)


def _parse_meta(meta: Mapping[str, Any], where: str, problems: list[str]) -> FactMeta:
    confidence = meta.get("_confidence")
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        problems.append(f"{where}: `_confidence` must be a number from 0 to 1, got {confidence!r}")
        confidence = None
    source_kind = meta.get("_source_kind")
    if source_kind is not None and source_kind not in SOURCE_KINDS:
        problems.append(
            f"{where}: `_source_kind` must be one of {', '.join(SOURCE_KINDS)}, got {source_kind!r}"
        )
        source_kind = None
    source_ref = meta.get("_source_ref")
    if source_ref is not None and not isinstance(source_ref, str):
        problems.append(f"{where}: `_source_ref` must be a string, got {source_ref!r}")
        source_ref = None
    elif source_ref is not None and len(source_ref) > MAX_SOURCE_REF_LENGTH:
        problems.append(
            f"{where}: `_source_ref` is {len(source_ref):,} characters; give the URL, file or a "
            f"short citation (at most {MAX_SOURCE_REF_LENGTH:,}), not the source's text"
        )
        source_ref = None
    expires_at = None
    if meta.get("_expires_at") is not None:
        expires_at = parse_timestamp(meta["_expires_at"])
        if expires_at is None:
            problems.append(
                f"{where}: `_expires_at` must be an RFC 3339 date-time with a time zone "
                f"(e.g. 2030-01-31T00:00:00Z), got {meta['_expires_at']!r}"
            )
    return FactMeta(
        confidence=float(confidence) if confidence is not None else None,
        source_kind=source_kind,
        source_ref=source_ref,
        expires_at=expires_at,
        expires_given="_expires_at" in meta,
    )


def parse_timestamp(value: Any) -> datetime | None:
    """An aware UTC datetime from an RFC 3339 string (``None`` if it is not one)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else None


def encode_properties(
    properties: Mapping[str, Any],
    where: str,
    problems: list[str],
    max_property_bytes: int = DEFAULT_LIMITS.max_property_bytes,
) -> str | None:
    """The properties as JSON text when they can be stored identically on SQLite and
    PostgreSQL and checkpointed; else ``None``, with each problem (and its JSON path) added to
    ``problems``."""
    too_deep = value_depth_exceeds(properties)
    if too_deep is not None:
        problems.append(
            f"{where} at {too_deep[:120]}: value nests deeper than {MAX_VALUE_DEPTH} levels "
            "(rule: JSON nesting; flatten it or store it as a string)"
        )
        return None
    text: str | None
    try:
        text = json.dumps(properties, allow_nan=False, ensure_ascii=False)
        size = len(text.encode("utf-8"))  # lone surrogates fail here
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        text, size = None, 0  # the walk below finds what and where
    # Serialising is fast C code; only when it fails, or the text holds a digit run long enough
    # for an integer out of range, is the value walked in Python to find the culprit's path.
    if text is None or _LONG_DIGIT_RUN.search(text):
        found = locate_value_problem(properties, "$")
        if found is not None:
            path, why = found
            problems.append(f"{where} at {path[:120]}: {why} (rule: JSON values)")
            return None
    if text is None:
        problems.append(f"{where}: properties are not plain JSON (rule: JSON values)")
        return None
    if "\\u0000" in text:
        problems.append(f"{where}: a string contains a NUL character (rule: no NUL in text)")
        return None
    if size > max_property_bytes:
        oversized = _oversized_properties(properties, max_property_bytes)
        problems.extend(f"{where} at {path}: {why}" for path, why in oversized)
        if oversized:
            return None
    return text


_LONG_DIGIT_RUN = re.compile(r"\d{19}")  # 2**63 has 19 digits: shorter integers are in range


def _oversized_properties(properties: Mapping[str, Any], limit: int) -> list[tuple[str, str]]:
    found = []
    for name, value in properties.items():
        why = oversized_problem(value, limit)
        if why is not None:
            found.append((child_path("$", name)[:120], why))
    return found


def node_where(node: Node) -> str:
    return f"node {node.id!r} ({node.label})"


def edge_where(edge: Edge) -> str:
    source, target, key = edge.ident
    suffix = "" if key == edge.relationship else f" key {key!r}"
    return f"edge {source!r} -[{edge.relationship}]-> {target!r}{suffix}"


# Schema problems of facts already checked, by (type row id, properties JSON text): what
# `EntitySession.check` found, for the `commit` of the same changeset that usually follows.
SchemaMemo = dict[tuple[int, str], list[tuple[str, str, str]]]


def content_problems(
    changeset: Changeset,
    catalog: TypeCatalog,
    *,
    limits: StoreLimits = DEFAULT_LIMITS,
    memo: SchemaMemo | None = None,
) -> list[str]:
    """What the changeset breaks by itself, given the types: structure, ids, metadata,
    property values (and their size) and their JSON Schemas. Needs no database access, so
    commits run it before taking the entity's lock (a slow schema never holds other writers
    up).

    Checking stops at ``limits.check_seconds``: the fact being checked then is reported (its
    type's schema makes too much work of it) and nothing after it is checked.

    Args:
        memo: schema problems of facts checked before, by type id and properties text; facts
            found there are not validated again, and what is validated is added.
    """
    problems: list[str] = []
    problems.extend(_structure_problems(changeset))
    check = _FactCheck(catalog, limits, {} if memo is None else memo)
    where = ""
    started = time.monotonic()
    try:
        with check_deadline(limits.check_seconds):
            for node in (*changeset.added_nodes, *changeset.changed_nodes):
                where = node_where(node)
                problems.extend(check.node(node, where))
            for edge in (*changeset.added_edges, *changeset.changed_edges):
                where = edge_where(edge)
                problems.extend(check.edge(edge, where))
    except CheckTimeout:
        if time.monotonic() - started < limits.check_seconds:  # this fact alone took too long
            problems.append(
                f"{where}: {too_costly_message(TYPE_CHECK_SECONDS)}; nothing after it was checked"
            )
        else:
            problems.append(
                f"{where}: {too_costly_message(limits.check_seconds)}; nothing after it was "
                "checked (the cap is the setting store.check_seconds)"
            )
    return capped(problems)


def link_problems(
    changeset: Changeset,
    catalog: TypeCatalog,
    existing_labels: Mapping[str, str],
    *,
    missing: list[tuple[str, str]],
) -> list[str]:
    """Edge ends that have a type the edge type does not allow; ends that do not exist are
    collected in ``missing``.

    Args:
        changeset: the proposed change.
        catalog: the types visible to the entity.
        existing_labels: label of each current node the changeset's edges refer to but does not
            itself add, change or remove.
        missing: missing endpoints are collected here as ``(where, node id)`` (the caller
            decides whether each is a conflict or a mistake).
    """
    problems: list[str] = []
    labels = dict(existing_labels)
    for node_id in changeset.removed_nodes:
        labels.pop(node_id, None)
    for node in (*changeset.added_nodes, *changeset.changed_nodes):
        labels[node.id] = node.label
    for edge in (*changeset.added_edges, *changeset.changed_edges):
        problems.extend(edge_link_problems(edge, catalog, labels, missing=missing))
    return problems


def capped(problems: list[str]) -> list[str]:
    """At most ``MAX_PROBLEMS`` problems, then a line counting the rest."""
    return cap_problems(problems, MAX_PROBLEMS)


def _structure_problems(changeset: Changeset) -> list[str]:
    problems: list[str] = []
    seen: dict[str, str] = {}
    for verb, ids in (
        ("added", (n.id for n in changeset.added_nodes)),
        ("changed", (n.id for n in changeset.changed_nodes)),
        ("removed", changeset.removed_nodes),
    ):
        for node_id in ids:
            if node_id in seen:
                problems.append(
                    f"node {node_id!r} is both {seen[node_id]} and {verb} in one changeset "
                    "(rule: one change per node)"
                )
            seen[node_id] = verb
    seen_edges: dict[tuple[str, str, str], str] = {}
    for verb, idents in (
        ("added", (e.ident for e in changeset.added_edges)),
        ("changed", (e.ident for e in changeset.changed_edges)),
        ("removed", changeset.removed_edges),
    ):
        for ident in idents:
            if ident in seen_edges:
                problems.append(
                    f"edge {ident[0]!r} -> {ident[1]!r} key {ident[2]!r} is both "
                    f"{seen_edges[ident]} and {verb} in one changeset (rule: one change per edge)"
                )
            seen_edges[ident] = verb
    return problems


class _FactCheck:
    """Checks facts one by one against the catalog's types (see :func:`content_problems`)."""

    def __init__(self, catalog: TypeCatalog, limits: StoreLimits, memo: SchemaMemo) -> None:
        self.catalog = catalog
        self.limits = limits
        self.memo = memo

    def node(self, node: Node, where: str) -> list[str]:
        """What ``node`` breaks by itself: id, metadata, type, property values and schema."""
        problems: list[str] = []
        if not isinstance(node.id, str) or not node.id.strip():
            problems.append(f"node {node.id!r}: ids must be non-empty strings (rule: id)")
        elif len(node.id) > MAX_ID_LENGTH:
            problems.append(
                f"node {node.id[:40]!r}…: id is {len(node.id)} characters, at most "
                f"{MAX_ID_LENGTH} (rule: id length; put long text in a property)"
            )
        plain, _meta = split_properties(node.properties, where, problems, "node")
        types = self.catalog.node_types
        self._against_type(plain, where, "node", node.label, types, problems=problems)
        return problems

    def edge(self, edge: Edge, where: str) -> list[str]:
        """What ``edge`` breaks by itself: key, metadata, type, property values and schema."""
        problems: list[str] = []
        _source, _target, key = edge.ident
        if not key.strip() or len(key) > MAX_ID_LENGTH:
            problems.append(
                f"{where}: edge keys must be non-empty strings of at most {MAX_ID_LENGTH} "
                "characters (rule: key)"
            )
        plain, _meta = split_properties(edge.properties, where, problems, "edge")
        types = self.catalog.edge_types
        self._against_type(plain, where, "edge", edge.relationship, types, problems=problems)
        return problems

    def _against_type(
        self,
        plain: dict[str, Any],
        where: str,
        kind: str,
        type_name: str,
        types: Mapping[str, TypeDef],
        *,
        problems: list[str],
    ) -> None:
        """Add what ``plain`` (properties without metadata) breaks: an unknown type, values
        that cannot be stored, or the type's schema (each problem with its JSON path and
        rule)."""
        type_def = types.get(type_name)
        if type_def is None:
            problems.append(unknown_type_message(where, kind, type_name, types))
            return
        text = encode_properties(plain, where, problems, self.limits.max_property_bytes)
        if text is None:
            return
        found = self.memo.get((type_def.id, text))
        if found is None:
            # One fact gets as long as a new type's example (a schema that takes longer for
            # one value is broken, not busy); the whole change gets `check_seconds`. The
            # validator is built before the clock starts: building it costs up to a second
            # once per type and process (format checkers load), which a busy machine can
            # stretch past the deadline, and it is no measure of the value.
            _ = type_def.validator
            with check_deadline(TYPE_CHECK_SECONDS):
                found = type_def.property_problems(plain)
            self.memo[(type_def.id, text)] = found
        problems.extend(
            f"{where} at {path}: {_clip(message)} (rule: {rule})" for path, message, rule in found
        )


def _clip(message: str, limit: int = 300) -> str:
    """jsonschema's messages quote the value checked, which may be a long text or array."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


def edge_link_problems(
    edge: Edge,
    catalog: TypeCatalog,
    labels: Mapping[str, str],
    *,
    missing: list[tuple[str, str]],
) -> list[str]:
    """Ends of ``edge`` of a node type its type does not allow; ends missing from ``labels``
    are collected in ``missing``."""
    where = edge_where(edge)
    problems: list[str] = []
    for role, node_id in (("source", edge.source), ("target", edge.target)):
        if node_id not in labels:
            missing.append((f"{where}: {role} node {node_id!r}", node_id))
    type_def = catalog.edge_types.get(edge.relationship)
    if type_def is None:
        return problems
    for role, node_id, allowed in (
        ("source", edge.source, type_def.spec.source_types),
        ("target", edge.target, type_def.spec.target_types),
    ):
        label = labels.get(node_id)
        if allowed and label is not None and label not in allowed:
            problems.append(
                f"{where}: {role} {node_id!r} is labelled {label}, but {edge.relationship} "
                f"{'starts at' if role == 'source' else 'points to'} "
                f"{' or '.join(allowed)} (rule: {role} types)"
            )
    return problems


def unknown_type_message(where: str, kind: str, name: str, known: Iterable[str]) -> str:
    names = sorted(known)
    shown = ", ".join(names[:25]) + (f", … ({len(names) - 25} more)" if len(names) > 25 else "")
    word = "label" if kind == "node" else "relationship"
    # No tool named: the agent's is create_node_type, an MCP client's propose_type; each is
    # told its own in its instructions
    return (
        f"{where}: {word} {name!r} is not a known {kind} type (rule: typed {kind}s); use one of "
        f"{shown or '(none)'}, or propose a new {kind} type first"
    )
