"""``market_data``: quotes and daily price history for the advisor, outside the graph.

Prices change every day and are not knowledge worth keeping as facts, so they never enter the
graph: a provider gives daily bars, the advisor caches them in ``kgot_advisor_prices`` (per
aide, symbol and day) and reads quotes and series from that cache.

Providers:

* ``file`` — a CSV or JSON file (offline use, tests, a broker's export). CSV: a header with
  ``symbol``, ``date`` and ``close`` (``open``, ``high``, ``low``, ``volume`` optional), one
  row per symbol and day. JSON: ``{"AAPL": [{"date": "2026-11-20", "close": 189.5}, …]}`` or
  a list of such rows with a ``symbol`` each. Read again at each refresh.
* ``yfinance`` — Yahoo Finance through the optional ``yfinance`` package
  (``pip install -e '.[advisor]'`` in the checkout), imported only when this provider is
  used; fetched at most every :data:`ONLINE_REFRESH` per symbol. Never used by the tests.
  Without the package the setting is refused (:func:`provider_spec`), and an advisor that
  has it anyway is refused before it runs (:func:`require_provider`): the cache would
  otherwise go on answering with old prices.

The provider is part of the aide's settings (``kgot aide market-data NAME --file F`` or
``--yfinance``); an advisor without one has no prices and its briefings say nothing of them.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kgot.aides.advisor.holdings import MAX_PRICE, MAX_SHARES
from kgot.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from kgot.aides.aide_rows import AideRow
    from kgot.persistence import Store

PROVIDERS = ("file", "yfinance")
YFINANCE_INSTALL = "run pip install -e '.[advisor]' in the kgot checkout"
ONLINE_REFRESH = timedelta(hours=6)
HISTORY_DAYS = 90  # fetched per symbol and refresh
MONTH_DAYS = 30  # the longer move of a quote: over the last 30 days of prices


@dataclass(frozen=True)
class Quote:
    """The latest cached close of a symbol and how it moved."""

    symbol: str
    day: str
    close: float
    previous_close: float | None = None
    change_pct: float | None = None  # vs the previous day's close
    change_30d_pct: float | None = None  # vs the close of change_30d_since
    # The day change_30d_pct is measured from: 30 days of prices back, or the first cached
    # day when the cache holds fewer (the figure is then over fewer days, and says so).
    change_30d_since: str | None = None
    days: int = 1  # days with prices the moves were computed from (at most 31)

    @property
    def fact_id(self) -> str:
        """How a briefing cites it (prices are not graph facts, but they are evidence)."""
        return f"price:{self.symbol}"

    @property
    def as_of(self) -> str:
        """``AAPL 189.5 as of 2026-11-20``: the price with its day, as a briefing states it."""
        return f"{self.symbol} {self.close:g} as of {self.day}"

    def moves(self) -> list[str]:
        parts = []
        if self.change_pct is not None:
            parts.append(f"{self.change_pct:+.1f}% on the day")
        if self.change_30d_pct is not None and self.days > 2:  # 2 days: the day's move
            if self.days > MONTH_DAYS:
                parts.append(f"{self.change_30d_pct:+.1f}% over 30 days")
            else:  # not a 30-day move: the cache starts later
                parts.append(
                    f"{self.change_30d_pct:+.1f}% since {self.change_30d_since} (only "
                    f"{self.days} days of prices)"
                )
        return parts

    def line(self) -> str:
        return ", ".join([f"{self.symbol} closed at {self.close:g} on {self.day}", *self.moves()])

    def evidence_line(self) -> str:
        """The quote as an evidence pack shows it: the price dated, so whatever a model
        writes from it can say as of when."""
        return ", ".join(
            [f"{self.symbol} price {self.close:g} as of {self.day} (daily close)", *self.moves()]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "day": self.day,
            "close": self.close,
            "previous_close": self.previous_close,
            "change_pct": self.change_pct,
            "change_30d_pct": self.change_30d_pct,
            "change_30d_since": self.change_30d_since,
        }


class Provider(Protocol):
    name: str

    def daily_bars(self, symbol: str, days: int) -> list[dict[str, Any]]:
        """Up to ``days`` daily bars of ``symbol`` (``day``, ``close``, …), oldest first;
        ``[]`` for a symbol it does not know."""
        ...


# ---------------------------------------------------------------------------- the file provider


class FileProvider:
    """Daily bars from a CSV or JSON file (module docstring)."""

    name = "file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._series: dict[str, list[dict[str, Any]]] | None = None

    def daily_bars(self, symbol: str, days: int) -> list[dict[str, Any]]:
        if self._series is None:
            self._series = read_price_file(self.path)
        return self._series.get(symbol, [])[-days:]


def read_price_file(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every symbol's bars in a price file, oldest first.

    Raises:
        UsageError: the file is missing, unreadable or not in either format (naming the line
            or entry at fault).
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise UsageError(f"cannot read the price file {path} ({error.strerror or error})") from None
    rows: list[tuple[str, Mapping[str, Any]]] = []  # (where, row)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise UsageError(f"the price file {path} is not valid JSON ({error})") from None
        if isinstance(data, Mapping):
            rows = [
                (f"{symbol}[{n}]", {**dict(bar), "symbol": symbol})
                for symbol, bars in data.items()
                if isinstance(bars, list)
                for n, bar in enumerate(bars)
                if isinstance(bar, Mapping)
            ]
        elif isinstance(data, list):
            rows = [(f"entry {n}", bar) for n, bar in enumerate(data) if isinstance(bar, Mapping)]
        else:
            raise UsageError(f"the price file {path} must hold an object or a list of rows")
    else:
        reader = csv.DictReader(io.StringIO(text))
        fields = {(f or "").strip().lower() for f in reader.fieldnames or []}
        if not {"symbol", "date", "close"} <= fields:
            raise UsageError(
                f"the price file {path} needs a header with symbol, date and close (got "
                f"{', '.join(sorted(fields)) or 'none'})"
            )
        rows = [
            (f"line {n}", {(k or "").strip().lower(): v for k, v in row.items()})
            for n, row in enumerate(reader, start=2)
        ]
    series: dict[str, dict[str, dict[str, Any]]] = {}
    for where, row in rows:
        bar = _bar(row, f"{path}: {where}")
        series.setdefault(bar.pop("symbol"), {})[bar["day"]] = bar
    return {symbol: [days[d] for d in sorted(days)] for symbol, days in series.items()}


def _bar(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    from kgot.aides.advisor.holdings import parse_symbol

    try:
        symbol = parse_symbol(str(row.get("symbol") or ""))
    except UsageError as error:
        raise UsageError(f"{where}: {error}") from None
    day = _day(row.get("date") or row.get("day"))
    if day is None:
        raise UsageError(f"{where}: the date {row.get('date')!r} is not YYYY-MM-DD")
    close = _price(row.get("close"))
    if close is None:
        raise UsageError(
            f"{where}: the close {row.get('close')!r} is not a positive number (at most "
            f"{MAX_PRICE:.0e})"
        )
    bar: dict[str, Any] = {"symbol": symbol, "day": day, "close": close}
    for key in ("open", "high", "low", "volume"):
        value = _price(row.get(key), MAX_SHARES if key == "volume" else MAX_PRICE)
        if value is not None:
            bar[key] = value
    return bar


def _day(value: Any) -> str | None:
    if isinstance(value, datetime | date):
        return value.strftime("%Y-%m-%d")
    try:
        return date.fromisoformat(str(value or "").strip()[:10]).isoformat()
    except ValueError:
        return None


def _price(value: Any, top: float = MAX_PRICE) -> float | None:
    """A price (or volume) from a file or a provider, or ``None``: not a number, not finite,
    negative or above ``top`` (the holdings' limits, so moves computed from it stay finite)."""
    if value is None or value == "":
        return None
    try:
        number = float(str(value).replace(",", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) and 0 <= number <= top else None


# ---------------------------------------------------------------------------- yfinance


class YFinanceProvider:
    """Daily bars from Yahoo Finance through the optional ``yfinance`` package."""

    name = "yfinance"

    def daily_bars(self, symbol: str, days: int) -> list[dict[str, Any]]:
        try:
            import yfinance  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ConfigError(
                f"the yfinance provider needs the yfinance package: {YFINANCE_INSTALL}"
            ) from None
        frame = yfinance.Ticker(symbol).history(period=f"{max(days, 5)}d", interval="1d")
        bars = []
        for stamp, row in frame.iterrows():
            close = _price(row.get("Close"))
            if close is None:
                continue
            bars.append(
                {
                    "day": _day(stamp),
                    "close": close,
                    "open": _price(row.get("Open")),
                    "high": _price(row.get("High")),
                    "low": _price(row.get("Low")),
                    "volume": _price(row.get("Volume")),
                }
            )
        return [bar for bar in bars if bar["day"]][-days:]


def yfinance_installed() -> bool:
    """Whether the optional ``yfinance`` package can be imported (found, not imported: it
    pulls in pandas)."""
    import importlib.util

    return importlib.util.find_spec("yfinance") is not None


def provider_spec(*, file: str | None = None, yfinance: bool = False) -> dict[str, Any]:
    """The aide setting for a provider (``{"provider": "file", "path": …}`` or
    ``{"provider": "yfinance"}``).

    Raises:
        UsageError: both or neither given, a file that cannot be read as prices, or
            ``yfinance`` without the package (the setting would leave the cache as it is,
            and briefings on old prices, with no word of why).
    """
    if bool(file) == bool(yfinance):
        raise UsageError("give exactly one of --file PATH or --yfinance")
    if yfinance:
        if not yfinance_installed():
            raise UsageError(
                f"--yfinance needs the yfinance package, which is not installed here: "
                f"{YFINANCE_INSTALL}, or read prices from a file with --file PRICES.csv"
            )
        return {"provider": "yfinance"}
    path = Path(str(file)).expanduser().resolve()
    read_price_file(path)  # refuse a bad file now, not at every cycle
    return {"provider": "file", "path": str(path)}


def require_provider(store: Store, aide: AideRow) -> None:
    """Refuse to run an advisor whose provider cannot work in this environment: a
    ``yfinance`` setting (made where the package was installed, or before it was removed)
    without the package would refresh no price, cycle after cycle, while briefings and
    alerts went on from the cache.

    Raises:
        ConfigError: the provider needs ``yfinance`` and it is not installed, saying how to
            install it or how to switch to a price file.
    """
    from kgot.aides.advisor.advisor_rows import aide_settings

    spec = aide_settings(store, aide).get("market_data") or {}
    if spec.get("provider") == "yfinance" and not yfinance_installed():
        raise ConfigError(
            f"advisor {aide.name!r} reads prices from Yahoo Finance (--yfinance), but the "
            f"yfinance package is not installed here, so no price would be refreshed: "
            f"{YFINANCE_INSTALL}, or read prices from a file with `kgot aide market-data "
            f"{aide.name} --file PRICES.csv`"
        )


def open_provider(spec: Mapping[str, Any] | None) -> Provider | None:
    """The provider an aide's ``market_data`` setting names (``None``: no prices)."""
    if not spec:
        return None
    if spec.get("provider") == "file" and spec.get("path"):
        return FileProvider(str(spec["path"]))
    if spec.get("provider") == "yfinance":
        return YFinanceProvider()
    return None


# ---------------------------------------------------------------------------- the cache


class MarketData:
    """Quotes and history of one advisor, read from its cache and refreshed from its
    provider (:meth:`refresh`)."""

    def __init__(self, store: Store, aide: AideRow, provider: Provider | None) -> None:
        self.store = store
        self.aide = aide
        self.provider = provider

    @classmethod
    def of(cls, store: Store, aide: AideRow) -> MarketData:
        from kgot.aides.advisor.advisor_rows import aide_settings

        return cls(store, aide, open_provider(aide_settings(store, aide).get("market_data")))

    def refresh(self, symbols: Iterable[str], now: datetime | None = None) -> list[str]:
        """Fetch the daily bars of ``symbols`` into the cache (an online provider at most
        every :data:`ONLINE_REFRESH` per symbol). Returns one line per symbol that failed;
        a failing provider never stops the cycle."""
        from kgot.aides.advisor import advisor_rows

        if self.provider is None:
            return []
        if self.provider.name == "yfinance" and not yfinance_installed():
            # Said once for the whole refresh, not once per symbol.
            return [f"prices not refreshed: the yfinance package is missing ({YFINANCE_INSTALL})"]
        now = now or datetime.now(UTC)
        problems = []
        for symbol in dict.fromkeys(symbols):
            if self.provider.name != "file":
                cached = advisor_rows.price_series(self.store, self.aide, symbol)
                fetched = max(
                    (bar["fetched_at"] for bar in cached if bar["fetched_at"]), default=None
                )
                if fetched is not None and now - fetched < ONLINE_REFRESH:
                    continue
            try:
                bars = self.provider.daily_bars(symbol, HISTORY_DAYS)
            except (UsageError, ConfigError) as error:
                problems.append(f"{symbol}: {error}")
                continue
            except Exception as error:  # a provider's own failure (network, parsing)
                problems.append(f"{symbol}: {type(error).__name__}: {error}")
                continue
            if bars:
                advisor_rows.store_prices(
                    self.store, self.aide, symbol, bars, provider=self.provider.name, now=now
                )
        return problems

    def history(self, symbol: str, days: int = 30) -> list[dict[str, Any]]:
        """The cached daily bars of ``symbol``: the last ``days`` of them, oldest first."""
        from kgot.aides.advisor import advisor_rows

        return advisor_rows.price_series(self.store, self.aide, symbol)[-days:]

    def quote(self, symbol: str) -> Quote | None:
        """The latest cached close of ``symbol`` and its moves; ``None`` without prices."""
        return quote_from(symbol, self.history(symbol, MONTH_DAYS + 1))

    def quotes(self, symbols: Sequence[str]) -> dict[str, Quote]:
        found = {}
        for symbol in dict.fromkeys(symbols):
            made = self.quote(symbol)
            if made is not None:
                found[symbol] = made
        return found


def quote_from(symbol: str, bars: Sequence[Mapping[str, Any]]) -> Quote | None:
    """The :class:`Quote` of a series of bars (oldest first)."""
    if not bars:
        return None
    last = bars[-1]
    close = float(last["close"])
    previous = float(bars[-2]["close"]) if len(bars) > 1 else None
    first = float(bars[0]["close"]) if len(bars) > 1 else None
    return Quote(
        symbol=symbol,
        day=str(last["day"]),
        close=close,
        previous_close=previous,
        change_pct=_change(previous, close),
        change_30d_pct=_change(first, close),
        change_30d_since=str(bars[0]["day"]) if first is not None else None,
        days=len(bars),
    )


def _change(before: float | None, after: float) -> float | None:
    if before is None or before == 0:
        return None
    change = (after - before) / before * 100.0
    # A move from a close of 1e-300 is past a float's range: no figure rather than inf.
    return round(change, 2) if math.isfinite(change) else None
