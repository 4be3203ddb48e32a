"""wikipedia: search, read an article, or read it as it was on a given date.

Everything goes through the MediaWiki Action API at ``tools.wikipedia_api`` (English Wikipedia
by default; any language edition or MediaWiki site works). Articles are rendered by the wiki
itself (``action=parse``), so tables, infoboxes and lists survive as Markdown tables and lists;
the date form first asks the revision history for the last revision on or before that day and
renders exactly that revision.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from pydantic import Field

from kgot.tools.base import ErrorKind, ToolFailure, ToolResult
from kgot.tools.dates import parse_date
from kgot.tools.paging import Document
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.text import call_text, strip_markup
from kgot.tools.tool_session import ToolSession

SEARCH_LIMIT = 8


class WikipediaArgs(ToolArgs):
    query: str = Field(
        min_length=1,
        description="An article title (exact titles work best) or search words. When no "
        "article has this title, matching article titles are listed instead.",
    )
    date: str | None = Field(
        None,
        description="YYYY-MM-DD: read the article as it was on that day (from its revision "
        "history), for questions about the past state of a page.",
    )
    page: int = Field(1, ge=1, description="Which page of a long article to show.")
    find: str | None = Field(
        None, description="Instead of a page, list every place these words occur."
    )
    search: bool = Field(False, description="Only list matching article titles.")


class MediaWiki:
    """The few Action API calls the tool needs."""

    def __init__(self, session: ToolSession) -> None:
        self.session = session
        self.api = session.settings.wikipedia_api

    async def call(self, **params: Any) -> dict[str, Any]:
        query = {"format": "json", "formatversion": "2", **params}
        data = await self.session.http.api(
            self.api, params=query, service="the Wikipedia API", setting="tools.wikipedia_api"
        )
        if not isinstance(data, dict):
            raise ToolFailure("the Wikipedia API answered with unexpected data", kind="network")
        if "error" in data:
            error = data["error"]
            code = error.get("code", "") if isinstance(error, dict) else ""
            info = error.get("info", error) if isinstance(error, dict) else error
            kind: ErrorKind = "not_found" if code in ("missingtitle", "nosuchrevid") else "network"
            raise ToolFailure(f"the Wikipedia API refused the request: {info}", kind=kind)
        return data

    async def search(self, text: str) -> list[tuple[str, str]]:
        data = await self.call(
            action="query", list="search", srsearch=text, srlimit=SEARCH_LIMIT, srprop="snippet"
        )
        rows = (data.get("query") or {}).get("search") or []
        return [(str(r.get("title", "")), strip_markup(r.get("snippet", ""))) for r in rows]

    async def resolve(
        self, title: str, *, before: str | None
    ) -> tuple[str, int | None, str | None]:
        """(canonical title, revision id or None, revision timestamp) — title "" when missing."""
        params: dict[str, Any] = {"action": "query", "titles": title, "redirects": "1"}
        if before:
            params.update(
                prop="revisions",
                rvlimit="1",
                rvdir="older",
                rvstart=f"{before}T23:59:59Z",
                rvprop="ids|timestamp",
            )
        data = await self.call(**params)
        pages = (data.get("query") or {}).get("pages") or []
        if not pages or pages[0].get("missing") or pages[0].get("invalid"):
            return "", None, None
        found = pages[0]
        revisions = found.get("revisions") or []
        if before and not revisions:
            return str(found.get("title", title)), None, None
        revision = revisions[0] if revisions else {}
        return str(found.get("title", title)), revision.get("revid"), revision.get("timestamp")

    async def first_revision(self, title: str) -> str | None:
        data = await self.call(
            action="query",
            titles=title,
            prop="revisions",
            rvlimit="1",
            rvdir="newer",
            rvprop="timestamp",
        )
        pages = (data.get("query") or {}).get("pages") or []
        revisions = (pages[0].get("revisions") if pages else None) or []
        return revisions[0].get("timestamp") if revisions else None

    async def render(self, *, title: str | None = None, revid: int | None = None) -> dict:
        params: dict[str, Any] = {
            "action": "parse",
            "prop": "text|revid|displaytitle",
            "disableeditsection": "1",
            "disablelimitreport": "1",
        }
        if revid is not None:
            params["oldid"] = str(revid)
        else:
            params.update(page=title, redirects="1")
        return (await self.call(**params)).get("parse") or {}

    def article_url(self, title: str, revid: int | None) -> str:
        base = self.api.rsplit("/", 1)[0] + "/index.php"
        query = {"title": title.replace(" ", "_")}
        if revid is not None:
            query["oldid"] = str(revid)
        return f"{base}?{urlencode(query)}"


def build(session: ToolSession) -> ToolFunction:
    wiki = MediaWiki(session)

    async def wikipedia(
        query: str,
        date: str | None = None,
        page: int = 1,
        find: str | None = None,
        search: bool = False,
    ) -> ToolResult:
        day = parse_date(date, argument="date") if date else None
        if search:
            return await _search_result(wiki, query, reason=None)
        title, revid, stamp = await wiki.resolve(query.strip(), before=day)
        if not title:
            return await _search_result(wiki, query, reason=f"No article is titled {query!r}.")
        if day and revid is None:
            first = await wiki.first_revision(title)
            raise ToolFailure(
                f"the article {title!r} did not exist yet on {day}"
                + (f"; its first revision is from {first[:10]}" if first else "")
                + ". Ask about a later date or use another source",
                kind="not_found",
                source_ref=wiki.article_url(title, None),
            )
        key = json.dumps(["wikipedia", wiki.api, title, revid if day else None])

        async def load() -> Document:
            rendered = await wiki.render(title=None if day else title, revid=revid if day else None)
            html = rendered.get("text") or ""
            if isinstance(html, dict):  # formatversion=1 shape, from older wikis
                html = html.get("*", "")
            current = rendered.get("revid") or revid
            return await _to_document(
                session, wiki, title=title, html=html, revid=current, day=day, stamp=stamp
            )

        again = call_text("wikipedia", {"query": title, "date": day})
        document = await session.document(key, load, again=again)
        return ToolResult(
            session.show(document, page=page, find=find, again=again), document.source_ref
        )

    return wikipedia


async def _to_document(
    session: ToolSession,
    wiki: MediaWiki,
    *,
    title: str,
    html: str,
    revid: int | None,
    day: str | None,
    stamp: str | None,
) -> Document:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="kgot-wiki-") as scratch:
        path = Path(scratch) / "article.html"
        path.write_text(html, encoding="utf-8")
        result = await session.convert("wiki_html", path, {"name": title, "title": title})
    header = (
        f"Revision {revid} of {stamp or 'unknown time'} (the last one on or before {day})"
        if day
        else (f"Current revision {revid}" if revid else None)
    )
    return Document(
        source_ref=wiki.article_url(title, revid),
        text=result.get("text") or "",
        title=title,
        kind="Wikipedia article",
        header=header,
    )


async def _search_result(wiki: MediaWiki, query: str, *, reason: str | None) -> ToolResult:
    hits = await wiki.search(query)
    source = f"{wiki.api}?{urlencode({'action': 'query', 'list': 'search', 'srsearch': query})}"
    lead = f"{reason} " if reason else ""
    if not hits:
        return ToolResult(
            f"{lead}Wikipedia has no article matching {query!r}; try other words or web_search.",
            source,
        )
    lines = [f"{lead}Wikipedia articles matching {query!r}:"]
    for number, (title, snippet) in enumerate(hits, 1):
        lines.append(f"{number}. {title}" + (f" — {snippet}" if snippet else ""))
    lines.append("Read one with wikipedia(query=<exact title as listed>).")
    return ToolResult("\n".join(lines), source)


SPEC = ToolSpec(
    name="wikipedia",
    description=(
        "Read a Wikipedia article (tables and infoboxes kept), find articles by search words, "
        "or read an article as it was on a past date (date=YYYY-MM-DD, from its revision "
        "history). Long articles come in pages; use page= or find=."
    ),
    args_schema=WikipediaArgs,
    more_hint="ask for another page with page=, or locate text with find=",
    build=build,
    reads_documents=True,
    notes=lambda settings: [f"endpoint: {settings.tools.wikipedia_api}"],
)
