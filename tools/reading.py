"""Reading one local file of any supported kind into a pageable :class:`Document`.

Shared by inspect_file (attachments, downloads) and visit_page (a URL that serves a PDF, a
spreadsheet or an image rather than HTML).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from kgot.documents import (
    AUDIO_FORMAT,
    DOCUMENT_FORMATS,
    IMAGE_FORMAT,
    ZIP_FORMAT,
    charset_of,
    detect_format,
)
from kgot.tools.access import make_private_dir
from kgot.tools.base import ToolFailure
from kgot.tools.media import ask_vision, look_at_image, transcribe, vision_model
from kgot.tools.paging import Document, links_section
from kgot.tools.text import quoted
from kgot.tools.tool_session import ToolSession

KIND_LABELS = {
    "pdf": "PDF",
    "docx": "Word document",
    "pptx": "PowerPoint presentation",
    "xlsx": "Excel workbook",
    "xls": "Excel workbook",
    "csv": "CSV table",
    "tsv": "TSV table",
    "html": "web page",
    "json": "JSON document",
    "jsonl": "JSON Lines file",
    "xml": "XML document",
    "text": "text file",
    "ipynb": "Jupyter notebook",
    "epub": "e-book",
    IMAGE_FORMAT: "image",
    AUDIO_FORMAT: "audio file",
    ZIP_FORMAT: "ZIP archive",
}
MAX_LISTED_MEMBERS = 300
SCANNED_PAGE_PROMPT = (
    "This is a scanned document page. Transcribe all of its text verbatim, in reading order; "
    "render tables as Markdown tables. Output only the transcription."
)
MAX_COMPRESSION_RATIO = 200  # beyond this a member is treated as a decompression bomb


async def read_local(
    session: ToolSession,
    path: Path,
    *,
    name: str,
    source_ref: str,
    content_type: str | None = None,
    question: str | None = None,
    url: str | None = None,
    full_page: bool = False,
    links: bool = False,
) -> Document:
    """Read ``path`` into a document, whatever its format.

    Raises:
        ToolFailure: ``unsupported`` (unknown binary), ``corrupt``, ``unavailable`` (image or
            audio without a model), ``timeout``.
    """
    fmt = detect_format(path, content_type=content_type, name_hint=name)
    if fmt == ZIP_FORMAT:
        return list_zip(session, path, name=name, source_ref=source_ref)
    if fmt == IMAGE_FORMAT:
        text = await look_at_image(session, path, name=name, question=question)
        return Document(source_ref=source_ref, text=text, kind="image")
    if fmt == AUDIO_FORMAT:
        text = await transcribe(session, path, name=name)
        return Document(source_ref=source_ref, text=text, kind="transcript")
    if fmt not in DOCUMENT_FORMATS:
        raise ToolFailure(
            _unsupported_message(session, path, name), kind="unsupported", source_ref=source_ref
        )
    options = {
        "name": name,
        "url": url,
        "full_page": full_page,
        "links": links,
        "extension": Path(name).suffix.lower(),
        "charset": charset_of(content_type),
    }
    result = await session.convert(fmt, path, options)
    notes = list(result.get("notes") or [])
    if result.get("page_images"):
        result["text"] = await _read_page_images(session, result["page_images"], name, notes)
    if question:
        notes.append("the question argument only applies to images; read the text below")
    text = result.get("text") or ""
    if result.get("links"):  # part of the text: paged with it, and find= searches them
        text = (
            f"{text}\n\n{links_section(result['links'])}"
            if text
            else links_section(result["links"])
        )
    return Document(
        source_ref=source_ref,
        text=text,
        title=result.get("title"),
        kind=KIND_LABELS.get(fmt, "document"),
        notes=notes,
    )


async def _read_page_images(
    session: ToolSession, images: list[str], name: str, notes: list[str]
) -> str:
    """Text of scanned PDF pages, read by the vision model when there is one."""
    model = vision_model(session)
    if model is None:
        notes.append(
            "its pages are images; set tools.vision_model to have them read, or try OCR in "
            "the python tool"
        )
        return ""
    readings = await asyncio.gather(
        *(
            ask_vision(model, image, "image/png", SCANNED_PAGE_PROMPT, name=name, source_ref=name)
            for image in images
        )
    )
    notes.append(f"text read from {len(images)} page image(s) by the vision model")
    return "\n\n".join(
        f"[PDF page {number}]\n{text.strip()}" for number, text in enumerate(readings, 1)
    )


def _unsupported_message(session: ToolSession, path: Path, name: str) -> str:
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8).hex(" ")
    where = session.sandbox_path(path)
    hint = f"; the python tool can open it at {where}" if where else ""
    return (
        f"{name} is a binary file of a format this tool cannot read ({size:,} bytes, first "
        f"bytes {head}); readable formats: PDF, Word, Excel, PowerPoint, CSV, HTML, JSON, XML, "
        f"text and code, ZIP, images, audio{hint}"
    )


# -- ZIP archives ---------------------------------------------------------------------------------


def list_zip(session: ToolSession, path: Path, *, name: str, source_ref: str) -> Document:
    """The members of an archive, and how to read one."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise ToolFailure(
            f"{name} is not a readable ZIP archive ({error}); it is truncated or damaged — "
            "download it again or look for another copy",
            kind="corrupt",
            source_ref=source_ref,
        ) from None
    total = sum(m.file_size for m in members)
    lines = [f"{len(members)} file(s), {total:,} bytes uncompressed:"]
    for member in members[:MAX_LISTED_MEMBERS]:
        flag = " (encrypted)" if member.flag_bits & 0x1 else ""
        lines.append(f"- {member.filename} ({member.file_size:,} bytes){flag}")
    if len(members) > MAX_LISTED_MEMBERS:
        lines.append(f"… and {len(members) - MAX_LISTED_MEMBERS} more")
    lines.append(
        f"Read a member with inspect_file(path={quoted(name)}, member=<name from the list>)."
    )
    return Document(source_ref=source_ref, text="\n".join(lines), kind="ZIP archive")


def extract_member(session: ToolSession, archive_path: Path, member: str, *, name: str) -> Path:
    """Extract one member into the workspace (safely) and return where it is.

    Members of one archive go to a folder named after the archive's identity (its resolved
    path, size and modification time), so two archives with the same name never share
    extracted files and a changed archive is extracted afresh. Concurrent calls for the same
    member extract it once; each writes to a temporary file of its own, renamed into place
    when complete, so a reader never sees half a file.

    Raises:
        ToolFailure: ``input`` (no such member, encrypted), ``corrupt`` (damaged archive),
            ``unsupported`` (too large or a likely decompression bomb).
    """
    cap = session.settings.max_download_mb * 1024 * 1024
    wanted = member.strip()
    if not _looks_like_zip(archive_path):
        # The file may be perfectly good: "damaged archive" would send the model to fetch it
        # again, when what is wrong is the member= argument.
        raise ToolFailure(
            f"{name} is not a ZIP archive, so it has no member {member!r}; call "
            f"inspect_file(path={quoted(name)}) without member= to read it",
            kind="input",
        )
    try:
        with zipfile.ZipFile(archive_path) as archive:
            infos = {i.filename: i for i in archive.infolist() if not i.is_dir()}
            info = _find_member(infos, wanted)
            if info is None:
                close = [n for n in infos if PurePosixPath(n).name == PurePosixPath(wanted).name]
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ToolFailure(
                    f"{name} has no member {member!r}; {hint}call inspect_file(path="
                    f"{quoted(name)}) to list its members",
                    kind="input",
                )
            if info.flag_bits & 0x1:
                raise ToolFailure(
                    f"{member} in {name} is encrypted and cannot be read without its password",
                    kind="input",
                )
            ratio = info.file_size / max(1, info.compress_size)
            if info.file_size > cap or (ratio > MAX_COMPRESSION_RATIO and info.file_size > 1 << 20):
                raise ToolFailure(
                    f"{member} in {name} unpacks to {info.file_size:,} bytes (compression ratio "
                    f"{ratio:.0f}:1); members over {session.settings.max_download_mb} MB, or over "
                    f"1 MiB at a ratio above {MAX_COMPRESSION_RATIO}:1, are not extracted",
                    kind="unsupported",
                )
            target = _member_target(session, archive_path, info.filename)
            with session.path_lock(target):
                if not target.is_file():
                    make_private_dir(target.parent)
                    _copy_member(archive, info, target, cap, label=f"{member} in {name}")
            return target
    except ToolFailure:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,
    ) as error:
        raise ToolFailure(
            f"cannot extract {member} from {name} ({type(error).__name__}: {error}); the "
            "archive is damaged or uses an unsupported compression — download it again, or "
            "look for another copy",
            kind="corrupt",
        ) from None


def _find_member(infos: dict[str, zipfile.ZipInfo], wanted: str) -> zipfile.ZipInfo | None:
    """The member named ``wanted``: exactly as listed, or else the one member whose name is
    the same once leading slashes and ``./`` are dropped (``/data/x.csv`` as ``data/x.csv``)."""
    if wanted in infos:
        return infos[wanted]
    same = [info for name, info in infos.items() if _plain_name(name) == _plain_name(wanted)]
    return same[0] if len(same) == 1 else None


def _plain_name(name: str) -> str:
    return str(PurePosixPath(name.lstrip("/")))


def _looks_like_zip(path: Path) -> bool:
    """A ZIP by its first bytes (damaged ones included) or its central directory (archives
    with a prefix, such as self-extracting ones)."""
    try:
        with path.open("rb") as handle:
            if handle.read(2) == b"PK":
                return True
        return zipfile.is_zipfile(path)
    except OSError:
        return True  # let the extraction report the read error


def _copy_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, cap: int, *, label: str
) -> None:
    """Write one member to ``target`` through a temporary file only this call uses."""
    descriptor, partial_name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".part"
    )
    partial = Path(partial_name)
    try:
        written = 0
        with archive.open(info) as source, os.fdopen(descriptor, "wb") as sink:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                if written > cap:  # the header lied about the size
                    raise ToolFailure(
                        f"{label} unpacks to more than {cap // (1024 * 1024)} MB "
                        "(tools.max_download_mb)",
                        kind="unsupported",
                    )
                sink.write(chunk)
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)  # only this call's own partial file
        raise


def _member_target(session: ToolSession, archive_path: Path, member: str) -> Path:
    stat = archive_path.stat()
    identity = f"{archive_path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    base = session.workspace / f"{archive_path.stem}-unzipped-{digest}"
    # Without its leading slashes a name has no anchor part ("/" or "//"), which would make
    # the join below an absolute path.
    parts = [p for p in PurePosixPath(member.lstrip("/")).parts if p not in ("", ".", "..")]
    target = base.joinpath(*parts) if parts else base / "member"
    resolved = target.resolve()
    if not resolved.is_relative_to(base.resolve()):  # a crafted name cannot escape
        resolved = base / PurePosixPath(member).name
    return resolved
