"""The whole loop over real HTTP: `kgot ask` against a loopback OpenAI-compatible server that,
like llama.cpp's, refuses `json_schema` response formats."""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings, load_settings
from kgot.controller import ask_async
from kgot.tests.controller.scripts import ADD_PARIS, QUERY_PARIS
from kgot.tests.support.openai_server import OpenAIServer, RecordedRequest, Reply


class _LlamaLike:
    """Answers each kgot step the way a model would, recognising the step by its prompt."""

    def __init__(self, facts: Path) -> None:
        self.facts = facts
        self.votes = itertools.count(1)
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        system = request.messages[0].get("content", "") if request.messages else ""
        if "You are the planner" in system:
            with self.lock:
                number = next(self.votes)
            decision = "INSERT" if number <= 5 else "RETRIEVE"
            return _structured(request, {"decision": decision, "reason": "population of Paris"})
        if "You gather the information" in system:
            return Reply.tool_call("inspect_file", {"path": str(self.facts)})
        if "You keep a knowledge graph up to date" in system:
            return Reply.text(ADD_PARIS)
        if "You answer questions from a knowledge graph" in system:
            return Reply.text(QUERY_PARIS)
        if "needs a calculation" in system:
            return _structured(request, {"needs_math": False, "reason": "stated"})
        if "Give the final answer" in system:
            return _structured(request, {"answer": "2102650", "reasoning": "from the graph"})
        return Reply.error(400, "unexpected prompt")


def _structured(request: RecordedRequest, data: dict[str, Any]) -> Reply:
    """JSON the way the request asked for it: forced tool call, or JSON content."""
    choice = request.tool_choice
    if isinstance(choice, dict) and request.tools:
        return Reply.tool_call(choice["function"]["name"], data)
    return Reply.json(data)


@pytest.mark.slow
def test_full_loop_over_http_falls_back_from_json_schema(tmp_path: Path, facts_file: Path) -> None:
    server = OpenAIServer(responder=_LlamaLike(facts_file), reject_json_schema=True)
    with server:
        settings: Settings = load_settings(
            {
                "llm.model": "openai:local-model",
                "llm.base_url": server.url,
                "llm.retry_backoff": 0.001,
                "store.db": str(tmp_path / "kgot.db"),
            },
            environ={},
        )
        result = asyncio.run(
            ask_async(
                "What is the population of Paris?", settings=settings, attachments=[facts_file]
            )
        )

    assert result.status == "answered", result.error
    assert result.answer == "2102650"
    assert result.cost_usd is None  # a local model has no known price: unknown, never 0
    assert result.input_tokens > 0 and result.output_tokens > 0
    bodies = server.completions
    formats = [(r.response_format or {}).get("type") for r in bodies]
    # Only the concurrent votes of the first round can try json_schema (each refused with a
    # 500); once a method worked, no later request tried json_schema again.
    schema_requests = [i for i, kind in enumerate(formats) if kind == "json_schema"]
    assert 1 <= len(schema_requests) <= settings.controller.votes
    assert all(bodies[i].reply.status == 500 for i in schema_requests)  # type: ignore[union-attr]
    first_tool_round = next(i for i, r in enumerate(bodies) if r.tool_choice == "auto")
    assert max(schema_requests) < first_tool_round
    tool_call_rounds = [r for r in bodies if r.tool_choice == "auto"]
    assert tool_call_rounds and all(
        {t["function"]["name"] for t in r.tools} >= {"inspect_file", "python"}
        for r in tool_call_rounds
    )
