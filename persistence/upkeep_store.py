"""The store side of memory upkeep: merges, closing facts, fact use and the curation queue.

Each function runs inside a transaction its :class:`~kgot.persistence.EntitySession` method
opened (writes with the entity locked, so they take turns with its commits) and touches only
that entity's rows. The decisions — which nodes are one thing, which facts expired — are made
by :mod:`kgot.memory`; this module only records them, atomically and with history kept.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, insert, select, update

from kgot.errors import ChangesetError, UsageError
from kgot.graph_model import Changeset, Node
from kgot.persistence.catalog import TypeCatalog
from kgot.persistence.context import CommitConflictError, Provenance, View
from kgot.persistence.facts import FactKey, key_from_stored, split_keys, stored_key
from kgot.persistence.planner import chunks, source_key
from kgot.persistence.schema import SUGGESTION_KINDS, SUGGESTION_STATUSES, TABLES
from kgot.persistence.timeutil import as_utc, iso, utc_now

_nodes = TABLES.nodes
_edges = TABLES.edges

RETRIEVAL_BOOST = 0.10  # strength a fact gains each time it is retrieved into a used answer
GOOD_FEEDBACK_BOOST = 0.20  # strength a fact gains from positive feedback
# Columns a fact row's next version copies unchanged (provenance, trust, counters, lifetime).
_KEPT = (
    "confidence",
    "source_kind",
    "run_id",
    "step",
    "tool_call",
    "source_ref",
    "corroborations",
    "created_at",
    "reinforced_at",
    "expires_at",
    "sources",
    "type_version",
)


class SuggestionNotFoundError(UsageError):
    """No suggestion with that id in this entity (another entity's ids are not visible)."""


@dataclass(frozen=True)
class FactUse:
    """How a fact was used, kept apart from its versions (reads write no fact rows).

    Attributes:
        strength: 0 to 1; +0.10 per retrieval, +0.20 per positive feedback, capped at 1.
        uses: retrievals recorded.
        good: positive feedback received.
        bad: negative feedback received.
        last_used_at: the last retrieval.
    """

    strength: float = 0.0
    uses: int = 0
    good: int = 0
    bad: int = 0
    last_used_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strength": self.strength,
            "uses": self.uses,
            "good": self.good,
            "bad": self.bad,
            "last_used_at": iso(self.last_used_at),
        }


@dataclass(frozen=True)
class Suggestion:
    """A merge or contradiction the rules would not decide, waiting for a person.

    Attributes:
        id: unique in the store, visible only within its entity.
        kind: ``merge`` or ``contradiction``.
        payload: what :mod:`kgot.memory` recorded about it (e.g. the node ids).
        score: 0 to 1, how likely the rules think it is right.
        status: ``open``, ``accepted`` or ``rejected``.
    """

    id: int
    kind: str
    payload: Mapping[str, Any]
    score: float
    status: str
    created_at: datetime | None
    decided_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "payload": dict(self.payload),
            "score": self.score,
            "status": self.status,
            "created_at": iso(self.created_at),
            "decided_at": iso(self.decided_at),
        }


# ---------------------------------------------------------------------------- reading rows


def _alive(row: Any, now: datetime) -> bool:
    return row.expires_at is None or as_utc(row.expires_at) > now


def current_nodes(connection: Connection, entity_id: int, ids: Iterable[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for chunk in chunks(sorted(set(ids))):
        for row in connection.execute(
            select(_nodes).where(
                _nodes.c.entity_id == entity_id,
                _nodes.c.valid_to_version.is_(None),
                _nodes.c.node_id.in_(chunk),
            )
        ):
            rows[row.node_id] = row
    return rows


def current_edges(
    connection: Connection, entity_id: int, idents: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], Any]:
    wanted = sorted(set(idents))
    rows: dict[tuple[str, str, str], Any] = {}
    for chunk in chunks(wanted):
        keys = set(chunk)
        for row in connection.execute(
            select(_edges).where(
                _edges.c.entity_id == entity_id,
                _edges.c.valid_to_version.is_(None),
                _edges.c.source.in_(sorted({s for s, _, _ in chunk})),
                _edges.c.target.in_(sorted({t for _, t, _ in chunk})),
            )
        ):
            ident = (row.source, row.target, row.key)
            if ident in keys:
                rows[ident] = row
    return rows


def incident_edges(connection: Connection, entity_id: int, node_ids: Iterable[str]) -> list[Any]:
    """Current edges with either end in ``node_ids``, oldest first."""
    found: dict[int, Any] = {}
    for column in (_edges.c.source, _edges.c.target):
        for chunk in chunks(sorted(set(node_ids))):
            for row in connection.execute(
                select(_edges).where(
                    _edges.c.entity_id == entity_id,
                    _edges.c.valid_to_version.is_(None),
                    column.in_(chunk),
                )
            ):
                found[row.row_id] = row
    return [found[row_id] for row_id in sorted(found)]


# ---------------------------------------------------------------------------- commits


def record_commit(
    connection: Connection,
    entity_id: int,
    version: int,
    provenance: Provenance,
    *,
    summary: str,
    now: datetime,
) -> None:
    """Move the entity to ``version`` and record the commit that made it."""
    connection.execute(
        update(TABLES.entities)
        .where(TABLES.entities.c.id == entity_id)
        .values(version=version, updated_at=now)
    )
    connection.execute(
        insert(TABLES.commits).values(
            entity_id=entity_id,
            version=version,
            run_id=provenance.run_id or None,
            step=provenance.step,
            tool_call=provenance.tool_call,
            source_ref=provenance.source_ref,
            summary=summary,
            committed_at=now,
            result_key=provenance.result_key,
        )
    )


def _close_rows(
    connection: Connection,
    table: Any,
    row_ids: Sequence[int],
    version: int,
    *,
    now: datetime,
    reason: str,
    **values: Any,
) -> None:
    for chunk in chunks(list(row_ids)):
        connection.execute(
            update(table)
            .where(table.c.row_id.in_(chunk))
            .values(valid_to_version=version, superseded_at=now, closed_reason=reason, **values)
        )


def close_facts(
    connection: Connection,
    *,
    entity_id: int,
    version: int,
    keys: Iterable[Any],
    reason: str,
    provenance: Provenance,
) -> tuple[int, int]:
    """Close the current rows of ``keys`` (a node's current edges with it) for ``reason`` in
    one commit; return ``(new version or version when nothing was current, rows closed)``."""
    node_ids, edge_idents = split_keys(keys)
    nodes = current_nodes(connection, entity_id, node_ids)
    edges = {row.row_id: row for row in current_edges(connection, entity_id, edge_idents).values()}
    for row in incident_edges(connection, entity_id, nodes):
        edges[row.row_id] = row
    if not nodes and not edges:
        return version, 0
    now = utc_now()
    new_version = version + 1
    _close_rows(
        connection, _nodes, [r.row_id for r in nodes.values()], new_version, now=now, reason=reason
    )
    _close_rows(connection, _edges, sorted(edges), new_version, now=now, reason=reason)
    parts = [f"{len(nodes)} node{'s' * (len(nodes) != 1)}"] if nodes else []
    parts += [f"{len(edges)} edge{'s' * (len(edges) != 1)}"] if edges else []
    summary = f"closed {' and '.join(parts)} ({reason})"
    record_commit(connection, entity_id, new_version, provenance, summary=summary, now=now)
    return new_version, len(nodes) + len(edges)


# ---------------------------------------------------------------------------- merges


def _origin(row: Any) -> dict[str, Any]:
    """A fact row's own source, as an entry of another row's ``sources``."""
    return {
        "source_ref": row.source_ref,
        "run_id": row.run_id,
        "source_kind": row.source_kind,
        "confidence": row.confidence,
        "at": iso(row.created_at),
    }


class _Evidence:
    """The sources of one fact while others are joined into it: each distinct source counts
    once, as in a commit's corroboration."""

    def __init__(self, row: Any) -> None:
        self.sources = list(row.sources or [])
        self.count = int(row.corroborations)
        self.known = {source_key(row.source_ref, row.run_id)}
        self.known.update(source_key(s.get("source_ref"), s.get("run_id")) for s in self.sources)

    def join(self, row: Any) -> None:
        for entry in (_origin(row), *(row.sources or [])):
            key = source_key(entry.get("source_ref"), entry.get("run_id"))
            if key is not None and key not in self.known:
                self.known.add(key)
                self.sources.append(entry)
                self.count += 1


def _next_version_row(row: Any, now: datetime, **changes: Any) -> dict[str, Any]:
    values = {column: getattr(row, column) for column in _KEPT}
    values.update(entity_id=row.entity_id, properties=row.properties, updated_at=now)
    values.update(changes)
    return values


def merge_nodes(
    connection: Connection,
    *,
    entity_id: int,
    entity: str,
    version: int,
    view: View,
    catalog: TypeCatalog,
    canonical_id: str,
    alias_ids: Sequence[str],
    provenance: Provenance,
    properties: Mapping[str, Any],
    content_problems: Any,
) -> tuple[int, int]:
    """Merge ``alias_ids`` into ``canonical_id`` in one commit; return ``(new version, rows
    written)``. See :meth:`kgot.persistence.EntitySession.merge_nodes`."""
    aliases = list(dict.fromkeys(alias_ids))
    if not aliases:
        raise UsageError("merge_nodes needs at least one alias node id")
    if canonical_id in aliases:
        raise UsageError(f"node {canonical_id!r} cannot be merged into itself")
    now = utc_now()
    rows = current_nodes(connection, entity_id, [canonical_id, *aliases])
    for node_id in (canonical_id, *aliases):
        row = rows.get(node_id)
        if row is None or not _alive(row, now):
            raise UsageError(f"cannot merge: no current node {node_id!r} in entity {entity!r}")
    stale = [
        f"node {node_id!r}: another writer changed it at version {row.valid_from_version}"
        for node_id, row in rows.items()
        if not view.includes(row.valid_from_version)
    ]
    if stale:
        raise CommitConflictError(stale, version)
    canonical = rows[canonical_id]
    for alias in aliases:
        if rows[alias].label != canonical.label:
            raise UsageError(
                f"cannot merge node {alias!r} ({rows[alias].label}) into {canonical_id!r} "
                f"({canonical.label}): only nodes of one type are merged"
            )
    node = Node(canonical_id, canonical.label, dict(properties))
    problems = content_problems(Changeset(changed_nodes=(node,)), catalog)
    if any(name.startswith("_") for name in properties):
        problems.append(
            f"node {canonical_id!r}: merge properties may not carry metadata (keys starting "
            "with '_'); the canonical node keeps its own"
        )
    if problems:
        raise ChangesetError(problems)
    new_version = version + 1
    type_def = catalog.node_types.get(canonical.label)

    # The canonical node's next version: the caller's properties, the aliases' evidence.
    evidence = _Evidence(canonical)
    for alias in aliases:
        evidence.join(rows[alias])
    new_canonical = _next_version_row(
        canonical,
        now,
        node_id=canonical_id,
        label=canonical.label,
        properties=dict(properties),
        corroborations=evidence.count,
        sources=evidence.sources or None,
        type_version=type_def.version if type_def else canonical.type_version,
        canonical_id=None,
        valid_from_version=new_version,
    )
    _close_rows(connection, _nodes, [canonical.row_id], new_version, now=now, reason="changed")
    _close_rows(
        connection,
        _nodes,
        [rows[alias].row_id for alias in aliases],
        new_version,
        now=now,
        reason="merged",
        canonical_id=canonical_id,
    )
    canonical_row = connection.execute(
        insert(_nodes).returning(_nodes.c.row_id), [new_canonical]
    ).scalar_one()
    links = [{"old_row": rows[a].row_id, "new_row": canonical_row} for a in aliases]
    links.append({"old_row": canonical.row_id, "new_row": canonical_row})

    # Edges: every current edge of an alias moves to the canonical node.
    group = {canonical_id, *aliases}
    moved: list[Any] = []
    occupied: dict[tuple[str, str, str], Any] = {}  # current idents that stay or arrive
    for row in incident_edges(connection, entity_id, group):
        if row.source in aliases or row.target in aliases:
            moved.append(row)
        else:
            occupied[(row.source, row.target, row.key)] = row
    new_edges: list[dict[str, Any]] = []
    replaced_by: list[int] = []  # per new edge: the row it replaces
    replaced_by_new: list[tuple[int, dict[str, Any]]] = []  # moved rows joined into new edges
    joined: dict[int, _Evidence] = {}  # existing edge row -> its evidence with moved ones
    pending: dict[int, _Evidence] = {}  # id() of a new edge's values -> the same
    joined_into: list[tuple[int, int]] = []  # (moved row, existing row it joined)
    dropped = 0
    for row in moved:
        source = canonical_id if row.source in group else row.source
        target = canonical_id if row.target in group else row.target
        if source == target and row.source != row.target:
            dropped += 1  # it linked the merged nodes to each other: now a loop, not a fact
            continue
        ident = (source, target, row.key)
        existing = occupied.get(ident)
        if existing is not None and (existing.relationship, existing.properties) == (
            row.relationship,
            row.properties,
        ):
            # The same edge found from both nodes: one edge, with both rows' evidence.
            if isinstance(existing, dict):
                evidence_of = pending.setdefault(id(existing), _Evidence(_AsRow(existing)))
                evidence_of.join(row)
                existing["corroborations"] = evidence_of.count
                existing["sources"] = evidence_of.sources or None
                replaced_by_new.append((row.row_id, existing))
            else:
                joined.setdefault(existing.row_id, _Evidence(existing)).join(row)
                joined_into.append((row.row_id, existing.row_id))
            continue
        key = row.key
        number = 1
        while (source, target, key) in occupied:
            number += 1
            key = f"{row.key}~{number}"  # another edge holds that identity: a fresh key
        values = _next_version_row(
            row,
            now,
            source=source,
            target=target,
            key=key,
            relationship=row.relationship,
            valid_from_version=new_version,
        )
        occupied[(source, target, key)] = values
        new_edges.append(values)
        replaced_by.append(row.row_id)
    _close_rows(
        connection, _edges, [r.row_id for r in moved], new_version, now=now, reason="merged"
    )
    edge_links: list[dict[str, int]] = []
    if new_edges:
        new_ids = connection.execute(
            insert(_edges).returning(_edges.c.row_id, sort_by_parameter_order=True), new_edges
        ).scalars()
        new_row_of: dict[int, int] = {}
        for old, values, new in zip(replaced_by, new_edges, new_ids, strict=True):
            edge_links.append({"old_row": old, "new_row": new})
            new_row_of[id(values)] = new
        edge_links += [
            {"old_row": old, "new_row": new_row_of[id(values)]} for old, values in replaced_by_new
        ]
    edge_links += [{"old_row": moved_row, "new_row": kept} for moved_row, kept in joined_into]
    existing_updates = [
        {"row": row_id, "count": evidence.count, "sources": evidence.sources or None}
        for row_id, evidence in joined.items()
    ]
    if existing_updates:
        connection.execute(
            update(_edges)
            .where(_edges.c.row_id == bindparam("row"))
            .values(
                corroborations=bindparam("count"),
                sources=bindparam("sources", type_=_edges.c.sources.type),
                reinforced_at=now,
            ),
            existing_updates,
        )
    for table, table_links in ((_nodes, links), (_edges, edge_links)):
        if table_links:
            connection.execute(
                update(table)
                .where(table.c.row_id == bindparam("old_row"))
                .values(superseded_by=bindparam("new_row")),
                table_links,
            )
    names = ", ".join(repr(a) for a in aliases)
    summary = (
        f"merged {names} into {canonical_id!r} ({len(new_edges)} edge"
        f"{'s' * (len(new_edges) != 1)} re-pointed"
        + (
            f", {len(joined_into) + len(replaced_by_new)} joined"
            if joined_into or replaced_by_new
            else ""
        )
        + (f", {dropped} between them closed" if dropped else "")
        + ")"
    )
    record_commit(connection, entity_id, new_version, provenance, summary=summary, now=now)
    written = 2 + 2 * len(aliases) + len(moved) + len(new_edges) + len(existing_updates)
    return new_version, written


class _AsRow:
    """Attribute access to a pending row's values (for :class:`_Evidence`)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        return self._values[name]


def canonical_id(connection: Connection, entity_id: int, node_id: str) -> str | None:
    """Follow merges from ``node_id`` to the current node it is (or was merged into)."""
    seen: set[str] = set()
    now = utc_now()
    current: str | None = node_id
    while current is not None and current not in seen:
        seen.add(current)
        row = connection.execute(
            select(_nodes.c.valid_to_version, _nodes.c.canonical_id, _nodes.c.expires_at)
            .where(_nodes.c.entity_id == entity_id, _nodes.c.node_id == current)
            .order_by(_nodes.c.valid_from_version.desc(), _nodes.c.row_id.desc())
            .limit(1)
        ).first()
        if row is None:
            return None
        if row.valid_to_version is None:
            return current if _alive(row, now) else None
        current = row.canonical_id  # None: removed or closed for another reason
    return None


# ---------------------------------------------------------------------------- fact use


def existing_keys(connection: Connection, entity_id: int, keys: Iterable[Any]) -> list[FactKey]:
    """Those of ``keys`` that name a current fact of the entity, each once, in order."""
    node_ids, edge_idents = split_keys(keys)
    nodes = current_nodes(connection, entity_id, node_ids)
    edges = current_edges(connection, entity_id, edge_idents)
    found: list[FactKey] = [("node", n) for n in node_ids if n in nodes]
    found += [("edge", *ident) for ident in edge_idents if ident in edges]
    return found


def add_use(
    connection: Connection,
    entity_id: int,
    keys: Sequence[FactKey],
    *,
    amount: float,
    use: bool,
    good: int = 0,
    bad: int = 0,
) -> None:
    """Add ``amount`` to each key's strength (capped at 1) and count a use / feedback."""
    table = TABLES.fact_use
    now = utc_now()
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as upsert
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
    for key in keys:
        kind, text = stored_key(key)
        statement = upsert(table).values(
            entity_id=entity_id,
            kind=kind,
            fact_key=text,
            strength=min(1.0, amount),
            uses=int(use),
            good=good,
            bad=bad,
            last_used_at=now if use else None,
        )
        raised = table.c.strength + amount
        changes: dict[str, Any] = {
            "strength": case((raised > 1, 1.0), else_=raised),
            "uses": table.c.uses + int(use),
            "good": table.c.good + good,
            "bad": table.c.bad + bad,
        }
        if use:
            changes["last_used_at"] = now
        connection.execute(
            statement.on_conflict_do_update(
                index_elements=[table.c.entity_id, table.c.kind, table.c.fact_key], set_=changes
            )
        )


def read_use(connection: Connection, entity_id: int, keys: Iterable[Any]) -> dict[FactKey, FactUse]:
    table = TABLES.fact_use
    node_ids, edge_idents = split_keys(keys)
    wanted = [stored_key(("node", n)) for n in node_ids]
    wanted += [stored_key(("edge", *ident)) for ident in edge_idents]
    result: dict[FactKey, FactUse] = {}
    for kind in ("node", "edge"):
        texts = sorted(text for k, text in wanted if k == kind)
        for chunk in chunks(texts):
            for row in connection.execute(
                select(table).where(
                    table.c.entity_id == entity_id,
                    table.c.kind == kind,
                    table.c.fact_key.in_(chunk),
                )
            ):
                result[key_from_stored(row.kind, row.fact_key)] = FactUse(
                    strength=float(row.strength),
                    uses=int(row.uses),
                    good=int(row.good),
                    bad=int(row.bad),
                    last_used_at=as_utc(row.last_used_at),
                )
    return result


def checked_amount(amount: Any) -> float:
    if (
        not isinstance(amount, int | float)
        or isinstance(amount, bool)
        or not math.isfinite(amount)
        or not 0 <= amount <= 1
    ):
        raise UsageError(f"a use amount must be a number from 0 to 1, not {amount!r}")
    return float(amount)


# ---------------------------------------------------------------------------- suggestions


def _payload_key(payload: Mapping[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add_suggestion(
    connection: Connection,
    entity_id: int,
    kind: str,
    payload: Mapping[str, Any],
    score: float,
) -> int:
    """Queue a suggestion; an equal one still open or already rejected is not queued again
    (its id comes back): a person said no once, or has yet to answer."""
    if kind not in SUGGESTION_KINDS:
        raise UsageError(f"suggestion kind {kind!r} is not one of {', '.join(SUGGESTION_KINDS)}")
    if not isinstance(payload, Mapping):
        raise UsageError(f"a suggestion's payload must be an object, not {payload!r}")
    try:
        key = _payload_key(payload)
    except (TypeError, ValueError) as error:
        raise UsageError(f"a suggestion's payload must be JSON: {error}") from None
    if (
        not isinstance(score, int | float)
        or isinstance(score, bool)
        or not math.isfinite(score)
        or not 0 <= score <= 1
    ):
        raise UsageError(f"a suggestion's score must be a number from 0 to 1, not {score!r}")
    table = TABLES.suggestions
    earlier = connection.execute(
        select(table.c.id)
        .where(
            table.c.entity_id == entity_id,
            table.c.kind == kind,
            table.c.payload_key == key,
            table.c.status.in_(("open", "rejected")),
        )
        .order_by(table.c.id)
        .limit(1)
    ).scalar()
    if earlier is not None:
        return int(earlier)
    return int(
        connection.execute(
            insert(table)
            .values(
                entity_id=entity_id,
                kind=kind,
                payload=dict(payload),
                payload_key=key,
                score=float(score),
                status="open",
                created_at=utc_now(),
            )
            .returning(table.c.id)
        ).scalar_one()
    )


def list_suggestions(
    connection: Connection, entity_id: int, status: str | None
) -> list[Suggestion]:
    if status is not None and status not in SUGGESTION_STATUSES:
        raise UsageError(
            f"suggestion status {status!r} is not one of {', '.join(SUGGESTION_STATUSES)}"
        )
    table = TABLES.suggestions
    query = select(table).where(table.c.entity_id == entity_id)
    if status is not None:
        query = query.where(table.c.status == status)
    rows = connection.execute(query.order_by(table.c.score.desc(), table.c.id))
    return [_suggestion(row) for row in rows]


def get_suggestion(
    connection: Connection, entity_id: int, entity: str, suggestion_id: Any
) -> Suggestion:
    table = TABLES.suggestions
    row = None
    if isinstance(suggestion_id, int) and not isinstance(suggestion_id, bool):
        # Scoped by entity: another entity's id reads exactly like an unknown one.
        row = connection.execute(
            select(table).where(table.c.id == suggestion_id, table.c.entity_id == entity_id)
        ).first()
    if row is None:
        raise SuggestionNotFoundError(
            f"no suggestion {suggestion_id} in entity {entity!r} (list them with `kgot memory "
            f"suggestions --entity {entity}`)"
        )
    return _suggestion(row)


def decide(
    connection: Connection, entity_id: int, entity: str, suggestion_id: Any, accepted: bool
) -> Suggestion:
    found = get_suggestion(connection, entity_id, entity, suggestion_id)
    if found.status != "open":
        raise UsageError(
            f"suggestion {found.id} in entity {entity!r} was already {found.status}; only "
            "open suggestions are decided"
        )
    table = TABLES.suggestions
    status = "accepted" if accepted else "rejected"
    now = utc_now()
    connection.execute(
        update(table)
        .where(table.c.id == found.id, table.c.entity_id == entity_id)
        .values(status=status, decided_at=now)
    )
    return Suggestion(
        id=found.id,
        kind=found.kind,
        payload=found.payload,
        score=found.score,
        status=status,
        created_at=found.created_at,
        decided_at=now,
    )


def _suggestion(row: Any) -> Suggestion:
    return Suggestion(
        id=int(row.id),
        kind=row.kind,
        payload=dict(row.payload),
        score=float(row.score),
        status=row.status,
        created_at=as_utc(row.created_at),
        decided_at=as_utc(row.decided_at),
    )
