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
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, insert, select, update

from kgot.errors import ChangesetError, UsageError
from kgot.graph_model import Changeset, Node
from kgot.persistence.catalog import TypeCatalog
from kgot.persistence.context import CommitConflictError, Provenance, View
from kgot.persistence.facts import (
    FactKey,
    checked_key,
    key_from_stored,
    split_keys,
    stored_key,
)
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
        decision: who decided it and why (``{"by": "person" | "model:NAME", "reason": …}``);
            ``None`` while open, or when the decider gave nothing.
    """

    id: int
    kind: str
    payload: Mapping[str, Any]
    score: float
    status: str
    created_at: datetime | None
    decided_at: datetime | None
    decision: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "payload": dict(self.payload),
            "score": self.score,
            "status": self.status,
            "created_at": iso(self.created_at),
            "decided_at": iso(self.decided_at),
            "decision": dict(self.decision) if self.decision is not None else None,
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


@dataclass(frozen=True)
class FactAsRead:
    """A fact as the upkeep pass read it: the pass closes it only while it is still so.

    The pass decides on one read and closes later; a writer may re-state the fact in between.
    A re-statement either writes a new row (a content or metadata change, or a lapsed fact
    written again: the row read is closed already) or updates the row read in place (the
    same fact again: ``reinforced_at`` and, from a new source, ``corroborations``). Either
    makes the decision stale, so the close is conditional on the row as read.

    Attributes:
        version: the row's ``valid_from_version`` as read; ``None`` for a fact the pass found
            hidden by its own expiry (then ``lapsed_at`` is the check, and is required).
        reinforced_at: the row's ``reinforced_at`` as read (``None``: never reinforced).
        corroborations: the row's ``corroborations`` as read.
        lapsed_at: close only while the row's own ``expires_at`` is at or before this moment
            (a re-stated lapsed fact is a new row that is not lapsed).
        strength: the fact's use strength as read; a higher one now (someone used the fact
            meanwhile: no row is written for that) leaves it alone. ``None``: not checked.
    """

    version: int | None = None
    reinforced_at: datetime | None = None
    corroborations: int = 1
    lapsed_at: datetime | None = None
    strength: float | None = None

    def __post_init__(self) -> None:
        if self.version is None and self.lapsed_at is None:
            raise UsageError("a fact as read needs its row's version, or lapsed_at when lapsed")

    def guard(self, table: Any) -> list[Any]:
        """The row conditions, for the closing UPDATE's WHERE clause."""
        if self.version is None:
            assert self.lapsed_at is not None  # __post_init__
            return [table.c.expires_at.is_not(None), table.c.expires_at <= as_utc(self.lapsed_at)]
        reinforced = (
            table.c.reinforced_at.is_(None)
            if self.reinforced_at is None
            else table.c.reinforced_at == as_utc(self.reinforced_at)
        )
        return [
            table.c.valid_from_version == self.version,
            table.c.corroborations == self.corroborations,
            reinforced,
        ]


@dataclass(frozen=True)
class ClosedFacts:
    """What :func:`close_facts_as_read` did.

    Attributes:
        version: the new version, or the version before when nothing was closed.
        closed: each closed fact, with the node id it was closed with (``None``: closed on
            its own). A closed node takes every current edge with it, including edges written
            after the read, so that no current edge hangs on a closed node.
        left: facts asked for that are still current but changed since they were read, each
            with how: ``re-stated`` (a new row, or the row read reinforced or corroborated)
            or ``used`` (its use strength rose); not closed.
    """

    version: int
    closed: dict[FactKey, str | None] = field(default_factory=dict)
    left: dict[FactKey, str] = field(default_factory=dict)


def close_facts_as_read(
    connection: Connection,
    *,
    entity_id: int,
    version: int,
    facts: Mapping[FactKey, FactAsRead | None],
    reason: str,
    provenance: Provenance,
) -> ClosedFacts:
    """Close each fact of ``facts`` whose current row is still as read (``None``: whatever
    it holds), and the current edges of every node closed, for ``reason`` in one commit.

    The row check is in each closing UPDATE's WHERE clause (optimistic concurrency): a fact a
    writer changed since the read is left current, and so are its edges unless they were
    asked for themselves. Runs with the entity locked (the caller's transaction), as every
    commit does, so the UPDATEs and the rows they compare with cannot move apart.
    """
    node_ids, edge_idents = split_keys(facts)
    expected = {checked_key(key): state for key, state in facts.items()}
    node_rows = current_nodes(connection, entity_id, node_ids)
    edge_rows = current_edges(connection, entity_id, edge_idents)
    rows: dict[FactKey, Any] = {("node", n): row for n, row in node_rows.items()}
    rows.update({("edge", *ident): row for ident, row in edge_rows.items()})
    used = _used_since(connection, entity_id, expected, rows)
    now = utc_now()
    new_version = version + 1
    closed: dict[FactKey, str | None] = {}
    for table, kind in ((_nodes, "node"), (_edges, "edge")):
        wanted = {
            key: rows[key] for key in expected if key[0] == kind and key in rows and key not in used
        }
        for row in _close_guarded(
            connection, table, wanted, expected, new_version, now=now, reason=reason
        ):
            closed[_row_key(row)] = None
    closed_nodes = [key[1] for key in closed if key[0] == "node"]
    hanging = [
        row
        for row in incident_edges(connection, entity_id, closed_nodes)
        if _row_key(row) not in closed
    ]
    _close_rows(
        connection, _edges, [row.row_id for row in hanging], new_version, now=now, reason=reason
    )
    ends = set(closed_nodes)
    for row in hanging:
        closed[_row_key(row)] = row.source if row.source in ends else row.target
    left = {
        key: "used" if key in used else "re-stated"
        for key in expected
        if key in rows and key not in closed
    }
    if not closed:
        return ClosedFacts(version, left=left)
    nodes = len(closed_nodes)
    edges = len(closed) - nodes
    parts = [f"{nodes} node{'s' * (nodes != 1)}"] if nodes else []
    parts += [f"{edges} edge{'s' * (edges != 1)}"] if edges else []
    summary = f"closed {' and '.join(parts)} ({reason})"
    if left:
        summary += f"; {len(left)} left: changed since read"
    record_commit(connection, entity_id, new_version, provenance, summary=summary, now=now)
    return ClosedFacts(new_version, closed, left)


def _used_since(
    connection: Connection,
    entity_id: int,
    expected: Mapping[FactKey, FactAsRead | None],
    rows: Mapping[FactKey, Any],
) -> set[FactKey]:
    """Facts whose use strength rose above the strength read. Use is counted in its own
    table by writers that do not lock the entity (a retrieval writes no fact row), so this is
    a check in the same transaction rather than in the UPDATE."""
    checked = {
        key: state.strength
        for key, state in expected.items()
        if state is not None and state.strength is not None and key in rows
    }
    if not checked:
        return set()
    use = read_use(connection, entity_id, checked)
    return {key for key, read in checked.items() if key in use and use[key].strength > read + 1e-9}


def _close_guarded(
    connection: Connection,
    table: Any,
    rows: Mapping[FactKey, Any],
    expected: Mapping[FactKey, FactAsRead | None],
    version: int,
    *,
    now: datetime,
    reason: str,
) -> list[Any]:
    """Close ``rows`` whose state is still the one expected; return the rows closed. Rows
    with the same expected state (most often: written by one commit) share an UPDATE."""
    # The strength is no row condition (_used_since checks it): states that differ only in it
    # share an UPDATE.
    groups: dict[FactAsRead | None, list[int]] = {}
    for key, row in rows.items():
        state = expected[key]
        group = replace(state, strength=None) if state is not None else None
        groups.setdefault(group, []).append(row.row_id)
    identity = (
        [table.c.node_id] if table is _nodes else [table.c.source, table.c.target, table.c.key]
    )
    closed: list[Any] = []
    for state, row_ids in groups.items():
        guard = state.guard(table) if state is not None else []
        for chunk in chunks(sorted(row_ids)):
            closed += connection.execute(
                update(table)
                .where(table.c.row_id.in_(chunk), table.c.valid_to_version.is_(None), *guard)
                .values(valid_to_version=version, superseded_at=now, closed_reason=reason)
                .returning(*identity)
            ).all()
    return closed


def _row_key(row: Any) -> FactKey:
    if "node_id" in row._mapping:
        return ("node", row.node_id)
    return ("edge", row.source, row.target, row.key)


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


class _AsRow:
    """Attribute access to a pending row's values (for :class:`_Evidence`)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        return self._values[name]


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
    written)``. See :meth:`kgot.persistence.EntitySession.merge_nodes`.

    Everything is checked before the first write, so a refused merge writes nothing."""
    aliases = _checked_aliases(canonical_id, alias_ids)
    now = utc_now()
    rows = _rows_to_merge(
        connection,
        [canonical_id, *aliases],
        entity_id=entity_id,
        entity=entity,
        view=view,
        version=version,
        now=now,
    )
    _refuse_other_types(rows, canonical_id, aliases)
    _refuse_bad_properties(
        canonical_id, rows[canonical_id].label, properties, catalog, content_problems
    )
    merge = _Merge(connection, entity_id, canonical_id, tuple(aliases), version + 1, now)
    _write_nodes(merge, rows, properties, catalog)
    plan = _plan_edges(merge)
    _write_edges(merge, plan)
    record_commit(
        connection, entity_id, merge.version, provenance, summary=plan.summary(merge), now=now
    )
    # Node rows: the canonical node's old and new rows, and each alias's row (closed, linked).
    return merge.version, 2 + 2 * len(aliases) + plan.rows_written


# ---------------------------------------------------------------------------- merge checks


def _checked_aliases(canonical_id: str, alias_ids: Sequence[str]) -> list[str]:
    """``alias_ids`` without repeats, refused when empty or holding the canonical node."""
    aliases = list(dict.fromkeys(alias_ids))
    if not aliases:
        raise UsageError("merge_nodes needs at least one alias node id")
    if canonical_id in aliases:
        raise UsageError(f"node {canonical_id!r} cannot be merged into itself")
    return aliases


def _rows_to_merge(
    connection: Connection,
    node_ids: Sequence[str],
    *,
    entity_id: int,
    entity: str,
    view: View,
    version: int,
    now: datetime,
) -> dict[str, Any]:
    """The current rows of ``node_ids``; refused when one is missing or expired, or another
    writer changed one since ``view`` (the merge was decided on what the view showed)."""
    rows = current_nodes(connection, entity_id, node_ids)
    for node_id in node_ids:
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
    return rows


def _refuse_other_types(rows: Mapping[str, Any], canonical_id: str, aliases: Sequence[str]) -> None:
    canonical = rows[canonical_id]
    for alias in aliases:
        if rows[alias].label != canonical.label:
            raise UsageError(
                f"cannot merge node {alias!r} ({rows[alias].label}) into {canonical_id!r} "
                f"({canonical.label}): only nodes of one type are merged"
            )


def _refuse_bad_properties(
    canonical_id: str,
    label: str,
    properties: Mapping[str, Any],
    catalog: TypeCatalog,
    content_problems: Any,
) -> None:
    """Refuse properties that break the canonical node's type or carry ``_`` metadata."""
    node = Node(canonical_id, label, dict(properties))
    problems = content_problems(Changeset(changed_nodes=(node,)), catalog)
    if any(name.startswith("_") for name in properties):
        problems.append(
            f"node {canonical_id!r}: merge properties may not carry metadata (keys starting "
            "with '_'); the canonical node keeps its own"
        )
    if problems:
        raise ChangesetError(problems)


# ---------------------------------------------------------------------------- merge writes


@dataclass(frozen=True)
class _Merge:
    """One checked merge: where it writes, which nodes, and the version and time it writes."""

    connection: Connection
    entity_id: int
    canonical_id: str
    aliases: tuple[str, ...]
    version: int
    now: datetime

    def new_end(self, node_id: str) -> str:
        """Where an edge end lands: any merged node becomes the canonical one."""
        return self.canonical_id if node_id in self.aliases else node_id


def _write_nodes(
    merge: _Merge, rows: Mapping[str, Any], properties: Mapping[str, Any], catalog: TypeCatalog
) -> None:
    """Close the canonical node (``changed``) and the aliases (``merged``, with
    ``canonical_id``) and write the canonical node's next version, which all of them are
    superseded by: the caller's properties, and the aliases' sources as corroborations."""
    canonical = rows[merge.canonical_id]
    alias_rows = [rows[alias] for alias in merge.aliases]
    evidence = _Evidence(canonical)
    for row in alias_rows:
        evidence.join(row)
    type_def = catalog.node_types.get(canonical.label)
    new_canonical = _next_version_row(
        canonical,
        merge.now,
        node_id=merge.canonical_id,
        label=canonical.label,
        properties=dict(properties),
        corroborations=evidence.count,
        sources=evidence.sources or None,
        type_version=type_def.version if type_def else canonical.type_version,
        canonical_id=None,
        valid_from_version=merge.version,
    )
    connection = merge.connection
    # Close old rows first: the partial unique index allows one current row per identity.
    _close_rows(
        connection, _nodes, [canonical.row_id], merge.version, now=merge.now, reason="changed"
    )
    _close_rows(
        connection,
        _nodes,
        [row.row_id for row in alias_rows],
        merge.version,
        now=merge.now,
        reason="merged",
        canonical_id=merge.canonical_id,
    )
    new_row = connection.execute(
        insert(_nodes).returning(_nodes.c.row_id), [new_canonical]
    ).scalar_one()
    _link_superseded(
        connection,
        _nodes,
        [{"old_row": row.row_id, "new_row": new_row} for row in (*alias_rows, canonical)],
    )


class _NewEdge:
    """An alias's edge written again on the canonical node; equal edges of other aliases join
    it (their sources counted as corroborations) instead of becoming edges of their own."""

    def __init__(self, values: dict[str, Any], moved_row: int) -> None:
        self.values = values
        self.replaces = [moved_row]  # the rows it supersedes: its own, then the joined ones
        self._evidence: _Evidence | None = None

    def holds_same_fact(self, row: Any) -> bool:
        return (self.values["relationship"], self.values["properties"]) == (
            row.relationship,
            row.properties,
        )

    def join(self, row: Any) -> None:
        if self._evidence is None:
            self._evidence = _Evidence(_AsRow(self.values))
        self._evidence.join(row)
        self.values["corroborations"] = self._evidence.count
        self.values["sources"] = self._evidence.sources or None
        self.replaces.append(row.row_id)


class _KeptEdge:
    """A current edge that stays where it is (not touching an alias); an equal moved edge
    joins it, so the same edge found from both nodes becomes one edge with both's evidence."""

    def __init__(self, row: Any) -> None:
        self.row = row
        self.joined: list[int] = []  # moved rows superseded by it
        self.evidence: _Evidence | None = None

    def holds_same_fact(self, row: Any) -> bool:
        return (self.row.relationship, self.row.properties) == (row.relationship, row.properties)

    def join(self, row: Any) -> None:
        if self.evidence is None:
            self.evidence = _Evidence(self.row)
        self.evidence.join(row)
        self.joined.append(row.row_id)


@dataclass
class _EdgePlan:
    """What a merge does to the edges, decided before any of them is written."""

    moved: list[Any] = field(default_factory=list)  # current alias edges: all close as merged
    new_edges: list[_NewEdge] = field(default_factory=list)
    kept: list[_KeptEdge] = field(default_factory=list)
    dropped: int = 0  # edges between merged nodes: closed, never turned into loops

    @property
    def joined_kept(self) -> list[_KeptEdge]:
        return [edge for edge in self.kept if edge.joined]

    @property
    def joined(self) -> int:
        """Moved edges that joined an equal edge instead of being written."""
        into_new = sum(len(edge.replaces) - 1 for edge in self.new_edges)
        return into_new + sum(len(edge.joined) for edge in self.kept)

    @property
    def rows_written(self) -> int:
        return len(self.moved) + len(self.new_edges) + len(self.joined_kept)

    def summary(self, merge: _Merge) -> str:
        names = ", ".join(repr(alias) for alias in merge.aliases)
        count = len(self.new_edges)
        details = [f"{count} edge{'s' * (count != 1)} re-pointed"]
        if self.joined:
            details.append(f"{self.joined} joined")
        if self.dropped:
            details.append(f"{self.dropped} between them closed")
        return f"merged {names} into {merge.canonical_id!r} ({', '.join(details)})"


def _plan_edges(merge: _Merge) -> _EdgePlan:
    """Every current edge of an alias moves to the canonical node: it joins an equal edge
    that holds its new identity, takes a fresh key (``key~2``) when another edge holds it, or
    is dropped when it linked the merged nodes to each other."""
    plan = _EdgePlan()
    group = {merge.canonical_id, *merge.aliases}
    occupied: dict[tuple[str, str, str], _NewEdge | _KeptEdge] = {}  # idents that stay/arrive
    for row in incident_edges(merge.connection, merge.entity_id, group):
        if row.source in merge.aliases or row.target in merge.aliases:
            plan.moved.append(row)
        else:
            kept = _KeptEdge(row)
            plan.kept.append(kept)
            occupied[(row.source, row.target, row.key)] = kept
    for row in plan.moved:
        source, target = merge.new_end(row.source), merge.new_end(row.target)
        if source == target and row.source != row.target:
            plan.dropped += 1  # it linked the merged nodes to each other: now a loop, not a fact
            continue
        occupant = occupied.get((source, target, row.key))
        if occupant is not None and occupant.holds_same_fact(row):
            occupant.join(row)
            continue
        key = _free_key(occupied, source, target, row.key)
        values = _next_version_row(
            row,
            merge.now,
            source=source,
            target=target,
            key=key,
            relationship=row.relationship,
            valid_from_version=merge.version,
        )
        new_edge = _NewEdge(values, row.row_id)
        occupied[(source, target, key)] = new_edge
        plan.new_edges.append(new_edge)
    return plan


def _free_key(
    occupied: Mapping[tuple[str, str, str], Any], source: str, target: str, key: str
) -> str:
    """``key``, or ``key~2``, ``key~3``, … when another edge holds that identity."""
    candidate, number = key, 1
    while (source, target, candidate) in occupied:
        number += 1
        candidate = f"{key}~{number}"
    return candidate


def _write_edges(merge: _Merge, plan: _EdgePlan) -> None:
    """Close the moved edges as ``merged``, write the new ones, add the joined evidence to
    the kept edges and point every closed edge at the edge it became."""
    connection = merge.connection
    _close_rows(
        connection,
        _edges,
        [row.row_id for row in plan.moved],
        merge.version,
        now=merge.now,
        reason="merged",
    )
    links: list[dict[str, int]] = []
    if plan.new_edges:
        new_ids = connection.execute(
            insert(_edges).returning(_edges.c.row_id, sort_by_parameter_order=True),
            [edge.values for edge in plan.new_edges],
        ).scalars()
        for edge, new_id in zip(plan.new_edges, new_ids, strict=True):
            links += [{"old_row": old, "new_row": new_id} for old in edge.replaces]
    joined_kept = plan.joined_kept
    for kept in joined_kept:
        links += [{"old_row": old, "new_row": kept.row.row_id} for old in kept.joined]
    if joined_kept:
        connection.execute(
            update(_edges)
            .where(_edges.c.row_id == bindparam("row"))
            .values(
                corroborations=bindparam("count"),
                sources=bindparam("sources", type_=_edges.c.sources.type),
                reinforced_at=merge.now,
            ),
            [
                {
                    "row": kept.row.row_id,
                    "count": kept.evidence.count,
                    "sources": kept.evidence.sources or None,
                }
                for kept in joined_kept
                if kept.evidence is not None
            ],
        )
    _link_superseded(connection, _edges, links)


def _link_superseded(connection: Connection, table: Any, links: list[dict[str, int]]) -> None:
    """Set ``superseded_by`` of each ``old_row`` to its ``new_row``."""
    if links:
        connection.execute(
            update(table)
            .where(table.c.row_id == bindparam("old_row"))
            .values(superseded_by=bindparam("new_row")),
            links,
        )


# A chain of merges longer than this is a cycle (merges only ever point at current nodes).
_MAX_MERGE_HOPS = 64


def canonical_id(connection: Connection, entity_id: int, node_id: str) -> str | None:
    """Follow merges from ``node_id`` to the current node it is (or was merged into)."""
    return canonical_ids(connection, entity_id, [node_id])[node_id]


def canonical_ids(
    connection: Connection, entity_id: int, node_ids: Iterable[str]
) -> dict[str, str | None]:
    """:func:`canonical_id` of many ids, one query per hop of the longest merge chain (for a
    write's ids, usually one query: most ids are new or current)."""
    now = utc_now()
    result: dict[str, str | None] = {}
    pending: dict[str, list[str]] = {node_id: [node_id] for node_id in dict.fromkeys(node_ids)}
    for _hop in range(_MAX_MERGE_HOPS):
        if not pending:
            break
        latest = _latest_node_rows(connection, entity_id, pending)
        following: dict[str, list[str]] = {}
        for node_id, origins in pending.items():
            row = latest.get(node_id)
            target: str | None = None
            if row is not None and row.valid_to_version is None:
                target = node_id if _alive(row, now) else None
            elif row is not None and row.canonical_id is not None:
                following.setdefault(row.canonical_id, []).extend(origins)
                continue  # merged away: follow it (None: removed or closed otherwise)
            for origin in origins:
                result[origin] = target
        pending = following
    for origins in pending.values():  # a cycle: no current node at its end
        for origin in origins:
            result[origin] = None
    return result


def merged_ids(connection: Connection, entity_id: int) -> dict[str, str]:
    """Every node id whose latest row was closed by a merge, with the node it was merged
    into (which may itself have been merged since: follow the map)."""
    latest: dict[str, tuple[int, int, str]] = {}
    for row in connection.execute(
        select(
            _nodes.c.node_id, _nodes.c.valid_from_version, _nodes.c.row_id, _nodes.c.canonical_id
        ).where(
            _nodes.c.entity_id == entity_id,
            _nodes.c.closed_reason == "merged",
            _nodes.c.canonical_id.is_not(None),
        )
    ):
        order = (row.valid_from_version, row.row_id)
        kept = latest.get(row.node_id)
        if kept is None or order > kept[:2]:
            latest[row.node_id] = (*order, row.canonical_id)
    # An id written again after its merge (a new node, maybe removed since) is not an alias.
    newest = _latest_node_rows(connection, entity_id, latest)
    return {
        node_id: found[2]
        for node_id, found in latest.items()
        if node_id in newest
        and newest[node_id].valid_from_version == found[0]
        and newest[node_id].row_id == found[1]
    }


def _latest_node_rows(
    connection: Connection, entity_id: int, node_ids: Iterable[str]
) -> dict[str, Any]:
    """The newest row of each of ``node_ids`` that has one."""
    latest: dict[str, Any] = {}
    for chunk in chunks(sorted(node_ids)):
        for row in connection.execute(
            select(
                _nodes.c.node_id,
                _nodes.c.valid_from_version,
                _nodes.c.row_id,
                _nodes.c.valid_to_version,
                _nodes.c.canonical_id,
                _nodes.c.expires_at,
            ).where(_nodes.c.entity_id == entity_id, _nodes.c.node_id.in_(chunk))
        ):
            kept = latest.get(row.node_id)
            if kept is None or (row.valid_from_version, row.row_id) > (
                kept.valid_from_version,
                kept.row_id,
            ):
                latest[row.node_id] = row
    return latest


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
    # Ids are 32-bit on PostgreSQL (serial) and 64-bit on SQLite: a larger number names no
    # suggestion, and binding it would fail as an internal error instead of "no suggestion".
    largest = 2**31 if connection.dialect.name == "postgresql" else 2**63
    if (
        isinstance(suggestion_id, int)
        and not isinstance(suggestion_id, bool)
        and -largest <= suggestion_id < largest
    ):
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
    connection: Connection,
    entity_id: int,
    entity: str,
    suggestion_id: Any,
    accepted: bool,
    *,
    decision: Mapping[str, Any] | None = None,
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
        .values(status=status, decided_at=now, decision=dict(decision) if decision else None)
    )
    return Suggestion(
        id=found.id,
        kind=found.kind,
        payload=found.payload,
        score=found.score,
        status=status,
        created_at=found.created_at,
        decided_at=now,
        decision=dict(decision) if decision else None,
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
        decision=dict(row.decision) if row.decision is not None else None,
    )
