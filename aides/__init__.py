"""Aides: long-running loops that watch sources, grow an entity's graph and report (issue 16;
docs/aides.md).

* :func:`ingest_text` — add a text to an entity's graph through the controller's INSERT path
  (no vote) and get back what was inserted, merged, corroborated and superseded.
* :func:`create_aide` / :func:`open_aide` — an aide bound to an entity, with sources, a program
  and outputs; :meth:`Aide.run_cycle` polls, ingests, runs upkeep and the program, delivers.

The names are imported on first use: ``kgot aide list`` or a module such as
:mod:`kgot.aides.sources` does not load the controller (LangGraph) it never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgot.aides.ingest import IngestReport, ingest_text, ingest_text_async, read_document
    from kgot.aides.runtime import Aide, CycleReport, ItemOutcome, create_aide, open_aide

_HOMES = {
    "IngestReport": "kgot.aides.ingest",
    "ingest_text": "kgot.aides.ingest",
    "ingest_text_async": "kgot.aides.ingest",
    "read_document": "kgot.aides.ingest",
    "Aide": "kgot.aides.runtime",
    "CycleReport": "kgot.aides.runtime",
    "ItemOutcome": "kgot.aides.runtime",
    "create_aide": "kgot.aides.runtime",
    "open_aide": "kgot.aides.runtime",
}

__all__ = [
    "Aide",
    "CycleReport",
    "IngestReport",
    "ItemOutcome",
    "create_aide",
    "ingest_text",
    "ingest_text_async",
    "open_aide",
    "read_document",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kgot.aides' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
