"""Type definitions that would mislead: another JSON Schema dialect, a name defined twice in one
batch, a file that holds no types."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.persistence import Store, TypeRejectedError, load_type_file

DRAFT_4_SCHEMA = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    # Draft 4 reads this as "a ticker needs an exchange"; Draft 2020-12 ignores the keyword,
    # so a type accepted as written would silently check nothing.
    "dependencies": {"ticker": ["exchange"]},
}


def test_a_schema_declaring_another_dialect_is_refused(store: Store) -> None:
    with pytest.raises(TypeRejectedError) as raised:
        store.create_type(
            {"kind": "node", "name": "Listing", "description": "x", "properties": DRAFT_4_SCHEMA}
        )
    message = str(raised.value)
    assert "$.$schema" in message and "draft-04" in message and "2020-12" in message
    assert "Listing" not in store.type_catalog().node_types


@pytest.mark.parametrize(
    "declared",
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    ],
)
def test_a_schema_declaring_draft_2020_12_is_accepted(store: Store, declared: str) -> None:
    schema = {"$schema": declared, "type": "object"}
    store.create_type({"kind": "node", "name": "Listing", "description": "x", "properties": schema})
    assert "Listing" in store.type_catalog().node_types


def test_properties_named_like_keywords_are_not_keywords(store: Store) -> None:
    schema = {
        "type": "object",
        "properties": {"$schema": {"type": "string"}, "$id": {"type": "string"}},
    }
    store.create_type({"kind": "node", "name": "Listing", "description": "x", "properties": schema})
    assert "Listing" in store.type_catalog().node_types


def test_a_name_defined_twice_in_one_batch_is_named_as_such(store: Store) -> None:
    twice = [
        {"kind": "node", "name": "Fund", "description": "A fund."},
        {"kind": "node", "name": "Fund", "description": "Another fund."},
    ]
    with pytest.raises(TypeRejectedError) as raised:
        store.create_types(twice)
    message = str(raised.value)
    assert "defined 2 times" in message and "exists globally" not in message
    assert "Fund" not in store.type_catalog().node_types
    with pytest.raises(TypeRejectedError, match="defined 2 times"):
        store.update_types(twice)


@pytest.mark.parametrize("text", ["[]", "{node_types: [], edge_types: []}", "node_types:\n"])
def test_a_type_file_without_types_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "types.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match="holds no type definitions"):
        load_type_file(path)


@pytest.mark.slow
def test_kgot_types_add_of_an_empty_file_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    empty = tmp_path / "types.json"
    empty.write_text("[]")
    assert main(["types", "add", str(empty)]) == 2
    assert "holds no type definitions" in capsys.readouterr().err
