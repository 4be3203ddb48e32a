"""Evolvable types: acceptance rules, scopes, versions, seed files and the prompt catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.errors import EntityNotFoundError, UsageError
from kgot.graph_model import Changeset, Node
from kgot.graph_model.token_estimate import count_tokens
from kgot.persistence import Provenance, Store, TypeRejectedError, TypeSpec, load_type_file

COMPANY = {
    "kind": "node",
    "name": "Company",
    "description": "A business that issues securities.",
    "properties": {
        "type": "object",
        "required": ["name", "ticker"],
        "properties": {
            "name": {"type": "string"},
            "ticker": {"type": "string", "pattern": "^[A-Z.]{1,6}$"},
            "listed": {"type": "string", "format": "date-time"},
        },
        "additionalProperties": False,
    },
    "example": {"name": "Apple Inc.", "ticker": "AAPL"},
}


def rejected(store: Store, spec: dict, **kwargs) -> str:
    with pytest.raises(TypeRejectedError) as raised:
        store.create_type(spec, **kwargs)
    return str(raised.value)


def test_starter_types_make_a_fresh_entity_usable(store: Store) -> None:
    store.create_entity("alice")
    catalog = store.session("alice").type_catalog()
    assert {"Person", "Organization", "Place", "Document", "Thing"} <= set(catalog.node_types)
    assert {"related_to", "works_for", "located_in"} <= set(catalog.edge_types)
    person = catalog.node_types["Person"]
    assert person.created_by == "system" and person.scope is None and person.version == 1
    assert catalog.edge_types["works_for"].spec.source_types == ("Person",)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"name": "company"}, "node type names must be PascalCase"),
        ({"name": "Big_Company"}, "node type names must be PascalCase"),
        ({"description": "  "}, "the description is empty"),
        (
            {"properties": {"type": "object", "properties": {"ticker": {"type": "strin"}}}},
            "properties schema at $.properties.ticker.type",
        ),
        (
            {"properties": {"type": "object", "properties": {"n": {"minLength": -1}}}},
            "properties schema at $.properties.n.minLength: -1 is less than the minimum of 0",
        ),
        ({"properties": {"type": "array"}}, "at $.type: must be 'object'"),
        (
            {"properties": {"type": "object", "properties": {"t": {"format": "datetime"}}}},
            "unknown format 'datetime'",
        ),
        ({"properties": {"$ref": "https://example.com/schema.json"}}, "only local references"),
        (
            {"properties": {"type": "object", "properties": {"_score": {"type": "number"}}}},
            "'_score': names starting with '_' are reserved",
        ),
        (
            {"properties": {"type": "object", "properties": {"p": {"pattern": "(unclosed"}}}},
            "properties schema at $.properties.p.pattern",
        ),
        (
            {"example": {"name": "Apple", "ticker": "apple"}},
            "example at $.ticker: 'apple' does not match",
        ),
        (
            {"example": {"name": "Apple", "ticker": "AAPL", "listed": "yesterday"}},
            "example at $.listed: 'yesterday' is not a 'date-time' (rule: format)",
        ),
    ],
)
def test_invalid_node_types_are_rejected_with_the_path(store: Store, change, expected) -> None:
    message = rejected(store, {**COMPANY, **change})
    assert expected in message
    assert "\n" not in message
    assert "Company" not in store.type_catalog().node_types


def test_edge_type_rules(store: Store) -> None:
    store.create_type(COMPANY)
    assert "edge type names must be snake_case" in rejected(
        store, {"name": "IssuedBy", "kind": "edge", "description": "x"}
    )
    assert "source node type 'Fund' does not exist" in rejected(
        store,
        {
            "kind": "edge",
            "name": "holds",
            "description": "holding",
            "source": "Fund",
            "target": "Company",
        },
    )
    assert "only edge types take" in rejected(
        store, {"kind": "node", "name": "Fund", "description": "a fund", "target": "Company"}
    )
    holds = store.create_type(
        {
            "kind": "edge",
            "name": "holds",
            "description": "A holder owns shares of a company.",
            "source": ["Person", "Organization"],
            "target": "Company",
            "properties": {"type": "object", "properties": {"shares": {"type": "integer"}}},
        }
    )
    assert holds.kind == "edge" and holds.spec.target_types == ("Company",)


@pytest.mark.slow
def test_names_must_be_new_in_the_visible_scope(store: Store) -> None:
    store.create_entity("alice")
    store.create_type(COMPANY)
    assert "the name is not new: node type 'Company' exists globally" in rejected(store, COMPANY)
    assert "the name is not new" in rejected(store, COMPANY, entity="alice")
    assert "the name is not new" in rejected(store, {**COMPANY, "name": "Person"})


@pytest.mark.slow
def test_entity_types_are_private_and_shadow_global_ones(store: Store) -> None:
    store.create_entity("alice")
    store.create_entity("bob")
    store.create_type(COMPANY, entity="alice")
    assert "Company" in store.session("alice").type_catalog().node_types
    assert "Company" not in store.session("bob").type_catalog().node_types
    assert "Company" not in store.type_catalog().node_types
    # A global type added later does not replace alice's own definition for alice.
    store.create_type(
        {
            **COMPANY,
            "description": "global company",
            "properties": {"type": "object"},
            "example": None,
        }
    )
    assert store.session("alice").type_catalog().node_types["Company"].scope == "alice"
    assert store.session("bob").type_catalog().node_types["Company"].scope is None


def test_writes_are_validated_against_the_entity_types(store: Store) -> None:
    store.create_entity("alice")
    store.create_type(COMPANY, entity="alice")
    session = store.session("alice")
    problems = session.check(
        Changeset(
            added_nodes=(
                Node("aapl", "Company", {"name": "Apple", "ticker": "aapl", "ceo": "Tim"}),
            )
        )
    )
    assert any("at $.ticker: 'aapl' does not match" in p and "rule: pattern" in p for p in problems)
    assert any(
        "at $: Additional properties are not allowed ('ceo' was unexpected) "
        "(rule: additionalProperties)" in p
        for p in problems
    )
    version = session.commit(
        Changeset(added_nodes=(Node("aapl", "Company", {"name": "Apple", "ticker": "AAPL"}),)),
        Provenance(run_id="r", step="update_graph"),
    ).version
    assert session.load_graph(include_meta=True).nodes["aapl"]["_type_version"] == 1
    assert version == 1


@pytest.mark.slow
def test_type_changes_are_versioned(store: Store) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    session.create_type(COMPANY, created_by="user")
    loose = {**COMPANY, "properties": {"type": "object", "required": ["name"]}, "example": None}
    updated = store.update_type(loose, entity="alice", justification="tickers are optional")
    assert updated.version == 2
    assert session.type_catalog().node_types["Company"].version == 2
    session.commit(
        Changeset(added_nodes=(Node("acme", "Company", {"name": "Acme"}),)),
        Provenance(run_id="r", step="s"),
    )
    with pytest.raises(TypeRejectedError, match="1 current node of entity 'alice' uses it"):
        store.remove_type("Company", entity="alice")
    session.commit(Changeset(removed_nodes=("acme",)), Provenance(run_id="r", step="s"))
    assert store.remove_type("Company", entity="alice") == 2
    assert "Company" not in session.type_catalog().node_types
    again = session.create_type(COMPANY, created_by="user")
    assert again.version == 3  # numbering continues after a removal
    history = store.type_history("Company", entity="alice")
    assert [(t.version, reason) for t, _, reason in history] == [
        (1, "updated"),
        (2, "removed"),
        (3, None),
    ]
    with pytest.raises(TypeRejectedError, match="no current node type 'Person' in entity"):
        store.update_type({"kind": "node", "name": "Person", "description": "x"}, entity="alice")


def test_a_node_type_used_by_an_edge_type_cannot_be_removed(store: Store) -> None:
    with pytest.raises(
        TypeRejectedError, match="edge types created, owns, works_for connect Person"
    ):
        store.remove_type("Person")


def test_agent_types_need_a_justification_and_are_recorded(store: Store) -> None:
    store.create_entity("alice")
    session = store.session("alice")
    with pytest.raises(TypeRejectedError, match="a justification is required"):
        session.create_type(COMPANY, created_by="agent")
    created = session.create_type(
        COMPANY, created_by="agent", justification="tickers matter here", run_id="run-7"
    )
    assert (created.created_by, created.scope, created.run_id) == ("agent", "alice", "run-7")


def test_type_files_in_yaml_and_json_are_added_all_or_nothing(store: Store, tmp_path) -> None:
    store.create_entity("alice")
    yaml_file = tmp_path / "advisor.yaml"
    yaml_file.write_text(
        "node_types:\n"
        "  - name: Portfolio\n"
        "    description: A client's set of holdings.\n"
        "    properties: {type: object, required: [name], properties: {name: {type: string}}}\n"
        "edge_types:\n"
        "  - name: holds_in\n"
        "    description: A portfolio position.\n"
        "    source: Portfolio\n"
        "    target: Organization\n",
        encoding="utf-8",
    )
    added = store.load_types(yaml_file, entity="alice")
    assert [t.name for t in added] == ["Portfolio", "holds_in"]
    assert all(t.created_by == "user" for t in added)
    json_file = tmp_path / "bad.json"
    json_file.write_text(
        json.dumps(
            [
                {"kind": "node", "name": "Advisor", "description": "A financial advisor."},
                {"kind": "edge", "name": "advises", "description": "", "source": "Advisor"},
            ]
        ),
        encoding="utf-8",
    )
    with pytest.raises(TypeRejectedError, match="'advises' rejected: the description is empty"):
        store.load_types(json_file, entity="alice")
    assert "Advisor" not in store.session("alice").type_catalog().node_types  # nothing stored
    with pytest.raises(EntityNotFoundError):
        store.load_types(yaml_file, entity="nobody")


def test_malformed_type_files_name_the_problem(tmp_path: Path) -> None:
    broken = tmp_path / "types.json"
    broken.write_text('{"name": "A", "description": }', encoding="utf-8")
    with pytest.raises(UsageError, match=r"types.json is not valid JSON: .* line 1, column 30"):
        load_type_file(broken)
    yaml_file = tmp_path / "types.yaml"
    yaml_file.write_text("node_types: [\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"types.yaml is not valid YAML"):
        load_type_file(yaml_file)
    odd = tmp_path / "odd.yaml"
    odd.write_text("node_types:\n  - name: A\n    descripton: typo\n", encoding="utf-8")
    with pytest.raises(TypeRejectedError, match=r"unknown field 'descripton'"):
        load_type_file(odd)
    with pytest.raises(UsageError, match="does not exist"):
        load_type_file(tmp_path / "missing.yaml")


def test_catalog_renders_within_the_token_budget(store: Store) -> None:
    store.create_entity("alice")
    store.create_type(COMPANY, entity="alice")
    catalog = store.session("alice").type_catalog()
    full = catalog.render_for_prompt(10_000)
    assert "- Company: A business that issues securities." in full
    assert "required: name (string), ticker (string, pattern ^[A-Z.]{1,6}$)" in full
    assert "optional: listed (date-time)" in full
    assert 'example: {"name": "Apple Inc.", "ticker": "AAPL"}' in full
    assert "- works_for (Person -> Organization)" in full
    previous = count_tokens(full) + 1
    for budget in (400, 200, 60, 20):
        text = catalog.render_for_prompt(budget)
        assert count_tokens(text) <= budget
        assert count_tokens(text) < previous
        previous = count_tokens(text)
    assert "more types not shown" in catalog.render_for_prompt(20)
    focused = catalog.render_for_prompt(60, focus={"Company"})
    assert "Company" in focused


def test_type_spec_round_trips_through_dicts() -> None:
    spec = TypeSpec.from_mapping(
        {"kind": "edge", "name": "holds", "description": "d", "source": "A", "target": ["B", "C"]}
    )
    with pytest.raises(TypeRejectedError, match="`kind` is missing"):
        TypeSpec.from_mapping({"name": "holds", "description": "d"})
    assert spec.kind == "edge" and spec.source_types == ("A",)
    assert TypeSpec.from_mapping(spec.to_dict()) == spec


@pytest.mark.slow
def test_a_session_and_the_store_write_an_entitys_types_alike(store: Store) -> None:
    """One implementation: the same defaults and provenance whichever facade is used, and an
    entity deleted under a session is named, not written to."""
    store.create_entity("alice")
    session = store.session("alice")
    by_session = session.create_type(COMPANY)  # a user's type by default, as on the store
    assert (by_session.created_by, by_session.scope) == ("user", "alice")
    loose = {**COMPANY, "example": None}
    updated = store.update_type(loose, entity="alice", run_id="run-8")
    assert (updated.version, updated.run_id, updated.scope) == (2, "run-8", "alice")
    assert session.type_catalog().node_types["Company"].run_id == "run-8"
    assert store.type_catalog("alice").node_types["Company"] == updated
    store.delete_entity("alice")
    with pytest.raises(EntityNotFoundError, match="entity 'alice' no longer exists"):
        session.create_type({"kind": "node", "name": "Fund", "description": "A fund."})
    with pytest.raises(EntityNotFoundError, match="entity 'alice' no longer exists"):
        session.type_catalog()
