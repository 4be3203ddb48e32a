"""Turning documents into text a model can read. Runs inside the sandbox, in a conversion job.

Everything here parses untrusted bytes (web pages, attachments), so the host never calls it
directly: :mod:`kgot.documents.convert_pool` ships it into the project's sandbox (no network, no
host files but the document, memory and time caps), where a warm worker has already imported
the parser libraries (:data:`PRELOAD`). It imports nothing of kgot's but :mod:`.formats`, which
travels with it. Office formats and PDF go through markitdown's converters
(called directly: its format-guessing front door would load an ML model for nothing), web pages
through trafilatura, tables are rendered as Markdown tables.
"""

from __future__ import annotations

import base64
import codecs
import csv
import io
import json
import re
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from .formats import CODE_LANGUAGES  # relative: the sandbox imports it from a zip

MAX_LINKS = 300
IMAGE_MAX_SIDE = 1568  # larger images cost more vision tokens without helping most questions
IMAGE_MAX_PIXELS = 80_000_000  # refuse decompression bombs
SCANNED_PAGE_LIMIT = 8  # pages of a text-less PDF rendered for the vision model


class ConversionError(Exception):
    """A document could not be read; ``kind`` is ``corrupt`` or ``unsupported``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def convert(fmt: str, path: str, options: dict[str, Any]) -> dict[str, Any]:
    """Read the file at ``path`` as ``fmt``.

    Args:
        fmt: a format name from :mod:`kgot.documents.formats`, ``wiki_html`` or ``image``.
        path: the file to read.
        options: ``name`` (shown in messages), ``url`` (base for links), ``full_page``,
            ``links`` (collect the page's links), ``extension``.

    Returns:
        ``{"text": str, "title": str | None, "notes": [str], "links": [[text, url]]}``; images
        return ``{"meta": {...}, "image_b64": str, "mime": str}`` instead of text.

    Raises:
        ConversionError: the file is damaged, or the format is not one we read.
    """
    handler = _HANDLERS.get(fmt)
    if handler is None:
        raise ConversionError("unsupported", f"no reader for format {fmt!r}")
    name = options.get("name") or Path(path).name
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return handler(Path(path), options)
    except ConversionError:
        raise
    except MemoryError:
        raise ConversionError(
            "corrupt", f"{name} needs more memory than allowed to parse"
        ) from None
    except RecursionError:
        raise ConversionError("corrupt", f"{name} is nested too deeply to parse") from None
    except Exception as error:  # a parser's own exception types are many and undocumented
        raise ConversionError(
            "corrupt",
            f"cannot read {name} as {fmt.upper()} ({type(error).__name__}: {error}); the file is "
            "damaged or not really of that format — look for another copy, or inspect its bytes "
            "with the python tool",
        ) from None


def _result(
    text: str,
    title: str | None = None,
    notes: list[str] | None = None,
    links: list[list[str]] | None = None,
) -> dict[str, Any]:
    return {"text": text, "title": title, "notes": notes or [], "links": links or []}


def decode_text(raw: bytes, declared: str | None = None, *, html: bool = False) -> str:
    """Decode bytes of uncertain encoding.

    The order is the one browsers use: a byte-order mark, then the encoding the server
    declared (``Content-Type: …; charset=``), then for HTML a ``<meta charset>`` in its first
    bytes, then UTF-8, then statistical detection.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", errors="replace")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    for encoding in (declared, _meta_charset(raw) if html else None):
        if encoding:
            try:
                return raw.decode(_web_encoding(encoding), errors="replace")
            except LookupError:
                pass
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    return str(best) if best is not None else raw.decode("latin-1")


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def _meta_charset(raw: bytes) -> str | None:
    match = _META_CHARSET.search(raw[:4096])
    return match.group(1).decode("ascii") if match else None


def _web_encoding(label: str) -> str:
    """Python's codec for an encoding label as the web uses it.

    Browsers read "iso-8859-1", "latin1" and "ascii" as windows-1252 (the WHATWG Encoding
    standard), and pages declaring them routinely contain its curly quotes and euro signs.
    """
    name = codecs.lookup(label).name
    return "cp1252" if name in ("iso8859-1", "latin-1", "ascii") else name


# -- markitdown-backed formats ------------------------------------------------------------------


def _markitdown(converter_name: str, path: Path, extension: str, **kwargs: Any) -> Any:
    from markitdown import StreamInfo, converters

    converter = getattr(converters, converter_name)()
    with path.open("rb") as stream:
        return converter.convert(
            stream, StreamInfo(extension=extension, filename=path.name), **kwargs
        )


def _pdf(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Text of every page, from one pass of pdfminer (encryption and damage reported)."""
    from pdfminer.converter import TextConverter
    from pdfminer.layout import LAParams
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser, PDFSyntaxError

    name = options.get("name") or path.name
    pages: list[str] = []
    with path.open("rb") as handle:
        try:
            document = PDFDocument(PDFParser(handle))
        except (PDFPasswordIncorrect, PDFEncryptionError):
            raise ConversionError(
                "unsupported",
                f"{name} is password-protected; its text cannot be read without the password "
                "— look for an unprotected copy of it",
            ) from None
        except PDFSyntaxError as error:
            raise ConversionError("corrupt", _damaged(name, "PDF", f"{error}")) from None
        resources = PDFResourceManager(caching=True)
        for page in PDFPage.create_pages(document):
            buffer = io.StringIO()
            device = TextConverter(resources, buffer, laparams=LAParams())
            try:
                PDFPageInterpreter(resources, device).process_page(page)
            finally:
                device.close()
            pages.append(buffer.getvalue())
        title = _pdf_title(document)
    if not any(page.strip() for page in pages):
        output = _result("", title, ["this PDF has no text layer (probably scanned pages)"])
        output["page_images"] = _render_pages(path, SCANNED_PAGE_LIMIT)
        return output
    if len(pages) == 1:
        return _result(pages[0].strip(), title)
    text = "\n\n".join(
        f"[PDF page {number}]\n{page.strip()}" for number, page in enumerate(pages, 1)
    )
    return _result(text.strip(), title)


def _pdf_title(document: Any) -> str | None:
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text as decode_pdf_text

    for info in document.info or []:
        value = resolve1(info.get("Title")) if isinstance(info, dict) else None
        if isinstance(value, bytes):
            value = decode_pdf_text(value)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _damaged(name: str, kind: str, detail: str) -> str:
    return (
        f"{name} is not a readable {kind} (damaged or truncated: {detail}); download it again "
        "or look for another copy, or inspect its bytes with the python tool"
    )


def _render_pages(path: Path, limit: int) -> list[str]:
    """The first ``limit`` pages as base64 PNGs, for a vision model to read."""
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        images = []
        for index in range(min(limit, len(document))):
            bitmap = document[index].render(scale=150 / 72)  # 150 dpi: enough to read text
            image = bitmap.to_pil()
            image.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", optimize=True)
            images.append(base64.b64encode(buffer.getvalue()).decode())
        return images
    finally:
        document.close()


def _docx(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = _markitdown("DocxConverter", path, ".docx")
    return _result(result.markdown.strip(), result.title)


def _pptx(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = _markitdown("PptxConverter", path, ".pptx")
    return _result(result.markdown.strip(), result.title)


def _xlsx(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Each sheet as a Markdown table, read with openpyxl directly.

    markitdown goes through pandas and HTML, which is ~20x slower on large sheets and turns a
    first row of numbers into mangled column names; here every row is shown as stored, with
    formulas as their last computed values.
    """
    import openpyxl

    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sections = []
        for sheet in workbook.worksheets:
            rows = [[_cell_text(v) for v in row] for row in sheet.iter_rows(values_only=True)]
            rows = _trim_table(rows)
            if not rows:
                sections.append(f"## {sheet.title}\n(empty sheet)")
                continue
            width = max(len(row) for row in rows)
            sections.append(
                f"## {sheet.title}\n{len(rows)} rows × {width} columns (first row shown as the "
                f"table header)\n\n{markdown_table(rows)}"
            )
    finally:
        workbook.close()
    return _result("\n\n".join(sections))


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # 3.0 in a cell is shown as Excel shows it: 3
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.removesuffix("T00:00:00")
    return str(value)


def _trim_table(rows: list[list[str]]) -> list[list[str]]:
    """Drop empty rows and the empty columns at the right edge (sheets are padded)."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    width = 0
    for row in rows:
        for index in range(len(row) - 1, -1, -1):
            if row[index].strip():
                width = max(width, index + 1)
                break
    return [row[:width] for row in rows]


def _xls(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = _markitdown("XlsConverter", path, ".xls")
    return _result(result.markdown.strip(), result.title)


def _ipynb(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = _markitdown("IpynbConverter", path, ".ipynb")
    return _result(result.markdown.strip(), result.title)


def _epub(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = _markitdown("EpubConverter", path, ".epub")
    return _result(result.markdown.strip(), result.title)


# -- tables ---------------------------------------------------------------------------------------


def markdown_table(rows: list[list[str]]) -> str:
    """Rows (the first is the header) as a Markdown table; ragged rows are padded."""
    if not rows:
        return ""
    width = max(len(row) for row in rows)

    def cell(value: str) -> str:
        return value.replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()

    lines = []
    for index, row in enumerate(rows):
        padded = [cell(v) for v in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(padded) + " |")
        if index == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)


def _delimited(path: Path, options: dict[str, Any], delimiter: str | None) -> dict[str, Any]:
    text = decode_text(path.read_bytes(), options.get("charset"))
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:20_000], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    csv.field_size_limit(10_000_000)
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    rows = [row for row in rows if any(field.strip() for field in row)]
    if not rows:
        return _result("", notes=["the file holds no rows"])
    columns = max(len(row) for row in rows)
    header = f"{len(rows) - 1} data rows × {columns} columns (first row taken as the header)"
    return _result(f"{header}\n\n{markdown_table(rows)}")


def _csv(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    return _delimited(path, options, None)


def _tsv(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    return _delimited(path, options, "\t")


# -- structured text ------------------------------------------------------------------------------


def _json(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    text = decode_text(path.read_bytes(), options.get("charset"))
    try:
        data = json.loads(text)
    except ValueError as error:
        return _result(text, notes=[f"not valid JSON ({error}); shown as plain text"])
    return _result(json.dumps(data, indent=2, ensure_ascii=False))


def _jsonl(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    lines = decode_text(path.read_bytes(), options.get("charset")).splitlines()
    return _result("\n".join(line for line in lines if line.strip()))


def _xml(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    from lxml import etree

    raw = path.read_bytes()
    # No entity expansion and no network: XML from the web may try both.
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, remove_blank_text=True, huge_tree=False
    )
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as error:
        return _result(decode_text(raw), notes=[f"not well-formed XML ({error}); shown as text"])
    pretty = etree.tostring(root, pretty_print=True, encoding="unicode")
    return _result(pretty.strip())


def _text(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    text = decode_text(path.read_bytes(), options.get("charset"))
    extension = (options.get("extension") or path.suffix).lower()
    language = CODE_LANGUAGES.get(extension)
    if language and language != "markdown":
        return _result(f"```{language}\n{text.rstrip()}\n```")
    return _result(text)


# -- web pages ------------------------------------------------------------------------------------


def _html(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    raw = path.read_bytes()
    html = decode_text(raw, options.get("charset"), html=True)
    url = options.get("url")
    title = _html_title(html)
    text = None
    if not options.get("full_page"):
        text = _main_content(html, url)
    notes = []
    if not text:
        text = _full_page(html)
        if not options.get("full_page"):
            notes.append("no main article found; showing the whole page")
    links = _links(html, url) if options.get("links") else []
    return _result(text.strip(), title, notes, links)


def _main_content(html: str, url: str | None) -> str | None:
    import trafilatura

    return trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        favor_recall=True,
        deduplicate=False,
    )


def _full_page(html: str) -> str:
    from markitdown import StreamInfo
    from markitdown.converters import HtmlConverter

    result = HtmlConverter().convert(
        io.BytesIO(html.encode("utf-8")), StreamInfo(extension=".html", charset="utf-8")
    )
    return result.markdown or ""


def _html_title(html: str) -> str | None:
    import lxml.html

    try:
        document = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return None
    found = document.findtext(".//title")
    return " ".join(found.split()) if found else None


def _links(html: str, base_url: str | None) -> list[list[str]]:
    import lxml.html

    try:
        document = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return []
    seen: set[str] = set()
    links: list[list[str]] = []
    for anchor in document.iter("a"):
        href = (anchor.get("href") or "").strip()
        if not href or href.startswith(("javascript:", "mailto:", "#")):
            continue
        absolute = urldefrag(urljoin(base_url or "", href)).url
        if not absolute.startswith(("http://", "https://")) or absolute in seen:
            continue
        seen.add(absolute)
        label = " ".join(anchor.text_content().split())[:120]
        links.append([label, absolute])
        if len(links) >= MAX_LINKS:
            break
    return links


_WIKI_NOISE = (
    "//script",
    "//style",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' mw-editsection ')]",
    "//sup[contains(concat(' ', normalize-space(@class), ' '), ' reference ')]",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' navbox ')]",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' mw-empty-elt ')]",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' ambox ')]",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' noprint ')]",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' mw-jump-link ')]",
)


def _wiki_html(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """MediaWiki-rendered article HTML: keep prose, infoboxes and tables, drop edit chrome."""
    import lxml.html

    html = decode_text(path.read_bytes())
    document = lxml.html.fromstring(f"<html><body>{html}</body></html>")
    for xpath in _WIKI_NOISE:
        for element in document.xpath(xpath):
            parent = element.getparent()
            if parent is not None:
                element.drop_tree()
    cleaned = lxml.html.tostring(document, encoding="unicode")
    return _result(_full_page(cleaned).strip(), options.get("title"))


# -- images ---------------------------------------------------------------------------------------


def _image(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = IMAGE_MAX_PIXELS
    name = options.get("name") or path.name
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                image.load()
                meta = {
                    "format": image.format,
                    "width": image.width,
                    "height": image.height,
                    "mode": image.mode,
                    "frames": getattr(image, "n_frames", 1),
                }
                shown = image.convert("RGBA" if image.mode in ("RGBA", "LA", "P") else "RGB")
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise ConversionError(
            "unsupported", f"{name} is larger than {IMAGE_MAX_PIXELS:,} pixels"
        ) from None
    except (OSError, SyntaxError, ValueError) as error:  # PIL's UnidentifiedImageError is OSError
        raise ConversionError("corrupt", f"{name} is not a readable image ({error})") from None
    shown.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
    buffer = io.BytesIO()
    if shown.mode == "RGBA":
        shown.save(buffer, format="PNG", optimize=True)
        mime = "image/png"
    else:
        shown.save(buffer, format="JPEG", quality=90)
        mime = "image/jpeg"
    meta["sent_width"], meta["sent_height"] = shown.size
    return {"meta": meta, "mime": mime, "image_b64": base64.b64encode(buffer.getvalue()).decode()}


def _probe(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Warm-up request: proves the worker is alive and its imports are done."""
    return _result("ok")


_HANDLERS = {
    "pdf": _pdf,
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "xls": _xls,
    "csv": _csv,
    "tsv": _tsv,
    "json": _json,
    "jsonl": _jsonl,
    "xml": _xml,
    "text": _text,
    "html": _html,
    "wiki_html": _wiki_html,
    "ipynb": _ipynb,
    "epub": _epub,
    "image": _image,
    "probe": _probe,
}


# The parser libraries a conversion worker imports before its first job (~1 s together), so a
# conversion pays a fork instead; a missing one only makes the formats that need it slower.
PRELOAD = (
    "lxml.html",
    "lxml.etree",
    "charset_normalizer",
    "markitdown",
    "markitdown.converters",
    "PIL.Image",
    "trafilatura",
    "pdfminer.pdfinterp",
    "pdfminer.converter",
    "pdfminer.layout",
    "openpyxl",
    "pypdfium2",
)
