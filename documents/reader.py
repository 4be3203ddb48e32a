"""``read_document``: a file, or its bytes, to text — or a typed reason why not.

Plain text is decoded here (there is nothing to parse); every other document goes to the
sandbox's conversion workers (:mod:`.convert_pool`), since parsing untrusted bytes never
happens in the kgot process. What did not work comes back as an :class:`Unreadable` whose
``problem`` says which kind of failure it was, so a caller decides by type, never by matching
the wording of a message; ``detail`` is the words to show.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kgot.documents import convert_pool
from kgot.documents.convert import decode_text
from kgot.documents.formats import DOCUMENT_FORMATS, detect_format
from kgot.errors import ToolFailure

if TYPE_CHECKING:
    from kgot.config import Settings

Problem = Literal["missing", "unreadable", "not_a_document", "failed", "parser_unavailable"]
"""Why a document gave no text:

* ``missing`` — no file at the path (or not a regular file);
* ``unreadable`` — the file is there but the system refused to read it;
* ``not_a_document`` — an image, audio, an archive or an unknown binary (see ``format``);
* ``failed`` — the parse failed: a damaged file, a bomb, a timeout;
* ``parser_unavailable`` — the sandbox's conversion workers cannot start: the machine's
  fault, not the file's.
"""


@dataclass(frozen=True)
class DocumentText:
    """A document's text and, when it states one, its title.

    Attributes:
        format: what it was read as (a name from :data:`.formats.DOCUMENT_FORMATS`).
    """

    text: str
    title: str | None
    format: str


@dataclass(frozen=True)
class Unreadable:
    """Why a document gave no text.

    Attributes:
        problem: the kind of failure (see :data:`Problem`).
        detail: what went wrong, in words (the system's reason, the parser's message).
        format: what the file was recognised as, when it was (``"image"``, ``"zip"``, …;
            ``None`` for an unknown binary or a file that could not be looked at).
    """

    problem: Problem
    detail: str
    format: str | None = None


ReadOutcome = DocumentText | Unreadable


async def read_document(
    source: Path | bytes, settings: Settings, *, name: str | None = None
) -> ReadOutcome:
    """The text of a document: a file at a path, or a file's bytes.

    Args:
        source: the file, or its content (read once by the caller, e.g. to hash it: the text
            returned is then the text of exactly those bytes, whatever happens to the file).
        settings: ``tools.converter_memory_mb`` and ``tools.timeout`` bound a parse, and
            ``sandbox`` is the isolation it runs in.
        name: the file's name, for recognising its format by extension and for messages;
            required with bytes, the path's own name by default.
    """
    if isinstance(source, bytes):
        if name is None:
            raise TypeError("read_document needs the name of a document given as bytes")
        with tempfile.TemporaryDirectory(prefix="kgot-document-") as scratch:
            copy = Path(scratch) / ("document" + Path(name).suffix.lower())
            copy.write_bytes(source)
            return await _read(copy, name, source, settings)
    if not source.is_file():
        return Unreadable("missing", "does not exist or is not a file")
    return await _read(source, name or source.name, None, settings)


async def _read(path: Path, name: str, content: bytes | None, settings: Settings) -> ReadOutcome:
    try:
        fmt = detect_format(path, name_hint=name)
        if fmt == "text":
            # Plain text needs no parser: decoding it is all there is to do.
            raw = path.read_bytes() if content is None else content
            return DocumentText(decode_text(raw), None, "text")
    except OSError as error:
        return Unreadable("unreadable", error.strerror or str(error))
    if fmt not in DOCUMENT_FORMATS:
        return Unreadable("not_a_document", f"{name} is not a document kgot reads", fmt)
    # Looked up at call time, so a test can stand in a pool that fails as a machine would.
    pool = convert_pool.shared_pool(settings.tools.converter_memory_mb, settings.sandbox)
    options = {"name": name, "extension": Path(name).suffix.lower()}
    try:
        result = await pool.aconvert(fmt, path, options, timeout=settings.tools.timeout)
    except convert_pool.ParserUnavailable as down:
        return Unreadable("parser_unavailable", str(down), fmt)
    except ToolFailure as failure:
        return Unreadable("failed", str(failure), fmt)
    title = result.get("title")
    return DocumentText(str(result.get("text") or ""), str(title) if title else None, fmt)
