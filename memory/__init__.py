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

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

__all__ = [
    "DEFAULT_RANK_WEIGHTS",
    "EVALUATION_IDENTITY",
    "LABELLED_PAIRS",
    "Claim",
    "Forgotten",
    "Match",
    "Memory",
    "Merge",
    "MergedId",
    "NodeEmbedder",
    "NormalName",
    "PreparedChangeset",
    "QueuedResolution",
    "RelatedEdge",
    "Resolution",
    "ResolutionIndex",
    "SearchHit",
    "Suggestion",
    "UpkeepReport",
    "WriteOutcome",
    "WrittenEdge",
    "adjudicate_suggestions",
    "commit_prepared",
    "embedder_for_writes",
    "embedder_from_settings",
    "evaluate_resolution",
    "fact_freshness",
    "find_edge",
    "import_with_rules",
    "match_existing",
    "nodes_named_by_rare_words",
    "normalize_name",
    "open_memory",
    "pairs_of",
    "parse_instant",
    "parse_now",
    "prepare_changeset",
    "rank",
    "resolve",
    "resolve_all",
    "retention",
    "run_upkeep",
    "synthetic_nodes",
    "temporal_properties",
    "update_resolution_keys",
    "update_search_index",
    "verify_claim",
    "verify_text",
]

if TYPE_CHECKING:
    from kgot.memory.adjudicate import adjudicate as adjudicate_suggestions
    from kgot.memory.adjudicate import pairs_of
    from kgot.memory.api import Memory, QueuedResolution, open_memory
    from kgot.memory.embeddings import NodeEmbedder, embedder_for_writes, embedder_from_settings
    from kgot.memory.evaluation import IDENTITY_BY_TYPE as EVALUATION_IDENTITY
    from kgot.memory.evaluation import PAIRS as LABELLED_PAIRS
    from kgot.memory.evaluation import evaluate as evaluate_resolution
    from kgot.memory.evaluation import synthetic_nodes
    from kgot.memory.forget import Forgotten
    from kgot.memory.imports import import_with_rules
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
    from kgot.memory.resolution_store import update_resolution_keys
    from kgot.memory.scoring import DEFAULT_WEIGHTS as DEFAULT_RANK_WEIGHTS
    from kgot.memory.scoring import (
        fact_freshness,
        parse_instant,
        rank,
        retention,
        temporal_properties,
    )
    from kgot.memory.search import RelatedEdge, SearchHit, find_edge, nodes_named_by_rare_words
    from kgot.memory.search_index import update_search_index
    from kgot.memory.upkeep import UpkeepReport, parse_now, run_upkeep
    from kgot.memory.verify import Claim, verify_claim, verify_text
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
    "pairs_of": "adjudicate",
    "NodeEmbedder": "embeddings",
    "embedder_for_writes": "embeddings",
    "embedder_from_settings": "embeddings",
    "synthetic_nodes": "evaluation",
    "import_with_rules": "imports",
    "fact_freshness": "scoring",
    "parse_instant": "scoring",
    "rank": "scoring",
    "retention": "scoring",
    "temporal_properties": "scoring",
    "RelatedEdge": "search",
    "find_edge": "search",
    "nodes_named_by_rare_words": "search",
    "update_search_index": "search_index",
    "update_resolution_keys": "resolution_store",
    "parse_now": "upkeep",
    "Claim": "verify",
    "adjudicate_suggestions": "adjudicate",
    "evaluate_resolution": "evaluation",
    "LABELLED_PAIRS": "evaluation",
    "EVALUATION_IDENTITY": "evaluation",
    "DEFAULT_RANK_WEIGHTS": "scoring",
}
# Exported under a name that says more in the package than in its module (or, for
# ``adjudicate``, that is not also the name of a module of the package).
_ATTRIBUTES = {
    "adjudicate_suggestions": "adjudicate",
    "evaluate_resolution": "evaluate",
    "LABELLED_PAIRS": "PAIRS",
    "EVALUATION_IDENTITY": "IDENTITY_BY_TYPE",
    "DEFAULT_RANK_WEIGHTS": "DEFAULT_WEIGHTS",
}


__getattr__ = lazy_exports(
    __name__,
    {name: f".{_HOMES.get(name, 'resolution')}:{_ATTRIBUTES.get(name, name)}" for name in __all__},
)
