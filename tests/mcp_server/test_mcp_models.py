"""``ask`` and ``remember``: the model-backed tools, over Streamable HTTP against a server
subprocess whose model is a loopback OpenAI-compatible endpoint (scripted per prompt). ``ask``
streams MCP progress notifications and stops at its cost cap; ``remember`` writes what a text
states with provenance ``mcp:<label>`` and stops between pieces of a long text at the same cap."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgot.mcp_server.tokens import add_token
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import http_server, http_session, run, seed, text_of
from kgot.tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

QUERY_APPLE = """```python
result = {"ceo": G.nodes["apple"]["ceo"]}
```"""
ADD_ZETA = """```python
G.add_node("zeta", label="Company", name="Zeta Dynamics", ceo="Ada Byron")
G.add_edge("zeta", "cupertino", relationship="headquartered_in")
```"""


class _Model:
    """Answers each kgot step the way a model would, recognising the step by its prompt."""

    def __init__(self) -> None:
        self.calls = itertools.count(1)
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        system = request.messages[0].get("content", "") if request.messages else ""
        if "You are the planner" in system:
            return _structured(request, {"decision": "RETRIEVE", "reason": "the graph has it"})
        if "You keep a knowledge graph up to date" in system:
            return Reply.text(ADD_ZETA)
        if "You answer questions from a knowledge graph" in system:
            return Reply.text(QUERY_APPLE)
        if "needs a calculation" in system:
            return _structured(request, {"needs_math": False, "reason": "stated"})
        if "Give the final answer" in system:
            return _structured(request, {"answer": "Tim Cook", "reasoning": "from the graph"})
        return Reply.error(400, "unexpected prompt")


def _structured(request: RecordedRequest, data: dict[str, Any]) -> Reply:
    choice = request.tool_choice
    if isinstance(choice, dict) and request.tools:
        return Reply.tool_call(choice["function"]["name"], data)
    return Reply.json(data)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store_url = str(tmp_path / "kgot.db")
    seed(store_url, "a")
    tokens = tmp_path / "tokens.toml"
    token, _ = add_token(tokens, "agent-x", ["a"], ["read", "write", "ask"])
    model = OpenAIServer(responder=_Model())
    with model:
        config = tmp_path / "config.toml"
        config.write_text(
            "[llm]\n"
            'model = "openai:local-model"\n'
            f'base_url = "{model.url}"\n'
            "retry_backoff = 0.001\n"
            '[llm.prices."openai:local-model"]\n'
            "input = 100.0\n"  # USD per million tokens: a run costs cents, the cap can see it
            "output = 100.0\n"
            "[controller]\n"
            "votes = 3\n"
            "[tools]\n"
            "max_output_chars = 500\n"  # remember cuts longer texts into pieces of 500
        )
        with http_server(store_url, tokens, config=config) as server:
            yield {
                "url": server.url,
                "token": token,
                "store": store_url,
                "model": model,
                "tokens": tokens,
                "config": config,
            }


def _ask(served: dict[str, Any], arguments: dict[str, Any]) -> tuple[Any, list[tuple]]:
    seen: list[tuple] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def go() -> Any:
        async with http_session(served["url"], served["token"]) as session:
            return await session.call_tool("ask", arguments, progress_callback=on_progress)

    return run(go), seen


@pytest.mark.slow
def test_ask_streams_progress_and_answers(served: dict[str, Any]) -> None:
    result, progress = _ask(served, {"question": "Who is the CEO of Apple?"})
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data["status"] == "answered" and data["answer"] == "Tim Cook"
    assert data["cost_usd"] is not None and data["cost_usd"] > 0
    assert len(progress) >= 3  # decide, retrieve, …, solve
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)  # increasing
    assert any("decide done" in (p[2] or "") for p in progress)
    with open_store(served["store"]) as store:
        assert store.get_run(data["run_id"]).status == "answered"  # type: ignore[union-attr]


@pytest.mark.slow
def test_ask_stops_at_its_cost_cap(served: dict[str, Any]) -> None:
    result, progress = _ask(
        served, {"question": "Who is the CEO of Apple?", "max_cost_usd": 0.000001}
    )
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data["status"] == "stopped" and "max_cost_usd" in data["stopped_by"]
    assert data["answer"] == ""
    assert len(progress) == 1  # stopped at the first step's end
    with open_store(served["store"]) as store:
        run_record = store.get_run(data["run_id"])
        assert run_record is not None and run_record.status == "interrupted"  # resumable
    requests_at_stop = len(served["model"].completions)
    assert requests_at_stop <= 3  # the first step's votes, nothing after the cap


@pytest.mark.slow
def test_remember_writes_what_the_text_states(served: dict[str, Any]) -> None:
    async def go() -> Any:
        async with http_session(served["url"], served["token"]) as session:
            return await session.call_tool(
                "remember",
                {
                    "text": "Zeta Dynamics, led by Ada Byron, has its head office in Cupertino.",
                    "source_ref": "notes/zeta.md",
                },
            )

    result = run(go)
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data["ok"] and "zeta" in data["inserted_nodes"]
    with open_store(served["store"]) as store:
        current = [
            row
            for row in store.session("a").node_history("zeta")
            if row["valid_to_version"] is None
        ]
        # Each remember is a recorded run of its own, named after the grant.
        recorded = store.get_run(current[0]["run_id"])
        assert recorded is not None and (recorded.kind, recorded.status) == ("ingest", "done")
    assert current[0]["run_id"].startswith("mcp:agent-x/")
    assert current[0]["source_ref"] == "notes/zeta.md"


@pytest.mark.slow
def test_remember_of_what_the_graph_holds_reports_it_restated(served: dict[str, Any]) -> None:
    text = "Zeta Dynamics, led by Ada Byron, has its head office in Cupertino."

    async def go() -> list[Any]:
        async with http_session(served["url"], served["token"]) as session:
            return [
                await session.call_tool("remember", {"text": text, "source_ref": source})
                for source in ("notes/zeta.md", "notes/other.md", "notes/other.md")
            ]

    first, other, same = (result.structured_content for result in run(go))
    assert first["ok"] and "zeta" in first["inserted_nodes"] and first["restated"] == []
    for again in (other, same):
        assert again["ok"], again["failed"]
        assert again["inserted_nodes"] == [] and again["inserted_edges"] == []
        assert again["restated"] == ["zeta", "zeta -[headquartered_in]-> cupertino"]
    assert (other["corroborated"], other["reinforced"]) == (2, 0)
    assert (same["corroborated"], same["reinforced"]) == (0, 2)
    with open_store(served["store"]) as store:
        rows = store.session("a").node_history("zeta")
    [current] = [row for row in rows if row["valid_to_version"] is None]
    assert current["corroborations"] == 2 and current["source_ref"] == "notes/zeta.md"


@pytest.mark.slow
def test_remember_stops_between_pieces_at_its_cap(served: dict[str, Any]) -> None:
    text = "\n\n".join(
        f"Zeta Dynamics, note {n}: Ada Byron leads it from Cupertino. " + "More words. " * 30
        for n in range(3)
    )
    before = len(served["model"].completions)

    async def go(url: str) -> Any:
        async with http_session(url, served["token"]) as session:
            return await session.call_tool("remember", {"text": text})

    capped = ("--ask-max-cost-usd", "0.0001")  # below what one piece costs
    with http_server(served["store"], served["tokens"], *capped, config=served["config"]) as server:
        result = run(lambda: go(server.url))
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data["parts"] == 3 and data["parts_done"] == 1
    assert "max_cost_usd" in data["stopped_by"] and "zeta" in data["inserted_nodes"]
    assert any("after part 1 of 3" in note for note in data["notes"])
    assert len(served["model"].completions) - before == data["llm_calls"] > 0  # no piece 2
