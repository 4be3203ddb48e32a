"""The advisor's cycle: the insight pass writes checked Insight nodes (about, derived_from,
trust ``inferred``) from a question asked of the graph, old insights are re-checked with the
claim check and closed when a newer fact contradicts them, and a cycle with nothing new makes
no model call."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows
from kgot.aides.advisor.holdings import PositionRow
from kgot.graph_model import Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Store
from kgot.tests.advisor.market import QUERY, at, change, commit, edge, insight, market

PROPOSALS = {
    "worthy": True,
    "reason": "an earnings beat and a rate hike",
    "insights": [
        {
            "type": "signal",
            "summary": "Apple beat estimates",
            "action": "buy",
            "strength": 0.8,
            "about": ["node:aapl"],
            "derived_from": ["aapl_q4"],
            "basis": [
                {"subject": "fed", "property": "policy_rate", "value": 4.5},
                {"subject": "fed", "property": "policy_rate", "value": 9.9},
            ],
        },
        {  # evidence that is not an event or news: left out
            "type": "observation",
            "summary": "Apple is big",
            "strength": 0.5,
            "about": ["apple"],
            "derived_from": ["apple"],
        },
        {  # a node the evidence did not show: left out
            "type": "pattern",
            "summary": "Made up",
            "strength": 0.5,
            "about": ["unicorn"],
        },
        {  # nothing it rests on that the graph says: it could never be re-checked, left out
            "type": "signal",
            "summary": "Sell Apple",
            "action": "sell",
            "strength": 0.9,
            "about": ["aapl"],
            "derived_from": ["aapl_q4"],
            "basis": [{"subject": "apple", "property": "ceo", "value": "Nobody"}],
        },
    ],
}


def _advisor(store: Store, model: ScriptedChatModel, now: datetime) -> object:
    aide = create_aide(
        store, "adv", "markets", program="advisor", models={"planning": model, "execution": model}
    )
    market(store, "markets", now)
    user = advisor_rows.add_user(store, aide.row, "mia", risk="moderate")
    advisor_rows.import_positions(store, aide.row, user, [PositionRow("AAPL", 5.0)])
    return aide


@pytest.mark.slow
def test_the_insight_pass_writes_checked_insights_and_old_ones_are_rechecked(
    store: Store,
) -> None:
    model = ScriptedChatModel(
        script={
            "query": [QUERY],
            "advisor_insight": [PROPOSALS, {"worthy": False}],
            "advisor_briefing": ["- Apple [node:aapl]."],
        }
    )
    now = datetime.now(UTC)
    aide = _advisor(store, model, now)
    report = aide.run_cycle(now=now)

    program = report.program
    assert program is not None and program["insights"]["worthy"]
    [written] = program["insights"]["written"]
    rejected = " ".join(program["insights"]["rejected"])
    assert "not a MarketEvent or News" in rejected and "unicorn" in rejected
    assert "insight 4: no basis claim the graph corroborates" in rejected
    assert "9.9" in rejected  # a basis claim the graph does not support is not kept
    session = store.session("markets")
    graph = session.load_graph(include_meta=True)
    data = graph.nodes[written]
    assert data["label"] == "Insight" and data["action"] == "buy" and data["strength"] == 0.8
    assert data["basis"] == [{"subject": "fed", "property": "policy_rate", "value": 4.5}]
    assert data["_source_kind"] == "inferred"
    assert {(t, d["relationship"]) for _, t, d in graph.out_edges(written, data=True)} == {
        ("aapl", "about"),
        ("aapl_q4", "derived_from"),
    }
    # KGoT's RETRIEVE with the insight question: a read query ran in the sandbox, and the
    # structured answer saw its result beside the evidence pack.
    [query] = model.calls_for("query")
    assert "Is there a briefing-worthy insight for investors following AAPL" in query.prompt
    [asked] = model.calls_for("advisor_insight")
    assert "[node:aapl_q4]" in asked.prompt
    assert "What a query of the graph for this question returned" in asked.prompt
    assert "'id': 'fed_hike'" in asked.prompt or '"id": "fed_hike"' in asked.prompt
    assert program["alerts"] == 1  # the buy signal of 0.8 on AAPL, held
    assert program["briefings"]

    # Nothing new: no model call, nothing written.
    calls = len(model.calls)
    idle = aide.run_cycle(now=now)
    assert idle.program["skipped"] and len(model.calls) == calls and idle.llm_calls == 0

    # The Fed raises rates: the insight's basis (policy rate 4.5) is contradicted; it closes.
    change(store, "markets", Node("fed", "Institution", {"name": "Fed", "policy_rate": 4.75}))
    model_after = len(model.calls_for("advisor_insight"))
    later = aide.run_cycle(now=now)
    assert later.program["recheck"]["closed"] == {
        written: "fed.policy_rate = 4.5 is contradicted by fed"
    }
    assert written not in store.session("markets").load_graph()
    [closed] = [row for row in session.node_history(written) if row.get("closed_reason")]
    assert closed["closed_reason"] == "contradicted"
    assert len(model.calls_for("advisor_insight")) == model_after + 1  # asked again, new version


@pytest.mark.slow
def test_model_calls_stop_at_the_cycle_budget(store: Store) -> None:
    model = ScriptedChatModel(script={"advisor_insight": [PROPOSALS]})
    now = datetime.now(UTC)
    aide = _advisor(store, model, now)
    report = aide.run_cycle(now=now, max_cost_usd=0.0)
    assert report.program["stopped"].startswith("the cycle's cost reached --max-cost-usd 0")
    assert model.calls == []


@pytest.mark.slow
def test_contradicted_signals_about_a_held_asset_raise_one_alert(store: Store) -> None:
    model = ScriptedChatModel(
        script={
            "query": [QUERY],
            "advisor_insight": [{"worthy": False}],
            "advisor_briefing": ["- A [node:aapl]."],
        }
    )
    now = datetime.now(UTC)
    aide = _advisor(store, model, now)
    buy, buy_about = insight("ins_b", "aapl", action="buy", strength=0.5, now=now)
    sell, sell_about = insight("ins_s", "aapl", action="sell", strength=0.5, now=now)
    commit(store, "markets", [buy, sell], [buy_about, sell_about])
    aide.run_cycle(now=now)
    found = advisor_rows.alerts(store, aide.row)
    assert [(a.rule, a.facts) for a in found] == [
        ("contradicting_insights", ("node:ins_b", "node:ins_s"))
    ]


@pytest.mark.slow
def test_a_briefing_that_keeps_failing_waits_for_new_evidence(store: Store) -> None:
    model = ScriptedChatModel(
        script={
            "query": [QUERY],
            "advisor_insight": [{"worthy": False}],
            "advisor_briefing": ["Buy now."],
        }
    )
    now = datetime.now(UTC)
    aide = _advisor(store, model, now)

    for cycle in range(3):  # each cycle: a draft and two fixes, all citing nothing
        report = aide.run_cycle(now=now)
        assert report.program["failures"] and not report.program["given_up"], cycle
        assert len(model.calls_for("advisor_briefing")) == 3 * (cycle + 1)
    waiting = aide.run_cycle(now=now)
    assert waiting.program["given_up"] == ["mia"] and waiting.llm_calls == 0
    assert aide.run_cycle(now=now).program["skipped"]  # and the cycles after it idle

    # New evidence about her holding: tried again.
    commit(
        store,
        "markets",
        [Node("aapl_guidance", "MarketEvent", {"type": "guidance", "occurred_at": at(0, now)})],
        [edge("aapl_guidance", "affects", "apple", direction="positive", magnitude=0.4)],
    )
    again = aide.run_cycle(now=now)
    assert not again.program["given_up"] and len(model.calls_for("advisor_briefing")) == 12
