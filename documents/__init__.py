"""Documents to text: recognising a file's format and parsing it in the sandbox.

Entry point: :func:`read_document` — a file, or the bytes of one, to its text and title, or an
:class:`Unreadable` saying why not (a missing file, not a document, a failed parse, a parser
that cannot start), so callers branch on a type instead of on a message. Aides, ``kgot ingest``
and the benchmarks' baseline read documents through it; the tools' ``inspect_file`` and
``visit_page`` use the same parts (:mod:`.formats`, :class:`.convert_pool.ConverterPool`) with
their pages, links and images.

The modules:

* :mod:`.formats` — what a file is, from its first bytes, its name and its content type;
* :mod:`.convert` and :mod:`.convert_worker` — the parsers; they run only inside the sandbox,
  shipped there as a zip with :mod:`.formats`;
* :mod:`.convert_pool` — the host side: warm sandbox workers, deadlines, memory caps.

See docs/tools.md (Document parsing) for why parsing happens in the sandbox.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgot.documents.reader import DocumentText, ReadOutcome, Unreadable, read_document

# Exports load on first use: the sandbox's conversion workers import the parsers of this
# package, and must not pay for the host side (the sandbox pool) through its __init__.
_EXPORTS = {
    "DocumentText": "kgot.documents.reader",
    "ReadOutcome": "kgot.documents.reader",
    "Unreadable": "kgot.documents.reader",
    "read_document": "kgot.documents.reader",
}

__all__ = ["DocumentText", "ReadOutcome", "Unreadable", "read_document"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kgot.documents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
