"""Trust in scripted entity runs: facts are stored with their producer's trust (never 1.0 by
default), graph code can set its own, views rank and mark facts by trust and age, and the facts
an answer was drawn from gain strength."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import networkx as nx
import pytest
from langchain_core.tools import tool

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.controller.trust import FactLens, _Fact
from kgot.graph_backends.base import ViewRequest
from kgot.graph_model import Changeset, Edge, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, open_store
from kgot.tests.controller.scripts import solution, votes
from kgot.tests.memory.conftest import UPKEEP_TYPES

ARTICLE = "Ada Lovelace (1815-1852) was an English mathematician; she wrote Note G."


@tool("wikipedia")
def fake_wikipedia(query: str) -> str:
    """Look a topic up in the encyclopedia (a canned article: tests have no network)."""
    return ARTICLE


@tool("company_registry")
def company_registry(name: str) -> str:
    """Look a company up in a registry kgot has no trust entry for."""
    return "Acme Corp: chief executive Wile E. Coyote."


def _wiki_settings(store_settings: Settings) -> Settings:
    tools = store_settings.tools.model_copy(update={"disabled": ["wikipedia"]})
    return store_settings.model_copy(update={"tools": tools})


def _call(tool_name: str, **args: Any) -> dict[str, Any]:
    return {"$tool_calls": [{"name": tool_name, "args": args}]}


WRITE_ADA = """```python
G.add_node("ada", label="Person", name="Ada Lovelace", born="1815-12-10")
G.add_node("note_g", label="Concept", name="Note G", _confidence=0.95)
G.add_node("first_programmer", label="Concept", name="first programmer",
           _confidence=0.55, _source_kind="inferred")
```"""


@pytest.mark.slow
def test_facts_get_their_producers_trust_and_code_can_set_its_own(
    run: Callable[..., AskResult], store_settings: Settings
) -> None:
    with open_store(store_settings.store.db) as store:
        store.create_entity("library")
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [_call("wikipedia", query="Ada Lovelace")],
            "update_graph": [WRITE_ADA],
            "query": ['```python\nresult = G.nodes["ada"]["born"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("1815-12-10")],
        }
    )

    result = run(
        scripted,
        "When was Ada Lovelace born?",
        entity="library",
        settings=_wiki_settings(store_settings),
        extra_tools=[fake_wikipedia],
        attachments=[],
    )

    assert result.answer == "1815-12-10"
    with open_store(store_settings.store.db) as store:
        graph = store.session("library").load_graph(include_meta=True)
    # The Wikipedia default (0.8 extracted), not 1.0 ...
    assert graph.nodes["ada"]["_confidence"] == 0.8
    assert graph.nodes["ada"]["_source_kind"] == "extracted"
    # ... unless the graph code set its own.
    assert graph.nodes["note_g"]["_confidence"] == 0.95
    assert graph.nodes["note_g"]["_source_kind"] == "extracted"
    assert graph.nodes["first_programmer"]["_confidence"] == 0.55
    assert graph.nodes["first_programmer"]["_source_kind"] == "inferred"
    # The write prompt says what the result's facts are stored with and how to override it.
    prompt = scripted.calls_for("update_graph")[0].prompt
    assert "stored as extracted with confidence 0.8" in prompt
    assert "_confidence=0.6" in prompt  # the `model` trust, for the model's own inferences
    # The next views mark the inferred fact (its own attributes are not repeated), not the
    # confident extracted ones.
    view = scripted.calls_for("query")[0].prompt
    lines = {line.split()[0]: line for line in view.splitlines() if line.startswith('"')}
    assert lines['"first_programmer"'].endswith("[inferred 0.55]")
    assert "_confidence" not in lines['"first_programmer"']
    assert "[" not in lines['"ada"'] and "[" not in lines['"note_g"']


@pytest.mark.slow
def test_an_unknown_tool_gets_the_default_trust_and_a_much_less_trusted_value_waits(
    run: Callable[..., AskResult], store_settings: Settings
) -> None:
    """A contradiction is weighed with the commit's trust: the registry (an unknown tool: the
    default 0.7) cannot replace a CEO stated at 0.95, so the old value stays and a suggestion
    is queued."""
    with open_store(store_settings.store.db) as store:
        store.create_entity("market")
        store.create_types(UPKEEP_TYPES, entity="market")
        session = store.session("market")
        session.load_graph()
        session.commit(
            Changeset(
                added_nodes=(Node("acme", "Company", {"name": "Acme", "ceo": "Road Runner"}),)
            ),
            Provenance(run_id="earlier", step="test", confidence=0.95),
        )
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [_call("company_registry", name="Acme")],
            "update_graph": ['```python\nG.nodes["acme"]["ceo"] = "Wile E. Coyote"\n```'],
            "query": ['```python\nresult = G.nodes["acme"]["ceo"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("Road Runner")],
        }
    )

    run(
        scripted,
        "Who runs Acme?",
        entity="market",
        settings=store_settings,
        extra_tools=[company_registry],
        attachments=[],
    )

    with open_store(store_settings.store.db) as store:
        session = store.session("market")
        graph = session.load_graph(include_meta=True)
        suggestions = session.suggestions()
    assert graph.nodes["acme"]["ceo"] == "Road Runner"
    assert [s.kind for s in suggestions] == ["contradiction"]
    assert suggestions[0].payload["new_confidence"] == 0.7


def _entity_with(
    store_settings: Settings, entity: str, commits: list[tuple[Changeset, Provenance]]
) -> None:
    with open_store(store_settings.store.db) as store:
        store.create_entity(entity)
        session = store.session(entity)
        session.load_graph()
        for changeset, provenance in commits:
            session.commit(changeset, provenance)


@pytest.mark.slow
def test_views_mark_inferred_and_stale_facts_and_retrieved_facts_gain_strength(
    run: Callable[..., AskResult], store_settings: Settings, facts_file: Any
) -> None:
    _entity_with(
        store_settings,
        "atlas",
        [
            (
                Changeset(
                    added_nodes=(
                        Node("paris", "Place", {"name": "Paris", "country": "France"}),
                        Node("france", "Place", {"name": "France"}),
                        Node("lyon", "Place", {"name": "Lyon", "country": "France"}),
                    ),
                    added_edges=(Edge("paris", "france", "located_in"),),
                ),
                Provenance(run_id="earlier", step="test", confidence=0.9),
            ),
            (
                Changeset(added_nodes=(Node("capital_guess", "Concept", {"name": "capital"}),)),
                Provenance(run_id="earlier", step="test", source_kind="inferred", confidence=0.6),
            ),
            (
                Changeset(
                    added_nodes=(
                        Node(
                            "bulletin", "Document", {"title": "Bulletin", "published": "2020-01-01"}
                        ),
                    )
                ),
                Provenance(run_id="earlier", step="test", confidence=0.9),
            ),
        ],
    )
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": ['```python\nresult = {"city": "paris", "in": "france"}\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("France")],
        }
    )

    result = run(scripted, "Where is Paris?", entity="atlas", settings=store_settings)

    assert result.answer == "France"
    view = scripted.calls_for("decide")[0].prompt
    lines = {line.split()[0]: line for line in view.splitlines() if line.startswith('"')}
    assert lines['"capital_guess"'].endswith("[inferred 0.6]")
    # Written today but published in 2020: a fact's age runs from its own date.
    assert lines['"bulletin"'].endswith(" d old]")
    assert "[" not in lines['"paris"']  # confident, extracted, evergreen: nothing to say
    with open_store(store_settings.store.db) as store:
        use = store.session("atlas").fact_use(
            [
                ("node", "paris"),
                ("node", "france"),
                ("edge", "paris", "france", "located_in"),
                ("node", "lyon"),
            ]
        )
    assert use[("node", "paris")].strength == 0.1
    assert use[("node", "france")].strength == 0.1
    assert use[("edge", "paris", "france", "located_in")].strength == 0.1
    assert ("node", "lyon") not in use  # not in the result the answer came from


@pytest.mark.slow
def test_a_fact_older_than_its_half_life_is_marked_with_its_age(store_settings: Settings) -> None:
    _entity_with(
        store_settings,
        "desk",
        [
            (
                Changeset(
                    added_nodes=(
                        Node("memo", "Document", {"title": "Memo"}),  # half-life 365 days
                        Node("ada", "Person", {"name": "Ada"}),  # evergreen
                        Node("guess", "Concept", {"name": "guess"}),
                    )
                ),
                Provenance(run_id="earlier", step="test", confidence=0.9),
            ),
        ],
    )
    with open_store(store_settings.store.db) as store:
        session = store.session("desk")
        later = datetime.now(UTC) + timedelta(days=412.5)
        lens = FactLens.load(session, now=later)  # reads each fact when first asked about
        fresh_lens = FactLens.load(session)
        assert lens.node_marker("memo") == "[412 d old]"
        assert lens.node_marker("ada") == ""  # evergreen: its age says nothing
        assert fresh_lens.node_marker("memo") == ""
        # Stale ranks below fresh: the freshness component fell.
        assert lens.node_score("memo", 1.0) < fresh_lens.node_score("memo", 1.0)
    with open_store(store_settings.store.db) as store:
        assert store.session("desk").fact_use([("node", "memo")]) == {}  # reads write no use


@pytest.mark.slow
def test_a_run_without_an_answer_reinforces_nothing(
    run: Callable[..., AskResult], store_settings: Settings
) -> None:
    _entity_with(
        store_settings,
        "atlas",
        [
            (
                Changeset(added_nodes=(Node("paris", "Place", {"name": "Paris"}),)),
                Provenance(run_id="earlier", step="test"),
            )
        ],
    )
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": ['```python\nresult = ["paris"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": ["not JSON"],
        }
    )

    result = run(scripted, "Where is Paris?", entity="atlas", settings=store_settings)

    assert result.status == "failed"
    with open_store(store_settings.store.db) as store:
        assert store.session("atlas").fact_use([("node", "paris")]) == {}


def _lens(confidences: dict[str, float]) -> FactLens:
    now = datetime.now(UTC)
    nodes = {
        node_id: _Fact("Thing", conf, "extracted", now, None, None)
        for node_id, conf in confidences.items()
    }
    return FactLens(nodes, {}, None, now=now)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from kgot.config import load_settings
    from kgot.sandbox import open_sandbox

    opened = open_sandbox(load_settings({}).sandbox)
    yield opened
    opened.close()


def test_a_partial_view_ranks_equally_relevant_nodes_by_confidence(sandbox: Any) -> None:
    """Two nodes matching the question alike: the more trusted one comes first, and without a
    lens (an ephemeral run) the view is what it always was."""
    from kgot.graph_backends import open_backend

    graph = nx.MultiDiGraph()
    graph.add_node("weak", label="Thing", name="Widget alpha")
    graph.add_node("strong", label="Thing", name="Widget beta")
    for i in range(60):
        graph.add_node(f"filler{i}", label="Thing", name=f"Other thing {i}", note="x" * 40)
    backend = open_backend("networkx", sandbox, graph)
    lens = _lens({"weak": 0.2, "strong": 0.95})

    ranked = backend.render(ViewRequest("widget", 200, lens=lens)).text
    plain = backend.render(ViewRequest("widget", 200)).text

    assert ranked.index('"strong"') < ranked.index('"weak"')
    assert '"weak" Thing name="Widget alpha"  [confidence 0.2]' in ranked
    assert '"weak"' in plain and "[confidence" not in plain


def test_a_query_result_names_nodes_by_id_in_either_language() -> None:
    lens = _lens({"paris": 0.9, "île de france": 0.9, "lyon": 0.9})
    lens._edges[("paris", "île de france", "located_in")] = _Fact(
        "located_in", 0.9, "extracted", None, None, None
    )
    python_rows = [{"city": "paris", "population": 2102650}, {"paris": "Paris"}]
    sparql_rows = [{"c": "node:paris", "r": "node:%C3%AEle%20de%20france"}]

    assert lens.named_nodes(python_rows) == ["paris"]
    assert sorted(lens.named_nodes(sparql_rows)) == ["paris", "île de france"]
    assert lens.named_nodes("Paris") == []  # a name is not an id
    assert sorted(lens.used_facts(["paris", "île de france"])) == [
        ("edge", "paris", "île de france", "located_in"),
        ("node", "paris"),
        ("node", "île de france"),
    ]
    assert lens.used_facts(["lyon"]) == [("node", "lyon")]


def test_turtle_views_carry_the_marker_as_a_comment(sandbox: Any) -> None:
    from kgot.graph_backends import open_backend

    graph = nx.MultiDiGraph()
    graph.add_node("guess", label="Thing", name="Guess", _confidence=0.4)
    backend = open_backend("rdf", sandbox, graph)
    lens = _lens({"guess": 0.4})
    lens._nodes["guess"].source_kind = "inferred"

    text = backend.render(ViewRequest("guess", 2_000, lens=lens)).text

    assert 'node:guess a type:Thing ; prop:name "Guess" .  # [inferred 0.4]' in text
    assert "_confidence" not in text
