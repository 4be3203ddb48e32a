"""The search index in the store (issue 30): searches read only the facts holding the query's
words, rank them exactly as a whole-graph index would, follow every writer and never see
another entity's rows (SQLite and PostgreSQL)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory, search_index
from kgot.memory import search as search_module
from kgot.memory.hit_facts import explain
from kgot.memory.names import fold_text
from kgot.memory.search import SearchIndex, query_words
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.memory.conftest import UPKEEP_TYPES

NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)
# Common words (held by many facts, like "group" or "holdings") and rare ones, so IDF,
# prefixes, typos and crowded candidate lists all matter.
COMMON = ["group", "holdings", "capital", "north", "global"]
RARE = [
    f"{a}{b}"
    for a in ("vel", "mar", "tor", "sil", "bran", "kest")
    for b in ("ano", "ix", "ora", "un")
]
QUERIES = [
    "group",
    "holdings capital",
    "velano",
    "vel",
    "marix group",
    "kestora holdings north",
    "torun",
    "silanoo",  # a typo: matched by spelling
    "brannix",  # a typo
    "global headquartered",
    "headquartered_in",
    "retail",
    "zzzz",
]


def _provenance() -> Provenance:
    return Provenance(run_id="test", step="test", source_ref="file:population")


def _population(store: Store, entity: str, seed: int) -> None:
    """~300 companies and ~300 edges written in several commits, then renamed, re-described
    and removed in part, so the index is built once and caught up several times."""
    rng = random.Random(seed)
    store.create_entity(entity, types=UPKEEP_TYPES)
    session = store.session(entity)
    memory = open_memory(store, entity)
    ids = [f"c{i}" for i in range(300)]
    for start in range(0, len(ids), 100):
        nodes = []
        for node_id in ids[start : start + 100]:
            words = [rng.choice(RARE), *rng.sample(COMMON, rng.randint(0, 2))]
            props: dict[str, Any] = {"name": " ".join(words).title()}
            if rng.random() < 0.3:
                props["sector"] = rng.choice(["retail", "retail banking", "mining"])
            props["_confidence"] = rng.choice([0.5, 0.7, 0.9, 1.0])
            nodes.append(Node(node_id, "Company", props))
        session.commit(Changeset(added_nodes=tuple(nodes)), _provenance())
        if start == 100:
            memory.search("group", now=NOW)  # the index is built here, then caught up
    edges = {(rng.choice(ids), rng.choice(ids)) for _ in range(300)}
    session.commit(
        Changeset(
            added_edges=tuple(
                Edge(s, t, "related_to", f"partner_{i}", {"since": rng.choice(["1999", "2020"])})
                for i, (s, t) in enumerate(sorted(edges))
                if s != t
            )
        ),
        _provenance(),
    )
    memory.search("holdings", now=NOW)
    # Renames change the words of every edge at the renamed node (their ends' names).
    renamed = tuple(
        Node(node_id, "Company", {"name": f"Velano Renamed {node_id}"})
        for node_id in rng.sample(ids, 20)
    )
    removed = tuple(rng.sample([i for i in ids if i not in {n.id for n in renamed}], 10))
    graph = session.load_graph(track=False)
    incident = {
        (s, t, k)
        for node_id in removed
        for s, t, k in [*graph.in_edges(node_id, keys=True), *graph.out_edges(node_id, keys=True)]
    }
    session.commit(
        Changeset(
            changed_nodes=renamed, removed_nodes=removed, removed_edges=tuple(sorted(incident))
        ),
        _provenance(),
    )


def _whole_graph_search(store: Store, entity: str, query: str, limit: int) -> list[Any]:
    """What search answered before the index moved into the store: every current fact loaded
    and indexed in the process."""
    session = store.session(entity)
    catalog = session.type_catalog()
    index = SearchIndex.from_graph(session.load_graph(include_meta=True, track=False), catalog)
    words = query_words(query)
    hits = index.search(
        session,
        words,
        fold_text(query),
        limit=limit,
        label=None,
        min_confidence=None,
        now=NOW,
        catalog=catalog,
    )
    return explain(index, hits, words, catalog, clock=datetime.now(UTC))


def _summary(hits: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            hit.id,
            round(hit.score, 9),
            hit.matched_properties,
            tuple(edge.id for edge in hit.edges),
            hit.edges_matched,
            hit.ends,
        )
        for hit in hits
    ]


@pytest.mark.slow
@pytest.mark.parametrize("first_read", [200, 3])
def test_the_store_index_ranks_exactly_as_a_whole_graph_index(
    store: Store, monkeypatch: pytest.MonkeyPatch, first_read: int
) -> None:
    # first_read=3: every query reads its candidates in several rounds (3, 12, 48, …) and
    # must stop only when no unread fact could enter the top ten.
    monkeypatch.setattr(search_module, "FIRST_CANDIDATES", first_read)
    _population(store, "pop", seed=7)
    memory = open_memory(store, "pop")
    compared = 0
    for query in QUERIES:
        for limit in (1, 10):
            expected = _summary(_whole_graph_search(store, "pop", query, limit))
            assert _summary(memory.search(query, limit=limit, now=NOW)) == expected, query
            compared += len(expected)
    assert compared > 80  # the queries found plenty, typos included


def test_a_search_reads_only_the_facts_holding_its_words(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_entity("acme", types=UPKEEP_TYPES)
    session = store.session("acme")
    session.commit(
        Changeset(
            added_nodes=(
                *(Node(f"n{i}", "Company", {"name": f"Filler {i}"}) for i in range(200)),
                Node("apple", "Company", {"name": "Apple Inc."}),
            )
        ),
        _provenance(),
    )
    read: list[tuple[int, int]] = []
    real = type(session).load_facts

    def counting(self: Any, node_ids: Any, edge_keys: Any) -> Any:
        graph = real(self, node_ids, edge_keys)
        read.append((graph.number_of_nodes(), graph.number_of_edges()))
        return graph

    monkeypatch.setattr(type(session), "load_facts", counting)
    monkeypatch.setattr(
        type(session), "load_graph", lambda *a, **k: pytest.fail("search loaded the whole graph")
    )
    [hit] = open_memory(store, "acme").search("apple", now=NOW)
    # One read, of the only fact holding the word; explaining the hit reads nothing more.
    assert hit.id == "apple" and read == [(1, 0)]


def test_the_index_follows_renames_removals_and_other_writers(store_url: str) -> None:
    writer = open_store(store_url)
    reader = open_store(store_url)
    try:
        writer.create_entity("acme", types=UPKEEP_TYPES)
        session = writer.session("acme")
        session.commit(
            Changeset(
                added_nodes=(
                    Node("apple", "Company", {"name": "Apple Inc."}),
                    Node("cupertino", "Place", {"name": "Cupertino"}),
                ),
                added_edges=(Edge("apple", "cupertino", "headquartered_in"),),
            ),
            _provenance(),
        )
        memory = open_memory(reader, "acme")
        assert [h.id for h in memory.search("apple", now=NOW)] == [
            "apple",
            "apple -[headquartered_in]-> cupertino",
        ]
        # Another process renames the company: its edge is found by the new name only.
        session.commit(
            Changeset(changed_nodes=(Node("apple", "Company", {"name": "Pomme SA"}),)),
            _provenance(),
        )
        assert memory.search("apple", now=NOW) == []
        assert [h.id for h in memory.search("pomme", now=NOW)] == [
            "apple",
            "apple -[headquartered_in]-> cupertino",
        ]
        session.commit(
            Changeset(
                removed_nodes=("apple",),
                removed_edges=(("apple", "cupertino", "headquartered_in"),),
            ),
            _provenance(),
        )
        assert memory.search("pomme", now=NOW) == []
        # A word no fact holds any more is not a match, so a typo of a live word still finds it.
        assert [h.id for h in memory.search("cupertinno", now=NOW)] == ["cupertino"]
    finally:
        writer.close()
        reader.close()


def test_index_rows_belong_to_their_entity_and_go_with_it(store: Store) -> None:
    from kgot.memory.schema import SEARCH_STATE, SEARCH_TERMS, SEARCH_VOCABULARY

    for entity, name in (("alpha", "Secret Alpha Project"), ("beta", "Beta Project")):
        store.create_entity(entity, types=UPKEEP_TYPES)
        store.session(entity).commit(
            Changeset(added_nodes=(Node("p", "Company", {"name": name}),)), _provenance()
        )
        open_memory(store, entity).search("project", now=NOW)
    beta = store.session("beta")
    # Words another entity holds are neither hits nor matches, not even by spelling.
    assert open_memory(store, "beta").search("secret", now=NOW) == []
    assert open_memory(store, "beta").search("secrett", now=NOW) == []
    assert search_index.matching_terms(beta, "alpha", prefix_min=3) is None
    assert "secret" not in search_index.vocabulary(beta)
    assert {p.key for p in search_index.postings(beta, ["project", "secret"])} == {("node", "p")}
    alpha_id = store.session("alpha").entity_id
    store.delete_entity("alpha")
    with beta.read() as connection:
        for table in (SEARCH_TERMS, SEARCH_VOCABULARY, SEARCH_STATE):
            left = connection.execute(
                select(func.count()).select_from(table).where(table.c.entity_id == alpha_id)
            ).scalar_one()
            assert left == 0, table.name


def test_processes_catching_up_at_once_index_each_commit_once(store_url: str) -> None:
    import threading

    stores = [open_store(store_url) for _ in range(3)]
    try:
        stores[0].create_entity("acme", types=UPKEEP_TYPES)
        writer = stores[0].session("acme")
        for round_ in range(3):
            writer.commit(
                Changeset(
                    added_nodes=tuple(
                        Node(f"c{round_}_{i}", "Company", {"name": f"Widget {round_} {i}"})
                        for i in range(40)
                    )
                ),
                _provenance(),
            )
            barrier = threading.Barrier(len(stores))
            failures: list[BaseException] = []

            def catch_up(
                store: Store,
                barrier: threading.Barrier = barrier,
                failures: list[BaseException] = failures,
            ) -> None:
                try:
                    barrier.wait()
                    search_index.update_search_index(store.session("acme"))
                except BaseException as error:  # the test reports it below
                    failures.append(error)

            threads = [threading.Thread(target=catch_up, args=(s,)) for s in stores]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
        hits = open_memory(stores[1], "acme").search("widget", limit=200, now=NOW)
        assert len(hits) == 120
        postings = search_index.postings(stores[2].session("acme"), ["widget"])
        assert len(postings) == 120  # one row per fact: no commit was indexed twice
    finally:
        for store in stores:
            store.close()


def test_rare_words_point_at_the_nodes_holding_them_rarest_first(store: Store) -> None:
    store.create_entity("atlas", types=UPKEEP_TYPES)
    towns = [Node(f"town_{i}", "Place", {"name": f"Town {i}"}) for i in range(250)]
    store.session("atlas").commit(
        Changeset(
            added_nodes=(
                *towns,
                Node("paris", "Place", {"name": "Paris"}),
                Node("lyon", "Place", {"name": "Lyon", "note": "near Paris"}),
                Node("acme", "Company", {"name": "Acme"}),
            ),
            added_edges=(Edge("acme", "lyon", "headquartered_in", "hq"),),
        ),
        Provenance(run_id="t", step="t"),
    )
    session = store.session("atlas")
    find = search_module.nodes_named_by_rare_words
    # "acme" is held by the company and its edge (whose ends both count), "paris" by Paris
    # and Lyon's note: two holders each, so by the word; "town", held by 250 facts, is not
    # rare enough to point at anything.
    assert find(session, "Acme and Paris, of all towns") == ["acme", "lyon", "paris"]
    assert find(session, "the town") == []  # common words point at nothing
    assert find(session, "town", rare=300)[:2] == ["town_0", "town_1"]
    assert len(find(session, "town", rare=300, limit=7)) == 7
    assert find(session, "the of and") == []  # only stop words
    assert find(store.session("atlas"), "nowhere") == []
