"""The advisor's ``alerts`` and ``briefing`` tools over stdio: the alerts its cycles recorded
for a user of the entity's advisor; a briefing written by a scripted model, then reused; an
entity without an advisor says so; an aide whose name is the entity's but that works on another
entity never answers; a briefing whose worst case is above the cost cap is refused before any
model request."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import add_user
from kgot.aides.advisor.advisor_rows import get_user, record_alerts
from kgot.aides.advisor.alerts import Alert
from kgot.aides.advisor.mcp import briefing_cost_bound
from kgot.aides.aide_rows import get_aide
from kgot.config import load_settings
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import run, seed, stdio_session, text_of


@pytest.mark.slow
def test_alerts_of_the_entitys_advisor(tmp_path: Path) -> None:
    url = str(tmp_path / "kgot.db")
    seed(url, "a")
    seed(url, "b", own_company=True)
    with open_store(url) as store:
        create_aide(store, "adv", "a", program="advisor")
        add_user(store, "adv", "alice", risk="conservative")
        row = get_aide(store, "adv")
        alert = Alert(
            rule="negative_impact",
            key="negative_impact:apple:1",
            severity="warning",
            message="A negative event affects Apple, which alice holds",
            facts=("apple",),
            symbol="AAPL",
        )
        record_alerts(
            store, row, get_user(store, row, "alice"), [alert], cycle_id=None, now=datetime.now(UTC)
        )

    async def call(entity: str, name: str, arguments: dict[str, Any]) -> Any:
        async with stdio_session(["mcp", "serve", "--entity", entity, "--db", url]) as session:
            return await session.call_tool(name, arguments)

    found = run(lambda: call("a", "alerts", {"user": "alice"}))
    assert not found.is_error, text_of(found)
    alerts = found.structured_content["result"]["alerts"]
    assert [a["rule"] for a in alerts] == ["negative_impact"] and alerts[0]["facts"] == ["apple"]
    stranger = run(lambda: call("a", "alerts", {"user": "mallory"}))
    assert stranger.is_error
    none_here = run(lambda: call("b", "briefing", {"user": "alice"}))
    assert none_here.is_error and "entity 'b' has no advisor" in text_of(none_here)


@pytest.mark.slow
def test_an_aide_named_like_the_entity_but_bound_to_another_stays_out(tmp_path: Path) -> None:
    """Entity ``a`` has its advisor ``adv``; an advisor *named* ``a`` works on entity ``b``.
    A client of ``a`` asking for alice's alerts gets ``a``'s advisor, never the aide whose name
    is ``a``: the tools find the advisor by the entity it is bound to."""
    url = str(tmp_path / "kgot.db")
    seed(url, "a")
    seed(url, "b", own_company=True)
    with open_store(url) as store:
        create_aide(store, "adv", "a", program="advisor")
        create_aide(store, "a", "b", program="advisor")
        add_user(store, "a", "alice", risk="aggressive")
        row = get_aide(store, "a")
        secret = Alert(
            rule="negative_impact",
            key="negative_impact:quokka:1",
            severity="warning",
            message="Zanzibar Quokka Holdings is in trouble, which alice holds",
            facts=("quokka",),
            symbol="ZQH",
        )
        record_alerts(
            store,
            row,
            get_user(store, row, "alice"),
            [secret],
            cycle_id=None,
            now=datetime.now(UTC),
        )

    async def call(name: str) -> Any:
        async with stdio_session(["mcp", "serve", "--entity", "a", "--db", url]) as session:
            return await session.call_tool(name, {"user": "alice"})

    for name in ("alerts", "briefing"):
        found = run(lambda name=name: call(name))  # type: ignore[misc]
        text = text_of(found)
        assert found.is_error, text
        assert "quokka" not in text.lower() and "'b'" not in text, text
        assert "alice" in text and "adv" in text, text  # no alice at a's own advisor


@pytest.mark.slow
def test_a_briefing_that_could_cost_more_than_the_cap_is_refused_before_any_model_call(
    tmp_path: Path,
) -> None:
    """The planning model's price makes the worst case of a briefing $1.37 at the default
    budget: above the server's $1 cap, below a $5 one. The model's endpoint does not exist,
    so a briefing that got as far as a model request would fail with another error."""
    from kgot.aides.advisor import add_position
    from kgot.tests.advisor.market import market

    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        create_aide(store, "adv", "a", program="advisor")
        market(store, "a")
        add_user(store, "adv", "alice")
        add_position(store, "adv", "alice", "AAPL", 1)  # evidence: a briefing needs the model
    config = tmp_path / "config.toml"
    config.write_text(
        "[llm]\n"
        'model = "openai:pricey"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
        "max_retries = 0\n"
        '[llm.prices."openai:pricey"]\n'
        "input = 10.0\n"
        "output = 200.0\n"
    )
    drafts, bound = briefing_cost_bound(load_settings(config_path=config), None)
    assert drafts == 3 and bound is not None and 1.0 < bound < 5.0

    async def call(cap: str, arguments: dict[str, Any]) -> Any:
        command = ["mcp", "serve", "--entity", "a", "--ask-max-cost-usd", cap, "--db", url]
        async with stdio_session(command, config=config) as session:
            return await session.call_tool("briefing", {"user": "alice", **arguments})

    refused = run(lambda: call("1", {}))
    assert refused.is_error and f"could cost up to ${bound:.4f}" in text_of(refused)
    lowered = run(lambda: call("5", {"max_cost_usd": 1.2}))
    assert lowered.is_error and "above the cap of $1.2" in text_of(lowered)
    allowed = run(lambda: call("5", {}))  # within the cap: it reaches the (absent) model
    assert allowed.is_error and "is unreachable" in text_of(allowed), text_of(allowed)


@pytest.mark.slow
def test_briefing_of_the_entitys_advisor_is_written_then_reused(tmp_path: Path) -> None:
    """A scripted planning model (free: no cost cap in the way) writes alice's briefing from the
    market graph; the second call finds the evidence unchanged and returns it without a model
    call."""
    from kgot.aides.advisor import advisor_rows
    from kgot.aides.advisor.holdings import PositionRow
    from kgot.tests.advisor.market import market

    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        create_aide(store, "adv", "markets", program="advisor")
        market(store, "markets")
        row = advisor_rows.advisor_aide(store, "adv")
        alice = advisor_rows.add_user(store, row, "alice", risk="moderate")
        advisor_rows.import_positions(store, row, alice, [PositionRow("AAPL", 37.25, 151.17)])
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps({"advisor_briefing": ["- Apple beat estimates [node:aapl_q4] [node:aapl]."]})
    )
    config = tmp_path / "config.toml"
    config.write_text(f'[llm]\nmodel = "scripted:{script}"\n')

    async def twice() -> list[Any]:
        command = ["mcp", "serve", "--entity", "markets", "--db", url]
        async with stdio_session(command, config=config) as session:
            return [await session.call_tool("briefing", {"user": "alice"}) for _ in range(2)]

    first, second = run(twice)
    assert not first.is_error, text_of(first)
    made = first.structured_content["result"]
    assert made["facts"] == ["node:aapl_q4", "node:aapl"] and not made["reused"]
    assert "Apple beat estimates" in made["text"]
    again = second.structured_content["result"]
    assert again["reused"] and again["id"] == made["id"]


@pytest.mark.slow
def test_ask_on_an_advisors_entity_offers_market_data(tmp_path: Path) -> None:
    """The ``ask`` tool's run on an entity whose advisor has a price file calls
    ``market_data`` and gets the cached close; on an entity without an advisor the same
    scripted call finds no such tool."""
    from kgot.aides.advisor import set_market_data

    url = str(tmp_path / "kgot.db")
    prices = tmp_path / "quotes.csv"
    prices.write_text("symbol,date,close\nAAPL,2026-11-18,100\nAAPL,2026-11-19,103.25\n")
    with open_store(url) as store:
        create_aide(store, "adv", "markets", program="advisor")
        set_market_data(store, "adv", file=str(prices))
        store.create_entity("plain")
    call = {"name": "market_data", "args": {"symbols": ["AAPL"], "days": 1}}
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "decide": [
                    {"decision": "INSERT", "reason": "need the price"},
                    {"decision": "RETRIEVE", "reason": "have it"},
                ],
                "define_tool_calls": [{"$tool_calls": [call]}],
                "update_graph": [
                    '```python\nG.add_node("aapl", label="Asset", symbol="AAPL")\n```'
                ],
                "query": ["```python\nresult = 1\n```"],
                "math_check": [{"needs_math": False, "reason": "stated"}],
                "solve": [{"answer": "103.25", "reasoning": "from the tool"}],
            }
        )
    )
    config = tmp_path / "config.toml"
    config.write_text(f'[llm]\nmodel = "scripted:{script}"\n[controller]\nvotes = 1\n')

    async def ask(entity: str) -> Any:
        command = ["mcp", "serve", "--entity", entity, "--db", url]
        async with stdio_session(command, config=config) as session:
            return await session.call_tool("ask", {"question": "Where did Apple close?"})

    events = {}
    for entity in ("markets", "plain"):
        answered = run(lambda entity=entity: ask(entity))
        assert not answered.is_error, text_of(answered)
        run_id = answered.structured_content["run_id"]
        with open_store(url) as store:
            events[entity] = [e for e in store.run_events(run_id) if e["type"] == "tool_result"]
    [used] = events["markets"]
    assert used["name"] == "market_data" and used["ok"], used
    assert '"close":103.25' in used["output"] and '"day":"2026-11-19"' in used["output"]
    [refused] = events["plain"]
    assert not refused["ok"] and "no tool named 'market_data'" in refused["output"], refused
