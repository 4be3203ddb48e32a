"""Aides: long-running loops that watch sources, grow an entity's graph and report (issue 16;
docs/aides.md).

* :func:`ingest_text` — add a text to an entity's graph through the controller's INSERT path
  (no vote) and get back what was inserted, merged, corroborated and superseded.
* :func:`create_aide` / :func:`open_aide` — an aide bound to an entity, with sources, a program
  and outputs; :meth:`Aide.run_cycle` polls, ingests, runs upkeep and the program, delivers.

The rows the `kgot aide` commands show (:func:`list_aides`, :func:`source_rows`,
:func:`item_rows`, :func:`cycle_rows`, …; :mod:`kgot.aides.aide_rows`) are named here too.

The names are imported on first use: ``kgot aide list`` or a module such as
:mod:`kgot.aides.sources` does not load the controller (LangGraph) it never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.aides.aide_rows import (
        attempts_note,
        claim_worker,
        cost_since,
        count_of,
        item_counts,
        list_aides,
        pending_items,
        release_worker,
    )
    from kgot.aides.aide_rows import cycles as cycle_rows
    from kgot.aides.aide_rows import items as item_rows
    from kgot.aides.aide_rows import outputs as output_rows
    from kgot.aides.aide_rows import sources as source_rows
    from kgot.aides.ingest import (
        IngestReport,
        TextTooLongError,
        ingest_text,
        ingest_text_async,
        read_document,
    )
    from kgot.aides.runtime import Aide, CycleReport, ItemOutcome, create_aide, open_aide
    from kgot.aides.schema import AIDE_ITEM_STATUSES

_HOMES = {
    "AIDE_ITEM_STATUSES": "kgot.aides.schema",
    "TextTooLongError": "kgot.aides.ingest",
    "attempts_note": "kgot.aides.aide_rows",
    "claim_worker": "kgot.aides.aide_rows",
    "cost_since": "kgot.aides.aide_rows",
    "count_of": "kgot.aides.aide_rows",
    "cycle_rows": "kgot.aides.aide_rows",
    "item_counts": "kgot.aides.aide_rows",
    "item_rows": "kgot.aides.aide_rows",
    "list_aides": "kgot.aides.aide_rows",
    "output_rows": "kgot.aides.aide_rows",
    "pending_items": "kgot.aides.aide_rows",
    "release_worker": "kgot.aides.aide_rows",
    "source_rows": "kgot.aides.aide_rows",
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
    "AIDE_ITEM_STATUSES",
    "Aide",
    "CycleReport",
    "IngestReport",
    "ItemOutcome",
    "TextTooLongError",
    "attempts_note",
    "claim_worker",
    "cost_since",
    "count_of",
    "create_aide",
    "cycle_rows",
    "ingest_text",
    "ingest_text_async",
    "item_counts",
    "item_rows",
    "list_aides",
    "open_aide",
    "output_rows",
    "pending_items",
    "read_document",
    "release_worker",
    "source_rows",
]

# Exported under a name that says what they return (``kgot.aides.sources`` is a module).
_ATTRIBUTES = {
    "cycle_rows": "cycles",
    "item_rows": "items",
    "output_rows": "outputs",
    "source_rows": "sources",
}


__getattr__ = lazy_exports(
    __name__, {name: f"{home}:{_ATTRIBUTES.get(name, name)}" for name, home in _HOMES.items()}
)
