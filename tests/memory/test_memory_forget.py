"""Issue 27: `kgot memory search` shows the facts it found (item 3), `kgot memory upkeep -v`
lists what the pass did (item 13) and `kgot memory forget` / `Memory.forget` retire a fact with
history kept (item 14), through the real `kgot` entry point on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory
from kgot.memory.scoring import parse_instant
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.memory.conftest import UPKEEP_TYPES
from kgot.tests.support.command_line import refused, run_cli

CEO: dict[str, Any] = {
    "kind": "edge",
    "name": "ceo",
    "description": "Who runs a company.",
    "source": "Company",
    "target": "Person",
    "functional": True,
}
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
TYPES = [*UPKEEP_TYPES, CEO, RUMOUR]


def _seed(store: Store, entity: str = "acme") -> None:
    """Apple with its CEO both as a property and as an edge, a look-alike company, and a
    place; entity ``other`` holds an Apple of its own and a company ``acme`` lacks."""
    store.create_entity(entity, types=TYPES)
    session = store.session(entity)
    nodes = [
        Node(
            "apple",
            "Company",
            {"name": "Apple Inc.", "symbol": "AAPL", "ceo": "Tim Cook", "_confidence": 0.9},
        ),
        Node("apple_pie", "Company", {"name": "Apple Pie Bakery"}),
        Node("tim_cook", "Person", {"name": "Tim Cook"}),
        Node("cupertino", "Place", {"name": "Cupertino"}),
    ]
    if entity == "other":
        nodes.append(Node("globex", "Company", {"name": "Globex Corporation"}))
    session.commit(
        Changeset(
            added_nodes=tuple(nodes),
            added_edges=(
                Edge("apple", "tim_cook", "ceo", properties={"_confidence": 0.7}),
                Edge("apple", "cupertino", "headquartered_in"),
            ),
        ),
        Provenance(run_id="seed", step="seed", source_ref="file:seed"),
    )


@pytest.fixture
def seeded(store_url: str) -> str:
    with open_store(store_url) as store:
        _seed(store)
        _seed(store, "other")
    return store_url


def _rows(store_url: str, entity: str) -> dict[str, Any]:
    """Everything of ``entity`` a forgetting elsewhere must leave alone."""
    with open_store(store_url) as store:
        session = store.session(entity)
        graph = session.load_graph(include_meta=True)
        return {
            "version": session.version,
            "nodes": dict(graph.nodes(data=True)),
            "edges": sorted(graph.edges(keys=True)),
        }


# --------------------------------------------------------------------------------------------
# Search shows what it found (item 3)


@pytest.mark.slow
def test_search_text_shows_the_matched_facts_in_80_columns(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "memory", "search", "-e", "acme", "apple ceo", "--db", seeded)
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    # The CEO edge, with its ends by name and its confidence.
    edge_at = lines.index(next(li for li in lines if "  edge  ceo  apple -[ceo]-> tim_cook" in li))
    assert lines[edge_at + 1] == "       Apple Inc. -[ceo]-> Tim Cook"
    # Apple itself: the property the query named, its key properties, the edge it matched.
    node_at = lines.index(next(li for li in lines if "  node  Company  apple  Apple Inc." in li))
    block = lines[node_at + 1 : node_at + 6]
    assert block[:3] == [
        "       ceo: Tim Cook",
        "       symbol: AAPL",
        "       -[ceo]-> Tim Cook (tim_cook)  confidence 0.70",
    ], block
    assert "       confidence 0.90" in block
    # The look-alike matched only by its name shows no facts of Apple's.
    pie_at = lines.index(next(li for li in lines if "  apple_pie  " in li))
    assert "Tim Cook" not in "\n".join(lines[pie_at : pie_at + 2])


@pytest.mark.slow
def test_search_json_carries_properties_and_matched_edges(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "memory", "search", "-e", "acme", "apple ceo", "--json", "--db", seeded
    )
    assert code == 0, err
    rows = {row["id"]: row for row in json.loads(out)}
    apple = rows["apple"]
    assert apple["properties"] == {"name": "Apple Inc.", "symbol": "AAPL", "ceo": "Tim Cook"}
    assert apple["matched_properties"] == ["ceo"]
    assert apple["key_properties"] == ["symbol", "ceo"]
    assert apple["edges_matched"] == 1 and apple["ends"] is None
    [edge] = apple["edges"]
    assert edge == {
        "id": "apple -[ceo]-> tim_cook",
        "relationship": "ceo",
        "direction": "out",
        "other": "tim_cook",
        "other_name": "Tim Cook",
        "confidence": 0.7,
        "properties": {},
    }
    ceo = rows["apple -[ceo]-> tim_cook"]
    assert ceo["ends"] == {
        "source": {"id": "apple", "name": "Apple Inc."},
        "target": {"id": "tim_cook", "name": "Tim Cook"},
    }
    assert ceo["edges"] == [] and ceo["properties"] == {}
    # From the other end: Tim Cook's node shows the edge through the word "apple".
    code, out, err = run_cli(
        capsys, "memory", "search", "-e", "acme", "tim cook apple", "--json", "--db", seeded
    )
    tim = {row["id"]: row for row in json.loads(out)}["tim_cook"]
    assert [(e["direction"], e["other_name"]) for e in tim["edges"]] == [("in", "Apple Inc.")]


# --------------------------------------------------------------------------------------------
# upkeep -v (item 13)


@pytest.mark.slow
def test_upkeep_verbose_lists_each_change_and_its_reason(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
        session = store.session("acme")
        session.commit(
            Changeset(
                added_nodes=(Node("talk", "Rumour", {"name": "Apple to buy a bakery"}),),
                added_edges=(Edge("talk", "apple_pie", "related_to"),),
            ),
            Provenance(run_id="t", step="t", confidence=0.3),
        )
        created = parse_instant(session.load_graph(include_meta=True).nodes["talk"]["_created_at"])
        assert created is not None
    later = ("--now", (created + timedelta(days=200)).isoformat(), "--db", store_url)

    quiet = run_cli(capsys, "memory", "upkeep", "-e", "acme", "--dry-run", *later)
    assert quiet[0] == 0, quiet[2]
    assert quiet[1].splitlines() == [
        "dry run: nothing was written",
        "expired: 0",
        "pruned: 2",
        "promoted: 0",
        "merged: 0",
        "run with -v to list the 2 changes and why",
    ]
    code, out, err = run_cli(capsys, "memory", "upkeep", "-e", "acme", "--dry-run", "-v", *later)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:5] == quiet[1].splitlines()[:5]
    listed = "\n".join(lines[5:])
    assert "  pruned node 'talk' (Rumour 'Apple to buy a bakery'): weight" in listed
    assert "half-life 21 d" in listed.replace("\n      ", " ")
    assert "  pruned edge 'talk' -[related_to]-> 'apple_pie': closed with node 'talk'" in listed
    assert all(len(line) <= 80 for line in lines), lines

    code, out, err = run_cli(capsys, "memory", "upkeep", "-e", "acme", "-v", "--json", *later)
    assert code == 0, err
    report = json.loads(out)
    assert (report["pruned"], report["expired"]) == (2, 0)
    assert [(c["action"], c["fact"], c["kind"]) for c in report["changes"]] == [
        ("pruned", "talk", "node"),
        ("pruned", "talk -[related_to]-> apple_pie", "edge"),
    ]
    assert report["changes"][0]["why"].startswith("weight ")
    # Without -v, --json keeps the counts only.
    code, out, err = run_cli(capsys, "memory", "upkeep", "-e", "acme", "--json", *later)
    assert json.loads(out) == {"expired": 0, "pruned": 0, "promoted": 0, "merged": 0}


# --------------------------------------------------------------------------------------------
# forget (item 14)


def _history_reasons(store_url: str, entity: str, node: str) -> list[str | None]:
    with open_store(store_url) as store:
        return [row["closed_reason"] for row in store.session(entity).node_history(node)]


@pytest.mark.slow
def test_cli_forgets_a_property_an_edge_and_a_node_keeping_history(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", seeded)
    other = _rows(seeded, "other")

    code, out, err = run_cli(capsys, "memory", "forget", "-e", "acme", "apple", "-p", "ceo", *db)
    assert code == 0, err
    assert out == (
        "forgot apple.ceo (was Tim Cook) in entity 'acme' at version 2; history keeps it\n"
    )
    assert _history_reasons(seeded, "acme", "apple") == ["forgotten", None]
    with open_store(seeded) as store:
        data = store.session("acme").load_graph(include_meta=True).nodes["apple"]
        # The node stays with its other properties and its trust.
        assert "ceo" not in data and data["symbol"] == "AAPL" and data["_confidence"] == 0.9
        old = store.session("acme").load_graph(as_of=1).nodes["apple"]
        assert old["ceo"] == "Tim Cook"

    edge = "apple -[ceo]-> tim_cook"
    code, out, err = run_cli(capsys, "memory", "forget", "-e", "acme", edge, "--json", *db)
    assert code == 0, err
    assert json.loads(out) == {
        "entity": "acme",
        "kind": "edge",
        "fact": edge,
        "version": 3,
        "closed": [edge],
        "closed_reason": "forgotten",
        "value": None,
    }
    code, out, err = run_cli(capsys, "memory", "search", "-e", "acme", "apple ceo", *db)
    assert code == 0 and "Tim Cook" not in out and "-[ceo]->" not in out, out

    code, out, err = run_cli(capsys, "memory", "forget", "-e", "acme", "apple", *db)
    assert code == 0, err
    assert out == (
        "forgot node apple and its 1 edge in entity 'acme' at version 4; history keeps it\n"
    )
    with open_store(seeded) as store:
        session = store.session("acme")
        graph = session.load_graph()
        assert "apple" not in graph and not graph.has_edge("apple", "cupertino")
        [hq] = session.edge_history("apple", "cupertino", "headquartered_in")
        assert (hq["closed_reason"], hq["valid_to_version"]) == ("forgotten", 4)
        assert session.commits(limit=1)[0]["step"] == "memory:forget"
    assert _history_reasons(seeded, "acme", "apple") == ["forgotten", "forgotten"]
    code, out, err = run_cli(capsys, "memory", "search", "-e", "acme", "apple", "--json", *db)
    assert all(
        not row["id"].startswith("apple ") and row["id"] != "apple" for row in json.loads(out)
    )
    # The other entity's Apple, with the same ids, is untouched.
    assert _rows(seeded, "other") == other


@pytest.mark.slow
def test_cli_refuses_what_it_cannot_forget_in_one_line(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", seeded)
    with open_store(seeded) as store:
        session = store.session("acme")
        session.load_graph()
        apple = {"name": "Apple Inc.", "symbol": "AAPL", "aliases": ["Apple Pie Bakery"]}
        session.merge_nodes(
            "apple", ["apple_pie"], Provenance(run_id="t", step="t"), properties=apple
        )
    before = _rows(seeded, "acme"), _rows(seeded, "other")
    cases = {
        ("ghost",): "entity 'acme' has no current node 'ghost'",
        ("globex",): "entity 'acme' has no current node 'globex'",  # only 'other' has it
        ("apple -[ceo]-> cupertino",): "entity 'acme' has no current edge",
        ("apple", "owns", "cupertino"): "no current edge 'apple' -owns-> 'cupertino'",
        ("apple", "cupertino"): "as three words SOURCE RELATIONSHIP TARGET; got 2 words",
        ("apple", "-p", "sector"): "node 'apple' of entity 'acme' has no property 'sector'",
        ("apple", "-p", "name"): "cannot forget apple.name",
        ("apple", "-p", "_confidence"): "not a property that can be forgotten",
        ("apple -[ceo]-> tim_cook", "-p", "since"): "a property can only be forgotten on a node",
        ("apple_pie",): "was merged into 'apple'; forget 'apple'",
    }
    for arguments, message in cases.items():
        refused(run_cli(capsys, "memory", "forget", "-e", "acme", *arguments, *db), message)
    refused(
        run_cli(capsys, "memory", "forget", "-e", "nobody", "apple", *db),
        "no entity named 'nobody'",
    )
    assert (_rows(seeded, "acme"), _rows(seeded, "other")) == before
    assert run_cli(capsys, "memory", "forget", "-e", "acme", "cupertino", *db)[0] == 0
    refused(
        run_cli(capsys, "memory", "forget", "-e", "acme", "cupertino", *db),
        "node 'cupertino' of entity 'acme' was forgotten already (version",
    )


def test_python_memory_forget(seeded: str) -> None:
    with open_store(seeded) as store:
        memory = open_memory(store, "acme")
        assert any(hit.id == "apple -[ceo]-> tim_cook" for hit in memory.search("apple ceo"))
        done = memory.forget(["apple", "ceo", "tim_cook"], by="notebook")
        assert (done.kind, done.fact, done.closed) == (
            "edge",
            "apple -[ceo]-> tim_cook",
            ("apple -[ceo]-> tim_cook",),
        )
        assert all(hit.id != done.fact for hit in memory.search("apple ceo"))
        [row] = memory.session.edge_history("apple", "tim_cook", "ceo")
        assert row["closed_reason"] == "forgotten"
        assert memory.session.commits(limit=1)[0]["run_id"] == "notebook"
        node = memory.forget("tim_cook")
        assert node.line() == (
            "forgot node tim_cook in entity 'acme' at version 3; history keeps it"
        )
        # A node whose id looks like an edge id is still the node.
        memory.session.commit(
            Changeset(added_nodes=(Node("x -[y]-> z", "Place", {"name": "Odd"}),)),
            Provenance(run_id="t", step="t"),
        )
        assert memory.forget("x -[y]-> z").kind == "node"
        # The other entity still holds what acme forgot.
        other = open_memory(store, "other").session.load_graph()
        assert other.has_edge("apple", "tim_cook", "ceo") and "tim_cook" in other
