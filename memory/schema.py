"""The memory's table: node embeddings (``kgot_embeddings``), declared here and registered with
the store as a table set (entry point ``memory`` of the group ``kgot.tables``; see
:mod:`kgot.persistence.table_sets`). Its rows are read and written by
:mod:`kgot.memory.embeddings`, and only when embeddings are turned on.

One vector per entity, embedding model and node, derived from the node's text: never a fact
version, deleted with its entity. The table came with migration 2, whose other part (fact use,
suggestions) is the store's own.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
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
MEMORY_VERSION = 2


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
    return {"embeddings": embeddings}


def _v2_embeddings(connection: Connection) -> None:
    """Add the embedding table (the memory's part of migration 2)."""
    metadata = MetaData()
    define_tables(metadata, version=2)
    define_memory_tables(metadata, 2)["embeddings"].create(connection)


# The store's part of version 2 is "memory upkeep: …, suggestions"; with this part the version
# is recorded as it always was ("…, suggestions, embeddings").
TABLE_SET = TableSet(
    "kgot.memory", define_memory_tables, (Migration(2, "embeddings", _v2_embeddings),)
)


# The embedding table as this kgot uses it; defined when first read.
EMBEDDINGS: Table
__getattr__ = tables_on_first_use(
    globals(), TABLE_SET, {"EMBEDDINGS": lambda tables: tables["embeddings"]}
)
