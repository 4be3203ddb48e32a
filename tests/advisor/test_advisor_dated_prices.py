"""Figures tell the truth (issue 25): a history asked for 30 days over 9 days of prices says
so, a move over fewer days than 30 is not called a 30-day move, and every price a briefing or
an answer quotes carries the day it is from (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.holdings import PositionRow
from kgot.cli.main import main
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Store
from kgot.tests.advisor.market import NOW, market


def _prices(path: Path, days: int, symbol: str = "AAPL", start: str = "2026-11-10") -> Path:
    first = date.fromisoformat(start)
    rows = [f"{symbol},{first + timedelta(days=n)},{100 + n}" for n in range(days)]
    path.write_text("symbol,date,close\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_history_shorter_than_asked_says_so(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", store_url]
    assert main(["aide", "create", "adv", "--entity", "m", "--program", "advisor", *db]) == 0
    prices = _prices(tmp_path / "q.csv", 9)
    assert main(["aide", "market-data", "adv", "--file", str(prices), *db]) == 0
    capsys.readouterr()

    assert main(["aide", "quotes", "adv", "AAPL", "--history", "30", *db]) == 0
    out = capsys.readouterr().out
    assert "AAPL: 9 of the 30 days asked have prices (from 2026-11-10 to 2026-11-18)\n" in out
    # Its move is over the 9 days there are, and says so: not "over 30 days".
    assert (
        "AAPL closed at 108 on 2026-11-18, +0.9% on the day, +8.0% since 2026-11-10 (only 9 " in out
    )
    assert "over 30 days" not in out

    assert main(["aide", "quotes", "adv", "AAPL", "--history", "30", "--json", *db]) == 0
    data = json.loads(capsys.readouterr().out)["AAPL"]
    assert (data["days_asked"], data["days_available"]) == (30, 9)
    assert (data["from"], data["to"]) == ("2026-11-10", "2026-11-18")
    assert len(data["history"]) == 9
    assert data["quote"]["change_30d_since"] == "2026-11-10"

    # As many days as asked: said as such.
    assert main(["aide", "quotes", "adv", "AAPL", "--history", "3", *db]) == 0
    assert "AAPL: the last 3 days with prices (from 2026-11-16 to 2026-11-18)\n" in (
        capsys.readouterr().out
    )
    # Enough prices: a 30-day move is one.
    _prices(prices, 40)
    assert main(["aide", "quotes", "adv", "AAPL", *db]) == 0
    out = capsys.readouterr().out
    assert "+0.7% on the day, +27.5% over 30 days" in out, out


@pytest.fixture
def advisor(store: Store, tmp_path: Path) -> Store:
    create_aide(store, "adv", "markets", program="advisor")
    market(store, "markets")
    row = advisor_rows.advisor_aide(store, "adv")
    alice = advisor_rows.add_user(store, row, "alice")
    advisor_rows.import_positions(store, row, alice, [PositionRow("AAPL", 10, 150)])
    advisor_rows.add_watch(store, row, alice, ["NVDA"])
    prices = _prices(tmp_path / "q.csv", 9)
    with prices.open("a", encoding="utf-8") as more:
        more.write("NVDA,2026-11-12,455\n")
    api.set_market_data(store, "adv", file=str(prices))
    return store


@pytest.mark.slow
def test_a_briefing_dates_every_price_it_quotes(advisor: Store) -> None:
    model = ScriptedChatModel(
        script={
            "advisor_briefing": [
                "- Apple closed at 108 [price:AAPL].\n- Nvidia is on the watchlist "
                "[price:NVDA]. Apple beat estimates [node:aapl_q4]."
            ]
        }
    )
    made = api.get_briefing(advisor, "adv", "alice", models={"planning": model}, now=NOW)
    [call] = model.calls_for("advisor_briefing")
    # The evidence dates each price, and the model is told to say the day with it.
    assert "[price:AAPL] AAPL price 108 as of 2026-11-18 (daily close)" in call.prompt
    assert "[price:NVDA] NVDA price 455 as of 2026-11-12 (daily close)" in call.prompt
    assert "say that day with it" in call.prompt
    # Whatever the model wrote, the briefing read carries each quoted price's day.
    assert (
        "\n\nPrices cited (daily closes): AAPL 108 as of 2026-11-18; NVDA 455 as of "
        "2026-11-12.\n\n— Not investment advice" in made.text
    )
    stored = advisor_rows.briefings(advisor, advisor_rows.advisor_aide(advisor, "adv"))[0]
    assert stored.text == made.text  # as stored and delivered

    # A text that quotes no price gets no such line.
    plain = ScriptedChatModel(script={"advisor_briefing": ["- Apple beat [node:aapl_q4]."]})
    again = api.get_briefing(
        advisor, "adv", "alice", models={"planning": plain}, now=NOW, fresh=True
    )
    assert "Prices cited" not in again.text


@pytest.mark.slow
def test_an_answer_dates_the_prices_it_quotes(advisor: Store) -> None:
    model = ScriptedChatModel(script={"advisor_ask": ["Apple closed at 108 [price:AAPL]."]})
    answer = api.ask(
        advisor, "adv", "alice", "Where is Apple?", models={"planning": model}, now=NOW
    )
    assert "Prices cited (daily closes): AAPL 108 as of 2026-11-18." in answer.text
