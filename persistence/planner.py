"""Planning a commit: a changeset turned into row operations against the entity's current rows.

Runs inside the commit's transaction, under the entity's lock, so it only does what needs the
lock: read the current rows the changeset touches, check that edge ends exist and have allowed
types, classify facts other writers touched outside the caller's :class:`View` as conflicts,
and work out which rows to close, insert and corroborate. Property values were checked against
their JSON Schemas before the lock was taken (:func:`kgot.persistence.validation
.content_problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence.catalog import TypeCatalog
from kgot.persistence.commit_result import CommitResult
from kgot.persistence.context import Provenance, View
from kgot.persistence.facts import FactKey, edge_key, node_key
from kgot.persistence.schema import TABLES
from kgot.persistence.timeutil import as_utc, iso, utc_now
from kgot.persistence.validation import (
    FactMeta,
    edge_where,
    link_problems,
    node_where,
    split_properties,
)

_nodes = TABLES.nodes
_edges = TABLES.edges
_entities = TABLES.entities
CHUNK = 400  # ids per IN (...) list: far below SQLite's bound-parameter limit

EdgeIdent = tuple[str, str, str]


@dataclass
class RowOps:
    """Row operations for one table."""

    close: list[int] = field(default_factory=list)  # rows that stop being current
    insert: list[dict[str, Any]] = field(default_factory=list)
    supersede: dict[Any, int] = field(default_factory=dict)  # identity -> row it replaces
    corroborate: list[dict[str, Any]] = field(default_factory=list)  # row, count, sources
    corroborated: int = 0  # of those, found by a new source (the rest only reinforce)
    restated: list[FactKey] = field(default_factory=list)  # the facts `corroborate` counts
    # closed row -> (its fact key, why it closes unless the commit says otherwise, and for an
    # edge its (source, relationship): what a contradicting edge replacing it shares)
    closing: dict[int, tuple[FactKey, str, Any]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.close or self.insert or self.corroborate)


@dataclass
class Plan:
    """What a commit would do, or why it cannot: ``problems`` are the writer's mistakes (for
    fix-code), ``conflicts`` are other writers' changes the writer has not seen."""

    problems: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    nodes: RowOps = field(default_factory=RowOps)
    edges: RowOps = field(default_factory=RowOps)

    @property
    def is_noop(self) -> bool:
        return self.nodes.empty and self.edges.empty

    @property
    def rows_written(self) -> int:
        return sum(
            len(ops.close) + len(ops.insert) + len(ops.corroborate)
            for ops in (self.nodes, self.edges)
        )


@dataclass(frozen=True)
class _Kind:
    """How the planner treats one kind of fact (node or edge)."""

    noun: str
    ident: Callable[[Any], Any]  # Node/Edge -> identity
    where: Callable[[Any], str]  # Node/Edge -> "node 'x' (Label)"
    where_ident: Callable[[Any], str]  # identity -> "node 'x'"
    same: Callable[[Any, Any], bool]  # (row, Node/Edge) -> same content


class Planner:
    """Turns a changeset into row operations against the entity's current rows."""

    def __init__(
        self,
        connection: Connection,
        *,
        entity_id: int,
        catalog: TypeCatalog,
        view: View,
        provenance: Provenance | None,
        close_reasons: Mapping[FactKey, str] | None = None,
    ) -> None:
        self.connection = connection
        self.entity_id = entity_id
        self.catalog = catalog
        self.view = view
        self.provenance = provenance
        self.close_reasons = dict(close_reasons or {})
        self.now = utc_now()

    # -- reading current rows

    def _alive(self, row: Any) -> bool:
        return row.expires_at is None or as_utc(row.expires_at) > self.now

    def _current_nodes(self, ids: Iterable[str]) -> dict[str, Any]:
        rows: dict[str, Any] = {}
        for chunk in chunks(sorted(set(ids))):
            for row in self.connection.execute(
                select(_nodes).where(
                    _nodes.c.entity_id == self.entity_id,
                    _nodes.c.valid_to_version.is_(None),
                    _nodes.c.node_id.in_(chunk),
                )
            ):
                rows[row.node_id] = row
        return rows

    def _current_edges(self, idents: Iterable[EdgeIdent]) -> dict[EdgeIdent, Any]:
        # `(source, target, key) IN (…)` would be simplest, but SQLite cannot use an index for
        # row values in a list and scans every current edge; `source IN … AND target IN …`
        # uses the (entity, source, target, key) index, and the few extra pairs it matches are
        # filtered out here.
        wanted = sorted(set(idents))
        rows: dict[EdgeIdent, Any] = {}
        for chunk in chunks(wanted):
            sources = sorted({source for source, _, _ in chunk})
            targets = sorted({target for _, target, _ in chunk})
            keys = set(chunk)
            for row in self.connection.execute(
                select(_edges).where(
                    _edges.c.entity_id == self.entity_id,
                    _edges.c.valid_to_version.is_(None),
                    _edges.c.source.in_(sources),
                    _edges.c.target.in_(targets),
                )
            ):
                ident = (row.source, row.target, row.key)
                if ident in keys:
                    rows[ident] = row
        return rows

    def _incident_edges(self, node_ids: Iterable[str]) -> list[Any]:
        found: dict[int, Any] = {}
        # Two queries, not one with `source IN … OR target IN …`, which SQLite answers by
        # scanning every current edge instead of using the source and target indexes.
        for column in (_edges.c.source, _edges.c.target):
            for chunk in chunks(sorted(set(node_ids))):
                for row in self.connection.execute(
                    select(_edges).where(
                        _edges.c.entity_id == self.entity_id,
                        _edges.c.valid_to_version.is_(None),
                        column.in_(chunk),
                    )
                ):
                    found[row.row_id] = row
        return list(found.values())

    # -- planning

    def plan(self, changeset: Changeset) -> Plan:
        plan = Plan()
        touched = {n.id for n in (*changeset.added_nodes, *changeset.changed_nodes)}
        touched.update(changeset.removed_nodes)
        endpoints = {
            end
            for e in (*changeset.added_edges, *changeset.changed_edges)
            for end in (e.source, e.target)
        }
        node_rows = self._current_nodes(touched | endpoints)
        edge_rows = self._current_edges(
            [e.ident for e in (*changeset.added_edges, *changeset.changed_edges)]
            + list(changeset.removed_edges)
        )
        labels = {
            node_id: row.label
            for node_id, row in node_rows.items()
            if node_id not in touched and self._alive(row)
        }
        missing: list[tuple[str, str]] = []
        plan.problems.extend(link_problems(changeset, self.catalog, labels, missing=missing))
        self._plan_missing_ends(missing, plan)
        self._plan_facts(
            _NODE,
            added=changeset.added_nodes,
            changed=changeset.changed_nodes,
            removed=changeset.removed_nodes,
            rows=node_rows,
            values_of=self._node_values,
            plan=plan,
            ops=plan.nodes,
        )
        self._plan_incident(changeset, node_rows, plan)
        self._plan_facts(
            _EDGE,
            added=changeset.added_edges,
            changed=changeset.changed_edges,
            removed=changeset.removed_edges,
            rows=edge_rows,
            values_of=self._edge_values,
            plan=plan,
            ops=plan.edges,
        )
        return plan

    def _plan_missing_ends(self, missing: Sequence[tuple[str, str]], plan: Plan) -> None:
        """Edge ends that are not in the graph: a conflict when another writer removed the
        node after the caller's view (the caller still sees it), else the caller's mistake."""
        if not missing:
            return
        removed_at: dict[str, int] = {}
        for chunk in chunks(sorted({node_id for _, node_id in missing})):
            for row in self.connection.execute(
                select(_nodes.c.node_id, _nodes.c.valid_from_version, _nodes.c.valid_to_version)
                .where(
                    _nodes.c.entity_id == self.entity_id,
                    _nodes.c.node_id.in_(chunk),
                    _nodes.c.valid_to_version > self.view.base,
                )
                .order_by(_nodes.c.valid_to_version)
            ):
                seen = self.view.includes(row.valid_from_version)
                if seen and not self.view.includes(row.valid_to_version):
                    removed_at[row.node_id] = row.valid_to_version
        for where, node_id in missing:
            if node_id in removed_at:
                plan.conflicts.append(
                    f"{where}: another writer removed it at version {removed_at[node_id]}"
                )
            else:
                plan.problems.append(
                    f"{where} does not exist in this graph (rule: edge endpoints; add the node "
                    "first)"
                )

    def _plan_facts(
        self,
        kind: _Kind,
        *,
        added: Sequence[Any],
        changed: Sequence[Any],
        removed: Sequence[Any],
        rows: Mapping[Any, Any],
        values_of: Callable[[Any, Any], dict[str, Any] | None],
        plan: Plan,
        ops: RowOps,
    ) -> None:
        for item in added:
            self._plan_added(
                kind, item, row=rows.get(kind.ident(item)), values_of=values_of, plan=plan, ops=ops
            )
        for item in changed:
            ident = kind.ident(item)
            row = rows.get(ident)
            if row is None or not self._alive(row):
                plan.conflicts.append(
                    f"{kind.where(item)}: no longer exists (removed by another writer or expired)"
                )
            elif not self.view.includes(row.valid_from_version):
                plan.conflicts.append(
                    f"{kind.where(item)}: another writer changed it at version "
                    f"{row.valid_from_version}"
                )
            elif (values := values_of(item, row)) is not None:
                # (None: same content and metadata, nothing to write)
                _close(ops, row, "changed")
                ops.supersede[ident] = row.row_id
                ops.insert.append(values)
        for ident in removed:
            row = rows.get(ident)
            if row is None:
                continue  # already gone: removing it again loses nothing
            if self.view.includes(row.valid_from_version):
                _close(ops, row, "removed")
            else:
                plan.conflicts.append(
                    f"{kind.where_ident(ident)}: another writer changed it at version "
                    f"{row.valid_from_version}; removing it would discard that change"
                )

    def _plan_added(
        self,
        kind: _Kind,
        item: Any,
        *,
        row: Any | None,
        values_of: Callable[[Any, Any], dict[str, Any] | None],
        plan: Plan,
        ops: RowOps,
    ) -> None:
        if row is not None and self._alive(row):
            if kind.same(row, item):
                self._corroborate(row, item, ops)  # the same fact, found again
            elif self.view.includes(row.valid_from_version):
                plan.problems.append(
                    f"{kind.where(item)}: already exists in this graph (rule: add new "
                    f"{kind.noun}s only; change the existing {kind.noun} instead)"
                )
            else:
                plan.conflicts.append(
                    f"{kind.where(item)}: another writer added a different {kind.noun} "
                    f"there at version {row.valid_from_version}"
                )
            return
        if row is not None:  # expired: the new fact replaces it
            _close(ops, row, "expired")
            ops.supersede[kind.ident(item)] = row.row_id
        values = values_of(item, None)
        if values is not None:
            ops.insert.append(values)

    def _corroborate(self, row: Any, item: Node | Edge, ops: RowOps) -> None:
        """Count a writer adding a fact that is already there.

        Each distinct source counts once: the source reference (``_source_ref`` or the
        commit's), or without one the run. The same source read again only reinforces the fact
        (``reinforced_at``); a new one is added to ``sources`` with its confidence and counts
        as a corroboration.
        """
        _plain, meta = split_properties(item.properties, "", [])
        provenance = self.provenance or Provenance(run_id="", step="check")
        source_ref = meta.source_ref if meta.source_ref is not None else provenance.source_ref
        key = source_key(source_ref, provenance.run_id)
        sources = list(row.sources or [])
        known = {source_key(row.source_ref, row.run_id)}
        known.update(source_key(s.get("source_ref"), s.get("run_id")) for s in sources)
        count = row.corroborations
        if key is not None and key not in known:
            count += 1
            ops.corroborated += 1
            confidence = meta.confidence if meta.confidence is not None else provenance.confidence
            sources.append(
                {
                    "source_ref": source_ref,
                    "run_id": provenance.run_id or None,
                    "source_kind": meta.source_kind or provenance.source_kind,
                    "confidence": confidence if confidence is not None else 1.0,
                    "at": iso(self.now),
                }
            )
        ops.corroborate.append({"row": row.row_id, "count": count, "sources": sources or None})
        ops.restated.append(_row_key(row))

    def _plan_incident(self, changeset: Changeset, rows: Mapping[str, Any], plan: Plan) -> None:
        """Edges the changeset does not mention but touches: edges of removed nodes (closed
        with them, or a conflict when another writer added them) and edges of relabelled
        nodes (re-checked against their type's source and target types)."""
        relabelled = {
            n.id: n.label
            for n in changeset.changed_nodes
            if n.id in rows and rows[n.id].label != n.label
        }
        removed = set(changeset.removed_nodes)
        if not (relabelled or removed):
            return
        mentioned = {e.ident for e in (*changeset.added_edges, *changeset.changed_edges)}
        mentioned.update(changeset.removed_edges)
        for row in self._incident_edges(removed | relabelled.keys()):
            ident = (row.source, row.target, row.key)
            if ident in mentioned:
                continue
            if row.source in removed or row.target in removed:
                gone = row.source if row.source in removed else row.target
                if self.view.includes(row.valid_from_version):
                    _close(plan.edges, row, "removed")
                else:
                    plan.conflicts.append(
                        f"edge {row.source!r} -[{row.relationship}]-> {row.target!r}: another "
                        f"writer added it to node {gone!r}, which this change removes"
                    )
                continue
            type_def = self.catalog.edge_types.get(row.relationship)
            if type_def is None:
                continue
            for role, node_id, allowed in (
                ("source", row.source, type_def.spec.source_types),
                ("target", row.target, type_def.spec.target_types),
            ):
                label = relabelled.get(node_id)
                if label is not None and allowed and label not in allowed:
                    plan.problems.append(
                        f"node {node_id!r} ({label}): its edge {row.source!r} "
                        f"-[{row.relationship}]-> {row.target!r} needs a {role} of type "
                        f"{' or '.join(allowed)} (rule: {role} types; change or remove the edge "
                        "in the same change)"
                    )

    def _node_values(self, node: Node, old: Any | None) -> dict[str, Any] | None:
        plain, meta = split_properties(node.properties, node_where(node), [])
        type_def = self.catalog.node_types.get(node.label)
        content_same = old is not None and old.label == node.label and old.properties == plain
        values = self._fact_values(meta, old, content_same)
        if values is None:
            return None
        values.update(
            node_id=node.id,
            label=node.label,
            type_version=type_def.version if type_def else None,
            properties=plain,
            canonical_id=old.canonical_id if old is not None else None,
        )
        return values

    def _edge_values(self, edge: Edge, old: Any | None) -> dict[str, Any] | None:
        plain, meta = split_properties(edge.properties, edge_where(edge), [])
        type_def = self.catalog.edge_types.get(edge.relationship)
        content_same = (
            old is not None and old.relationship == edge.relationship and old.properties == plain
        )
        values = self._fact_values(meta, old, content_same)
        if values is None:
            return None
        source, target, key = edge.ident
        values.update(
            source=source,
            target=target,
            key=key,
            relationship=edge.relationship,
            type_version=type_def.version if type_def else None,
            properties=plain,
        )
        return values

    def _fact_values(
        self, meta: FactMeta, old: Any | None, content_same: bool
    ) -> dict[str, Any] | None:
        """Row columns for a new version; ``None`` when nothing would change.

        A metadata-only change keeps the fact's provenance and counters; a content change takes
        this commit's provenance and starts counting corroborations afresh.
        """
        provenance = self.provenance or Provenance(run_id="", step="check")
        expires_at = (
            meta.expires_at
            if meta.expires_given
            else (as_utc(old.expires_at) if old is not None else None)
        )
        if old is not None and content_same:
            confidence = meta.confidence if meta.confidence is not None else old.confidence
            source_kind = meta.source_kind or old.source_kind
            source_ref = meta.source_ref if meta.source_ref is not None else old.source_ref
            if (confidence, source_kind, source_ref, expires_at) == (
                old.confidence,
                old.source_kind,
                old.source_ref,
                as_utc(old.expires_at),
            ):
                return None
            origin = {
                "run_id": old.run_id,
                "step": old.step,
                "tool_call": old.tool_call,
                "corroborations": old.corroborations,
                "sources": old.sources,
                "reinforced_at": old.reinforced_at,
            }
        else:
            confidence = (
                meta.confidence
                if meta.confidence is not None
                else provenance.confidence
                if provenance.confidence is not None
                else 1.0
            )
            source_kind = meta.source_kind or provenance.source_kind
            source_ref = meta.source_ref if meta.source_ref is not None else provenance.source_ref
            origin = {
                "run_id": provenance.run_id or None,
                "step": provenance.step,
                "tool_call": provenance.tool_call,
                "corroborations": 1,
                "sources": None,
                "reinforced_at": None,
            }
        return {
            "entity_id": self.entity_id,
            "confidence": confidence,
            "source_kind": source_kind,
            "source_ref": source_ref,
            "expires_at": expires_at,
            "created_at": old.created_at if old is not None else self.now,
            "updated_at": self.now,
            **origin,
        }

    # -- writing

    def execute(self, plan: Plan, new_version: int, summary: str) -> CommitResult:
        """Write ``plan`` as ``new_version`` with its commit row; return what it did."""
        closed: dict[FactKey, str] = {}
        for table, ops in ((_nodes, plan.nodes), (_edges, plan.edges)):
            closed.update(self._write_rows(table, ops, new_version))
        corroborated = plan.nodes.corroborated + plan.edges.corroborated
        reinforced = len(plan.nodes.corroborate) + len(plan.edges.corroborate) - corroborated
        notes = [f"{corroborated} corroborated"] if corroborated else []
        notes += [f"{reinforced} reinforced"] if reinforced else []
        if notes:
            summary += f" ({', '.join(notes)})"
        self.connection.execute(
            update(_entities)
            .where(_entities.c.id == self.entity_id)
            .values(version=new_version, updated_at=self.now)
        )
        provenance = self.provenance or Provenance(run_id="", step="api")
        self.connection.execute(
            insert(TABLES.commits).values(
                entity_id=self.entity_id,
                version=new_version,
                run_id=provenance.run_id or None,
                step=provenance.step,
                tool_call=provenance.tool_call,
                source_ref=provenance.source_ref,
                summary=summary,
                committed_at=self.now,
                result_key=provenance.result_key,
            )
        )
        return CommitResult(
            version=new_version,
            written=True,
            written_facts=frozenset(
                _row_key(values) for ops in (plan.nodes, plan.edges) for values in ops.insert
            ),
            restated=(*plan.nodes.restated, *plan.edges.restated),
            corroborated=corroborated,
            reinforced=reinforced,
            closed=MappingProxyType(closed),
            summary=summary,
        )

    def _close_rows(
        self, table: Any, ops: RowOps, new_version: int, closed: dict[FactKey, str]
    ) -> dict[int, Any]:
        """Close the rows ``ops`` closes, each with its reason (recorded in ``closed`` by
        fact key); return the removed edges closed as contradicted, with their (source,
        relationship)."""
        by_reason: dict[str, list[int]] = {}
        contradicted: dict[int, Any] = {}
        for row_id in ops.close:
            key, default, subject = ops.closing.get(row_id, ((), "removed", None))
            reason = self.close_reasons.get(key, default)
            if key:
                closed[key] = reason
            by_reason.setdefault(reason, []).append(row_id)
            if reason == "contradicted" and key and key[0] == "edge":
                contradicted[row_id] = subject
        for reason, row_ids in by_reason.items():
            for chunk in chunks(row_ids):
                self.connection.execute(
                    update(table)
                    .where(table.c.row_id.in_(chunk))
                    .values(
                        valid_to_version=new_version, superseded_at=self.now, closed_reason=reason
                    )
                )
        return contradicted

    def _write_rows(self, table: Any, ops: RowOps, new_version: int) -> dict[FactKey, str]:
        """Write ``ops`` to ``table``; return the facts closed, with their reasons."""
        connection = self.connection
        closed: dict[FactKey, str] = {}
        # Close old rows first: the partial unique index allows one current row per identity.
        contradicted = self._close_rows(table, ops, new_version, closed)
        if ops.insert:
            for row in ops.insert:
                row["valid_from_version"] = new_version
            if ops.supersede or contradicted:
                new_ids = connection.execute(
                    insert(table).returning(table.c.row_id, sort_by_parameter_order=True),
                    ops.insert,
                ).scalars()
                identity = _row_identity(table)
                links = []
                by_subject: dict[Any, int] = {}
                for row, new_id in zip(ops.insert, new_ids, strict=True):
                    if identity(row) in ops.supersede:
                        links.append({"old_row": ops.supersede[identity(row)], "new_row": new_id})
                    if table is _edges:
                        by_subject.setdefault((row["source"], row["relationship"]), new_id)
                # A removed edge closed as contradicted is superseded by the edge this commit
                # adds from the same source with the same relationship (a functional edge's
                # new value), when there is one.
                links += [
                    {"old_row": row_id, "new_row": by_subject[subject]}
                    for row_id, subject in contradicted.items()
                    if subject in by_subject
                ]
                if links:
                    connection.execute(
                        update(table)
                        .where(table.c.row_id == bindparam("old_row"))
                        .values(superseded_by=bindparam("new_row")),
                        links,
                    )
            else:
                connection.execute(insert(table), ops.insert)
        if ops.corroborate:
            connection.execute(
                update(table)
                .where(table.c.row_id == bindparam("row"))
                .values(
                    corroborations=bindparam("count"),
                    sources=bindparam("sources", type_=table.c.sources.type),
                    reinforced_at=self.now,
                ),
                ops.corroborate,
            )
        return closed


def _close(ops: RowOps, row: Any, reason: str) -> None:
    """Plan closing ``row`` (a current node or edge row) for ``reason`` unless the commit's
    ``close_reasons`` name another."""
    ops.close.append(row.row_id)
    subject = row.node_id if "node_id" in row._mapping else (row.source, row.relationship)
    ops.closing[row.row_id] = (_row_key(row), reason, subject)


def _row_key(row: Any) -> FactKey:
    """The fact key of a node or edge row (or of the values of a row to insert)."""
    values = row._mapping if hasattr(row, "_mapping") else row
    if "node_id" in values:
        return node_key(values["node_id"])
    return edge_key(values["source"], values["target"], values["key"])


def _row_identity(table: Any) -> Callable[[Mapping[str, Any]], Any]:
    if table is _nodes:
        return lambda row: row["node_id"]
    return lambda row: (row["source"], row["target"], row["key"])


# ----------------------------------------------------------------------------- helpers


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _same_node(row: Any, node: Node) -> bool:
    plain, _ = split_properties(node.properties, "", [])
    return row.label == node.label and row.properties == plain


def _same_edge(row: Any, edge: Edge) -> bool:
    plain, _ = split_properties(edge.properties, "", [])
    return row.relationship == edge.relationship and row.properties == plain


_NODE = _Kind(
    noun="node",
    ident=lambda node: node.id,
    where=node_where,
    where_ident=lambda node_id: f"node {node_id!r}",
    same=_same_node,
)
_EDGE = _Kind(
    noun="edge",
    ident=lambda edge: edge.ident,
    where=edge_where,
    where_ident=lambda ident: f"edge {ident[0]!r} -> {ident[1]!r} key {ident[2]!r}",
    same=_same_edge,
)


def source_key(source_ref: str | None, run_id: str | None) -> str | None:
    """What makes two confirmations of a fact independent: their source, else their run."""
    if source_ref:
        return source_ref
    return f"run:{run_id}" if run_id else None
