"""Recognising what a file or a response body is, from its first bytes, its name and its type.

Magic bytes win over the extension (a ``.pdf`` that is really HTML is read as HTML), the
extension wins over a vague content type (``application/octet-stream``), and text that decodes
cleanly is text. The result is one of the format names the converter understands, or a media
kind (``image``/``audio``) or ``zip``, or ``None`` for "unknown binary".
"""

from __future__ import annotations

import codecs
import mimetypes
import re
from pathlib import Path

# Formats read as documents by the converter worker.
DOCUMENT_FORMATS = frozenset(
    {
        "pdf",
        "docx",
        "pptx",
        "xlsx",
        "xls",
        "csv",
        "tsv",
        "html",
        "json",
        "jsonl",
        "xml",
        "text",
        "ipynb",
        "epub",
    }
)
IMAGE_FORMAT = "image"
AUDIO_FORMAT = "audio"
ZIP_FORMAT = "zip"

_EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".xls": "xls",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".json": "json",
    ".geojson": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonld": "json",
    ".xml": "xml",
    ".rss": "xml",
    ".atom": "xml",
    ".svg": "xml",
    ".kml": "xml",
    ".gpx": "xml",
    ".ipynb": "ipynb",
    ".epub": "epub",
    ".zip": "zip",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".webp": "image",
    ".bmp": "image",
    ".tif": "image",
    ".tiff": "image",
    ".mp3": "audio",
    ".wav": "audio",
    ".m4a": "audio",
    ".ogg": "audio",
    ".oga": "audio",
    ".flac": "audio",
    ".webm": "audio",
    ".mp4": "audio",  # transcription endpoints accept the audio track of mp4
    ".mpga": "audio",
    ".mpeg": "audio",
}

# Extensions of plain text, shown as text with a language hint for code.
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".go": "go",
    ".rs": "rust",
    ".rb": "ruby",
    ".php": "php",
    ".sh": "bash",
    ".sql": "sql",
    ".r": "r",
    ".swift": "swift",
    ".kt": "kotlin",
    ".scala": "scala",
    ".m": "matlab",
    ".jl": "julia",
    ".lua": "lua",
    ".pl": "perl",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".md": "markdown",
    ".tex": "latex",
    ".css": "css",
    ".pdb": "pdb",
}

_ZIP_CONTAINERS = {  # OOXML and friends are ZIP files: tell them apart by a member name
    "word/document.xml": "docx",
    "ppt/presentation.xml": "pptx",
    "xl/workbook.xml": "xlsx",
    "META-INF/container.xml": "epub",
}

_CONTENT_TYPES: dict[str, str] = {
    "application/pdf": "pdf",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/json": "json",
    "application/ld+json": "json",
    "application/geo+json": "json",
    "application/x-ndjson": "jsonl",
    "application/xml": "xml",
    "text/xml": "xml",
    "application/rss+xml": "xml",
    "application/atom+xml": "xml",
    "image/svg+xml": "xml",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/zip": "zip",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.ms-excel": "xls",
    "application/epub+zip": "epub",
}


def sniff(head: bytes) -> str | None:
    """The format the first bytes prove, or ``None`` when they prove nothing."""
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"  # refined by :func:`refine_zip`
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "xls"  # OLE2: legacy Office; .xls is the one we read
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")):
        return IMAGE_FORMAT
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return IMAGE_FORMAT
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return IMAGE_FORMAT
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return AUDIO_FORMAT
    if head.startswith((b"ID3", b"OggS", b"fLaC", b"\x1aE\xdf\xa3")) or head[:2] in (
        b"\xff\xfb",
        b"\xff\xf3",
        b"\xff\xf2",
    ):
        return AUDIO_FORMAT
    if head[4:8] == b"ftyp":
        return AUDIO_FORMAT  # mp4/m4a container
    return None  # gzip, bzip2, xz, 7z and the rest: nothing the readers take


def refine_zip(path: Path) -> str:
    """Tell a plain ZIP from the Office/EPUB formats that are ZIP files underneath."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return ZIP_FORMAT  # reading it as an archive will report the damage
    for member, fmt in _ZIP_CONTAINERS.items():
        if member in names:
            return fmt
    return ZIP_FORMAT


def looks_like_text(head: bytes) -> bool:
    """True when the bytes are plausibly text (no NULs, decodable, few control characters)."""
    if not head:
        return True
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    from charset_normalizer import from_bytes

    best = from_bytes(head).best()
    return best is not None


def _text_flavour(head: bytes) -> str:
    """Refine text into html/xml/json by its first non-blank characters."""
    start = head.lstrip()[:200].lower()
    if start.startswith((b"<!doctype html", b"<html")) or b"<html" in start:
        return "html"
    if start.startswith(b"<?xml") or (start.startswith(b"<") and b"<rss" in start):
        return "xml"
    if start.startswith((b"{", b"[")):
        return "json"
    return "text"


def detect_format(
    path: Path, *, content_type: str | None = None, name_hint: str | None = None
) -> str | None:
    """The format of the file at ``path``.

    Args:
        path: the file (its first 8 KiB are read).
        content_type: a MIME type from an HTTP response, if any.
        name_hint: the original name (e.g. the URL's last segment) when ``path`` is a temp file.

    Returns:
        A name from :data:`DOCUMENT_FORMATS`, ``"image"``, ``"audio"``, ``"zip"``, or ``None``
        for an unknown binary format.
    """
    with path.open("rb") as handle:
        head = handle.read(8192)
    sniffed = sniff(head)
    if sniffed == ZIP_FORMAT:
        return refine_zip(path)
    if sniffed is not None:
        return sniffed
    suffix = Path(name_hint or path.name).suffix.lower()
    by_extension = _EXTENSIONS.get(suffix) or ("text" if suffix in CODE_LANGUAGES else None)
    mime = (content_type or "").split(";")[0].strip().lower()
    by_type = _CONTENT_TYPES.get(mime)
    if mime.startswith("image/") and mime != "image/svg+xml":
        by_type = IMAGE_FORMAT
    elif mime.startswith(("audio/", "video/")):
        by_type = AUDIO_FORMAT
    if not looks_like_text(head):
        # A binary body: only formats whose magic we could not check are left to trust.
        candidate = by_extension or by_type
        return candidate if candidate in (IMAGE_FORMAT, AUDIO_FORMAT, "xls") else None
    if by_extension in DOCUMENT_FORMATS and by_extension not in ("pdf", "docx", "pptx", "xlsx"):
        return by_extension
    if by_type in DOCUMENT_FORMATS and by_type not in ("pdf", "docx", "pptx", "xlsx", "xls"):
        if by_type == "html" and _text_flavour(head) == "json":
            return "json"  # servers label JSON APIs text/html surprisingly often
        return by_type
    return _text_flavour(head)


def charset_of(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header, if it names a known encoding."""
    if not content_type:
        return None
    match = re.search(r"charset\s*=\s*[\"']?([\w.:-]+)", content_type, re.IGNORECASE)
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1)).name
    except LookupError:
        return None


def guess_extension(fmt: str | None, content_type: str | None) -> str:
    """A file extension for saving a downloaded body of this format."""
    reverse = {v: k for k, v in reversed(list(_EXTENSIONS.items()))}
    if fmt and fmt in reverse and fmt not in (IMAGE_FORMAT, AUDIO_FORMAT):
        return reverse[fmt]
    mime = (content_type or "").split(";")[0].strip()
    return mimetypes.guess_extension(mime) or (".txt" if fmt == "text" else ".bin")
