"""The memory's tables, declared here and registered with the store as a table set (entry point
``memory`` of the group ``kgot.tables``; see :mod:`kgot.persistence.table_sets`):

* node embeddings (``kgot_embeddings``, migration 2, whose other part (fact use, suggestions)
  is the store's own), read and written by :mod:`kgot.memory.embeddings`, and only when
  embeddings are turned on: one vector per entity, embedding model and node;
* the search index (migration 10), read and kept up to date by
  :mod:`kgot.memory.search_index`: each current fact's words (``kgot_search_terms``), each
  entity's vocabulary (``kgot_search_vocabulary``, for typo matches) and the entity version the
  index shows (``kgot_search_state``);
* write-time resolution's blocks (migration 12), read and kept up to date by
  :mod:`kgot.memory.resolution_store`: for each large type, the blocking keys of its nodes
  (``kgot_resolution_keys``) and the type's state: the version its keys show, the settings
  they were made with, and its fitted field model (``kgot_resolution_types``).

All of it is derived from the facts (never a fact version) and deleted with its entity.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from kgot.persistence import (
    PREFIX,
    Migration,
    TableSet,
    Timestamp,
    define_tables,
    tables_on_first_use,
)

# The schema version the memory's table last changed at (its last migration's).
MEMORY_VERSION = 12


def define_memory_tables(metadata: MetaData, version: int = MEMORY_VERSION) -> dict[str, Table]:
    """The memory's tables as of schema ``version`` on ``metadata`` (which holds the store's own
    tables), by short name: none before migration 2."""
    if version < 2:
        return {}
    entities = metadata.tables[f"{PREFIX}entities"]
    # One vector per node and embedding model, kept beside the facts (not a fact version: a
    # vector is derived from a node's text and re-made when that text changes). The key leads
    # with (entity_id, model) so a similarity scan reads one entity's vectors of one model.
    embeddings = Table(
        f"{PREFIX}embeddings",
        metadata,
        Column(
            "entity_id",
            ForeignKey(entities.c.id, ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        Column("model", String, primary_key=True),
        Column("node_id", String, primary_key=True),
        Column("dimension", Integer, nullable=False),
        Column("vector", LargeBinary, nullable=False),  # float32, little-endian
        # sha256 of the text embedded: a node whose text did not change is not embedded again.
        Column("text_hash", String(64), nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        CheckConstraint("dimension > 0", name="kgot_embeddings_dimension"),
    )
    tables = {"embeddings": embeddings}
    if version >= 10:
        tables.update(_search_tables(metadata, entities))
    if version >= 12:
        tables.update(_resolution_tables(metadata, entities))
    return tables


def _entity_column(entities: Table) -> Column:  # type: ignore[type-arg]
    """A derived table's key leads with its entity, whose deletion takes the rows along."""
    return Column(
        "entity_id",
        ForeignKey(entities.c.id, ondelete="CASCADE"),
        primary_key=True,
        nullable=False,
        autoincrement=False,
    )


def _resolution_tables(metadata: MetaData, entities: Table) -> dict[str, Table]:
    """Write-time resolution's tables (migration 12)."""
    key_text = String().with_variant(String(collation="C"), "postgresql")

    # One row per (type, block key, node): the blocks of kgot.memory.resolution's index, so
    # that a write reads a block's nodes (or counts them) by one index range.
    keys = Table(
        f"{PREFIX}resolution_keys",
        metadata,
        _entity_column(entities),
        Column("label", key_text, primary_key=True),
        Column("key", key_text, primary_key=True),
        Column("node_id", key_text, primary_key=True),
        sqlite_with_rowid=False,
    )
    # A node's rows, to replace them when it changes, and its names' sorted keys for a
    # comparison by spelling (kgot.memory.resolution_store._spelled_alike): all key, so one
    # index range per node answers either.
    Index(
        f"{PREFIX}resolution_keys_node", keys.c.entity_id, keys.c.label, keys.c.node_id, keys.c.key
    )
    types = Table(
        f"{PREFIX}resolution_types",
        metadata,
        _entity_column(entities),
        Column("label", String, primary_key=True),
        # The entity version the type's keys show; nodes changed since are keyed again first.
        Column("version", BigInteger, nullable=False),
        # What the keys were made with (the type's identity properties, organisation names,
        # field kinds, the key format): another fingerprint means the keys are made again.
        Column("fingerprint", String(64), nullable=False),
        Column("fitted_nodes", BigInteger, nullable=False),  # nodes the model was fitted on
        Column("nodes", BigInteger, nullable=False),  # nodes holding keys now
        # The field model (kgot.memory.field_evidence.FieldModel.to_json), or null: the type's
        # nodes hold no comparable field besides names.
        Column("model", Text, nullable=True),
        Column("updated_at", Timestamp, nullable=False),
    )
    return {"resolution_keys": keys, "resolution_types": types}


def _search_tables(metadata: MetaData, entities: Table) -> dict[str, Table]:
    """The search index's tables (migration 10)."""
    # Words are compared by code point on PostgreSQL too: a prefix query reads the range
    # [word, word + U+10FFFF), which a linguistic collation (en_US) would not keep contiguous.
    word = String().with_variant(String(collation="C"), "postgresql")

    # One row per (fact, word, part): a node is ("n", node id, "", ""), an edge ("e", source,
    # target, key). `part` says where the word is (n: a name, l: the label, t: other text),
    # which sets its weight. Label, confidence and the row's version let a query order
    # candidates before it reads any fact. On SQLite the rows live in the primary key's
    # b-tree (WITHOUT ROWID): the table is all key.
    terms = Table(
        f"{PREFIX}search_terms",
        metadata,
        _entity_column(entities),
        Column("term", word, primary_key=True),
        Column("kind", String(1), primary_key=True),
        Column("source", String, primary_key=True),
        Column("target", String, primary_key=True),
        Column("edge_key", String, primary_key=True),
        Column("part", String(1), primary_key=True),
        Column("label", String, nullable=False),
        Column("confidence", Float, nullable=False),
        Column("version", BigInteger, nullable=False),
        CheckConstraint("kind IN ('n', 'e')", name="kgot_search_terms_kind"),
        CheckConstraint("part IN ('n', 'l', 't')", name="kgot_search_terms_part"),
        sqlite_with_rowid=False,
    )
    # A fact's rows, to replace them when it changes.
    Index(
        f"{PREFIX}search_terms_fact",
        terms.c.entity_id,
        terms.c.kind,
        terms.c.source,
        terms.c.target,
        terms.c.edge_key,
    )
    vocabulary = Table(
        f"{PREFIX}search_vocabulary",
        metadata,
        _entity_column(entities),
        Column("term", word, primary_key=True),
        sqlite_with_rowid=False,
    )
    state = Table(
        f"{PREFIX}search_state",
        metadata,
        _entity_column(entities),
        # The entity version the index shows: facts written since are indexed by the next
        # search (kgot.memory.search_index.update_search_index).
        Column("version", BigInteger, nullable=False),
    )
    return {"search_terms": terms, "search_vocabulary": vocabulary, "search_state": state}


def _v2_embeddings(connection: Connection) -> None:
    """Add the embedding table (the memory's part of migration 2)."""
    metadata = MetaData()
    define_tables(metadata, version=2)
    define_memory_tables(metadata, 2)["embeddings"].create(connection)


def _v12_resolution_keys(connection: Connection) -> None:
    """Add write-time resolution's tables (filled by the first large write of each type)."""
    metadata = MetaData()
    define_tables(metadata, version=11)
    tables = define_memory_tables(metadata, 12)
    tables["resolution_keys"].create(connection)
    tables["resolution_types"].create(connection)


def _v10_search_index(connection: Connection) -> None:
    """Add the search index's tables (filled by the first search of each entity)."""
    metadata = MetaData()
    define_tables(metadata, version=9)
    for table in define_memory_tables(metadata, 10).values():
        if table.name != f"{PREFIX}embeddings":
            table.create(connection)


# The store's part of version 2 is "memory upkeep: …, suggestions"; with this part the version
# is recorded as it always was ("…, suggestions, embeddings").
TABLE_SET = TableSet(
    "kgot.memory",
    define_memory_tables,
    (
        Migration(2, "embeddings", _v2_embeddings),
        Migration(10, "search index: each current fact's words, by entity", _v10_search_index),
        Migration(12, "resolution keys: large types' blocks, by entity", _v12_resolution_keys),
    ),
)


# The tables as this kgot uses them; defined when first read.
EMBEDDINGS: Table
SEARCH_TERMS: Table
SEARCH_VOCABULARY: Table
SEARCH_STATE: Table
RESOLUTION_KEYS: Table
RESOLUTION_TYPES: Table
__getattr__ = tables_on_first_use(
    globals(),
    TABLE_SET,
    {
        "EMBEDDINGS": lambda tables: tables["embeddings"],
        "SEARCH_TERMS": lambda tables: tables["search_terms"],
        "SEARCH_VOCABULARY": lambda tables: tables["search_vocabulary"],
        "SEARCH_STATE": lambda tables: tables["search_state"],
        "RESOLUTION_KEYS": lambda tables: tables["resolution_keys"],
        "RESOLUTION_TYPES": lambda tables: tables["resolution_types"],
    },
)
