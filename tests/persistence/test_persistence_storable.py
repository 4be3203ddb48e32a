"""Text no database could store (a NUL, a lone surrogate) is stored with U+FFFD in its place,
on SQLite and PostgreSQL alike: facts, their provenance, JSON columns and plain text columns."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, Store
from kgot.persistence.schema import TABLES
from kgot.persistence.storable import dumps, storable, storable_text

BAD = "a\x00b\ud800c\udfffd"
CLEAN = "a\ufffdb\ufffdc\ufffdd"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("plain", "plain"),
        ("", ""),
        ("nul\x00", "nul\ufffd"),
        ("caf\u00e9 \ud83d", "caf\u00e9 \ufffd"),
        ("pair \U0001f600 kept", "pair \U0001f600 kept"),
        (BAD, CLEAN),
    ],
)
def test_storable_text_replaces_only_what_cannot_be_stored(given: str, expected: str) -> None:
    assert storable_text(given) == expected


def test_storable_cleans_keys_and_nested_values_and_keeps_other_types() -> None:
    value = {"k\x00": [BAD, 1, 2.5, None, True, ("t\ud800",)], "n": {"x": BAD}}
    assert storable(value) == {
        "k\ufffd": [CLEAN, 1, 2.5, None, True, ("t\ufffd",)],
        "n": {"x": CLEAN},
    }


def test_dumps_leaves_clean_json_as_json_dumps_writes_it() -> None:
    import json

    value = {"text": "a \\u0000 literal backslash-u stays", "n": [1, 2]}
    assert dumps(value) == json.dumps(value)
    assert json.loads(dumps({"x": BAD})) == {"x": CLEAN}


@pytest.mark.slow
def test_facts_refuse_it_by_rule_and_provenance_stores_it_cleaned(store: Store) -> None:
    """In a fact, a NUL or a lone surrogate is refused by the changeset's own check, naming
    the rule (the model is told and fixes its code); in the fact's provenance (a source URL,
    a run id) and an entity's description it is replaced like any other text."""
    from kgot.errors import ChangesetError

    store.create_entity("acme", description=f"desc {BAD}")
    session = store.session("acme")
    provenance = Provenance(run_id=f"run {BAD}", step="update_graph", source_ref=f"https://x/{BAD}")
    with pytest.raises(ChangesetError, match="no NUL in text"):
        session.commit(
            Changeset(added_nodes=(Node("n1", "Thing", {"name": "a\x00b"}),)), provenance
        )
    with pytest.raises(ChangesetError, match="lone surrogate"):
        session.commit(
            Changeset(added_nodes=(Node("n1", "Thing", {"name": "\ud800"}),)), provenance
        )
    session.commit(
        Changeset(
            added_nodes=(
                Node("n1", "Thing", {"name": "one"}),
                Node("n2", "Thing", {"name": "two"}),
            ),
            added_edges=(Edge("n1", "n2", "related_to", "related_to"),),
        ),
        provenance,
    )
    assert store.session("acme").load_graph().nodes["n1"]["name"] == "one"
    assert store.get_entity("acme").description == f"desc {CLEAN}"
    assert store.session("acme").commits()[0]["run_id"] == f"run {CLEAN}"


def test_text_and_json_columns_take_unstorable_text(store: Store) -> None:
    """A raw insert through the store's engine (what every module's writes go through)."""
    from datetime import UTC, datetime

    from kgot.persistence.engine import write_transaction

    runs = TABLES.runs
    now = datetime.now(UTC)
    with write_transaction(store._context.engine, store.target) as connection:
        connection.execute(
            insert(runs).values(
                run_id="r-storable",
                question=f"what is {BAD}?",
                status="finished",
                options={"q": BAD},
                started_at=now,
                updated_at=now,
            )
        )
    with store.read() as connection:
        row = connection.execute(select(runs).where(runs.c.run_id == "r-storable")).one()
    assert row.question == f"what is {CLEAN}?"
    assert row.options == {"q": CLEAN}
