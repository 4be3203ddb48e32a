"""The aide tables' rows: aides, their sources, items, cycles, outputs and deliveries.

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

The tables are declared in :mod:`kgot.aides.schema`; the rows are read and written in the
store's public transactions (:meth:`Store.read` / :meth:`Store.write`), beside its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, case, delete, func, insert, null, or_, select, update

from kgot.aides.schema import AIDE_TABLES
from kgot.errors import EntityNotFoundError, UsageError
from kgot.persistence import TABLES, as_utc, utc_now

if TYPE_CHECKING:
    from kgot.aides.sources import SourceItem
    from kgot.persistence import Store

MAX_ATTEMPTS = 3  # ingestions of one item (across cycles) before it is given up
# An item whose lease ran out is claimed again. The worker renews it every third of it while
# the item is worked on, so this is how long a stuck or unreachable worker keeps its items.
LEASE = timedelta(minutes=15)
UPKEEP_EVERY = timedelta(hours=1)  # how often an aide's cycles run the memory upkeep pass
REDELIVER_CYCLES = 10  # digests of this many recent cycles are delivered again if not yet
MAX_DELIVERIES = 10  # tries of one delivery (each with the output's own retries) at most
# Why an item of a removed source whose worker died mid-ingestion is left failed.
_SOURCE_REMOVED = "its source was removed while it was being ingested, by a worker now gone"


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
    from kgot.aides.programs import program_names  # installed programs: an extension point

    programs = program_names()
    if program not in programs:
        raise UsageError(f"unknown program {program!r}; use one of: {', '.join(programs)}")
    aides, entities = AIDE_TABLES.aides, TABLES.entities
    now = utc_now()
    with store.write() as connection:
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
        UsageError: no such aide (the message names the database looked in, since a wrong
            KGOT_DB / --db is the usual cause, and says how to list the aides).
    """
    with store.read() as connection:
        row = _aide_rows(connection, name)
    if not row:
        raise UsageError(
            f"no aide named {name!r} in {store.target.display}; list them with `kgot aide list`"
        )
    return row[0]


def list_aides(store: Store) -> list[AideRow]:
    with store.read() as connection:
        return _aide_rows(connection, None)


def _aide_rows(connection: Connection, name: str | None) -> list[AideRow]:
    aides, entities = AIDE_TABLES.aides, TABLES.entities
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
    with store.write() as connection:
        for table in (
            AIDE_TABLES.aide_deliveries,
            AIDE_TABLES.aide_outputs,
            AIDE_TABLES.aide_cycles,
            AIDE_TABLES.aide_items,
            AIDE_TABLES.aide_sources,
        ):
            connection.execute(delete(table).where(table.c.aide_id == aide.id))
        connection.execute(delete(AIDE_TABLES.aides).where(AIDE_TABLES.aides.c.id == aide.id))


def claim_worker(store: Store, aide: AideRow, owner: str) -> None:
    """Make ``owner`` the aide's one worker on SQLite, unless another live process is it
    (PostgreSQL serves any number of workers).

    Raises:
        UsageError: another process on this machine runs the aide.
    """
    from kgot.persistence import owner_state

    if not store.target.is_sqlite:
        return  # PostgreSQL: any number of workers share the aide's items (claim_next)
    aides = AIDE_TABLES.aides
    with store.write() as connection:
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
    aides = AIDE_TABLES.aides
    with store.write() as connection:
        connection.execute(
            update(aides).where(aides.c.id == aide.id, aides.c.worker == owner).values(worker=None)
        )


# ---------------------------------------------------------------------------- sources, outputs


def add_source(store: Store, aide: AideRow, kind: str, spec: Mapping[str, Any]) -> int:
    return _add_part(
        store, aide, AIDE_TABLES.aide_sources, part="source", kind=kind, spec=spec, cursor={}
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
    with store.write() as connection:
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
    table = AIDE_TABLES.aide_sources
    with store.read() as connection:
        return list(
            connection.execute(select(table).where(table.c.aide_id == aide.id).order_by(table.c.id))
        )


def add_output(store: Store, aide: AideRow, kind: str, spec: Mapping[str, Any]) -> int:
    return _add_part(store, aide, AIDE_TABLES.aide_outputs, part="output", kind=kind, spec=spec)


def outputs(store: Store, aide: AideRow) -> list[Any]:
    table = AIDE_TABLES.aide_outputs
    with store.read() as connection:
        return list(
            connection.execute(select(table).where(table.c.aide_id == aide.id).order_by(table.c.id))
        )


# ---------------------------------------------------------------------------- corrections
# Listing, editing and removing an aide's sources and outputs (`kgot aide source list|set|
# remove`, `kgot aide output list|remove`). Every statement names the aide and its entity, so
# an id typed for one aide never reads or touches another aide's rows.


@dataclass(frozen=True)
class SourceInfo:
    """A source as ``kgot aide source list`` shows it, its items counted by status."""

    id: int
    kind: str
    spec: dict[str, Any]
    items: dict[str, int]  # status -> count (new, ingesting, done, failed)
    last_error: str | None
    failures: int  # failed polls in a row
    polled_at: datetime | None
    created_at: datetime | None

    def text(self) -> str:
        return part_text(self.kind, self.spec)


@dataclass(frozen=True)
class OutputInfo:
    """An output as ``kgot aide output list`` shows it, with its delivery log counted."""

    id: int
    kind: str
    spec: dict[str, Any]
    delivered: int  # digests logged as delivered
    undelivered: int  # logged as refused: retried by the next cycles, or given up on
    created_at: datetime | None

    def text(self) -> str:
        return part_text(self.kind, self.spec)


@dataclass(frozen=True)
class SourceRemoval:
    """What :func:`remove_source` did."""

    id: int
    kind: str
    spec: dict[str, Any]
    kept: int  # done items: their facts stay in the graph, their rows (detached) stay listed
    dropped: int  # items never ingested (new, or failed): deleted
    in_flight: int  # items being ingested: left to their worker, not retried if they fail

    def summary(self) -> str:
        line = (
            f"removed source {self.id} ({part_text(self.kind, self.spec)}); "
            f"{count_of(self.kept, 'item')} it brought "
            f"{'stays' if self.kept == 1 else 'stay'} in the graph; "
            f"{count_of(self.dropped, 'pending or failed item')} dropped"
        )
        if self.in_flight:
            line += (
                f"; {count_of(self.in_flight, 'item')} being ingested "
                f"{'is' if self.in_flight == 1 else 'are'} left to finish"
            )
        return line


@dataclass(frozen=True)
class SourceUpdate:
    """What :func:`update_source` did: ``old`` and ``new`` are equal when nothing changed."""

    id: int
    kind: str
    old: dict[str, Any]
    new: dict[str, Any]
    known: int  # item ids the source has recorded: never recorded again, whatever the cursor

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def summary(self) -> str:
        if not self.changed:
            return f"source {self.id} ({part_text(self.kind, self.old)}) is unchanged"
        return (
            f"source {self.id} now reads {part_text(self.kind, self.new)} (was "
            f"{part_text(self.kind, self.old)}); it is polled afresh, and the "
            f"{count_of(self.known, 'item')} it has read {'is' if self.known == 1 else 'are'} "
            "not ingested again"
        )


@dataclass(frozen=True)
class OutputRemoval:
    """What :func:`remove_output` did."""

    id: int
    kind: str
    spec: dict[str, Any]
    deliveries: int  # its delivery log's rows, deleted with it

    def summary(self) -> str:
        return (
            f"removed output {self.id} ({part_text(self.kind, self.spec)}); its delivery log "
            f"({count_of(self.deliveries, 'entry', 'entries')}) was deleted with it"
        )


def part_text(kind: str, spec: Mapping[str, Any]) -> str:
    """A source or output in a few words: ``rss https://…``, ``dir /srv/inbox``, ``stdout``."""
    if kind == "smtp":
        where = f"{spec.get('host')}:{spec.get('port')} to {', '.join(spec.get('to') or [])}"
    else:
        where = str(spec.get("url") or spec.get("path") or spec.get("query") or "")
    return f"{kind} {where}".strip()


def count_of(number: int, noun: str, plural: str | None = None) -> str:
    """``1 item``, ``3 items``; ``plural`` where adding an s will not do."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def attempts_note(status: str, attempts: int) -> str:
    """How often an item was ingested, as ``kgot aide items`` shows it: ``1 ingestion
    attempt``; a failed item against :data:`MAX_ATTEMPTS`, saying whether it is tried again.
    "Ingestion attempts" keeps this count apart from the graph-code attempts an ingestion
    makes inside it (the reason of a failure counts those)."""
    if attempts == 0:
        return "not tried yet"
    if status != "failed":
        return count_of(attempts, "ingestion attempt")
    left = "given up" if attempts >= MAX_ATTEMPTS else "tried again next cycle"
    return f"{attempts} of {MAX_ATTEMPTS} ingestion attempts; {left}"


def _mine(table: Any, aide: AideRow) -> Any:
    return (table.c.aide_id == aide.id) & (table.c.entity_id == aide.entity_id)


def _part_row(
    connection: Connection, table: Any, aide: AideRow, part_id: int, part: str, *, lock: bool
) -> Any:
    """The aide's source or output ``part_id``; on PostgreSQL locked when ``lock``, so two
    corrections of one part at once go one after the other (SQLite has one writer anyway).

    Raises:
        UsageError: the aide has no such source or output.
    """
    query = select(table).where(table.c.id == part_id, _mine(table, aide))
    if lock and connection.dialect.name == "postgresql":
        query = query.with_for_update()
    row = connection.execute(query).first()
    if row is None:
        raise UsageError(
            f"aide {aide.name!r} has no {part} {part_id}; see its {part}s with "
            f"`kgot aide {part} list {aide.name}`"
        )
    return row


def source_infos(store: Store, aide: AideRow, source_id: int | None = None) -> list[SourceInfo]:
    """The aide's sources (or only ``source_id``), oldest first.

    Raises:
        UsageError: ``source_id`` is not one of the aide's sources.
    """
    sources_table, items_table = AIDE_TABLES.aide_sources, AIDE_TABLES.aide_items
    query = select(sources_table).where(_mine(sources_table, aide)).order_by(sources_table.c.id)
    counted = (
        select(items_table.c.source_id, items_table.c.status, func.count())
        .where(_mine(items_table, aide), items_table.c.source_id.is_not(None))
        .group_by(items_table.c.source_id, items_table.c.status)
    )
    with store.read() as connection:
        if source_id is not None:
            _part_row(connection, sources_table, aide, source_id, "source", lock=False)
            query = query.where(sources_table.c.id == source_id)
            counted = counted.where(items_table.c.source_id == source_id)
        rows = connection.execute(query).all()
        counts: dict[int, dict[str, int]] = {}
        for owner_id, status, number in connection.execute(counted):
            counts.setdefault(owner_id, {})[status] = int(number)
    return [
        SourceInfo(
            id=row.id,
            kind=row.kind,
            spec=dict(row.spec),
            items=counts.get(row.id, {}),
            last_error=row.last_error,
            failures=row.failures,
            polled_at=as_utc(row.polled_at),
            created_at=as_utc(row.created_at),
        )
        for row in rows
    ]


def output_infos(store: Store, aide: AideRow) -> list[OutputInfo]:
    """The aide's outputs, oldest first."""
    outputs_table, log = AIDE_TABLES.aide_outputs, AIDE_TABLES.aide_deliveries
    with store.read() as connection:
        rows = connection.execute(
            select(outputs_table).where(_mine(outputs_table, aide)).order_by(outputs_table.c.id)
        ).all()
        counts: dict[tuple[int, int], int] = {
            (output_id, ok): int(number)
            for output_id, ok, number in connection.execute(
                select(log.c.output_id, log.c.ok, func.count())
                .where(_mine(log, aide))
                .group_by(log.c.output_id, log.c.ok)
            )
        }
    return [
        OutputInfo(
            id=row.id,
            kind=row.kind,
            spec=dict(row.spec),
            delivered=counts.get((row.id, 1), 0),
            undelivered=counts.get((row.id, 0), 0),
            created_at=as_utc(row.created_at),
        )
        for row in rows
    ]


def remove_source(store: Store, aide: AideRow, source_id: int) -> SourceRemoval:
    """Remove a source in one transaction. Its done items' rows stay, detached from it (the
    facts they brought are in the graph; ``kgot aide items`` still lists them with their
    versions). Its items never ingested (new, or failed) are deleted. An item being ingested
    stays with its worker; detached, it is never claimed again (:func:`claim_next`), so it
    ends done or failed, not retried. Item ids are a source's own: a source added again is a
    new source and reads its items anew (to point a source elsewhere without that, use
    :func:`update_source`).

    Raises:
        UsageError: the aide has no source ``source_id``.
    """
    sources_table, items_table = AIDE_TABLES.aide_sources, AIDE_TABLES.aide_items
    with store.write() as connection:
        row = _part_row(connection, sources_table, aide, source_id, "source", lock=True)
        its = (items_table.c.source_id == row.id) & _mine(items_table, aide)
        dropped = connection.execute(
            delete(items_table).where(its, items_table.c.status.in_(("new", "failed")))
        ).rowcount
        # Detached before the source goes: the items' foreign key would cascade its delete.
        kept = connection.execute(
            update(items_table).where(its, items_table.c.status == "done").values(source_id=None)
        ).rowcount
        in_flight = connection.execute(
            update(items_table).where(its).values(source_id=None)
        ).rowcount
        connection.execute(
            delete(sources_table).where(sources_table.c.id == row.id, _mine(sources_table, aide))
        )
    return SourceRemoval(
        id=row.id,
        kind=row.kind,
        spec=dict(row.spec),
        kept=kept,
        dropped=dropped,
        in_flight=in_flight,
    )


def update_source(
    store: Store, aide: AideRow, source_id: int, kind: str, spec: Mapping[str, Any]
) -> SourceUpdate:
    """Point a source at ``spec`` (checked by the caller; its kind stays ``kind``).

    A changed spec starts with an empty cursor, no error and no failures: the old cursor (a
    feed's ETag and seen ids, a folder's file records) describes the old place. The source
    keeps its id and its items, and a poll skips an item id the source has recorded
    (:func:`record_poll`), so an entry read before (a feed moved to a new URL) is not
    ingested twice. Pending items of the old place stay pending.

    Raises:
        UsageError: no such source, a source of another kind, or a spec another of the aide's
            sources has.
    """
    sources_table, items_table = AIDE_TABLES.aide_sources, AIDE_TABLES.aide_items
    new = dict(spec)
    with store.write() as connection:
        row = _part_row(connection, sources_table, aide, source_id, "source", lock=True)
        old = dict(row.spec)
        keeps_kind(aide, row.id, row.kind, kind)
        known = int(
            connection.execute(
                select(func.count())
                .select_from(items_table)
                .where(_mine(items_table, aide), items_table.c.source_id == row.id)
            ).scalar()
            or 0
        )
        if new == old:
            return SourceUpdate(id=row.id, kind=row.kind, old=old, new=new, known=known)
        for other in connection.execute(
            select(sources_table.c.id, sources_table.c.kind, sources_table.c.spec).where(
                _mine(sources_table, aide), sources_table.c.id != row.id
            )
        ):
            if other.kind == kind and dict(other.spec) == new:
                raise UsageError(
                    f"aide {aide.name!r} has this {kind} source already (source {other.id}); "
                    f"remove one of them with `kgot aide source remove {aide.name} ID`"
                )
        connection.execute(
            update(sources_table)
            .where(sources_table.c.id == row.id, _mine(sources_table, aide))
            .values(spec=new, cursor={}, last_error=None, failures=0, polled_at=None)
        )
    return SourceUpdate(id=row.id, kind=row.kind, old=old, new=new, known=known)


def keeps_kind(aide: AideRow, source_id: int, kind: str, given: str) -> None:
    """Refuse to give source ``source_id`` (of ``kind``) a value of another kind.

    Raises:
        UsageError: ``given`` is not ``kind``.
    """
    if given != kind:
        raise UsageError(
            f"source {source_id} of aide {aide.name!r} is a {kind} source and keeps its kind; "
            f"give --{kind}, or remove it and add a new source with --{given}"
        )


def remove_output(store: Store, aide: AideRow, output_id: int) -> OutputRemoval:
    """Remove an output and its delivery log's rows (the log only says what this output was
    sent; an output added again later gets the digests of cycles after it was added).

    Raises:
        UsageError: the aide has no output ``output_id``.
    """
    outputs_table, log = AIDE_TABLES.aide_outputs, AIDE_TABLES.aide_deliveries
    with store.write() as connection:
        row = _part_row(connection, outputs_table, aide, output_id, "output", lock=True)
        deliveries = connection.execute(
            delete(log).where(log.c.output_id == row.id, _mine(log, aide))
        ).rowcount
        connection.execute(
            delete(outputs_table).where(outputs_table.c.id == row.id, _mine(outputs_table, aide))
        )
    return OutputRemoval(id=row.id, kind=row.kind, spec=dict(row.spec), deliveries=deliveries)


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
    spec: Mapping[str, Any] | None = None,
) -> PollRecord:
    """Record a poll in one transaction: its new items (ids this source gave before are
    skipped), the source's cursor and its error (failures in a row counted).

    Item ids are this source's own: another source (a feed publishing some other feed's
    entry id) can neither suppress an item nor be suppressed by one. Each item is written in
    a savepoint of its own, so an item the database refuses fails alone: it is named in the
    source's error, and the other items and the cursor are recorded.

    ``spec``: the source's settings the poll was made with; when the source no longer has
    them (it was edited or removed meanwhile) nothing is recorded: the poll read another
    place than the source now names.
    """
    from sqlalchemy.exc import OperationalError, StatementError

    table, source_table = AIDE_TABLES.aide_items, AIDE_TABLES.aide_sources
    refused: list[str] = []
    with store.write() as connection:
        if spec is not None:
            current = connection.execute(
                select(source_table.c.spec).where(
                    source_table.c.id == source_id, source_table.c.aide_id == aide.id
                )
            ).scalar()
            if current is None or dict(current) != dict(spec):
                return PollRecord(0, None)
        ids = list(dict.fromkeys(item.item_id for item in items))
        seen: set[str] = set()
        for start in range(0, len(ids), 500):
            seen.update(
                connection.execute(
                    select(table.c.item_id).where(
                        table.c.aide_id == aide.id,
                        table.c.source_id == source_id,
                        table.c.item_id.in_(ids[start : start + 500]),
                    )
                ).scalars()
            )
        added = 0
        for item in items:
            if item.item_id in seen:
                continue
            seen.add(item.item_id)
            try:
                with connection.begin_nested():
                    result = connection.execute(
                        insert_new(connection, table).values(
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
                    added += result.first() is not None  # none back: another worker has it
            except OperationalError:
                raise  # the database itself is away: not this item's fault
            except StatementError as failure:
                detail = str(getattr(failure, "orig", failure)).strip().splitlines() or ["?"]
                refused.append(f"{item.item_id[:120]!r} ({detail[0][:160]})")
        if refused:
            shown = "; ".join(refused[:3]) + (
                f"; and {len(refused) - 3} more" if len(refused) > 3 else ""
            )
            note = f"{len(refused)} item(s) could not be stored and were skipped: {shown}"
            error = f"{error}; {note}" if error else note
        failures = source_table.c.failures + 1 if error else 0
        connection.execute(
            update(source_table)
            .where(source_table.c.id == source_id)
            .values(cursor=dict(cursor), last_error=error, failures=failures, polled_at=now)
        )
    return PollRecord(added, error)


@dataclass(frozen=True)
class PollRecord:
    """What :func:`record_poll` recorded: the items added, and the source's error as kept
    (the poll's own, with the items the database refused)."""

    added: int
    error: str | None


def insert_new(connection: Connection, table: Any) -> Any:
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
    from kgot.persistence import owner_state

    table = AIDE_TABLES.aide_items
    with store.write() as connection:
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
                .values(
                    # An item of a source removed meanwhile is not retried (claim_next skips
                    # it): it ends failed rather than waiting forever as new.
                    status=case((table.c.source_id.is_(None), "failed"), else_="new"),
                    reason=case(
                        (table.c.source_id.is_(None), _SOURCE_REMOVED), else_=table.c.reason
                    ),
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
            ).rowcount
    return reclaimed


def _same(column: Any, value: Any) -> Any:
    return column.is_(None) if value is None else column == value


def pending_items(store: Store, aide: AideRow, limit: int | None) -> list[Any]:
    """Items to ingest, oldest first: new ones and failed ones with attempts left."""
    table = AIDE_TABLES.aide_items
    query = (
        select(table)
        .where(
            table.c.aide_id == aide.id,
            or_(
                table.c.status == "new",
                (table.c.status == "failed") & (table.c.attempts < MAX_ATTEMPTS),
            ),
            table.c.source_id.is_not(None),  # a removed source's items are not retried
        )
        .order_by(table.c.id)
    )
    if limit is not None:
        query = query.limit(limit)
    with store.read() as connection:
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
    table = AIDE_TABLES.aide_items
    query = (
        select(table)
        .where(
            table.c.aide_id == aide.id,
            or_(
                table.c.status == "new",
                (table.c.status == "failed") & (table.c.attempts < MAX_ATTEMPTS),
            ),
            or_(table.c.cycle_id.is_(None), table.c.cycle_id != cycle_id),
            table.c.source_id.is_not(None),  # a removed source's items are not retried
        )
        .order_by(table.c.id)
        .limit(1)
    )
    if not store.target.is_sqlite:
        query = query.with_for_update(skip_locked=True)
    with store.write() as connection:
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
    table = AIDE_TABLES.aide_items
    with store.write() as connection:
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
    table = AIDE_TABLES.aide_items
    with store.write() as connection:
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
    table = AIDE_TABLES.aide_items
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
    with store.write() as connection:
        return bool(
            connection.execute(
                update(table).where(_held_by(table, item_row_id, owner)).values(**values)
            ).rowcount
        )


def items(store: Store, aide: AideRow, status: str | None = None, limit: int = 50) -> list[Any]:
    table = AIDE_TABLES.aide_items
    query = select(table).where(table.c.aide_id == aide.id)
    if status is not None:
        query = query.where(table.c.status == status)
    with store.read() as connection:
        return list(connection.execute(query.order_by(table.c.id.desc()).limit(limit)))


def item_counts(store: Store, aide: AideRow) -> dict[str, int]:
    table = AIDE_TABLES.aide_items
    with store.read() as connection:
        rows = connection.execute(
            select(table.c.status, func.count())
            .where(table.c.aide_id == aide.id)
            .group_by(table.c.status)
        )
        return {status: int(count) for status, count in rows}


# ---------------------------------------------------------------------------- cycles


def start_cycle(store: Store, aide: AideRow, now: datetime, owner: str | None = None) -> int:
    """Record a new cycle run by ``owner`` (its spend starts at 0 and grows as it happens:
    :func:`add_spend`), after marking the aide's cycles whose worker died as ``killed``."""
    table = AIDE_TABLES.aide_cycles
    with store.write() as connection:
        _mark_killed(connection, aide, now)
        result = connection.execute(
            insert(table).values(
                entity_id=aide.entity_id,
                aide_id=aide.id,
                started_at=now,
                status="running",
                owner=owner,
                heartbeat_at=now,
                cost_usd=0.0,
            )
        )
        return _new_id(result)


# A running cycle whose worker is on another machine (its liveness cannot be checked) and that
# wrote nothing for this long is taken for dead. Spend is written at every model call and
# leases are renewed every 5 minutes, so a live cycle is never this quiet.
SILENT_CYCLE = timedelta(hours=6)


def _mark_killed(connection: Connection, aide: AideRow, now: datetime) -> None:
    from kgot.persistence import owner_state

    table = AIDE_TABLES.aide_cycles
    rows = connection.execute(
        select(table.c.id, table.c.owner, table.c.heartbeat_at, table.c.started_at).where(
            table.c.aide_id == aide.id, table.c.status == "running"
        )
    ).all()
    for row in rows:
        last = as_utc(row.heartbeat_at) or as_utc(row.started_at) or now
        if owner_state(row.owner) == "gone" or last <= now - SILENT_CYCLE:
            connection.execute(
                update(table)
                .where(table.c.id == row.id, table.c.status == "running")
                .values(
                    status="killed",
                    finished_at=last,
                    stop_reason=(
                        "its worker died (killed or crashed); the spend shown is what it "
                        "had recorded by its last model call"
                    ),
                )
            )


def finish_cycle(store: Store, cycle_id: int, values: Mapping[str, Any]) -> None:
    table = AIDE_TABLES.aide_cycles
    with store.write() as connection:
        connection.execute(update(table).where(table.c.id == cycle_id).values(**values))


def add_spend(
    store: Store,
    cycle_id: int,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
    cost_usd: float | None,
    now: datetime,
) -> None:
    """Add one model call's usage to a running cycle, so a cycle killed before its end still
    shows (and budgets still count) what it spent. ``cost_usd=None`` (an unknown price) makes
    the cycle's cost unknown, as in its final figures."""
    table = AIDE_TABLES.aide_cycles
    cost = (
        null()
        if cost_usd is None
        else case((table.c.cost_usd.is_(None), null()), else_=table.c.cost_usd + cost_usd)
    )
    with store.write() as connection:
        connection.execute(
            update(table)
            .where(table.c.id == cycle_id, table.c.status == "running")
            .values(
                llm_calls=table.c.llm_calls + calls,
                input_tokens=table.c.input_tokens + input_tokens,
                output_tokens=table.c.output_tokens + output_tokens,
                cost_usd=cost,
                heartbeat_at=now,
            )
        )


def cycle_spend(store: Store, cycle_id: int) -> Any:
    """The spend a cycle recorded so far (``llm_calls``, ``input_tokens``, ``output_tokens``,
    ``cost_usd``), or ``None`` when there is no such cycle."""
    table = AIDE_TABLES.aide_cycles
    with store.read() as connection:
        return connection.execute(
            select(
                table.c.llm_calls, table.c.input_tokens, table.c.output_tokens, table.c.cost_usd
            ).where(table.c.id == cycle_id)
        ).first()


def cycles(store: Store, aide: AideRow, limit: int = 10) -> list[Any]:
    table = AIDE_TABLES.aide_cycles
    with store.read() as connection:
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
    table = AIDE_TABLES.aide_cycles
    with store.read() as connection:
        rows = connection.execute(
            select(table.c.started_at, table.c.report)
            .where(table.c.aide_id == aide.id, table.c.started_at > now - UPKEEP_EVERY)
            .order_by(table.c.id.desc())
        ).all()
    return not any(isinstance(row.report, dict) and row.report.get("upkeep") for row in rows)


def cost_since(
    store: Store, aide: AideRow, since: datetime, *, excluding: int | None = None
) -> float:
    """What the aide's cycles started since ``since`` cost so far (unknown prices count as 0),
    running and killed cycles included: their spend is written as it happens. ``excluding``:
    a cycle left out (the one asking, which counts its own spend itself)."""
    table = AIDE_TABLES.aide_cycles
    query = select(func.coalesce(func.sum(table.c.cost_usd), 0.0)).where(
        table.c.aide_id == aide.id, table.c.started_at >= since
    )
    if excluding is not None:
        query = query.where(table.c.id != excluding)
    with store.read() as connection:
        total = connection.execute(query).scalar()
    return float(total or 0.0)


# ---------------------------------------------------------------------------- deliveries

# A failed delivery is tried again after 1 minute, then 2, 4, … at most 6 hours apart, up to
# MAX_DELIVERIES tries in all (the tenth about 15 hours after the first): an output down for
# an afternoon still gets its digests, and idle cycles do not burn the tries in minutes.
RETRY_FIRST = timedelta(minutes=1)
RETRY_MAX = timedelta(hours=6)
# How long one worker's claim on a delivery holds: longer than a delivery's own retries
# (outputs.DEFAULT_POLICY gives up after 120 s) with room to record the outcome.
DELIVERY_CLAIM = timedelta(minutes=10)


def retry_delay(tries: int) -> timedelta:
    """How long after its ``tries``-th failed try a delivery is tried again."""
    return min(RETRY_MAX, RETRY_FIRST * 2 ** max(0, tries - 1))


def delivery_state(store: Store, output_id: int, delivery_key: str) -> Any:
    """The delivery log's row for this output and key (``ok``, ``attempts``, ``error``,
    ``next_attempt_at``, ``claim_owner``), or ``None``."""
    table = AIDE_TABLES.aide_deliveries
    with store.read() as connection:
        return connection.execute(
            select(
                table.c.ok,
                table.c.attempts,
                table.c.error,
                table.c.next_attempt_at,
                table.c.claim_owner,
            ).where(table.c.output_id == output_id, table.c.delivery_key == delivery_key)
        ).first()


def recent_digests(
    store: Store, aide: AideRow, limit: int
) -> list[tuple[int, datetime | None, dict[str, Any]]]:
    """``(cycle id, start, digest)`` of the aide's last ``limit`` cycles that made a digest,
    oldest first (cycles that made none do not count: idle cycles never push an undelivered
    digest out of the retry window)."""
    table = AIDE_TABLES.aide_cycles
    with store.read() as connection:
        rows = connection.execute(
            select(table.c.id, table.c.started_at, table.c.report)
            .where(table.c.aide_id == aide.id, table.c.made_digest == 1)
            .order_by(table.c.id.desc())
            .limit(limit)
        ).all()
    made = [
        (row.id, as_utc(row.started_at), row.report["digest"])
        for row in rows
        if isinstance(row.report, dict) and row.report.get("digest")
    ]
    return made[::-1]


def claim_delivery(
    store: Store,
    aide: AideRow,
    output_id: int,
    delivery_key: str,
    cycle_id: int,
    *,
    owner: str,
    now: datetime,
    at_most_once: bool,
) -> bool:
    """Claim the delivery of ``delivery_key`` to an output for ``owner`` before sending it;
    ``False`` when it is not to be sent now: delivered, given up on, waiting for its next try
    (backoff), or claimed by another live worker.

    The claim is one transaction (on PostgreSQL the log row is locked, a new row is inserted
    with ``ON CONFLICT DO NOTHING``), so of several workers exactly one sends. A claim left by
    a worker that died is taken over; for an ``at_most_once`` output (email: a message cannot
    be recalled, and a worker that died while sending may have sent it) it is given up on
    instead, saying why.
    """
    from kgot.persistence import owner_state

    table, outputs_table = AIDE_TABLES.aide_deliveries, AIDE_TABLES.aide_outputs
    expires = now + DELIVERY_CLAIM
    with store.write() as connection:
        if (
            connection.execute(
                select(outputs_table.c.id).where(
                    outputs_table.c.id == output_id, outputs_table.c.aide_id == aide.id
                )
            ).first()
            is None
        ):
            return False  # removed meanwhile (`kgot aide output remove`)
        query = select(table).where(
            table.c.output_id == output_id, table.c.delivery_key == delivery_key
        )
        if connection.dialect.name == "postgresql":
            query = query.with_for_update()
        row = connection.execute(query).first()
        if row is None:
            inserted = connection.execute(
                insert_new(connection, table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    output_id=output_id,
                    delivery_key=delivery_key,
                    cycle_id=cycle_id,
                    ok=0,
                    attempts=0,
                    delivered_at=now,
                    claim_owner=owner,
                    claim_expires_at=expires,
                )
            ).first()
            return inserted is not None  # none: another worker inserted it first
        if row.ok or row.attempts >= MAX_DELIVERIES:
            return False
        waiting = as_utc(row.next_attempt_at)
        if waiting is not None and waiting > now:
            return False
        if row.claim_owner is not None:
            held_until = as_utc(row.claim_expires_at) or now
            if owner_state(row.claim_owner) != "gone" and held_until > now:
                return False  # another worker is sending it now
            if at_most_once:
                connection.execute(
                    update(table)
                    .where(table.c.id == row.id, _same(table.c.claim_owner, row.claim_owner))
                    .values(
                        attempts=MAX_DELIVERIES,
                        claim_owner=None,
                        claim_expires_at=None,
                        error=(
                            "its worker died while sending it, so it may have been sent; "
                            "email is not sent twice: check the recipients' inboxes"
                        ),
                    )
                )
                return False
        return bool(
            connection.execute(
                update(table)
                .where(table.c.id == row.id, _same(table.c.claim_owner, row.claim_owner))
                .values(claim_owner=owner, claim_expires_at=expires)
            ).rowcount
        )


def release_delivery(store: Store, output_id: int, delivery_key: str, *, owner: str) -> None:
    """Drop ``owner``'s claim on a delivery without counting a try (it was stopped)."""
    table = AIDE_TABLES.aide_deliveries
    with store.write() as connection:
        connection.execute(
            update(table)
            .where(
                table.c.output_id == output_id,
                table.c.delivery_key == delivery_key,
                table.c.claim_owner == owner,
            )
            .values(claim_owner=None, claim_expires_at=None)
        )


def record_delivery(
    store: Store,
    output_id: int,
    delivery_key: str,
    *,
    owner: str,
    ok: bool,
    error: str | None,
    now: datetime,
) -> None:
    """Log one try of a delivery ``owner`` claimed (:func:`claim_delivery`), however many
    requests the output's own retries made, and release the claim; a failed try waits
    :func:`retry_delay` before the next. Nothing is logged when the claim is gone: the output
    was removed meanwhile (its log went with it)."""
    table = AIDE_TABLES.aide_deliveries
    held = (
        (table.c.output_id == output_id)
        & (table.c.delivery_key == delivery_key)
        & (table.c.claim_owner == owner)
    )
    with store.write() as connection:
        tries = connection.execute(select(table.c.attempts).where(held)).scalar()
        if tries is None:
            return
        tries += 1
        connection.execute(
            update(table)
            .where(held)
            .values(
                ok=int(ok),
                attempts=tries,
                error=error,
                delivered_at=now,
                claim_owner=None,
                claim_expires_at=None,
                next_attempt_at=None if ok else now + retry_delay(tries),
            )
        )


def _new_id(result: Any) -> int:
    """The id an insert gave its row."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])
