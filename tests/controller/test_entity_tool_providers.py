"""Entity tool providers (issue 28, part 2): the controller asks them for every run on an
entity, so no caller passes their tools; a caller's own tool of the same name wins; a provided
tool may not shadow one of kgot's or another provider's. Real store, real runs with a scripted
model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, StructuredTool

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.controller.tool_providers import ENTITY_TOOL_PROVIDERS, entity_tools
from kgot.errors import ConfigError
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Store, open_store
from kgot.tests.controller.scripts import solution, votes

Provide = Callable[[Store, str], list[BaseTool]]


def _tool(name: str, reply: str = "from the provider") -> BaseTool:
    def answer(text: str = "") -> str:
        return f"{reply}: {text}"

    return StructuredTool.from_function(answer, name=name, description=f"{name}, for tests")


@pytest.fixture
def provide() -> Iterator[Callable[[str, Provide], None]]:
    """Register providers in this process for one test."""
    added: list[str] = []

    def add(name: str, provider: Provide) -> None:
        ENTITY_TOOL_PROVIDERS.register(name, provider)
        added.append(name)

    yield add
    for name in added:
        ENTITY_TOOL_PROVIDERS.unregister(name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "tools.db")) as opened:
        opened.create_entity("acme")
        yield opened


def test_each_provider_is_asked_with_the_runs_store_and_entity(
    store: Store, provide: Callable[[str, Provide], None]
) -> None:
    asked: list[tuple[Store, str]] = []

    def for_acme(given: Store, entity: str) -> list[BaseTool]:
        asked.append((given, entity))
        return [_tool("acme_lookup")] if entity == "acme" else []

    provide("test-acme", for_acme)
    assert [t.name for t in entity_tools(store, "acme", builtin={"python"})] == ["acme_lookup"]
    assert entity_tools(store, "other", builtin={"python"}) == []
    assert asked == [(store, "acme"), (store, "other")]


@pytest.mark.slow
def test_a_callers_tool_replaces_the_provided_one(
    store: Store, provide: Callable[[str, Provide], None]
) -> None:
    provide("test-acme", lambda _store, _entity: [_tool("acme_lookup"), _tool("acme_more")])
    found = entity_tools(store, "acme", builtin=set(), given={"acme_lookup"})
    assert [t.name for t in found] == ["acme_more"]


def test_a_provided_tool_may_not_shadow_kgots_or_another_providers(
    store: Store, provide: Callable[[str, Provide], None]
) -> None:
    provide("test-one", lambda _store, _entity: [_tool("python")])
    with pytest.raises(ConfigError, match="'test-one' offers a tool named 'python', which is"):
        entity_tools(store, "acme", builtin={"python", "web_search"})
    ENTITY_TOOL_PROVIDERS.unregister("test-one")
    provide("test-a", lambda _store, _entity: [_tool("acme_lookup")])
    provide("test-b", lambda _store, _entity: [_tool("acme_lookup")])
    with pytest.raises(ConfigError, match="'test-a' and 'test-b' both offer a tool named"):
        entity_tools(store, "acme", builtin=set())


def _script(tool: str) -> ScriptedChatModel:
    call = {"name": tool, "args": {"text": "hi"}}
    return ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [{"$tool_calls": [call]}],
            "update_graph": ['```python\nG.add_node("acme", label="Place", name="Acme")\n```'],
            "query": ['```python\nresult = "acme"\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("acme")],
        }
    )


@pytest.mark.slow  # a kgot process or a whole run
def test_a_run_on_the_entity_is_offered_the_provided_tool(
    run: Callable[..., AskResult],
    settings: Settings,
    provide: Callable[[str, Provide], None],
) -> None:
    provide("test-acme", lambda _store, entity: [_tool("acme_lookup")] if entity == "acme" else [])
    with open_store(settings.store.db) as store:
        store.create_entity("acme")
    result = run(_script("acme_lookup"), "Who is acme?", entity="acme", attachments=[])
    assert result.status == "answered", result.error
    [outcome] = [e for e in result.trace if e.type == "tool_result"]
    assert outcome.name == "acme_lookup" and outcome.ok, outcome.output
    assert outcome.output == "from the provider: hi"
    # a run without an entity is not offered it: the same call is an unknown tool
    result = run(_script("acme_lookup"), "Who is acme?", attachments=[])
    [outcome] = [e for e in result.trace if e.type == "tool_result"]
    assert not outcome.ok and "no tool named 'acme_lookup'" in outcome.output, outcome.output
