"""The upkeep pass against a writer that re-states facts while it runs (issue 25, item 8).

The pass reads the graph, decides what to expire and prune, then closes. A writer (an aide
ingesting, another process) that re-states a fact between that read and the close must win:
the fact and the edges hanging on it stay current, and the report lists them as left. Each
test interleaves a second store (its own connections, as another process would have) at the
point between the pass's decisions and its writes, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

import kgot.memory.upkeep as upkeep_module
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory
from kgot.memory.scoring import parse_instant
from kgot.memory.upkeep import UpkeepReport
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.memory.test_memory_upkeep import QUOTE, RUMOUR

FIRM: dict[str, Any] = {
    "kind": "node",
    "name": "Firm",
    "description": "A company (evergreen).",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}},
    },
}
ABOUT: dict[str, Any] = {
    "kind": "edge",
    "name": "about",
    "description": "What a rumour or quote is about.",
    "target": "Firm",
}
PEERS: dict[str, Any] = {
    "kind": "edge",
    "name": "peer_of",
    "description": "A passing comparison: worthless a day after it was last made.",
    "ttl_days": 1,
}
TYPES = [RUMOUR, QUOTE, FIRM, ABOUT, PEERS]
EDGES = 80  # edges hanging on the fact the pass decides to close
SOURCE = "file:one"


def _provenance(source: str = SOURCE) -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source)


def _rumour(name: str = "Acme to be bought") -> Node:
    return Node("talk", "Rumour", {"name": name, "_confidence": 0.7})


def _quote(price: float = 12.5) -> Node:
    return Node("px", "Quote", {"name": "ACME", "price": price})


def _firms() -> tuple[Node, ...]:
    return tuple(Node(f"f{i}", "Firm", {"name": f"Firm {i}"}) for i in range(EDGES))


@pytest.fixture
def seeded(store_url: str) -> Iterator[tuple[Store, datetime]]:
    """A rumour and a quote, each with :data:`EDGES` edges to firms, plus a lone rumour and a
    peer edge that have faded too; and when they were written."""
    with open_store(store_url) as store:
        store.create_entity("fund", types=TYPES)
        session = store.session("fund")
        session.commit(
            Changeset(
                added_nodes=(
                    *_firms(),
                    _rumour(),
                    _quote(),
                    Node("lone", "Rumour", {"name": "Beta to list", "_confidence": 0.7}),
                ),
                added_edges=(
                    *(Edge("talk", f"f{i}", "about") for i in range(EDGES)),
                    *(Edge("px", f"f{i}", "about") for i in range(EDGES)),
                    Edge("f0", "f1", "peer_of"),
                ),
            ),
            _provenance(),
        )
        created = parse_instant(session.load_graph(include_meta=True).nodes["talk"]["_created_at"])
        assert created is not None
        yield store, created


def _interleave(monkeypatch: pytest.MonkeyPatch, write: Callable[[], None]) -> list[int]:
    """Run ``write`` once, after the pass has read the graph and decided what to expire and
    prune, before it writes anything (promotion is decided next, on the same snapshot)."""
    original = upkeep_module._promote
    calls: list[int] = []

    def between(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            write()
        return original(*args, **kwargs)

    monkeypatch.setattr(upkeep_module, "_promote", between)
    return calls


def _writer(store_url: str, changeset: Changeset, source: str = SOURCE) -> Callable[[], None]:
    """A commit from another store (another process's connections)."""

    def write() -> None:
        with open_store(store_url) as other:
            other.session("fund").commit(changeset, _provenance(source))

    return write


def _current_edges_of(store: Store, node_id: str) -> int:
    graph = store.session("fund").load_graph()
    return graph.out_degree(node_id) + graph.in_degree(node_id) if node_id in graph else 0


def _left(report: UpkeepReport) -> set[Any]:
    return {change.key for change in report.changes if change.action == "left"}


# ---------------------------------------------------------------------------- prune


@pytest.mark.parametrize(
    ("how", "source"),
    [("reinforced", SOURCE), ("corroborated", "https://news.example/acme")],
)
def test_a_rumour_re_stated_in_place_during_the_pass_is_not_pruned(
    seeded: tuple[Store, datetime],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    source: str,
) -> None:
    """The same content written again updates the row in place (``reinforced_at``, and a new
    source ``corroborations``): the pass's weight was computed on the row before that."""
    store, created = seeded
    calls = _interleave(
        monkeypatch, _writer(store_url, Changeset(added_nodes=(_rumour(),)), source)
    )

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=130))

    assert calls == [1]
    graph = store.session("fund").load_graph(include_meta=True)
    assert "talk" in graph and _current_edges_of(store, "talk") == EDGES
    assert graph.nodes["talk"]["_reinforced_at"] is not None
    assert store.session("fund").node_history("talk")[-1]["valid_to_version"] is None
    # The rest of the pass went ahead: the other faded rumour, the quote past its time to
    # live (with its edges) and the peer edge closed.
    assert "lone" not in graph and "px" not in graph and not graph.has_edge("f0", "f1")
    assert report.pruned == 1 and report.expired == 1 + EDGES + 1
    assert _left(report) == {
        ("node", "talk"),
        *(("edge", "talk", f"f{i}", "about") for i in range(EDGES)),
    }
    assert report.left == 1 + EDGES
    lines = report.lines()
    assert f"left: {1 + EDGES} (re-stated during the pass)" in lines
    assert report.to_json()["left"] == 1 + EDGES


def test_a_rumour_changed_during_the_pass_keeps_its_new_version(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A content change closes the row the pass read and writes a new one: the pass must not
    close the new row (nor the edges, which now hang on it)."""
    store, created = seeded
    _interleave(
        monkeypatch,
        _writer(store_url, Changeset(changed_nodes=(_rumour("Acme bought by Beta"),))),
    )

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=130))

    graph = store.session("fund").load_graph()
    assert graph.nodes["talk"]["name"] == "Acme bought by Beta"
    assert _current_edges_of(store, "talk") == EDGES
    history = store.session("fund").node_history("talk")
    assert [v["closed_reason"] for v in history] == ["changed", None]
    assert ("node", "talk") in _left(report) and report.pruned == 1  # the lone rumour


def test_use_recorded_during_the_pass_saves_a_rumour_from_pruning(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retrieval someone used raises the fact's strength (no row is written): the weight the
    pass computed before it is stale too."""
    store, created = seeded

    def use() -> None:
        with open_store(store_url) as other:
            other.session("fund").feedback(("node", "talk"), good=True)

    _interleave(monkeypatch, use)

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=130))

    assert _current_edges_of(store, "talk") == EDGES
    assert ("node", "talk") in _left(report)
    assert "lone" not in store.session("fund").load_graph()


# ---------------------------------------------------------------------------- expire


@pytest.mark.slow
@pytest.mark.parametrize("change", ["reinforced", "changed"])
def test_a_quote_re_stated_during_the_pass_does_not_expire(
    seeded: tuple[Store, datetime],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    store, created = seeded
    changeset = (
        Changeset(added_nodes=(_quote(),))
        if change == "reinforced"
        else Changeset(changed_nodes=(_quote(13.0),))
    )
    _interleave(monkeypatch, _writer(store_url, changeset))

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=2))

    graph = store.session("fund").load_graph()
    assert "px" in graph and _current_edges_of(store, "px") == EDGES
    assert graph.nodes["px"]["price"] == (12.5 if change == "reinforced" else 13.0)
    assert ("node", "px") in _left(report)
    # Only the peer edge expired (the rumours have not faded yet at two days).
    assert report.expired == 1 and not graph.has_edge("f0", "f1")
    assert report.left == 1 + EDGES


@pytest.mark.slow
def test_an_edge_re_stated_during_the_pass_does_not_expire(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, created = seeded
    _interleave(
        monkeypatch, _writer(store_url, Changeset(added_edges=(Edge("f0", "f1", "peer_of"),)))
    )

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=2))

    assert store.session("fund").load_graph().has_edge("f0", "f1", "peer_of")
    assert _left(report) == {("edge", "f0", "f1", "peer_of")}
    assert report.expired == 1 + EDGES  # the quote and its edges


@pytest.mark.slow
def test_a_lapsed_fact_written_again_during_the_pass_stays(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact hidden by its own ``_expires_at`` that a writer states again gets a new row
    (the lapsed one closes as expired): the pass closes only rows still lapsed, and the edge
    on it stays with it. Another lapsed node closes with its edge as before."""
    store, _created = seeded
    session = store.session("fund")
    past = "2020-01-01T00:00:00+00:00"
    session.commit(
        Changeset(
            added_nodes=(Node("old", "Rumour", {"name": "Old talk", "_expires_at": past}),),
            changed_nodes=(Node("lone", "Rumour", {"name": "Beta to list", "_expires_at": past}),),
            added_edges=(Edge("f2", "lone", "peer_of"), Edge("f3", "old", "peer_of")),
        ),
        _provenance(),
    )
    assert {("node", "lone"), ("node", "old")} <= set(dict(session.lapsed_facts()))
    _interleave(
        monkeypatch,
        _writer(
            store_url,
            Changeset(added_nodes=(Node("lone", "Rumour", {"name": "Beta to list"}),)),
        ),
    )

    report = open_memory(store, "fund").upkeep()

    graph = store.session("fund").load_graph()
    assert "lone" in graph and graph.has_edge("f2", "lone", "peer_of")
    assert "old" not in graph and not graph.has_edge("f3", "old", "peer_of")
    assert _left(report) == {("node", "lone"), ("edge", "f2", "lone", "peer_of")}
    assert report.expired == 2
    assert [v["closed_reason"] for v in store.session("fund").node_history("lone")] == [
        "changed",
        "expired",
        None,
    ]
    assert store.session("fund").lapsed_facts() == []


# ---------------------------------------------------------------------------- plain passes


def test_without_a_writer_the_pass_still_prunes_and_expires_with_the_edges(
    seeded: tuple[Store, datetime],
) -> None:
    store, created = seeded
    memory = open_memory(store, "fund")

    expired = memory.upkeep(now=created + timedelta(days=2))
    assert expired.to_json() == {"expired": 1 + EDGES + 1, "pruned": 0, "promoted": 0, "merged": 0}
    assert expired.left == 0 and not any(line.startswith("left") for line in expired.lines())

    # Re-stated from another source before the pass (not during it): the row read then
    # carries _reinforced_at and two corroborations, and the close must match them exactly.
    store.session("fund").commit(Changeset(added_nodes=(_rumour(),)), _provenance("file:two"))
    assert store.session("fund").load_graph(include_meta=True).nodes["talk"]["_corroborations"] == 2
    pruned = memory.upkeep(now=created + timedelta(days=130))
    assert pruned.to_json() == {"expired": 0, "pruned": 2 + EDGES, "promoted": 0, "merged": 0}
    graph = store.session("fund").load_graph()
    assert not {"talk", "px", "lone"} & set(graph.nodes) and graph.number_of_edges() == 0
    session = store.session("fund")
    assert session.node_history("talk")[-1]["closed_reason"] == "pruned"
    assert session.edge_history("talk", "f7", "about")[-1]["closed_reason"] == "pruned"


@pytest.mark.slow
def test_an_edge_added_to_a_closing_node_during_the_pass_closes_with_it(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node the pass does close takes every current edge with it, including one written
    after the read (no edge may hang on a closed node); the report counts it."""
    store, created = seeded
    _interleave(
        monkeypatch,
        _writer(
            store_url,
            Changeset(
                added_nodes=(Node("fnew", "Firm", {"name": "New Firm"}),),
                added_edges=(Edge("talk", "fnew", "about"),),
            ),
        ),
    )

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=130))

    graph = store.session("fund").load_graph()
    assert "talk" not in graph and "fnew" in graph and graph.number_of_edges() == 0
    assert ("edge", "talk", "fnew", "about") in {
        c.key for c in report.changes if c.action == "pruned"
    }
    assert report.pruned == 2 + EDGES + 1 and report.left == 0


# ---------------------------------------------------------------------------- merge


def test_a_merge_of_a_node_changed_during_the_pass_is_left_and_the_pass_finishes(
    seeded: tuple[Store, datetime], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``merge_nodes`` refuses nodes changed since the read; the pass reports the merge as
    left instead of failing after its closes, and makes the other merges."""
    store, created = seeded
    store.session("fund").commit(
        Changeset(
            added_nodes=(
                Node("apple", "Firm", {"name": "Apple Inc."}),
                Node("apple_old", "Firm", {"name": "Apple, Inc."}),
                Node("beta", "Firm", {"name": "Beta Corp"}),
                Node("beta_old", "Firm", {"name": "Beta Corp."}),
            )
        ),
        _provenance(),
    )
    _interleave(
        monkeypatch,
        _writer(
            store_url,
            Changeset(changed_nodes=(Node("apple_old", "Firm", {"name": "Apple, Inc"}),)),
        ),
    )

    report = open_memory(store, "fund").upkeep(now=created + timedelta(days=2))

    graph = store.session("fund").load_graph()
    assert {"apple", "apple_old", "beta"} <= set(graph.nodes) and "beta_old" not in graph
    assert graph.nodes["apple_old"]["name"] == "Apple, Inc"
    assert report.merged == 1 and report.expired == 1 + EDGES + 1
    [left] = [c for c in report.changes if c.action == "left"]
    assert left.key == ("node", "apple_old") and "not merged into 'apple'" in left.why
