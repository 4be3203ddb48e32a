"""A user's holdings as they are typed or exported: ticker symbols, share counts, costs and
brokerage-style CSV files.

Everything here is pure: it checks input and returns clean values, or raises
:class:`~kgot.errors.UsageError` with one line naming what is wrong and how to fix it. A CSV
file is read whole before anything is stored, so a bad row means nothing is imported; every bad
row is named with its line number, grouped in the one message.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from kgot.errors import UsageError

# A ticker: letters and digits, an optional leading ^ (indexes), and up to two suffixes
# after . - = or / (BRK.B, BTC-USD, EURUSD=X, RDS/A). The same pattern as Asset.symbol.
SYMBOL = re.compile(r"^\^?[A-Z0-9]{1,10}([.=/-][A-Z0-9]{1,10}){0,2}$")
SYMBOL_HINT = "a ticker such as AAPL, BRK.B, BTC-USD or ^GSPC"
MAX_ROWS = 10_000  # positions in one CSV file
MAX_ERRORS_SHOWN = 5
# Limits far above any real holding, so that every figure made from a position stays finite:
# shares x cost is at most 1e33, and a weighted average cost of two purchases is too (a float
# overflows to inf past 1e308, and JSON has no way to write inf or NaN).
MAX_SHARES = 1e18  # a memecoin's supply is in the 1e17s
MAX_PRICE = 1e15  # per share or unit: bitcoin in Iranian rial is in the 1e12s
_NUMBER_NOISE = re.compile(r"[\s$€£,_]")

# Column names brokerages and portfolio trackers use, as written in a header; matched folded
# (lower case, non-letters dropped: "Average Cost" and "avg_cost" are "averagecost", "avgcost").
SYMBOL_COLUMNS = ("symbol", "ticker", "instrument", "security symbol")
SHARES_COLUMNS = ("shares", "quantity", "qty", "units", "position", "number of shares")
COST_COLUMNS = (  # per share
    "avg_cost",
    "average cost",
    "avg_price",
    "average price",
    "avg cost basis",
    "average cost basis",
    "cost basis per share",
    "cost per share",
    "unit cost",
    "price paid",
    "purchase price",
    "avg purchase price",
    "average purchase price",
    "buy price",
    "entry price",
    "cost price",
)
TOTAL_COST_COLUMNS = (  # what the whole position cost: divided by the shares
    "cost_basis",
    "cost basis total",
    "total cost basis",
    "total cost",
    "book cost",
    "book value",
    "amount invested",
)
# Columns an export carries that a position does not need: read past, never refused.
OTHER_COLUMNS = (
    "name",
    "description",
    "security name",
    "security description",
    "company",
    "account",
    "account name",
    "account number",
    "currency",
    "exchange",
    "asset class",
    "type",
    "security type",
    "sector",
    "price",
    "last price",
    "current price",
    "market price",
    "market value",
    "current value",
    "value",
    "change",
    "gain/loss",
    "total gain/loss",
    "unrealized gain/loss",
    "day's gain",
    "weight",
    "percent of account",
    "date",
    "as of",
    "notes",
    "comment",
)
# Says neither "per share" nor "total": guessing would get the cost wrong by a factor of the
# share count, so it is refused with the two names that say which.
AMBIGUOUS_COST_COLUMNS = ("cost",)


@dataclass(frozen=True)
class PositionRow:
    """One position to store: a symbol, a positive share count and the average cost."""

    symbol: str
    shares: float
    avg_cost: float | None = None


@dataclass(frozen=True)
class PositionsFile:
    """A positions CSV read whole: its rows, and the columns of its header that were read
    past (``OTHER_COLUMNS``, blank ones, and with ``ignore_other_columns`` any other)."""

    rows: list[PositionRow]
    left_out: tuple[str, ...] = ()


def parse_symbol(text: str) -> str:
    """``text`` as a ticker symbol in capitals (``aapl`` → ``AAPL``).

    Raises:
        UsageError: not a ticker symbol.
    """
    symbol = (text or "").strip().upper()
    if not SYMBOL.match(symbol):
        raise UsageError(f"{text!r} is not a ticker symbol; give {SYMBOL_HINT}")
    return symbol


def parse_shares(value: str | float, *, where: str = "") -> float:
    """A positive share count from ``10``, ``12.5`` or ``1,200``.

    Raises:
        UsageError: not a number, not finite, zero, negative or above :data:`MAX_SHARES`.
    """
    number = _number(value)
    said = f"{where}: shares {_shown(value)}" if where else f"shares {_shown(value)}"
    if number is None:
        raise UsageError(f"{said} is not a number; give a count such as 10")
    if not math.isfinite(number):
        raise UsageError(f"{said} is not a finite number; give a count such as 10")
    if number <= 0:
        raise UsageError(
            f"{said} is {'zero' if number == 0 else 'negative'}; "
            "give a positive count (short positions are not supported)"
        )
    if number > MAX_SHARES:
        raise UsageError(f"{said} is more than {MAX_SHARES:.0e} shares; give the real count")
    return number


def parse_cost(value: str | float | None, *, where: str = "") -> float | None:
    """An average cost per share (``150``, ``$1,204.50``), or ``None`` when empty.

    Raises:
        UsageError: not a number, not finite, negative or above :data:`MAX_PRICE`.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = _number(value)
    said = f"average cost {_shown(value)}"
    said = f"{where}: {said}" if where else said
    if number is None or not math.isfinite(number) or number < 0:
        raise UsageError(
            f"{said} is not a price; give a finite number of at least 0 such as 150.25"
        )
    if number > MAX_PRICE:
        raise UsageError(
            f"{said} is more than {MAX_PRICE:.0e} per share; give the real cost per share"
        )
    return number


def _shown(value: object) -> str:
    """``value`` as a message quotes it: a 400-digit number is cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _number(value: str | float) -> float | None:
    """``value`` as a float (possibly inf or NaN: the callers say which is wrong), or
    ``None`` when it is no number at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int past a float's range: a number, but not a finite one
            return math.inf if value > 0 else -math.inf
    text = _NUMBER_NOISE.sub("", str(value))
    if text.startswith("(") and text.endswith(")"):  # accountants' negative
        text = "-" + text[1:-1]
    try:
        return float(text)
    except ValueError:
        return None


def read_positions_file(path: Path, *, ignore_other_columns: bool = False) -> PositionsFile:
    """A brokerage-style CSV file of positions: a header row naming at least the symbol and
    share columns (``symbol,shares,avg_cost``, ``Ticker,Quantity,Average Cost``, …) in the
    words of :data:`SYMBOL_COLUMNS`, :data:`SHARES_COLUMNS`, :data:`COST_COLUMNS` (per share)
    or :data:`TOTAL_COST_COLUMNS` (the position's total, divided by its shares). Columns of
    :data:`OTHER_COLUMNS` are read past; any other column is refused, unless
    ``ignore_other_columns``: a cost column under a name kgot does not know would otherwise
    be dropped without a word. A symbol listed twice is refused (which row is right?).

    Raises:
        UsageError: the file cannot be read, has no usable header, a column it does not
            understand (all of them named in one line, with the columns it reads), or bad
            rows (each named with its line number, in one message); nothing was imported.
    """
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read {path} ({error.strerror or error})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_positions_file(text, str(path), ignore_other_columns=ignore_other_columns)


def parse_positions_file(
    text: str, name: str = "the CSV", *, ignore_other_columns: bool = False
) -> PositionsFile:
    """:func:`read_positions_file` on text already read."""
    lines = text.splitlines()
    header_at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if header_at is None:
        raise UsageError(
            f"{name} is empty; give a CSV with a header such as symbol,shares,avg_cost"
        )
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            lines[header_at], delimiters=",;\t"
        )
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO("\n".join(lines[header_at:])), dialect)
    header = next(reader)
    columns = _columns(header)
    if columns.get("symbol") is None or columns.get("shares") is None:
        raise UsageError(
            f"{name}: line {header_at + 1} must be a header naming the symbol and share columns "
            "(e.g. symbol,shares,avg_cost)"
        )
    left_out = _left_out(header, columns, name, ignore_other_columns)
    rows: list[PositionRow] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for offset, cells in enumerate(reader, start=1):
        line = header_at + 1 + offset
        if not any(cell.strip() for cell in cells):
            continue
        if len(rows) + len(errors) >= MAX_ROWS:
            raise UsageError(f"{name} has more than {MAX_ROWS:,} positions; split it")
        try:
            row = _row(cells, columns, f"line {line}")
        except UsageError as error:
            errors.append(str(error))
            continue
        if row.symbol in seen:
            errors.append(
                f"line {line}: {row.symbol} is listed again (first on line "
                f"{seen[row.symbol]}); keep one row per symbol"
            )
            continue
        seen[row.symbol] = line
        rows.append(row)
    if errors:
        shown = "; ".join(errors[:MAX_ERRORS_SHOWN])
        more = (
            f"; and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        )
        count = f"{len(errors)} bad row{'s' if len(errors) > 1 else ''}"
        raise UsageError(f"{name}: {count}, nothing imported: {shown}{more}")
    if not rows:
        raise UsageError(f"{name} holds no positions under its header")
    return PositionsFile(rows, left_out)


def _columns(header: list[str]) -> dict[str, int | None]:
    """Where the symbol, shares, cost per share and total cost are (the first column of each
    kind), by folded header name."""
    folded = [_fold(cell) for cell in header]
    return {
        key: _column(folded, names)
        for key, names in (
            ("symbol", SYMBOL_COLUMNS),
            ("shares", SHARES_COLUMNS),
            ("cost", COST_COLUMNS),
            ("total_cost", TOTAL_COST_COLUMNS),
        )
    }


def _left_out(
    header: list[str], columns: dict[str, int | None], name: str, ignore_other_columns: bool
) -> tuple[str, ...]:
    """The header's columns not read, or a refusal naming those kgot does not understand."""
    used = {index for index in columns.values() if index is not None}
    known = {_fold(column) for column in (*_READ_COLUMNS, *OTHER_COLUMNS)}
    ambiguous = {_fold(column) for column in AMBIGUOUS_COST_COLUMNS}
    left_out: list[str] = []
    unknown: list[str] = []
    for index, cell in enumerate(header):
        shown = cell.strip()
        if index in used:
            continue
        if shown and _fold(shown) in ambiguous and not _has_cost(columns):
            raise UsageError(
                f"{name}: the column {shown!r} does not say whether it is the cost per share "
                "or the position's total; rename it avg_cost (per share) or cost_basis "
                "(total), nothing imported"
            )
        named = _fold(shown)
        if not shown or named in known or named in ambiguous or ignore_other_columns:
            left_out.append(shown)
        else:
            unknown.append(shown)
    if unknown:
        said = ", ".join(repr(column) for column in unknown)
        plural = "s" if len(unknown) > 1 else ""
        raise UsageError(
            f"{name}: column{plural} {said} not understood, nothing imported; the columns read "
            f"are {_understood()}; rename or remove the column{plural}, or pass "
            f"--ignore-other-columns to read past {'them' if plural else 'it'}"
        )
    return tuple(column for column in left_out if column)


def _has_cost(columns: dict[str, int | None]) -> bool:
    return columns["cost"] is not None or columns["total_cost"] is not None


_READ_COLUMNS = (*SYMBOL_COLUMNS, *SHARES_COLUMNS, *COST_COLUMNS, *TOTAL_COST_COLUMNS)


def _understood() -> str:
    """The column names read, grouped by what they hold, for the refusal's one line."""
    groups = (
        ("symbol", SYMBOL_COLUMNS),
        ("shares", SHARES_COLUMNS),
        ("cost per share", COST_COLUMNS),
        ("total cost", TOTAL_COST_COLUMNS),
    )
    read = "; ".join(f"{what}: {', '.join(names)}" for what, names in groups)
    # The descriptive columns are many; a few say what kind, docs/advisor.md lists them all.
    return f"{read}; descriptive columns (name, description, market value, last price, …)"


def _row(cells: list[str], columns: dict[str, int | None], where: str) -> PositionRow:
    def cell(key: str) -> str:
        index = columns[key]
        return cells[index].strip() if index is not None and index < len(cells) else ""

    raw_symbol = cell("symbol")
    if not raw_symbol:
        raise UsageError(f"{where}: the symbol is empty")
    symbol = raw_symbol.upper()
    if not SYMBOL.match(symbol):
        raise UsageError(f"{where}: {raw_symbol!r} is not a ticker symbol ({SYMBOL_HINT})")
    shares_text = cell("shares")
    if not shares_text:
        raise UsageError(f"{where}: the share count of {symbol} is empty")
    shares = parse_shares(shares_text, where=where)
    avg_cost = parse_cost(cell("cost"), where=where)
    if columns["cost"] is None:
        avg_cost = _from_total(cell("total_cost"), shares, where)
    return PositionRow(symbol=symbol, shares=shares, avg_cost=avg_cost)


def _from_total(value: str, shares: float, where: str) -> float | None:
    """The cost per share of a position whose total cost is ``value`` (``None``: empty)."""
    if not value:
        return None
    total = _number(value)
    said = f"{where}: total cost {_shown(value)}"
    if total is None or not math.isfinite(total) or total < 0:
        raise UsageError(f"{said} is not an amount; give a finite number of at least 0")
    per_share = total / shares
    if per_share > MAX_PRICE:
        raise UsageError(f"{said} is more than {MAX_PRICE:.0e} per share; give the real total cost")
    return per_share


def _fold(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.strip().lower())


def _column(folded: list[str], names: tuple[str, ...]) -> int | None:
    for name in names:
        if _fold(name) in folded:
            return folded.index(_fold(name))
    return None
