"""The KGoT agent's ``market_data`` tool on an advisor's entity: a scripted run calls it and
the cached prices (from a real CSV) reach the graph-writing prompt while kgot writes no price
to the graph; an entity without an advisor (or without a provider) gets no such tool; another
entity's advisor is never read; bad arguments and a provider gone give clear tool errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, agent_tools, api
from kgot.config import Settings
from kgot.controller import AskResult
from kgot.llm.scripted import ScriptedCall, ScriptedChatModel
from kgot.persistence import Store, open_store
from kgot.tests.controller.scripts import solution, votes
from kgot.tools import ToolRunner

PRICES_A = "symbol,date,close,volume\nAAPL,2026-11-18,100,5000\nAAPL,2026-11-19,103.25,7000\n"
PRICES_B = "symbol,date,close\nAAPL,2026-11-18,500\nAAPL,2026-11-19,900\nZQH,2026-11-19,42.5\n"
ADD_ASSET = '```python\nG.add_node("aapl", label="Asset", symbol="AAPL", type="stock")\n```'


def _advisor(store: Store, aide: str, entity: str, prices: Path | None) -> None:
    create_aide(store, aide, entity, program="advisor")
    if prices is not None:
        api.set_market_data(store, aide, file=str(prices))


def _prices(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _runner(tools: list[Any]) -> ToolRunner:
    return ToolRunner(tools, timeout=30, max_output_chars=20_000)


def _call(tools: list[Any], **args: Any) -> Any:
    return asyncio.run(_runner(tools).run("market_data", args))


def _script(call: dict[str, Any], written: list[str]) -> ScriptedChatModel:
    def write(reply: ScriptedCall) -> str:
        written.append(reply.prompt)
        return ADD_ASSET

    return ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [{"$tool_calls": [call]}],
            "update_graph": [write],
            "query": ['```python\nresult = G.nodes["aapl"]["symbol"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("103.25")],
        }
    )


@pytest.mark.slow
def test_a_run_on_the_advisors_entity_reads_cached_prices(
    run: Callable[..., AskResult], store_settings: Settings, tmp_path: Path
) -> None:
    prices = _prices(tmp_path, "a.csv", PRICES_A)
    written: list[str] = []
    call = {"name": "market_data", "args": {"symbols": "aapl", "days": 2}}
    with open_store(store_settings.store.db) as store:
        _advisor(store, "adv", "markets", prices)
        tools = agent_tools(store, "markets")
        assert [tool.name for tool in tools] == ["market_data"]
        # passed by hand it replaces the provided one (no second tool of that name)
        result = run(
            _script(call, written),
            "Where did Apple close?",
            entity="markets",
            settings=store_settings,
            attachments=[],
            extra_tools=tools,
            store=store,
        )
        assert result.status == "answered", result.error
        [outcome] = [e for e in result.trace if e.type == "tool_result"]
        assert outcome.name == "market_data" and outcome.ok, outcome.output
        data = json.loads(outcome.output)
        [quote] = data["quotes"]
        assert (quote["symbol"], quote["day"], quote["close"]) == ("AAPL", "2026-11-19", 103.25)
        assert quote["change_pct"] == 3.25 and quote["previous_close"] == 100.0
        assert [(b["day"], b["close"], b["volume"]) for b in data["history"]["AAPL"]] == [
            ("2026-11-18", 100.0, 5000.0),
            ("2026-11-19", 103.25, 7000.0),
        ]
        # The tool's result is what the graph-writing step was given.
        assert written and '"close":103.25' in written[0], written
        # The prices are in the advisor's cache table ...
        row = advisor_rows.advisor_aide(store, "adv")
        assert [b["close"] for b in advisor_rows.price_series(store, row, "AAPL")] == [
            100.0,
            103.25,
        ]
        # ... and the graph holds only what the model's code wrote: no price from kgot.
        graph = store.session("markets").load_graph()
        assert set(graph.nodes) == {"aapl"}
        values = [v for _, data_ in graph.nodes(data=True) for v in data_.values()]
        assert 103.25 not in values and 100.0 not in values


@pytest.mark.slow  # a kgot process or a whole run
def test_kgot_ask_on_the_advisors_entity_gets_market_data_unasked(
    store_settings: Settings, tmp_path: Path
) -> None:
    """The Python API as a user calls it, with no tool passed: the controller asks the entity
    tool providers, the advisor's among them (its entry point), so ``kgot.ask(entity=…)`` gets
    ``market_data`` as ``kgot ask --entity`` and the MCP server's ``ask`` do (issue 28)."""
    import kgot

    with open_store(store_settings.store.db) as store:
        _advisor(store, "adv", "markets", _prices(tmp_path, "a.csv", PRICES_A))
    model = _script({"name": "market_data", "args": {"symbols": ["AAPL"]}}, [])
    result = kgot.ask(
        "Where did Apple close?",
        entity="markets",
        settings=store_settings,
        models={"planning": model, "execution": model},
    )
    assert result.status == "answered", result.error
    [outcome] = [e for e in result.trace if e.type == "tool_result"]
    assert outcome.name == "market_data" and outcome.ok, outcome.output
    assert json.loads(outcome.output)["quotes"][0]["close"] == 103.25


@pytest.mark.slow
def test_no_tool_without_an_advisor_or_its_provider(store: Store, tmp_path: Path) -> None:
    store.create_entity("plain")
    _advisor(store, "bare", "noprices", None)  # an advisor without a price provider
    _advisor(store, "adv", "markets", _prices(tmp_path, "a.csv", PRICES_A))
    assert agent_tools(store, "plain") == []
    assert agent_tools(store, "noprices") == []
    assert agent_tools(store, "nowhere") == []
    assert len(agent_tools(store, "markets")) == 1


@pytest.mark.slow
def test_a_run_without_an_advisor_has_no_market_data_tool(tmp_path: Path) -> None:
    """Through the ``kgot ask --entity`` command: the advisor's entity gets the tool, another
    entity of the same store does not (its call is an unknown tool)."""
    db = str(tmp_path / "kgot.db")
    with open_store(db) as store:
        _advisor(store, "adv", "markets", _prices(tmp_path, "a.csv", PRICES_A))
        store.create_entity("plain")
    call = {"name": "market_data", "args": {"symbols": ["AAPL"]}}
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "decide": [
                    {"decision": "INSERT", "reason": "need prices"},
                    {"decision": "RETRIEVE", "reason": "have them"},
                ],
                "define_tool_calls": [{"$tool_calls": [call]}],
                "update_graph": [ADD_ASSET],
                "query": ["```python\nresult = 1\n```"],
                "math_check": [{"needs_math": False, "reason": "stated"}],
                "solve": [solution("103.25")],
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    run_ids = {}
    for entity in ("markets", "plain"):
        done = subprocess.run(
            [sys.executable, "-m", "kgot", "ask", "Where did Apple close?", "--entity", entity,
             "--db", db, "--model", f"scripted:{script}", "--votes", "1", "--json"],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        run_ids[entity] = json.loads(done.stdout)["run_id"]
    with open_store(db) as store:
        found = {
            entity: [e for e in store.run_events(run_id) if e.get("type") == "tool_result"]
            for entity, run_id in run_ids.items()
        }
    [ok] = found["markets"]
    assert ok["name"] == "market_data" and ok["ok"], ok
    assert '"close":103.25' in ok["output"]
    [unknown] = found["plain"]
    assert not unknown["ok"] and "no tool named 'market_data'" in unknown["output"], unknown


@pytest.mark.slow
def test_another_entitys_advisor_is_never_read(store: Store, tmp_path: Path) -> None:
    """Entity ``a`` has advisor ``adv-a``; entity ``b`` has ``adv-b`` and an advisor *named*
    ``a``, each with prices ``a``'s file does not have. ``a``'s tool sees ``a``'s only."""
    _advisor(store, "adv-a", "a", _prices(tmp_path, "a.csv", PRICES_A))
    _advisor(store, "adv-b", "b", _prices(tmp_path, "b.csv", PRICES_B))
    _advisor(store, "a", "b", _prices(tmp_path, "b2.csv", PRICES_B))
    tools = agent_tools(store, "a")

    mine = _call(tools, symbols=["AAPL"])
    assert mine.ok and json.loads(mine.output)["quotes"][0]["close"] == 103.25
    theirs = _call(tools, symbols=["ZQH"])
    assert not theirs.ok and theirs.error_kind == "not_found", theirs.output
    assert "no prices for ZQH" in theirs.output and "include AAPL" in theirs.output
    mixed = json.loads(_call(tools, symbols=["AAPL", "ZQH"]).output)
    assert [q["symbol"] for q in mixed["quotes"]] == ["AAPL"] and mixed["unknown"] == ["ZQH"]
    for other in ("adv-b", "a"):  # nothing refreshed into (or read from) b's advisors
        assert (
            advisor_rows.price_series(store, advisor_rows.advisor_aide(store, other), "AAPL") == []
        )
        assert (
            advisor_rows.price_series(store, advisor_rows.advisor_aide(store, other), "ZQH") == []
        )


def test_bad_arguments_and_a_missing_provider_are_clear_tool_errors(
    store: Store, tmp_path: Path
) -> None:
    _advisor(store, "adv", "markets", _prices(tmp_path, "a.csv", PRICES_A))
    tools = agent_tools(store, "markets")
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "no symbol": ({"symbols": []}, "`symbols`: List should have at least 1 item"),
        "too many days": ({"symbols": ["AAPL"], "days": 500}, "`days`: Input should be less"),
        "negative days": ({"symbols": ["AAPL"], "days": -1}, "`days`: Input should be greater"),
        "too much": ({"symbols": [f"S{n}" for n in range(10)], "days": 90}, "ask for fewer"),
        "unknown arg": ({"symbol": "AAPL"}, "`symbol`: unknown argument"),
        "not a ticker": ({"symbols": ["$AAPL"]}, "Call market_data with ticker symbols"),
    }
    for label, (args, said) in cases.items():
        outcome = _call(tools, **args)
        assert not outcome.ok and outcome.error_kind == "input", (label, outcome)
        assert outcome.output.startswith("Error: ") and said in outcome.output, (label, outcome)
    many = _call(tools, symbols=[f"S{n}" for n in range(25)])
    assert not many.ok and "at most 20 items" in many.output, many.output
    # The provider removed during a run: the tool says prices are unavailable.
    advisor_rows.update_settings(
        store, advisor_rows.advisor_aide(store, "adv"), {"market_data": None}
    )
    gone = _call(tools, symbols=["AAPL"])
    assert not gone.ok and gone.error_kind == "unavailable", gone.output
    assert "has no advisor with a price provider now" in gone.output
