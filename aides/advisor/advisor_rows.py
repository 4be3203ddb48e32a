"""The advisor's rows (tables in :mod:`kgot.aides.advisor.schema`): users, positions, watchlists,
briefings, alerts, prices.

User data lives here and nowhere else: never in the graph, a sandbox job or a prompt other than
that user's own briefing and ask steps. Every statement names the aide (and so its entity), and
every read of a user's rows names the user: one aide's users are never read for another, one
user's rows never for another user.

Each function is one transaction. An import of positions is all or nothing; an alert's key is
unique per user, so the same alert is never recorded (nor sent) twice, even by two workers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, insert, select, update

from kgot.aides.advisor.schema import ADVISOR_TABLES, RISK_LEVELS
from kgot.aides.schema import AIDE_TABLES
from kgot.errors import UsageError
from kgot.persistence import as_utc, utc_now

if TYPE_CHECKING:
    from kgot.aides.advisor.holdings import PositionRow
    from kgot.aides.aide_rows import AideRow
    from kgot.persistence import Store

PROGRAM = "advisor"
_USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")


@dataclass(frozen=True)
class User:
    """One user of an advisor: who they are to the advisor (their profile)."""

    id: int
    name: str
    risk: str
    horizon: str | None
    goals: tuple[str, ...]
    preferences: tuple[str, ...]
    thresholds: dict[str, float]
    created_at: datetime | None = None

    def profile(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "risk": self.risk,
            "horizon": self.horizon,
            "goals": list(self.goals),
            "preferences": list(self.preferences),
            "thresholds": dict(self.thresholds),
        }


@dataclass(frozen=True)
class Position:
    symbol: str
    shares: float
    avg_cost: float | None
    added_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "shares": self.shares,
            "avg_cost": self.avg_cost,
            "added_at": self.added_at.isoformat() if self.added_at else None,
        }


@dataclass(frozen=True)
class Portfolio:
    """A user with their positions and watchlist: what a cycle reads for each user."""

    user: User
    positions: tuple[Position, ...] = ()
    watchlist: tuple[str, ...] = ()

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(p.symbol for p in self.positions)

    @property
    def watched(self) -> tuple[str, ...]:
        """Watched symbols the user does not hold (a held symbol counts as held)."""
        held = set(self.held)
        return tuple(s for s in self.watchlist if s not in held)


@dataclass(frozen=True)
class StoredBriefing:
    id: int
    user: str
    created_at: datetime | None
    cycle_id: int | None
    budget: int
    pack_key: str
    text: str
    facts: tuple[str, ...]
    pack: tuple[str, ...]
    usage: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "cycle": self.cycle_id,
            "budget": self.budget,
            "text": self.text,
            "facts": list(self.facts),
            "pack": list(self.pack),
            "usage": dict(self.usage),
        }


@dataclass(frozen=True)
class StoredAlert:
    id: int
    user: str
    rule: str
    alert_key: str
    severity: str
    message: str
    facts: tuple[str, ...]
    cycle_id: int | None
    created_at: datetime | None
    acked_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "rule": self.rule,
            "key": self.alert_key,
            "severity": self.severity,
            "message": self.message,
            "facts": list(self.facts),
            "cycle": self.cycle_id,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "acked_at": self.acked_at.isoformat() if self.acked_at else None,
        }


# ---------------------------------------------------------------------------- the aide


def advisor_aide(store: Store, name: str) -> AideRow:
    """The aide ``name``, which must run the advisor program.

    Raises:
        UsageError: no such aide, or one running another program.
    """
    from kgot.aides.aide_rows import get_aide

    row = get_aide(store, name)
    if row.program != PROGRAM:
        raise UsageError(
            f"aide {name!r} runs the {row.program} program, not the advisor; create one with "
            f"`kgot aide create NAME --entity E --program advisor`"
        )
    return row


def aide_settings(store: Store, aide: AideRow) -> dict[str, Any]:
    """The aide's current settings (read again: another process may have changed them)."""
    table = AIDE_TABLES.aides
    with store.read() as connection:
        value = connection.execute(select(table.c.settings).where(table.c.id == aide.id)).scalar()
    return dict(value or {})


def update_settings(store: Store, aide: AideRow, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``changes`` into the aide's settings (one transaction); the new settings."""
    table = AIDE_TABLES.aides
    with store.write() as connection:
        current = connection.execute(select(table.c.settings).where(table.c.id == aide.id)).scalar()
        merged = {**dict(current or {}), **dict(changes)}
        connection.execute(
            update(table).where(table.c.id == aide.id).values(settings=merged, updated_at=utc_now())
        )
    return merged


# ---------------------------------------------------------------------------- users


def add_user(
    store: Store,
    aide: AideRow,
    name: str,
    *,
    risk: str = "moderate",
    horizon: str | None = None,
    goals: Sequence[str] = (),
    preferences: Sequence[str] = (),
    thresholds: Mapping[str, float | str] | None = None,
) -> User:
    """Add a user to the advisor.

    Raises:
        UsageError: a malformed name, an unknown risk level, or a name the aide has already.
    """
    name = _checked_name(name)
    risk = _checked_risk(risk)
    from kgot.aides.advisor.alerts import checked_thresholds

    limits = checked_thresholds(thresholds or {})
    table = ADVISOR_TABLES.advisor_users
    now = utc_now()
    with store.write() as connection:
        _name_free(connection, aide, name)
        connection.execute(
            insert(table).values(
                entity_id=aide.entity_id,
                aide_id=aide.id,
                name=name,
                risk=risk,
                horizon=_checked_horizon(horizon),
                goals=_cleaned(goals),
                preferences=_cleaned(preferences),
                thresholds=limits,
                created_at=now,
                updated_at=now,
            )
        )
    return get_user(store, aide, name)


def _checked_name(name: str) -> str:
    name = (name or "").strip()
    if not _USER_NAME.match(name):
        raise UsageError(
            f"user name {name!r} must be 1-64 letters, digits or . _ @ + - (no spaces), e.g. alice"
        )
    return name


def _checked_risk(risk: str) -> str:
    if risk not in RISK_LEVELS:
        raise UsageError(f"--risk {risk!r} is not one of {', '.join(RISK_LEVELS)}")
    return risk


def _checked_horizon(horizon: str | None) -> str | None:
    horizon = _one_line(horizon or "") or None
    width = ADVISOR_TABLES.advisor_users.c.horizon.type.length  # PostgreSQL enforces it
    if horizon is not None and len(horizon) > width:
        raise UsageError(
            f"--horizon {horizon[:40]!r} is longer than {width} characters; give e.g. 10y"
        )
    return horizon


def _one_line(text: str) -> str:
    """``text`` stripped, its line breaks (and the blanks around them) made one space: a
    profile's texts stay on one line wherever they are shown (``user update`` says them)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _cleaned(texts: Sequence[str]) -> list[str]:
    """Goals or preferences as stored: each on one line (:func:`_one_line`), blank ones
    dropped."""
    return [line for line in map(_one_line, texts) if line]


def _name_free(connection: Connection, aide: AideRow, name: str) -> None:
    """Refuse ``name`` when the advisor has a user of that name already (a new user's, a
    rename's)."""
    table = ADVISOR_TABLES.advisor_users
    taken = connection.execute(
        select(table.c.id).where(table.c.aide_id == aide.id, table.c.name == name)
    ).scalar()
    if taken is not None:
        raise UsageError(f"advisor {aide.name!r} has a user named {name!r} already")


def get_user(store: Store, aide: AideRow, name: str) -> User:
    """The user ``name`` of this advisor.

    Raises:
        UsageError: the advisor has no such user.
    """
    table = ADVISOR_TABLES.advisor_users
    with store.read() as connection:
        row = connection.execute(
            select(table).where(table.c.aide_id == aide.id, table.c.name == name)
        ).first()
    if row is None:
        raise UsageError(
            f"advisor {aide.name!r} has no user {name!r}; add one with "
            f"`kgot aide user add {aide.name} {name} --risk moderate`"
        )
    return _user(row)


def users(store: Store, aide: AideRow) -> list[User]:
    table = ADVISOR_TABLES.advisor_users
    with store.read() as connection:
        rows = connection.execute(
            select(table).where(table.c.aide_id == aide.id).order_by(table.c.name)
        ).all()
    return [_user(row) for row in rows]


def _user(row: Any) -> User:
    return User(
        id=row.id,
        name=row.name,
        risk=row.risk,
        horizon=row.horizon,
        goals=tuple(row.goals or ()),
        preferences=tuple(row.preferences or ()),
        thresholds={str(k): float(v) for k, v in dict(row.thresholds or {}).items()},
        created_at=as_utc(row.created_at),
    )


def portfolios(store: Store, aide: AideRow, only: User | None = None) -> list[Portfolio]:
    """Each user of the advisor (or only ``only``) with positions and watchlist, by name."""
    positions_table, watch_table = (
        ADVISOR_TABLES.advisor_positions,
        ADVISOR_TABLES.advisor_watchlist,
    )
    people = [only] if only is not None else users(store, aide)
    ids = [user.id for user in people]
    held: dict[int, list[Position]] = {i: [] for i in ids}
    watched: dict[int, list[str]] = {i: [] for i in ids}
    with store.read() as connection:
        for row in connection.execute(
            select(positions_table)
            .where(positions_table.c.aide_id == aide.id, positions_table.c.user_id.in_(ids))
            .order_by(positions_table.c.symbol)
        ):
            held[row.user_id].append(
                Position(row.symbol, float(row.shares), row.avg_cost, as_utc(row.added_at))
            )
        for row in connection.execute(
            select(watch_table.c.user_id, watch_table.c.symbol)
            .where(watch_table.c.aide_id == aide.id, watch_table.c.user_id.in_(ids))
            .order_by(watch_table.c.symbol)
        ):
            watched[row.user_id].append(row.symbol)
    return [Portfolio(u, tuple(held[u.id]), tuple(watched[u.id])) for u in people]


UNSET: Any = object()  # "not given" for update_user (None is a value: no horizon)


def update_user(
    store: Store,
    aide: AideRow,
    user: User,
    *,
    name: str | None = None,
    risk: str | None = None,
    horizon: str | None = UNSET,
    goals: Sequence[str] | None = None,
    preferences: Sequence[str] | None = None,
    thresholds: Mapping[str, float | str | None] | None = None,
) -> User:
    """Change the given fields of a user's profile (the others stay): ``name`` renames (the
    user's own outputs follow), ``horizon`` ``None`` or empty clears it, ``goals`` and
    ``preferences`` replace the lists, ``thresholds`` set the named ones (``None`` or an empty
    value drops the user's own, so the risk profile's applies again).

    Raises:
        UsageError: nothing to change, a malformed or taken name, an unknown risk level or a
            bad threshold; nothing changed.
    """
    from kgot.aides.advisor.alerts import checked_thresholds

    if (name, risk, goals, preferences, thresholds) == (None,) * 5 and horizon is UNSET:
        raise UsageError(
            "nothing to change; give --rename, --risk, --horizon, --goal, --pref or --threshold"
        )
    values: dict[str, Any] = {}
    if name is not None:
        values["name"] = _checked_name(name)
    if risk is not None:
        values["risk"] = _checked_risk(risk)
    if horizon is not UNSET:
        values["horizon"] = _checked_horizon(horizon)
    if goals is not None:
        values["goals"] = _cleaned(goals)
    if preferences is not None:
        values["preferences"] = _cleaned(preferences)
    changed = None if thresholds is None else checked_thresholds(thresholds, drops=True)
    table = ADVISOR_TABLES.advisor_users
    scope = (table.c.id == user.id) & (table.c.aide_id == aide.id)
    with store.write() as connection:
        if changed is not None:  # merged with the stored ones, read in this transaction
            current = connection.execute(select(table.c.thresholds).where(scope)).scalar()
            merged = {**dict(current or {}), **changed}
            values["thresholds"] = {k: v for k, v in merged.items() if v is not None}
        if "name" in values and values["name"] != user.name:
            _name_free(connection, aide, values["name"])
            # An output added for one user names them: it must follow the rename, or it
            # would stop receiving (and a later user of the old name would get it).
            for output in _user_outputs(connection, aide, user.name):
                outputs = AIDE_TABLES.aide_outputs
                connection.execute(
                    update(outputs)
                    .where(outputs.c.id == output.id, outputs.c.aide_id == aide.id)
                    .values(spec={**dict(output.spec), "user": values["name"]})
                )
        connection.execute(update(table).where(scope).values(**values, updated_at=utc_now()))
    return get_user(store, aide, values.get("name", user.name))


@dataclass(frozen=True)
class UserRows:
    """What a user has in the advisor's tables (what removing them removes)."""

    positions: int = 0
    watchlist: int = 0
    briefings: int = 0
    alerts: int = 0
    outputs: int = 0

    def describe(self) -> str:
        """``3 positions, 2 watched symbols, 4 briefings, 7 alerts and 1 output``."""
        from kgot.aides.aide_rows import count_of

        parts = [
            count_of(self.positions, "position"),
            count_of(self.watchlist, "watched symbol"),
            count_of(self.briefings, "briefing"),
            count_of(self.alerts, "alert"),
            count_of(self.outputs, "output"),
        ]
        return ", ".join(parts[:-1]) + f" and {parts[-1]}"


# The advisor's tables that hold a user's rows, by their :class:`UserRows` field (``advisor_…``).
_USER_TABLES = ("positions", "watchlist", "briefings", "alerts")


def _user_outputs(connection: Connection, aide: AideRow, name: str) -> list[Any]:
    """The aide's outputs added for the user ``name`` (``kgot aide user output``): the spec
    names the user, so they are found in Python (JSON queries differ per database)."""
    table = AIDE_TABLES.aide_outputs
    rows = connection.execute(select(table).where(table.c.aide_id == aide.id)).all()
    return [row for row in rows if dict(row.spec or {}).get("user") == name]


def user_rows(store: Store, aide: AideRow, user: User) -> UserRows:
    """What the user has in the advisor's tables."""
    with store.read() as connection:

        def theirs(name: str) -> int:
            table = getattr(ADVISOR_TABLES, f"advisor_{name}")
            query = select(func.count()).select_from(table)
            return int(
                connection.execute(
                    query.where(table.c.aide_id == aide.id, table.c.user_id == user.id)
                ).scalar_one()
            )

        return UserRows(
            **{name: theirs(name) for name in _USER_TABLES},
            outputs=len(_user_outputs(connection, aide, user.name)),
        )


def remove_user(store: Store, aide: AideRow, user: User) -> UserRows:
    """Remove a user and everything the advisor keeps of them, in one transaction: profile,
    positions, watchlist, briefings, alerts and the outputs added for them (with their
    delivery log). Every statement names the aide and the user; another user's or another
    aide's rows are never touched. Returns what was removed (the deletes' row counts)."""
    with store.write() as connection:

        def removed(table: Any, *where: Any) -> int:
            statement = delete(table).where(table.c.aide_id == aide.id, *where)
            return int(connection.execute(statement).rowcount)

        def theirs(name: str) -> int:
            table = getattr(ADVISOR_TABLES, f"advisor_{name}")
            return removed(table, table.c.user_id == user.id)

        # The children first, explicitly: the foreign keys would cascade, but a removal
        # that is scoped in its own statements does not depend on them.
        counts = {name: theirs(name) for name in _USER_TABLES}
        outputs, log = AIDE_TABLES.aide_outputs, AIDE_TABLES.aide_deliveries
        ids = [row.id for row in _user_outputs(connection, aide, user.name)]
        removed(log, log.c.output_id.in_(ids))
        counts["outputs"] = removed(outputs, outputs.c.id.in_(ids))
        removed(ADVISOR_TABLES.advisor_users, ADVISOR_TABLES.advisor_users.c.id == user.id)
    return UserRows(**counts)


# ---------------------------------------------------------------------------- positions


def import_positions(
    store: Store, aide: AideRow, user: User, rows: Sequence[PositionRow], *, replace: bool = False
) -> int:
    """Store ``rows`` (checked already) as the user's positions in one transaction: each
    symbol's position is set to the row's; ``replace`` also drops the positions the file does
    not list. Returns how many positions were written."""
    table = ADVISOR_TABLES.advisor_positions
    now = utc_now()
    with store.write() as connection:
        scope = (table.c.aide_id == aide.id) & (table.c.user_id == user.id)
        if replace:
            connection.execute(delete(table).where(scope))
        existing = {row.symbol: row.id for row in connection.execute(select(table).where(scope))}
        for row in rows:
            values = {"shares": row.shares, "avg_cost": row.avg_cost, "updated_at": now}
            if row.symbol in existing:
                connection.execute(
                    update(table).where(table.c.id == existing[row.symbol]).values(**values)
                )
            else:
                connection.execute(
                    insert(table).values(
                        entity_id=aide.entity_id,
                        aide_id=aide.id,
                        user_id=user.id,
                        symbol=row.symbol,
                        added_at=now,
                        **values,
                    )
                )
    return len(rows)


def add_position(
    store: Store, aide: AideRow, user: User, symbol: str, *, shares: float, avg_cost: float | None
) -> Position:
    """Buy ``shares`` more of ``symbol``: a held position grows and its average cost becomes
    the weighted mean (a cost not given keeps the old one)."""
    table = ADVISOR_TABLES.advisor_positions
    now = utc_now()
    with store.write() as connection:
        row = connection.execute(
            select(table).where(
                table.c.aide_id == aide.id, table.c.user_id == user.id, table.c.symbol == symbol
            )
        ).first()
        if row is None:
            connection.execute(
                insert(table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    user_id=user.id,
                    symbol=symbol,
                    shares=shares,
                    avg_cost=avg_cost,
                    added_at=now,
                    updated_at=now,
                )
            )
            return Position(symbol, shares, avg_cost, now)
        from kgot.aides.advisor.holdings import MAX_SHARES

        # Each purchase is in range, but two may add up to more (or a row stored before the
        # limits may be inf already): refused here, before anything is written.
        total = float(row.shares) + shares
        if not math.isfinite(total) or total > MAX_SHARES:
            raise UsageError(
                f"{shares:g} more {symbol} would give {user.name} {total:g} shares, more than "
                f"{MAX_SHARES:.0e}; give the real count, or remove the position (`kgot aide "
                f"positions remove {aide.name} {user.name} {symbol}`) and add it again"
            )
        cost = row.avg_cost
        if avg_cost is not None:
            cost = (
                avg_cost
                if row.avg_cost is None
                else (float(row.avg_cost) * float(row.shares) + avg_cost * shares) / total
            )
            if not math.isfinite(cost):  # only an old row stored before the limits gets here
                raise UsageError(
                    f"the average cost of {user.name}'s {symbol} comes to {cost:g}; remove the "
                    f"position (`kgot aide positions remove {aide.name} {user.name} {symbol}`) "
                    "and add it again"
                )
        connection.execute(
            update(table)
            .where(table.c.id == row.id)
            .values(shares=total, avg_cost=cost, updated_at=now)
        )
        return Position(symbol, total, cost, as_utc(row.added_at))


def add_watch(store: Store, aide: AideRow, user: User, symbols: Iterable[str]) -> list[str]:
    """Add symbols to the user's watchlist; the ones that were not on it yet."""
    table = ADVISOR_TABLES.advisor_watchlist
    now = utc_now()
    added: list[str] = []
    with store.write() as connection:
        have = set(
            connection.execute(
                select(table.c.symbol).where(table.c.aide_id == aide.id, table.c.user_id == user.id)
            ).scalars()
        )
        for symbol in dict.fromkeys(symbols):
            if symbol in have:
                continue
            connection.execute(
                insert(table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    user_id=user.id,
                    symbol=symbol,
                    added_at=now,
                )
            )
            added.append(symbol)
    return added


def remove_positions(
    store: Store, aide: AideRow, user: User, symbols: Sequence[str]
) -> list[Position]:
    """Remove the user's positions in ``symbols`` (all or none); the positions removed.

    Raises:
        UsageError: the user does not hold one of them; nothing removed.
    """

    def refusal(missing: str, held: list[str]) -> str:
        have = f"positions: {', '.join(held)}" if held else "no positions at all"
        return f"{user.name} has no {missing} position ({have}); nothing removed"

    rows = _remove_symbols(
        store, aide, user, ADVISOR_TABLES.advisor_positions, symbols, refusal=refusal
    )
    return [Position(r.symbol, float(r.shares), r.avg_cost, as_utc(r.added_at)) for r in rows]


def remove_watch(store: Store, aide: AideRow, user: User, symbols: Sequence[str]) -> list[str]:
    """Take ``symbols`` off the user's watchlist (all or none); the symbols removed.

    Raises:
        UsageError: the user does not watch one of them; nothing removed.
    """

    def refusal(missing: str, watched: list[str]) -> str:
        have = f"watchlist: {', '.join(watched)}" if watched else "empty watchlist"
        return f"{user.name} does not watch {missing} ({have}); nothing removed"

    rows = _remove_symbols(
        store, aide, user, ADVISOR_TABLES.advisor_watchlist, symbols, refusal=refusal
    )
    return [row.symbol for row in rows]


def _remove_symbols(
    store: Store,
    aide: AideRow,
    user: User,
    table: Any,
    symbols: Sequence[str],
    *,
    refusal: Callable[[str, list[str]], str],
) -> list[Any]:
    """Delete the user's rows of ``table`` (positions, watchlist) for ``symbols``, all or
    none, in one transaction; the rows removed, in the order given.

    Raises:
        UsageError: ``refusal(the symbols missing, the symbols there are)``; nothing removed.
    """
    wanted = list(dict.fromkeys(symbols))
    with store.write() as connection:
        scope = (table.c.aide_id == aide.id) & (table.c.user_id == user.id)
        rows = {row.symbol: row for row in connection.execute(select(table).where(scope))}
        missing = [s for s in wanted if s not in rows]
        if missing:
            raise UsageError(refusal(", ".join(missing), sorted(rows)))
        connection.execute(delete(table).where(scope, table.c.symbol.in_(wanted)))
    return [rows[s] for s in wanted]


# ---------------------------------------------------------------------------- briefings


def save_briefing(
    store: Store,
    aide: AideRow,
    user: User,
    *,
    text: str,
    facts: Sequence[str],
    pack: Sequence[str],
    pack_key: str,
    budget: int,
    cycle_id: int | None,
    usage: Mapping[str, Any],
    now: datetime,
) -> StoredBriefing:
    table = ADVISOR_TABLES.advisor_briefings
    with store.write() as connection:
        result = connection.execute(
            insert(table).values(
                entity_id=aide.entity_id,
                aide_id=aide.id,
                user_id=user.id,
                created_at=now,
                cycle_id=cycle_id,
                budget=budget,
                pack_key=pack_key,
                text=text,
                facts=list(facts),
                pack=list(pack),
                usage=dict(usage),
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        row = connection.execute(select(table).where(table.c.id == int(key[0]))).one()
    return _briefing(row, user.name)


def briefings(
    store: Store, aide: AideRow, user: User | None = None, limit: int = 10
) -> list[StoredBriefing]:
    """The newest briefings of one user (or of every user, for delivery), newest first."""
    table, users_table = ADVISOR_TABLES.advisor_briefings, ADVISOR_TABLES.advisor_users
    query = (
        select(table, users_table.c.name.label("user_name"))
        .join(users_table, users_table.c.id == table.c.user_id)
        .where(table.c.aide_id == aide.id)
        .order_by(table.c.id.desc())
        .limit(limit)
    )
    if user is not None:
        query = query.where(table.c.user_id == user.id)
    with store.read() as connection:
        return [_briefing(row, row.user_name) for row in connection.execute(query)]


def _briefing(row: Any, user: str) -> StoredBriefing:
    return StoredBriefing(
        id=row.id,
        user=user,
        created_at=as_utc(row.created_at),
        cycle_id=row.cycle_id,
        budget=int(row.budget),
        pack_key=row.pack_key,
        text=row.text,
        facts=tuple(row.facts or ()),
        pack=tuple(row.pack or ()),
        usage=dict(row.usage or {}),
    )


# ---------------------------------------------------------------------------- alerts


def alert_keys(store: Store, aide: AideRow) -> dict[int, set[str]]:
    """Every alert key the advisor's users have, by user id (to evaluate only new ones)."""
    table = ADVISOR_TABLES.advisor_alerts
    keys: dict[int, set[str]] = {}
    with store.read() as connection:
        for user_id, key in connection.execute(
            select(table.c.user_id, table.c.alert_key).where(table.c.aide_id == aide.id)
        ):
            keys.setdefault(user_id, set()).add(key)
    return keys


def record_alerts(
    store: Store,
    aide: AideRow,
    user: User,
    found: Sequence[Any],
    *,
    cycle_id: int | None,
    now: datetime,
) -> list[StoredAlert]:
    """Record the alerts ``found`` (:class:`kgot.aides.advisor.alerts.Alert`) that the user
    does not have yet (their key decides, in the database: two workers record each once);
    the ones recorded now."""
    from kgot.aides.aide_rows import insert_new  # the aide tables' "skip what exists" insert

    table = ADVISOR_TABLES.advisor_alerts
    made: list[int] = []
    with store.write() as connection:
        for alert in found:
            result = connection.execute(
                insert_new(connection, table).values(
                    entity_id=aide.entity_id,
                    aide_id=aide.id,
                    user_id=user.id,
                    rule=alert.rule,
                    alert_key=alert.key,
                    severity=alert.severity,
                    message=alert.message,
                    facts=list(alert.facts),
                    cycle_id=cycle_id,
                    created_at=now,
                )
            )
            row = result.first()
            if row is not None:
                made.append(int(row[0]))
        rows = connection.execute(select(table).where(table.c.id.in_(made))).all() if made else []
    return sorted((_alert(row, user.name) for row in rows), key=lambda a: a.id)


def alerts(
    store: Store,
    aide: AideRow,
    user: User | None = None,
    *,
    since: datetime | None = None,
    limit: int | None = 200,
) -> list[StoredAlert]:
    """A user's alerts (or every user's, for delivery), newest first."""
    table, users_table = ADVISOR_TABLES.advisor_alerts, ADVISOR_TABLES.advisor_users
    query = (
        select(table, users_table.c.name.label("user_name"))
        .join(users_table, users_table.c.id == table.c.user_id)
        .where(table.c.aide_id == aide.id)
        .order_by(table.c.id.desc())
    )
    if user is not None:
        query = query.where(table.c.user_id == user.id)
    if since is not None:
        query = query.where(table.c.created_at >= since)
    if limit is not None:
        query = query.limit(limit)
    with store.read() as connection:
        return [_alert(row, row.user_name) for row in connection.execute(query)]


def ack_alert(store: Store, aide: AideRow, user: User, alert_id: int, now: datetime) -> StoredAlert:
    """Mark one of the user's alerts as read.

    Raises:
        UsageError: the user has no alert with that id (another user's reads as unknown).
    """
    table = ADVISOR_TABLES.advisor_alerts
    with store.write() as connection:
        row = connection.execute(
            select(table).where(
                table.c.id == alert_id, table.c.aide_id == aide.id, table.c.user_id == user.id
            )
        ).first()
        if row is None:
            raise UsageError(
                f"user {user.name!r} has no alert {alert_id}; list them with "
                f"`kgot aide alerts {aide.name} --user {user.name}`"
            )
        if row.acked_at is None:
            connection.execute(update(table).where(table.c.id == row.id).values(acked_at=now))
        row = connection.execute(select(table).where(table.c.id == row.id)).one()
    return _alert(row, user.name)


def _alert(row: Any, user: str) -> StoredAlert:
    return StoredAlert(
        id=row.id,
        user=user,
        rule=row.rule,
        alert_key=row.alert_key,
        severity=row.severity,
        message=row.message,
        facts=tuple(row.facts or ()),
        cycle_id=row.cycle_id,
        created_at=as_utc(row.created_at),
        acked_at=as_utc(row.acked_at),
    )


# ---------------------------------------------------------------------------- prices


def store_prices(
    store: Store,
    aide: AideRow,
    symbol: str,
    bars: Sequence[Mapping[str, Any]],
    *,
    provider: str,
    now: datetime,
) -> int:
    """Cache daily bars (``day``, ``close`` and optionally ``open``/``high``/``low``/
    ``volume``) of one symbol; a day cached before is replaced. Returns the bars written."""
    table = ADVISOR_TABLES.advisor_prices
    days = [str(bar["day"]) for bar in bars]
    with store.write() as connection:
        for start in range(0, len(days), 500):
            connection.execute(
                delete(table).where(
                    table.c.aide_id == aide.id,
                    table.c.symbol == symbol,
                    table.c.day.in_(days[start : start + 500]),
                )
            )
        if bars:
            connection.execute(
                insert(table),
                [
                    {
                        "entity_id": aide.entity_id,
                        "aide_id": aide.id,
                        "symbol": symbol,
                        "day": str(bar["day"]),
                        "close": float(bar["close"]),
                        "open": _float(bar.get("open")),
                        "high": _float(bar.get("high")),
                        "low": _float(bar.get("low")),
                        "volume": _float(bar.get("volume")),
                        "provider": provider,
                        "fetched_at": now,
                    }
                    for bar in bars
                ],
            )
    return len(bars)


def price_series(
    store: Store, aide: AideRow, symbol: str, *, since_day: str | None = None
) -> list[dict[str, Any]]:
    """The cached daily bars of ``symbol``, oldest first (from ``since_day`` on)."""
    table = ADVISOR_TABLES.advisor_prices
    query = select(table).where(table.c.aide_id == aide.id, table.c.symbol == symbol)
    if since_day is not None:
        query = query.where(table.c.day >= since_day)
    with store.read() as connection:
        rows = connection.execute(query.order_by(table.c.day)).all()
    return [
        {
            "day": row.day,
            "open": row.open,
            "high": row.high,
            "low": row.low,
            "close": row.close,
            "volume": row.volume,
            "provider": row.provider,
            "fetched_at": as_utc(row.fetched_at),
        }
        for row in rows
    ]


def _float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    return float(value)


def price_symbols(store: Store, aides: Sequence[AideRow], *, limit: int) -> list[str]:
    """Symbols these aides have cached prices of, alphabetically (at most ``limit``)."""
    table = ADVISOR_TABLES.advisor_prices
    query = (
        select(table.c.symbol)
        .where(table.c.aide_id.in_([aide.id for aide in aides]))
        .distinct()
        .order_by(table.c.symbol)
        .limit(limit)
    )
    with store.read() as connection:
        return [str(symbol) for symbol in connection.execute(query).scalars()]
