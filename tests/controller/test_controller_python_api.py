"""The Python API (issue 27, item 2): ``kgot.ask`` / ``ask_async`` / ``resume`` /
``resume_async`` take typed keyword arguments that reach the run, refuse unknown ones as Python
does, and ``kgot.ask`` answers inside a running event loop too. Real store, sandbox and
backends; scripted models (the quickstart's file, or objects)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import kgot
from kgot.config import load_settings
from kgot.errors import ConfigError, UsageError
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.controller.scripts import paris_in_one_round, solution, votes
from kgot.tests.controller.test_controller_cli import _env, _wait_for
from kgot.tracing.events import RunStarted, TraceEvent

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = f"scripted:{EXAMPLES / 'quickstart.json'}"
CITIES = EXAMPLES / "cities.txt"
QUESTION = "What is the population density of Paris?"
DENSITY = "about 19,949 inhabitants per km²"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _quickstart(db: Path, **arguments: Any) -> kgot.AskResult:
    """The quickstart through ``kgot.ask``, with nothing but keyword arguments."""
    arguments = {"model": QUICKSTART, "attachments": [CITIES], **arguments}
    return kgot.ask(QUESTION, db=db, **arguments)


@pytest.mark.slow
def test_a_model_name_attachments_and_db_reach_the_run(tmp_path: Path) -> None:
    db = tmp_path / "kgot.db"
    seen: list[TraceEvent] = []
    result = _quickstart(db, on_event=seen.append)

    assert (result.status, result.answer) == ("answered", DENSITY)
    started = next(event for event in seen if isinstance(event, RunStarted))
    assert (started.backend, started.entity) == ("networkx", None)
    with open_store(str(db)) as store:  # the run was recorded where db= said
        run = store.get_run(result.run_id)
    assert run is not None and run.status == "answered"


# The RDF backend, started from a graph file: a SPARQL read, then the answer.
SELECT_PARIS = """```sparql
SELECT ?population WHERE { node:paris prop:population ?population }
```"""


@pytest.mark.slow
def test_a_chat_model_object_the_rdf_backend_and_loop_limits_reach_the_run(
    tmp_path: Path,
) -> None:
    seed = nx.MultiDiGraph()
    seed.add_node("paris", label="City", name="Paris", population=2102650)
    graph_file = tmp_path / "seed.json"
    graph_file.write_text(json.dumps(nx.node_link_data(seed, edges="edges")), encoding="utf-8")
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("RRR")],
            "query": [SELECT_PARIS],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("2102650")],
        }
    )
    seen: list[TraceEvent] = []
    result = kgot.ask(
        "What is the population of Paris?",
        model=scripted,
        backend="rdf",
        graph_file=graph_file,
        votes=3,
        solution_samples=2,
        db=tmp_path / "kgot.db",
        on_event=seen.append,
    )

    assert (result.status, result.answer) == ("answered", "2102650")
    assert next(e for e in seen if isinstance(e, RunStarted)).backend == "rdf"
    assert "```sparql" in scripted.calls_for("query")[0].prompt
    assert len(scripted.calls_for("decide")) == 3
    assert len(scripted.calls_for("solve")) == 2


def _paris_on_an_entity(facts_file: Path) -> ScriptedChatModel:
    """One INSERT round that adds Paris as a Place (a starter type every entity has), then a
    RETRIEVE round answering its population."""
    return ScriptedChatModel(
        script={
            **paris_in_one_round(facts_file),
            "update_graph": [
                '```python\nG.add_node("paris", label="Place", name="Paris", '
                "population=2102650)\n```"
            ],
        }
    )


@pytest.mark.slow
def test_per_role_models_and_an_entity_reach_the_run(tmp_path: Path, facts_file: Path) -> None:
    db = tmp_path / "kgot.db"
    with open_store(str(db)) as store:
        store.create_entity("acme")
    planning, execution = _paris_on_an_entity(facts_file), _paris_on_an_entity(facts_file)
    result = asyncio.run(
        kgot.ask_async(
            "What is the population of Paris?",
            planning_model=planning,
            execution_model=execution,
            entity="acme",
            attachments=[facts_file],
            db=str(db),
        )
    )

    assert (result.status, result.answer) == ("answered", "2102650")
    assert planning.calls_for("decide") and not execution.calls_for("decide")
    assert execution.calls_for("define_tool_calls")
    assert not planning.calls_for("define_tool_calls")
    with open_store(str(db)) as store:
        assert "paris" in store.session("acme").load_graph(track=False)
        run = store.get_run(result.run_id)
    assert run is not None and run.entity == "acme"


@pytest.mark.slow
def test_arguments_beat_the_settings_they_are_laid_over(tmp_path: Path) -> None:
    settings = load_settings({"controller.backend": "rdf", "llm.model": "nowhere:model"})
    with pytest.raises(ConfigError, match="nowhere"):
        _quickstart(tmp_path / "kgot.db", settings=settings, model=None)

    # The quickstart's graph code is Python: it works on the NetworkX backend only.
    result = _quickstart(tmp_path / "kgot.db", settings=settings, backend="networkx")
    assert (result.status, result.answer) == ("answered", DENSITY)


@pytest.mark.parametrize(
    "call",
    [
        lambda: kgot.ask("q?", modle="openai:gpt-4o"),  # type: ignore[call-arg]
        lambda: asyncio.run(kgot.ask_async("q?", backends="rdf")),  # type: ignore[call-arg]
        # A resumed run keeps its own entity and question.
        lambda: kgot.resume("run", entity="acme"),  # type: ignore[call-arg]
        lambda: asyncio.run(kgot.resume_async("run", question="q?")),  # type: ignore[call-arg]
        lambda: kgot.ask("q?", model=42),  # type: ignore[arg-type]
        lambda: kgot.ask("q?", model="scripted:x", sandbox=object()),  # type: ignore[arg-type]
    ],
    ids=["ask", "ask_async", "resume", "resume_async", "model type", "sandbox type"],
)
def test_unknown_keywords_and_wrong_types_are_a_type_error(call: Callable[[], object]) -> None:
    with pytest.raises(TypeError):
        call()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"votes": 0}, "invalid argument votes=0 (controller.votes): "),
        ({"backend": "neo4j"}, "invalid argument backend='neo4j' (controller.backend): "),
        ({"sandbox": "chroot"}, "invalid argument sandbox='chroot' (sandbox.kind): "),
        ({"timeout": -1}, "invalid argument timeout=-1 (llm.timeout): "),
        ({"api_key": ["sk-secret"]}, "invalid argument api_key=… (llm.api_key): "),
    ],
)
def test_an_invalid_value_is_refused_naming_the_argument(
    arguments: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as refused:
        kgot.ask("q?", model="scripted:x", db=tmp_path / "kgot.db", **arguments)
    assert str(refused.value).startswith(message), refused.value
    assert "sk-secret" not in str(refused.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_conflicting_arguments_are_refused(tmp_path: Path) -> None:
    model = ScriptedChatModel(script={})
    with pytest.raises(UsageError, match="given twice"):
        kgot.ask("q?", model=model, models={"planning": model})
    with pytest.raises(UsageError, match="given twice"):
        kgot.ask("q?", planning_model=model, models={"planning": model, "execution": model})
    with open_store(str(tmp_path / "kgot.db")) as store, pytest.raises(UsageError, match="db="):
        kgot.ask("q?", model=model, db=tmp_path / "other.db", store=store)


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.annotation) for p in inspect.signature(function).parameters.values()]


def test_the_sync_and_async_forms_take_the_same_documented_arguments() -> None:
    assert _parameters(kgot.ask) == _parameters(kgot.ask_async)
    assert _parameters(kgot.resume) == _parameters(kgot.resume_async)
    reference = DOCS.read_text(encoding="utf-8")
    for function in (kgot.ask, kgot.resume):
        names = list(inspect.signature(function).parameters)[1:]
        kinds = {p.kind for p in inspect.signature(function).parameters.values()}
        assert kinds == {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}
        for name in names:
            assert f"`{name}`" in reference, f"docs/python.md does not document {name}"
    ask_doc = kgot.ask.__doc__ or ""
    for name in list(inspect.signature(kgot.ask).parameters):
        assert re.search(rf"^\s+{name}: ", ask_doc, re.MULTILINE), f"ask's docstring: {name}"


@pytest.mark.slow
def test_ask_inside_a_running_event_loop_returns_the_answer(tmp_path: Path) -> None:
    async def notebook_cell() -> kgot.AskResult:  # Jupyter runs cells in a running loop
        asyncio.get_running_loop()
        return _quickstart(tmp_path / "kgot.db")

    result = asyncio.run(notebook_cell())
    assert (result.status, result.answer) == ("answered", DENSITY)


@pytest.mark.slow
def test_ask_from_a_thread_whose_loop_is_running_returns_the_answer(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    server = threading.Thread(target=loop.run_forever, name="server-loop")
    server.start()
    event_threads: set[str] = set()

    async def handler() -> kgot.AskResult:  # a synchronous call inside an async handler
        return _quickstart(
            tmp_path / "kgot.db",
            on_event=lambda _e: event_threads.add(threading.current_thread().name),
        )

    try:
        result = asyncio.run_coroutine_threadsafe(handler(), loop).result(timeout=120)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        server.join()
        loop.close()
    assert (result.status, result.answer) == ("answered", DENSITY)
    assert event_threads == {"kgot-ask"}  # the run had a loop of its own


@pytest.mark.slow
def test_resume_takes_arguments_for_the_rest_of_the_run(tmp_path: Path, facts_file: Path) -> None:
    db = tmp_path / "kgot.db"
    refusing = ScriptedChatModel(script={"*": [{"$error": "bad_request"}]})
    first = kgot.ask(
        "What is the population of Paris?",
        model=refusing,
        attachments=[facts_file],
        db=db,
        run_id="r1",
    )
    assert first.status == "failed" and first.resumable

    answering = ScriptedChatModel(
        script={**paris_in_one_round(facts_file), "decide": [votes("III", "RRR")]}
    )
    result = kgot.resume("r1", model=answering, db=db, votes=3, solution_samples=1)
    assert (result.status, result.answer) == ("answered", "2102650")
    assert len(answering.calls_for("decide")) == 6  # two rounds of three votes
    assert len(answering.calls_for("solve")) == 1


# A script run in its own process: `asyncio.run(main())`, where `main` calls kgot.ask (or, for
# `plain`, kgot.ask with no loop at all); the run's graph code sleeps, and the test sends SIGINT.
_CTRL_C = """
import asyncio, sys
from pathlib import Path
import kgot
from kgot.config import load_settings

def ask():
    return kgot.ask(
        "Where is Paris?", model=sys.argv[2], db=sys.argv[3], run_id="ctrl-c",
        on_event=lambda event: print(event.type, file=sys.stderr, flush=True),
    )

async def main():
    return ask()

try:
    asyncio.run(main()) if sys.argv[1] == "loop" else ask()
except KeyboardInterrupt:
    print("KeyboardInterrupt", file=sys.stderr, flush=True)
    sys.exit(130)
"""
_SLEEPING_WRITE = {
    "decide": [{"decision": "INSERT", "reason": "empty"}],
    "define_tool_calls": [
        {"$tool_calls": [{"name": "python", "args": {"code": "print('Paris is in France')"}}]}
    ],
    "update_graph": ["```python\nimport time\ntime.sleep(60)\n```"],
}


@pytest.mark.slow
@pytest.mark.parametrize("where", ["plain", "loop"])
def test_ctrl_c_stops_the_run_and_records_it_interrupted(tmp_path: Path, where: str) -> None:
    script = tmp_path / "sleeping.json"
    script.write_text(json.dumps(_SLEEPING_WRITE), encoding="utf-8")
    db = tmp_path / "kgot.db"
    process = subprocess.Popen(
        [sys.executable, "-c", _CTRL_C, where, f"scripted:{script}", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    try:
        _wait_for(process, "tool_result", timeout=60)
        _wait_for(process, "step_started", timeout=30)  # update_graph: the sleeping code
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)  # well before the 60 s sleep ends
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "KeyboardInterrupt" in err
    with open_store(str(db)) as store:
        run = store.get_run("ctrl-c")
    assert run is not None and run.status == "interrupted"
