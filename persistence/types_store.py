"""Reading and writing versioned types (global or entity-scoped) inside a transaction.

Scoping rule: an entity sees the global types plus its own; its own type of the same kind and
name shadows the global one. A new type's name must be new in the scope it is added to (for an
entity: among its own *and* the global types), unless the entity's type is added explicitly as
a shadow of the global one (``shadow=True``: users only, never the agent).

Locking: :func:`precheck` runs the slow, pure rules (schema, patterns, example) before the
caller takes any lock; the functions here run inside the write transaction and only check what
needs the database (the name is free, edge ends exist, the type is not in use).

:class:`TypeScope` is the one implementation of the type operations (a transaction each, the
entity locked for writes); ``Store``'s type methods and ``EntitySession``'s delegate to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table, and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from kgot.persistence.catalog import (
    Creator,
    TypeCatalog,
    TypeDef,
    TypeKind,
    TypeRejectedError,
    TypeSpec,
    UpkeepSettings,
    creator,
    edge_end_problems,
    kind_of,
    spec_problems,
)
from kgot.persistence.context import StoreContext, entity_version
from kgot.persistence.engine import read_transaction, write_transaction
from kgot.persistence.schema import TABLES
from kgot.persistence.timeutil import as_utc

_types = TABLES.types

TypeHistory = list[tuple[TypeDef, datetime | None, str | None]]


class TypeScope:
    """The type operations of one scope: the global types (no entity), or one entity's own
    (which also sees the global ones), each in a transaction of its own.

    Writes lock the entity (so they take turns with its commits, which validate against its
    types) and refuse, naming it, an entity deleted since the scope was opened.
    """

    def __init__(
        self, context: StoreContext, entity_id: int | None = None, entity: str | None = None
    ) -> None:
        self._context = context
        self._entity_id = entity_id
        self._entity = entity

    def catalog(self) -> TypeCatalog:
        """The current types visible in this scope."""
        with read_transaction(self._context.engine, self._context.target) as connection:
            self._check_entity(connection)
            return load_catalog(connection, self._entity_id, self._entity, self._context.type_cache)

    def create(
        self,
        specs: Sequence[TypeSpec | Mapping[str, Any]],
        *,
        created_by: str,
        justification: str,
        run_id: str | None,
        shadow: bool,
    ) -> list[TypeDef]:
        """Add types, all or none (see :func:`create_type`)."""
        parsed = _parsed(specs)
        by = creator(created_by)
        precheck(parsed, created_by=by, justification=justification)  # before the lock
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._check_entity(connection, lock=True)
            return [
                create_type(
                    connection,
                    spec,
                    entity_id=self._entity_id,
                    entity_name=self._entity,
                    created_by=by,
                    justification=justification,
                    run_id=run_id,
                    cache=self._context.type_cache,
                    shadow=shadow,
                )
                for spec in parsed
            ]

    def update(
        self,
        specs: Sequence[TypeSpec | Mapping[str, Any]],
        *,
        created_by: str,
        justification: str,
        run_id: str | None,
    ) -> list[TypeDef]:
        """Store the next version of existing types of exactly this scope, all or none."""
        parsed = _parsed(specs)
        by = creator(created_by)
        precheck(parsed, created_by=by, justification=justification)  # before the lock
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._check_entity(connection, lock=True)
            return [
                update_type(
                    connection,
                    spec,
                    entity_id=self._entity_id,
                    entity_name=self._entity,
                    created_by=by,
                    justification=justification,
                    run_id=run_id,
                    cache=self._context.type_cache,
                )
                for spec in parsed
            ]

    def remove(self, name: str, kind: TypeKind | None) -> int:
        """Retire a type of exactly this scope (see :func:`remove_type`)."""
        with write_transaction(self._context.engine, self._context.target) as connection:
            self._check_entity(connection, lock=True)
            return remove_type(
                connection,
                kind or kind_of(name),
                name,
                entity_id=self._entity_id,
                entity_name=self._entity,
                cache=self._context.type_cache,
            )

    def history(self, name: str) -> TypeHistory:
        """Every version of a type of exactly this scope (see :func:`type_history`)."""
        with read_transaction(self._context.engine, self._context.target) as connection:
            self._check_entity(connection)
            return type_history(connection, None, name, self._entity_id, self._entity)

    def _check_entity(self, connection: Connection, *, lock: bool = False) -> None:
        if self._entity_id is not None and self._entity is not None:
            entity_version(
                connection, self._context.target, self._entity_id, self._entity, lock=lock
            )


def _parsed(specs: Sequence[TypeSpec | Mapping[str, Any]]) -> list[TypeSpec]:
    return [s if isinstance(s, TypeSpec) else TypeSpec.from_mapping(s) for s in specs]


def load_catalog(
    connection: Connection,
    entity_id: int | None,
    entity_name: str | None,
    cache: dict[int, TypeDef],
) -> TypeCatalog:
    """The current types visible to ``entity_id`` (``None``: the global types only).

    ``cache`` maps row ids to already-built :class:`TypeDef` s; type rows never change content,
    so a cached definition (and its compiled validator) stays right forever.
    """
    scope = _types.c.entity_id.is_(None)
    if entity_id is not None:
        scope = or_(scope, _types.c.entity_id == entity_id)
    ids = connection.execute(
        select(_types.c.id, _types.c.entity_id).where(_types.c.retired_at.is_(None), scope)
    ).all()
    missing = [row.id for row in ids if row.id not in cache]
    if missing:
        for row in connection.execute(select(_types).where(_types.c.id.in_(missing))):
            cache[row.id] = row_to_typedef(row, entity_name if row.entity_id else None)
    node_types: dict[str, TypeDef] = {}
    edge_types: dict[str, TypeDef] = {}
    # Global first, so the entity's own definitions overwrite (shadow) them.
    for row in sorted(ids, key=lambda r: r.entity_id is not None):
        type_def = cache[row.id]
        (node_types if type_def.kind == "node" else edge_types)[type_def.name] = type_def
    return TypeCatalog(
        node_types=dict(sorted(node_types.items())), edge_types=dict(sorted(edge_types.items()))
    )


def row_to_typedef(row: Any, scope: str | None) -> TypeDef:
    stored = row._mapping.get("upkeep")  # absent only while migration 1 seeds
    spec = TypeSpec(
        kind=row.kind,
        name=row.name,
        description=row.description,
        properties=row.properties_schema,
        example=row.example,
        source_types=tuple(row.source_types or ()),
        target_types=tuple(row.target_types or ()),
        upkeep=UpkeepSettings.from_stored(stored, row.kind),
    )
    return TypeDef(
        spec=spec,
        id=row.id,
        version=row.version,
        scope=scope,
        created_by=row.created_by,
        justification=row.justification or "",
        run_id=row.run_id,
        created_at=as_utc(row.created_at),
    )


def precheck(specs: Sequence[TypeSpec], *, created_by: Creator, justification: str) -> None:
    """The rules each spec must pass by itself, checked before any lock is taken.

    Raises:
        TypeRejectedError: for the first spec that breaks a rule (naming every rule it breaks),
            or a name defined more than once in ``specs``.
    """
    # A batch is stored all or nothing, so a repeated name would otherwise be refused by the
    # database check as "exists" — pointing at a type that was never stored.
    counts = Counter((spec.kind, spec.name) for spec in specs)
    for (kind, name), count in counts.items():
        if count > 1:
            raise TypeRejectedError(
                name,
                [
                    f"{kind} type {name!r} is defined {count} times in one batch; keep one "
                    "definition (use `kgot types update` to change a stored type)"
                ],
            )
    for spec in specs:
        problems = spec_problems(spec)
        if created_by == "agent" and not justification.strip():
            problems.append("a justification is required: say why no existing type fits")
        if problems:
            raise TypeRejectedError(spec.name, problems)


def create_type(
    connection: Connection,
    spec: TypeSpec,
    *,
    entity_id: int | None,
    entity_name: str | None,
    created_by: Creator,
    justification: str,
    run_id: str | None,
    cache: dict[int, TypeDef],
    shadow: bool = False,
) -> TypeDef:
    """Store a new type (version 1, or the next version after a removal) that passed
    :func:`precheck`, after checking what needs the database.

    Args:
        shadow: for an entity type, allow the name of a global type (the entity's definition
            replaces the global one for that entity).

    Raises:
        TypeRejectedError: the name is taken or an edge end does not exist; nothing is stored.
    """
    catalog = load_catalog(connection, entity_id, entity_name, cache)
    problems = edge_end_problems(spec, catalog.node_types.keys())
    existing = catalog.get(spec.kind, spec.name)
    shadows = shadow and entity_id is not None and existing is not None and existing.scope is None
    if existing is not None and not shadows:
        problems.insert(0, _name_taken(spec, existing, entity_id, created_by))
    if problems:
        raise TypeRejectedError(spec.name, problems)
    rows = insert_type_rows(
        connection,
        [spec],
        entity_id=entity_id,
        created_by=created_by,
        justification=justification,
        run_id=run_id,
    )
    return row_to_typedef(rows[0], entity_name)


def _name_taken(spec: TypeSpec, existing: TypeDef, entity_id: int | None, by: Creator) -> str:
    where = "globally" if existing.scope is None else f"in entity {existing.scope!r}"
    fix = "reuse it, pick another name, or update it"
    if existing.scope is None and entity_id is not None and by != "agent":
        fix += " (or shadow it for this entity: `kgot types add --entity NAME --shadow FILE`)"
    return (
        f"the name is not new: {spec.kind} type {spec.name!r} exists {where} (version "
        f"{existing.version}); {fix}"
    )


def update_type(
    connection: Connection,
    spec: TypeSpec,
    *,
    entity_id: int | None,
    entity_name: str | None,
    created_by: Creator,
    justification: str,
    run_id: str | None,
    cache: dict[int, TypeDef],
) -> TypeDef:
    """Store ``spec`` (which passed :func:`precheck`) as the next version of an existing type in
    exactly this scope.

    Facts keep the version they were validated against; their next change must satisfy the new
    one.

    Raises:
        TypeRejectedError: no such type in this scope, or an edge end does not exist.
    """
    current = _current_row(connection, spec.kind, spec.name, entity_id)
    if current is None:
        raise TypeRejectedError(spec.name, [_not_found(spec.kind, spec.name, entity_name)])
    catalog = load_catalog(connection, entity_id, entity_name, cache)
    problems = edge_end_problems(spec, catalog.node_types.keys())
    if problems:
        raise TypeRejectedError(spec.name, problems)
    now = datetime.now(UTC)
    connection.execute(
        update(_types)
        .where(_types.c.id == current.id)
        .values(retired_at=now, retired_reason="updated")
    )
    rows = insert_type_rows(
        connection,
        [spec],
        entity_id=entity_id,
        created_by=created_by,
        justification=justification,
        run_id=run_id,
    )
    return row_to_typedef(rows[0], entity_name)


def remove_type(
    connection: Connection,
    kind: TypeKind,
    name: str,
    *,
    entity_id: int | None,
    entity_name: str | None,
    cache: dict[int, TypeDef],
) -> int:
    """Retire a type (its versions stay as history); return the retired version.

    An entity-scoped type still used by the entity's current facts is refused, as is a node
    type that a visible edge type names as source or target.

    Raises:
        TypeRejectedError: no such type in this scope, or it is still in use.
    """
    current = _current_row(connection, kind, name, entity_id)
    if current is None:
        raise TypeRejectedError(name, [_not_found(kind, name, entity_name)])
    problems: list[str] = []
    if entity_id is not None:
        in_use = _facts_using(connection, kind, name, entity_id)
        if in_use:
            problems.append(
                f"{in_use} current {kind}{'' if in_use == 1 else 's'} of entity "
                f"{entity_name!r} {'uses' if in_use == 1 else 'use'} it (relabel or remove "
                f"{'it' if in_use == 1 else 'them'} first)"
            )
    if kind == "node":
        catalog = load_catalog(connection, entity_id, entity_name, cache)
        referring = sorted(
            t.name
            for t in catalog.edge_types.values()
            if name in t.spec.source_types or name in t.spec.target_types
        )
        if referring:
            problems.append(
                f"edge types {', '.join(referring)} connect {name} (update or remove them first)"
            )
    if problems:
        raise TypeRejectedError(name, problems)
    connection.execute(
        update(_types)
        .where(_types.c.id == current.id)
        .values(retired_at=datetime.now(UTC), retired_reason="removed")
    )
    return int(current.version)


def type_history(
    connection: Connection,
    kind: TypeKind | None,
    name: str,
    entity_id: int | None,
    entity_name: str | None,
) -> TypeHistory:
    """Every version of a type in exactly this scope: ``(definition, retired_at, reason)``."""
    query = select(_types).where(_types.c.name == name, _scope_is(entity_id))
    if kind is not None:
        query = query.where(_types.c.kind == kind)
    rows = connection.execute(query.order_by(_types.c.version)).all()
    return [
        (
            row_to_typedef(row, entity_name if entity_id else None),
            as_utc(row.retired_at),
            row.retired_reason,
        )
        for row in rows
    ]


def insert_type_rows(
    connection: Connection,
    specs: Sequence[TypeSpec],
    *,
    entity_id: int | None,
    created_by: Creator,
    justification: str = "",
    run_id: str | None = None,
    table: Table = _types,
) -> list[Any]:
    """Insert one new version per spec (after the highest existing version of that name).

    Args:
        table: the types table as the database has it (migration 1 seeds a table without the
            ``upkeep`` column).

    Raises:
        TypeRejectedError: a concurrent writer stored the same name first.
    """
    now = datetime.now(UTC)
    scope = table.c.entity_id.is_(None) if entity_id is None else table.c.entity_id == entity_id
    latest: dict[str, int] = dict(
        connection.execute(
            select(table.c.kind + ":" + table.c.name, func.max(table.c.version))
            .where(scope, table.c.name.in_({spec.name for spec in specs}))
            .group_by(table.c.kind, table.c.name)
        ).all()
    )
    with_upkeep = "upkeep" in table.c
    rows = []
    for spec in specs:
        key = f"{spec.kind}:{spec.name}"
        latest[key] = latest.get(key, 0) + 1
        row: dict[str, Any] = {
            "entity_id": entity_id,
            "kind": spec.kind,
            "name": spec.name,
            "version": latest[key],
            "description": spec.description,
            "properties_schema": dict(spec.properties),
            "example": dict(spec.example) if spec.example is not None else None,
            "source_types": list(spec.source_types) if spec.kind == "edge" else None,
            "target_types": list(spec.target_types) if spec.kind == "edge" else None,
            "created_by": created_by,
            "justification": justification,
            "run_id": run_id,
            "created_at": now,
        }
        if with_upkeep:
            row["upkeep"] = spec.upkeep.stored(spec.kind)
        rows.append(row)
    try:
        # The caller's transaction is rolled back when this raises, so no savepoint is needed.
        return list(
            connection.execute(
                insert(table).returning(table, sort_by_parameter_order=True), rows
            ).all()
        )
    except IntegrityError:
        names = ", ".join(spec.name for spec in specs)
        raise TypeRejectedError(
            names, ["the name is not new: another writer stored a type of that name just now"]
        ) from None


def _current_row(
    connection: Connection, kind: TypeKind, name: str, entity_id: int | None
) -> Any | None:
    return connection.execute(
        select(_types).where(
            _types.c.kind == kind,
            _types.c.name == name,
            _types.c.retired_at.is_(None),
            _scope_is(entity_id),
        )
    ).first()


def _scope_is(entity_id: int | None) -> Any:
    return _types.c.entity_id.is_(None) if entity_id is None else _types.c.entity_id == entity_id


def _facts_using(connection: Connection, kind: TypeKind, name: str, entity_id: int) -> int:
    table = TABLES.nodes if kind == "node" else TABLES.edges
    column = table.c.label if kind == "node" else table.c.relationship
    return int(
        connection.execute(
            select(func.count()).where(
                and_(
                    table.c.entity_id == entity_id,
                    table.c.valid_to_version.is_(None),
                    column == name,
                )
            )
        ).scalar_one()
    )


def _not_found(kind: TypeKind, name: str, entity_name: str | None) -> str:
    scope = f"entity {entity_name!r}" if entity_name else "the global scope"
    return f"no current {kind} type {name!r} in {scope} (see `kgot types list`)"
