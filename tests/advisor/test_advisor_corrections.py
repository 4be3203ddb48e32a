"""Corrections a user needs (issue 25): removing a position or a watched symbol, changing a
profile, removing a user. Each is scoped by aide and user: another user's rows, and the rows
of another advisor's user of the same name, are byte-for-byte what they were (SQLite and
PostgreSQL)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from kgot.aides import aide_rows, create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.alerts import Alert
from kgot.aides.advisor.holdings import PositionRow
from kgot.aides.advisor.schema import ADVISOR_TABLES as ADVISOR
from kgot.aides.schema import AIDE_TABLES as AIDE
from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.persistence import Store, open_store
from kgot.tests.support.command_line import refused as _refused
from kgot.tests.support.command_line import run_cli as _run

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ADVISOR_TABLES = (
    "advisor_users",
    "advisor_positions",
    "advisor_watchlist",
    "advisor_briefings",
    "advisor_alerts",
)
AIDE_TABLES = ("aide_outputs", "aide_deliveries")


def _fill(store: Store, aide: str, user: str, symbol: str) -> None:
    """A user with everything the advisor keeps of a user: positions, a watchlist, a
    briefing, an alert, an output of their own with a delivery logged."""
    row = advisor_rows.advisor_aide(store, aide)
    who = advisor_rows.add_user(store, row, user, risk="moderate", horizon="10y", goals=["house"])
    advisor_rows.import_positions(
        store, row, who, [PositionRow(symbol, 10.0, 150.0), PositionRow("TLT", 4.0, 90.5)]
    )
    advisor_rows.add_watch(store, row, who, ["NVDA", "MSFT"])
    made = advisor_rows.save_briefing(
        store,
        row,
        who,
        text=f"- {user}'s briefing [price:{symbol}]",
        facts=[f"price:{symbol}"],
        pack=[f"price:{symbol}"],
        pack_key="k",
        budget=1500,
        cycle_id=None,
        usage={},
        now=NOW,
    )
    [alert] = advisor_rows.record_alerts(
        store,
        row,
        who,
        [Alert("price_drop", f"price_drop:{symbol}@2026-11-19", "warning", "fell", (), symbol)],
        cycle_id=None,
        now=NOW,
    )
    output = api.add_user_output(store, row, who, "jsonl", f"/tmp/{aide}-{user}.jsonl")
    # The delivery log's rows, as a worker logs a delivery: claimed, then its try recorded.
    for key in (f"aide {row.id}/briefing {made.id}", f"aide {row.id}/alert {alert.id}"):
        assert aide_rows.claim_delivery(
            store, row, output, key, 1, owner="worker", now=NOW, at_most_once=False
        )
        aide_rows.record_delivery(store, output, key, owner="worker", ok=True, error=None, now=NOW)


@pytest.fixture
def advisors(store_url: str) -> list[str]:
    """Two advisors on one entity, each with a user alice; adv also has bob."""
    with open_store(store_url) as store:
        create_aide(store, "adv", "markets", program="advisor")
        create_aide(store, "other", "markets", program="advisor")
        _fill(store, "adv", "alice", "AAPL")
        _fill(store, "adv", "bob", "AAPL")
        _fill(store, "other", "alice", "AAPL")
    return ["--db", store_url]


def _rows(store_url: str, *, but: tuple[str, str] | None = None) -> dict[str, list[tuple]]:
    """Every row of the advisor's and the aides' user tables, but those of one (aide, user),
    in full: what must not change."""
    with open_store(store_url) as store:
        skip_user, skip_outputs = None, set()
        if but is not None:
            row = advisor_rows.advisor_aide(store, but[0])
            skip_user = advisor_rows.get_user(store, row, but[1]).id
            skip_outputs = {
                o.id for o in aide_rows.outputs(store, row) if o.spec.get("user") == but[1]
            }
        found: dict[str, list[tuple]] = {}
        with store.read() as connection:
            for name in (*ADVISOR_TABLES, *AIDE_TABLES):
                table = getattr(ADVISOR if name.startswith("advisor_") else AIDE, name)
                rows = connection.execute(select(table).order_by(table.c.id)).all()
                found[name] = [
                    tuple(r)
                    for r in rows
                    if not (
                        (name == "advisor_users" and r.id == skip_user)
                        or (name.startswith("advisor_") and getattr(r, "user_id", 0) == skip_user)
                        or (name == "aide_outputs" and r.id in skip_outputs)
                        or (name == "aide_deliveries" and r.output_id in skip_outputs)
                    )
                ]
    return found


def _held(db: list[str], capsys: pytest.CaptureFixture[str], aide: str, user: str) -> dict:
    code, out, err = _run(capsys, "aide", "positions", "list", aide, user, "--json", *db)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.slow
def test_positions_remove_takes_one_user_s_positions_only(
    advisors: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = advisors
    others = _rows(store_url, but=("adv", "alice"))
    code, out, err = _run(capsys, "aide", "positions", "remove", "adv", "alice", "aapl", *db)
    assert code == 0, err
    assert out == "removed alice's AAPL position (10 shares at 150 average cost)\n"
    assert [p["symbol"] for p in _held(db, capsys, "adv", "alice")["positions"]] == ["TLT"]
    assert _rows(store_url, but=("adv", "alice")) == others  # bob's, other's alice: unchanged

    # Unknown ones are refused with what the user holds, and nothing is removed.
    _refused(
        _run(capsys, "aide", "positions", "remove", "adv", "alice", "TLT", "AAPL", *db),
        "alice has no AAPL position (positions: TLT); nothing removed",
    )
    _refused(
        _run(capsys, "aide", "positions", "remove", "adv", "carol", "TLT", *db),
        "advisor 'adv' has no user 'carol'",
    )
    _refused(
        _run(capsys, "aide", "positions", "remove", "adv", "alice", "APPLE INC", *db),
        "'APPLE INC' is not a ticker symbol",
    )
    assert [p["symbol"] for p in _held(db, capsys, "adv", "alice")["positions"]] == ["TLT"]
    assert _rows(store_url, but=("adv", "alice")) == others


@pytest.mark.slow
def test_watch_remove_takes_one_user_s_symbols_only(
    advisors: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = advisors
    others = _rows(store_url, but=("adv", "alice"))
    code, out, err = _run(capsys, "aide", "watch", "remove", "adv", "alice", "nvda", *db)
    assert code == 0 and out == "alice no longer watches NVDA\n", err
    assert _held(db, capsys, "adv", "alice")["watchlist"] == ["MSFT"]
    _refused(
        _run(capsys, "aide", "watch", "remove", "adv", "alice", "MSFT", "NVDA", *db),
        "alice does not watch NVDA (watchlist: MSFT); nothing removed",
    )
    assert _held(db, capsys, "adv", "alice")["watchlist"] == ["MSFT"]
    assert _held(db, capsys, "adv", "bob")["watchlist"] == ["MSFT", "NVDA"]
    assert _held(db, capsys, "other", "alice")["watchlist"] == ["MSFT", "NVDA"]
    assert _rows(store_url, but=("adv", "alice")) == others


@pytest.mark.slow
def test_user_update_changes_only_the_options_given(
    advisors: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = advisors
    others = _rows(store_url, but=("adv", "alice"))

    def profile(aide: str, user: str) -> dict[str, Any]:
        code, out, err = _run(capsys, "aide", "user", "list", aide, "--json", *db)
        assert code == 0, err
        return next(p for p in json.loads(out) if p["name"] == user)

    before = profile("adv", "alice")
    code, out, err = _run(
        capsys,
        "aide",
        "user",
        "update",
        "adv",
        "alice",
        "--risk",
        "aggressive",
        "--threshold",
        "price_drop_pct=4",
        *db,
    )
    assert code == 0, err
    assert out == (
        "updated user alice of advisor adv: risk moderate -> aggressive; "
        "thresholds (none) -> price_drop_pct=4\n"
    )
    after = profile("adv", "alice")
    assert after == {**before, "risk": "aggressive", "thresholds": {"price_drop_pct": 4.0}}

    # Lists are replaced, an empty value clears, NAME= goes back to the risk profile's.
    code, out, err = _run(
        capsys,
        "aide",
        "user",
        "update",
        "adv",
        "alice",
        "--goal",
        "growth",
        "--goal",
        "income",
        "--horizon",
        "",
        "--pref",
        "esg",
        "--threshold",
        "price_drop_pct=",
        *db,
    )
    assert code == 0, err
    assert profile("adv", "alice") == {
        **after,
        "goals": ["growth", "income"],
        "horizon": None,
        "preferences": ["esg"],
        "thresholds": {},
    }
    assert _rows(store_url, but=("adv", "alice")) == others

    for argv, said in [
        ((), "nothing to change; give --rename, --risk"),
        (("--risk", "yolo"), "--risk 'yolo' is not one of"),
        (("--threshold", "speed=3"), "unknown alert threshold 'speed'"),
        (("--threshold", "speed="), "unknown alert threshold 'speed'"),  # not even to drop
        (("--threshold", "impact_max_age_days=inf"), "must be 0 to 3650, not 'inf'"),
        (("--rename", "bob"), "advisor 'adv' has a user named 'bob' already"),
        (("--rename", "a b"), "user name 'a b' must be"),
        (("--horizon", "x" * 40), "is longer than 32 characters"),  # PostgreSQL's column
    ]:
        _refused(_run(capsys, "aide", "user", "update", "adv", "alice", *argv, *db), said)
    _refused(
        _run(capsys, "aide", "user", "update", "adv", "carol", "--risk", "moderate", *db),
        "advisor 'adv' has no user 'carol'",
    )
    assert profile("adv", "alice")["risk"] == "aggressive"  # nothing half-changed
    assert _rows(store_url, but=("adv", "alice")) == others


@pytest.mark.slow
def test_profile_texts_given_on_several_lines_are_kept_on_one(
    advisors: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A goal, preference or horizon with line breaks (pasted) is stored on one line, so
    `user update` says what changed in one line, as it says everything."""
    db = advisors
    with open_store(store_url) as store:
        carol = api.add_user(
            store, "adv", "carol", horizon="10y\n", goals=["retire\r\n at 60", " \n "]
        )
    assert (carol.horizon, carol.goals) == ("10y", ("retire at 60",))
    code, out, err = _run(
        capsys,
        "aide",
        "user",
        "update",
        "adv",
        "carol",
        "--goal",
        "a house\nkgot: error: not really",
        "--pref",
        "esg\u2028dividends",
        "--horizon",
        "5y\n\n",
        *db,
    )
    assert code == 0, err
    assert out == (
        "updated user carol of advisor adv: horizon 10y -> 5y; goals retire at 60 -> a house "
        "kgot: error: not really; preferences (none) -> esg dividends\n"
    )


@pytest.mark.slow
def test_a_user_with_nothing_but_a_profile_is_removed(advisors: list[str], store_url: str) -> None:
    with open_store(store_url) as store:
        api.add_user(store, "adv", "carol")
        before = _rows(store_url)
        assert api.remove_user(store, "adv", "carol") == advisor_rows.UserRows()
    assert _rows(store_url) == {
        **before,
        "advisor_users": [r for r in before["advisor_users"] if "carol" not in r],
    }


@pytest.mark.slow
def test_a_renamed_user_keeps_their_own_output(advisors: list[str], store_url: str) -> None:
    with open_store(store_url) as store:
        row = advisor_rows.advisor_aide(store, "adv")
        others = _rows(store_url, but=("adv", "alice"))
        renamed = api.update_user(store, "adv", "alice", name="alicia")
        assert renamed.name == "alicia" and renamed.goals == ("house",)
        specs = [o.spec for o in aide_rows.outputs(store, row)]
        assert [s["user"] for s in specs] == ["alicia", "bob"]  # it follows her
        with pytest.raises(UsageError, match="has no user 'alice'"):
            api.positions(store, "adv", "alice")
        assert len(api.positions(store, "adv", "alicia").positions) == 2
        # Another advisor's alice is another person: untouched.
        other = advisor_rows.advisor_aide(store, "other")
        assert [o.spec["user"] for o in aide_rows.outputs(store, other)] == ["alice"]
        assert advisor_rows.get_user(store, other, "alice").name == "alice"
    # Every other row is byte for byte what it was (her own rows keep their user id).
    assert _rows(store_url, but=("adv", "alicia")) == others


@pytest.mark.slow
def test_user_remove_removes_everything_of_that_user_only(
    advisors: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = advisors
    others = _rows(store_url, but=("adv", "alice"))
    code, out, err = _run(capsys, "aide", "user", "remove", "adv", "alice", "--yes", *db)
    assert code == 0, err
    assert out.startswith(
        "removed user alice from advisor adv: the profile, 2 positions, 2 watched symbols, "
        "1 briefing, 1 alert and 1 output. Kept: what outputs delivered already"
    )
    with open_store(store_url) as store:
        row = advisor_rows.advisor_aide(store, "adv")
        assert [u.name for u in advisor_rows.users(store, row)] == ["bob"]
        assert [o.spec["user"] for o in aide_rows.outputs(store, row)] == ["bob"]
    after = _rows(store_url)
    # Every row left is one that was not alice's of adv, byte for byte; none of hers is.
    assert after == others
    _refused(
        _run(capsys, "aide", "user", "remove", "adv", "alice", "--yes", *db),
        "advisor 'adv' has no user 'alice'",
    )
    # The name is free again, for a new user who inherits nothing.
    assert main(["aide", "user", "add", "adv", "alice", *db]) == 0
    assert _held(db, capsys, "adv", "alice") == {
        "user": "alice",
        "positions": [],
        "watchlist": [],
    }


@pytest.mark.slow
def test_user_remove_asks_first_and_refuses_without_a_terminal(
    advisors: list[str],
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = advisors
    everything = _rows(store_url)
    _refused(
        _run(capsys, "aide", "user", "remove", "adv", "alice", *db),  # stdin: not a terminal
        "removing user 'alice' of advisor 'adv' (2 positions, 2 watched symbols, 1 briefing, "
        "1 alert and 1 output) cannot be undone; pass --yes to confirm",
    )

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = _run(capsys, "aide", "user", "remove", "adv", "alice", *db)
    assert code != 0 and "Remove user 'alice' of advisor 'adv' with 2 positions" in out
    assert _rows(store_url) == everything  # refused and declined: nothing removed
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = _run(capsys, "aide", "user", "remove", "adv", "alice", *db)
    assert code == 0 and "removed user alice from advisor adv" in out, err
