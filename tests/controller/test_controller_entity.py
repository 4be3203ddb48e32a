"""Entity runs: other writers' commits reach the running loop; tenants never mix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, open_store
from kgot.tests.controller.scripts import inspect_call, solution, votes

Run = Callable[..., AskResult]
NO_MATH = {"needs_math": False, "reason": "stated"}
SET_POPULATION = """```python
G.nodes["paris"]["population"] = 2102650
```"""


def _commit(settings: Settings, entity: str, *nodes: Node, changed: bool = False) -> None:
    with open_store(settings.store.db) as store:
        session = store.session(entity)
        session.load_graph()
        change = Changeset(changed_nodes=nodes) if changed else Changeset(added_nodes=nodes)
        session.commit(change, Provenance(run_id="other-writer", step="test"))


@pytest.mark.slow
def test_other_writers_are_caught_up_and_conflicts_retried(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    with open_store(settings.store.db) as store:
        store.create_entity("atlas")
    _commit(settings, "atlas", Node("paris", "Place", {"name": "Paris", "population": 1}))

    def tool_calls(_: Any) -> Any:
        # Another process adds Lyon while this run is gathering facts.
        _commit(settings, "atlas", Node("lyon", "Place", {"name": "Lyon"}))
        return inspect_call(facts_file)

    def write_code(_: Any) -> str:
        # ... and changes Paris while the model is writing code that changes Paris too.
        _commit(
            settings,
            "atlas",
            Node("paris", "Place", {"name": "Paris", "population": 2}),
            changed=True,
        )
        return SET_POPULATION

    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [tool_calls],
            "update_graph": [write_code],
            "query": ['```python\nresult = [G.nodes["paris"]["population"], sorted(G.nodes)]\n```'],
            "math_check": [NO_MATH],
            "solve": [solution("2102650")],
        }
    )
    result = run(scripted, entity="atlas")

    assert result.answer == "2102650"
    assert "lyon" in scripted.calls_for("update_graph")[0].prompt  # caught up before writing
    refreshed = [e for e in result.trace if e.type == "graph_refreshed"]
    assert [e.summary for e in refreshed] == ["+1 node", "~1 node"]
    assert not scripted.calls_for("fix_code")  # a conflict is not the model's mistake
    # The query ran in the run's own worker: its copy of the graph has the run's write and the
    # other writer's node, exactly as the host's.
    [queried] = [e for e in result.trace if e.type == "query_result"]
    assert json.loads(queried.result) == [2102650, ["lyon", "paris"]]
    with open_store(settings.store.db) as store:
        session = store.session("atlas")
        graph = session.load_graph()
        history = session.node_history("paris")
    assert graph.nodes["paris"]["population"] == 2102650
    assert {"lyon", "paris"} <= set(graph.nodes)
    assert [version["properties"]["population"] for version in history][-3:] == [1, 2, 2102650]


@pytest.mark.slow
def test_a_run_on_one_entity_never_sees_another(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    with open_store(settings.store.db) as store:
        store.create_entity("alpha")
        store.create_entity("beta")
    secret = Node("vault", "Thing", {"name": "vault", "description": "beta-secret-7731"})
    _commit(settings, "beta", secret)
    _commit(settings, "alpha", Node("home", "Thing", {"name": "home"}))
    db = Path(settings.store.db)
    targets = [str(db), str(db.with_suffix(".checkpoints.db")), "/proc/1/environ"]
    snoop = f"""```python
import glob, os
paths = {targets!r}
for root in ("/tmp", "/root", "/home", "/work", "/mnt", "{db.parent}"):
    paths += glob.glob(root + "/**", recursive=True)[:2000]
marker = "beta-" + "secret-7731"  # split, so this code file itself holds no match
found = []
for path in paths:
    try:
        found.append((path, marker in open(path, errors="ignore").read()))
    except OSError:
        pass
leaks = [p for p, hit in found if hit]
result = {{"nodes": sorted(G.nodes), "leaks": leaks, "env": dict(os.environ)}}
```"""
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": [snoop],
            "math_check": [NO_MATH],
            "solve": [solution("home")],
        }
    )
    result = run(scripted, entity="alpha")

    [query_result] = [e for e in result.trace if e.type == "query_result"]
    assert '"nodes": ["home"]' in query_result.result
    assert '"leaks": []' in query_result.result
    assert "KGOT" not in query_result.result
    everything_sent = "\n".join(call.prompt for call in scripted.calls)
    assert "beta-secret-7731" not in everything_sent
    assert "vault" not in everything_sent
    assert {node["id"] for node in result.graph["nodes"]} == {"home"}


@pytest.mark.slow
def test_a_type_violation_goes_back_to_fix_code_and_writes_nothing(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    with open_store(settings.store.db) as store:
        store.create_entity("geo")
    bad = '```python\nG.add_node("paris", label="Place", name="Paris", latitude=248.85)\n```'
    good = '```python\nG.add_node("paris", label="Place", name="Paris", latitude=48.85)\n```'
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [bad],
            "fix_code": [good],
            "query": ['```python\nresult = G.nodes["paris"]["latitude"]\n```'],
            "math_check": [NO_MATH],
            "solve": [solution("48.85")],
        }
    )
    result = run(scripted, entity="geo")

    assert result.answer == "48.85"
    [failure] = [e for e in result.trace if e.type == "code_failed"]
    assert "latitude" in failure.error and "maximum" in failure.error
    assert "maximum" in scripted.calls_for("fix_code")[0].prompt
    with open_store(settings.store.db) as store:
        history = store.session("geo").node_history("paris")
    assert [h["properties"]["latitude"] for h in history] == [48.85]  # the bad one never landed


@pytest.mark.slow
def test_a_writer_that_wins_five_times_in_a_row_is_waited_out(
    run: Run, settings: Settings, facts_file: Path, monkeypatch: Any
) -> None:
    """Another process changes Paris just before each of the run's first five commits (more
    than the instant retries a busy neighbour used to exhaust): each loss is waited out and
    redone on the caught-up graph, with no fix-code request."""
    from kgot.persistence.session import EntitySession

    with open_store(settings.store.db) as store:
        store.create_entity("atlas")
    _commit(settings, "atlas", Node("paris", "Place", {"name": "Paris", "population": 1}))
    commit = EntitySession.commit
    wins: list[int] = []

    def contested(
        self: EntitySession, changeset: Changeset, provenance: Any, **options: Any
    ) -> Any:
        if provenance.run_id != "other-writer" and len(wins) < 5:
            wins.append(len(wins) + 10)  # the other writer commits first, a real conflict
            _commit(
                settings,
                "atlas",
                Node("paris", "Place", {"name": "Paris", "population": wins[-1]}),
                changed=True,
            )
        return commit(self, changeset, provenance, **options)

    monkeypatch.setattr(EntitySession, "commit", contested)
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [SET_POPULATION],
            "query": ['```python\nresult = G.nodes["paris"]["population"]\n```'],
            "math_check": [NO_MATH],
            "solve": [solution("2102650")],
        }
    )
    result = run(scripted, entity="atlas")

    assert result.answer == "2102650"
    assert not scripted.calls_for("fix_code")
    assert len([e for e in result.trace if e.type == "graph_refreshed"]) == 5
    with open_store(settings.store.db) as store:
        history = store.session("atlas").node_history("paris")
    assert [version["properties"]["population"] for version in history] == [
        1,
        10,
        11,
        12,
        13,
        14,
        2102650,
    ]
