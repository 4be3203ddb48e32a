"""Aides: long-running loops that watch sources, grow an entity's graph and report (issue 16;
docs/aides.md).

* :func:`ingest_text` — add a text to an entity's graph through the controller's INSERT path
  (no vote) and get back what was inserted, merged, corroborated and superseded.
"""

from kgot.aides.ingest import IngestReport, ingest_text, ingest_text_async, read_document

__all__ = ["IngestReport", "ingest_text", "ingest_text_async", "read_document"]
