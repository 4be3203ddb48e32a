"""Aides: long-running loops that watch sources, grow an entity's graph and report (issue 16;
docs/aides.md).

* :func:`ingest_text` — add a text to an entity's graph through the controller's INSERT path
  (no vote) and get back what was inserted, merged, corroborated and superseded.
* :func:`create_aide` / :func:`open_aide` — an aide bound to an entity, with sources, a program
  and outputs; :meth:`Aide.run_cycle` polls, ingests, runs upkeep and the program, delivers.
"""

from kgot.aides.ingest import IngestReport, ingest_text, ingest_text_async, read_document
from kgot.aides.runtime import Aide, CycleReport, ItemOutcome, create_aide, open_aide

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
