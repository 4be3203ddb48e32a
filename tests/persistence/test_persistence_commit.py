"""Committing changesets: validation, atomicity, history, metadata, conflicts, catch-up."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from kgot.errors import ChangesetError, EntityNotFoundError
from kgot.graph_model import Changeset, Edge, Node, apply_to_networkx, edges_of, nodes_of
from kgot.persistence import CommitConflictError, Provenance, Store
from kgot.persistence.graph_diff import diff_graphs

PROV = Provenance(
    run_id="run-1",
    step="update_graph",
    tool_call='search:{"q": "ada"}',
    source_ref="https://example.org/ada",
)


def seed(store: Store, name: str = "alice") -> None:
    store.create_entity(name)
    store.session(name).commit(
        Changeset(
            added_nodes=(
                Node("ada", "Person", {"name": "Ada Lovelace", "born": "1815-12-10"}),
                Node("babbage", "Person", {"name": "Charles Babbage"}),
                Node("engine", "Product", {"name": "Analytical Engine"}),
            ),
            added_edges=(
                Edge("ada", "engine", "related_to", "related_to", {"description": "wrote notes"}),
                Edge("babbage", "engine", "created", "created"),
                Edge("ada", "babbage", "related_to", "related_to", {"description": "friend"}),
                Edge("ada", "babbage", "related_to", "related_to~2", {"description": "colleague"}),
            ),
        ),
        PROV,
    )


def facts(graph: nx.MultiDiGraph) -> tuple[set, set]:
    nodes = {(n.id, n.label, tuple(sorted(n.properties.items()))) for n in nodes_of(graph)}
    edges = {
        (e.ident, e.relationship, tuple(sorted(e.properties.items()))) for e in edges_of(graph)
    }
    return nodes, edges


@pytest.mark.slow
def test_commit_then_load_returns_the_same_property_graph(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    graph = session.load_graph()
    assert session.version == 1
    assert graph.nodes["ada"] == {"label": "Person", "name": "Ada Lovelace", "born": "1815-12-10"}
    assert graph.edges["ada", "babbage", "related_to~2"] == {
        "relationship": "related_to",
        "description": "colleague",
    }
    expected = nx.MultiDiGraph()
    apply_to_networkx(
        expected, Changeset(added_nodes=tuple(nodes_of(graph)), added_edges=tuple(edges_of(graph)))
    )
    assert facts(graph) == facts(expected)
    assert graph.number_of_nodes() == 3 and graph.number_of_edges() == 4


def test_the_loaded_graph_is_a_normal_networkx_graph(store: Store) -> None:
    seed(store)
    graph = store.session("alice").load_graph()
    # Built without add_edges_from for speed: it must be indistinguishable from one that was.
    reference = nx.MultiDiGraph(kgot_version=1)
    reference.add_nodes_from(graph.nodes(data=True))
    reference.add_edges_from(graph.edges(keys=True, data=True))
    assert nx.utils.graphs_equal(graph, reference)
    assert sorted(graph.predecessors("babbage")) == ["ada"]
    assert graph.in_degree("engine") == 2 and graph.out_degree("ada") == 3
    assert sorted(k for _, _, k in graph.in_edges("babbage", keys=True)) == [
        "related_to",
        "related_to~2",
    ]
    copy = graph.copy()
    copy.remove_node("ada")
    assert copy.number_of_edges() == 1 and graph.number_of_edges() == 4
    assert nx.shortest_path(graph.to_undirected(), "engine", "babbage") == ["engine", "babbage"]


def test_changes_made_on_a_loaded_graph_round_trip_through_a_changeset(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    before = session.load_graph()
    after = before.copy()
    after.nodes["ada"]["died"] = "1852-11-27"
    after.add_node("london", label="Place", name="London")
    after.add_edge("ada", "london", key="located_in", relationship="located_in")
    after.remove_node("engine")
    changeset = diff_graphs(before, after)
    assert session.check(changeset) == []
    version = session.commit(changeset, PROV).version
    assert version == 2
    assert facts(store.session("alice").load_graph()) == facts(after)


def test_a_violation_rejects_the_whole_changeset_and_writes_nothing(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    before = session.load_graph()
    changeset = Changeset(
        added_nodes=(
            Node("zurich", "Place", {"name": "Zurich"}),  # valid
            Node("eth", "Organization", {"name": "ETH", "founded": "1855-02-30"}),  # bad date
            Node("x", "Gadget", {"name": "x"}),  # unknown type
        ),
        changed_nodes=(Node("ada", "Person", {"name": 42}),),
        added_edges=(Edge("engine", "ada", "works_for", "works_for"),),
    )
    problems = session.check(changeset)
    assert any(
        "node 'eth' (Organization) at $.founded" in p and "rule: format" in p for p in problems
    )
    assert any(
        "node 'ada' (Person) at $.name: 42 is not of type 'string' (rule: type)" in p
        for p in problems
    )
    assert any(
        "label 'Gadget' is not a known node type" in p and "propose a new node type first" in p
        for p in problems
    )
    assert any(
        "source 'engine' is labelled Product" in p and "rule: source types" in p for p in problems
    )
    with pytest.raises(ChangesetError) as raised:
        session.commit(changeset, PROV)
    assert raised.value.problems == problems
    assert not isinstance(raised.value, CommitConflictError)
    reloaded = store.session("alice")
    assert reloaded.version == 1
    assert facts(reloaded.load_graph()) == facts(before)
    assert "zurich" not in reloaded.load_graph()


def test_changes_keep_history_as_superseded_rows(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    session.load_graph()
    for died in ("1852-11-27", "1852-11-28"):
        graph = session.load_graph()
        props = {k: v for k, v in graph.nodes["ada"].items() if k != "label"}
        session.commit(
            Changeset(changed_nodes=(Node("ada", "Person", {**props, "died": died}),)),
            Provenance(run_id=f"run-{died}", step="update_graph"),
        )
    history = session.node_history("ada")
    assert [h["valid_from_version"] for h in history] == [1, 2, 3]
    assert [h["valid_to_version"] for h in history] == [2, 3, None]
    assert history[0]["superseded_by"] == history[1]["row_id"]
    assert history[1]["superseded_by"] == history[2]["row_id"]
    assert "died" not in history[0]["properties"]
    assert history[2]["run_id"] == "run-1852-11-28"
    assert history[0]["created_at"] == history[2]["created_at"]  # first version's time kept
    assert session.load_graph(as_of=1).nodes["ada"].get("died") is None
    assert session.load_graph(as_of=2).nodes["ada"]["died"] == "1852-11-27"
    assert session.load_graph().nodes["ada"]["died"] == "1852-11-28"


def test_removing_a_node_closes_its_edges_and_keeps_them_in_history(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    session.load_graph()
    # The edge list is incomplete on purpose: edges the session saw are closed with the node.
    version = session.commit(Changeset(removed_nodes=("engine",)), PROV).version
    graph = session.load_graph()
    assert "engine" not in graph
    assert not any("engine" in (s, t) for s, t in graph.edges())
    history = session.edge_history("babbage", "engine", "created")
    assert history[-1]["valid_to_version"] == version
    assert session.load_graph(as_of=1).has_edge("babbage", "engine", "created")


@pytest.mark.slow
def test_reserved_metadata_maps_to_columns(store: Store) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    session.commit(
        Changeset(
            added_nodes=(
                Node(
                    "claim",
                    "Concept",
                    {
                        "name": "x",
                        "_confidence": 0.4,
                        "_source_kind": "inferred",
                        "_source_ref": "notes.txt",
                    },
                ),
                Node("plain", "Concept", {"name": "y"}),
            )
        ),
        Provenance(run_id="r", step="update_graph", source_kind="extracted", confidence=0.9),
    )
    graph = session.load_graph()
    assert graph.nodes["claim"] == {"label": "Concept", "name": "x"}  # metadata stays out
    meta = session.load_graph(include_meta=True)
    assert meta.nodes["claim"]["_confidence"] == 0.4
    assert meta.nodes["claim"]["_source_kind"] == "inferred"
    assert meta.nodes["claim"]["_source_ref"] == "notes.txt"
    assert meta.nodes["plain"]["_confidence"] == 0.9  # the provenance default
    assert meta.nodes["plain"]["_source_kind"] == "extracted"
    assert meta.nodes["plain"]["_run_id"] == "r"
    assert meta.nodes["plain"]["_corroborations"] == 1

    # A metadata-only change writes a new version but keeps where the fact came from.
    session.commit(
        Changeset(changed_nodes=(Node("claim", "Concept", {"name": "x", "_confidence": 0.8}),)),
        Provenance(run_id="r2", step="review"),
    )
    after = session.load_graph(include_meta=True).nodes["claim"]
    assert after["_confidence"] == 0.8
    assert after["_source_ref"] == "notes.txt" and after["_run_id"] == "r"
    assert len(session.node_history("claim")) == 2

    # Read-only metadata from an export is ignored; unknown `_` names and bad values are refused.
    exported = {k: v for k, v in meta.nodes["plain"].items() if k != "label"}
    assert session.check(Changeset(changed_nodes=(Node("plain", "Concept", exported),))) == []
    problems = session.check(
        Changeset(
            added_nodes=(
                Node(
                    "bad",
                    "Concept",
                    {
                        "name": "z",
                        "_confidence": 1.5,
                        "_source_kind": "rumour",
                        "_secret": 1,
                        "_expires_at": "tomorrow",
                    },
                ),
                Node("long", "Concept", {"name": "y", "_source_ref": "page text " * 300}),
            )
        )
    )
    assert len(problems) == 5
    assert any("`_source_ref` is 3,000 characters" in p for p in problems)
    assert any("`_confidence` must be a number from 0 to 1" in p for p in problems)
    assert any("`_source_kind` must be one of" in p for p in problems)
    assert any("'_secret' uses the reserved '_' prefix" in p for p in problems)
    assert any("`_expires_at` must be an RFC 3339 date-time" in p for p in problems)


@pytest.mark.slow
def test_expired_facts_are_hidden_and_can_be_replaced(store: Store) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    session.commit(
        Changeset(
            added_nodes=(
                Node("old", "Concept", {"name": "stale", "_expires_at": "2000-01-01T00:00:00Z"}),
                Node("live", "Concept", {"name": "fresh", "_expires_at": "2999-01-01T00:00:00Z"}),
            ),
            added_edges=(Edge("live", "old", "related_to", "related_to"),),
        ),
        PROV,
    )
    graph = session.load_graph()
    assert set(graph) == {"live"} and graph.number_of_edges() == 0
    assert session.stats().nodes == 1
    assert store.get_entity("alice").nodes == 1
    # Adding the id again replaces the expired fact (history keeps both).
    session.commit(Changeset(added_nodes=(Node("old", "Concept", {"name": "renewed"}),)), PROV)
    assert session.load_graph().nodes["old"]["name"] == "renewed"
    assert [h["properties"]["name"] for h in session.node_history("old")] == ["stale", "renewed"]


@pytest.mark.slow
def test_finding_the_same_fact_again_counts_as_corroboration(store: Store) -> None:
    store.create_entity("alice")
    first, second = store.session("alice"), store.session("alice")
    first.load_graph()
    second.load_graph()
    fact = Changeset(added_nodes=(Node("ada", "Person", {"name": "Ada"}),))
    assert first.commit(fact, PROV).version == 1
    assert second.commit(fact, Provenance(run_id="run-2", step="update_graph")).version == 2
    meta = first.load_graph(include_meta=True).nodes["ada"]
    assert meta["_corroborations"] == 2
    assert len(first.node_history("ada")) == 1
    assert "1 corroborated" in first.commits()[0]["summary"]


def test_concurrent_writers_of_different_facts_both_succeed_and_catch_up(store: Store) -> None:
    seed(store)
    one, two = store.session("alice"), store.session("alice")
    graph_one, graph_two = one.load_graph(), two.load_graph()
    add_one = Changeset(added_nodes=(Node("paris", "Place", {"name": "Paris"}),))
    add_two = Changeset(
        changed_nodes=(Node("babbage", "Person", {"name": "C. Babbage"}),),
        removed_edges=(("ada", "babbage", "related_to~2"),),
    )
    assert one.commit(add_one, PROV).version == 2
    apply_to_networkx(graph_one, add_one)
    assert two.commit(add_two, PROV).version == 3
    apply_to_networkx(graph_two, add_two)
    catch_up = one.refresh()
    assert [n.id for n in catch_up.changed_nodes] == ["babbage"]
    assert catch_up.removed_edges == (("ada", "babbage", "related_to~2"),)
    assert not catch_up.added_nodes  # its own addition is not repeated
    apply_to_networkx(graph_one, catch_up)
    apply_to_networkx(graph_two, two.refresh())
    current = facts(store.session("alice").load_graph())
    assert facts(graph_one) == current == facts(graph_two)
    assert one.refresh().is_empty


def test_a_stale_change_is_a_conflict_not_a_lost_update(store: Store) -> None:
    seed(store)
    one, two = store.session("alice"), store.session("alice")
    one.load_graph()
    graph_two = two.load_graph()
    one.commit(
        Changeset(
            changed_nodes=(
                Node("ada", "Person", {"name": "Ada", "born": "1815-12-10", "died": "1852-11-27"}),
            )
        ),
        PROV,
    )
    stale = Changeset(
        changed_nodes=(Node("ada", "Person", {"name": "Augusta Ada King"}),),
        added_nodes=(Node("rome", "Place", {"name": "Rome"}),),
    )
    with pytest.raises(CommitConflictError) as raised:
        two.commit(stale, PROV)
    assert "node 'ada' (Person): another writer changed it at version 2" in str(raised.value)
    assert raised.value.version == 2
    assert "rome" not in store.session("alice").load_graph()  # nothing of it was written
    apply_to_networkx(graph_two, two.refresh())
    assert graph_two.nodes["ada"]["died"] == "1852-11-27"
    props = {k: v for k, v in graph_two.nodes["ada"].items() if k != "label"}
    redo = Changeset(changed_nodes=(Node("ada", "Person", {**props, "name": "Augusta Ada King"}),))
    two.commit(redo, PROV)
    final = store.session("alice").load_graph().nodes["ada"]
    assert final["died"] == "1852-11-27" and final["name"] == "Augusta Ada King"


def test_removing_a_node_another_writer_just_linked_is_a_conflict(store: Store) -> None:
    seed(store)
    one, two = store.session("alice"), store.session("alice")
    one.load_graph()
    two.load_graph()
    one.commit(
        Changeset(
            added_nodes=(Node("paris", "Place", {"name": "Paris"}),),
            added_edges=(Edge("engine", "paris", "located_in", "located_in"),),
        ),
        PROV,
    )
    with pytest.raises(CommitConflictError, match="another writer added it to node 'engine'"):
        two.commit(Changeset(removed_nodes=("engine",)), PROV)
    with pytest.raises(CommitConflictError, match=r"node 'paris' .*another writer added"):
        two.commit(Changeset(added_nodes=(Node("paris", "Place", {"name": "Paris, FR"}),)), PROV)


def test_relabelling_a_node_rechecks_its_existing_edges(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    session.load_graph()
    problems = session.check(
        Changeset(changed_nodes=(Node("babbage", "Organization", {"name": "Charles Babbage"}),))
    )
    assert problems == []  # `created` may start at a Person or an Organization
    problems = session.check(
        Changeset(changed_nodes=(Node("babbage", "Place", {"name": "Charles Babbage"}),))
    )
    assert any(
        "its edge 'babbage' -[created]-> 'engine' needs a source of type Person or "
        "Organization" in p
        for p in problems
    )


def test_structural_rules_on_ids_values_and_duplicates(store: Store) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    problems = session.check(
        Changeset(
            added_nodes=(
                Node("x" * 600, "Concept", {"name": "long"}),
                Node("nan", "Concept", {"name": "n", "score": math.nan}),
                Node("nul", "Concept", {"name": "a\x00b"}),
                Node("dup", "Concept", {"name": "d"}),
            ),
            removed_nodes=("dup",),
            added_edges=(Edge("nan", "ghost", "related_to", "related_to"),),
        )
    )
    text = "\n".join(problems)
    assert "at most 512" in text
    assert "node 'nan' (Concept) at $.score: is not a finite number" in text
    assert "NUL character" in text
    assert "node 'dup' is both added and removed" in text
    assert "target node 'ghost' does not exist" in text


def test_no_op_and_empty_changesets_do_not_create_versions(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    graph = session.load_graph()
    assert session.commit(Changeset(), PROV).version == 1
    same = Node("ada", "Person", {k: v for k, v in graph.nodes["ada"].items() if k != "label"})
    assert session.commit(Changeset(changed_nodes=(same,)), PROV).version == 1
    assert store.get_entity("alice").version == 1
    assert len(session.commits()) == 1


def test_stats_and_commit_log(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    stats = session.stats()
    assert stats.nodes == 3 and stats.edges == 4
    assert stats.nodes_by_label == {"Person": 2, "Product": 1}
    assert stats.edges_by_relationship == {"created": 1, "related_to": 3}
    (entry,) = session.commits()
    assert entry["version"] == 1 and entry["run_id"] == "run-1"
    assert entry["tool_call"] == 'search:{"q": "ada"}'
    assert entry["summary"] == "+3 nodes, +4 edges"


@pytest.mark.slow
def test_unknown_and_deleted_entities_say_how_to_create_them(store: Store) -> None:
    with pytest.raises(EntityNotFoundError, match=r"create it with `kgot entities create bob`"):
        store.session("bob")
    seed(store)
    session = store.session("alice")
    store.delete_entity("alice")
    with pytest.raises(EntityNotFoundError, match="no longer exists"):
        session.load_graph()
    with pytest.raises(EntityNotFoundError):
        session.commit(Changeset(added_nodes=(Node("a", "Concept", {"name": "a"}),)), PROV)
    store.create_entity("alice")  # same name, new tenant: the old session cannot write into it
    with pytest.raises(EntityNotFoundError):
        session.commit(Changeset(added_nodes=(Node("a", "Concept", {"name": "a"}),)), PROV)
    assert store.session("alice").load_graph().number_of_nodes() == 0


def test_bulk_writes_refresh_the_planner_statistics(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import text

    from kgot.persistence import context as context_module

    monkeypatch.setattr(context_module, "ANALYZE_EVERY", 5)
    seed(store)  # 7 rows: past the threshold
    with store._context.engine.connect() as connection:
        if store.target.is_sqlite:
            counted = dict(
                connection.execute(
                    text("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'kgot_nodes'")
                ).all()
            )
            current = connection.exec_driver_sql(
                "SELECT count(*) FROM kgot_nodes WHERE valid_to_version IS NULL"
            ).scalar()
            assert counted["kgot_nodes_current_uq"].split()[0] == str(current)
        else:
            analyzed = connection.execute(
                text(
                    "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'kgot_nodes' "
                    "AND schemaname = current_schema()"
                )
            ).scalar()
            assert analyzed is not None
    assert store._context.rows_since_analyze == 0


@pytest.mark.slow
def test_a_commit_says_what_it_wrote_counted_and_closed_as_data(store: Store) -> None:
    seed(store)
    session = store.session("alice")
    session.load_graph()
    again = Provenance(run_id="run-2", step="update_graph", source_ref="https://example.org/b")
    result = session.commit(
        Changeset(
            added_nodes=(
                Node("ada", "Person", {"name": "Ada Lovelace", "born": "1815-12-10"}),  # held
                Node("menabrea", "Person", {"name": "Luigi Menabrea"}),
            ),
            changed_nodes=(Node("engine", "Product", {"name": "The Analytical Engine"}),),
            added_edges=(Edge("babbage", "engine", "created", "created"),),  # held
            removed_edges=(("ada", "babbage", "related_to~2"),),
        ),
        again,
        close_reasons={("edge", "ada", "babbage", "related_to~2"): "contradicted"},
    )
    assert (result.version, result.written, result.already_committed) == (2, True, False)
    assert result.written_facts == {("node", "menabrea"), ("node", "engine")}
    assert result.wrote(("node", "menabrea")) and not result.wrote(("node", "ada"))
    assert set(result.restated) == {("node", "ada"), ("edge", "babbage", "engine", "created")}
    # A new source corroborates both restated facts; the same source again only reinforces.
    assert (result.corroborated, result.reinforced) == (2, 0)
    assert result.closed == {
        ("node", "engine"): "changed",
        ("edge", "ada", "babbage", "related_to~2"): "contradicted",
    }
    assert result.summary == session.commits(limit=1)[0]["summary"]

    repeated = session.commit(
        Changeset(added_nodes=(Node("menabrea", "Person", {"name": "Luigi Menabrea"}),)), again
    )
    assert (repeated.written_facts, repeated.restated) == (frozenset(), (("node", "menabrea"),))
    assert (repeated.corroborated, repeated.reinforced) == (0, 1)

    keyed = Provenance(run_id="run-3", step="update_graph", result_key="run-3/result 0")
    first = session.commit(Changeset(removed_nodes=("menabrea",)), keyed)
    assert first.closed == {("node", "menabrea"): "removed"} and first.written
    twice = session.commit(Changeset(removed_nodes=("ada",)), keyed)
    assert (twice.version, twice.already_committed, twice.written) == (first.version, True, False)
    assert not twice.written_facts and "ada" in session.load_graph()

    nothing = session.commit(Changeset(), PROV)
    assert (nothing.version, nothing.written, nothing.closed) == (session.version, False, {})
