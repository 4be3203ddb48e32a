"""Memory upkeep for an entity's long-lived graph: one node per real thing, contradictions that
supersede, decay, ranking and claim checks (issue 15).

The public entry point will be ``kgot.memory.open_memory(store, entity)``, built on the store's
entity sessions. So far the package holds the store-independent core of entity resolution:
name normalisation (:mod:`kgot.memory.names`), the resolution rules and the write-time index
(:mod:`kgot.memory.resolution`), and a labelled evaluation set (:mod:`kgot.memory.evaluation`).
Names below load their module on first use (rapidfuzz and numpy), so importing the package is
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Match",
    "Merge",
    "NormalName",
    "Resolution",
    "ResolutionIndex",
    "Suggestion",
    "match_existing",
    "normalize_name",
    "resolve",
    "resolve_all",
]

if TYPE_CHECKING:
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

_HOMES = {"NormalName": "names", "normalize_name": "names"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'kgot.memory' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(f"kgot.memory.{_HOMES.get(name, 'resolution')}")
    return getattr(module, name)
