"""Briefings: an evidence pack within its token budget (holdings first), a model-written text
whose every statement cites the pack, a validator that sends bad citations back, the footer,
and no model call when nothing changed."""

from __future__ import annotations

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.evidence import MarketIndex, build_pack
from kgot.aides.advisor.holdings import PositionRow
from kgot.aides.advisor.writing import (
    DISCLAIMER,
    WritingFailed,
    check_citations,
    cited_ids,
    statements,
)
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Store
from kgot.tests.advisor.market import NOW, market


def test_the_validator_wants_a_citation_per_statement_and_only_pack_ids() -> None:
    pack = {"node:aapl", "edge:aapl-issued_by->apple", "price:AAPL"}
    good = (
        "Holdings:\n- Apple is the issuer [edge:aapl-issued_by->apple]. It rose [price:AAPL].\n"
        "- AAPL [node:aapl, price:AAPL]"
    )
    assert check_citations(good, pack) == []
    assert cited_ids(good) == ["edge:aapl-issued_by->apple", "price:AAPL", "node:aapl"]
    assert len(statements(good)) == 3  # the section title is not a statement
    bad = "- Apple rose [node:apple_x]. It is great.\n- Fine [node:aapl]"
    problems = check_citations(bad, pack)
    assert problems == [
        "[node:apple_x] is not an id of the evidence; cite only the ids listed",
        "this statement cites nothing: 'It is great.'",
    ]
    assert check_citations("", pack) == ["the reply is empty"]


@pytest.fixture
def advisor(store: Store) -> Store:
    create_aide(store, "adv", "markets", program="advisor")
    market(store, "markets")
    row = advisor_rows.advisor_aide(store, "adv")
    alice = advisor_rows.add_user(store, row, "alice", risk="moderate", goals=["retirement"])
    advisor_rows.import_positions(store, row, alice, [PositionRow("AAPL", 37.25, 151.17)])
    advisor_rows.add_watch(store, row, alice, ["NVDA"])
    return store


@pytest.mark.slow
def test_the_pack_puts_holdings_first_and_never_exceeds_its_budget(advisor: Store) -> None:
    session = advisor.session("markets")
    index = MarketIndex(session.load_graph(include_meta=True), session.type_catalog(), now=NOW)
    full = build_pack(index, ["AAPL"], ["NVDA"], budget=50_000)
    groups = [item.group for item in full.items]
    assert groups == sorted(groups, key=("holding", "watch").index)  # holdings, then watchlist
    assert {"node:aapl", "node:apple", "edge:aapl_q4-affects->apple"} <= set(full.ids)
    assert "node:nvidia" in full.ids and "node:fed" not in full.ids  # 3 hops away
    for budget in (100, 150, 300, 600, 1000):
        pack = build_pack(index, ["AAPL"], ["NVDA"], budget=budget)
        assert pack.tokens <= budget
        assert pack.ids == [i for i in full.ids if i in set(pack.ids)]  # best first, kept


@pytest.mark.slow
def test_a_briefing_citing_outside_the_pack_is_sent_back_and_fixed(advisor: Store) -> None:
    model = ScriptedChatModel(
        script={
            "advisor_briefing": [
                "- Apple beat estimates [node:aapl_q4]. Apple launched a car [node:apple_car].",
                "- Apple beat estimates [node:aapl_q4] [edge:aapl_q4-affects->apple].",
            ]
        }
    )
    made = api.get_briefing(advisor, "adv", "alice", models={"planning": model}, now=NOW)
    assert not made.reused
    assert made.facts == ["node:aapl_q4", "edge:aapl_q4-affects->apple"]
    assert set(made.facts) <= set(made.pack)
    assert made.text.endswith(DISCLAIMER) and "Not investment advice" in made.text
    first, fix = model.calls_for("advisor_briefing")
    assert "[node:apple_car] is not an id of the evidence" in fix.prompt
    assert "37.25" in first.prompt and "retirement" in first.prompt  # her own data, her step

    again = api.get_briefing(advisor, "adv", "alice", models={"planning": model}, now=NOW)
    assert again.reused and again.id == made.id
    assert len(model.calls) == 2  # nothing changed: no model call
    stored = api.briefing(advisor, "markets", "alice", models={"planning": model}, now=NOW)
    assert stored["id"] == made.id and stored["facts"] == made.facts  # by entity, as JSON


@pytest.mark.slow
def test_statements_that_never_cite_the_pack_are_left_out(advisor: Store) -> None:
    model = ScriptedChatModel(
        script={"advisor_briefing": ["- Up [node:aapl]. Moon soon [node:moon].\n- Rumour."]}
    )
    made = api.get_briefing(advisor, "adv", "alice", models={"planning": model}, now=NOW)
    assert made.dropped == 2
    assert made.text.startswith("- Up [node:aapl].") and "moon" not in made.text.lower()
    assert len(model.calls_for("advisor_briefing")) == 3  # a draft and two fixes

    hopeless = ScriptedChatModel(script={"advisor_briefing": ["Buy everything now."]})
    with pytest.raises(WritingFailed, match="did not write a text citing only the evidence"):
        api.get_briefing(
            advisor, "adv", "alice", models={"planning": hopeless}, now=NOW, fresh=True
        )
    assert len(advisor_rows.briefings(advisor, advisor_rows.advisor_aide(advisor, "adv"))) == 1


@pytest.mark.slow
def test_ask_answers_from_the_pack_and_the_question_s_matches(advisor: Store) -> None:
    model = ScriptedChatModel(
        script={
            "advisor_ask": [
                "Rates went up, which weighs on bonds [edge:fed_hike-affects->fixed_income]."
            ]
        }
    )
    answer = api.ask(
        advisor,
        "adv",
        "alice",
        "What did the Fed hike do to fixed income?",
        models={"planning": model},
        now=NOW,
    )
    assert answer.facts == ["edge:fed_hike-affects->fixed_income"]
    assert "Not investment advice" in answer.text
    [call] = model.calls_for("advisor_ask")
    assert "Question: What did the Fed hike do" in call.prompt
