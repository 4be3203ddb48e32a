"""The store side of memory upkeep on real stores (SQLite and PostgreSQL): merging nodes,
closing facts with a reason, superseding a functional edge, fact use and feedback, the
curation queue, and that none of it reaches across entities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from sqlalchemy import func, select

from kgot.errors import ChangesetError, UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import (
    CommitConflictError,
    EntitySession,
    Provenance,
    Store,
    SuggestionNotFoundError,
    open_store,
)
from kgot.persistence.engine import read_transaction
from kgot.persistence.schema import TABLES

FIRST = Provenance(run_id="run-1", step="update_graph", source_ref="https://a.example/apple")
SECOND = Provenance(run_id="run-2", step="update_graph", source_ref="https://b.example/apple")
RESOLVE = Provenance(run_id="upkeep", step="memory:resolve")
MERGED_PROPERTIES = {"name": "Apple Inc.", "aliases": ["Apple, Inc."]}


def two_apples(store: Store, entity: str = "fund") -> EntitySession:
    """Apple under two ids: ``apple`` from the first source, ``apple2`` from the second, with
    one edge each kind of merge treats differently."""
    store.create_entity(entity)
    session = store.session(entity)
    session.commit(
        Changeset(
            added_nodes=(
                Node("apple", "Organization", {"name": "Apple Inc."}),
                Node("apple2", "Organization", {"name": "Apple, Inc."}),
                Node("tim", "Person", {"name": "Tim Cook"}),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                Node("beats", "Product", {"name": "Beats"}),
            ),
            added_edges=(
                Edge("tim", "apple", "works_for", "works_for", {"role": "CEO"}),
                Edge("apple", "cupertino", "located_in", "located_in"),
            ),
        ),
        FIRST,
    )
    session.commit(
        Changeset(
            added_edges=(
                # equal to tim -> apple: joins it as a corroboration
                Edge("tim", "apple2", "works_for", "works_for", {"role": "CEO"}),
                # same identity as apple -> cupertino once re-pointed, other content: key~2
                Edge("apple2", "cupertino", "located_in", "located_in", {"since": "1977"}),
                # between the merged nodes: closed, not a loop
                Edge("apple2", "apple", "related_to", "related_to"),
                # nothing like it on apple: moves, provenance kept
                Edge("apple2", "beats", "owns", "owns"),
            )
        ),
        SECOND,
    )
    return session


def edge_set(graph: nx.MultiDiGraph) -> set[tuple[str, str, str]]:
    return {(s, t, k) for s, t, k in graph.edges(keys=True)}


def snapshot(session: EntitySession) -> tuple[int, Any, Any, int]:
    """What a refused call must leave exactly as it was."""
    graph = session.load_graph(include_meta=True, track=False)
    nodes = sorted((n, sorted(d.items())) for n, d in graph.nodes(data=True))
    edges = sorted((s, t, k, sorted(d.items())) for s, t, k, d in graph.edges(keys=True, data=True))
    return graph.graph["kgot_version"], nodes, edges, len(session.commits())


def count_rows(store: Store, table: Any) -> int:
    with read_transaction(store._context.engine, store.target) as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


# ---------------------------------------------------------------------------- merge_nodes


def test_merge_moves_edges_joins_equal_ones_and_keeps_history(store: Store) -> None:
    session = two_apples(store)
    session.load_graph()
    before = session.version

    version = session.merge_nodes("apple", ["apple2"], RESOLVE, properties=MERGED_PROPERTIES)

    assert version == before + 1  # the tracked view catches up through refresh()
    assert session.version == before
    graph = session.load_graph(include_meta=True)
    assert "apple2" not in graph
    assert graph.nodes["apple"]["aliases"] == ["Apple, Inc."]
    assert graph.nodes["apple"]["_version"] == version
    assert edge_set(graph) == {
        ("tim", "apple", "works_for"),
        ("apple", "cupertino", "located_in"),
        ("apple", "cupertino", "located_in~2"),
        ("apple", "beats", "owns"),
    }
    # The equal edge found from both nodes is one edge, the second source a corroboration.
    joined = graph.edges["tim", "apple", "works_for"]
    assert (joined["_corroborations"], joined["_version"], joined["_run_id"]) == (2, 1, "run-1")
    assert "_reinforced_at" in joined
    # A moved edge keeps where it came from; a colliding one gets a fresh key.
    moved = graph.edges["apple", "beats", "owns"]
    assert (moved["_run_id"], moved["_source_ref"]) == ("run-2", SECOND.source_ref)
    assert moved["_version"] == version
    assert graph.edges["apple", "cupertino", "located_in~2"]["since"] == "1977"
    assert graph.edges["apple", "cupertino", "located_in"].get("since") is None
    assert not any(s == t for s, t in graph.edges())  # no loop from the edge between them

    (alias_row,) = session.node_history("apple2")
    assert (alias_row["closed_reason"], alias_row["canonical_id"]) == ("merged", "apple")
    assert alias_row["valid_to_version"] == version
    canonical_rows = session.node_history("apple")
    assert [r["closed_reason"] for r in canonical_rows] == ["changed", None]
    assert alias_row["superseded_by"] == canonical_rows[1]["row_id"]
    assert canonical_rows[0]["superseded_by"] == canonical_rows[1]["row_id"]

    old_owns = session.edge_history("apple2", "beats", "owns")
    (new_owns,) = session.edge_history("apple", "beats", "owns")
    assert [r["closed_reason"] for r in old_owns] == ["merged"]
    assert old_owns[0]["superseded_by"] == new_owns["row_id"]
    (old_works,) = session.edge_history("tim", "apple2", "works_for")
    (kept_works,) = session.edge_history("tim", "apple", "works_for")
    assert old_works["closed_reason"] == "merged"
    assert old_works["superseded_by"] == kept_works["row_id"]
    (between,) = session.edge_history("apple2", "apple", "related_to")
    assert (between["closed_reason"], between["superseded_by"]) == ("merged", None)
    assert session.edge_history("apple", "apple", "related_to") == []

    # History still shows the graph before the merge.
    earlier = session.load_graph(as_of=before, track=False)
    assert {"apple", "apple2"} <= set(earlier)
    assert ("apple2", "apple", "related_to") in edge_set(earlier)
    assert earlier.nodes["apple"].get("aliases") is None
    assert session.commits()[0]["summary"] == (
        "merged 'apple2' into 'apple' (2 edges re-pointed, 1 joined, 1 between them closed)"
    )
    assert session.commits()[0]["step"] == "memory:resolve"


def test_two_aliases_with_the_same_edge_become_one_edge(store: Store) -> None:
    store.create_entity("fund")
    session = store.session("fund")
    session.commit(
        Changeset(
            added_nodes=(
                Node("apple", "Organization", {"name": "Apple"}),
                Node("apple2", "Organization", {"name": "Apple Inc"}),
                Node("apple3", "Organization", {"name": "Apple Computer"}),
                Node("beats", "Product", {"name": "Beats"}),
            ),
            added_edges=(
                Edge("apple2", "beats", "owns", "owns", {"share": 1}),
                Edge("apple2", "apple3", "related_to", "related_to"),
            ),
        ),
        FIRST,
    )
    session.commit(
        Changeset(
            added_edges=(
                Edge("apple3", "beats", "owns", "owns", {"share": 1}),
                Edge("apple3", "apple3", "related_to", "self"),  # a loop already: stays one
            )
        ),
        SECOND,
    )

    version = session.merge_nodes(
        "apple", ["apple2", "apple3", "apple2"], RESOLVE, properties={"name": "Apple"}
    )

    graph = session.load_graph(include_meta=True)
    assert set(graph) == {"apple", "beats"}
    assert edge_set(graph) == {("apple", "beats", "owns"), ("apple", "apple", "self")}
    owns = graph.edges["apple", "beats", "owns"]
    assert (owns["_corroborations"], owns["_version"], owns["_run_id"]) == (2, version, "run-1")
    (new_owns,) = session.edge_history("apple", "beats", "owns")
    for alias in ("apple2", "apple3"):
        (old,) = session.edge_history(alias, "beats", "owns")
        assert (old["closed_reason"], old["superseded_by"]) == ("merged", new_owns["row_id"])
    assert [r["closed_reason"] for r in session.edge_history("apple2", "apple3", "related_to")] == [
        "merged"
    ]
    for alias in ("apple2", "apple3"):
        assert session.node_history(alias)[-1]["canonical_id"] == "apple"
    assert session.commits()[0]["summary"] == (
        "merged 'apple2', 'apple3' into 'apple' (2 edges re-pointed, 1 joined, "
        "1 between them closed)"
    )


def test_canonical_id_follows_chains_of_merges(store: Store) -> None:
    session = two_apples(store)
    session.commit(Changeset(added_nodes=(Node("aapl", "Organization", {"name": "Apple"}),)), FIRST)
    session.load_graph()
    assert session.canonical_id("apple2") == "apple2"
    session.merge_nodes("apple", ["apple2"], RESOLVE, properties=MERGED_PROPERTIES)
    assert session.canonical_id("apple2") == "apple"
    session.refresh()  # a merge reaches the tracked view through refresh()
    session.merge_nodes("aapl", ["apple"], RESOLVE, properties={"name": "Apple"})
    assert session.canonical_id("apple2") == "aapl"
    assert session.canonical_id("apple") == "aapl"
    assert session.canonical_id("aapl") == "aapl"
    assert session.canonical_id("ghost") is None
    session.refresh()
    session.commit(
        Changeset(removed_nodes=("beats",), removed_edges=(("aapl", "beats", "owns"),)), FIRST
    )
    assert session.canonical_id("beats") is None  # removed: no current node


def test_merge_refusals_write_nothing(store: Store) -> None:
    session = two_apples(store)
    session.load_graph()
    before = snapshot(session)

    cases: list[tuple[type[Exception], str, str, list[str], dict[str, Any]]] = [
        (UsageError, "no current node 'ghost' in entity 'fund'", "apple", ["ghost"], {}),
        (UsageError, "no current node 'ghost' in entity 'fund'", "ghost", ["apple2"], {}),
        (UsageError, "only nodes of one type are merged", "apple", ["tim"], {}),
        (UsageError, "cannot be merged into itself", "apple", ["apple2", "apple"], {}),
        (UsageError, "at least one alias", "apple", [], {}),
        (ChangesetError, "may not carry metadata", "apple", ["apple2"], {"_confidence": 0.2}),
        (ChangesetError, "name", "apple", ["apple2"], {"name": 7}),  # breaks the type
    ]
    for error, message, canonical, aliases, extra in cases:
        with pytest.raises(error, match=message):
            session.merge_nodes(
                canonical, aliases, RESOLVE, properties={**MERGED_PROPERTIES, **extra}
            )
        assert snapshot(session) == before, (canonical, aliases, extra)


@pytest.mark.slow
def test_a_merge_on_a_stale_view_is_refused(store: Store) -> None:
    session = two_apples(store)
    session.load_graph()
    other = store.session("fund")
    other.commit(
        Changeset(changed_nodes=(Node("apple2", "Organization", {"name": "Apple Computer"}),)),
        FIRST,
    )
    before = snapshot(session)
    with pytest.raises(CommitConflictError, match="node 'apple2': another writer changed it"):
        session.merge_nodes("apple", ["apple2"], RESOLVE, properties=MERGED_PROPERTIES)
    assert snapshot(session) == before
    # Caught up, the same merge goes through.
    session.refresh()
    session.merge_nodes("apple", ["apple2"], RESOLVE, properties=MERGED_PROPERTIES)
    assert session.canonical_id("apple2") == "apple"
    # A base names the view explicitly.
    with pytest.raises(CommitConflictError):
        session.merge_nodes("tim", ["cupertino"], RESOLVE, properties={"name": "x"}, base=0)


# ---------------------------------------------------------------------------- closing facts


def test_close_facts_records_the_reason_and_closes_a_nodes_edges(store: Store) -> None:
    session = two_apples(store)
    version = session.version
    closed = session.close_facts(
        [("node", "apple2"), ("edge", "apple", "cupertino", "located_in"), ("node", "ghost")],
        "expired",
        Provenance(run_id="upkeep", step="memory:upkeep"),
    )
    assert closed == version + 1
    graph = session.load_graph()
    assert "apple2" not in graph
    assert edge_set(graph) == {("tim", "apple", "works_for")}
    assert session.node_history("apple2")[-1]["closed_reason"] == "expired"
    for ident in (
        ("apple", "cupertino", "located_in"),
        ("apple2", "beats", "owns"),
        ("tim", "apple2", "works_for"),
        ("apple2", "apple", "related_to"),
    ):
        (row,) = session.edge_history(*ident)
        assert (row["closed_reason"], row["valid_to_version"]) == ("expired", closed), ident
    assert session.commits()[0]["summary"] == "closed 1 node and 5 edges (expired)"

    # Nothing current left to close: no commit.
    assert session.close_facts([("node", "apple2")], "pruned", FIRST) == closed
    assert len(session.commits()) == 3
    before = snapshot(session)
    with pytest.raises(UsageError, match="closed as merged by merge_nodes"):
        session.close_facts([("node", "apple")], "merged", FIRST)
    with pytest.raises(UsageError, match="close reason 'stale' is not one of"):
        session.close_facts([("node", "apple")], "stale", FIRST)
    assert snapshot(session) == before


@pytest.mark.slow
def test_a_replaced_functional_edge_is_closed_contradicted_and_superseded(store: Store) -> None:
    session = two_apples(store)
    session.commit(
        Changeset(added_nodes=(Node("msft", "Organization", {"name": "Microsoft"}),)), FIRST
    )
    old = ("tim", "apple", "works_for")
    session.commit(
        Changeset(
            removed_edges=(old,),
            added_edges=(Edge("tim", "msft", "works_for", "works_for", {"role": "CEO"}),),
        ),
        SECOND,
        close_reasons={("edge", *old): "contradicted", ("node", "unrelated"): "removed"},
    )
    (closed,) = session.edge_history(*old)
    (new,) = session.edge_history("tim", "msft", "works_for")
    assert closed["closed_reason"] == "contradicted"
    assert closed["superseded_by"] == new["row_id"]
    # Removed without a reason: "removed", superseded by nothing.
    session.commit(Changeset(removed_edges=(("apple", "cupertino", "located_in"),)), SECOND)
    (removed,) = session.edge_history("apple", "cupertino", "located_in")
    assert (removed["closed_reason"], removed["superseded_by"]) == ("removed", None)
    with pytest.raises(UsageError, match="close reason"):
        session.commit(
            Changeset(removed_nodes=("beats",)), SECOND, close_reasons={("node", "beats"): "x"}
        )


# ---------------------------------------------------------------------------- fact use


def test_use_and_feedback_are_counted_apart_from_fact_versions(store: Store) -> None:
    session = two_apples(store)
    version = session.version
    apple, owns = ("node", "apple"), ("edge", "apple2", "beats", "owns")
    assert session.fact_use([apple, owns]) == {}

    assert session.record_use([apple, owns, ("node", "ghost"), apple]) == 2
    use = session.fact_use([apple, owns, ("node", "ghost")])
    assert set(use) == {apple, owns}
    assert use[apple].strength == pytest.approx(0.1) and use[apple].uses == 1
    assert use[apple].last_used_at is not None

    for _ in range(12):
        session.record_use([apple])
    assert session.fact_use([apple])[apple].strength == 1.0  # capped
    assert session.fact_use([apple])[apple].uses == 13

    good = session.feedback(owns, good=True)
    assert (good.strength, good.good, good.bad, good.uses) == (pytest.approx(0.3), 1, 0, 1)
    bad = session.feedback(owns, good=False)
    assert (bad.strength, bad.good, bad.bad) == (pytest.approx(0.3), 1, 1)
    fresh = session.feedback(("node", "tim"), good=True)  # feedback before any use
    assert (fresh.strength, fresh.uses, fresh.last_used_at) == (pytest.approx(0.2), 0, None)

    with pytest.raises(UsageError, match="no current node 'ghost' in entity 'fund'"):
        session.feedback(("node", "ghost"), good=True)
    with pytest.raises(UsageError, match="no current edge 'apple' -> 'beats' key 'owns'"):
        session.feedback(("edge", "apple", "beats", "owns"), good=True)
    with pytest.raises(UsageError, match="a use amount must be a number from 0 to 1"):
        session.record_use([apple], amount=1.5)
    with pytest.raises(UsageError):
        session.record_use([("nodes", "apple")])

    # Reads and uses wrote no fact version and no commit.
    assert session.version == version
    assert len(session.node_history("apple")) == 1
    assert len(session.edge_history("apple2", "beats", "owns")) == 1

    # A fact no longer current is not counted.
    session.close_facts([apple], "pruned", FIRST)
    assert session.record_use([apple]) == 0
    assert session.fact_use([apple])[apple].uses == 13


# ---------------------------------------------------------------------------- suggestions


def test_the_curation_queue(store: Store) -> None:
    store.create_entity("fund")
    session = store.session("fund")
    payload = {"nodes": ["apple", "apple2"], "type": "Organization"}
    first = session.suggest("merge", payload, 0.8)
    assert session.suggest("merge", dict(reversed(payload.items())), 0.9) == first  # still open
    other = session.suggest("contradiction", {"fact": ["node", "apple"]}, 0.95)
    low = session.suggest("merge", {"nodes": ["a", "b"], "type": "Person"}, 0.1)
    assert [s.id for s in session.suggestions()] == [other, first, low]  # best score first
    found = session.suggestion(first)
    assert (found.kind, dict(found.payload), found.score, found.status) == (
        "merge",
        payload,
        0.8,
        "open",
    )
    assert found.created_at is not None and found.decided_at is None

    rejected = session.decide_suggestion(first, accepted=False)
    assert rejected.status == "rejected" and rejected.decided_at is not None
    assert session.suggest("merge", payload, 0.8) == first  # a person said no once
    accepted = session.decide_suggestion(other, accepted=True)
    assert accepted.status == "accepted"
    again = session.suggest("contradiction", {"fact": ["node", "apple"]}, 0.95)
    assert again not in (first, other)  # accepted before: a new question

    assert [s.id for s in session.suggestions()] == [again, low]
    assert [s.id for s in session.suggestions("rejected")] == [first]
    assert [s.id for s in session.suggestions("accepted")] == [other]
    assert {s.id for s in session.suggestions(None)} == {first, other, low, again}
    assert session.suggestion(first).to_dict()["status"] == "rejected"

    with pytest.raises(
        UsageError, match=f"suggestion {first} in entity 'fund' was already rejected"
    ):
        session.decide_suggestion(first, accepted=True)
    with pytest.raises(SuggestionNotFoundError, match="no suggestion 999999 in entity 'fund'"):
        session.decide_suggestion(999999, accepted=True)
    with pytest.raises(UsageError, match="status 'done' is not one of"):
        session.suggestions("done")
    with pytest.raises(UsageError, match="kind 'split' is not one of"):
        session.suggest("split", payload, 0.5)
    with pytest.raises(UsageError, match="score must be a number from 0 to 1"):
        session.suggest("merge", payload, 1.2)
    with pytest.raises(UsageError, match="payload must be JSON"):
        session.suggest("merge", {"when": object()}, 0.5)
    assert session.suggestion(first).status == "rejected"


# ---------------------------------------------------------------------------- isolation


@pytest.mark.slow
def test_another_entitys_upkeep_rows_are_invisible(store: Store) -> None:
    alice = two_apples(store, "alice")
    bob = two_apples(store, "bob")
    bob.commit(Changeset(added_nodes=(Node("bob-only", "Thing", {"name": "secret"}),)), FIRST)
    bobs = bob.suggest("merge", {"nodes": ["apple", "apple2"]}, 0.7)
    bob.record_use([("node", "apple"), ("node", "bob-only")])
    bob.feedback(("node", "apple"), good=True)
    alice.load_graph()
    before = snapshot(alice)

    # A suggestion id of Bob's reads exactly like an unknown one.
    unknown = 10**9
    for read in (alice.suggestion, lambda i: alice.decide_suggestion(i, accepted=True)):
        with pytest.raises(SuggestionNotFoundError) as theirs:
            read(bobs)
        with pytest.raises(SuggestionNotFoundError) as nobodys:
            read(unknown)
        assert str(theirs.value).replace(str(bobs), "N") == str(nobodys.value).replace(
            str(unknown), "N"
        )
    assert alice.suggestions(None) == []
    # Equal payloads are separate questions per entity.
    assert alice.suggest("merge", {"nodes": ["apple", "apple2"]}, 0.7) != bobs

    # Bob's facts and their use are not Alice's, even under the same ids.
    assert alice.fact_use([("node", "apple"), ("node", "bob-only")]) == {}
    assert alice.record_use([("node", "bob-only")]) == 0
    with pytest.raises(UsageError, match="no current node 'bob-only' in entity 'alice'"):
        alice.feedback(("node", "bob-only"), good=True)
    with pytest.raises(UsageError, match="no current node 'bob-only' in entity 'alice'"):
        alice.merge_nodes("apple", ["bob-only"], RESOLVE, properties=MERGED_PROPERTIES)
    assert alice.canonical_id("bob-only") is None
    assert alice.close_facts([("node", "bob-only")], "expired", FIRST) == alice.version
    assert snapshot(alice) == before

    # Alice's merge leaves Bob's graph alone.
    alice.merge_nodes("apple", ["apple2"], RESOLVE, properties=MERGED_PROPERTIES)
    assert "apple2" in bob.load_graph() and bob.canonical_id("apple2") == "apple2"
    assert bob.fact_use([("node", "apple")])[("node", "apple")].good == 1

    # Deleting Bob removes his use counts and suggestions, and only his.
    alice.record_use([("node", "apple")])
    store.delete_entity("bob")
    assert count_rows(store, TABLES.fact_use) == 1
    assert count_rows(store, TABLES.suggestions) == 1
    assert alice.fact_use([("node", "apple")])[("node", "apple")].uses == 1


# ---------------------------------------------------------------------------- docs


def test_the_documented_starter_settings_are_the_seeded_ones(sqlite_url: str) -> None:
    """docs/persistence.md "Upkeep settings" tables the starter types' settings: they must
    say what a new store holds."""
    docs = (Path(__file__).parents[2] / "docs" / "persistence.md").read_text("utf-8")
    documented: dict[str, list[str]] = {}
    for line in docs.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) in (5, 6) and cells[-1][:1].isdigit():
            documented[cells[0].strip("`")] = cells[1:]

    def shown(names: tuple[str, ...]) -> str:
        return ", ".join(names) or "—"

    def days(value: float | None, none: str) -> str:
        return none if value is None else f"{value:g}"

    store = open_store(sqlite_url)
    try:
        catalog = store.type_catalog()
    finally:
        store.close()
    seeded: dict[str, list[str]] = {}
    for type_def in catalog.node_types.values():
        upkeep = type_def.upkeep
        seeded[type_def.name] = [shown(upkeep.identity), shown(upkeep.functional)]
    for type_def in catalog.edge_types.values():
        seeded[type_def.name] = [str(type_def.upkeep.functional_edge).lower()]
    for type_def in (*catalog.node_types.values(), *catalog.edge_types.values()):
        upkeep = type_def.upkeep
        seeded[type_def.name] += [
            days(upkeep.half_life_days, "evergreen"),
            days(upkeep.ttl_days, "—"),
            f"{upkeep.rank_weight:g}",
        ]
    assert documented == seeded


def test_merged_ids_and_canonical_ids_follow_chains_of_merges(store: Store) -> None:
    store.create_entity("chain")
    session = store.session("chain")
    provenance = Provenance(run_id="", step="test")
    session.commit(
        Changeset(
            added_nodes=tuple(
                Node(node_id, "Organization", {"name": f"Acme {node_id}"})
                for node_id in ("a", "b", "c", "gone")
            )
        ),
        provenance,
    )
    session.merge_nodes("b", ["a"], provenance, properties={"name": "Acme b"})
    session.refresh()
    session.merge_nodes("c", ["b"], provenance, properties={"name": "Acme c"})
    session.refresh()
    session.commit(Changeset(removed_nodes=("gone",)), provenance)
    assert session.merged_ids() == {"a": "b", "b": "c"}
    assert session.canonical_ids(["a", "b", "c", "gone", "never"]) == {
        "a": "c",
        "b": "c",
        "c": "c",
        "gone": None,
        "never": None,
    }
    assert session.canonical_id("a") == "c"


def test_a_write_that_carries_out_a_suggestion_decides_it_in_the_same_transaction(
    store: Store,
) -> None:
    store.create_entity("queue")
    session = store.session("queue")
    provenance = Provenance(run_id="", step="test")
    session.commit(
        Changeset(
            added_nodes=(
                Node("a", "Organization", {"name": "Acme"}),
                Node("b", "Organization", {"name": "Acme Corp"}),
            )
        ),
        provenance,
    )
    merge = session.suggest("merge", {"nodes": ["a", "b"]}, 0.8)
    change = session.suggest("contradiction", {"node": "a"}, 0.5)
    session.decide_suggestion(merge, False)  # rejected by someone else meanwhile
    version = session.version
    with pytest.raises(UsageError, match="already rejected"):
        session.merge_nodes("a", ["b"], provenance, properties={"name": "Acme"}, decides=merge)
    assert store.session("queue").version == version and session.canonical_id("b") == "b"

    renamed = Changeset(changed_nodes=(Node("a", "Organization", {"name": "Acme Inc"}),))
    new_version = session.commit(renamed, provenance, decides=change).version
    assert new_version == version + 1 and session.suggestion(change).status == "accepted"
    with pytest.raises(UsageError, match="already accepted"):
        session.commit(
            Changeset(changed_nodes=(Node("a", "Organization", {"name": "Acme SA"}),)),
            provenance,
            decides=change,
        )
    assert store.session("queue").load_graph().nodes["a"]["name"] == "Acme Inc"
