"""Memory upkeep for an entity's long-lived graph: one node per real thing, contradictions that
supersede, decay, ranking and claim checks (issue 15).

The public entry point is ``kgot.memory.open_memory(store, entity)`` (:mod:`kgot.memory.api`),
built on the store's entity sessions: resolution over the entity's graph, the curation queue,
and writes through the write-time hook ``prepare_changeset`` (:mod:`kgot.memory.writes`), which
the controller calls before each commit of an entity run. Underneath is the store-independent
core of entity resolution: name normalisation (:mod:`kgot.memory.names`), the resolution rules
and the write-time index (:mod:`kgot.memory.resolution`), and a labelled evaluation set
(:mod:`kgot.memory.evaluation`).
Names below load their module on first use (rapidfuzz and numpy), so importing the package is
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Forgotten",
    "Match",
    "Memory",
    "Merge",
    "MergedId",
    "NormalName",
    "PreparedChangeset",
    "QueuedResolution",
    "Resolution",
    "ResolutionIndex",
    "SearchHit",
    "Suggestion",
    "UpkeepReport",
    "WriteOutcome",
    "WrittenEdge",
    "commit_prepared",
    "match_existing",
    "normalize_name",
    "open_memory",
    "prepare_changeset",
    "resolve",
    "resolve_all",
    "run_upkeep",
    "verify_claim",
    "verify_text",
]

if TYPE_CHECKING:
    from kgot.memory.api import Memory, QueuedResolution, open_memory
    from kgot.memory.forget import Forgotten
    from kgot.memory.names import NormalName, normalize_name
    from kgot.memory.resolution import (
        Match,
        Merge,
        Resolution,
        ResolutionIndex,
        Suggestion,
        match_existing,
        resolve,
        resolve_all,
    )
    from kgot.memory.search import SearchHit
    from kgot.memory.upkeep import UpkeepReport, run_upkeep
    from kgot.memory.verify import verify_claim, verify_text
    from kgot.memory.write_outcome import MergedId, WriteOutcome, WrittenEdge, commit_prepared
    from kgot.memory.writes import PreparedChangeset, prepare_changeset

_HOMES = {
    "Forgotten": "forget",
    "NormalName": "names",
    "normalize_name": "names",
    "Memory": "api",
    "QueuedResolution": "api",
    "open_memory": "api",
    "PreparedChangeset": "writes",
    "prepare_changeset": "writes",
    "SearchHit": "search",
    "verify_claim": "verify",
    "verify_text": "verify",
    "UpkeepReport": "upkeep",
    "run_upkeep": "upkeep",
    "MergedId": "write_outcome",
    "WriteOutcome": "write_outcome",
    "WrittenEdge": "write_outcome",
    "commit_prepared": "write_outcome",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'kgot.memory' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(f"kgot.memory.{_HOMES.get(name, 'resolution')}")
    return getattr(module, name)
