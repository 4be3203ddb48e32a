"""kgot.memory.open_memory on real stores: resolution over an entity's graph (dry run, --apply),
the curation queue, write-time landing and functional supersede, and tenants kept apart."""

from __future__ import annotations

from typing import Any

import pytest

from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import MergedId, WrittenEdge, open_memory
from kgot.persistence import Provenance, Store
from kgot.tests.memory.conftest import UPKEEP_TYPES


def _provenance(source: str = "file:one", confidence: float | None = None) -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source, confidence=confidence)


def _company(node_id: str, name: str, **properties: Any) -> Node:
    return Node(node_id, "Company", {"name": name, **properties})


def _seed(store: Store, entity: str = "fund") -> None:
    """Two spellings of Apple (the newer one, with more edges, should stay), a look-alike
    that only may be Meta, and a company and a place to link to."""
    store.create_entity(entity, types=UPKEEP_TYPES)
    session = store.session(entity)
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=(
                _company("apple_old", "Apple, Inc."),
                _company("meta", "Meta"),
                _company("meta_fin", "Meta Financial Group"),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                _company("foxconn", "Foxconn"),
            )
        ),
        _provenance(),
    )
    session.commit(
        Changeset(
            added_nodes=(_company("apple", "Apple Inc.", sector="tech"),),
            added_edges=(
                Edge("apple", "cupertino", "headquartered_in"),
                Edge("foxconn", "apple", "related_to"),
            ),
        ),
        _provenance("file:two"),
    )
    session.commit(
        Changeset(added_edges=(Edge("apple_old", "foxconn", "related_to"),)),
        _provenance("file:three"),
    )


@pytest.mark.slow
def test_resolve_dry_run_reports_and_changes_nothing(store: Store) -> None:
    _seed(store)
    before = store.session("fund").version

    result = open_memory(store, "fund").resolve()

    data = result.to_json()
    assert data["merges"] == [
        {
            "canonical": "apple",
            "aliases": ["apple_old"],
            "type": "Company",
            "score": 1.0,
            "reason": "same name 'apple'",
        }
    ]
    assert [(s["nodes"], s["type"], s["id"]) for s in data["suggestions"]] == [
        (["meta", "meta_fin"], "Company", None)
    ]
    session = store.session("fund")
    assert session.version == before
    assert {"apple", "apple_old"} <= set(session.load_graph().nodes)
    assert session.suggestions("open") == []


@pytest.mark.slow
def test_resolve_apply_merges_onto_the_node_with_most_evidence(store: Store) -> None:
    _seed(store)
    session = store.session("fund")
    before = session.version

    result = open_memory(store, "fund").resolve(apply=True)

    assert [m.canonical for m in result.merges] == ["apple"]
    graph = session.load_graph()
    assert "apple_old" not in graph
    assert graph.nodes["apple"]["aliases"] == ["Apple, Inc."]
    assert graph.nodes["apple"]["sector"] == "tech"
    # apple_old's edge now starts at apple; apple's own edges are kept.
    assert graph.has_edge("apple", "foxconn")
    assert graph.has_edge("apple", "cupertino") and graph.has_edge("foxconn", "apple")
    assert session.canonical_id("apple_old") == "apple"
    [merge_commit] = [c for c in session.commits() if c["version"] == before + 1]
    assert merge_commit["step"] == "memory:resolve"
    old = session.load_graph(as_of=before)
    assert "apple_old" in old and old.has_edge("apple_old", "foxconn")
    assert session.node_history("apple_old")[-1]["closed_reason"] == "merged"
    # The look-alike became a queued suggestion, its id in the JSON.
    [queued] = session.suggestions("open")
    assert result.to_json()["suggestions"] == [
        {"id": queued.id, "nodes": ["meta", "meta_fin"], "type": "Company", "score": 0.611}
    ]


def test_a_dry_run_shows_the_ids_of_suggestions_already_queued(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    applied = memory.resolve(apply=True)
    again = memory.resolve()
    assert again.merges == ()
    assert again.suggestion_ids == applied.suggestion_ids != (None,)


@pytest.mark.slow
def test_reject_then_resolve_does_not_queue_it_again(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    [suggestion_id] = memory.resolve(apply=True).suggestion_ids
    assert suggestion_id is not None
    graph_version = memory.session.version

    assert "rejected" in memory.reject(suggestion_id)

    assert memory.session.version == graph_version
    assert memory.resolve(apply=True).suggestion_ids == (None,)
    assert memory.suggestions("open") == []
    with pytest.raises(UsageError, match="already rejected"):
        memory.accept(suggestion_id)


def test_accepting_a_merge_suggestion_merges(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    [suggestion_id] = memory.resolve(apply=True).suggestion_ids
    assert suggestion_id is not None

    done = memory.accept(suggestion_id)

    assert "merged" in done
    graph = memory.session.load_graph()
    merged = {"meta", "meta_fin"} & set(graph.nodes)
    assert len(merged) == 1
    [kept] = merged
    assert set(graph.nodes[kept]["aliases"]) >= {"Meta", "Meta Financial Group"} - {
        graph.nodes[kept]["name"]
    }
    assert memory.suggestions("accepted")[0].id == suggestion_id


def test_unknown_and_foreign_suggestion_ids_are_refused(store: Store) -> None:
    _seed(store, "fund")
    _seed(store, "other")
    [foreign] = open_memory(store, "other").resolve(apply=True).suggestion_ids
    memory = open_memory(store, "fund")
    version = memory.session.version
    for bad in (foreign, 999_999):
        assert bad is not None
        with pytest.raises(UsageError, match=f"no suggestion {bad} in entity 'fund'"):
            memory.accept(bad)
        with pytest.raises(UsageError, match=f"no suggestion {bad} in entity 'fund'"):
            memory.reject(bad)
    assert memory.session.version == version
    assert [s.status for s in open_memory(store, "other").suggestions("open")] == ["open"]


@pytest.mark.slow
def test_commands_on_one_entity_leave_another_alone(store: Store) -> None:
    _seed(store, "fund")
    _seed(store, "twin")
    twin = store.session("twin")
    version = twin.version
    graph = twin.load_graph(include_meta=True)

    memory = open_memory(store, "fund")
    [suggestion_id] = memory.resolve(apply=True).suggestion_ids
    assert suggestion_id is not None
    memory.accept(suggestion_id)
    memory.commit(Changeset(added_nodes=(_company("apple2", "APPLE INC"),)), _provenance("f:9"))

    twin = store.session("twin")
    assert twin.version == version
    after = twin.load_graph(include_meta=True)
    assert dict(after.nodes(data=True)) == dict(graph.nodes(data=True))
    assert sorted(after.edges(keys=True)) == sorted(graph.edges(keys=True))
    assert twin.suggestions("open") == [] and twin.suggestions("accepted") == []


# -------------------------------------------------------------------------- write time


def _company_entity(store: Store) -> None:
    store.create_entity("desk", types=UPKEEP_TYPES)
    session = store.session("desk")
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=(
                _company("aapl", "Apple Inc.", symbol="AAPL", ceo="Tim Cook"),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                Node("austin", "Place", {"name": "Austin"}),
                Node("dublin", "Place", {"name": "Dublin"}),
            ),
            added_edges=(Edge("aapl", "cupertino", "headquartered_in"),),
        ),
        _provenance("file:filing", confidence=0.9),
    )


@pytest.mark.slow
def test_a_restated_duplicate_lands_on_the_existing_node_as_a_corroboration(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()

    outcome = memory.commit(
        Changeset(
            added_nodes=(_company("apple_inc", "Apple Inc.", symbol="AAPL", ceo="Tim Cook"),),
            added_edges=(Edge("apple_inc", "cupertino", "headquartered_in"),),
        ),
        _provenance("https://news.example/apple", confidence=0.9),
    )

    assert any("landed on 'aapl'" in note for note in outcome.notes)
    # The outcome says it as data: the id landed, both facts were counted again, none written.
    assert outcome.merged == (MergedId("apple_inc", "aapl"),)
    assert set(outcome.restated) == {
        ("node", "aapl"),
        ("edge", "aapl", "cupertino", "headquartered_in"),
    }
    assert (outcome.corroborated, outcome.reinforced) == (2, 0)
    assert outcome.inserted_nodes == () and outcome.inserted_edges == ()
    graph = memory.session.load_graph()
    assert "apple_inc" not in graph
    [latest] = memory.session.node_history("aapl")[-1:]
    assert latest["corroborations"] == 2
    assert [e for e in graph.edges(keys=True)] == [("aapl", "cupertino", "headquartered_in")]


def test_the_first_node_of_a_type_keeps_its_identity_for_the_next_write(store: Store) -> None:
    """The snapshot the write-time hook keeps between commits knows each type's identity even
    when the graph had no node of that type when it was read."""
    store.create_entity("desk", types=UPKEEP_TYPES)
    memory = open_memory(store, "desk")
    memory.session.load_graph()

    for node_id, symbol in (("alphabet_a", "GOOGL"), ("alphabet_c", "GOOG")):
        outcome = memory.commit(
            Changeset(added_nodes=(_company(node_id, "Alphabet Inc.", symbol=symbol),)),
            _provenance(),
        )
        assert outcome.merged == () and outcome.notes == (), outcome.notes

    graph = memory.session.load_graph()
    assert {n: graph.nodes[n]["symbol"] for n in graph} == {
        "alphabet_a": "GOOGL",
        "alphabet_c": "GOOG",
    }


def test_a_new_spelling_lands_with_its_name_kept_as_an_alias(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()

    outcome = memory.commit(
        Changeset(
            added_nodes=(
                _company("apple2", "Apple Computer", symbol="aapl", sector="hardware"),
                Node("store1", "Place", {"name": "Fifth Avenue store"}),
            ),
            added_edges=(Edge("store1", "apple2", "related_to"),),
        ),
        _provenance("file:two"),
    )

    assert outcome.notes and "same symbol 'aapl'" in outcome.notes[0]
    graph = memory.session.load_graph()
    assert "apple2" not in graph
    node = graph.nodes["aapl"]
    assert (node["name"], node["aliases"], node["sector"]) == (
        "Apple Inc.",
        ["Apple Computer"],
        "hardware",
    )
    assert node["symbol"] == "aapl"  # the newer statement's value of a non-functional property
    assert graph.has_edge("store1", "aapl")


def test_a_new_value_of_a_functional_property_supersedes_the_old(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    graph = memory.session.load_graph()
    new = {**graph.nodes["aapl"], "ceo": "John Ternus"}
    new.pop("label")

    outcome = memory.commit(
        Changeset(changed_nodes=(Node("aapl", "Company", new),)),
        _provenance("file:news", confidence=0.9),
    )

    assert outcome.superseded == (("node", "aapl"),)
    history = memory.session.node_history("aapl")
    assert [v["properties"]["ceo"] for v in history] == ["Tim Cook", "John Ternus"]
    assert history[0]["closed_reason"] == "contradicted"
    assert history[0]["superseded_by"] is not None


def test_a_much_less_trusted_new_value_is_queued_not_written(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    graph = memory.session.load_graph()
    version = memory.session.version
    new = {**graph.nodes["aapl"], "ceo": "Steve Jobs", "_confidence": 0.5}
    new.pop("label")

    outcome = memory.commit(
        Changeset(changed_nodes=(Node("aapl", "Company", new),)), _provenance("llm")
    )

    assert outcome.version is None  # nothing left to commit
    assert memory.session.version == version
    assert "stays 'Tim Cook'" in outcome.notes[0]
    [queued] = memory.suggestions()
    assert (queued.kind, queued.payload["old"], queued.payload["new"]) == (
        "contradiction",
        "Tim Cook",
        "Steve Jobs",
    )

    done = memory.accept(queued.id)

    assert "Steve Jobs" in done
    history = memory.session.node_history("aapl")
    assert history[-1]["properties"]["ceo"] == "Steve Jobs"
    assert history[-1]["confidence"] == 0.5
    assert history[-2]["closed_reason"] == "contradicted"


def test_a_functional_edge_replaces_the_old_one_and_nothing_else(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()
    memory.session.commit(
        Changeset(added_edges=(Edge("aapl", "austin", "related_to"),)), _provenance()
    )

    outcome = memory.commit(
        Changeset(added_edges=(Edge("aapl", "austin", "headquartered_in"),)),
        _provenance("file:move", confidence=0.9),
    )

    key = ("edge", "aapl", "cupertino", "headquartered_in")
    assert outcome.superseded == (key,)
    graph = memory.session.load_graph()
    assert sorted(graph.edges(keys=True)) == [
        ("aapl", "austin", "headquartered_in"),
        ("aapl", "austin", "related_to"),  # another relationship: never retired
    ]
    [old] = memory.session.edge_history("aapl", "cupertino", "headquartered_in")
    assert old["closed_reason"] == "contradicted"


@pytest.mark.slow
def test_a_less_trusted_functional_edge_is_queued_and_accept_swaps_it(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()

    outcome = memory.commit(
        Changeset(
            added_edges=(Edge("aapl", "dublin", "headquartered_in", "", {"_confidence": 0.4}),)
        ),
        _provenance("rumour"),
    )

    assert outcome.version is None  # nothing left to commit
    [queued] = memory.suggestions()
    assert queued.payload["fact"] == "edge"
    graph = memory.session.load_graph()
    assert list(graph.out_edges("aapl", keys=True)) == [("aapl", "cupertino", "headquartered_in")]

    memory.accept(queued.id)

    graph = memory.session.load_graph()
    assert list(graph.out_edges("aapl", keys=True)) == [("aapl", "dublin", "headquartered_in")]
    [old] = memory.session.edge_history("aapl", "cupertino", "headquartered_in")
    assert old["closed_reason"] == "contradicted"


@pytest.mark.slow
def test_writes_to_a_merged_away_id_reach_the_canonical_node(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    memory.resolve(apply=True)
    memory.session.load_graph()

    outcome = memory.commit(
        Changeset(added_edges=(Edge("apple_old", "cupertino", "related_to"),)), _provenance("x")
    )

    assert any("merged into 'apple'" in note for note in outcome.notes)
    assert memory.session.load_graph().has_edge("apple", "cupertino", "related_to")


@pytest.mark.slow
def test_only_the_same_subject_and_property_is_ever_contradicted(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()
    memory.commit(
        Changeset(added_nodes=(_company("msft", "Microsoft", symbol="MSFT"),)), _provenance()
    )
    graph = memory.session.load_graph()
    apple = {k: v for k, v in graph.nodes["aapl"].items() if k != "label"}

    outcome = memory.commit(
        Changeset(
            changed_nodes=(
                Node("aapl", "Company", {**apple, "sector": "hardware"}),  # not functional
                Node("msft", "Company", {"name": "Microsoft", "symbol": "MSFT", "ceo": "Tim Cook"}),
            )
        ),
        _provenance("file:b"),
    )

    assert outcome.superseded == ()  # a first value and a non-functional change
    assert [v["closed_reason"] for v in memory.session.node_history("aapl")] == ["changed", None]
    graph = memory.session.load_graph()
    assert (graph.nodes["aapl"]["ceo"], graph.nodes["msft"]["ceo"]) == ("Tim Cook", "Tim Cook")


def test_a_write_reports_new_changed_and_superseded_facts_as_data(store: Store) -> None:
    _company_entity(store)
    memory = open_memory(store, "desk")
    memory.session.load_graph()

    outcome = memory.commit(
        Changeset(
            added_nodes=(_company("msft", "Microsoft", symbol="MSFT"),),
            added_edges=(Edge("msft", "cupertino", "headquartered_in", "hq"),),
        ),
        _provenance("https://news.example/msft"),
    )
    assert outcome.inserted_nodes == ("msft",)
    assert outcome.inserted_edges == (WrittenEdge("msft", "headquartered_in", "cupertino", "hq"),)
    assert outcome.inserted_edges[0].fact_id == "msft -[hq]-> cupertino"
    assert outcome.version == memory.session.version and outcome.ok

    stored = memory.session.load_graph().nodes["aapl"]
    changed = {k: v for k, v in stored.items() if k != "label"} | {"ceo": "John Ternus"}
    outcome = memory.commit(
        Changeset(changed_nodes=(Node("aapl", "Company", changed),)),
        _provenance("https://news.example/ceo"),
    )
    assert outcome.updated_nodes == ("aapl",)
    assert outcome.superseded == (("node", "aapl"),)
    assert outcome.summary() == (
        f"0 nodes and 0 edges inserted, 1 updated, 1 superseded (version {outcome.version})"
    )


def test_a_ticker_named_company_lands_on_its_issuer(store: Store) -> None:
    """'AAPL' written as a company is Apple when the graph links Apple to the AAPL security;
    a ticker nobody issues stays a node of its own, and so does one two companies claim."""
    asset = {
        "kind": "node",
        "name": "Asset",
        "description": "A listed security.",
        "properties": {"type": "object", "properties": {"symbol": {"type": "string"}}},
        "identity": ["symbol"],
    }
    issued_by = {"kind": "edge", "name": "issued_by", "description": "Its issuer."}
    store.create_entity("desk", types=[*UPKEEP_TYPES, asset, issued_by])
    session = store.session("desk")
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=(
                _company("apple", "Apple Inc."),
                _company("alphabet", "Alphabet Inc."),
                Node("aapl_stock", "Asset", {"symbol": "AAPL"}),
                Node("goog_stock", "Asset", {"symbol": "GOOG"}),
                Node("googl_stock", "Asset", {"symbol": "GOOGL"}),
            ),
            added_edges=(
                Edge("aapl_stock", "apple", "issued_by"),
                Edge("goog_stock", "alphabet", "issued_by"),
                Edge("googl_stock", "alphabet", "issued_by"),
            ),
        ),
        _provenance(),
    )
    memory = open_memory(store, "desk")
    memory.session.load_graph()
    outcome = memory.commit(
        Changeset(added_nodes=(_company("aapl_mention", "AAPL"), _company("msft", "MSFT"))),
        _provenance("https://news.example/1"),
    )
    assert [(m.given, m.into) for m in outcome.merged] == [("aapl_mention", "apple")]
    assert outcome.inserted_nodes == ("msft",)

    session.load_graph()
    session.commit(Changeset(added_nodes=(_company("googl_raw", "GOOGL"),)), _provenance())
    merges = open_memory(store, "desk").resolve().merges
    assert [(m.canonical, m.aliases) for m in merges] == [("alphabet", ("googl_raw",))]


def test_a_ticker_counts_from_the_next_write_of_the_same_session(store: Store) -> None:
    """An aide keeps one session for hours: the issuer link it writes must count at once,
    not only after another process writes and the snapshot is read again."""
    asset = {
        "kind": "node",
        "name": "Asset",
        "description": "A listed security.",
        "properties": {"type": "object", "properties": {"symbol": {"type": "string"}}},
    }
    issued_by = {"kind": "edge", "name": "issued_by", "description": "Its issuer."}
    store.create_entity("desk", types=[*UPKEEP_TYPES, asset, issued_by])
    memory = open_memory(store, "desk")
    memory.session.load_graph()
    memory.commit(Changeset(added_nodes=(_company("nvidia", "NVIDIA Corporation"),)), _provenance())
    memory.commit(
        Changeset(
            added_nodes=(Node("nvda_stock", "Asset", {"symbol": "NVDA"}),),
            added_edges=(Edge("nvda_stock", "nvidia", "issued_by"),),
        ),
        _provenance("https://news.example/listing"),
    )
    memory.commit(Changeset(added_nodes=(_company("arm", "Arm Holdings", ticker="ARM"),)),
                  _provenance())  # fmt: skip
    outcome = memory.commit(
        Changeset(added_nodes=(_company("nvda", "NVDA"), _company("arm_mention", "ARM"))),
        _provenance("https://news.example/2"),
    )
    assert sorted((m.given, m.into) for m in outcome.merged) == [
        ("arm_mention", "arm"),
        ("nvda", "nvidia"),
    ]


def test_ticker_claims_name_an_organisation_only_while_it_alone_claims_them() -> None:
    from kgot.memory.tickers import TickerClaims

    claims = TickerClaims()
    assert claims.claim("alphabet", ["GOOG", "googl"]) == ["GOOG", "googl"]
    assert claims.claim("apple", []) == []
    assert claims.claim("apple", ["AAPL"]) == ["AAPL"]
    assert claims.claim("other", ["goog"]) == []  # a ticker two claim names neither
    assert claims.names() == {"alphabet": ["googl"], "apple": ["AAPL"]}
