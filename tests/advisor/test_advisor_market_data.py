"""Prices stay out of the graph: the file provider (CSV and JSON), the per-aide price cache,
quotes, and bad price files refused with where they are wrong."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.market_data import (
    FileProvider,
    MarketData,
    YFinanceProvider,
    read_price_file,
)
from kgot.cli.main import main
from kgot.errors import ConfigError, UsageError
from kgot.persistence import Store


def test_csv_and_json_price_files(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text(
        "Symbol,Date,Close,Volume\naapl,2026-11-19,190.5,100\nAAPL,2026-11-18,185,90\n"
        "TLT,2026-11-19,89.3,\n",
        encoding="utf-8",
    )
    series = read_price_file(csv)
    assert [b["day"] for b in series["AAPL"]] == ["2026-11-18", "2026-11-19"]  # sorted
    assert series["TLT"] == [{"day": "2026-11-19", "close": 89.3}]
    data = tmp_path / "p.json"
    data.write_text(json.dumps({"NVDA": [{"date": "2026-11-19", "close": 455.8}]}))
    assert FileProvider(data).daily_bars("NVDA", 5) == [{"day": "2026-11-19", "close": 455.8}]
    assert FileProvider(data).daily_bars("MSFT", 5) == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("symbol,close\nAAPL,1\n", "needs a header with symbol, date and close"),
        ("symbol,date,close\nAAPL,19/11/2026,1\n", "line 2: the date .19/11/2026."),
        ("symbol,date,close\nAAPL,2026-11-19,-3\n", "line 2: the close '-3'"),
        ("symbol,date,close\nAAPL,2026-11-19,1\nAPPLE INC,2026-11-19,1\n", "line 3:"),
    ],
)
def test_a_bad_price_file_names_where(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=said):
        read_price_file(path)


@pytest.mark.slow
def test_prices_are_cached_per_aide_and_quoted(store: Store, tmp_path: Path) -> None:
    prices = tmp_path / "quotes.csv"
    prices.write_text(
        "symbol,date,close\nNVDA,2026-11-17,500\nNVDA,2026-11-18,455\n", encoding="utf-8"
    )
    create_aide(store, "a", "ma", program="advisor")
    create_aide(store, "b", "mb", program="advisor")
    api.set_market_data(store, "a", file=str(prices))
    found = api.quotes(store, "a", ["nvda"])
    assert found["NVDA"].change_pct == -9.0 and found["NVDA"].day == "2026-11-18"
    assert found["NVDA"].fact_id == "price:NVDA"
    row_a, row_b = advisor_rows.advisor_aide(store, "a"), advisor_rows.advisor_aide(store, "b")
    assert len(advisor_rows.price_series(store, row_a, "NVDA")) == 2
    assert advisor_rows.price_series(store, row_b, "NVDA") == []  # another aide's cache
    with pytest.raises(UsageError, match="has no price provider"):
        api.quotes(store, "b", ["NVDA"])
    assert [(b["day"], b["close"]) for b in api.history(store, "a", "nvda", days=5)] == [
        ("2026-11-17", 500.0),
        ("2026-11-18", 455.0),
    ]
    assert [b["close"] for b in api.history(store, "a", "NVDA", days=1)] == [455.0]
    with pytest.raises(UsageError, match="has no price provider"):
        api.history(store, "b", "NVDA")
    # The cache stays when the file goes; a refresh that fails says so and keeps it.
    prices.unlink()
    assert MarketData.of(store, row_a).refresh(["NVDA"])[0].startswith("NVDA: cannot read")
    assert MarketData.of(store, row_a).quote("NVDA") is not None
    assert store.session("ma").load_graph().number_of_nodes() == 0  # never in the graph


@pytest.mark.slow
def test_market_data_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = ["--db", str(tmp_path / "k.db")]
    assert main(["aide", "create", "adv", "--entity", "m", "--program", "advisor", *db]) == 0
    bad = tmp_path / "bad.csv"
    bad.write_text("symbol,date\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["aide", "market-data", "adv", "--file", str(bad), *db]) == 2
    assert "needs a header with symbol, date and close" in capsys.readouterr().err
    assert main(["aide", "market-data", "adv", *db]) == 2
    good = tmp_path / "q.csv"
    good.write_text("symbol,date,close\nAAPL,2026-11-18,100\nAAPL,2026-11-19,103\n")
    assert main(["aide", "market-data", "adv", "--file", str(good), *db]) == 0
    capsys.readouterr()
    assert main(["aide", "quotes", "adv", "AAPL", "MSFT", *db]) == 0
    out = capsys.readouterr().out
    assert "AAPL closed at 103 on 2026-11-19, +3.0% on the day" in out and "MSFT: no prices" in out
    # Daily history from the cache, newest last.
    assert main(["aide", "quotes", "adv", "AAPL", "--history", "1", "--json", *db]) == 0
    [bar] = json.loads(capsys.readouterr().out)["AAPL"]["history"]
    assert (bar["day"], bar["close"], bar["provider"]) == ("2026-11-19", 103.0, "file")
    assert main(["aide", "quotes", "adv", "AAPL", "--history", "5", *db]) == 0
    assert "  2026-11-18  close 100\n  2026-11-19  close 103\n" in capsys.readouterr().out
    assert main(["aide", "quotes", "adv", "AAPL", "--history", "0", *db]) == 2


@pytest.mark.skipif(
    importlib.util.find_spec("yfinance") is not None,
    reason="yfinance is installed; using it would reach the internet",
)
def test_the_online_provider_needs_its_optional_package() -> None:
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[advisor\]' in the kgot checkout"):
        YFinanceProvider().daily_bars("AAPL", 5)
