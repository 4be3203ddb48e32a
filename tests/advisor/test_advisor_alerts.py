"""The alert rules: deterministic, explained (rule and fact ids), per-profile thresholds, and
never the same alert twice, not even across cycles or when delivered."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows
from kgot.aides.advisor.alerts import AlertIndex, evaluate
from kgot.aides.advisor.evidence import MarketIndex
from kgot.aides.advisor.holdings import PositionRow
from kgot.aides.advisor.market_data import quote_from
from kgot.graph_model import Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Store
from kgot.tests.advisor.market import NOW, QUERY, commit, insight, market


def _setup(store: Store, now: datetime = NOW, **models: object) -> tuple[object, object]:
    aide = create_aide(store, "adv", "markets", program="advisor", models=models or None)
    market(store, "markets", now)
    return aide, aide.row


def _portfolio(store: Store, row: object, name: str, risk: str, held: list[str], **kw: object):
    user = advisor_rows.add_user(store, row, name, risk=risk, **kw)
    advisor_rows.import_positions(store, row, user, [PositionRow(s, 10.0) for s in held])
    return advisor_rows.portfolios(store, row, user)[0]


def _index(store: Store, now: datetime = NOW) -> AlertIndex:
    session = store.session("markets")
    graph = session.load_graph(include_meta=True)
    return AlertIndex(MarketIndex(graph, session.type_catalog(), now=now))


def test_each_rule_names_its_facts_and_thresholds_follow_the_profile(store: Store) -> None:
    _aide, row = _setup(store)
    buy, buy_about = insight("ins_buy", "aapl", action="buy", strength=0.75)
    sell, sell_about = insight("ins_sell", "apple", action="sell", strength=0.65)
    stale, stale_about = insight("ins_stale", "aapl", action="sell", strength=0.9, age_days=9)
    note, note_about = insight("ins_note", "aapl", action=None, kind="observation", strength=0.99)
    commit(
        store,
        "markets",
        [buy, sell, stale, note],
        [buy_about, sell_about, stale_about, note_about],
    )
    careful = _portfolio(store, row, "carol", "conservative", ["AAPL", "TLT"])
    middle = _portfolio(store, row, "mia", "moderate", ["AAPL", "TLT"])
    bold = _portfolio(store, row, "bo", "aggressive", ["AAPL", "TLT"])
    watcher = _portfolio(store, row, "walt", "conservative", [])
    advisor_rows.add_watch(store, row, watcher.user, ["AAPL", "TLT"])
    watcher = advisor_rows.portfolios(store, row, watcher.user)[0]
    index = _index(store)

    def found(portfolio: object) -> dict[str, tuple[str, ...]]:
        return {a.key: a.facts for a in evaluate(index, portfolio, now=NOW)}

    carol = found(careful)
    assert carol == {
        # buy 0.75 and sell 0.65 both pass the conservative 0.6; the 9-day-old one is too old
        "strong_signal:ins_buy": ("node:ins_buy", "edge:ins_buy-about->aapl"),
        "strong_signal:ins_sell": ("node:ins_sell", "edge:ins_sell-about->apple"),
        # a negative affects of 0.7 on the asset class of TLT (1 day old)
        "negative_impact:edge:fed_hike-affects->fixed_income": (
            "node:fed_hike",
            "edge:fed_hike-affects->fixed_income",
            "edge:tlt-belongs_to->fixed_income",
        ),
        # 0.5 on Apple's sector reaches the conservative 0.4, through the company
        "negative_impact:edge:sector_news-affects->technology": (
            "node:sector_news",
            "edge:sector_news-affects->technology",
            "edge:aapl-issued_by->apple",
            "edge:apple-in_sector->technology",
        ),
        "contradicting_insights:ins_buy|ins_sell": ("node:ins_buy", "node:ins_sell"),
    }
    # Moderate: 0.65 < 0.7 and 0.5 < 0.6 are quiet; the 30-day-old shock never counts.
    assert set(found(middle)) == {
        "strong_signal:ins_buy",
        "negative_impact:edge:fed_hike-affects->fixed_income",
        "contradicting_insights:ins_buy|ins_sell",
    }
    # Aggressive: 0.75 < 0.8 and 0.7 < 0.75.
    assert set(found(bold)) == {"contradicting_insights:ins_buy|ins_sell"}
    assert found(watcher) == {}  # watching is not holding

    per_user = _portfolio(
        store, row, "tess", "aggressive", ["TLT"], thresholds={"impact_magnitude": 0.5}
    )
    assert set(found(per_user)) == {"negative_impact:edge:fed_hike-affects->fixed_income"}
    messages = [a.message for a in evaluate(index, middle, now=NOW)]
    assert any("BUY signal on AAPL" in m for m in messages)


@pytest.mark.slow
def test_price_drops_use_the_cached_prices(store: Store) -> None:
    _aide, row = _setup(store)
    held = _portfolio(store, row, "mia", "moderate", ["NVDA"])
    bars = [{"day": "2026-11-18", "close": 500.0}, {"day": "2026-11-19", "close": 470.0}]
    alerts = evaluate(_index(store), held, now=NOW, quotes={"NVDA": quote_from("NVDA", bars)})
    assert [(a.rule, a.key, a.facts) for a in alerts] == [
        ("price_drop", "price_drop:NVDA@2026-11-19", ("price:NVDA@2026-11-19",))
    ]
    small = [{"day": "2026-11-18", "close": 500.0}, {"day": "2026-11-19", "close": 480.0}]
    assert evaluate(_index(store), held, now=NOW, quotes={"NVDA": quote_from("NVDA", small)}) == []


@pytest.mark.slow
def test_an_alert_is_recorded_and_delivered_once(store: Store, tmp_path: Path) -> None:
    model = ScriptedChatModel(
        script={
            "query": [QUERY],
            "advisor_insight": [{"worthy": False}],
            "advisor_briefing": ["- TLT [node:tlt]"],
        }
    )
    outbox = tmp_path / "outbox.jsonl"
    aide, row = _setup(store, datetime.now(UTC), planning=model, execution=model)
    aide.add_output("jsonl", str(outbox))
    now = datetime.now(UTC)  # after the output was added: it gets what is made from now on
    held = _portfolio(store, row, "mia", "moderate", ["TLT"])
    found = evaluate(_index(store, now), held, now=now)
    assert (
        len(advisor_rows.record_alerts(store, row, held.user, found, cycle_id=None, now=now)) == 1
    )
    assert advisor_rows.record_alerts(store, row, held.user, found, cycle_id=None, now=now) == []

    first = aide.run_cycle(now=now)
    second = aide.run_cycle(now=now)
    lines = [json.loads(line) for line in outbox.read_text().splitlines()]
    alerts = [line for line in lines if line["kind"] == "alert"]
    assert [a["rule"] for a in alerts] == ["negative_impact"]
    assert [line["kind"] for line in lines].count("briefing") == 1
    assert first.program is not None and first.program["alerts"] == 0  # recorded before
    assert second.program is not None and second.program["skipped"]
    assert len(advisor_rows.alerts(store, row, held.user)) == 1
    assert second.llm_calls == 0

    # The graph moves on (a new version, so the rules run again) and the alert still holds:
    # it is neither made nor sent again.
    commit(store, "markets", [Node("utilities", "Sector", {"name": "Utilities"})])
    third = aide.run_cycle(now=now)
    assert third.program is not None and not third.program["skipped"]
    assert third.program["alerts"] == 0 and third.deliveries == []
    assert len(advisor_rows.alerts(store, row, held.user)) == 1
    assert [json.loads(line)["kind"] for line in outbox.read_text().splitlines()].count(
        "alert"
    ) == 1
