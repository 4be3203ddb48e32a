"""Scripts and expectations shared by the controller tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgot.controller import AskResult

FACTS = (
    "City statistics bulletin (2023).\n"
    "Paris: population 2,102,650; area 105.4 km2; country France.\n"
    "Lyon: population 522,250; area 47.87 km2; country France.\n"
)

ADD_PARIS = """```python
G.add_node("paris", label="City", name="Paris", population=2102650, area_km2=105.4)
G.add_node("france", label="Country", name="France")
G.add_edge("paris", "france", relationship="located_in")
```"""

ADD_LYON = """```python
G.add_node("lyon", label="City", name="Lyon", population=522250)
G.add_edge("lyon", "france", relationship="located_in")
```"""

QUERY_PARIS = """```python
result = {"population": G.nodes["paris"]["population"]}
```"""


def votes(*rounds: str) -> Callable[[Any], dict[str, str]]:
    """A decide script: round ``i`` (1-based) votes as ``rounds[i-1]`` says.

    Each round string holds one letter per vote: ``I`` for INSERT, ``R`` for RETRIEVE; the
    last round repeats.
    """

    def reply(call: Any) -> dict[str, str]:
        per_round = len(rounds[0])
        index = min((call.number - 1) // per_round, len(rounds) - 1)
        letter = rounds[index][(call.number - 1) % per_round]
        decision = "INSERT" if letter == "I" else "RETRIEVE"
        return {"decision": decision, "reason": f"round {index + 1} vote {letter}"}

    return reply


def solution(answer: str) -> dict[str, str]:
    return {"answer": answer, "reasoning": "read from the retrieved facts"}


def inspect_call(path: Path) -> dict[str, Any]:
    return {"$tool_calls": [{"name": "inspect_file", "args": {"path": str(path)}}]}


def paris_in_one_round(facts_file: Path) -> dict[str, list[Any]]:
    """A script per step: one INSERT round that reads ``facts_file`` and adds Paris, then a
    RETRIEVE round answering its population (2102650)."""
    return {
        "decide": [votes("IIIII", "RRRRR")],
        "define_tool_calls": [inspect_call(facts_file)],
        "update_graph": [ADD_PARIS],
        "query": [QUERY_PARIS],
        "math_check": [{"needs_math": False, "reason": "stated"}],
        "solve": [solution("2102650")],
    }


def event_types(result: AskResult) -> list[str]:
    """The kinds of the run's events, leaving out the step_started / step_finished brackets
    around every step and the model and tool calls (spans of their own inside the steps)."""
    spans = ("step_started", "step_finished", "model_call", "tool_call")
    return [event.type for event in result.trace if event.type not in spans]
