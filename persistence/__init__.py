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
    load_type_file,
)
from kgot.persistence.checkpoints import open_checkpointer, purge_checkpoints
from kgot.persistence.commit_result import CommitResult
from kgot.persistence.engine import StoreBusyError
from kgot.persistence.facts import FactKey, fact_id
from kgot.persistence.graph_diff import diff_graphs
from kgot.persistence.schema import (
    CLOSE_REASONS,
    PREFIX,
    JsonValue,
    Timestamp,
    define_tables,
    sql_list,
)
from kgot.persistence.session import CommitConflictError, EntitySession, Provenance
from kgot.persistence.store import EntityInfo, RunRecord, Store, open_store
from kgot.persistence.table_sets import Migration, TableSet, tables_on_first_use
from kgot.persistence.target import StoreNotFoundError, StoreUnusableError
from kgot.persistence.transfer import ImportResult, export_graph, import_graph
from kgot.persistence.upkeep_store import (
    GOOD_FEEDBACK_BOOST,
    RETRIEVAL_BOOST,
    FactUse,
    Suggestion,
    SuggestionNotFoundError,
)
from kgot.persistence.validation import READ_ONLY_META, WRITABLE_META

__all__ = [
    "CLOSE_REASONS",
    "GOOD_FEEDBACK_BOOST",
    "PREFIX",
    "READ_ONLY_META",
    "RETRIEVAL_BOOST",
    "WRITABLE_META",
    "CommitConflictError",
    "CommitResult",
    "EntityInfo",
    "EntitySession",
    "FactKey",
    "FactUse",
    "ImportResult",
    "JsonValue",
    "Migration",
    "Provenance",
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
    "define_tables",
    "diff_graphs",
    "export_graph",
    "fact_id",
    "import_graph",
    "load_type_file",
    "open_checkpointer",
    "open_store",
    "purge_checkpoints",
    "sql_list",
    "tables_on_first_use",
]
