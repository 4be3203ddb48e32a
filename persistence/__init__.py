"""Persistent per-entity knowledge graphs with evolvable, JSON-Schema-validated types.

Entry points: :func:`open_store` (a SQLite path or a ``postgresql://`` URL; creates and migrates
the database) and :func:`open_checkpointer` (LangGraph checkpoints in the same kind of database).
A :class:`Store` holds entities (tenants); :meth:`Store.session` gives an :class:`EntitySession`
that loads one entity's graph, checks changesets against its types and commits them atomically
with :class:`Provenance`; for memory upkeep it also merges nodes, closes facts with a reason,
counts fact use and keeps a curation queue of suggestions. See ``docs/persistence.md``.

Packages that keep rows of their own in the store declare their tables as a :class:`TableSet`
(registered by entry point, see :mod:`kgot.persistence.table_sets`) and read and write them in
the store's transactions: :meth:`Store.read` / :meth:`Store.write`, or
:meth:`EntitySession.read` / :meth:`EntitySession.write` for rows scoped by one entity.
"""

from __future__ import annotations

from kgot.config import StoreLimits
from kgot.persistence.catalog import (
    TypeCatalog,
    TypeDef,
    TypeRejectedError,
    TypeSpec,
    UpkeepSettings,
    describe_properties,
    load_type_file,
    parse_type_document,
    specs_from_document,
)
from kgot.persistence.checkpoints import open_checkpointer, purge_checkpoints
from kgot.persistence.commit_result import CommitResult
from kgot.persistence.engine import StoreBusyError
from kgot.persistence.facts import FactKey, edge_key, edge_key_from_id, fact_id, node_key
from kgot.persistence.graph_diff import diff_graphs
from kgot.persistence.owner import current_owner, owner_state
from kgot.persistence.schema import (
    CLOSE_REASONS,
    PREFIX,
    TABLES,
    JsonValue,
    Timestamp,
    define_tables,
    sql_list,
)
from kgot.persistence.session import CommitConflictError, EntitySession, Provenance
from kgot.persistence.storable import storable_text
from kgot.persistence.store import (
    MAX_ENTITY_NAME,
    EntityInfo,
    RunCommit,
    RunRecord,
    Store,
    open_store,
)
from kgot.persistence.table_sets import Migration, TableSet, tables_on_first_use
from kgot.persistence.target import (
    StoreNotFoundError,
    StoreUnusableError,
    no_store_for_entity,
    parse_target,
    refuse_file_in_path,
)
from kgot.persistence.timeutil import as_utc, iso, utc_now
from kgot.persistence.transfer import (
    ImportResult,
    check_import_size,
    export_graph,
    import_changeset,
    import_graph,
)
from kgot.persistence.upkeep_store import (
    GOOD_FEEDBACK_BOOST,
    RETRIEVAL_BOOST,
    ClosedFacts,
    FactAsRead,
    FactUse,
    Suggestion,
    SuggestionNotFoundError,
)
from kgot.persistence.validation import MAX_ID_LENGTH, READ_ONLY_META, WRITABLE_META

__all__ = [
    "CLOSE_REASONS",
    "GOOD_FEEDBACK_BOOST",
    "MAX_ENTITY_NAME",
    "MAX_ID_LENGTH",
    "PREFIX",
    "READ_ONLY_META",
    "RETRIEVAL_BOOST",
    "TABLES",
    "WRITABLE_META",
    "ClosedFacts",
    "CommitConflictError",
    "CommitResult",
    "EntityInfo",
    "EntitySession",
    "FactAsRead",
    "FactKey",
    "FactUse",
    "ImportResult",
    "JsonValue",
    "Migration",
    "Provenance",
    "RunCommit",
    "RunRecord",
    "Store",
    "StoreBusyError",
    "StoreLimits",
    "StoreNotFoundError",
    "StoreUnusableError",
    "Suggestion",
    "SuggestionNotFoundError",
    "TableSet",
    "Timestamp",
    "TypeCatalog",
    "TypeDef",
    "TypeRejectedError",
    "TypeSpec",
    "UpkeepSettings",
    "as_utc",
    "check_import_size",
    "current_owner",
    "define_tables",
    "describe_properties",
    "diff_graphs",
    "edge_key",
    "edge_key_from_id",
    "export_graph",
    "fact_id",
    "import_changeset",
    "import_graph",
    "iso",
    "load_type_file",
    "no_store_for_entity",
    "node_key",
    "open_checkpointer",
    "open_store",
    "owner_state",
    "parse_target",
    "parse_type_document",
    "purge_checkpoints",
    "refuse_file_in_path",
    "specs_from_document",
    "sql_list",
    "storable_text",
    "tables_on_first_use",
    "utc_now",
]
