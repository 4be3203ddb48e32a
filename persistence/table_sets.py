"""Table sets: how a package declares the tables it keeps in the store and the migrations that
make them.

The store owns the graph (entities, types, nodes, edges, commits), runs and the upkeep rows
(:mod:`kgot.persistence.schema`). A package above it that keeps rows of its own (the aides,
the memory's embeddings, a plugin) declares them in a :class:`TableSet` and registers it as an
entry point of the group :data:`ENTRY_POINT_GROUP` in its distribution's metadata::

    [project.entry-points."kgot.tables"]
    aides = "kgot.aides.schema:TABLE_SET"

:func:`~kgot.persistence.open_store` loads every registered set before it migrates, so a
database is never brought to a version whose tables a set it did not load would have made.
Why entry points and not an import from here: ``persistence`` sits below every package that
owns tables and must not import them (``lint-imports``); why not registration at import time:
which packages happen to be imported when a store is opened would then decide which tables it
gets.

Migrations share one numbered history (``kgot_migrations``): a set's migration takes the next
free version of the whole store, whoever owns the versions before it. A version may have parts
from several sets (version 2 does: it was written before tables had owners); its parts run in
the order of :func:`table_sets` and the database records the version once, with the parts'
descriptions joined by ", ". A version no loaded set provides is refused as an incomplete
installation (an entry point missing from stale metadata), never skipped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from sqlalchemy import Connection, MetaData, Table

from kgot.errors import ConfigError
from kgot.persistence.schema import define_tables

ENTRY_POINT_GROUP = "kgot.tables"
CORE_OWNER = "kgot.persistence"


@dataclass(frozen=True)
class Migration:
    """One numbered step of the store's schema: ``apply`` runs in the migrating transaction
    (after every lower version) and may only add tables, nullable columns, indexes and rows, or
    move data without dropping it. Never edit or renumber one that was released."""

    version: int
    description: str
    apply: Callable[[Connection], None]


@dataclass(frozen=True)
class TableSet:
    """The tables one package keeps in the store.

    Attributes:
        owner: the owning package (``kgot.aides``); unique among the registered sets.
        define: adds the package's tables, as of a schema version, to a ``MetaData`` that
            already holds the store's own tables and those of every set in ``requires``, and
            returns them by short name (parents before children). Frozen for every version
            below the set's last migration, like the migrations themselves.
        migrations: the steps that make and change the tables, in version order.
        requires: owners whose tables these refer to (defined and migrated first).
    """

    owner: str
    define: Callable[[MetaData, int], Mapping[str, Table]]
    migrations: tuple[Migration, ...]
    requires: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        """The last version this set has a migration for (0: none)."""
        return max((m.version for m in self.migrations), default=0)


def tables_on_first_use(
    namespace: dict[str, Any],
    table_set: TableSet,
    published: Mapping[str, Callable[[dict[str, Table]], object]],
    *,
    required: Sequence[TableSet] = (),
) -> Callable[[str], object]:
    """A module ``__getattr__`` (PEP 562) that gives the module of ``table_set`` its tables as
    this kgot reads and writes them, defined the first time one of ``published`` is read.

    Every store opening imports each set's module for its ``TABLE_SET``; only code that reads
    or writes the rows needs the tables themselves, so they are defined then (a few ms of CPU),
    once. The tables are ``table_set``'s at its last version, by short name, on a ``MetaData``
    of their own that also holds the store's tables and those of ``required``: the sets
    ``table_set`` requires, passed in by its module (looking them up among the installed sets
    would import every package that keeps tables from inside the import of one of them).

    Args:
        namespace: the module's ``globals()``; each published value is stored there, so the
            hook runs once.
        published: global name → how to make it from the tables
            (``{"AIDE_TABLES": lambda t: SimpleNamespace(**t)}``).

    Raises:
        ValueError: ``required`` is not the sets ``table_set`` requires.
    """
    if sorted(s.owner for s in required) != sorted(table_set.requires):
        raise ValueError(
            f"{table_set.owner} requires the tables of {list(table_set.requires)}; pass those "
            "table sets as required"
        )
    module = namespace["__name__"]

    def module_getattr(name: str) -> object:
        if name not in published:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        metadata = MetaData()
        define_tables(metadata)
        for other in required:
            other.define(metadata, other.version)
        tables = dict(table_set.define(metadata, table_set.version))
        namespace.update({key: make(tables) for key, make in published.items()})
        return namespace[name]

    return module_getattr


@dataclass(frozen=True)
class SchemaStep:
    """One version of the whole store: its parts (set by set) and what the database records."""

    version: int
    description: str
    parts: tuple[Migration, ...]

    def apply(self, connection: Connection) -> None:
        for part in self.parts:
            part.apply(connection)


def order_table_sets(core: TableSet, others: Iterable[TableSet]) -> tuple[TableSet, ...]:
    """``core`` first, then ``others`` each after the sets it requires (by owner otherwise).

    Raises:
        ConfigError: two sets share an owner, or one requires a set that is not registered
            (or requires in a circle).
    """
    pending: dict[str, TableSet] = {}
    for table_set in others:
        if table_set.owner == core.owner or table_set.owner in pending:
            raise ConfigError(
                f"two table sets are registered for {table_set.owner} (entry point group "
                f"{ENTRY_POINT_GROUP}); uninstall the distribution that registers the second"
            )
        pending[table_set.owner] = table_set
    ordered = [core]
    placed = {core.owner}
    while pending:
        ready = sorted(o for o, s in pending.items() if set(s.requires) <= placed)
        if not ready:
            owner = min(pending)
            missing = sorted(set(pending[owner].requires) - placed)
            raise ConfigError(
                f"the tables of {owner} need those of {', '.join(missing)}, which no installed "
                f"distribution registers (entry point group {ENTRY_POINT_GROUP}); reinstall "
                "kgot (`pip install -e .` in a checkout)"
            )
        for owner in ready:
            ordered.append(pending.pop(owner))
            placed.add(owner)
    return tuple(ordered)


def schema_steps(table_sets: Iterable[TableSet]) -> tuple[SchemaStep, ...]:
    """The store's versions 1, 2, … with each version's parts in the sets' order.

    Raises:
        ConfigError: a version below the last has no part: a set that owns it is not
            installed, so migrating past it would leave its tables out for good.
    """
    parts: dict[int, list[Migration]] = {}
    for table_set in table_sets:
        for migration in table_set.migrations:
            parts.setdefault(migration.version, []).append(migration)
    latest = max(parts, default=0)
    missing = [v for v in range(1, latest + 1) if v not in parts]
    if missing:
        raise ConfigError(
            f"no installed table set provides migration {', '.join(map(str, missing))} of "
            f"{latest} (entry point group {ENTRY_POINT_GROUP}): kgot's installation is "
            "incomplete; reinstall it (`pip install -e .` in a checkout) before opening a store"
        )
    return tuple(
        SchemaStep(v, ", ".join(m.description for m in parts[v]), tuple(parts[v]))
        for v in range(1, latest + 1)
    )


@functools.cache
def installed_table_sets() -> tuple[TableSet, ...]:
    """The table sets registered by installed distributions (entry points), loaded once per
    process; the store's own set is not among them.

    Raises:
        ConfigError: an entry point does not name a :class:`TableSet`.
    """
    found = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        table_set = point.load()
        if not isinstance(table_set, TableSet):
            raise ConfigError(
                f"entry point {point.name} = {point.value} (group {ENTRY_POINT_GROUP}) is not "
                "a kgot.persistence.TableSet; fix or uninstall the distribution that declares it"
            )
        found.append(table_set)
    return tuple(found)
