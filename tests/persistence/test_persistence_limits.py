"""What a commit refuses before it can cost the store or a later step: numbers out of range,
oversized values and imports, schemas whose checking would not end, and how many problems of
one kind are reported."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import networkx as nx
import pytest

from kgot.errors import ChangesetError
from kgot.graph_backends import write_graph
from kgot.graph_model import Changeset, Node
from kgot.persistence import Provenance, Store, StoreLimits, open_store
from kgot.persistence.catalog import TypeDef
from kgot.tests.persistence.test_persistence_cli import kgot  # noqa: F401  (fixture)
from kgot.tools.base import ToolFailure
from kgot.tools.type_tools import build_type_tools

PROV = Provenance(run_id="run-1", step="update_graph")


def test_numbers_a_checkpoint_cannot_hold_are_refused_with_their_json_path(store: Store) -> None:
    # Integers of 2**64 and more were committed, then the run's checkpoint failed (exit 70).
    store.create_entity("alice")
    session = store.session("alice")
    bad = Changeset(
        added_nodes=(
            Node("wide", "Quantity", {"name": "w", "value": 2**64}),
            Node("low", "Quantity", {"name": "l", "value": -(2**63) - 1}),
            Node("huge", "Quantity", {"name": "h", "value": 10**5000}),
            Node("inf", "Quantity", {"name": "i", "values": [1.5, {"x": math.inf}]}),
        )
    )
    problems = session.check(bad)
    text = "\n".join(problems)
    assert "node 'wide' (Quantity) at $.value: is an integer of 20 digits, outside the signed " in (
        text
    )
    assert "node 'low' (Quantity) at $.value: is an integer of 19 digits" in text
    assert "node 'huge' (Quantity) at $.value: is an integer of over 3,900 digits" in text
    assert "node 'inf' (Quantity) at $.values[1].x: is not a finite number" in text
    with pytest.raises(ChangesetError):
        session.commit(bad, PROV)
    assert store.get_entity("alice").version == 0  # nothing was written
    bounds = Changeset(
        added_nodes=(
            Node("max", "Quantity", {"name": "m", "value": 2**63 - 1}),
            Node("min", "Quantity", {"name": "n", "value": -(2**63)}),
            Node("digits", "Quantity", {"name": "d", "value": 1, "unit": "1" * 40}),  # a string
        )
    )
    assert session.check(bounds) == []
    assert session.commit(bounds, PROV).version == 1
    graph = session.load_graph()
    assert graph.nodes["max"]["value"] == 2**63 - 1 and graph.nodes["min"]["value"] == -(2**63)


def test_violations_of_many_nodes_are_grouped_in_commits_and_imports(
    store: Store,
    kgot,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    # 80 nodes of an unknown type printed 9,200 characters, one violation per node.
    store.create_entity("alice")
    session = store.session("alice")
    nodes = tuple(Node(f"n{i}", "Gadget", {"name": "x"}) for i in range(80))
    nameless = tuple(Node(f"p{i}", "Person", {}) for i in range(30))
    problems = session.check(Changeset(added_nodes=nodes + nameless))
    assert problems == [
        "nodes 'n0', 'n1', 'n2' and 77 more (Gadget): label 'Gadget' is not a known node type "
        "(rule: typed nodes); use one of Concept, Document, Event, Organization, Person, "
        "Place, Product, Quantity, Thing, or propose a new node type first",
        "nodes 'p0', 'p1', 'p2' and 27 more (Person) at $: 'name' is a required property "
        "(rule: required)",
    ]
    with pytest.raises(ChangesetError) as rejected:
        session.commit(Changeset(added_nodes=nodes), PROV)
    assert rejected.value.problems == problems[:1]

    graph = nx.MultiDiGraph()
    for node in nodes:
        graph.add_node(node.id, label=node.label, name="x")
    write_graph(graph, tmp_path / "gadgets.json")
    code, out, err = kgot("graph", "import", "--entity", "alice", str(tmp_path / "gadgets.json"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and len(err) < 600
    assert "nodes 'n0', 'n1', 'n2' and 77 more (Gadget): label 'Gadget'" in err


def node_type(name: str, properties: dict) -> dict:
    return {"kind": "node", "name": name, "description": "d", "properties": properties}


@pytest.mark.slow
def test_unique_items_on_large_arrays_of_objects_is_linear(store: Store) -> None:
    # jsonschema's own check compared every pair: 5,000 objects took 26 s, twice per commit.
    store.create_entity("alice")
    session = store.session("alice")
    schema = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}
    session.create_type(node_type("Table", schema), justification="j")
    rows = [{"n": i, "cells": [i, str(i), {"x": i}]} for i in range(5_000)]
    started = time.perf_counter()
    assert session.check(Changeset(added_nodes=(Node("t", "Table", {"rows": rows}),))) == []
    # JSON Schema equality: 1 equals 1.0 and members compare in any order.
    twin = {"cells": [3.0, "3", {"x": 3}], "n": 3}
    problems = session.check(Changeset(added_nodes=(Node("t", "Table", {"rows": [*rows, twin]}),)))
    assert problems == [
        "node 't' (Table) at $.rows: items [3] and [5000] are equal; each value may occur once "
        "(rule: uniqueItems)"
    ]
    flags = [True, 1, False, 0]  # true is not 1
    assert session.check(Changeset(added_nodes=(Node("f", "Table", {"rows": flags}),))) == []
    assert time.perf_counter() - started < 5


def test_iri_formats_cost_linear_time_and_follow_rfc_3987(store: Store) -> None:
    # The IRI parser took about half a millisecond per character (20,000 characters: 10 s).
    store.create_entity("alice")
    session = store.session("alice")
    schema = {
        "type": "object",
        "properties": {
            "iri": {"type": "string", "format": "iri"},
            "ref": {"type": "string", "format": "iri-reference"},
        },
    }
    session.create_type(node_type("Page", schema), justification="j")

    def problems(**properties: str) -> list[str]:
        return session.check(Changeset(added_nodes=(Node("p", "Page", properties),)))

    started = time.perf_counter()
    assert problems(iri="https://例え.テスト/" + "ü" * 20_000, ref="../" + "ß" * 20_000) == []
    assert time.perf_counter() - started < 2
    assert problems(iri="http://[::1]:8080/é?q=\ue000#😀", ref="#frag") == []
    assert problems(iri="//no-scheme/x") == [
        "node 'p' (Page) at $.iri: '//no-scheme/x' is not a 'iri' (rule: format)"
    ]
    assert len(problems(iri="http://a/b c")) == 1  # a space is not allowed anywhere
    assert len(problems(iri="http://a/\ue000")) == 1  # private use only in the query
    assert len(problems(iri="ü:x")) == 1  # nor any non-ASCII in the scheme


def test_uri_templates_cost_linear_time_and_follow_rfc_6570(store: Store) -> None:
    # The uri_template package took 24 s on 200,000 characters (quadratic).
    store.create_entity("alice")
    session = store.session("alice")
    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "uri-template"}}}
    session.create_type(node_type("Api", schema), justification="j")

    def problems(template: str) -> list[str]:
        return session.check(Changeset(added_nodes=(Node("a", "Api", {"t": template}),)))

    started = time.perf_counter()
    assert len(problems("{" * 200_000)) == 1
    assert problems("/{a}" * 100_000) == []
    assert time.perf_counter() - started < 2
    for good in ("http://example.com/{id}", "{+path}/x{?q,page}", "{#f:3}{.a.b}{&x*}", "{%41}"):
        assert problems(good) == [], good
    for bad in ("{x", "{}", "{x,}", "{a..b}", "{var:0}", "{=x}", "a b", "%zz"):
        assert len(problems(bad)) == 1, bad


# 24 levels of `anyOf` with two equal branches: a value failing at the bottom is tried 2**24
# ways. Valid values and `{}` are quick, so such a type can be created.
EXPONENTIAL = {
    "type": "object",
    "properties": {"v": {"$ref": "#/$defs/d0"}},
    "$defs": {
        **{f"d{level}": {"anyOf": [{"$ref": f"#/$defs/d{level + 1}"}] * 2} for level in range(24)},
        "d24": {"type": "string", "minLength": 3},
    },
}


@pytest.mark.slow
def test_checking_a_changeset_stops_at_its_deadline(store_url: str) -> None:
    with open_store(store_url, limits=StoreLimits(check_seconds=0.5)) as store:
        store.create_entity("alice")
        session = store.session("alice")
        session.create_type(node_type("Slow", EXPONENTIAL), justification="j")
        fine = Changeset(added_nodes=(Node("ok", "Slow", {"v": "long enough"}),))
        assert session.check(fine) == []
        slow = Changeset(
            added_nodes=(
                Node("a", "Slow", {"v": "ok"}),
                Node("b", "Slow", {"v": "ok"}),
                Node("c", "Thing", {"name": "c"}),
            )
        )
        started = time.perf_counter()
        with pytest.raises(ChangesetError) as rejected:
            session.commit(slow, PROV)
        assert time.perf_counter() - started < 5
        assert rejected.value.problems == [
            "node 'a' (Slow): checking took more than 0.5 s (rule: check time); the schema makes "
            "too much work of it: fewer nested anyOf/oneOf/allOf branches, or smaller values; "
            "nothing after it was checked (the cap is the setting store.check_seconds)"
        ]
        assert store.get_entity("alice").version == 0


@pytest.mark.slow
def test_one_fact_whose_checking_takes_too_long_stops_the_check_early(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.persistence import validation

    monkeypatch.setattr(validation, "TYPE_CHECK_SECONDS", 0.3)  # 5 s in earnest
    store.create_entity("alice")
    session = store.session("alice")
    session.create_type(node_type("Slow", EXPONENTIAL), justification="j")
    started = time.perf_counter()
    problems = session.check(Changeset(added_nodes=(Node("a", "Slow", {"v": "ok"}),)))
    assert time.perf_counter() - started < 3  # not the 30 s the whole change may take
    assert problems == [
        "node 'a' (Slow): checking took more than 0.3 s (rule: check time); the schema makes "
        "too much work of it: fewer nested anyOf/oneOf/allOf branches, or smaller values; "
        "nothing after it was checked"
    ]


@pytest.mark.slow
def test_loading_the_schema_checkers_does_not_count_against_a_facts_deadline(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # jsonschema and its format checkers load on first use: about a second, several on a busy
    # machine. That time says nothing of the value, so it must not trip the 5 s per fact.
    from kgot.persistence import type_schema, validation

    monkeypatch.setattr(validation, "TYPE_CHECK_SECONDS", 0.3)
    monkeypatch.setattr(type_schema, "TYPE_CHECK_SECONDS", 0.3)
    store.create_entity("alice")
    session = store.session("alice")
    build = type_schema.make_validator

    def slow_first_build(schema: dict) -> object:
        time.sleep(0.5)  # a cold, busy process loading the checkers
        return build(schema)

    monkeypatch.setattr(type_schema, "make_validator", slow_first_build)
    monkeypatch.setattr("kgot.persistence.catalog.make_validator", slow_first_build)
    session.create_type(node_type("Plain", {"type": "object"}), justification="j")
    problems = store.session("alice").check(
        Changeset(added_nodes=(Node("a", "Plain", {"v": "ok"}),))
    )
    assert problems == []


@pytest.mark.slow
def test_the_model_cannot_create_a_type_whose_checking_would_not_end(store: Store) -> None:
    store.create_entity("mallory")
    tools = {t.name: t for t in build_type_tools(store.session("mallory"), run_id="r")}
    started = time.perf_counter()
    with pytest.raises(ToolFailure, match=r"example: checking took more than 5 s"):
        asyncio.run(
            tools["create_node_type"].ainvoke(
                {
                    "name": "Slow",
                    "description": "d",
                    "justification": "j",
                    "properties": EXPONENTIAL,
                    "example": {"v": "no"},
                }
            )
        )
    assert time.perf_counter() - started < 15


def test_a_commit_after_a_check_validates_each_fact_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    calls: list[str] = []
    validate = TypeDef.property_problems

    def counted(self: TypeDef, properties: dict) -> list:
        calls.append(self.name)
        return validate(self, properties)

    monkeypatch.setattr(TypeDef, "property_problems", counted)
    nodes = tuple(Node(f"p{i}", "Person", {"name": f"P{i}"}) for i in range(10))
    changeset = Changeset(added_nodes=nodes)
    assert session.check(changeset) == []
    assert len(calls) == 10
    session.commit(changeset, PROV)
    assert len(calls) == 10  # the commit reused what the check found
    # A fact changed after the check is validated again at the commit.
    changed = Node("p0", "Person", {"name": "P0"})
    later = Changeset(changed_nodes=(changed,))
    assert session.check(later) == []
    changed.properties["name"] = 42
    with pytest.raises(ChangesetError, match=r"node 'p0' \(Person\) at \$.name: 42 is not"):
        session.commit(later, PROV)


def test_a_property_value_larger_than_the_cap_is_refused(store_url: str) -> None:
    # A 50 MB property was accepted: every load, view and prompt then carried it.
    with open_store(store_url) as store:
        store.create_entity("alice")
        session = store.session("alice")
        big = Changeset(
            added_nodes=(Node("d", "Document", {"title": "d", "text": "x" * 1_100_000}),)
        )
        assert session.check(big) == [
            "node 'd' (Document) at $.text: the value is 1,100,002 bytes of JSON, more than the "
            "1,000,000 a property may hold (rule: property size; keep large content in a file "
            "and store its path or URL; the cap is the setting store.max_property_bytes)"
        ]
        with pytest.raises(ChangesetError):
            session.commit(big, PROV)
        assert store.get_entity("alice").version == 0
    with open_store(store_url, limits=StoreLimits(max_property_bytes=2_000_000)) as store:
        assert store.session("alice").check(big) == []  # the cap is a setting


def _gadget_graph(path: Path, nodes: int) -> Path:
    graph = nx.MultiDiGraph()
    for i in range(nodes):
        graph.add_node(f"n{i}", label="Thing", name=f"thing {i}")
    for i in range(1, nodes):
        graph.add_edge(f"n{i - 1}", f"n{i}", key="related_to", relationship="related_to")
    write_graph(graph, path)
    return path


@pytest.mark.slow
def test_imports_over_the_size_and_count_caps_are_refused_before_the_graph_is_built(
    kgot,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 1M-node file was imported whole (2.7 GB resident) with no cap to stop it.
    config = tmp_path / "config" / "kgot" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "[store]\nmax_import_mb = 1\nmax_import_nodes = 100\nmax_import_edges = 150\n",
        encoding="utf-8",
    )
    assert kgot("entities", "create", "alice")[0] == 0
    from kgot.graph_backends import graph_files

    def built(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the graph was built before its size was checked")

    with monkeypatch.context() as patch:  # (the fixture keeps its own patches)
        patch.setattr(graph_files, "fill_graph", built)
        for suffix in ("json", "ttl", "graphml"):
            many = _gadget_graph(tmp_path / f"many.{suffix}", 120)
            code, out, err = kgot("graph", "import", "--entity", "alice", str(many))
            assert code != 0 and out == "" and err.count("\n") == 1, suffix
            assert err == (
                f"kgot: error: {many}: 120 nodes, more than the 100 one import may hold (split the "
                "file, or raise the setting store.max_import_nodes)\n"
            )
        big = tmp_path / "big.json"
        big.write_bytes(b" " * (1024 * 1024 + 1))
        code, _, err = kgot("graph", "import", "--entity", "alice", str(big))
        assert code != 0 and err == (
            f"kgot: error: {big}: 1 MB, more than the 1 MB one import may read (split the file, or "
            "raise the setting store.max_import_mb)\n"
        )
    with open_store(store_url) as store:
        assert store.get_entity("alice").version == 0
    fits = _gadget_graph(tmp_path / "fits.json", 100)
    code, out, _ = kgot("graph", "import", "--entity", "alice", str(fits))
    assert code == 0 and "+100 nodes, +99 edges (version 1)" in out


def test_the_python_import_checks_the_counts_too(store_url: str) -> None:
    from kgot.persistence.transfer import import_graph

    graph = nx.MultiDiGraph()
    graph.add_nodes_from((f"n{i}", {"label": "Thing", "name": "x"}) for i in range(11))
    with open_store(store_url, limits=StoreLimits(max_import_nodes=10)) as store:
        store.create_entity("alice")
        with pytest.raises(ChangesetError, match=r"the graph holds 11 nodes, more than the 10"):
            import_graph(store.session("alice"), graph, PROV)
