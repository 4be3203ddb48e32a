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

Other packages import these parts from the package too: the format names and
:func:`.formats.detect_format`, :func:`.formats.charset_of`, :func:`.formats.guess_extension`,
and :class:`.convert_pool.ConverterPool` with :func:`.convert_pool.shared_pool`.

See docs/tools.md (Document parsing) for why parsing happens in the sandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.documents.convert_pool import ConverterPool, shared_pool
    from kgot.documents.formats import (
        AUDIO_FORMAT,
        DOCUMENT_FORMATS,
        IMAGE_FORMAT,
        ZIP_FORMAT,
        charset_of,
        detect_format,
        guess_extension,
    )
    from kgot.documents.reader import DocumentText, ReadOutcome, Unreadable, read_document

# Exports load on first use: the sandbox's conversion workers import the parsers of this
# package, and must not pay for the host side (the sandbox pool) through its __init__.
_EXPORTS = {
    "AUDIO_FORMAT": "kgot.documents.formats",
    "DOCUMENT_FORMATS": "kgot.documents.formats",
    "IMAGE_FORMAT": "kgot.documents.formats",
    "ZIP_FORMAT": "kgot.documents.formats",
    "charset_of": "kgot.documents.formats",
    "detect_format": "kgot.documents.formats",
    "guess_extension": "kgot.documents.formats",
    "ConverterPool": "kgot.documents.convert_pool",
    "shared_pool": "kgot.documents.convert_pool",
    "DocumentText": "kgot.documents.reader",
    "ReadOutcome": "kgot.documents.reader",
    "Unreadable": "kgot.documents.reader",
    "read_document": "kgot.documents.reader",
}

__all__ = [
    "AUDIO_FORMAT",
    "DOCUMENT_FORMATS",
    "IMAGE_FORMAT",
    "ZIP_FORMAT",
    "ConverterPool",
    "DocumentText",
    "ReadOutcome",
    "Unreadable",
    "charset_of",
    "detect_format",
    "guess_extension",
    "read_document",
    "shared_pool",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
