"""Numbers that enter the advisor are finite and in range (issue 25): share counts, costs,
thresholds and prices that would be (or add up to, or multiply to) inf or NaN are refused
with one line, from the command line, a CSV file and Python; and what the advisor prints as
JSON is strict JSON, never ``Infinity`` or ``NaN`` (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.holdings import MAX_PRICE, MAX_SHARES, PositionRow
from kgot.aides.advisor.market_data import quote_from, read_price_file
from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.persistence import open_store
from kgot.tests.advisor.conftest import fails, positions_of, strict_json


def _listed(db: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return {
        p["symbol"]: (p["shares"], p["avg_cost"]) for p in positions_of(db, capsys)["positions"]
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["1e400"], "shares '1e400' is not a finite number"),
        (["inf"], "shares 'inf' is not a finite number"),
        (["nan"], "shares 'nan' is not a finite number"),
        (["1e19"], "shares '1e19' is more than 1e+18 shares"),
        (["5", "--avg-cost", "inf"], "average cost 'inf' is not a price"),
        (["5", "--avg-cost", "NaN"], "average cost 'NaN' is not a price"),
        (["5", "--avg-cost", "1e200"], "average cost '1e200' is more than 1e+15 per share"),
    ],
)
def test_positions_add_refuses_numbers_that_are_not_finite_or_absurd(
    advisor: list[str], args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert said in fails(
        ["aide", "positions", "add", "adv", "alice", "AAPL", *args, *advisor], capsys
    )
    assert _listed(advisor, capsys) == {}


@pytest.mark.slow
def test_purchases_that_would_add_up_past_a_float_are_refused(
    advisor: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    add = ["aide", "positions", "add", "adv", "alice", "AAPL"]
    assert main([*add, "1e18", "--avg-cost", "1e15", *advisor]) == 0
    err = fails([*add, "1e18", "--avg-cost", "1e15", *advisor], capsys)
    assert "1e+18 more AAPL would give alice 2e+18 shares, more than 1e+18" in err
    assert "`kgot aide positions remove adv alice AAPL`" in err
    # Shares x cost at the limits stays finite (the weighted mean of two purchases too).
    assert math.isfinite(MAX_SHARES * MAX_PRICE * 2)
    assert _listed(advisor, capsys) == {"AAPL": (1e18, 1e15)}  # as it was
    tlt = ["aide", "positions", "add", "adv", "alice", "TLT"]
    assert main([*tlt, "5e17", "--avg-cost", "1e15", *advisor]) == 0
    assert main([*tlt, "5e17", "--avg-cost", "1", *advisor]) == 0
    shares, cost = _listed(advisor, capsys)["TLT"]
    assert shares == 1e18 and math.isclose(cost, (1e15 + 1) / 2)


@pytest.mark.slow
def test_a_csv_names_each_row_whose_numbers_are_not_finite(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "h.csv"
    csv.write_text(
        "symbol,shares,avg_cost\nMSFT,5,300\nAAPL,1e300,1\nTLT,1,1e300\nNVDA,nan,1\n"
        "BND,inf,1\nGLD,2,-inf\n",
        encoding="utf-8",
    )
    err = fails(["aide", "positions", "import", "adv", "alice", str(csv), *advisor], capsys)
    assert "5 bad rows, nothing imported" in err
    assert "line 3: shares '1e300' is more than 1e+18 shares" in err
    assert "line 4: average cost '1e300' is more than 1e+15 per share" in err
    assert "line 5: shares 'nan' is not a finite number" in err
    assert "line 6: shares 'inf' is not a finite number" in err
    assert "line 7: average cost '-inf' is not a price" in err
    assert _listed(advisor, capsys) == {}


@pytest.mark.slow
def test_the_python_api_refuses_them_too(store_url: str) -> None:
    from kgot.aides import create_aide

    with open_store(store_url) as store:
        create_aide(store, "adv", "markets", program="advisor")
        api.add_user(store, "adv", "alice")
        for shares in (10**400, -(10**400), math.inf, math.nan, "1e999"):
            with pytest.raises(UsageError, match="is not a finite number"):
                api.add_position(store, "adv", "alice", "AAPL", shares)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="is not a price"):
            api.add_position(store, "adv", "alice", "AAPL", 1, avg_cost=math.inf)
        # A 400-digit number is cut short in the message, not printed whole.
        with pytest.raises(UsageError) as caught:
            api.add_position(store, "adv", "alice", "AAPL", 10**400)
        assert len(str(caught.value)) < 120
        for limits in ({"impact_max_age_days": math.inf}, {"signal_max_age_hours": 1e300}):
            with pytest.raises(UsageError, match="must be 0 to"):
                api.add_user(store, "adv", "bob", thresholds=limits)
            with pytest.raises(UsageError, match="must be 0 to"):
                api.update_user(store, "adv", "alice", thresholds=limits)
        with pytest.raises(UsageError, match="price_drop_pct must be 0 to 100"):
            api.add_user(store, "adv", "bob", thresholds={"price_drop_pct": math.nan})
        assert api.positions(store, "adv", "alice").positions == ()
        assert [u.name for u in api.users(store, "adv")] == ["alice"]


@pytest.mark.slow
def test_a_row_stored_before_the_limits_is_never_printed_as_infinity(
    advisor: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A position an older kgot let overflow: listed with what to do, never as Infinity."""
    with open_store(store_url) as store:
        row = advisor_rows.advisor_aide(store, "adv")
        alice = advisor_rows.get_user(store, row, "alice")
        advisor_rows.import_positions(
            store, row, alice, [PositionRow("AAPL", math.inf, None), PositionRow("TLT", 2, 90)]
        )
    err = fails(["aide", "positions", "list", "adv", "alice", "--json", *advisor], capsys)
    assert "alice's AAPL position holds a number that is not finite" in err
    assert "`kgot aide positions remove adv alice AAPL`" in err
    assert main(["aide", "positions", "list", "adv", "alice", *advisor]) == 0
    assert "AAPL  inf  (not a finite number: remove, add again)" in capsys.readouterr().out
    err = fails(["aide", "positions", "add", "adv", "alice", "AAPL", "1", *advisor], capsys)
    assert "would give alice inf shares" in err
    assert main(["aide", "positions", "remove", "adv", "alice", "AAPL", *advisor]) == 0
    assert _listed(advisor, capsys) == {"TLT": (2, 90)}


def test_prices_that_would_overflow_are_refused_or_give_no_move(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    for close in ("1e400", "inf", "nan", "1e300"):
        path.write_text(f"symbol,date,close\nAAPL,2026-11-19,{close}\n", encoding="utf-8")
        with pytest.raises(UsageError, match=f"line 2: the close '{close}' is not a positive"):
            read_price_file(path)
    # A move from a close of almost nothing is past a float: no figure, not inf.
    quote = quote_from(
        "X", [{"day": "2026-11-18", "close": 1e-300}, {"day": "2026-11-19", "close": 1e15}]
    )
    assert quote is not None and quote.change_pct is None and quote.change_30d_pct is None
    strict_json(json.dumps(quote.to_json()))


@pytest.mark.slow
def test_quotes_json_is_strict(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "q.csv"
    prices.write_text(
        "symbol,date,close\nAAPL,2026-11-18,1e-300\nAAPL,2026-11-19,1e15\n", encoding="utf-8"
    )
    assert main(["aide", "market-data", "adv", "--file", str(prices), *advisor]) == 0
    capsys.readouterr()
    assert main(["aide", "quotes", "adv", "AAPL", "--json", *advisor]) == 0
    assert strict_json(capsys.readouterr().out)["AAPL"]["change_pct"] is None
    assert main(["aide", "quotes", "adv", "AAPL", "--history", "5", "--json", *advisor]) == 0
    strict_json(capsys.readouterr().out)


@pytest.mark.slow
def test_any_json_the_advisor_prints_is_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A threshold an older kgot stored as inf (SQLite kept it; PostgreSQL's JSON never
    could): the JSON printer names where it is instead of writing Infinity."""
    from sqlalchemy import update

    from kgot.aides.advisor.schema import ADVISOR_TABLES

    db = ["--db", str(tmp_path / "k.db")]
    assert main(["aide", "create", "adv", "--entity", "m", "--program", "advisor", *db]) == 0
    assert main(["aide", "user", "add", "adv", "alice", *db]) == 0
    with open_store(db[1]) as store, store.write() as connection:
        users = ADVISOR_TABLES.advisor_users
        connection.execute(update(users).values(thresholds={"impact_max_age_days": math.inf}))
    err = fails(["aide", "user", "list", "adv", "--json", *db], capsys)
    assert "cannot print $[0].thresholds.impact_max_age_days = inf as JSON" in err
