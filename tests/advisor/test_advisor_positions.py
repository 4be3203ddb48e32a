"""Users and holdings from the command line: brokerage CSV imports (all rows or none, bad rows
named with their line), positions added, watchlists; bad input is one line and exit 2 (SQLite
and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.tests.advisor.conftest import fails, positions_of


@pytest.mark.slow
def test_a_brokerage_export_is_imported(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "export.csv"
    csv.write_text(
        "Account summary\n"
        "Symbol,Description,Quantity,Average Cost,Market Value\n"
        'AAPL,Apple Inc,"1,200",$151.17,"$181,404.00"\n'
        "brk.b,Berkshire,3,410.5,1\n"
        "\n"
        "BTC-USD,Bitcoin,0.5,,1\n",
        encoding="utf-8",
    )
    assert main(["aide", "positions", "import", "adv", "alice", str(csv), *advisor]) == 2
    # The first line is not the header: the import says so, and nothing was stored.
    csv.write_text(csv.read_text().split("\n", 1)[1], encoding="utf-8")
    assert main(["aide", "positions", "import", "adv", "alice", str(csv), *advisor]) == 0
    held = {p["symbol"]: p for p in positions_of(advisor, capsys)["positions"]}
    assert held["AAPL"]["shares"] == 1200 and held["AAPL"]["avg_cost"] == 151.17
    assert held["BRK.B"]["shares"] == 3
    assert held["BTC-USD"]["avg_cost"] is None


@pytest.mark.slow
def test_bad_rows_are_named_with_their_lines_and_nothing_is_imported(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.csv"
    good.write_text("symbol,shares,avg_cost\nMSFT,5,300\n", encoding="utf-8")
    assert main(["aide", "positions", "import", "adv", "alice", str(good), *advisor]) == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "symbol,shares,avg_cost\nAAPL,10,150\nTLT,-5,90\nAPPLE INC,3,1\nNVDA,ten,1\nMSFT,7,abc\n",
        encoding="utf-8",
    )
    err = fails(["aide", "positions", "import", "adv", "alice", str(bad), *advisor], capsys)
    assert "4 bad rows, nothing imported" in err
    assert "line 3: shares '-5' is negative" in err
    assert "line 4: 'APPLE INC' is not a ticker symbol" in err
    assert "line 5: shares 'ten' is not a number" in err
    assert "line 6: average cost 'abc'" in err
    # Nothing half-imported: the good row of the bad file is not there, the old position is.
    assert [p["symbol"] for p in positions_of(advisor, capsys)["positions"]] == ["MSFT"]


@pytest.mark.slow
def test_positions_and_watchlist_from_the_command_line(
    advisor: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "aide",
                "positions",
                "add",
                "adv",
                "alice",
                "aapl",
                "10",
                "--avg-cost",
                "150",
                *advisor,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "aide",
                "positions",
                "add",
                "adv",
                "alice",
                "AAPL",
                "10",
                "--avg-cost",
                "170",
                *advisor,
            ]
        )
        == 0
    )
    assert main(["aide", "watch", "add", "adv", "alice", "NVDA", "msft", *advisor]) == 0
    held = positions_of(advisor, capsys)
    assert held["positions"][0]["shares"] == 20 and held["positions"][0]["avg_cost"] == 160
    assert held["watchlist"] == ["MSFT", "NVDA"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["positions", "add", "adv", "alice", "AAPL", "-5"], "shares '-5' is negative"),
        (["positions", "add", "adv", "alice", "AAPL", "0"], "is zero"),
        (["positions", "add", "adv", "alice", "APPLE INC", "5"], "is not a ticker symbol"),
        (["positions", "add", "adv", "alice", "AAPL", "5", "--avg-cost", "-1"], "average cost"),
        (["positions", "add", "adv", "carol", "AAPL", "5"], "has no user 'carol'"),
        (["positions", "list", "adv", "carol"], "has no user 'carol'"),
        (["watch", "add", "adv", "alice", "$$$"], "is not a ticker symbol"),
        (["alerts", "adv", "--user", "carol"], "has no user 'carol'"),
        (["briefing", "nope", "--user", "alice"], "no aide named 'nope'"),
        (["user", "add", "adv", "alice"], "has a user named 'alice' already"),
        (["user", "add", "adv", "bob", "--risk", "yolo"], "--risk 'yolo'"),
        (["user", "add", "adv", "bob", "--threshold", "speed=3"], "unknown alert threshold"),
        (["alerts", "adv", "--user", "alice", "--since", "yesterday"], "neither a duration"),
        (["alerts", "adv", "--user", "alice", "--ack", "99"], "has no alert 99"),
        (["briefing", "adv", "--user", "alice", "--budget", "5"], "--budget 5 is outside"),
        # Nothing to cite: said before any model is asked (none is configured here).
        (["briefing", "adv", "--user", "alice"], "alice holds and watches nothing yet"),
        (["ask", "adv", "--user", "alice", "Bonds?"], "advisor 'adv' knows nothing yet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    advisor: list[str], argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert said in fails(["aide", *argv, *advisor], capsys)


@pytest.mark.slow
def test_a_missing_or_headerless_file_is_refused(
    advisor: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = fails(
        ["aide", "positions", "import", "adv", "alice", str(tmp_path / "none.csv"), *advisor],
        capsys,
    )
    assert "cannot read" in err
    headless = tmp_path / "headless.csv"
    headless.write_text("AAPL,10,150\n", encoding="utf-8")
    err = fails(["aide", "positions", "import", "adv", "alice", str(headless), *advisor], capsys)
    assert "line 1 must be a header" in err


@pytest.mark.slow
def test_a_digest_aide_is_not_an_advisor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", str(tmp_path / "kgot.db")]
    assert main(["aide", "create", "plain", "--entity", "acme", *db]) == 0
    err = fails(["aide", "user", "add", "plain", "alice", *db], capsys)
    assert "runs the digest program, not the advisor" in err
