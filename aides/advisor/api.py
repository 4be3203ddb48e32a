"""The advisor from Python: users, holdings, briefings, alerts and questions.

Every function takes an open store, the advisor aide (its name or its row) and, for user data,
the user's name; another aide's or another user's rows are never read. Bad input raises
:class:`~kgot.errors.UsageError` (the CLI prints its one line and exits 2) before anything is
written.

* :func:`add_user`, :func:`import_positions`, :func:`add_position`, :func:`positions`,
  :func:`watch` — the user's profile and holdings (tables, never the graph), and the
  corrections: :func:`update_user`, :func:`remove_positions`, :func:`unwatch`,
  :func:`remove_user`;
* :func:`briefing` — an up-to-date briefing for one user: the stored one when its evidence
  pack is unchanged, else a new one written by the model and stored;
* :func:`alerts` / :func:`ack_alert` — the alerts cycles made for one user;
* :func:`ask` — a question about the user's holdings, answered from the evidence with
  citations;
* :func:`set_market_data`, :func:`quotes` — the price provider and the cached prices.

``*_async`` variants run inside an event loop (an MCP server, a web app).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.aides.advisor import advisor_rows
from kgot.aides.advisor.advisor_rows import Portfolio, Position, StoredAlert, StoredBriefing, User
from kgot.aides.advisor.evidence import (
    DEFAULT_BUDGET,
    EvidencePack,
    MarketIndex,
    checked_budget,
    fact_strength,
)
from kgot.aides.advisor.holdings import (
    PositionsFile,
    parse_cost,
    parse_shares,
    parse_symbol,
    read_positions_file,
)
from kgot.errors import UsageError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.aides.advisor.market_data import Quote
    from kgot.aides.aide_rows import AideRow
    from kgot.config import Settings
    from kgot.persistence import Store


def _aide(store: Store, aide: str | AideRow) -> AideRow:
    """The advisor aide ``aide`` names: an aide's name, or the name of an entity one advisor
    aide is bound to (so a caller that knows only the entity, such as the MCP server, finds
    its advisor)."""
    if not isinstance(aide, str):
        return aide
    try:
        return advisor_rows.advisor_aide(store, aide)
    except UsageError as error:
        from kgot.aides.aide_rows import list_aides

        bound = [a for a in list_aides(store) if a.entity == aide and a.program == "advisor"]
        if len(bound) == 1:
            return bound[0]
        if len(bound) > 1:
            names = ", ".join(a.name for a in bound)
            raise UsageError(
                f"entity {aide!r} has {len(bound)} advisors ({names}); name one of them"
            ) from None
        raise error from None


def _user(store: Store, aide: AideRow, user: str | User) -> User:
    return advisor_rows.get_user(store, aide, user) if isinstance(user, str) else user


# ---------------------------------------------------------------------------- users


def add_user(
    store: Store,
    aide: str | AideRow,
    name: str,
    *,
    risk: str = "moderate",
    horizon: str | None = None,
    goals: Sequence[str] = (),
    preferences: Sequence[str] = (),
    thresholds: Mapping[str, float | str] | None = None,
) -> User:
    """Add a user (profile: risk ``conservative``/``moderate``/``aggressive``, horizon such
    as ``10y``, goals, preferences such as ``dividends`` or ``esg``, alert thresholds over the
    risk profile's; :data:`kgot.aides.advisor.alerts.THRESHOLDS`)."""
    return advisor_rows.add_user(
        store,
        _aide(store, aide),
        name,
        risk=risk,
        horizon=horizon,
        goals=goals,
        preferences=preferences,
        thresholds=thresholds,
    )


def users(store: Store, aide: str | AideRow) -> list[User]:
    return advisor_rows.users(store, _aide(store, aide))


def update_user(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    name: str | None = None,
    risk: str | None = None,
    horizon: str | None = advisor_rows.UNSET,
    goals: Sequence[str] | None = None,
    preferences: Sequence[str] | None = None,
    thresholds: Mapping[str, float | str | None] | None = None,
) -> User:
    """Change the given fields of a user's profile; the others stay. ``name`` renames the
    user (their own outputs follow); ``horizon=None`` clears it; ``goals`` and
    ``preferences`` replace the lists; ``thresholds`` set the named ones, a ``None`` value
    dropping the user's own so the risk profile's applies again.

    Raises:
        UsageError: nothing to change, an unknown user, a malformed or taken name, an unknown
            risk level or a bad threshold; nothing changed.
    """
    row = _aide(store, aide)
    return advisor_rows.update_user(
        store,
        row,
        _user(store, row, user),
        name=name,
        risk=risk,
        horizon=horizon,
        goals=goals,
        preferences=preferences,
        thresholds=thresholds,
    )


def user_rows(store: Store, aide: str | AideRow, user: str | User) -> advisor_rows.UserRows:
    """How many positions, watched symbols, briefings, alerts and own outputs the user has
    (what :func:`remove_user` would remove)."""
    row = _aide(store, aide)
    return advisor_rows.user_rows(store, row, _user(store, row, user))


def remove_user(store: Store, aide: str | AideRow, user: str | User) -> advisor_rows.UserRows:
    """Remove a user with everything the advisor keeps of them: profile, positions,
    watchlist, briefings, alerts and the outputs added for them. What was delivered already
    stays where it went; the graph and the price cache never held user data. Returns the
    counts removed.

    Raises:
        UsageError: no such aide or user.
    """
    row = _aide(store, aide)
    return advisor_rows.remove_user(store, row, _user(store, row, user))


def import_positions(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    path: str | Path | PositionsFile,
    *,
    replace: bool = False,
    ignore_other_columns: bool = False,
) -> int:
    """Import a brokerage-style CSV (``symbol,shares,avg_cost``; the column names read are in
    :mod:`kgot.aides.advisor.holdings`); all rows or none. ``path`` may be a file already
    read with :func:`~kgot.aides.advisor.holdings.read_positions_file`.

    Args:
        ignore_other_columns: read past columns kgot does not understand instead of
            refusing the file.

    Raises:
        UsageError: an unknown user, a column not understood, or bad rows (each named with
            its line); nothing stored.
    """
    row = _aide(store, aide)
    who = _user(store, row, user)
    parsed = (
        path
        if isinstance(path, PositionsFile)
        else read_positions_file(Path(path), ignore_other_columns=ignore_other_columns)
    )
    return advisor_rows.import_positions(store, row, who, parsed.rows, replace=replace)


def add_position(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    symbol: str,
    shares: float | str,
    *,
    avg_cost: float | str | None = None,
) -> Position:
    """Buy ``shares`` of ``symbol`` (a held position grows, its average cost re-weighted)."""
    row = _aide(store, aide)
    who = _user(store, row, user)
    return advisor_rows.add_position(
        store,
        row,
        who,
        parse_symbol(symbol),
        shares=parse_shares(shares),
        avg_cost=parse_cost(avg_cost),
    )


def remove_positions(
    store: Store, aide: str | AideRow, user: str | User, symbols: Sequence[str]
) -> list[Position]:
    """Remove the user's positions in ``symbols`` (all or none); the positions removed.

    Raises:
        UsageError: no symbol given, a symbol that is not a ticker, or one the user does not
            hold; nothing removed.
    """
    row, who, wanted = _symbols(store, aide, user, symbols, "remove, e.g. AAPL")
    return advisor_rows.remove_positions(store, row, who, wanted)


def positions(store: Store, aide: str | AideRow, user: str | User) -> Portfolio:
    """The user's positions and watchlist."""
    row = _aide(store, aide)
    return advisor_rows.portfolios(store, row, _user(store, row, user))[0]


def watch(store: Store, aide: str | AideRow, user: str | User, symbols: Sequence[str]) -> list[str]:
    """Add symbols to the user's watchlist; the ones that were new."""
    row, who, wanted = _symbols(store, aide, user, symbols, "watch, e.g. NVDA MSFT")
    return advisor_rows.add_watch(store, row, who, wanted)


def unwatch(
    store: Store, aide: str | AideRow, user: str | User, symbols: Sequence[str]
) -> list[str]:
    """Take symbols off the user's watchlist (all or none); the symbols removed.

    Raises:
        UsageError: no symbol given, or one the user does not watch; nothing removed.
    """
    row, who, wanted = _symbols(store, aide, user, symbols, "stop watching, e.g. NVDA")
    return advisor_rows.remove_watch(store, row, who, wanted)


def _symbols(
    store: Store, aide: str | AideRow, user: str | User, symbols: Sequence[str], to: str
) -> tuple[AideRow, User, list[str]]:
    """The aide, the user and ``symbols`` parsed, for a change to the user's holdings.

    Raises:
        UsageError: no symbol given ("give one or more symbols to ``to``"), no such aide or
            user, or a symbol that is not a ticker.
    """
    if not symbols:
        raise UsageError(f"give one or more symbols to {to}")
    row = _aide(store, aide)
    return row, _user(store, row, user), [parse_symbol(s) for s in symbols]


# ---------------------------------------------------------------------------- briefings


@dataclass
class Briefing:
    """A briefing for one user (stored; ``reused`` when nothing changed since it was made)."""

    id: int
    user: str
    text: str  # with the "not investment advice" footer
    facts: list[str]
    pack: list[str]
    created_at: datetime | None
    budget: int
    reused: bool = False
    pack_tokens: int = 0
    dropped: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "text": self.text,
            "facts": self.facts,
            "pack": self.pack,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "budget": self.budget,
            "reused": self.reused,
            "pack_tokens": self.pack_tokens,
            "dropped": self.dropped,
        }

    @classmethod
    def stored(
        cls, row: StoredBriefing, *, reused: bool, pack: EvidencePack | None = None
    ) -> Briefing:
        return cls(
            id=row.id,
            user=row.user,
            text=row.text,
            facts=list(row.facts),
            pack=list(row.pack),
            created_at=row.created_at,
            budget=row.budget,
            reused=reused,
            pack_tokens=pack.tokens if pack is not None else 0,
            dropped=int(row.usage.get("dropped", 0)),
        )


@dataclass
class Context:
    """The graph and prices one user's pack is built from, read once."""

    index: MarketIndex
    quotes: dict[str, Quote] = field(default_factory=dict)
    version: int = 0


def read_context(
    store: Store, aide: AideRow, symbols: Sequence[str], now: datetime, *, refresh: bool = True
) -> Context:
    """The entity's graph as a :class:`MarketIndex` and the symbols' latest prices.

    Raises:
        ConfigError: ``refresh`` with a provider that cannot work here (yfinance missing):
            a briefing must not pass the cache's old prices off as refreshed ones.
    """
    from kgot.aides.advisor.market_data import MarketData, require_provider

    if refresh:
        require_provider(store, aide)
    session = store.session(aide.entity)
    graph = session.load_graph(include_meta=True, track=False)
    market = MarketData.of(store, aide)
    if refresh:
        market.refresh(symbols, now)
    index = MarketIndex(graph, session.type_catalog(), now=now, strength=fact_strength(session))
    return Context(index, market.quotes(symbols), int(graph.graph.get("kgot_version", 0)))


def pack_for(context: Context, portfolio: Portfolio, budget: int) -> EvidencePack:
    from kgot.aides.advisor.evidence import build_pack

    return build_pack(
        context.index, portfolio.held, portfolio.watched, budget=budget, quotes=context.quotes
    )


async def write_briefing(
    planning: Any,
    store: Store,
    aide: AideRow,
    portfolio: Portfolio,
    pack: EvidencePack,
    *,
    now: datetime,
    cycle_id: int | None,
) -> StoredBriefing:
    """Have the model write the briefing from ``pack``, check its citations, store it."""
    from kgot.aides.advisor.writing import BRIEFING_STEP, briefing_messages, write_checked

    calls_before = len(planning.ledger.calls)
    written = await write_checked(
        planning, briefing_messages(portfolio, pack, now), pack.ids, step=BRIEFING_STEP
    )
    calls = planning.ledger.calls[calls_before:]
    return advisor_rows.save_briefing(
        store,
        aide,
        portfolio.user,
        text=written.with_footer(pack.prices_as_of(written.cited)),
        facts=written.cited,
        pack=pack.ids,
        pack_key=pack.key,
        budget=pack.budget,
        cycle_id=cycle_id,
        usage={
            "llm_calls": len(calls),
            "input_tokens": sum(c.input_tokens for c in calls),
            "output_tokens": sum(c.output_tokens for c in calls),
            "drafts": written.drafts,
            "dropped": written.dropped,
        },
        now=now,
    )


def latest_briefing(
    store: Store, aide: AideRow, user: User, pack_key: str | None = None, budget: int | None = None
) -> StoredBriefing | None:
    """The user's newest briefing (made from an equal pack, when ``pack_key`` is given)."""
    for row in advisor_rows.briefings(store, aide, user, limit=20):
        if (pack_key is None or row.pack_key == pack_key) and (
            budget is None or row.budget == budget
        ):
            return row
        if pack_key is None:
            break
    return None


async def get_briefing_async(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    budget: int = DEFAULT_BUDGET,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
    fresh: bool = False,
) -> Briefing:
    """:func:`get_briefing` inside an event loop."""
    row = _aide(store, aide)
    who = _user(store, row, user)
    budget = checked_budget(budget)
    now = now or datetime.now(UTC)
    portfolio = advisor_rows.portfolios(store, row, who)[0]
    symbols = [*portfolio.held, *portfolio.watched]
    if not symbols:
        raise UsageError(
            f"{who.name} holds and watches nothing yet; add positions (`kgot aide positions add "
            f"{row.name} {who.name} AAPL 10`) or a watchlist (`kgot aide watch add {row.name} "
            f"{who.name} NVDA`)"
        )
    context = await asyncio.to_thread(read_context, store, row, symbols, now)
    pack = pack_for(context, portfolio, budget)
    if not pack.items:
        raise _nothing_known(row, symbols)
    if not fresh:
        same = latest_briefing(store, row, who, pack.key, budget)
        if same is not None:
            return Briefing.stored(same, reused=True, pack=pack)
    planning = _planning(settings, models, model)
    made = await write_briefing(planning, store, row, portfolio, pack, now=now, cycle_id=None)
    return Briefing.stored(made, reused=False, pack=pack)


def get_briefing(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    budget: int = DEFAULT_BUDGET,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
    fresh: bool = False,
) -> Briefing:
    """An up-to-date briefing for ``user`` within ``budget`` tokens of evidence.

    The evidence pack is built now (holdings, then watchlist, one and two hops, ranked by the
    memory's ranking); when the user's newest briefing was made from an equal pack (and the
    same budget) it is returned as it is (``reused``, no model call) unless ``fresh``. Else the
    planning model writes one (step ``advisor_briefing``), every statement citing pack ids;
    citations outside the pack are sent back for a fix. The new briefing is stored, and the
    next cycle delivers it to the aide's outputs.

    Raises:
        UsageError: no such aide or user, or a budget out of range.
        WritingFailed: the model never cited the evidence properly.
        ConfigError: no model configured.
    """
    return asyncio.run(
        get_briefing_async(
            store,
            aide,
            user,
            budget=budget,
            settings=settings,
            models=models,
            model=model,
            now=now,
            fresh=fresh,
        )
    )


async def briefing_async(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    budget: int | None = None,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """:func:`briefing` inside an event loop."""
    made = await get_briefing_async(
        store,
        aide,
        user,
        budget=DEFAULT_BUDGET if budget is None else budget,
        settings=settings,
        models=models,
        model=model,
        now=now,
        fresh=fresh,
    )
    return made.to_json()


def briefing(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    budget: int | None = None,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """The user's up-to-date briefing as JSON-ready data (:meth:`Briefing.to_json`): ``id``,
    ``user``, ``text`` (with the "not investment advice" footer), ``facts`` (the cited ids),
    ``pack`` (the evidence ids), ``created_at``, ``budget`` (default 1500 tokens), ``reused``.
    See :func:`get_briefing` for how it is made; ``aide`` is the advisor's name or its
    entity's."""
    return asyncio.run(
        briefing_async(
            store,
            aide,
            user,
            budget=budget,
            settings=settings,
            models=models,
            model=model,
            now=now,
            fresh=fresh,
        )
    )


def _nothing_known(aide: AideRow, symbols: Sequence[str]) -> UsageError:
    """Said instead of asking a model to cite an empty pack (it never could)."""
    about = f"about {', '.join(symbols)} " if symbols else ""
    return UsageError(
        f"advisor {aide.name!r} knows nothing {about}yet (no facts in the graph of entity "
        f"{aide.entity!r}, no prices); run `kgot aide run {aide.name} --once` with its sources, "
        "or set its market data, first"
    )


def _planning(
    settings: Settings | None,
    models: Mapping[str, BaseChatModel] | None,
    model: str | BaseChatModel | None,
) -> Any:
    from kgot.config import load_settings
    from kgot.llm import UsageLedger, build_llm_clients

    if isinstance(model, str):
        settings = load_settings({"llm.model": model}) if settings is None else settings
        if settings.llm.planning.model != model:
            from kgot.config import with_options

            settings = with_options(settings, {}, {"llm": {"model": model}})
    elif model is not None:
        models = {"planning": model, "execution": model}
    if models and "planning" in models and "execution" not in models:
        models = {**models, "execution": models["planning"]}  # only planning writes here
    settings = settings or load_settings()
    return build_llm_clients(settings, UsageLedger(), models=models).planning


# ---------------------------------------------------------------------------- alerts


def user_alerts(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    since: datetime | None = None,
    unread: bool = False,
) -> list[StoredAlert]:
    """The alerts the advisor's cycles made for ``user``, newest first (``since``: made at
    or after then; ``unread``: not acknowledged yet)."""
    row = _aide(store, aide)
    found = advisor_rows.alerts(store, row, _user(store, row, user), since=since, limit=None)
    return [alert for alert in found if not unread or alert.acked_at is None]


def alerts(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    *,
    since: str | datetime | None = None,
    unread: bool = False,
) -> dict[str, Any]:
    """The user's alerts as JSON-ready data: ``{"user": …, "alerts": [...]}``, newest first,
    each with its ``rule``, ``severity``, ``message`` and ``facts`` (:meth:`StoredAlert.to_json`).
    ``since``: a datetime, an ISO date or a duration back from now (``2d``, ``12h``);
    ``aide``: the advisor's name or its entity's.

    Raises:
        UsageError: no such aide or user, or a ``since`` that is neither.
    """
    moment = parse_since(since) if isinstance(since, str) else since
    row = _aide(store, aide)
    who = _user(store, row, user)
    found = user_alerts(store, row, who, since=moment, unread=unread)
    return {"user": who.name, "alerts": [alert.to_json() for alert in found]}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A moment from ``2d``, ``12h``, ``30m``, ``90s`` (back from now) or an ISO date.

    Raises:
        UsageError: neither.
    """
    import re
    from datetime import timedelta

    from kgot.memory import parse_instant

    moment = parse_instant(text.strip())
    if moment is not None:
        return moment
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if found is None:
        raise UsageError(
            f"since {text!r} is neither a duration (2d, 12h, 30m) nor a date (2026-11-20)"
        )
    seconds = float(found.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[found.group(2)]
    return (now or datetime.now(UTC)) - timedelta(seconds=seconds)


def ack_alert(store: Store, aide: str | AideRow, user: str | User, alert_id: int) -> StoredAlert:
    """Mark one of the user's alerts as read.

    Raises:
        UsageError: the user has no such alert.
    """
    row = _aide(store, aide)
    return advisor_rows.ack_alert(store, row, _user(store, row, user), alert_id, datetime.now(UTC))


# ---------------------------------------------------------------------------- questions


@dataclass
class Answer:
    question: str
    text: str  # with the footer
    facts: list[str]
    pack: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "text": self.text,
            "facts": self.facts,
            "pack": self.pack,
        }


async def ask_async(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    question: str,
    *,
    budget: int = DEFAULT_BUDGET,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
) -> Answer:
    """:func:`ask` inside an event loop."""
    from kgot.aides.advisor.evidence import build_pack
    from kgot.aides.advisor.writing import ASK_STEP, ask_messages, write_checked

    question = " ".join((question or "").split())
    if not question:
        raise UsageError('the question is empty; e.g. "Should I worry about my bond exposure?"')
    row = _aide(store, aide)
    who = _user(store, row, user)
    budget = checked_budget(budget)
    now = now or datetime.now(UTC)
    portfolio = advisor_rows.portfolios(store, row, who)[0]
    symbols = [*portfolio.held, *portfolio.watched]
    context = await asyncio.to_thread(read_context, store, row, symbols, now)
    extra = await asyncio.to_thread(_search, store, row, question, now)
    pack = build_pack(
        context.index,
        portfolio.held,
        portfolio.watched,
        budget=budget,
        quotes=context.quotes,
        extra=extra,
    )
    if not pack.items:
        raise _nothing_known(row, symbols)
    planning = _planning(settings, models, model)
    written = await write_checked(
        planning, ask_messages(portfolio, pack, question, now), pack.ids, step=ASK_STEP
    )
    text = written.with_footer(pack.prices_as_of(written.cited))
    return Answer(question, text, written.cited, pack.ids)


def _search(store: Store, aide: AideRow, question: str, now: datetime) -> list[tuple[str, ...]]:
    """The question's best matches in the graph (the memory's search), as fact keys."""
    from kgot.memory import open_memory

    try:
        hits = open_memory(store, aide.entity).search(question, limit=10, now=now)
    except UsageError:  # a question of stop words only
        return []
    return [tuple(hit.key) for hit in hits]


def ask(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    question: str,
    *,
    budget: int = DEFAULT_BUDGET,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    model: str | BaseChatModel | None = None,
    now: datetime | None = None,
) -> Answer:
    """Answer ``user``'s question from the evidence around their holdings and the graph's
    best matches for the question (step ``advisor_ask``), every sentence citing the pack.

    Raises:
        UsageError: no such aide or user, an empty question.
        WritingFailed: the model never cited the evidence properly.
    """
    return asyncio.run(
        ask_async(
            store,
            aide,
            user,
            question,
            budget=budget,
            settings=settings,
            models=models,
            model=model,
            now=now,
        )
    )


# ---------------------------------------------------------------------------- prices


def set_market_data(
    store: Store, aide: str | AideRow, *, file: str | None = None, yfinance: bool = False
) -> dict[str, Any]:
    """Choose the advisor's price provider: a CSV/JSON file, or Yahoo Finance (optional)."""
    from kgot.aides.advisor.market_data import provider_spec

    row = _aide(store, aide)
    spec = provider_spec(file=file, yfinance=yfinance)
    advisor_rows.update_settings(store, row, {"market_data": spec})
    return spec


def quotes(
    store: Store, aide: str | AideRow, symbols: Sequence[str], *, refresh: bool = True
) -> dict[str, Quote]:
    """The latest cached prices of ``symbols`` (refreshed from the provider first)."""
    from kgot.aides.advisor.market_data import MarketData

    row = _aide(store, aide)
    checked = [parse_symbol(s) for s in symbols]
    market = MarketData.of(store, row)
    if market.provider is None:
        raise UsageError(
            f"advisor {row.name!r} has no price provider; set one with "
            f"`kgot aide market-data {row.name} --file quotes.csv`"
        )
    if refresh:
        problems = market.refresh(checked)
        if problems:
            raise UsageError("; ".join(problems))
    return market.quotes(checked)


def history(
    store: Store,
    aide: str | AideRow,
    symbol: str,
    *,
    days: int = 30,
    refresh: bool = True,
) -> list[dict[str, Any]]:
    """The last ``days`` cached daily bars of ``symbol``, oldest first (``day``, ``open``,
    ``high``, ``low``, ``close``, ``volume``, ``provider``), refreshed from the provider first.

    Raises:
        UsageError: no price provider, a symbol that is not a ticker, ``days`` under 1, or a
            provider that failed.
    """
    from kgot.aides.advisor.market_data import MarketData

    if days < 1:
        raise UsageError(f"--history {days}: give a number of days, at least 1")
    checked = parse_symbol(symbol)
    quotes(store, aide, [checked], refresh=refresh)  # the provider check and refresh
    bars = MarketData.of(store, _aide(store, aide)).history(checked, days)
    return [{k: v for k, v in bar.items() if k != "fetched_at"} for bar in bars]


def add_user_output(
    store: Store,
    aide: str | AideRow,
    user: str | User,
    kind: str,
    value: str | None,
    **options: Any,
) -> int:
    """An output that receives only ``user``'s briefings and alerts (``jsonl``, ``webhook``,
    ``stdout``, ``smtp``; as :meth:`kgot.aides.Aide.add_output`). Outputs added without a
    user receive every user's.

    Raises:
        UsageError: an unknown user, a bad output (as ``add_output``), or a secret or
            password variable that is not set here.
    """
    from kgot.aides import aide_rows
    from kgot.aides.outputs import parse_output_spec, require_variables

    row = _aide(store, aide)
    who = _user(store, row, user)
    spec = parse_output_spec(kind, value, **options)
    require_variables(spec)
    return aide_rows.add_output(store, row, kind, {**spec, "user": who.name})
