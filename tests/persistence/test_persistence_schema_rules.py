"""Type schemas from users and the model can neither hang nor crash a run: RE2 patterns, no
`$ref` cycles, bounded nesting, reserved property names, a fixed list of checked formats."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from importlib import resources

import pytest

from kgot.errors import ChangesetError
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, Store, TypeRejectedError, TypeSpec, open_store
from kgot.persistence.catalog import TypeDef, parse_type_document, spec_problems
from kgot.persistence.catalog import specs_from_document as specs_from
from kgot.persistence.engine import write_transaction
from kgot.persistence.type_schema import ACCEPTED_FORMATS, missing_format_checkers
from kgot.persistence.types_store import insert_type_rows
from kgot.tools.base import ToolFailure
from kgot.tools.type_tools import build_type_tools

PROV = Provenance(run_id="r", step="test")
BACKTRACKING = {
    "type": "object",
    "properties": {"v": {"type": "string", "pattern": "^(a+)+$"}},
}


def rejected(store: Store, definition: dict, entity: str | None = None) -> str:
    with pytest.raises(TypeRejectedError) as raised:
        store.create_type(definition, entity=entity)
    return str(raised.value)


def node_type(name: str, properties: dict, **extra: object) -> dict:
    return {"kind": "node", "name": name, "description": "test type", "properties": properties}


@pytest.mark.timeout(60)
def test_a_backtracking_pattern_cannot_hang_a_run(store: Store) -> None:
    store.create_entity("mallory")
    session = store.session("mallory")
    tools = {t.name: t for t in build_type_tools(session, run_id="r")}
    started = time.perf_counter()
    with pytest.raises(ToolFailure, match=r"example at \$\.v: .* does not match"):
        asyncio.run(
            tools["create_node_type"].ainvoke(
                {
                    "name": "Evil",
                    "description": "d",
                    "justification": "j",
                    "properties": BACKTRACKING,
                    "example": {"v": "a" * 31 + "!"},  # ~2^31 steps for a backtracking engine
                }
            )
        )
    session.create_type(node_type("Evil", BACKTRACKING), justification="j")
    problems = session.check(Changeset(added_nodes=(Node("x", "Evil", {"v": "a" * 5000 + "!"}),)))
    (problem,) = problems  # the value is quoted only in part: the line stays readable
    assert problem.startswith(f"node 'x' (Evil) at $.v: '{'a' * 200}")
    assert problem.endswith("… (rule: pattern)") and len(problem) < 360
    assert time.perf_counter() - started < 10  # Python's `re` would take hours


def test_patterns_re2_cannot_run_are_refused_with_the_path(store: Store) -> None:
    message = rejected(
        store,
        node_type("Echo", {"type": "object", "properties": {"v": {"pattern": "(a)\\1"}}}),
    )
    assert "properties schema at $.properties.v.pattern: pattern '(a)\\\\1' is not supported" in (
        message
    )
    assert "RE2" in message
    message = rejected(
        store, node_type("Ahead", {"type": "object", "patternProperties": {"^(?=x)": {}}})
    )
    assert 'at $.patternProperties["^(?=x)"]' in message
    # ECMA-262 features RE2 shares work, Unicode classes included.
    store.create_type(
        node_type(
            "Ticker",
            {
                "type": "object",
                "properties": {"t": {"type": "string", "pattern": "^\\p{Lu}{1,5}$"}},
                "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
            },
        )
    )
    store.create_entity("e")
    session = store.session("e")
    assert (
        session.check(Changeset(added_nodes=(Node("a", "Ticker", {"t": "ÄBC", "x-n": 1}),))) == []
    )
    (problem,) = session.check(Changeset(added_nodes=(Node("b", "Ticker", {"x-n": "one"}),)))
    assert "at $['x-n']" in problem or "at $.x-n" in problem


def test_validation_runs_before_the_lock_so_other_entities_are_not_held_up(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slow validation (simulated: it waits for a signal) of one entity's commit and of a type
    proposal must not hold the database lock; on SQLite that lock covers every entity."""
    store = open_store(sqlite_url)
    for name in ("mallory", "alice"):
        store.create_entity(name)
    mallory = store.session("mallory")
    mallory.create_type(node_type("Slow", {"type": "object"}), justification="j")
    release, validating = threading.Event(), threading.Event()
    original = TypeDef.property_problems

    def slow(self: TypeDef, properties):
        if self.name == "Slow":
            validating.set()
            assert release.wait(30)
        return original(self, properties)

    monkeypatch.setattr(TypeDef, "property_problems", slow)
    worker = threading.Thread(
        target=mallory.commit, args=(Changeset(added_nodes=(Node("s", "Slow", {}),)), PROV)
    )
    worker.start()
    try:
        assert validating.wait(30)
        started = time.perf_counter()
        alice = store.session("alice")
        alice.commit(Changeset(added_nodes=(Node("n", "Concept", {"name": "n"}),)), PROV)
        alice.create_type(node_type("Quick", {"type": "object"}), created_by="user")
        assert time.perf_counter() - started < 5  # not queued behind mallory's validation
    finally:
        release.set()
        worker.join(30)
    assert "s" in store.session("mallory").load_graph()
    store.close()


def test_type_proposals_are_checked_before_the_lock(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.persistence import types_store

    store = open_store(sqlite_url)
    for name in ("mallory", "alice"):
        store.create_entity(name)
    release, checking = threading.Event(), threading.Event()
    original = types_store.spec_problems

    def slow(spec: TypeSpec, known=None):
        if spec.name == "Slow":
            checking.set()
            assert release.wait(30)
        return original(spec, known)

    monkeypatch.setattr(types_store, "spec_problems", slow)
    worker = threading.Thread(
        target=store.session("mallory").create_type,
        args=(node_type("Slow", {"type": "object"}),),
        kwargs={"justification": "j"},
    )
    worker.start()
    try:
        assert checking.wait(30)
        started = time.perf_counter()
        store.session("alice").commit(
            Changeset(added_nodes=(Node("n", "Concept", {"name": "n"}),)), PROV
        )
        assert time.perf_counter() - started < 5
    finally:
        release.set()
        worker.join(30)
    assert "Slow" in store.session("mallory").type_catalog().node_types
    store.close()


@pytest.mark.slow
def test_ref_cycles_and_dangling_refs_are_refused(store: Store) -> None:
    loop = {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/a"}},
        "properties": {"v": {"$ref": "#/$defs/a"}},
    }
    message = rejected(store, node_type("Loop", loop))
    assert "properties schema at $.$defs.a.$ref: a `$ref` cycle that consumes no input" in message
    assert "(#/$defs/a -> #/$defs/a)" in message
    message = rejected(store, node_type("Both", {"type": "object", "allOf": [{"$ref": "#"}]}))
    assert "at $.allOf[0].$ref: a `$ref` cycle" in message
    message = rejected(
        store, node_type("Dangling", {"type": "object", "properties": {"v": {"$ref": "#/nope"}}})
    )
    assert "$.properties.v.$ref: '#/nope' does not point to a subschema" in message
    # Recursion that descends into a property is fine: a tree of any (bounded) depth.
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
    }
    store.create_type(node_type("Tree", tree))


def test_a_stored_cycle_or_a_deep_value_is_a_violation_not_a_crash(store: Store) -> None:
    store.create_entity("e")
    # A type stored before cycles were refused (written straight into the table).
    loop = TypeSpec(
        kind="node",
        name="Loop",
        description="legacy",
        properties={"type": "object", "allOf": [{"$ref": "#"}]},
    )
    with write_transaction(store._context.engine, store.target) as connection:
        insert_type_rows(connection, [loop], entity_id=None, created_by="user")
    session = store.session("e")
    (problem,) = session.check(Changeset(added_nodes=(Node("x", "Loop", {}),)))
    assert "validation recursed without end" in problem and "rule: finite validation" in problem
    with pytest.raises(ChangesetError):
        session.commit(Changeset(added_nodes=(Node("x", "Loop", {}),)), PROV)
    deep: list = []
    for _ in range(3000):
        deep = [deep]
    (problem,) = session.check(
        Changeset(added_nodes=(Node("d", "Concept", {"name": "d", "v": deep}),))
    )
    assert problem.startswith("node 'd' (Concept) at $.v[0][0]")
    assert "nests deeper than 32 levels (rule: JSON nesting" in problem
    (problem,) = session.check(
        Changeset(added_nodes=(Node("s", "Concept", {"name": "bad \ud800 text"}),))
    )
    assert "lone surrogate" in problem
    deep_schema: dict = {"type": "object"}
    for _ in range(100):
        deep_schema = {"type": "object", "properties": {"x": deep_schema}}
    assert "nests deeper than 40 levels" in rejected(store, node_type("Deep", deep_schema))


def test_property_names_the_backends_use_are_refused(store: Store) -> None:
    store.create_entity("e")
    session = store.session("e")
    problems = session.check(
        Changeset(
            added_nodes=(
                Node("n1", "Thing", {"name": "x", "id": "other", "label": "my label"}),
                Node("n2", "Thing", {"name": "y"}),
            ),
            added_edges=(
                Edge("n1", "n2", "related_to", "related_to", {"source": "ref-A", "key": "k"}),
            ),
        )
    )
    assert sorted(p.split(" (rule")[0] for p in problems) == [
        "edge 'n1' -[related_to]-> 'n2': property 'key' is reserved for the edge itself",
        "edge 'n1' -[related_to]-> 'n2': property 'source' is reserved for the edge itself",
        "node 'n1' (Thing): property 'id' is reserved for the node itself",
        "node 'n1' (Thing): property 'label' is reserved for the node itself",
    ]
    message = rejected(store, node_type("Ided", {"type": "object", "required": ["id"]}))
    assert "declares 'id': node properties may not be named id, label" in message
    message = rejected(
        store,
        {
            "kind": "edge",
            "name": "cites",
            "description": "d",
            "properties": {"type": "object", "properties": {"target": {}}},
        },
    )
    assert "declares 'target': edge properties may not be named" in message
    # A node *may* have a `source` property: only edges reserve it.
    store.create_type(
        node_type("Quote", {"type": "object", "properties": {"source": {"type": "string"}}})
    )


def test_accepted_formats_are_fixed_and_all_checked(store: Store) -> None:
    assert missing_format_checkers() == []
    assert {"uri", "iri", "uri-template", "date-time", "duration"} <= set(ACCEPTED_FORMATS)
    seed = resources.files("kgot.persistence").joinpath("seed_types.yaml").read_text("utf-8")
    specs = specs_from(parse_type_document(seed, "seed_types.yaml"), "seed_types.yaml")
    node_names = {s.name for s in specs if s.kind == "node"}
    assert {s.name: spec_problems(s, node_names) for s in specs} == {s.name: [] for s in specs}
    store.create_entity("e")
    session = store.session("e")
    assert (
        session.check(
            Changeset(
                added_nodes=(Node("d", "Document", {"title": "t", "url": "https://x.org/a"}),)
            )
        )
        == []
    )
    (problem,) = session.check(
        Changeset(added_nodes=(Node("d", "Document", {"title": "t", "url": "not a uri"}),))
    )
    assert "at $.url: 'not a uri' is not a 'uri' (rule: format)" in problem
    store.create_type(
        node_type(
            "Link",
            {"type": "object", "properties": {"href": {"type": "string", "format": "iri"}}},
        ),
        entity="e",
    )
    assert "unknown format 'color'" in rejected(
        store, node_type("Tint", {"type": "object", "properties": {"c": {"format": "color"}}})
    )


@pytest.mark.slow
def test_jsonschema_loads_only_when_a_type_schema_is_checked() -> None:
    """Importing jsonschema costs over a second (its IRI checker builds parsers on import), so
    the controller and the store import without it; the first check loads it."""
    program = (
        "import sys\n"
        "import kgot.controller, kgot.persistence\n"
        "print('jsonschema' in sys.modules)\n"
        "from kgot.persistence.type_schema import schema_problems\n"
        "print(schema_problems({'type': 'object', 'properties': {'x': {'type': 7}}}))\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    before, problems, after = done.stdout.splitlines()
    assert before == "False"
    assert "properties schema at $.properties.x.type" in problems
    assert after == "True"
