"""The aide tables (migration 4): aides, their sources, items, cycles, outputs and deliveries.

Every write is one transaction; the runtime (:mod:`kgot.aides.runtime`) relies on that:

* a poll's new items and the source's new cursor are written together (a crash between the
  two neither loses nor repeats an item);
* an item is *claimed* (status ``ingesting``, a lease naming this process) before it is
  ingested, its lease is renewed while the ingestion runs (:func:`renew_lease`), and it is
  marked ``done`` with its commit's version after; an item left ``ingesting`` by a process
  that is gone (or whose lease ran out) is claimed again, and the entity's commit with the
  item's result key tells whether its facts landed already;
* a lease changes hands only as one conditional update (the owner and expiry read are still
  the row's), and a worker records an item's end only while it holds its lease, so a worker
  that lost an item never overwrites what its new owner records.

The store's engine is reached through its transaction helpers (``Store._read`` /
``Store._write``): the aide tables are part of the store, read and written beside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, insert, or_, select, update

from kgot.errors import EntityNotFoundError, UsageError
from kgot.persistence.schema import TABLES
from kgot.persistence.timeutil import as_utc, utc_now

if TYPE_CHECKING:
    from kgot.aides.sources import SourceItem
    from kgot.persistence import Store

PROGRAMS = ("digest", "advisor")  # advisor: kgot.aides.advisor
MAX_ATTEMPTS = 3  # ingestions of one item (across cycles) before it is given up
# An item whose lease ran out is claimed again. The worker renews it every third of it while
# the item is worked on, so this is how long a stuck or unreachable worker keeps its items.
LEASE = timedelta(minutes=15)
UPKEEP_EVERY = timedelta(hours=1)  # how often an aide's cycles run the memory upkeep pass
REDELIVER_CYCLES = 10  # digests of this many recent cycles are delivered again if not yet
MAX_DELIVERIES = 10  # tries of one delivery (each with the output's own retries) at most


@dataclass(frozen=True)
class AideRow:
    id: int
    name: str
    entity: str
    entity_id: int
    program: str
    settings: dict[str, Any]
    worker: str | None
    created_at: datetime


@contextmanager
def _write(store: Store) -> Iterator[Connection]:
    with store._write() as connection:
        yield connection


@contextmanager
def _read(store: Store) -> Iterator[Connection]:
    with store._read() as connection:
        yield connection


# ---------------------------------------------------------------------------- aides


def create_aide(
    store: Store, name: str, entity: str, program: str, settings: Mapping[str, Any]
) -> AideRow:
    """Record a new aide bound to ``entity`` (which must exist).

    Raises:
        UsageError: the name is taken or empty, or the program is unknown.
    """
    name = name.strip()
    if not name or len(name) > 100 or any(c.isspace() or not c.isprintable() for c in name):
        raise UsageError(
            f"aide name {name!r} must be 1-100 printable characters without spaces, e.g. research"
        )
    if program not in PROGRAMS:
        raise UsageError(f"unknown program {program!r}; use one of: {', '.join(PROGRAMS)}")
    aides, entities = TABLES.aides, TABLES.entities
    now = utc_now()
    with _write(store) as connection:
        entity_id = connection.execute(
            select(entities.c.id).where(entities.c.name == entity)
        ).scalar()
        if entity_id is None:
            raise EntityNotFoundError(f"no entity named {entity!r}")
        taken = connection.execute(select(aides.c.id).where(aides.c.name == name)).scalar()
        if taken is not None:
            raise UsageError(
                f"an aide named {name!r} exists already; choose another name or delete it "
                f"(`kgot aide delete {name}`)"
            )
        connection.execute(
            insert(aides).values(
                name=name,
                entity_id=entity_id,
                program=program,
                settings=dict(settings),
                created_at=now,
                updated_at=now,
            )
        )
    return get_aide(store, name)


def get_aide(store: Store, name: str) -> AideRow:
    """The aide called ``name``.

    Raises:
        UsageError: no such aide (the message lists how to see them).
    """
    with _read(store) as connection:
        row = _aide_rows(connection, name)
    if not row:
        raise UsageError(f"no aide named {name!r}; list them with `kgot aide list`")
    return row[0]


def list_aides(store: Store) -> list[AideRow]:
    with _read(store) as connection:
        return _aide_rows(connection, None)


def _aide_rows(connection: Connection, name: str | None) -> list[AideRow]:
    aides, entities = TABLES.aides, TABLES.entities
    query = (
        select(aides, entities.c.name.label("entity"))
        .join(entities, entities.c.id == aides.c.entity_id)
        .order_by(aides.c.name)
    )
    if name is not None:
        query = query.where(aides.c.name == name)
    return [
        AideRow(
            id=row.id,
            name=row.name,
            entity=row.entity,
            entity_id=row.entity_id,
            program=row.program,
            settings=dict(row.settings or {}),
            worker=row.worker,
            created_at=as_utc(row.created_at) or utc_now(),
        )
        for row in connection.execute(query)
    ]


def delete_aide(store: Store, aide: AideRow) -> None:
    """Delete the aide and everything it recorded; the entity's graph is left as it is."""
    with _write(store) as connection:
        for table in (
            TABLES.aide_deliveries,
            TABLES.aide_outputs,
            TABLES.aide_cycles,
            TABLES.aide_items,
            TABLES.aide_sources,
        ):
            connection.execute(delete(table).where(table.c.aide_id == aide.id))
        connection.execute(delete(TABLES.aides).where(TABLES.aides.c.id == aide.id))


def claim_worker(store: Store, aide: AideRow, owner: str) -> None:
    """Make ``owner`` the aide's one worker on SQLite, unless another live process is it
    (PostgreSQL serves any number of workers).

    Raises:
        UsageError: another process on this machine runs the aide.
    """
    from kgot.persistence.owner import owner_state

    if not store.target.is_sqlite:
        return  # PostgreSQL: any number of workers share the aide's items (claim_next)
    aides = TABLES.aides
    with _write(store) as connection:
        current = connection.execute(select(aides.c.worker).where(aides.c.id == aide.id)).scalar()
        if current and current != owner and owner_state(current) == "alive":
            pid = current.split()[3] if len(current.split()) > 3 else "?"
            raise UsageError(
                f"aide {aide.name!r} is already being run by process {pid} on this machine; "
                "stop it first (one worker per aide)"
            )
        connection.execute(update(aides).where(aides.c.id == aide.id).values(worker=owner))


def release_worker(store: Store, aide: AideRow, owner: str) -> None:
    if not store.target.is_sqlite:
        return
    aides = TABLES.aides
    with _write(store) as connection:
        connection.execute(
            update(aides).where(aides.c.id == aide.id, aides.c.worker == owner).values(worker=None)
        )


# ---------------------------------------------------------------------------- sources, outputs


def add_source(store: Store, aide: AideRow, kind: str, spec: Mapping[str, Any]) -> int:
    return _add_part(
        store, aide, TABLES.aide_sources, part="source", kind=kind, spec=spec, cursor={}
    )


def _add_part(
    store: Store,
    aide: AideRow,
    table: Any,
    *,
    part: str,
    kind: str,
    spec: Mapping[str, Any],
    **values: Any,
) -> int:
    """Add a source or an output to ``aide``, refusing one equal to a part it has."""
    with _write(store) as connection:
        for row in connection.execute(select(table).where(table.c.aide_id == aide.id)):
            if row.kind == kind and dict(row.spec) == dict(spec):
                raise UsageError(f"aide {aide.name!r} has this {kind} {part} already")
        result = connection.execute(
            insert(table).values(
                entity_id=aide.entity_id,
                aide_id=aide.id,
                kind=kind,
                spec=dict(spec),
                created_at=utc_now(),
                **values,
            )
        )
        return _new_id(result)


def sources(store: Store, aide: AideRow) -> list[Any]:
    table = TABLES.aide_sources
    with _read(store) as connection:
        return list(
            connection.execute(select(table).where(table.c.aide_id == aide.id).order_by(table.c.id))
        )


def add_output(store: Store, aide: AideRow, kind: str, spec: Mapping[str, Any]) -> int:
    return _add_part(store, aide, TABLES.aide_outputs, part="output", kind=kind, spec=spec)


def outputs(store: Store, aide: AideRow) -> list[Any]:
    table = TABLES.aide_outputs
    with _read(store) as connection:
        return list(
            connection.execute(select(table).where(table.c.aide_id == aide.id).order_by(table.c.id))
        )


# ---------------------------------------------------------------------------- items


def record_poll(
    store: Store,
    aide: AideRow,
    source_id: int,
    items: Sequence[SourceItem],
    *,
    cursor: Mapping[str, Any],
    error: str | None,
    now: datetime,
) -> int:
    """Record a poll in one transaction: its new items (ids seen before are skipped), the
    source's cursor and its error (failures in a row counted). Returns the items added."""
    table, source_table = TABLES.aide_items, TABLES.aide_sources
    with _write(store) as connection:
        ids = list(dict.fromkeys(item.item_id for item in items))
        seen: set[str] = set()
        for start in range(0, len(ids), 500):
            seen.update(
                connection.execute(
                    select(table.c.item_id).where(
                        table.c.aide_id == aide.id, table.c.item_id.in_(ids[start : start + 500])
                    )
                ).scalars()
            )
        added = 0
        for item in items:
            if item.item_id in seen:
                continue
            seen.add(item.item_id)
            result = connection.execute(
                _insert_new(connection, table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    source_id=source_id,
                    item_id=item.item_id,
                    title=item.title or "",
                    source_ref=item.source_ref,
                    kind=item.kind,
                    published_at=item.published_at,
                    text=item.text,
                    status="new",
                    created_at=now,
                    updated_at=now,
                )
            )
            added += result.first() is not None  # no row back: another worker recorded it
        failures = source_table.c.failures + 1 if error else 0
        connection.execute(
            update(source_table)
            .where(source_table.c.id == source_id)
            .values(cursor=dict(cursor), last_error=error, failures=failures, polled_at=now)
        )
    return added


def _insert_new(connection: Connection, table: Any) -> Any:
    """An insert that skips an item another worker recorded at the same moment (the unique
    item id per aide decides), instead of failing the poll."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing().returning(table.c.id)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing().returning(table.c.id)


def reclaim_abandoned(store: Store, aide: AideRow, now: datetime) -> int:
    """Items left ``ingesting`` by a process that is gone, or whose lease ran out, become
    ``new`` again (their commit, if it landed, is found by its result key). Returns how many."""
    from kgot.persistence.owner import owner_state

    table = TABLES.aide_items
    with _write(store) as connection:
        rows = connection.execute(
            select(table.c.id, table.c.lease_owner, table.c.lease_expires_at).where(
                table.c.aide_id == aide.id, table.c.status == "ingesting"
            )
        ).all()
        stale = [
            row
            for row in rows
            if owner_state(row.lease_owner) == "gone"
            or (as_utc(row.lease_expires_at) or now) <= now
        ]
        reclaimed = 0
        for row in stale:
            # Only if the lease is still the one judged stale: a heartbeat that renewed it
            # meanwhile (its update waits for this row's lock on PostgreSQL, or went first)
            # keeps the item with its worker.
            reclaimed += connection.execute(
                update(table)
                .where(
                    table.c.id == row.id,
                    table.c.status == "ingesting",
                    _same(table.c.lease_owner, row.lease_owner),
                    _same(table.c.lease_expires_at, row.lease_expires_at),
                )
                .values(status="new", lease_owner=None, lease_expires_at=None, updated_at=now)
            ).rowcount
    return reclaimed


def _same(column: Any, value: Any) -> Any:
    return column.is_(None) if value is None else column == value


def pending_items(store: Store, aide: AideRow, limit: int | None) -> list[Any]:
    """Items to ingest, oldest first: new ones and failed ones with attempts left."""
    table = TABLES.aide_items
    query = (
        select(table)
        .where(
            table.c.aide_id == aide.id,
            or_(
                table.c.status == "new",
                (table.c.status == "failed") & (table.c.attempts < MAX_ATTEMPTS),
            ),
        )
        .order_by(table.c.id)
    )
    if limit is not None:
        query = query.limit(limit)
    with _read(store) as connection:
        return list(connection.execute(query))


def claim_next(
    store: Store,
    aide: AideRow,
    owner: str,
    now: datetime,
    cycle_id: int,
    *,
    lease: timedelta = LEASE,
) -> Any:
    """Claim the oldest pending item this cycle has not worked on yet (status ``ingesting``,
    a lease for ``owner`` until ``now + lease``, one attempt more) and return its row as it
    was before the claim; ``None`` when there is none.

    On PostgreSQL the row is locked with ``FOR UPDATE SKIP LOCKED``: workers claiming at the
    same moment each get a different item and never wait for each other. SQLite has one
    writer at a time, so the read and the update in one write transaction are enough.
    """
    table = TABLES.aide_items
    query = (
        select(table)
        .where(
            table.c.aide_id == aide.id,
            or_(
                table.c.status == "new",
                (table.c.status == "failed") & (table.c.attempts < MAX_ATTEMPTS),
            ),
            or_(table.c.cycle_id.is_(None), table.c.cycle_id != cycle_id),
        )
        .order_by(table.c.id)
        .limit(1)
    )
    if not store.target.is_sqlite:
        query = query.with_for_update(skip_locked=True)
    with _write(store) as connection:
        row = connection.execute(query).first()
        if row is None:
            return None
        connection.execute(
            update(table)
            .where(table.c.id == row.id)
            .values(
                status="ingesting",
                attempts=table.c.attempts + 1,
                lease_owner=owner,
                lease_expires_at=now + lease,
                cycle_id=cycle_id,
                updated_at=now,
            )
        )
        return row


def renew_lease(store: Store, item_row_id: int, owner: str, expires_at: datetime) -> bool:
    """Extend ``owner``'s lease on a claimed item to ``expires_at``; ``False`` when ``owner``
    no longer holds it (it was reclaimed, or finished by someone else)."""
    table = TABLES.aide_items
    with _write(store) as connection:
        renewed = connection.execute(
            update(table)
            .where(_held_by(table, item_row_id, owner))
            .values(lease_expires_at=expires_at)
        ).rowcount
    return bool(renewed)


def _held_by(table: Any, item_row_id: int, owner: str) -> Any:
    return (
        (table.c.id == item_row_id)
        & (table.c.status == "ingesting")
        & (table.c.lease_owner == owner)
    )


def release_item(store: Store, item_row_id: int, *, owner: str, status: str, attempts: int) -> bool:
    """Give a claimed item back as it was before the claim (its attempt not counted);
    ``False`` (nothing changed) when ``owner`` no longer holds its lease."""
    table = TABLES.aide_items
    with _write(store) as connection:
        return bool(
            connection.execute(
                update(table)
                .where(_held_by(table, item_row_id, owner))
                .values(
                    status=status,
                    attempts=attempts,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=utc_now(),
                )
            ).rowcount
        )


def finish_item(
    store: Store,
    item_row_id: int,
    *,
    owner: str,
    ok: bool,
    version: int | None,
    reason: str | None,
    report: Mapping[str, Any] | None,
    now: datetime,
) -> bool:
    """Record how the item's ingestion ended (done: its text is no longer kept); ``False``
    (nothing recorded) when ``owner`` no longer holds its lease: the item's new owner
    records it."""
    table = TABLES.aide_items
    values: dict[str, Any] = {
        "status": "done" if ok else "failed",
        "reason": reason,
        "committed_version": version,
        "report": dict(report) if report is not None else None,
        "lease_owner": None,
        "lease_expires_at": None,
        "updated_at": now,
    }
    if ok:
        values["text"] = ""
    with _write(store) as connection:
        return bool(
            connection.execute(
                update(table).where(_held_by(table, item_row_id, owner)).values(**values)
            ).rowcount
        )


def items(store: Store, aide: AideRow, status: str | None = None, limit: int = 50) -> list[Any]:
    table = TABLES.aide_items
    query = select(table).where(table.c.aide_id == aide.id)
    if status is not None:
        query = query.where(table.c.status == status)
    with _read(store) as connection:
        return list(connection.execute(query.order_by(table.c.id.desc()).limit(limit)))


def item_counts(store: Store, aide: AideRow) -> dict[str, int]:
    table = TABLES.aide_items
    with _read(store) as connection:
        rows = connection.execute(
            select(table.c.status, func.count())
            .where(table.c.aide_id == aide.id)
            .group_by(table.c.status)
        )
        return {status: int(count) for status, count in rows}


# ---------------------------------------------------------------------------- cycles


def start_cycle(store: Store, aide: AideRow, now: datetime) -> int:
    table = TABLES.aide_cycles
    with _write(store) as connection:
        result = connection.execute(
            insert(table).values(
                entity_id=aide.entity_id, aide_id=aide.id, started_at=now, status="running"
            )
        )
        return _new_id(result)


def finish_cycle(store: Store, cycle_id: int, values: Mapping[str, Any]) -> None:
    table = TABLES.aide_cycles
    with _write(store) as connection:
        connection.execute(update(table).where(table.c.id == cycle_id).values(**values))


def cycles(store: Store, aide: AideRow, limit: int = 10) -> list[Any]:
    table = TABLES.aide_cycles
    with _read(store) as connection:
        return list(
            connection.execute(
                select(table)
                .where(table.c.aide_id == aide.id)
                .order_by(table.c.id.desc())
                .limit(limit)
            )
        )


def upkeep_due(store: Store, aide: AideRow, now: datetime) -> bool:
    """Whether no cycle of the aide ran the upkeep pass in the last :data:`UPKEEP_EVERY`."""
    table = TABLES.aide_cycles
    with _read(store) as connection:
        rows = connection.execute(
            select(table.c.started_at, table.c.report)
            .where(table.c.aide_id == aide.id, table.c.started_at > now - UPKEEP_EVERY)
            .order_by(table.c.id.desc())
        ).all()
    return not any(isinstance(row.report, dict) and row.report.get("upkeep") for row in rows)


def cost_since(store: Store, aide: AideRow, since: datetime) -> float:
    """What the aide's cycles started since ``since`` cost (unknown prices count as 0)."""
    table = TABLES.aide_cycles
    with _read(store) as connection:
        total = connection.execute(
            select(func.coalesce(func.sum(table.c.cost_usd), 0.0)).where(
                table.c.aide_id == aide.id, table.c.started_at >= since
            )
        ).scalar()
    return float(total or 0.0)


# ---------------------------------------------------------------------------- deliveries


def delivery_state(store: Store, output_id: int, delivery_key: str) -> Any:
    """The delivery log's row for this output and key (``ok``, ``attempts``), or ``None``."""
    table = TABLES.aide_deliveries
    with _read(store) as connection:
        return connection.execute(
            select(table.c.ok, table.c.attempts).where(
                table.c.output_id == output_id, table.c.delivery_key == delivery_key
            )
        ).first()


def recent_digests(
    store: Store, aide: AideRow, limit: int
) -> list[tuple[int, datetime | None, dict[str, Any]]]:
    """``(cycle id, start, digest)`` of the aide's last ``limit`` cycles that made one,
    oldest first."""
    table = TABLES.aide_cycles
    with _read(store) as connection:
        rows = connection.execute(
            select(table.c.id, table.c.started_at, table.c.report)
            .where(table.c.aide_id == aide.id)
            .order_by(table.c.id.desc())
            .limit(limit)
        ).all()
    made = [
        (row.id, as_utc(row.started_at), row.report["digest"])
        for row in rows
        if isinstance(row.report, dict) and row.report.get("digest")
    ]
    return made[::-1]


def record_delivery(
    store: Store,
    aide: AideRow,
    output_id: int,
    delivery_key: str,
    cycle_id: int,
    *,
    ok: bool,
    attempts: int,
    error: str | None,
    now: datetime,
) -> None:
    """Log a delivery (one row per output and key: a retry updates it)."""
    table = TABLES.aide_deliveries
    values = {"ok": int(ok), "attempts": attempts, "error": error, "delivered_at": now}
    with _write(store) as connection:
        changed = connection.execute(
            update(table)
            .where(table.c.output_id == output_id, table.c.delivery_key == delivery_key)
            .values(attempts=table.c.attempts + attempts, ok=int(ok), error=error, delivered_at=now)
        ).rowcount
        if not changed:
            connection.execute(
                insert(table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    output_id=output_id,
                    delivery_key=delivery_key,
                    cycle_id=cycle_id,
                    **values,
                )
            )


def _new_id(result: Any) -> int:
    """The id an insert gave its row."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])
