"""visit_page: read a web page (or a PDF, spreadsheet, image… at a URL) a page at a time.

HTML is reduced to its main content by trafilatura (``full_page=true`` keeps everything);
other formats go through the same readers as inspect_file. With ``date``, the Wayback
Machine's copy closest to that date is read instead of the live page. Bodies that cannot be
shown as text (archives, audio, unknown binaries) are saved to the run's workspace, where
inspect_file and the python tool can open them.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from pydantic import Field

from kgot.documents import AUDIO_FORMAT, ZIP_FORMAT, detect_format, guess_extension
from kgot.tools.base import ToolFailure, ToolResult
from kgot.tools.dates import parse_date
from kgot.tools.media import capability_notes
from kgot.tools.paging import Document
from kgot.tools.reading import read_local
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.text import call_text, quoted
from kgot.tools.tool_session import ToolSession

_SAVED_FORMATS = (ZIP_FORMAT, AUDIO_FORMAT, None)


class VisitPageArgs(ToolArgs):
    url: str = Field(min_length=1, description="The full http(s) address of the page.")
    page: int = Field(1, ge=1, description="Which page of a long text to show (1 = first).")
    find: str | None = Field(
        None,
        description="Instead of a page, list every place these words occur, with the page "
        "number of each.",
    )
    date: str | None = Field(
        None,
        description="YYYY-MM-DD: read the Wayback Machine's archived copy closest to this "
        "date instead of the live page (for questions about how a page looked then).",
    )
    full_page: bool = Field(
        False,
        description="Keep the whole page (menus, sidebars, every table, repeated paragraphs) "
        "instead of only the main content. Use it to count or compare items: main-content "
        "mode merges identical paragraphs.",
    )
    links: bool = Field(
        False,
        description="Also list the page's links (to navigate onward); they come after the "
        "text, on the last pages, and find= searches them too.",
    )


def build(session: ToolSession) -> ToolFunction:
    async def visit_page(
        *,
        url: str,
        page: int = 1,
        find: str | None = None,
        date: str | None = None,
        full_page: bool = False,
        links: bool = False,
    ) -> ToolResult:
        url = url.strip()
        if "://" not in url and re.match(r"^[\w.-]+\.[a-z]{2,}(/|$)", url, re.IGNORECASE):
            url = "https://" + url  # models often drop the scheme
        day = parse_date(date, argument="date") if date else None
        key = json.dumps(["page", url, day, full_page, links])

        async def load() -> Document:
            if day:
                return await _load_archived(session, url, day, full_page, links)
            return await _load_live(session, url, full_page, links)

        again = call_text(
            "visit_page", {"url": url, "date": day, "full_page": full_page, "links": links}
        )
        document = await session.document(key, load, again=again)
        return ToolResult(
            session.show(document, page=page, find=find, again=again), document.source_ref
        )

    return visit_page


async def _load_live(session: ToolSession, url: str, full_page: bool, links: bool) -> Document:
    fetched = await session.http.fetch(url)
    return await _to_document(
        session,
        body=fetched.body,
        url=fetched.url,
        content_type=fetched.content_type,
        full_page=full_page,
        links=links,
    )


async def _load_archived(
    session: ToolSession, url: str, day: str, full_page: bool, links: bool
) -> Document:
    stamp = day.replace("-", "")
    data = await session.http.api(
        session.settings.wayback_api,
        params={"url": url, "timestamp": stamp},
        service="the Wayback Machine",
        setting="tools.wayback_api",
    )
    closest = ((data or {}).get("archived_snapshots") or {}).get("closest") or {}
    if not closest.get("available") or not closest.get("url"):
        raise ToolFailure(
            f"the Wayback Machine has no archived copy of {url} near {day}; read the live "
            "page, or search for another source about that time",
            kind="not_found",
            source_ref=url,
        )
    snapshot = str(closest["url"])
    # `id_` after the timestamp asks for the page as archived, without the archive's toolbar.
    raw_snapshot = re.sub(r"/web/(\d{1,14})/", r"/web/\1id_/", snapshot, count=1)
    # The configured archive may serve its snapshots itself (a local mirror): only its own
    # origin is exempt from the address check, never where a snapshot redirects.
    fetched = await session.http.fetch(raw_snapshot, trusted_endpoint=session.settings.wayback_api)
    document = await _to_document(
        session,
        body=fetched.body,
        url=url,
        content_type=fetched.content_type,
        full_page=full_page,
        links=links,
    )
    document.source_ref = snapshot
    taken = str(closest.get("timestamp") or "")
    when = (
        f"{taken[:4]}-{taken[4:6]}-{taken[6:8]} {taken[8:10]}:{taken[10:12]} UTC"
        if len(taken) >= 12
        else taken or "unknown date"
    )
    document.header = f"Archived copy of {url} from {when} (closest to {day}; Wayback Machine)"
    return document


async def _to_document(
    session: ToolSession,
    *,
    body: bytes,
    url: str,
    content_type: str | None,
    full_page: bool,
    links: bool,
) -> Document:
    name = _name_from_url(url)
    with tempfile.TemporaryDirectory(prefix="kgot-page-") as scratch:
        path = Path(scratch) / name
        path.write_bytes(body)
        fmt = detect_format(path, content_type=content_type, name_hint=name)
        if fmt in _SAVED_FORMATS:
            saved = session.save_bytes(_saved_name(name, fmt, content_type), body)
            return _saved_document(
                session, url=url, saved=saved, fmt=fmt, content_type=content_type, size=len(body)
            )
        if not body.strip():
            return Document(source_ref=url, text="", kind="web page", notes=["the page is empty"])
        return await read_local(
            session,
            path,
            name=name,
            source_ref=url,
            content_type=content_type,
            url=url,
            full_page=full_page,
            links=links,
        )


def _saved_document(
    session: ToolSession,
    *,
    url: str,
    saved: Path,
    fmt: str | None,
    content_type: str | None,
    size: int,
) -> Document:
    label = {ZIP_FORMAT: "a ZIP archive", AUDIO_FORMAT: "audio"}.get(fmt or "", "binary data")
    lines = [
        f"{url} serves {label} ({content_type or 'no content type'}, {size:,} bytes), not a "
        "page of text. It was saved for this run:",
        f"- read it with inspect_file(path={quoted(session.model_path(saved))})",
    ]
    where = session.sandbox_path(saved)
    if where:
        lines.append(f"- or open it in the python tool at {where}")
    return Document(source_ref=url, text="\n".join(lines), kind="download")


def _name_from_url(url: str) -> str:
    last = PurePosixPath(unquote(urlsplit(url).path)).name
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in last).strip("._")
    return safe[:100] or "page"


def _saved_name(name: str, fmt: str | None, content_type: str | None) -> str:
    if Path(name).suffix:
        return name
    return name + guess_extension(fmt, content_type)


SPEC = ToolSpec(
    name="visit_page",
    description=(
        "Read a web page as text: HTML pages (main content, tables kept), and also PDFs, "
        "spreadsheets, Word files and images at a URL. Long pages come in numbered pages; use "
        "page= to move and find= to jump to the words you need. date=YYYY-MM-DD reads the "
        "archived copy of the page from that time. The main-content reading drops menus and "
        "merges repeated identical paragraphs: to count items on a page, use full_page=true."
    ),
    args_schema=VisitPageArgs,
    more_hint="ask for another page with page=, or locate text with find=",
    build=build,
    reads_documents=True,
    notes=lambda settings: [
        *capability_notes(settings, audio=False),
        *(
            ["private and loopback addresses allowed (tools.allow_private_urls)"]
            if settings.tools.allow_private_urls
            else []
        ),
    ],
)
