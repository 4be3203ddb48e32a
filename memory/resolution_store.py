"""Write-time resolution on large types, from blocks kept in the store (issue 30, item 3).

A new node is weighed against the nodes of its type that share a block with it
(:mod:`kgot.memory.resolution`: names, initials, prefixes, words, identity values, field
values). A write used to read the whole type to build those blocks: at a million nodes a note
written read a quarter of a million notes, about 9 s. A type of at least
:data:`PROBE_MIN_NODES` current nodes is now probed instead:

* ``kgot_resolution_keys`` holds, per type, each node's block keys
  (:func:`~kgot.memory.resolution.name_keys`, :func:`~kgot.memory.resolution.identity_key`,
  :func:`~kgot.memory.resolution.field_key`);
* a write first counts the blocks its new node's lookups consult (one statement), then finds
  the nodes those lookups would reach, as the counts decide (a three-letter prefix held by
  over 300 names gives way to the six-letter one, a word held by over 2,000 is not walked, as
  in the index). Blocks a lookup takes whole (a name, an initials form, a field value) are
  read by key. A prefix block is compared by spelling: its keys end in their names' sorted
  keys, so one index range gives its spellings, and only the members spelled like the new
  name are kept. The names made of some of the new
  name's words are found by their word sets (one key per subset of its words), not by reading
  every holder of each word. Then it reads those nodes' facts and builds an index of only
  them, which answers block sizes from the counts.
  :func:`~kgot.memory.resolution.match_existing` on it decides as it would on the whole type;
* the type's field model is fitted once on the whole type and stored with the keys
  (``kgot_resolution_types``), and fitted again when the type has grown by
  :data:`REFIT_GROWTH` since. Its exact-value frequencies keep the values more common than the
  rarest (:meth:`FieldModel.to_json`), so weights are those of the fit.

Kept up to date by catching up, as the search index is: before a write reads a type's keys,
the nodes changed since the version the keys show are keyed again, in one transaction with the
entity locked. The first large write of a type keys it all (a type-wide read, once).

Where a probe differs from reading the whole type: a block of over :data:`HOLDER_CAP` nodes
that a rule walks whole (an exact name, a six-letter prefix) is read up to that many nodes, in
id order (a prefix block in the order of its spellings); the 300 names of one initials form
that a name with initials is compared with are the first 300 by id, not by age; the sizes of
word blocks count nodes, not names (a node with two names in one block counts once); and the
field model is the one fitted last, not one fitted on the type as it is now. Organisation
types are always read whole: the tickers their names include are claimed across nodes and
edges (:mod:`kgot.memory.tickers`), which no per-node key shows.

Every statement is scoped by the session's entity id.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rapidfuzz import fuzz, process
from sqlalchemy import Connection, delete, func, literal, select

from kgot.graph_model import Node
from kgot.memory.field_evidence import FieldModel
from kgot.memory.names import NormalName, is_organisation_type
from kgot.memory.resolution import (
    BLOCKING_KINDS,
    ResolutionIndex,
    TypeFields,
    TypeHints,
    TypeIndex,
    block_form,
    block_keys,
    field_key,
    fields_of,
    has_initial,
    identity_key,
    initials_form,
    model_of,
    name_keys,
    word_set_key,
)
from kgot.memory.search_index import changed_node_ids
from kgot.persistence import TABLES, utc_now

if TYPE_CHECKING:
    from kgot.memory.writes import TypeUpkeep
    from kgot.persistence import EntitySession

__all__ = [
    "HOLDER_CAP",
    "PROBE_MIN_NODES",
    "REFIT_GROWTH",
    "Probe",
    "StoredType",
    "TypeSettings",
    "large_type",
    "probe",
    "ready_type",
    "update_resolution_keys",
]

PROBE_MIN_NODES = 5_000  # a type with fewer current nodes is read whole, as before
HOLDER_CAP = 2_000  # nodes read from one block at most
REFIT_GROWTH = 0.25  # the field model is fitted again when the type grew by this share
WALKED_WORD_LIMIT = 2_000  # resolution._contained_rows walks no word held by more names
# A name of at most this many distinct words finds the names made of some of its words by
# their word sets (2**n - 2 keys); a longer one reads the holders of its words.
SUBSET_WORDS = 8
KEY_FORMAT = 3  # bump when the keys' making changes: every type's keys are made again
MAX_KEY_CHARS = 200  # longer keys end in a hash of the rest
_CHUNK = 500
_INSERT_BATCH = 5_000
_BUILD_BATCH = 50_000  # key rows per transaction of a type's first keying

_nodes = TABLES.nodes
_entities = TABLES.entities


@dataclass(frozen=True)
class TypeSettings:
    """What a type's keys and decisions depend on: its identity properties, declared
    properties and resolution hints (from the type catalog)."""

    label: str
    identity: tuple[str, ...]
    schema: Mapping[str, Any]
    hints: TypeHints

    @classmethod
    def of(cls, types: TypeUpkeep, label: str) -> TypeSettings:
        """The settings of ``label`` in the entity's catalog (through its upkeep view)."""
        return cls(
            label,
            types.identity(label),
            types.schemas_by_type([label]).get(label) or {},
            types.hints_by_type([label]).get(label) or TypeHints(),
        )

    def fingerprint(self) -> str:
        text = json.dumps(
            {
                "format": KEY_FORMAT,
                "organisation": is_organisation_type(self.label),
                "identity": list(self.identity),
                "schema": self.schema,
                "compare": dict(self.hints.compare),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def empty_index(self) -> ResolutionIndex:
        return ResolutionIndex(
            {self.label: self.identity},
            schemas_by_type={self.label: self.schema},
            hints_by_type={self.label: self.hints},
        )


@dataclass(frozen=True)
class StoredType:
    """A type's keys as they stand after :func:`ready_type`: the entity version they show,
    and the field model (None: the type's nodes hold no comparable field besides names)."""

    settings: TypeSettings
    version: int
    model: FieldModel | None

    def index_of(self, nodes: Iterable[Node], sizes: Mapping[str, int] | None) -> ResolutionIndex:
        """An index of only ``nodes`` under the stored model, answering block sizes from
        ``sizes`` (when given)."""
        whole = self.settings.empty_index()
        index = whole.for_type(self.settings.label)
        index.sizes = sizes
        if self.model is None:
            index.fields_absent = True
        else:
            index.fields = TypeFields(
                dict(self.model.kinds),
                index.thresholds.field_block,
                index.identity_props,
                model=self.model,
                sizes=sizes,
            )
        for node in nodes:
            index.add(node)
        return whole


def large_type(session: EntitySession, label: str) -> bool:
    """Whether writes of ``label`` probe the store (:data:`PROBE_MIN_NODES` current nodes or
    more; never an organisation type)."""
    if is_organisation_type(label):
        return False
    first = (
        select(literal(1))
        .where(
            _nodes.c.entity_id == session.entity_id,
            _nodes.c.label == label,
            _nodes.c.valid_to_version.is_(None),
        )
        .limit(PROBE_MIN_NODES)
        .subquery()
    )
    with session.read() as connection:
        held = connection.execute(select(func.count()).select_from(first)).scalar_one()
    return int(held) >= PROBE_MIN_NODES


def update_resolution_keys(session: EntitySession) -> list[str]:
    """Make or catch up the keys of every large type of the entity (what its next write to
    each would do first), e.g. after a bulk import; return those types."""
    from kgot.memory.writes import TypeUpkeep

    catalog = session.type_catalog()
    types = TypeUpkeep(catalog)
    found = [label for label in sorted(catalog.node_types) if large_type(session, label)]
    for label in found:
        ready_type(session, TypeSettings.of(types, label))
    return found


def ready_type(session: EntitySession, settings: TypeSettings) -> StoredType:
    """The type's keys brought up to the entity's current version: made the first time (and
    again when the type's settings changed), else the nodes changed since keyed again; then
    the field model fitted again if the type grew by :data:`REFIT_GROWTH` since its fit."""
    from kgot.memory.schema import RESOLUTION_TYPES

    types = RESOLUTION_TYPES
    scope = (types.c.entity_id == session.entity_id, types.c.label == settings.label)
    fingerprint = settings.fingerprint()
    with session.read() as connection:
        row = connection.execute(select(types).where(*scope)).first()
        current = _entity_version(connection, session.entity_id)
    if row is None or row.fingerprint != fingerprint:
        return _build(session, settings, None, fresh=row is None)
    stored = StoredType(settings, int(row.version), _model_from(row.model))
    held, fitted = int(row.nodes), int(row.fitted_nodes)
    if row.version != current:
        caught = _catch_up(session, settings, fingerprint)
        if caught is None:  # made again by another process meanwhile: start over
            return ready_type(session, settings)
        stored, held = caught
    if held >= fitted * (1 + REFIT_GROWTH) + 1:
        return _build(session, settings, stored)
    return stored


def _catch_up(
    session: EntitySession, settings: TypeSettings, fingerprint: str
) -> tuple[StoredType, int] | None:
    """Key again, with the entity locked, the type's nodes changed since its keys' version;
    return the keys as they now stand and how many nodes hold keys, or None when the type's
    keys are no longer of ``fingerprint`` (another process made them again)."""
    from kgot.memory.schema import RESOLUTION_TYPES

    types = RESOLUTION_TYPES
    scope = (types.c.entity_id == session.entity_id, types.c.label == settings.label)
    with session.write(lock=True) as connection:
        row = connection.execute(select(types).where(*scope)).first()
        if row is None or row.fingerprint != fingerprint:
            return None
        current = _entity_version(connection, session.entity_id)
        model = _model_from(row.model)
        held = int(row.nodes)
        if row.version != current:
            keys = _Keys(connection, session.entity_id, settings.label)
            since = int(row.version)
            held = keys.catch_up(StoredType(settings, since, model), since, held)
            update = types.update().where(*scope)
            connection.execute(update.values(version=current, nodes=held, updated_at=utc_now()))
    return StoredType(settings, current, model), held


@dataclass(frozen=True)
class Probe:
    """What the store holds for some new nodes: the sizes of the blocks their lookups consult
    (by key; a prefix block counted up to :data:`HOLDER_CAP` and one) and the ids of the nodes
    in the blocks they walk (the new nodes' own ids left out)."""

    sizes: dict[str, int]
    node_ids: list[str]


def probe(session: EntitySession, stored: StoredType, nodes: Sequence[Node]) -> Probe:
    """Count and read the blocks the new ``nodes`` (of the stored type) fall in (see the
    module docstring); the store's keys must be caught up (:func:`ready_type`)."""
    new = stored.index_of(nodes, None).for_type(stored.settings.label)
    thresholds = new.thresholds
    counted: set[str] = set()
    for entry in new.nodes.values():
        for name in entry.names:
            # Prefix blocks are read by range (_spelled_alike), not counted by key.
            counted |= {k for k in name_keys(name) if k[:2] not in ("p:", "l:")}
            counted |= _subset_keys(name)
            counted.update(f"a:{initials}" for initials in name.initials)
            if name.acronym_like:
                counted.add(f"i:{name.compact}")
        counted.update(identity_key(p, v) for p, v in entry.identity.items())
    records = new.fields.records if new.fields is not None else {}
    field_keys = [key for record in records.values() for key in _field_keys(new, record)]
    counted.update(field_keys)
    sizes = _counts(session, stored.settings.label, sorted(counted))

    read: dict[str, int] = {}  # key -> nodes to read from it at most
    spelled: dict[tuple[str, str], set[str]] = {}  # prefix blocks -> sorted keys to compare
    for entry in new.nodes.values():
        for name in entry.names:
            read.update(_walked(name, sizes, thresholds.max_containing, thresholds.max_block))
            for prefixes in block_keys(name):
                spelled.setdefault(prefixes, set()).add(name.sorted_key)
        read.update((identity_key(p, v), HOLDER_CAP) for p, v in entry.identity.items())
    block_limit = thresholds.field_block
    read.update((key, HOLDER_CAP) for key in field_keys if sizes.get(key, 0) <= block_limit)
    label = stored.settings.label
    holders = _holders(session, label, read, sizes)
    holders |= _spelled_alike(
        session, label, spelled, sizes, cutoff=thresholds.suggest * 100, most=thresholds.max_block
    )
    return Probe(sizes, sorted(holders - set(new.nodes)))


def _walked(
    name: NormalName, sizes: Mapping[str, int], max_containing: int, max_block: int
) -> dict[str, int]:
    """The blocks :func:`kgot.memory.resolution._lookup_rows` walks for ``name``, given the
    blocks' sizes, and how many nodes of each it reads."""

    def size(key: str) -> int:
        return sizes.get(key, 0)

    read = dict.fromkeys(
        (f"k:{name.key}", f"c:{name.compact}", f"c:{name.full_compact}", f"s:{name.sorted_key}"),
        HOLDER_CAP,
    )
    if name.acronym_like and size(f"i:{name.compact}") <= max_containing:
        read[f"i:{name.compact}"] = HOLDER_CAP
    for initials in name.initials:
        if size(f"i:{initials}") < max_containing:
            read[f"a:{initials}"] = HOLDER_CAP
    form = initials_form(name)
    if form is not None:
        if has_initial(name):
            read[f"f:{form}"] = max_block
        else:
            read[f"h:{form}"] = HOLDER_CAP
    read.update(_word_blocks(name, sizes, max_containing))
    return read


def _word_blocks(name: NormalName, sizes: Mapping[str, int], max_containing: int) -> dict[str, int]:
    """The blocks that find the names holding all of ``name``'s words (through its rarest
    word) and those made of some of them (through their word sets; for a long name, through
    its words as the index walks them)."""
    words = sorted((sizes.get(f"w:{word}", 0), word) for word in name.word_set)
    read = {}
    if words and words[0][0] <= max_containing * 4 + 1:
        read[f"w:{words[0][1]}"] = HOLDER_CAP
    if len(words) <= 1:
        return read  # no name's words are a strict subset of one word
    subsets = _subset_keys(name)
    if subsets:
        read.update(dict.fromkeys(subsets, HOLDER_CAP))
        return read
    for held, word in words:
        if held <= WALKED_WORD_LIMIT:
            read[f"w:{word}"] = HOLDER_CAP
    return read


def _subset_keys(name: NormalName) -> set[str]:
    """The word-set keys of every strict, non-empty subset of ``name``'s words, for a name of
    at most :data:`SUBSET_WORDS` distinct words (else none)."""
    words = sorted(name.word_set)
    if not 1 < len(words) <= SUBSET_WORDS:
        return set()
    return {
        word_set_key(subset)
        for size in range(1, len(words))
        for subset in itertools.combinations(words, size)
    }


def _field_keys(index: TypeIndex, record: Mapping[str, str]) -> list[str]:
    fields = index.fields
    if fields is None:
        return []
    found = []
    for prop, value in record.items():
        kind = fields.kinds[prop]
        if kind in BLOCKING_KINDS:
            found.append(field_key(prop, block_form(kind, value)))
    return found


def _node_keys(index: TypeIndex, node_id: str) -> set[str]:
    """The stored keys of a node of ``index`` (what its blocks file it under)."""
    entry = index.nodes[node_id]
    keys: set[str] = set()
    for name in entry.names:
        keys |= name_keys(name)
    keys.update(identity_key(prop, value) for prop, value in entry.identity.items())
    if index.fields is not None:
        keys.update(_field_keys(index, index.fields.records.get(node_id, {})))
    return {_bounded(key) for key in keys}


def _bounded(key: str) -> str:
    """``key`` as stored: one longer than :data:`MAX_KEY_CHARS` ends in a hash of itself."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{key[: MAX_KEY_CHARS - 17]}#{digest}"


# ------------------------------------------------------------------------------------ reading


def _counts(session: EntitySession, label: str, keys: Sequence[str]) -> dict[str, int]:
    """How many nodes each of ``keys`` holds (keys holding none are left out): one indexed
    count per key, in one statement per :data:`_CHUNK` keys."""
    from kgot.memory.schema import RESOLUTION_KEYS

    table = RESOLUTION_KEYS
    stored = {_bounded(key): key for key in keys}
    scope = (table.c.entity_id == session.entity_id, table.c.label == label)
    found: dict[str, int] = {}
    with session.read() as connection:
        for chunk in _chunks(sorted(stored)):
            query = (
                select(table.c.key, func.count())
                .where(*scope, table.c.key.in_(chunk))
                .group_by(table.c.key)
            )
            for key, held in connection.execute(query):
                found[stored[str(key)]] = int(held)
    return found


def _holders(
    session: EntitySession, label: str, read: Mapping[str, int], sizes: Mapping[str, int]
) -> set[str]:
    """The ids of the nodes in the blocks ``read`` (key -> at most how many, in id order)."""
    from kgot.memory.schema import RESOLUTION_KEYS

    table = RESOLUTION_KEYS

    whole = sorted(_bounded(k) for k, cap in read.items() if 0 < sizes.get(k, 0) <= cap)
    partial = [(_bounded(k), cap) for k, cap in read.items() if sizes.get(k, 0) > cap]
    scope = (table.c.entity_id == session.entity_id, table.c.label == label)
    found: set[str] = set()
    with session.read() as connection:
        for chunk in _chunks(whole):
            query = select(table.c.node_id).where(*scope, table.c.key.in_(chunk))
            found.update(str(n) for n in connection.execute(query).scalars())
        for key, cap in partial:
            query = (
                select(table.c.node_id)
                .where(*scope, table.c.key == key)
                .order_by(table.c.node_id)
                .limit(cap)
            )
            found.update(str(n) for n in connection.execute(query).scalars())
    return found


def _spelled_alike(
    session: EntitySession,
    label: str,
    blocks: Mapping[tuple[str, str], set[str]],
    sizes: dict[str, int],
    *,
    cutoff: float,
    most: int,
) -> set[str]:
    """The nodes of the prefix blocks a lookup compares by spelling, spelled like a new name:
    for each (three-letter, six-letter) prefix pair in ``blocks``, the short prefix's block,
    or the long one's when the short one holds over ``most`` names (as the index decides;
    both sizes are added to ``sizes``); of its members (at most :data:`HOLDER_CAP`, in key
    order), those whose sorted key's rapidfuzz ratio with one of the new names' is at least
    ``cutoff``. Each block is one index range of keys (a prefix key ends in the name's sorted
    key, :func:`~kgot.memory.resolution.prefix_key`); no fact is read. A key stored shortened
    (a name over :data:`MAX_KEY_CHARS`) cannot be compared here; its node is kept, and the
    index compares it."""
    found: set[str] = set()
    with session.read() as connection:
        for (prefix, long_prefix), texts in sorted(blocks.items(), key=lambda item: item[0]):
            members = _block_members(connection, session.entity_id, label, f"p:{prefix}")
            sizes[f"p:{prefix}"] = len(members)
            if len(members) > most:
                members = _block_members(connection, session.entity_id, label, f"l:{long_prefix}")
                sizes[f"l:{long_prefix}"] = len(members)
            spellings: dict[str, list[str]] = {}
            for key, node_id in members:
                if len(key) >= MAX_KEY_CHARS:
                    found.add(node_id)
                else:
                    spellings.setdefault(key.split("\x1f", 1)[1], []).append(node_id)
            choices = list(spellings)
            for text in texts:
                for choice, _, _ in process.extract(
                    text, choices, scorer=fuzz.ratio, score_cutoff=cutoff, limit=None
                ):
                    found.update(spellings[choice])
    return found


def _block_members(
    connection: Connection, entity_id: int, label: str, block: str
) -> list[tuple[str, str]]:
    """(stored key, node id) of the members of a prefix block, at most :data:`HOLDER_CAP`
    and one more (so a count past any rule's limit shows), in key order."""
    from kgot.memory.schema import RESOLUTION_KEYS

    table = RESOLUTION_KEYS
    start = f"{block}\x1f"
    query = (
        select(table.c.key, table.c.node_id)
        .where(
            table.c.entity_id == entity_id,
            table.c.label == label,
            table.c.key >= start,
            table.c.key < f"{block}\x20",
        )
        .order_by(table.c.key)
        .limit(HOLDER_CAP + 1)
    )
    return [(str(key), str(node_id)) for key, node_id in connection.execute(query)]


# ------------------------------------------------------------------------------------ writing


def _build(
    session: EntitySession,
    settings: TypeSettings,
    stored: StoredType | None,
    *,
    fresh: bool = False,
) -> StoredType:
    """Fit the type's field model on the whole type and store it. Every key of the type is
    made again, unless the keys are ``stored`` (caught up) and the new model compares the
    same fields as theirs: then only the model is replaced. ``fresh``: the type has no keys
    yet (none of another making to drop first).

    Keys are written in batches of their own transactions, without the entity's lock (at a
    quarter of a million nodes they are millions of rows, and writers must not wait for
    them); then, with the lock, the nodes changed since the type was read are keyed again and
    the type's state is stored. Two processes making the same keys at once write the same
    rows; the one that stores its state second catches up from its own read, which mends
    any row the other's later catch-up had replaced."""
    from kgot.memory.schema import RESOLUTION_TYPES

    types = RESOLUTION_TYPES
    graph = session.nodes_of_types([settings.label])
    version = int(graph.graph.get("kgot_version", 0))
    index = settings.empty_index()
    for node_id, data in graph.nodes(data=True):
        plain = {k: v for k, v in data.items() if not k.startswith("_") and k != "label"}
        index.add(Node(str(node_id), settings.label, plain))
    del graph
    type_index = index.for_type(settings.label)
    fields = fields_of(type_index)
    model = model_of(fields) if fields is not None else None
    kinds = dict(model.kinds) if model is not None else {}
    kept = stored is not None and kinds == (dict(stored.model.kinds) if stored.model else {})
    scope = (types.c.entity_id == session.entity_id, types.c.label == settings.label)
    values: dict[str, Any] = {
        "fingerprint": settings.fingerprint(),
        "fitted_nodes": len(type_index.nodes),
        "model": json.dumps(model.to_json()) if model is not None else None,
        "updated_at": utc_now(),
    }
    if kept:
        assert stored is not None
        with session.write() as connection:
            connection.execute(types.update().where(*scope).values(**values))
        return StoredType(settings, stored.version, model)
    _write_all_keys(session, settings.label, type_index, fresh=fresh)
    built = StoredType(settings, version, model)
    with session.write(lock=True) as connection:
        current = _entity_version(connection, session.entity_id)
        keys = _Keys(connection, session.entity_id, settings.label)
        held = len(type_index.nodes)
        if current != version:
            held = keys.catch_up(built, version, held)
        values.update(version=current, nodes=held)
        if connection.execute(select(types.c.label).where(*scope)).first() is None:
            connection.execute(
                types.insert().values(entity_id=session.entity_id, label=settings.label, **values)
            )
        else:
            connection.execute(types.update().where(*scope).values(**values))
    _refresh_statistics(session)
    return StoredType(settings, current, model)


def _write_all_keys(session: EntitySession, label: str, index: TypeIndex, *, fresh: bool) -> None:
    """Write the keys of every node of ``index`` in batches, each its own transaction
    (``fresh``: the type had no state, so no keys of another making to drop first)."""
    from kgot.memory.schema import RESOLUTION_KEYS

    if not fresh:
        table = RESOLUTION_KEYS
        with session.write() as connection:
            connection.execute(
                delete(table).where(table.c.entity_id == session.entity_id, table.c.label == label)
            )
    rows: list[dict[str, Any]] = []
    for node_id in index.nodes:
        rows += [
            {"entity_id": session.entity_id, "label": label, "key": key, "node_id": node_id}
            for key in _node_keys(index, node_id)
        ]
        if len(rows) >= _BUILD_BATCH:
            _insert_new(session, rows)
            rows = []
    if rows:
        _insert_new(session, rows)


def _insert_new(session: EntitySession, rows: list[dict[str, Any]]) -> None:
    """Insert key rows, leaving those another process wrote already."""
    from kgot.memory.schema import RESOLUTION_KEYS

    with session.write() as connection:
        if connection.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        statement = insert(RESOLUTION_KEYS).on_conflict_do_nothing()
        for start in range(0, len(rows), _INSERT_BATCH):
            connection.execute(statement, rows[start : start + _INSERT_BATCH])


class _Keys:
    """Writes one type's keys in one transaction."""

    def __init__(self, connection: Connection, entity_id: int, label: str) -> None:
        from kgot.memory.schema import RESOLUTION_KEYS

        self.connection = connection
        self.entity_id = entity_id
        self.label = label
        self.table = RESOLUTION_KEYS
        self.rows: list[dict[str, Any]] = []

    def catch_up(self, stored: StoredType, since: int, held: int) -> int:
        """Key again the type's nodes changed since ``since``; return how many nodes hold
        keys now (``held`` before)."""
        table = self.table
        changed = changed_node_ids(self.connection, self.entity_id, since)
        scope = (table.c.entity_id == self.entity_id, table.c.label == self.label)
        for chunk in _chunks(changed):
            had = self.connection.execute(
                select(func.count(table.c.node_id.distinct())).where(
                    *scope, table.c.node_id.in_(chunk)
                )
            ).scalar_one()
            held -= int(had)
            self.connection.execute(delete(table).where(*scope, table.c.node_id.in_(chunk)))
        current = list(self._current(changed))
        index = stored.index_of(current, None).for_type(self.label)
        for node_id in index.nodes:
            self._add(node_id, _node_keys(index, node_id))
        self._flush()
        return held + len(index.nodes)

    def _current(self, node_ids: Sequence[str]) -> Iterator[Node]:
        for chunk in _chunks(node_ids):
            query = (
                select(_nodes.c.node_id, _nodes.c.properties)
                .where(
                    _nodes.c.entity_id == self.entity_id,
                    _nodes.c.label == self.label,
                    _nodes.c.valid_to_version.is_(None),
                    _nodes.c.node_id.in_(chunk),
                )
                .order_by(_nodes.c.row_id)
            )
            for node_id, properties in self.connection.execute(query):
                props = properties if isinstance(properties, dict) else {}
                plain = {k: v for k, v in props.items() if not k.startswith("_")}
                yield Node(str(node_id), self.label, plain)

    def _add(self, node_id: str, keys: Iterable[str]) -> None:
        self.rows += [
            {"entity_id": self.entity_id, "label": self.label, "key": key, "node_id": node_id}
            for key in keys
        ]
        if len(self.rows) >= _INSERT_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.connection.execute(self.table.insert(), self.rows)
            self.rows = []


# ------------------------------------------------------------------------------------ helpers


def _refresh_statistics(session: EntitySession) -> None:
    """Let the planner know the keys table grew (it would scan a table it thinks small):
    bounded on SQLite, sampled on PostgreSQL."""
    from kgot.memory.schema import RESOLUTION_KEYS

    with session.write() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA analysis_limit=100000")
        connection.exec_driver_sql(f"ANALYZE {RESOLUTION_KEYS.name}")


def _model_from(text: str | None) -> FieldModel | None:
    return FieldModel.from_json(json.loads(text)) if text else None


def _entity_version(connection: Connection, entity_id: int) -> int:
    version = connection.execute(
        select(_entities.c.version).where(_entities.c.id == entity_id)
    ).scalar_one()
    return int(version)


def _chunks(items: Sequence[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield list(items[start : start + _CHUNK])
