"""The advisor's tables (``kgot_advisor_*``): users, positions, watchlists, briefings, alerts and
the price cache, declared here and registered with the store as a table set (entry point
``advisor`` of the group ``kgot.tables``, after the aides' whose rows they belong to). Their
rows are read and written by :mod:`kgot.aides.advisor.advisor_rows`.

Every row carries its entity and its aide (deleting either deletes the rows). Migration 5
made them; its step lives here, with the tables.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from kgot.aides.schema import TABLE_SET as AIDE_TABLE_SET
from kgot.aides.schema import define_aide_tables
from kgot.persistence import (
    PREFIX,
    JsonValue,
    Migration,
    TableSet,
    Timestamp,
    define_tables,
    sql_list,
    tables_on_first_use,
)

# The schema version the advisor's tables last changed at (their last migration's).
ADVISOR_VERSION = 5


RISK_LEVELS = ("conservative", "moderate", "aggressive")


def define_advisor_tables(metadata: MetaData, version: int = ADVISOR_VERSION) -> dict[str, Table]:
    """The advisor's tables as of schema ``version`` on ``metadata`` (which holds the store's
    own tables and the aide tables), by short name, parents first: none before migration 5.
    User data lives here, never in the graph.

    Every row carries its entity and its aide (deleting either deletes the rows); a user's
    rows carry the user. A user's name is unique within the aide, a symbol once per user's
    positions and watchlist, an alert key once per user (an alert is never made twice), a
    price once per aide, symbol and day.
    """
    if version < 5:
        return {}
    entities = metadata.tables[f"{PREFIX}entities"]
    aides = metadata.tables[f"{PREFIX}aides"]

    def owned(name: str, *columns: Any) -> Table:
        return Table(
            f"{PREFIX}{name}",
            metadata,
            Column("id", Integer, primary_key=True),
            Column("entity_id", ForeignKey(entities.c.id, ondelete="CASCADE"), nullable=False),
            Column("aide_id", ForeignKey(aides.c.id, ondelete="CASCADE"), nullable=False),
            *columns,
            sqlite_autoincrement=True,  # ids are shown and named in commands: never reused
        )

    risks = sql_list(RISK_LEVELS)
    users = owned(
        "advisor_users",
        Column("name", String, nullable=False),
        Column("risk", String(16), nullable=False),
        Column("horizon", String(32), nullable=True),
        Column("goals", JsonValue, nullable=False),  # list of strings
        Column("preferences", JsonValue, nullable=False),  # list of strings
        Column("thresholds", JsonValue, nullable=False),  # alert thresholds set for this user
        Column("created_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        CheckConstraint(f"risk IN ({risks})", name="kgot_advisor_users_risk"),
    )
    Index(f"{PREFIX}advisor_users_uq", users.c.aide_id, users.c.name, unique=True)

    def of_user(name: str, *columns: Any) -> Table:
        return owned(
            name,
            Column("user_id", ForeignKey(users.c.id, ondelete="CASCADE"), nullable=False),
            *columns,
        )

    positions = of_user(
        "advisor_positions",
        Column("symbol", String(32), nullable=False),
        Column("shares", Float, nullable=False),
        Column("avg_cost", Float, nullable=True),
        Column("added_at", Timestamp, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        CheckConstraint("shares > 0", name="kgot_advisor_positions_shares"),
    )
    Index(f"{PREFIX}advisor_positions_uq", positions.c.user_id, positions.c.symbol, unique=True)
    watchlist = of_user(
        "advisor_watchlist",
        Column("symbol", String(32), nullable=False),
        Column("added_at", Timestamp, nullable=False),
    )
    Index(f"{PREFIX}advisor_watchlist_uq", watchlist.c.user_id, watchlist.c.symbol, unique=True)
    briefings = of_user(
        "advisor_briefings",
        Column("created_at", Timestamp, nullable=False),
        Column("cycle_id", Integer, nullable=True),  # NULL: asked for outside a cycle
        Column("budget", Integer, nullable=False),  # the evidence pack's token budget
        Column("pack_key", String(64), nullable=False),  # sha256 of the pack it was made from
        Column("text", Text, nullable=False),
        Column("facts", JsonValue, nullable=False),  # the cited ids, all in the pack
        Column("pack", JsonValue, nullable=False),  # the ids the pack held
        Column("usage", JsonValue, nullable=True),
    )
    Index(f"{PREFIX}advisor_briefings_recent", briefings.c.user_id, briefings.c.id)
    alerts = of_user(
        "advisor_alerts",
        Column("rule", String(32), nullable=False),
        # What makes two alerts the same alert (the rule and the facts behind it): unique per
        # user, so an alert is never made, nor sent, twice.
        Column("alert_key", Text, nullable=False),
        Column("severity", String(8), nullable=False),
        Column("message", Text, nullable=False),
        Column("facts", JsonValue, nullable=False),
        Column("cycle_id", Integer, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("acked_at", Timestamp, nullable=True),
    )
    Index(f"{PREFIX}advisor_alerts_uq", alerts.c.user_id, alerts.c.alert_key, unique=True)
    prices = owned(
        "advisor_prices",
        Column("symbol", String(32), nullable=False),
        Column("day", String(10), nullable=False),  # YYYY-MM-DD
        Column("close", Float, nullable=False),
        Column("open", Float, nullable=True),
        Column("high", Float, nullable=True),
        Column("low", Float, nullable=True),
        Column("volume", Float, nullable=True),
        Column("provider", String(16), nullable=False),
        Column("fetched_at", Timestamp, nullable=False),
    )
    Index(
        f"{PREFIX}advisor_prices_uq", prices.c.aide_id, prices.c.symbol, prices.c.day, unique=True
    )
    return {
        "advisor_users": users,
        "advisor_positions": positions,
        "advisor_watchlist": watchlist,
        "advisor_briefings": briefings,
        "advisor_alerts": alerts,
        "advisor_prices": prices,
    }


def _tables_at(version: int) -> dict[str, Table]:
    """The advisor's tables as migration ``version`` left them (beside the others of then)."""
    metadata = MetaData()
    define_tables(metadata, version=version)
    define_aide_tables(metadata, version)
    return define_advisor_tables(metadata, version)


def _v5_advisor(connection: Connection) -> None:
    """Add the investment advisor's tables; nothing else changes."""
    for table in _tables_at(5).values():
        table.create(connection)


TABLE_SET = TableSet(
    "kgot.aides.advisor",
    define_advisor_tables,
    (
        Migration(
            5,
            "advisor: users, positions, watchlists, briefings, alerts and prices, scoped by entity",
            _v5_advisor,
        ),
    ),
    requires=("kgot.aides",),
)
if TABLE_SET.version != ADVISOR_VERSION:  # a migration added without moving the version
    raise RuntimeError("ADVISOR_VERSION must be the advisor tables' last migration's version")


# The advisor's tables as this kgot uses them, by short name (``ADVISOR_TABLES.advisor_users``),
# and their short names, parents first; defined when first read.
ADVISOR_TABLES: SimpleNamespace
ADVISOR_TABLE_ORDER: tuple[str, ...]
__getattr__ = tables_on_first_use(
    globals(),
    TABLE_SET,
    {"ADVISOR_TABLES": lambda tables: SimpleNamespace(**tables), "ADVISOR_TABLE_ORDER": tuple},
    required=(AIDE_TABLE_SET,),
)
