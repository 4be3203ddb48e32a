"""The upkeep pass (`kgot memory upkeep`, `Memory.upkeep`) on real stores: decay and pruning
under a given `now`, reinforcement, time-to-live expiry, promotion by distinct sources, merges,
dry runs that write nothing, history kept, and no effect on another entity."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory
from kgot.memory.scoring import parse_instant
from kgot.persistence import EntitySession, Provenance, Store, open_store
from kgot.tests.memory.conftest import COMPANY

RUMOUR: dict[str, Any] = {
    "kind": "node",
    "name": "Rumour",
    "description": "Market talk: fades in weeks.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}},
    },
    "half_life_days": 21,
}
QUOTE: dict[str, Any] = {
    "kind": "node",
    "name": "Quote",
    "description": "A price quote: worthless a day after it was last confirmed.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    },
    "ttl_days": 1,
}
ABOUT: dict[str, Any] = {
    "kind": "edge",
    "name": "about",
    "description": "What a rumour or quote is about.",
    "target": "Company",
}
TYPES = [COMPANY, RUMOUR, QUOTE, ABOUT]


def _provenance(source: str = "file:one", confidence: float | None = None) -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source, confidence=confidence)


def _session(store: Store, entity: str = "fund") -> EntitySession:
    store.create_entity(entity, types=TYPES)
    session = store.session(entity)
    session.load_graph()
    return session


def _created(session: EntitySession, node_id: str) -> datetime:
    created = parse_instant(session.load_graph(include_meta=True).nodes[node_id]["_created_at"])
    assert created is not None
    return created


def _seed_decay(session: EntitySession) -> None:
    """A rumour (21-day half-life, confidence 0.7) about a weakly trusted evergreen company."""
    session.commit(
        Changeset(
            added_nodes=(
                Node("acme", "Company", {"name": "Acme", "_confidence": 0.05}),
                Node("talk", "Rumour", {"name": "Acme to be bought", "_confidence": 0.7}),
            ),
            added_edges=(Edge("talk", "acme", "about"),),
        ),
        _provenance(),
    )


def test_a_faded_fact_is_pruned_with_its_edges_and_an_evergreen_one_never(store: Store) -> None:
    session = _session(store)
    _seed_decay(session)
    start = _created(session, "talk")
    memory = open_memory(store, "fund")
    before = session.version

    # 0.7 · 0.5 ** (100 / 21) ≈ 0.026: still above 0.01.
    kept = memory.upkeep(now=start + timedelta(days=100))
    assert kept.to_json() == {"expired": 0, "pruned": 0, "promoted": 0, "merged": 0}
    assert store.session("fund").version == before

    # 0.7 · 0.5 ** (130 / 21) ≈ 0.0096: below; its edge closes with it.
    report = memory.upkeep(now=start + timedelta(days=130))
    assert report.to_json() == {"expired": 0, "pruned": 2, "promoted": 0, "merged": 0}
    assert {c.key for c in report.changes} == {("node", "talk"), ("edge", "talk", "acme", "about")}
    graph = store.session("fund").load_graph()
    assert set(graph.nodes) == {"acme"} and graph.number_of_edges() == 0
    # The company (evergreen, confidence 0.05) is never pruned, however late.
    late = memory.upkeep(now=start + timedelta(days=100_000))
    assert late.pruned == 0 and "acme" in store.session("fund").load_graph()

    # Nothing deleted: history has the rumour closed as pruned, and the graph before the pass.
    fresh = store.session("fund")
    [version] = fresh.node_history("talk")
    assert version["closed_reason"] == "pruned" and version["valid_to_version"] == before + 1
    assert fresh.edge_history("talk", "acme", "about")[-1]["closed_reason"] == "pruned"
    assert fresh.load_graph(as_of=before).has_edge("talk", "acme")
    [closing] = [c for c in fresh.commits() if c["version"] == before + 1]
    assert closing["step"] == "memory:upkeep"


@pytest.mark.slow
def test_use_and_good_feedback_delay_pruning(store: Store) -> None:
    session = _session(store)
    session.commit(
        Changeset(
            added_nodes=tuple(
                Node(node_id, "Rumour", {"name": node_id, "_confidence": 0.7})
                for node_id in ("ignored", "used", "liked")
            )
        ),
        _provenance(),
    )
    session.record_use([("node", "used")])
    session.feedback(("node", "liked"), good=True)
    start = _created(session, "ignored")
    memory = open_memory(store, "fund")

    report = memory.upkeep(now=start + timedelta(days=130))
    assert [c.key for c in report.changes] == [("node", "ignored")]
    # Strength 0.2 keeps 0.7 · 0.2 = 0.14 of weight however old the rumour gets; one use
    # (strength 0.1) keeps 0.07.
    assert memory.upkeep(now=start + timedelta(days=3650)).pruned == 0
    assert set(store.session("fund").load_graph().nodes) == {"used", "liked"}


def test_a_fact_past_its_time_to_live_or_its_expiry_is_closed_as_expired(store: Store) -> None:
    session = _session(store)
    soon = (datetime.now().astimezone() + timedelta(days=10)).isoformat()
    session.commit(
        Changeset(
            added_nodes=(
                Node("acme", "Company", {"name": "Acme"}),
                Node("acme_px", "Quote", {"name": "ACME", "price": 12.5}),
                Node("deal", "Company", {"name": "Deal Co", "_expires_at": soon}),
            ),
            added_edges=(Edge("acme_px", "acme", "about"),),
        ),
        _provenance(),
    )
    start = _created(session, "acme_px")
    memory = open_memory(store, "fund")
    before = session.version

    assert memory.upkeep(now=start + timedelta(hours=23)).expired == 0
    assert store.session("fund").version == before

    report = memory.upkeep(now=start + timedelta(days=2))
    assert report.to_json() == {"expired": 2, "pruned": 0, "promoted": 0, "merged": 0}
    assert "time to live 1 d" in report.changes[0].why
    history = store.session("fund").node_history("acme_px")
    assert [v["closed_reason"] for v in history] == ["expired"]

    # A fact whose own _expires_at lies before `now` is closed too.
    report = memory.upkeep(now=start + timedelta(days=11))
    assert [(c.action, c.key) for c in report.changes] == [("expired", ("node", "deal"))]
    assert store.session("fund").node_history("deal")[-1]["closed_reason"] == "expired"
    assert set(store.session("fund").load_graph().nodes) == {"acme"}


def test_three_distinct_sources_promote_a_fact_three_commits_of_one_source_do_not(
    store: Store,
) -> None:
    session = _session(store)
    acme = Node("acme", "Company", {"name": "Acme", "sector": "tools"})
    beta = Node("beta", "Company", {"name": "Beta"})
    edge = Edge("acme", "beta", "related_to")
    for source in ("file:one", "https://news.example/a", "https://wiki.example/acme"):
        session.commit(Changeset(added_nodes=(acme,)), _provenance(source, confidence=0.6))
    for run in ("run-1", "run-2", "run-3"):  # one source, read in three runs
        session.commit(
            Changeset(added_nodes=(beta,)),
            Provenance(run_id=run, step="test", source_ref="file:one", confidence=0.6),
        )
    for source in ("a", "b", "c"):
        session.commit(Changeset(added_edges=(edge,)), _provenance(source, confidence=0.5))
    meta = session.load_graph(include_meta=True)
    assert meta.nodes["acme"]["_corroborations"] == 3
    assert meta.nodes["beta"]["_corroborations"] == 1
    before = session.version

    report = open_memory(store, "fund").upkeep()

    assert report.to_json() == {"expired": 0, "pruned": 0, "promoted": 2, "merged": 0}
    assert {c.key for c in report.changes} == {
        ("node", "acme"),
        ("edge", "acme", "beta", "related_to"),
    }
    after = store.session("fund")
    graph = after.load_graph(include_meta=True)
    assert graph.nodes["acme"]["_confidence"] == 0.9
    assert graph.nodes["acme"]["sector"] == "tools"  # content untouched
    assert graph.nodes["acme"]["_corroborations"] == 3  # counters kept
    assert graph.nodes["acme"]["_source_ref"] == "file:one"  # provenance kept
    assert graph.edges["acme", "beta", "related_to"]["_confidence"] == 0.9
    assert graph.nodes["beta"]["_confidence"] == 0.6
    assert after.version == before + 1
    assert after.commits(limit=1)[0]["step"] == "memory:upkeep"
    assert [v["confidence"] for v in after.node_history("acme")] == [0.6, 0.9]
    # Promoted once: a second pass finds nothing to do.
    assert open_memory(store, "fund").upkeep().to_json()["promoted"] == 0


def _seed_everything(session: EntitySession) -> None:
    """One of each: a rumour to prune, a quote to expire, an edge three sources confirmed to
    promote, two spellings of one company to merge."""
    _seed_decay(session)
    session.commit(
        Changeset(
            added_nodes=(
                Node("acme_px", "Quote", {"name": "ACME", "price": 12.5}),
                Node("apple", "Company", {"name": "Apple Inc."}),
                Node("apple_old", "Company", {"name": "Apple, Inc."}),
            ),
            added_edges=(
                Edge("acme_px", "acme", "about"),
                Edge("apple", "acme", "related_to", properties={"_confidence": 0.6}),
            ),
        ),
        _provenance("file:two"),
    )
    for source in ("file:three", "file:four"):
        session.commit(
            Changeset(added_edges=(Edge("apple", "acme", "related_to"),)), _provenance(source)
        )


@pytest.mark.slow
def test_a_dry_run_reports_the_same_counts_and_writes_nothing(store: Store) -> None:
    session = _session(store)
    _seed_everything(session)
    now = _created(session, "talk") + timedelta(days=130)
    before = session.version
    commits = session.commits()
    memory = open_memory(store, "fund")

    dry = memory.upkeep(now=now, dry_run=True)

    expected = {"expired": 2, "pruned": 2, "promoted": 1, "merged": 1}
    assert dry.to_json() == expected
    assert dry.dry_run and dry.version_after == dry.version_before == before
    fresh = store.session("fund")
    assert fresh.version == before and fresh.commits() == commits
    assert {"talk", "acme_px", "apple_old"} <= set(fresh.load_graph().nodes)

    real = memory.upkeep(now=now)

    assert real.to_json() == expected
    assert [c.line() for c in real.changes] == [c.line() for c in dry.changes]
    # Expired, pruned, promoted and merged: four commits.
    assert real.version_after == before + 4 == store.session("fund").version
    graph = store.session("fund").load_graph(include_meta=True)
    assert set(graph.nodes) == {"acme", "apple"}
    assert graph.nodes["apple"]["aliases"] == ["Apple, Inc."]
    assert graph.edges["apple", "acme", "related_to"]["_confidence"] == 0.9
    assert store.session("fund").node_history("apple_old")[-1]["closed_reason"] == "merged"


@pytest.mark.slow
def test_upkeep_of_one_entity_leaves_another_alone(store: Store) -> None:
    for entity in ("fund", "other"):
        _seed_everything(_session(store, entity))
    other = store.session("other")
    before = (other.version, other.commits(), other.load_graph(include_meta=True))
    now = _created(other, "talk") + timedelta(days=130)

    report = open_memory(store, "fund").upkeep(now=now)

    assert report.to_json() == {"expired": 2, "pruned": 2, "promoted": 1, "merged": 1}
    other = store.session("other")
    graph = other.load_graph(include_meta=True)
    assert (other.version, other.commits()) == before[:2]
    assert dict(graph.nodes(data=True)) == dict(before[2].nodes(data=True))
    assert list(graph.edges(keys=True, data=True)) == list(before[2].edges(keys=True, data=True))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_json_text_and_bad_input(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(store_url) as store:
        session = _session(store)
        _seed_everything(session)
        now = (_created(session, "talk") + timedelta(days=130)).isoformat()
        before = session.version
    db = ("--db", store_url)

    for bad in ("yesterday", "2026-13-45", ""):
        code, out, err = _run(capsys, "memory", "upkeep", "-e", "fund", "--now", bad, *db)
        assert code == 2 and out == "", err
        assert err.startswith("kgot: error: --now must be an ISO 8601 date or date-time")
        assert err.count("\n") == 1, err
    code, out, err = _run(capsys, "memory", "upkeep", "--entity", "nobody", *db)
    assert code == 2 and "no entity named 'nobody'" in err and err.count("\n") == 1

    code, out, err = _run(
        capsys, "memory", "upkeep", "-e", "fund", "--now", now, "--dry-run", "--json", *db
    )
    assert code == 0, err
    assert json.loads(out) == {"expired": 2, "pruned": 2, "promoted": 1, "merged": 1}
    with open_store(store_url) as store:
        assert store.session("fund").version == before

    # Without -v: the counts; -v lists each change with its reason (tests/memory/
    # test_memory_upkeep_verbose.py covers the listing).
    code, out, err = _run(capsys, "memory", "upkeep", "-e", "fund", "--now", now, "-v", *db)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:4] == ["expired: 2", "pruned: 2", "promoted: 1", "merged: 1"]
    assert "  pruned node 'talk' (Rumour 'Acme to be bought'): weight 0.0096 < 0.01" in out
    assert "  merged node 'apple_old' (Company 'Apple, Inc.'): into 'apple'" in out
    with open_store(store_url) as store:
        assert store.session("fund").version == before + 4

    code, out, err = _run(capsys, "memory", "upkeep", "-e", "fund", "--now", now, "--json", *db)
    assert json.loads(out) == {"expired": 0, "pruned": 0, "promoted": 0, "merged": 0}


def test_facts_hidden_by_their_own_expiry_are_closed_as_expired(store: Store) -> None:
    store.create_entity("lapse")
    session = store.session("lapse")
    past = "2020-01-01T00:00:00+00:00"
    session.commit(
        Changeset(
            added_nodes=(
                Node("old", "Thing", {"name": "Old news", "_expires_at": past}),
                Node("keep", "Thing", {"name": "Kept"}),
            ),
            added_edges=(Edge("keep", "old", "related_to", "k"),),
        ),
        Provenance(run_id="", step="test"),
    )
    assert "old" not in session.load_graph()  # hidden by its expiry, yet still a current row
    assert dict(session.lapsed_facts()) == {
        ("node", "old"): "2020-01-01T00:00:00Z",
        ("edge", "keep", "old", "k"): "2020-01-01T00:00:00Z",
    }
    dry = open_memory(store, "lapse").upkeep(dry_run=True)
    assert dry.to_json()["expired"] == 2 and len(session.lapsed_facts()) == 2
    assert open_memory(store, "lapse").upkeep().to_json()["expired"] == 2
    assert session.lapsed_facts() == []
    assert session.node_history("old")[-1]["closed_reason"] == "expired"
    assert "keep" in session.load_graph()
