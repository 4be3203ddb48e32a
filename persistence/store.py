"""The store: entities (tenants), their sessions, global and entity types, and runs."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from kgot.config import DEFAULT_LIMITS, StoreLimits
from kgot.errors import (
    EntityNameError,
    EntityNotFoundError,
    StoreError,
    StoreLocationError,
    UsageError,
)
from kgot.persistence.catalog import (
    TypeCatalog,
    TypeDef,
    TypeKind,
    TypeSpec,
    load_type_file,
)
from kgot.persistence.counts import edge_counts, node_counts
from kgot.persistence.engine import (
    StoreBusyError,
    create_store_engine,
    read_transaction,
    write_transaction,
)
from kgot.persistence.migrations import migrate, owned_tables, store_not_found
from kgot.persistence.owner import Owner, current_owner, owner_state
from kgot.persistence.schema import TABLES
from kgot.persistence.session import EntitySession, StoreContext
from kgot.persistence.target import (
    StoreNotFoundError,
    StoreTarget,
    StoreUnusableError,
    parse_target,
    prepare_sqlite_folder,
    refuse_file_in_path,
)
from kgot.persistence.timeutil import as_utc, iso, utc_now
from kgot.persistence.types_store import TypeHistory, TypeScope, create_type, precheck

# Entity names are identifiers typed in commands and listed side by side, so two of them must
# never look alike: ASCII only (Latin `A`, Cyrillic `А` and fullwidth `Ａ` would be three
# tenants), and unique without regard to case (see `_name_taken`).
_ENTITY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.@_-]*(?: [A-Za-z0-9.@_-]+)*")
MAX_ENTITY_NAME = 128
_PG_NAMES_LOCK = (
    0x6B676F74_6E616D65  # pg_advisory_xact_lock key ("kgotname"): one creation at a time
)
# A question (`kgot ask`), an ingestion (`kgot ingest`, the MCP server's writes) or an aide's
# cycle; the last two end ``done`` where a question ends ``answered`` or ``forced``.
RUN_KINDS = ("ask", "ingest", "aide_cycle")
RUN_STATUSES = ("running", "answered", "forced", "done", "failed", "interrupted")


class RunStillRunningError(UsageError):
    """A run another live process runs: two processes must not continue one run, both would
    write its checkpoint and graph (bad input: exit code 2)."""

    def __init__(self, run_id: str, pid: int | str) -> None:
        super().__init__(
            f"run {run_id} is still running (process {pid} on this machine); wait for it to "
            f"end, or stop it (kill {pid}) and resume it then"
        )
        self.run_id = run_id
        self.pid = pid


def refuse_live_owner(run_id: str, owner: str | None) -> None:
    """Raise :class:`RunStillRunningError` when ``owner`` (a running run's recorded process)
    is another process that is alive. This process may take its own run back; an owner that
    cannot be judged (another host) is not refused, or a run left by a dead machine could
    never be resumed."""
    if owner is None or owner == current_owner() or owner_state(owner) != "alive":
        return
    process = Owner.parse(owner)
    raise RunStillRunningError(run_id, process.pid if process else "?")


@dataclass(frozen=True)
class EntityInfo:
    """An entity (tenant) and the size of its current graph."""

    name: str
    description: str
    version: int
    nodes: int
    edges: int
    created_at: datetime | None
    updated_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = iso(self.created_at)
        data["updated_at"] = iso(self.updated_at)
        return data


@dataclass(frozen=True)
class RunRecord:
    """One run (a question, an ingestion or an aide's cycle) as recorded by the store."""

    run_id: str
    kind: str  # one of RUN_KINDS
    question: str
    entity: str | None
    status: str
    answer: str | None
    options: Mapping[str, Any]
    totals: Mapping[str, Any] | None
    attempts: int
    started_at: datetime | None
    updated_at: datetime | None
    finished_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "question": self.question,
            "entity": self.entity,
            "status": self.status,
            "answer": self.answer,
            "options": dict(self.options),
            "totals": dict(self.totals) if self.totals is not None else None,
            "attempts": self.attempts,
            "started_at": iso(self.started_at),
            "updated_at": iso(self.updated_at),
            "finished_at": iso(self.finished_at),
        }


@dataclass(frozen=True)
class RunCommit:
    """One commit a run wrote: what `kgot runs show` lists as what the run changed."""

    entity: str
    version: int
    step: str
    source_ref: str | None
    summary: str
    committed_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["committed_at"] = iso(self.committed_at)
        return data


def open_store(url: str, *, create: bool = True, limits: StoreLimits | None = None) -> Store:
    """Open (creating and migrating when needed) the store at a SQLite path or PostgreSQL URL.

    Args:
        url: a SQLite path or a ``postgresql://`` URL.
        create: ``False`` for callers that only look: a location without a kgot database
            (a mistyped path, schema or URL) raises instead of getting a new, empty store, and
            nothing (file, directory, schema) is created. An existing older store is still
            migrated.
        limits: caps on commits and imports (``[store]`` settings; default
            :data:`~kgot.config.DEFAULT_LIMITS`).

    Raises:
        StoreNotFoundError: ``create`` is false and there is no kgot database at ``url``.
        StoreUnusableError: the database cannot be reached or opened (one line naming the
            location, password masked, and the fix), its schema is newer than this kgot, or
            a SQLite file's folder does not exist (only the default data folder is created).
        StoreBusyError: other writers held the database locked past the busy timeout.
    """
    target = parse_target(url)
    if target.sqlite_path is not None:
        _check_sqlite_file(target, create=create)
    engine = create_store_engine(target)
    try:
        migrate(engine, target, create=create)
    except (StoreNotFoundError, StoreBusyError, StoreLocationError):
        engine.dispose()
        raise
    except StoreError as error:
        # At opening, a store error is the location's (a server that is down, a file that is
        # not a database, no permission): bad configuration, not a failed command.
        engine.dispose()
        raise StoreUnusableError(str(error)) from None
    except BaseException:
        engine.dispose()
        raise
    return Store(StoreContext(engine=engine, target=target, limits=limits or DEFAULT_LIMITS))


def _check_sqlite_file(target: StoreTarget, *, create: bool) -> None:
    """Refuse a SQLite location that cannot hold a store before any connection is made; with
    ``create``, make a missing file (private) in its folder, which must exist (see
    :func:`~kgot.persistence.target.prepare_sqlite_folder`).

    Raises:
        StoreNotFoundError: no file there and ``create`` is false.
        StoreUnusableError: the location is a directory or another non-file, or its folder is
            missing or not a folder.
    """
    path = target.sqlite_path
    assert path is not None
    if path.is_dir():
        raise StoreUnusableError(
            f"{target.display} is a directory, not a database file (set KGOT_DB or --db to a "
            f"file, e.g. {path / 'kgot.db'})"
        )
    if path.exists() and not path.is_file():
        raise StoreUnusableError(
            f"{target.display} is not a regular file (set KGOT_DB or --db to a database file)"
        )
    if path.is_file():
        return
    refuse_file_in_path(path, target.display)
    if not create:
        raise store_not_found(target)
    prepare_sqlite_folder(path, target.display)
    create_private_file(path, target.display)


def create_private_file(path: Path, display: str) -> None:
    """Create a new SQLite file readable by its owner only (it holds every entity's facts;
    SQLite gives its -wal and -shm files the same mode). An existing file is left as it is.

    Raises:
        StoreUnusableError: the file cannot be created (no permission, a read-only disk).
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as error:
        raise StoreUnusableError(
            f"cannot create database {display}: {error.strerror or error} (set KGOT_DB or "
            "--db to a writable path)"
        ) from None


class Store:
    """Everything kgot persists. Use :func:`open_store`; close it when done (or use ``with``)."""

    def __init__(self, context: StoreContext) -> None:
        self._context = context

    @property
    def target(self) -> StoreTarget:
        return self._context.target

    @property
    def location(self) -> str:
        """Where the store lives, password masked."""
        return self._context.target.display

    @property
    def limits(self) -> StoreLimits:
        """The caps on commits and imports this store was opened with."""
        return self._context.limits

    def close(self) -> None:
        """Release the connection pool (sessions of this store stop working)."""
        self._context.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    # ------------------------------------------------------------------------ entities

    def create_entity(
        self,
        name: str,
        description: str = "",
        *,
        types: Sequence[TypeSpec | Mapping[str, Any]] = (),
        shadow: bool = False,
    ) -> EntityInfo:
        """Create an empty entity, with its own ``types`` (created by ``user``) if given — all
        in one transaction: on any error neither the entity nor a type exists.

        Raises:
            StoreError: the name is invalid or taken.
            TypeRejectedError: a type breaks a rule; nothing was stored.
        """
        _check_entity_name(name)
        parsed = [s if isinstance(s, TypeSpec) else TypeSpec.from_mapping(s) for s in types]
        precheck(parsed, created_by="user", justification="")
        now = utc_now()
        try:
            with self.write() as connection:
                self._refuse_taken_name(connection, name)
                entity_id = connection.execute(
                    insert(TABLES.entities)
                    .values(
                        name=name,
                        description=description,
                        version=0,
                        created_at=now,
                        updated_at=now,
                    )
                    .returning(TABLES.entities.c.id)
                ).scalar_one()
                for spec in parsed:
                    create_type(
                        connection,
                        spec,
                        entity_id=entity_id,
                        entity_name=name,
                        created_by="user",
                        justification="",
                        run_id=None,
                        cache=self._context.type_cache,
                        shadow=shadow,
                    )
        except IntegrityError:
            raise _taken(name, name) from None
        return EntityInfo(name, description, 0, 0, 0, now, now)

    def _refuse_taken_name(self, connection: Connection, name: str) -> None:
        """Raise when an entity's name equals ``name`` but for case. Creations take turns
        (SQLite's write lock; an advisory lock on PostgreSQL), so two writers cannot both
        pass this check with ``A`` and ``a``."""
        if not self._context.target.is_sqlite:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_NAMES_LOCK})
        existing = _name_without_case(connection, name)
        if existing is not None:
            raise _taken(name, existing)

    def list_entities(self) -> list[EntityInfo]:
        """Every entity with its version and current node and edge counts, by name."""
        entities = TABLES.entities
        now = utc_now()
        with self.read() as connection:
            rows = connection.execute(select(entities).order_by(entities.c.name)).all()
            nodes = node_counts(connection, now)
            edges = edge_counts(connection, now)
        return [
            EntityInfo(
                name=row.name,
                description=row.description,
                version=row.version,
                nodes=nodes.get(row.id, 0),
                edges=edges.get(row.id, 0),
                created_at=as_utc(row.created_at),
                updated_at=as_utc(row.updated_at),
            )
            for row in rows
        ]

    def get_entity(self, name: str) -> EntityInfo:
        """One entity.

        Raises:
            EntityNotFoundError: no entity has that name.
        """
        now = utc_now()
        with self.read() as connection:
            row = self._entity_row(connection, name)
            nodes = node_counts(connection, now, row.id)[row.id]
            edges = edge_counts(connection, now, row.id)[row.id]
        return EntityInfo(
            row.name,
            row.description,
            row.version,
            nodes,
            edges,
            as_utc(row.created_at),
            as_utc(row.updated_at),
        )

    def delete_entity(self, name: str) -> None:
        """Delete an entity with all its facts, history, own types, runs (their recorded
        events go with them), their checkpoints and its rows in every other package's tables
        (aides, embeddings, …: see :class:`~kgot.persistence.TableSet`).

        The runs' checkpoints (which hold the entity's graph state) are purged first, while the
        entity is locked: when they cannot be, nothing is deleted and the error says so, so
        the same call can be retried — never an entity gone with its checkpoints left behind.
        Deleted content is overwritten in the SQLite files (``secure_delete``).

        Raises:
            EntityNotFoundError: no entity has that name.
            StoreError: the checkpoints could not be purged (nothing was deleted).
        """
        with self.write() as connection:
            row = self._entity_row(connection, name, lock=True)
            runs = TABLES.runs
            run_ids = list(
                connection.execute(
                    select(runs.c.run_id).where(runs.c.entity_id == row.id)
                ).scalars()
            )
            if run_ids:
                from kgot.persistence.checkpoints import purge_checkpoints

                purge_checkpoints(self._context.target, run_ids)
            # Other packages' rows first, children before parents (the foreign keys cascade
            # too; explicit deletes keep the order and the cost plain).
            owned = [t for t in reversed(owned_tables()) if "entity_id" in t.c]
            for table in (
                *owned,
                TABLES.edges,
                TABLES.nodes,
                TABLES.commits,
                TABLES.types,
                TABLES.fact_use,
                TABLES.suggestions,
                runs,
            ):
                connection.execute(delete(table).where(table.c.entity_id == row.id))
            connection.execute(delete(TABLES.entities).where(TABLES.entities.c.id == row.id))

    def session(self, entity: str) -> EntitySession:
        """A session on one entity's graph.

        Raises:
            EntityNotFoundError: no entity has that name (the message says how to create it).
        """
        with self.read() as connection:
            row = self._entity_row(connection, entity)
        return EntitySession(self._context, row.id, row.name, row.version)

    # ------------------------------------------------------------------------ types

    def type_catalog(self, entity: str | None = None) -> TypeCatalog:
        """Types visible to ``entity`` (its own plus global), or the global types only.

        Raises:
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self._types(entity).catalog()

    def create_types(
        self,
        specs: Sequence[TypeSpec | Mapping[str, Any]],
        *,
        entity: str | None = None,
        created_by: str = "user",
        justification: str = "",
        run_id: str | None = None,
        shadow: bool = False,
    ) -> list[TypeDef]:
        """Add types, all or none (later specs may refer to node types added by earlier ones).

        With ``entity`` and ``shadow=True`` an entity type may take the name of a global type
        and replaces it for that entity (the global type stays for everyone else).

        Raises:
            TypeRejectedError: a spec breaks a rule or its name is taken; nothing was stored.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self._types(entity).create(
            specs,
            created_by=created_by,
            justification=justification,
            run_id=run_id,
            shadow=shadow,
        )

    def create_type(
        self,
        spec: TypeSpec | Mapping[str, Any],
        *,
        entity: str | None = None,
        created_by: str = "user",
        justification: str = "",
        run_id: str | None = None,
        shadow: bool = False,
    ) -> TypeDef:
        """Add one type (global unless ``entity`` is given; see :meth:`create_types`).

        Raises:
            TypeRejectedError: a rule is broken or the name is taken; nothing was stored.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self.create_types(
            [spec],
            entity=entity,
            created_by=created_by,
            justification=justification,
            run_id=run_id,
            shadow=shadow,
        )[0]

    def load_types(
        self, path: Path, *, entity: str | None = None, shadow: bool = False
    ) -> list[TypeDef]:
        """Add the types of a JSON or YAML file (all or none), ``created_by=user``.

        Raises:
            TypeRejectedError, UsageError: the file or a definition in it is invalid.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self.create_types(
            load_type_file(path), entity=entity, created_by="user", shadow=shadow
        )

    def update_types(
        self,
        specs: Sequence[TypeSpec | Mapping[str, Any]],
        *,
        entity: str | None = None,
        created_by: str = "user",
        justification: str = "",
        run_id: str | None = None,
    ) -> list[TypeDef]:
        """Store the next version of existing types in this scope, all or none.

        Facts keep the type version they were validated against; their next change must
        satisfy the new version.

        Raises:
            TypeRejectedError: a type does not exist in this scope, or a new definition breaks
                a rule; nothing was stored.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self._types(entity).update(
            specs, created_by=created_by, justification=justification, run_id=run_id
        )

    def update_type(
        self,
        spec: TypeSpec | Mapping[str, Any],
        *,
        entity: str | None = None,
        created_by: str = "user",
        justification: str = "",
        run_id: str | None = None,
    ) -> TypeDef:
        """Store the next version of one existing type (see :meth:`update_types`).

        Raises:
            TypeRejectedError: no such type in this scope, or the new definition breaks a rule.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self.update_types(
            [spec],
            entity=entity,
            created_by=created_by,
            justification=justification,
            run_id=run_id,
        )[0]

    def remove_type(
        self, name: str, *, entity: str | None = None, kind: TypeKind | None = None
    ) -> int:
        """Retire a type in this scope (history kept); returns the retired version.

        An entity's type is refused while its current facts use it. Retiring a global type
        does not look into entities (no code path reads across them): their facts keep the
        label, and their next change to such a fact is refused until a type of that name
        exists again.

        Raises:
            TypeRejectedError: no such type here, or it is still in use.
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self._types(entity).remove(name, kind)

    def type_history(self, name: str, *, entity: str | None = None) -> TypeHistory:
        """Every version of a type in this scope: (definition, retired_at, retired_reason).

        Raises:
            EntityNotFoundError: ``entity`` does not exist.
        """
        return self._types(entity).history(name)

    # ------------------------------------------------------------------------ runs

    def start_run(
        self,
        run_id: str,
        question: str,
        entity: str | None,
        options: Mapping[str, Any],
        *,
        kind: str = "ask",
    ) -> None:
        """Record that a run started, or that a resumed run started again.

        The run is claimed for this process in the same transaction that checks it is not
        running elsewhere, so of two processes starting one run at once exactly one goes on.

        Args:
            question: what the run is about: the question, or what an ingestion or a cycle
                is of (a line for `kgot runs list`).
            kind: one of :data:`RUN_KINDS`.

        Raises:
            EntityNotFoundError: ``entity`` does not exist.
            StoreError: the run id belongs to a run of another entity or kind, or ``kind`` is
                unknown.
            RunStillRunningError: another live process on this machine runs it.
        """
        if kind not in RUN_KINDS:
            raise StoreError(f"unknown run kind {kind!r} (use one of {RUN_KINDS})")
        now = utc_now()
        runs = TABLES.runs
        for attempt in range(2):
            try:
                with self.write() as connection:
                    entity_id = None if entity is None else self._entity_row(connection, entity).id
                    query = select(
                        runs.c.entity_id, runs.c.kind, runs.c.status, runs.c.owner
                    ).where(runs.c.run_id == run_id)
                    # SQLite's write transactions hold the database lock from BEGIN IMMEDIATE;
                    # PostgreSQL needs the row locked so a second starter waits for our claim
                    # and then reads it.
                    if not self._context.target.is_sqlite:
                        query = query.with_for_update()
                    existing = connection.execute(query).first()
                    if existing is None:
                        connection.execute(
                            insert(runs).values(
                                run_id=run_id,
                                kind=kind,
                                entity_id=entity_id,
                                question=question,
                                options=dict(options),
                                status="running",
                                attempts=1,
                                started_at=now,
                                updated_at=now,
                                owner=current_owner(),
                            )
                        )
                        return
                    if existing.entity_id != entity_id:
                        raise StoreError(
                            f"run {run_id!r} was started for another entity; resume it with "
                            "the same --entity (or none) as the first time"
                        )
                    if existing.kind != kind:
                        raise StoreError(
                            f"run id {run_id!r} is taken by a run of kind {existing.kind!r} "
                            f"(this one is {kind!r}); choose another run id"
                        )
                    if existing.status == "running":
                        refuse_live_owner(run_id, existing.owner)
                    connection.execute(
                        update(runs)
                        .where(runs.c.run_id == run_id)
                        .values(
                            status="running",
                            attempts=runs.c.attempts + 1,
                            updated_at=now,
                            finished_at=None,
                            owner=current_owner(),
                        )
                    )
                    return
            except IntegrityError:
                if attempt:
                    raise
                # Another process inserted the same run id between our check and insert; the
                # second attempt reads its row (and refuses if that process still runs it).

    def finish_run(
        self, run_id: str, status: str, answer: str | None, totals: Mapping[str, Any]
    ) -> None:
        """Record how a run ended (``answered``, ``forced``, ``failed`` or ``interrupted``).

        Raises:
            StoreError: no run has that id, or the status is unknown.
        """
        if status not in RUN_STATUSES:
            raise StoreError(f"unknown run status {status!r} (use one of {RUN_STATUSES})")
        runs = TABLES.runs
        now = utc_now()
        with self.write() as connection:
            result = connection.execute(
                update(runs)
                .where(runs.c.run_id == run_id)
                .values(
                    status=status,
                    answer=answer,
                    totals=_plain_json(totals),
                    updated_at=now,
                    finished_at=now,
                    owner=None,
                )
            )
            if result.rowcount == 0:
                raise StoreError(f"no run {run_id!r} was started in {self.location}")

    def check_not_running(self, run_id: str) -> None:
        """Refuse early when another live process on this machine runs ``run_id`` (a quick look
        before a run is set up; :meth:`start_run` checks again while it claims the run).

        Raises:
            RunStillRunningError: it does.
        """
        runs = TABLES.runs
        with self.read() as connection:
            owner = connection.execute(
                select(runs.c.owner).where(runs.c.run_id == run_id, runs.c.status == "running")
            ).scalar()
        refuse_live_owner(run_id, owner)

    def interrupt_dead_runs(self) -> list[str]:
        """Record runs whose process has ended without saying how (killed, crashed, the
        machine restarted) as ``interrupted``, so they show as resumable; return their ids.

        Only processes of this machine can be judged: runs of other hosts stay as they are.
        """
        runs = TABLES.runs
        with self.read() as connection:
            running = connection.execute(
                select(runs.c.run_id, runs.c.owner).where(runs.c.status == "running")
            ).all()
        dead = [row for row in running if owner_state(row.owner) == "gone"]
        marked = []
        for row in dead:
            with self.write() as connection:
                # Only if no process resumed it meanwhile (it would have recorded itself).
                changed = connection.execute(
                    update(runs)
                    .where(
                        runs.c.run_id == row.run_id,
                        runs.c.status == "running",
                        runs.c.owner == row.owner,
                    )
                    .values(status="interrupted", owner=None, updated_at=utc_now())
                ).rowcount
            if changed:
                marked.append(row.run_id)
        return marked

    def list_runs(self, limit: int = 50, entity: str | None = None) -> list[RunRecord]:
        """The newest runs first; only ``entity``'s runs when it is given.

        Raises:
            EntityNotFoundError: ``entity`` does not exist.
        """
        runs, entities = TABLES.runs, TABLES.entities
        with self.read() as connection:
            query = (
                select(runs, entities.c.name.label("entity_name"))
                .select_from(runs.outerjoin(entities, runs.c.entity_id == entities.c.id))
                .order_by(runs.c.started_at.desc(), runs.c.run_id)
                .limit(max(0, limit))
            )
            if entity is not None:
                row = self._entity_row(connection, entity)
                query = query.where(runs.c.entity_id == row.id)
            return [_run_record(row) for row in connection.execute(query)]

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or ``None`` when no run has that id."""
        runs, entities = TABLES.runs, TABLES.entities
        with self.read() as connection:
            row = connection.execute(
                select(runs, entities.c.name.label("entity_name"))
                .select_from(runs.outerjoin(entities, runs.c.entity_id == entities.c.id))
                .where(runs.c.run_id == run_id)
            ).first()
        return _run_record(row) if row is not None else None

    def run_ids(self, prefix: str = "") -> list[str]:
        """The ids of every run whose id starts with ``prefix`` (all runs for ``""``), sorted:
        what resolving an abbreviated id and abbreviating ids uniquely need."""
        runs = TABLES.runs
        query = select(runs.c.run_id).order_by(runs.c.run_id)
        if prefix:
            query = query.where(runs.c.run_id.startswith(prefix, autoescape=True))
        with self.read() as connection:
            found = connection.execute(query).scalars()
            # SQLite's LIKE ignores ASCII case; run ids do not.
            return [run_id for run_id in found if run_id.startswith(prefix)]

    def append_run_events(
        self,
        run_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        recorded_at: Sequence[datetime] | None = None,
    ) -> int:
        """Record ``events`` (JSON-ready dicts, each naming its kind in ``type``) after the
        run's recorded events, in order and in one transaction; return the number of the last
        event the run has (events are numbered 1, 2, 3, … within a run, across resumes).

        Args:
            recorded_at: when each event happened (default: now, for all of them).

        Raises:
            StoreError: no run has that id, an event has no ``type``, or ``recorded_at`` does
                not give one time per event.
        """
        if recorded_at is not None and len(recorded_at) != len(events):
            raise StoreError(
                f"{len(recorded_at)} times given for {len(events)} run events; give one per event"
            )
        kinds = [event.get("type") for event in events]
        if not all(isinstance(kind, str) and kind for kind in kinds):
            raise StoreError(f"a run event of run {run_id!r} has no 'type'; name its kind there")
        table = TABLES.run_events
        with self.write() as connection:
            last = connection.execute(
                select(func.max(table.c.seq)).where(table.c.run_id == run_id)
            ).scalar()
            if last is None:
                last = 0
                if not _run_exists(connection, run_id):
                    raise StoreError(f"no run {run_id!r} was started in {self.location}")
            if not events:
                return int(last)
            now = utc_now()
            connection.execute(
                insert(table),
                [
                    {
                        "run_id": run_id,
                        "seq": last + number,
                        "kind": kind,
                        "event": dict(event),
                        "recorded_at": now if recorded_at is None else recorded_at[number - 1],
                    }
                    for number, (kind, event) in enumerate(zip(kinds, events, strict=True), 1)
                ],
            )
            return int(last) + len(events)

    def run_commits(self, run_id: str) -> list[RunCommit]:
        """The commits ``run_id`` wrote, oldest first (on any entity; none for no such run)."""
        commits, entities = TABLES.commits, TABLES.entities
        with self.read() as connection:
            rows = connection.execute(
                select(commits, entities.c.name.label("entity_name"))
                .join(entities, commits.c.entity_id == entities.c.id)
                .where(commits.c.run_id == run_id)
                .order_by(commits.c.committed_at, commits.c.entity_id, commits.c.version)
            )
            return [
                RunCommit(
                    entity=row.entity_name,
                    version=int(row.version),
                    step=row.step,
                    source_ref=row.source_ref,
                    summary=row.summary,
                    committed_at=as_utc(row.committed_at),
                )
                for row in rows
            ]

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """The events recorded for ``run_id``, in the order they happened (none for a run
        recorded before events were kept, or no run at all)."""
        table = TABLES.run_events
        with self.read() as connection:
            rows = connection.execute(
                select(table.c.event).where(table.c.run_id == run_id).order_by(table.c.seq)
            ).scalars()
            return [dict(event) for event in rows]

    # ------------------------------------------------------------------------ transactions

    def read(self) -> AbstractContextManager[Connection]:
        """A read transaction on the store's database, for a package's own tables (see
        :class:`~kgot.persistence.TableSet`): ``with store.read() as connection: ...``.

        It sees one consistent state (SQLite: a snapshot; PostgreSQL: the rows as of each
        statement, read committed). Store errors are raised as kgot's (a busy database as
        :class:`StoreBusyError`).
        """
        return read_transaction(self._context.engine, self._context.target)

    @contextmanager
    def write(self, *, lock_entity: str | None = None) -> Iterator[Connection]:
        """A write transaction: everything done on the connection is committed together when
        the block ends, or nothing when it raises. Writers take turns (SQLite's write lock is
        taken at the start, so two writers queue instead of failing half-way).

        Args:
            lock_entity: first lock this entity's row until the transaction ends (PostgreSQL
                ``SELECT … FOR UPDATE``; on SQLite the write lock already excludes every other
                writer), so a concurrent :meth:`delete_entity` waits for it or goes first.

        Raises:
            EntityNotFoundError: ``lock_entity`` does not exist (nothing was written).
            StoreBusyError: other writers held the database past the busy timeout.
        """
        with write_transaction(self._context.engine, self._context.target) as connection:
            if lock_entity is not None:
                self._entity_row(connection, lock_entity, lock=True)
            yield connection

    # ------------------------------------------------------------------------ internals

    def _entity_row(self, connection: Connection, name: str, *, lock: bool = False) -> Any:
        entities = TABLES.entities
        query = select(entities).where(entities.c.name == name)
        if lock and not self._context.target.is_sqlite:
            query = query.with_for_update()
        row = connection.execute(query).first()
        if row is None:
            other = _name_without_case(connection, name)
            if other is not None:  # names are unique without regard to case
                raise EntityNotFoundError(
                    f"no entity named {name!r} in {self.location}; did you mean {other!r}?"
                )
            raise EntityNotFoundError(
                f"no entity named {name!r} in {self.location}; create it with "
                f"`kgot entities create {_shell_word(name)}`"
            )
        return row

    def _types(self, entity: str | None) -> TypeScope:
        """The type operations of ``entity`` (the global types for ``None``)."""
        if entity is None:
            return TypeScope(self._context)
        with self.read() as connection:
            row = self._entity_row(connection, entity)
        return TypeScope(self._context, row.id, row.name)


def _name_without_case(connection: Connection, name: str) -> str | None:
    """The name of the entity whose name equals ``name`` without regard to case, if any (there
    is at most one: see :meth:`Store._refuse_taken_name`)."""
    entities = TABLES.entities
    return connection.execute(
        select(entities.c.name).where(func.lower(entities.c.name) == name.lower())
    ).scalar()


def _check_entity_name(name: str) -> None:
    if isinstance(name, str) and len(name) <= MAX_ENTITY_NAME and _ENTITY_NAME.fullmatch(name):
        return
    raise EntityNameError(
        f"invalid entity name {name!r}: use ASCII letters, digits and . @ - _ (single spaces "
        f"between words allowed), starting with a letter or digit, at most {MAX_ENTITY_NAME} "
        f"characters{_name_hint(name)}"
    )


def _name_hint(name: object) -> str:
    """What to type instead: the plain form of fullwidth or compatibility characters, or why
    other scripts are refused."""
    if not isinstance(name, str) or name.isascii():
        return ""
    plain = unicodedata.normalize("NFKC", name)
    if plain != name and _ENTITY_NAME.fullmatch(plain) and len(plain) <= MAX_ENTITY_NAME:
        return f"; did you mean {plain!r}?"
    return (
        " (ASCII only: a letter of another script or width, such as Cyrillic А or fullwidth Ａ, "
        "can look exactly like another entity's name)"
    )


def _taken(name: str, existing: str) -> EntityNameError:
    # A name that is taken is refused like one kgot does not accept: the user picks another.
    if existing == name:
        return EntityNameError(
            f"entity {name!r} already exists (pick another name, or delete it first with "
            f"`kgot entities delete {_shell_word(name)}`)"
        )
    return EntityNameError(
        f"entity {existing!r} already exists, and names are unique without regard to case "
        f"(pick another name than {name!r}, or use {existing!r})"
    )


def _run_record(row: Any) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        kind=row.kind,
        question=row.question,
        entity=row.entity_name,
        status=row.status,
        answer=row.answer,
        options=row.options or {},
        totals=row.totals,
        attempts=row.attempts,
        started_at=as_utc(row.started_at),
        updated_at=as_utc(row.updated_at),
        finished_at=as_utc(row.finished_at),
    )


def _run_exists(connection: Connection, run_id: str) -> bool:
    runs = TABLES.runs
    return (
        connection.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first() is not None
    )


def _plain_json(value: Mapping[str, Any]) -> dict[str, Any]:
    """Totals as plain JSON (dataclass dumps may hold datetimes or other objects)."""
    import json

    return json.loads(json.dumps(dict(value), default=str))


def _shell_word(name: str) -> str:
    return name if " " not in name else f'"{name}"'
