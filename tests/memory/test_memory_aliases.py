"""Graph code of entity runs that names a merged-away node id reaches the canonical node
(issue 15: reads by a merged-away id find the canonical node)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.controller.aliases import rewrite_aliases
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.controller.scripts import solution, votes

ALIASES = {"apple_old": "apple", "x y": "x_y"}


def test_python_string_literals_naming_an_alias_are_rewritten_and_nothing_else() -> None:
    code = (
        'a = G.nodes["apple_old"]["ceo"]  # apple_old in a comment stays\n'
        "b = G.has_node('apple_old') and 'apple_old2' not in G and \"apple\" in G\n"
        'c = f"apple_old"  # built at run time: left alone\n'
        'd = """apple_old"""\n'
    )
    rewritten = rewrite_aliases(code, ALIASES, "python")
    assert rewritten == (
        "a = G.nodes['apple'][\"ceo\"]  # apple_old in a comment stays\n"
        "b = G.has_node('apple') and 'apple_old2' not in G and \"apple\" in G\n"
        'c = f"apple_old"  # built at run time: left alone\n'
        "d = 'apple'\n"
    )
    assert rewrite_aliases(code, {}, "python") is code
    assert rewrite_aliases("def (:", ALIASES, "python") == "def (:"  # not Python: as written


def test_sparql_node_names_naming_an_alias_are_rewritten() -> None:
    query = (
        "SELECT ?v WHERE { node:apple_old prop:ceo ?v . ?s rel:owns node:apple_old. "
        "<urn:kgot:node:apple_old> ?p ?o . node:apple_old2 ?p ?o . node:x%20y ?p ?o }"
    )
    assert rewrite_aliases(query, ALIASES, "sparql") == (
        "SELECT ?v WHERE { node:apple prop:ceo ?v . ?s rel:owns node:apple. "
        "<urn:kgot:node:apple> ?p ?o . node:apple_old2 ?p ?o . node:x_y ?p ?o }"
    )


@pytest.mark.slow
def test_an_id_written_again_after_its_merge_is_not_an_alias(store: Store) -> None:
    store.create_entity("again")
    session = store.session("again")
    provenance = Provenance(run_id="", step="test")
    session.commit(
        Changeset(
            added_nodes=(
                Node("apple", "Organization", {"name": "Apple"}),
                Node("apple_old", "Organization", {"name": "Apple Inc."}),
            )
        ),
        provenance,
    )
    session.merge_nodes("apple", ["apple_old"], provenance, properties={"name": "Apple"})
    session.refresh()
    assert session.merged_ids() == {"apple_old": "apple"}
    session.commit(
        Changeset(added_nodes=(Node("apple_old", "Organization", {"name": "Apple Records"}),)),
        provenance,
    )
    assert session.merged_ids() == {}


@pytest.mark.slow
def test_a_query_naming_a_merged_away_id_reads_the_canonical_node(
    run: Callable[..., AskResult], store_settings: Settings
) -> None:
    with open_store(store_settings.store.db) as store:
        store.create_entity("fruit")
        session = store.session("fruit")
        provenance = Provenance(run_id="earlier", step="test")
        session.commit(
            Changeset(
                added_nodes=(
                    Node("apple", "Organization", {"name": "Apple", "founded": "1976-04-01"}),
                    Node("apple_old", "Organization", {"name": "Apple Computer"}),
                )
            ),
            provenance,
        )
        session.merge_nodes(
            "apple",
            ["apple_old"],
            provenance,
            properties={"name": "Apple", "founded": "1976-04-01"},
        )
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("RRRRR")],
            "query": ['```python\nresult = G.nodes["apple_old"]["founded"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("1976-04-01")],
        }
    )

    result = run(
        scripted, "When was Apple Computer founded?", entity="fruit", settings=store_settings
    )

    assert result.answer == "1976-04-01"
    assert not [e for e in result.trace if e.type == "code_failed"]
    [query_result] = [e for e in result.trace if e.type == "query_result"]
    assert "1976-04-01" in query_result.result
