"""`market_data`: the model asks for quotes and daily price history (issue 17).

Offered in runs on an entity whose advisor aide has a price provider
(:func:`kgot.aides.advisor.agent.agent_tools`, the advisor's entity tool provider). The prices
live in the advisor's cache (a table, never the graph); the provider passes the read in as
``lookup``, bound to that entity's advisor, so the tool can read no other advisor's prices and
touches neither the network nor the store itself. Its result is an ordinary tool result: the
model may write facts from it, as from a web page; kgot writes no prices to the graph.

``lookup(symbols, days)`` returns a mapping with:

* ``quotes`` — ``{SYMBOL: {"day", "close", "previous_close", "change_pct",
  "change_30d_pct"}}`` for the symbols that have prices;
* ``history`` — ``{SYMBOL: [{"day", "close", "open"?, "high"?, "low"?, "volume"?}, …]}``,
  oldest first, the last ``days`` bars (only when ``days`` > 0);
* ``unknown`` — the symbols without any price;
* ``known`` (optional) — some symbols that do have prices, to suggest instead;
* ``problems`` (optional) — provider failures (the cache still answered);
* ``source`` (optional) — where the prices came from, kept as the result's provenance.

It raises :class:`~kgot.errors.UsageError` for a symbol that is not a ticker and
:class:`~kgot.errors.ConfigError` when no provider is configured any more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kgot.errors import ConfigError, UsageError
from kgot.tools import ToolFailure

__all__ = [
    "MARKET_DATA_TOOL_NAME",
    "MAX_BARS",
    "MAX_DAYS",
    "MAX_SYMBOLS",
    "MarketDataArgs",
    "PriceLookup",
    "build_market_data_tools",
]

MARKET_DATA_TOOL_NAME = "market_data"
MAX_SYMBOLS = 20
MAX_DAYS = 90  # the advisor caches 90 daily bars per symbol
MAX_BARS = 400  # symbols × days in one call: keeps the result well under the output cap
PriceLookup = Callable[[list[str], int], Mapping[str, Any]]


class MarketDataArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    symbols: list[str] = Field(
        min_length=1,
        max_length=MAX_SYMBOLS,
        description=(
            f'Ticker symbols, e.g. ["AAPL", "TLT"] (at most {MAX_SYMBOLS}); one symbol may '
            "be given as a string. Forms: AAPL, BRK.B, BTC-USD, EURUSD=X, ^GSPC."
        ),
    )
    days: int = Field(
        default=0,
        ge=0,
        le=MAX_DAYS,
        description=(
            f"Daily bars to add per symbol, newest last (0: the latest quote only; at most "
            f"{MAX_DAYS})."
        ),
    )

    @field_validator("symbols", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part for part in value.replace(",", " ").split() if part]
        if isinstance(value, list):  # the same symbol twice is asked once
            return list(dict.fromkeys(str(s).strip().upper() for s in value if str(s).strip()))
        return value

    @model_validator(mode="after")
    def _bounded(self) -> MarketDataArgs:
        if len(self.symbols) * self.days > MAX_BARS:
            raise ValueError(
                f"{len(self.symbols)} symbols × {self.days} days is more than {MAX_BARS} bars; "
                "ask for fewer symbols or fewer days"
            )
        return self


def build_market_data_tools(lookup: PriceLookup) -> list[BaseTool]:
    """The ``market_data`` tool, answering from ``lookup(symbols, days)`` (module docstring;
    the caller binds it to one entity's advisor)."""

    async def market_data(symbols: list[str], days: int = 0) -> tuple[str, dict[str, Any]]:
        try:
            found = await asyncio.to_thread(lookup, list(symbols), days)
        except UsageError as bad:
            raise ToolFailure(
                f"{bad}. Call market_data with ticker symbols such as AAPL, BRK.B or ^GSPC.",
                kind="input",
            ) from None
        except ConfigError as missing:
            raise ToolFailure(
                f"{missing}; prices are not available in this run, use another source",
                kind="unavailable",
            ) from None
        return _answer(found, symbols, days), {"source_ref": found.get("source")}

    return [
        StructuredTool.from_function(
            coroutine=market_data,
            name=MARKET_DATA_TOOL_NAME,
            description=(
                "Latest daily close and its moves (change_pct vs the day before, "
                "change_30d_pct over 30 days) for ticker symbols, from this entity's "
                "advisor price data; with days > 0 also the last daily bars (day, close, "
                "open/high/low/volume when known), oldest first. Daily closes only, not "
                "intraday. Returns compact JSON."
            ),
            args_schema=MarketDataArgs,
            response_format="content_and_artifact",
        )
    ]


def _answer(found: Mapping[str, Any], asked: Sequence[str], days: int) -> str:
    """The result as compact JSON, or a failure when no symbol asked for has prices."""
    quotes: Mapping[str, Any] = found.get("quotes") or {}
    history: Mapping[str, Any] = found.get("history") or {}
    unknown = [str(s) for s in found.get("unknown") or [s for s in asked if s not in quotes]]
    problems = [str(p) for p in found.get("problems") or ()]
    if not quotes:
        known = [str(s) for s in found.get("known") or ()]
        hint = f" Symbols with prices include {', '.join(known[:20])}." if known else ""
        failed = f" The provider reported: {'; '.join(problems)}." if problems else ""
        raise ToolFailure(
            f"no prices for {', '.join(unknown or asked)} in this entity's price data.{failed}"
            f"{hint} Check the ticker, or find the price with another tool.",
            kind="not_found",
        )
    answer: dict[str, Any] = {
        "quotes": [_compact({"symbol": s, **dict(q)}) for s, q in quotes.items()],
    }
    if days > 0:
        answer["history"] = {s: [_compact(dict(bar)) for bar in history.get(s, ())] for s in quotes}
    if unknown:
        answer["unknown"] = unknown  # no prices: said, rather than left out silently
    if problems:
        answer["problems"] = problems
    answer["note"] = "daily closes from the advisor's price provider; not investment advice"
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"), default=str)


def _compact(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if value is not None}
