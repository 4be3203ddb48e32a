"""Advisor settings that cannot work are refused (issue 27, item 12): `--yfinance` without the
yfinance package (and an advisor whose stored setting needs it), a user output's
`--secret-env` naming an unset variable, and a positions CSV whose cost column kgot does not
understand; the cost columns brokerages use are read, a total cost divided by the shares.
Through the real `kgot` entry point, on SQLite and PostgreSQL; nothing is half-written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kgot.aides.advisor.advisor_rows import advisor_aide, update_settings
from kgot.cli.main import main
from kgot.persistence import open_store
from kgot.tests.advisor.conftest import positions_of
from kgot.tests.support.command_line import refused, run_cli

without_yfinance = pytest.mark.skipif(
    importlib.util.find_spec("yfinance") is not None,
    reason="yfinance is installed here: the test is about an environment without it",
)

INSTALL = "pip install -e '.[advisor]' in the kgot checkout"


def _db_url(advisor: list[str]) -> str:
    return advisor[advisor.index("--db") + 1]


# ---------------------------------------------------------------------------- yfinance


@pytest.mark.slow
@without_yfinance
def test_yfinance_without_the_package_is_refused_and_the_file_stays(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "quotes.csv"
    prices.write_text("symbol,date,close\nAAPL,2026-11-18,100\n", encoding="utf-8")
    assert main(["aide", "market-data", "adv", "--file", str(prices), *advisor]) == 0

    refused(
        run_cli(capsys, "aide", "market-data", "adv", "--yfinance", *advisor),
        f"--yfinance needs the yfinance package, which is not installed here: run {INSTALL}, "
        "or read prices from a file with --file PRICES.csv",
    )
    code, out, _ = run_cli(capsys, "aide", "quotes", "adv", "AAPL", *advisor)
    assert code == 0 and out == "AAPL closed at 100 on 2026-11-18\n"  # still the file's


@pytest.mark.slow
@without_yfinance
def test_an_advisor_set_to_yfinance_elsewhere_is_refused_before_a_cycle(
    advisor: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The setting made where yfinance was installed (written here as that machine would):
    `aide run` stops before recording a cycle, a briefing before reading anything, and
    `aide quotes` says it once, not once a symbol."""
    assert main(["aide", "positions", "add", "adv", "alice", "AAPL", "10", *advisor]) == 0
    with open_store(_db_url(advisor)) as store:
        update_settings(
            store, advisor_aide(store, "adv"), {"market_data": {"provider": "yfinance"}}
        )

    said = (
        "advisor 'adv' reads prices from Yahoo Finance (--yfinance), but the yfinance package "
        f"is not installed here, so no price would be refreshed: run {INSTALL}, or read "
        "prices from a file with `kgot aide market-data adv --file PRICES.csv`"
    )
    refused(run_cli(capsys, "aide", "run", "adv", "--once", *advisor), said)
    refused(run_cli(capsys, "aide", "run", "adv", "--cron", "0 0 1 1 *", *advisor), said)
    code, out, _ = run_cli(capsys, "aide", "status", "adv", "--json", *advisor)
    assert code == 0 and json.loads(out)["cycles"] == []
    refused(run_cli(capsys, "aide", "briefing", "adv", "--user", "alice", *advisor), said)

    result = run_cli(capsys, "aide", "quotes", "adv", "AAPL", "MSFT", "TLT", *advisor)
    refused(result, "prices not refreshed: the yfinance package is missing")
    assert result[2].count("yfinance package") == 1


# ---------------------------------------------------------------------------- user outputs


@pytest.mark.slow
def test_a_user_webhook_with_an_unset_secret_variable_is_refused(
    advisor: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KGOT_TEST_ALICE_HOOK", raising=False)
    hook = ("aide", "user", "output", "adv", "alice", "--webhook", "https://hooks.example/a")
    refused(
        run_cli(capsys, *hook, "--secret-env", "KGOT_TEST_ALICE_HOOK", *advisor),
        "--secret-env KGOT_TEST_ALICE_HOOK: the variable KGOT_TEST_ALICE_HOOK is not set in "
        "this environment",
    )
    code, out, _ = run_cli(capsys, "aide", "output", "list", "adv", "--json", *advisor)
    assert code == 0 and json.loads(out) == []
    monkeypatch.setenv("KGOT_TEST_ALICE_HOOK", "s3cret")
    code, out, err = run_cli(capsys, *hook, "--secret-env", "KGOT_TEST_ALICE_HOOK", *advisor)
    assert code == 0 and "added webhook output" in out, err


# ---------------------------------------------------------------------------- positions CSV


@pytest.mark.slow
@pytest.mark.parametrize(
    ("csv_text", "avg_cost"),
    [
        ("symbol,shares,avg_price\nAAPL,4,150\n", 150.0),
        ("Ticker,Qty,Purchase Price\nAAPL,4,$150.00\n", 150.0),
        ("symbol,shares,average_cost_basis\nAAPL,4,150\n", 150.0),
        ('Symbol,Quantity,Cost Basis\nAAPL,4,"$600.00"\n', 150.0),  # a total: per share
        ("symbol,shares,total_cost,avg_cost\nAAPL,4,999,150\n", 150.0),  # per share wins
        ("Symbol,Quantity,Book Value,Market Value\nAAPL,4,600,720\n", 150.0),
    ],
)
def test_cost_columns_under_their_common_names_are_read(
    advisor: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    csv_text: str,
    avg_cost: float,
) -> None:
    holdings = tmp_path / "holdings.csv"
    holdings.write_text(csv_text, encoding="utf-8")
    code, out, err = run_cli(
        capsys, "aide", "positions", "import", "adv", "alice", str(holdings), *advisor
    )
    assert code == 0 and out.startswith("imported 1 position for alice"), err
    [position] = positions_of(advisor, capsys)["positions"]
    assert (position["shares"], position["avg_cost"]) == (4, avg_cost)


@pytest.mark.slow
def test_a_column_it_does_not_understand_is_refused_in_one_line(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.csv"
    good.write_text("symbol,shares,avg_cost\nMSFT,5,300\n", encoding="utf-8")
    assert main(["aide", "positions", "import", "adv", "alice", str(good), *advisor]) == 0
    holdings = tmp_path / "holdings.csv"
    holdings.write_text(
        "Symbol,Quantity,Basis Cost,Description,Lot Cost\n"
        + "".join(f"S{n},1,{n},thing,{n}\n" for n in range(40)),
        encoding="utf-8",
    )
    result = run_cli(capsys, "aide", "positions", "import", "adv", "alice", str(holdings), *advisor)
    refused(
        result,
        f"{holdings}: columns 'Basis Cost', 'Lot Cost' not understood, nothing imported; the "
        "columns read are symbol: symbol, ticker",
    )
    err = result[2]
    assert "cost per share: avg_cost, average cost, avg_price" in err
    assert "total cost: cost_basis" in err and "--ignore-other-columns" in err
    assert "line " not in err  # one line for the file, not one per row
    assert [p["symbol"] for p in positions_of(advisor, capsys)["positions"]] == ["MSFT"]

    code, out, err = run_cli(
        capsys,
        *("aide", "positions", "import", "adv", "alice", str(holdings), "--replace"),
        *("--ignore-other-columns", *advisor),
    )
    assert code == 0, err
    assert out == (
        "imported 40 positions for alice (columns not read: Basis Cost, Description, Lot Cost)\n"
    )
    assert all(p["avg_cost"] is None for p in positions_of(advisor, capsys)["positions"])


@pytest.mark.slow
def test_a_bare_cost_column_is_refused_as_ambiguous(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holdings = tmp_path / "holdings.csv"
    holdings.write_text("symbol,shares,cost\nAAPL,4,600\n", encoding="utf-8")
    for extra in ((), ("--ignore-other-columns",)):
        refused(
            run_cli(
                capsys,
                *("aide", "positions", "import", "adv", "alice", str(holdings), *extra),
                *advisor,
            ),
            "the column 'cost' does not say whether it is the cost per share or the position's "
            "total; rename it avg_cost (per share) or cost_basis (total), nothing imported",
        )
    assert positions_of(advisor, capsys)["positions"] == []
