"""The tools a KGoT run on an advisor's entity gets from the advisor: ``market_data``.

:func:`agent_tools` is the advisor's entity tool provider (``advisor =
"kgot.aides.advisor.agent:agent_tools"`` in the ``kgot.entity_tools`` entry-point group of
kgot's ``pyproject.toml``): the controller asks it for every run on an entity, whoever started
the run (``kgot.ask``, ``kgot ask --entity``, the MCP server's ``ask``), and it answers ``[]``
for an entity without an advisor. The tool itself is :mod:`kgot.aides.advisor.market_tool`;
its ``lookup`` is bound here to the advisors bound to that entity, read from their price cache
after a refresh from their provider (as ``kgot aide quotes`` does). No other entity's advisor
is ever read, and nothing here writes to the graph: prices go to the cache table only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kgot.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from kgot.aides.aide_rows import AideRow
    from kgot.persistence import Store

__all__ = ["agent_tools", "entity_advisors", "lookup_prices"]

KNOWN_HINT = 20  # symbols named when none asked for has prices


def entity_advisors(store: Store, entity: str) -> list[AideRow]:
    """The advisor aides bound to ``entity`` that have a price provider, by name."""
    from kgot.aides.advisor.advisor_rows import PROGRAM, aide_settings
    from kgot.aides.advisor.market_data import open_provider
    from kgot.aides.aide_rows import list_aides

    return [
        row
        for row in list_aides(store)
        if row.entity == entity
        and row.program == PROGRAM
        and open_provider(aide_settings(store, row).get("market_data")) is not None
    ]


def agent_tools(store: Store, entity: str) -> list[BaseTool]:
    """``[market_data]`` when ``entity`` has an advisor with a price provider, else ``[]``."""
    if not entity_advisors(store, entity):
        return []
    from kgot.aides.advisor.market_tool import build_market_data_tools

    def lookup(symbols: list[str], days: int) -> dict[str, Any]:
        return lookup_prices(store, entity, symbols, days)

    return build_market_data_tools(lookup)


def lookup_prices(
    store: Store,
    entity: str,
    symbols: Sequence[str],
    days: int,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Quotes (and ``days`` daily bars) of ``symbols`` from the advisors bound to ``entity``
    (found again at each call: a provider may have been set or removed since), the first
    advisor by name with prices of a symbol answering for it (the shape
    :mod:`kgot.aides.advisor.market_tool` documents).

    Raises:
        UsageError: a symbol that is not a ticker (all such symbols named).
        ConfigError: no advisor of ``entity`` has a price provider any more.
    """
    from kgot.aides.advisor.advisor_rows import price_symbols
    from kgot.aides.advisor.holdings import parse_symbol
    from kgot.aides.advisor.market_data import MarketData

    checked, bad = [], []
    for symbol in symbols:
        try:
            checked.append(parse_symbol(symbol))
        except UsageError as error:
            bad.append(str(error))
    if bad:
        raise UsageError("; ".join(bad))
    markets = [MarketData.of(store, row) for row in entity_advisors(store, entity)]
    if not markets:
        raise ConfigError(f"entity {entity!r} has no advisor with a price provider now")
    now = now or datetime.now(UTC)
    quotes: dict[str, Any] = {}
    history: dict[str, Any] = {}
    problems: list[str] = []
    sources: list[str] = []
    for market in markets:
        wanted = [s for s in dict.fromkeys(checked) if s not in quotes]
        if not wanted:
            break
        problems += market.refresh(wanted, now=now)
        for symbol, quote in market.quotes(wanted).items():
            quotes[symbol] = {k: v for k, v in quote.to_json().items() if k != "symbol"}
            if days > 0:
                history[symbol] = [
                    {k: v for k, v in bar.items() if k not in ("fetched_at", "provider")}
                    for bar in market.history(symbol, days)
                ]
            source = f"market_data:{market.aide.name}"
            if source not in sources:
                sources.append(source)
    found: dict[str, Any] = {
        "quotes": quotes,
        "history": history,
        "unknown": [s for s in dict.fromkeys(checked) if s not in quotes],
        "problems": problems,
        "source": ", ".join(sources) or None,
    }
    if not quotes:
        found["known"] = price_symbols(store, [m.aide for m in markets], limit=KNOWN_HINT)
    return found
