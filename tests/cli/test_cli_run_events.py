"""`kgot runs show` tells what a run did, step by step, from the events kept as it ran."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.persistence import open_store
from kgot.tests.controller.scripts import FACTS, QUERY_PARIS
from kgot.tests.controller.test_controller_run_record import assert_spans_are_whole
from kgot.tracing.events import TRACE_ADAPTER, RunStarted, StepFinished

Kgot = Callable[..., tuple[int, str, str]]
# Entity graphs take only known types: places, not cities.
ADD_PARIS = """```python
G.add_node("paris", label="Place", name="Paris", population=2102650)
G.add_node("france", label="Place", name="France")
G.add_edge("paris", "france", relationship="located_in")
```"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store's location: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "kgot.db")
        return
    from kgot.tests.persistence.conftest import POSTGRES_URL, drop_schema, postgres_unreachable

    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"kgot_test_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    drop_schema(schema)


@pytest.fixture
def kgot(monkeypatch: pytest.MonkeyPatch, db: str, capsys: pytest.CaptureFixture[str]) -> Kgot:
    monkeypatch.setenv("KGOT_DB", db)
    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _paris_model(tmp_path: Path) -> tuple[str, str]:
    """A scripted model file answering Paris's population from a facts file, and the file."""
    facts = tmp_path / "cities.txt"
    facts.write_text(FACTS, encoding="utf-8")
    script = tmp_path / "script.json"
    insert = {"decision": "INSERT", "reason": "the population is missing"}
    retrieve = {"decision": "RETRIEVE", "reason": "the graph has it"}
    steps = {
        "decide": [insert] * 5 + [retrieve] * 5,
        "define_tool_calls": [
            {"$tool_calls": [{"name": "inspect_file", "args": {"path": str(facts)}}]}
        ],
        "update_graph": [ADD_PARIS],
        "query": [QUERY_PARIS],
        "math_check": [{"needs_math": False, "reason": "stated"}],
        "solve": [{"answer": "2102650", "reasoning": "from the graph"}],
    }
    script.write_text(json.dumps(steps), encoding="utf-8")
    return f"scripted:{script}", str(facts)


@pytest.mark.slow
def test_runs_show_gives_an_entity_runs_events_until_the_entity_goes(
    kgot: Kgot, db: str, tmp_path: Path
) -> None:
    code, _, err = kgot("entities", "create", "acme")
    assert code == 0, err
    model, facts = _paris_model(tmp_path)
    question = "What is the population of Paris?"
    code, out, err = kgot(
        "ask", "--entity", "acme", "--model", model, "-a", facts, "--run-id", "r1", question
    )
    assert code == 0 and out == "2102650\n", err

    code, out, err = kgot("runs", "show", "r1", "--json")
    assert code == 0, err
    document = json.loads(out)
    events = TRACE_ADAPTER.validate_python(document["events"])
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == "r1" and events[0].entity == "acme" and not events[0].resumed
    assert events[-1].type == "run_finished"
    assert_spans_are_whole(events)
    finished = [event for event in events if isinstance(event, StepFinished)]
    assert [(e.iteration, e.step) for e in finished] == [
        (1, "decide"),
        (1, "update_graph"),
        (2, "decide"),
        (2, "retrieve"),
        (2, "math_check"),
        (2, "solve"),
    ]
    assert sum(e.usage["llm_calls"] for e in finished) == document["totals"]["llm_calls"]

    code, out, err = kgot("runs", "show", "r1")
    assert code == 0, err
    lines = out.splitlines()
    timeline = lines[lines.index("timeline") :]
    assert max(len(line) for line in timeline) <= 80
    assert timeline[1].split() == ["iter", "step", "time", "tokens", "in/out", "cost", "outcome"]
    assert timeline[2].split() == ["0", "—", "run", "started"]
    assert timeline[3].split()[:2] == ["1", "decide"]
    assert timeline[3].endswith("INSERT; 1 tool call")
    assert timeline[4].split()[:2] == ["1", "update_graph"] and "graph 2n/1e" in timeline[4]
    assert timeline[-2].split()[:2] == ["2", "solve"] and "answer '2102650'" in timeline[-2]
    assert timeline[-1].split() == ["2", "—", "run", "answered"]

    code, _, err = kgot("entities", "delete", "acme", "--yes")
    assert code == 0, err
    with open_store(db) as store:
        assert store.get_run("r1") is None
        assert store.run_events("r1") == []


@pytest.mark.slow
def test_a_run_recorded_without_events_says_so(kgot: Kgot, db: str) -> None:
    with open_store(db) as store:  # as a run recorded before migration 3 reads now
        store.start_run("old", "Before events were kept?", None, {})
        store.finish_run("old", "answered", "yes", {"iterations": 1})
    code, out, err = kgot("runs", "show", "old")
    assert code == 0, err
    assert out.splitlines()[-1] == "timeline     no events recorded"
    code, out, err = kgot("runs", "show", "old", "--json")
    assert code == 0, err
    assert json.loads(out)["events"] == []


@pytest.mark.slow
def test_events_this_kgot_cannot_read_are_refused_in_one_line(kgot: Kgot, db: str) -> None:
    with open_store(db) as store:
        store.start_run("drifted", "Q?", None, {})
        store.append_run_events("drifted", [{"type": "run_started", "iteration": 0}])
    for extra in ((), ("--json",)):
        code, out, err = kgot("runs", "show", "drifted", *extra)
        assert code == 1 and out == ""
        assert err.startswith("kgot: error: run drifted's recorded events do not read as ")
        assert "recorded by another version of kgot" in err and err.count("\n") == 1
