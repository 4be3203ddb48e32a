"""The advisor's commands under `kgot aide` (docs/advisor.md): users, positions, watchlists,
briefings, alerts, questions and prices.

`kgot` finds them through the ``kgot.cli`` extension point (``advisor =
"kgot.aides.advisor.cli:register"`` in kgot's ``pyproject.toml``; :mod:`kgot.cli.extensions`),
as it would a separate distribution's commands. Every `kgot` command imports this module as it
starts, so it imports typer and the CLI's helpers only; the advisor's API is imported in the
commands' bodies. It uses the CLI's helpers as any package extending the CLI would; the layers
contract allows exactly that (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli import (
    DbOption,
    JsonOption,
    confirm_irreversible,
    opened_store,
    print_json,
    printable,
    settings_from,
)
from kgot.errors import UsageError

if TYPE_CHECKING:
    from kgot.aides.aide_rows import AideRow
    from kgot.cli import CommandGroups
    from kgot.persistence import Store

user_app = typer.Typer(
    help="The advisor's users (profiles live in tables, never in the graph).", no_args_is_help=True
)
positions_app = typer.Typer(help="A user's positions.", no_args_is_help=True)
watch_app = typer.Typer(help="A user's watchlist.", no_args_is_help=True)

# A share count may be negative on the command line (refused with a clear line, not mistaken
# for an option).
_LOOSE = {"ignore_unknown_options": True}

NameArgument = Annotated[str, typer.Argument(help="The advisor aide's name.", show_default=False)]
UserArgument = Annotated[str, typer.Argument(help="The user's name.", show_default=False)]
UserOption = Annotated[
    str, typer.Option("--user", "-u", help="The user's name.", show_default=False)
]
BudgetOption = Annotated[
    int, typer.Option("--budget", help="Tokens of evidence the model sees (100-50000).")
]
ModelOption = Annotated[str | None, typer.Option("--model", help="provider:model for the writing.")]


def register(groups: CommandGroups) -> None:
    """Add the advisor's commands to `kgot aide` (the ``kgot.cli`` entry point)."""
    aide_app = groups.group("aide")
    aide_app.add_typer(user_app, name="user")
    aide_app.add_typer(positions_app, name="positions")
    aide_app.add_typer(watch_app, name="watch")
    aide_app.command("briefing")(briefing)
    aide_app.command("alerts")(alerts)
    aide_app.command("ask")(ask)
    aide_app.command("market-data")(market_data)
    aide_app.command("quotes")(quotes)


@contextmanager
def _advisor(ctx: typer.Context, db: str | None, name: str) -> Iterator[tuple[Store, AideRow]]:
    from kgot.aides.advisor.advisor_rows import advisor_aide
    from kgot.persistence import StoreNotFoundError

    try:
        with opened_store(ctx, db) as store:
            yield store, advisor_aide(store, name)
    except StoreNotFoundError:
        raise UsageError(
            f"no aide named {name!r}; create it with `kgot aide create {name} --entity E "
            "--program advisor`"
        ) from None


# ---------------------------------------------------------------------------- users


@user_app.command("add")
def user_add(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    risk: Annotated[
        str, typer.Option("--risk", help="conservative, moderate or aggressive.")
    ] = "moderate",
    horizon: Annotated[
        str | None, typer.Option("--horizon", help="Investment horizon, e.g. 10y.")
    ] = None,
    goal: Annotated[
        list[str] | None, typer.Option("--goal", help="A goal (repeat for more).")
    ] = None,
    preference: Annotated[
        list[str] | None,
        typer.Option("--pref", help="A preference such as dividends or esg (repeatable)."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option("--threshold", help="An alert threshold NAME=VALUE (repeatable)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Add a user to an advisor."""
    from kgot.aides.advisor.api import add_user

    limits = _thresholds(threshold or [])
    with _advisor(ctx, db, name) as (store, aide):
        made = add_user(
            store,
            aide,
            user,
            risk=risk,
            horizon=horizon,
            goals=goal or [],
            preferences=preference or [],
            thresholds=limits,
        )
    typer.echo(f"added user {made.name} to advisor {name} (risk {made.risk})")


def _thresholds(given: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--threshold {item!r} must be NAME=VALUE, e.g. impact_magnitude=0.5")
        found[key.strip()] = value.strip()
    return found


@user_app.command("list")
def user_list(
    ctx: typer.Context, name: NameArgument, as_json: JsonOption = False, db: DbOption = None
) -> None:
    """List an advisor's users and their profiles."""
    from kgot.aides.advisor.api import users

    with _advisor(ctx, db, name) as (store, aide):
        found = users(store, aide)
    if as_json:
        print_json([user.profile() for user in found])
        return
    if not found:
        typer.echo(f"advisor {name} has no users yet (`kgot aide user add {name} NAME`)")
    for user in found:
        horizon = f", horizon {user.horizon}" if user.horizon else ""
        typer.echo(printable(f"{user.name}: risk {user.risk}{horizon}"))


@user_app.command("update")
def user_update(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    rename: Annotated[str | None, typer.Option("--rename", help="A new name.")] = None,
    risk: Annotated[
        str | None, typer.Option("--risk", help="conservative, moderate or aggressive.")
    ] = None,
    horizon: Annotated[
        str | None, typer.Option("--horizon", help="Investment horizon, e.g. 10y ('' clears).")
    ] = None,
    goal: Annotated[
        list[str] | None,
        typer.Option("--goal", help="A goal (repeat for more; replaces the goals; '' clears)."),
    ] = None,
    preference: Annotated[
        list[str] | None,
        typer.Option("--pref", help="A preference (repeatable; replaces them; '' clears)."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="An alert threshold NAME=VALUE (repeatable; NAME= goes back to the risk's).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Change a user's profile: only the options given change."""
    from kgot.aides.advisor.advisor_rows import UNSET, get_user
    from kgot.aides.advisor.api import update_user

    limits = _thresholds(threshold) if threshold else None  # NAME= drops (records.py)
    with _advisor(ctx, db, name) as (store, aide):
        before = get_user(store, aide, user)
        after = update_user(
            store,
            aide,
            before,
            name=rename,
            risk=risk,
            horizon=UNSET if horizon is None else horizon,
            goals=goal,
            preferences=preference,
            thresholds=limits,
        )
    old, new = before.profile(), after.profile()
    changes = [
        f"{key} {_shown(old[key])} -> {_shown(new[key])}" for key in new if old[key] != new[key]
    ]
    said = "; ".join(changes) if changes else "nothing changed (the values were the same)"
    typer.echo(printable(f"updated user {after.name} of advisor {name}: {said}"))


def _shown(value: Any) -> str:
    if not value:  # None, no goals, no thresholds of their own
        return "(none)"
    if isinstance(value, list):
        return ", ".join(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v:g}" for k, v in sorted(value.items()))
    return str(value)


@user_app.command("remove")
def user_remove(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Remove a user: profile, positions, watchlist, briefings, alerts and their own outputs.
    What was delivered already stays where it went."""
    from kgot.aides.advisor.api import remove_user, user_rows

    with _advisor(ctx, db, name) as (store, aide):
        if not yes:  # an unknown user fails before any question
            found = user_rows(store, aide, user).describe()
            confirm_irreversible(
                f"removing user {user!r} of advisor {name!r} ({found})",
                f"Remove user {user!r} of advisor {name!r} with {found}?",
            )
        removed = remove_user(store, aide, user)
    typer.echo(
        printable(
            f"removed user {user} from advisor {name}: the profile, {removed.describe()}. "
            "Kept: what outputs delivered already, the delivery log's keys, and the graph and "
            "price cache (they never held user data)"
        )
    )


@user_app.command("output")
def user_output(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    jsonl: Annotated[str | None, typer.Option("--jsonl", help="A JSONL outbox file.")] = None,
    webhook: Annotated[str | None, typer.Option("--webhook", help="An http(s) URL.")] = None,
    secret_env: Annotated[
        str | None, typer.Option("--secret-env", help="Variable holding the webhook's secret.")
    ] = None,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print them.")] = False,
    db: DbOption = None,
) -> None:
    """Add an output that receives only this user's briefings and alerts."""
    from kgot.aides.advisor.api import add_user_output

    chosen = [
        (kind, value)
        for kind, value in (
            ("jsonl", jsonl),
            ("webhook", webhook),
            ("stdout", "-" if stdout else None),
        )
        if value is not None
    ]
    if len(chosen) != 1:
        raise UsageError("give exactly one output: --jsonl, --webhook or --stdout")
    kind, value = chosen[0]
    if secret_env is not None and kind != "webhook":
        raise UsageError("--secret-env only goes with --webhook")
    options: dict[str, Any] = {"secret_env": secret_env} if kind == "webhook" else {}
    with _advisor(ctx, db, name) as (store, aide):
        output_id = add_user_output(
            store, aide, user, kind, None if kind == "stdout" else value, **options
        )
    typer.echo(f"added {kind} output {output_id} for user {user} of advisor {name}")


# ---------------------------------------------------------------------------- positions


@positions_app.command("import")
def positions_import(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    file: Annotated[
        Path,
        typer.Argument(
            help="CSV: symbol,shares,avg_cost (or cost_basis, the total; docs/advisor.md).",
            show_default=False,
        ),
    ],
    replace: Annotated[
        bool, typer.Option("--replace", help="Drop positions the file does not list.")
    ] = False,
    ignore_other_columns: Annotated[
        bool,
        typer.Option(
            "--ignore-other-columns",
            help="Read past columns kgot does not understand instead of refusing the file.",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Import a brokerage-style CSV of positions (all rows or none).

    A column it does not understand is refused, all of them named in one
    line with the names it reads: a cost under an unknown name is never
    dropped without a word.
    """
    from kgot.aides.advisor.api import import_positions
    from kgot.aides.advisor.holdings import read_positions_file
    from kgot.aides.aide_rows import count_of

    parsed = read_positions_file(file, ignore_other_columns=ignore_other_columns)
    with _advisor(ctx, db, name) as (store, aide):
        count = import_positions(store, aide, user, parsed, replace=replace)
    left_out = f" (columns not read: {', '.join(parsed.left_out)})" if parsed.left_out else ""
    typer.echo(printable(f"imported {count_of(count, 'position')} for {user}{left_out}"))


@positions_app.command("add", context_settings=_LOOSE)
def positions_add(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    symbol: Annotated[str, typer.Argument(help="Ticker, e.g. AAPL.", show_default=False)],
    shares: Annotated[str, typer.Argument(help="Shares bought.", show_default=False)],
    avg_cost: Annotated[
        str | None, typer.Option("--avg-cost", help="Average cost per share.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Add shares of a symbol (a held position grows)."""
    from kgot.aides.advisor.api import add_position

    with _advisor(ctx, db, name) as (store, aide):
        held = add_position(store, aide, user, symbol, shares, avg_cost=avg_cost)
    cost = f" at {held.avg_cost:g} average cost" if held.avg_cost is not None else ""
    typer.echo(f"{user} holds {held.shares:g} {held.symbol}{cost}")


@positions_app.command("remove")
def positions_remove(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    symbols: Annotated[
        list[str], typer.Argument(help="Tickers of positions to remove.", show_default=False)
    ],
    db: DbOption = None,
) -> None:
    """Remove positions of a user (all the symbols given or none)."""
    from kgot.aides.advisor.api import remove_positions

    with _advisor(ctx, db, name) as (store, aide):
        removed = remove_positions(store, aide, user, symbols)
    for position in removed:
        cost = f" at {position.avg_cost:g} average cost" if position.avg_cost is not None else ""
        typer.echo(
            f"removed {user}'s {position.symbol} position ({position.shares:g} shares{cost})"
        )


@positions_app.command("list")
def positions_list(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """A user's positions and watchlist."""
    from kgot.aides.advisor.api import positions

    with _advisor(ctx, db, name) as (store, aide):
        held = positions(store, aide, user)
    broken = [p.symbol for p in held.positions if not _finite(p.shares, p.avg_cost)]
    if broken and as_json:  # stored before kgot refused such numbers; JSON cannot hold them
        raise UsageError(
            f"{user}'s {', '.join(broken)} position holds a number that is not finite; remove "
            f"it (`kgot aide positions remove {name} {user} {broken[0]}`) and add it again"
        )
    if as_json:
        print_json(
            {
                "user": held.user.name,
                "positions": [p.to_json() for p in held.positions],
                "watchlist": list(held.watchlist),
            }
        )
        return
    if not held.positions:
        typer.echo(f"{user} has no positions")
    for position in held.positions:
        cost = "" if position.avg_cost is None else f" at {position.avg_cost:g}"
        fix = "" if position.symbol not in broken else "  (not a finite number: remove, add again)"
        typer.echo(f"{position.symbol}  {position.shares:g}{cost}{fix}")
    if held.watchlist:
        typer.echo(f"watching: {', '.join(held.watchlist)}")


def _finite(*numbers: float | None) -> bool:
    return all(n is None or math.isfinite(n) for n in numbers)


@watch_app.command("add")
def watch_add(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    symbols: Annotated[list[str], typer.Argument(help="Tickers to watch.", show_default=False)],
    db: DbOption = None,
) -> None:
    """Add symbols to a user's watchlist."""
    from kgot.aides.advisor.api import watch

    with _advisor(ctx, db, name) as (store, aide):
        added = watch(store, aide, user, symbols)
    typer.echo(f"{user} now watches {', '.join(added)}" if added else "nothing new to watch")


@watch_app.command("remove")
def watch_remove(
    ctx: typer.Context,
    name: NameArgument,
    user: UserArgument,
    symbols: Annotated[
        list[str], typer.Argument(help="Tickers to stop watching.", show_default=False)
    ],
    db: DbOption = None,
) -> None:
    """Take symbols off a user's watchlist (all the symbols given or none)."""
    from kgot.aides.advisor.api import unwatch

    with _advisor(ctx, db, name) as (store, aide):
        removed = unwatch(store, aide, user, symbols)
    typer.echo(f"{user} no longer watches {', '.join(removed)}")


# ---------------------------------------------------------------------------- reading


def briefing(
    ctx: typer.Context,
    name: NameArgument,
    user: UserOption,
    budget: BudgetOption = 1500,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Write a new one even if nothing changed.")
    ] = False,
    model: ModelOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """A user's briefing: the evidence around their holdings, written up with citations."""
    from kgot.aides.advisor.api import get_briefing_async

    settings = settings_from(ctx, {"store.db": db, "llm.model": model})
    with _advisor(ctx, db, name) as (store, aide):
        made = asyncio.run(
            get_briefing_async(store, aide, user, budget=budget, settings=settings, fresh=fresh)
        )
    if as_json:
        print_json(made.to_json())
        return
    when = made.created_at.isoformat(timespec="seconds") if made.created_at else ""
    note = " (unchanged since)" if made.reused else ""
    typer.echo(printable(f"briefing {made.id} for {made.user}, {when}{note}\n\n{made.text}"))


def alerts(
    ctx: typer.Context,
    name: NameArgument,
    user: UserOption,
    since: Annotated[
        str | None, typer.Option("--since", help="Only newer: 2d, 12h, or a date.")
    ] = None,
    ack: Annotated[int | None, typer.Option("--ack", help="Mark this alert as read.")] = None,
    unread: Annotated[bool, typer.Option("--unread", help="Only alerts not read yet.")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """A user's alerts (newest first), or mark one read with --ack ID."""
    from kgot.aides.advisor.api import ack_alert, parse_since, user_alerts

    moment = parse_since(since) if since is not None else None
    with _advisor(ctx, db, name) as (store, aide):
        if ack is not None:
            done = ack_alert(store, aide, user, ack)
            typer.echo(f"alert {done.id} marked as read")
            return
        found = user_alerts(store, aide, user, since=moment, unread=unread)
    if as_json:
        print_json([alert.to_json() for alert in found])
        return
    if not found:
        typer.echo(f"no alerts for {user}")
    for alert in found:
        when = alert.created_at.isoformat(timespec="seconds") if alert.created_at else ""
        read = "" if alert.acked_at is None else " (read)"
        typer.echo(
            printable(
                f"{alert.id} {when} [{alert.severity}] {alert.rule}{read}: {alert.message}\n"
                f"    facts: {', '.join(alert.facts)}"
            )
        )


def ask(
    ctx: typer.Context,
    name: NameArgument,
    question: Annotated[str, typer.Argument(help="The question.", show_default=False)],
    user: UserOption,
    budget: BudgetOption = 1500,
    model: ModelOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Ask about your holdings; the answer cites the evidence."""
    from kgot.aides.advisor.api import ask_async

    settings = settings_from(ctx, {"store.db": db, "llm.model": model})
    with _advisor(ctx, db, name) as (store, aide):
        answer = asyncio.run(
            ask_async(store, aide, user, question, budget=budget, settings=settings)
        )
    if as_json:
        print_json(answer.to_json())
        return
    typer.echo(printable(answer.text))


# ---------------------------------------------------------------------------- prices


def market_data(
    ctx: typer.Context,
    name: NameArgument,
    file: Annotated[
        str | None, typer.Option("--file", help="Prices in CSV (symbol,date,close) or JSON.")
    ] = None,
    yfinance: Annotated[
        bool,
        typer.Option(
            "--yfinance", help="Yahoo Finance (pip install -e '.[advisor]' in the checkout)."
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Choose where the advisor's prices come from."""
    from kgot.aides.advisor.api import set_market_data

    with _advisor(ctx, db, name) as (store, aide):
        spec = set_market_data(store, aide, file=file, yfinance=yfinance)
    where = spec.get("path") or spec["provider"]
    typer.echo(f"advisor {name} reads prices from {where}")


def quotes(
    ctx: typer.Context,
    name: NameArgument,
    symbols: Annotated[list[str], typer.Argument(help="Tickers.", show_default=False)],
    history: Annotated[
        int | None,
        typer.Option("--history", help="Also the last N daily bars of each symbol.", min=1),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The latest prices of symbols (from the advisor's provider, cached), and with --history
    their daily bars."""
    from kgot.aides.advisor.api import history as read_history
    from kgot.aides.advisor.api import quotes as read_quotes

    with _advisor(ctx, db, name) as (store, aide):
        found = read_quotes(store, aide, symbols)
        series = (
            {s: read_history(store, aide, s, days=history, refresh=False) for s in found}
            if history is not None
            else {}
        )
    if history is not None:
        _print_history(found, series, history, as_json)
        for symbol in symbols:
            if symbol.strip().upper() not in found and not as_json:
                typer.echo(f"{symbol}: no prices")
        return
    if as_json:
        print_json({symbol: quote.to_json() for symbol, quote in found.items()})
        return
    for symbol in symbols:
        quote = found.get(symbol.strip().upper())
        typer.echo(quote.line() if quote is not None else f"{symbol}: no prices")


def _print_history(
    found: dict[str, Any], series: dict[str, list[dict[str, Any]]], asked: int, as_json: bool
) -> None:
    """Each symbol's quote and bars, saying how many of the days asked have prices: a cache
    holding 9 days must not pass for the 30 asked."""
    if as_json:
        print_json(
            {
                s: {
                    "quote": q.to_json(),
                    "history": series[s],
                    "days_asked": asked,
                    "days_available": len(series[s]),
                    "from": series[s][0]["day"] if series[s] else None,
                    "to": series[s][-1]["day"] if series[s] else None,
                }
                for s, q in found.items()
            }
        )
        return
    for symbol, quote in found.items():
        typer.echo(quote.line())
        bars = series[symbol]
        if bars:
            span = f"(from {bars[0]['day']} to {bars[-1]['day']})"
            typer.echo(
                f"{symbol}: {len(bars)} of the {asked} days asked have prices {span}"
                if len(bars) < asked
                else f"{symbol}: the last {asked} days with prices {span}"
            )
        for bar in bars:
            extra = [f"{k} {bar[k]:g}" for k in ("open", "high", "low", "volume") if bar[k]]
            typer.echo("  ".join([f"  {bar['day']}", f"close {bar['close']:g}", *extra]))
