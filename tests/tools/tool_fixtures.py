"""Fixtures for the tool tests: a loopback HTTP server with fake web services, sample files.

Nothing here touches the internet. The server plays web pages, a MediaWiki API, the Wayback
availability API, a SearXNG instance, keyed search APIs and an OpenAI-compatible transcription
endpoint; the sample files are generated with the real libraries that write each format.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import math
import struct
import threading
import wave
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kgot.config import ToolsSettings
from kgot.tests.support.loopback_http import LoopbackHTTPServer
from kgot.tools import ToolContext, ToolOutcome, ToolRunner, build_tools

# -- the loopback server ---------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int = 200
    body: bytes | str = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]


class FixtureServer:
    """A threaded HTTP server on 127.0.0.1 whose routes the tests set."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler | Response] = {}
        self.prefix_routes: dict[str, Handler] = {}
        self.hits: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.release = threading.Event()  # set at teardown: frees handlers that hang on purpose
        self._lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query={k: v[0] for k, v in parse_qs(parts.query).items()},
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                with server._lock:
                    server.hits[parts.path] += 1
                    server.requests.append(request)
                response = server._dispatch(request)
                body = response.body.encode() if isinstance(response.body, str) else response.body
                # A client that gave up (a timeout test) ends the connection here; the server
                # ignores that (see LoopbackHTTPServer).
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = _serve  # noqa: N815  (http.server names)
            do_POST = _serve  # noqa: N815

        self.httpd = LoopbackHTTPServer(("127.0.0.1", 0), _Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, handler: Handler | Response) -> str:
        self.routes[path] = handler
        return self.url(path)

    def page(
        self,
        path: str,
        body: str | bytes,
        content_type: str = "text/html; charset=utf-8",
        status: int = 200,
    ) -> str:
        return self.route(path, Response(status, body, content_type))

    def _dispatch(self, request: Request) -> Response:
        handler = self.routes.get(request.path)
        if handler is None:
            for prefix, prefix_handler in self.prefix_routes.items():
                if request.path.startswith(prefix):
                    handler = prefix_handler
                    break
        if handler is None:
            return Response(404, "<html><body>not found</body></html>")
        return handler(request) if callable(handler) else handler

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


# -- building and running tools ----------------------------------------------------------------


def tools_settings(server: FixtureServer | None = None, **overrides: Any) -> ToolsSettings:
    """Settings for tests: loopback allowed, short timeouts, endpoints on the fixture server."""
    values: dict[str, Any] = {"allow_private_urls": True, "timeout": 10.0}
    if server is not None:
        values.update(
            wikipedia_api=server.url("/w/api.php"),
            wayback_api=server.url("/wayback/available"),
        )
    values.update(overrides)
    return ToolsSettings(**values)


def make_runner(ctx: ToolContext) -> ToolRunner:
    return ToolRunner(
        build_tools(ctx),
        timeout=ctx.settings.timeout,
        max_output_chars=ctx.settings.max_output_chars,
    )


def call(runner: ToolRunner, name: str, **args: Any) -> ToolOutcome:
    return asyncio.run(runner.run(name, args))


# -- a fake MediaWiki ------------------------------------------------------------------------------


@dataclass
class Revision:
    revid: int
    timestamp: str  # ISO 8601, Z
    html: str


class FakeMediaWiki:
    """Enough of the MediaWiki Action API: search, title resolution, revisions, parse."""

    def __init__(self) -> None:
        self.articles: dict[str, list[Revision]] = {}
        self.redirects: dict[str, str] = {}

    def add(self, title: str, *revisions: Revision) -> None:
        self.articles[title] = sorted(revisions, key=lambda r: r.timestamp)

    def __call__(self, request: Request) -> Response:
        q = request.query
        if q.get("format") != "json" or q.get("formatversion") != "2":
            return _json({"error": {"code": "badformat", "info": "format=json&formatversion=2"}})
        if q.get("action") == "query" and q.get("list") == "search":
            words = q.get("srsearch", "").lower().split()
            hits = [
                {"title": title, "snippet": f'<span class="searchmatch">{title}</span> &amp; more'}
                for title, revisions in self.articles.items()
                if any(w in (title + revisions[-1].html).lower() for w in words)
            ]
            return _json({"query": {"search": hits[: int(q.get("srlimit", 10))]}})
        if q.get("action") == "query" and "titles" in q:
            title = self.redirects.get(q["titles"], q["titles"])
            if title not in self.articles:
                return _json({"query": {"pages": [{"title": q["titles"], "missing": True}]}})
            page: dict[str, Any] = {"title": title, "pageid": 1}
            if q.get("prop") == "revisions":
                revisions = self.articles[title]
                if q.get("rvdir") == "newer":
                    chosen = revisions[:1]
                else:
                    start = q.get("rvstart", "9999")
                    chosen = [r for r in revisions if r.timestamp <= start][-1:]
                page["revisions"] = [{"revid": r.revid, "timestamp": r.timestamp} for r in chosen]
            return _json({"query": {"pages": [page]}})
        if q.get("action") == "parse":
            if "oldid" in q:
                for title, revisions in self.articles.items():
                    for revision in revisions:
                        if str(revision.revid) == q["oldid"]:
                            return _json(
                                {
                                    "parse": {
                                        "title": title,
                                        "revid": revision.revid,
                                        "text": revision.html,
                                    }
                                }
                            )
                return _json({"error": {"code": "nosuchrevid", "info": "There is no revision"}})
            title = self.redirects.get(q.get("page", ""), q.get("page", ""))
            if title not in self.articles:
                return _json({"error": {"code": "missingtitle", "info": "The page doesn't exist"}})
            latest = self.articles[title][-1]
            return _json({"parse": {"title": title, "revid": latest.revid, "text": latest.html}})
        return _json({"error": {"code": "badvalue", "info": "unsupported request"}})


def _json(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data), "application/json; charset=utf-8")


@pytest.fixture
def wiki(server: FixtureServer) -> FakeMediaWiki:
    fake = FakeMediaWiki()
    server.route("/w/api.php", fake)
    return fake


# -- sample files ----------------------------------------------------------------------------------

LONG_PARAGRAPH = "The heron stands in the shallows and waits for fish to come close. "


def _pdf(path: Path, pages: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for text in pages:
            figure = plt.figure(figsize=(8.5, 11))
            figure.text(0.1, 0.9, text)
            pdf.savefig(figure)
            plt.close(figure)


def _docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Quarterly Report", level=1)
    document.add_paragraph("Revenue grew in every region except the north.")
    table = document.add_table(rows=3, cols=2)
    for row, (region, value) in enumerate(
        [("Region", "Revenue"), ("East", "120"), ("North", "80")]
    ):
        table.cell(row, 0).text = region
        table.cell(row, 1).text = value
    document.save(path)


def _xlsx(path: Path) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Sales"
    for row in [("Item", "Units", "Price"), ("Widget", 12, 2.5), ("Gadget", 7, 10.0)]:
        sheet.append(row)
    other = workbook.create_sheet("Staff")
    other.append(("Name", "Team", "Joined"))
    other.append(("Ada", "Engines", datetime.date(1843, 7, 1)))
    workbook.save(path)


def _pptx(path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Migration Plan"
    slide.placeholders[1].text = "Move the archive to cold storage in March"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Risks"
    second.placeholders[1].text = "Tape drives are slow"
    deck.save(path)


def _xls(path: Path) -> None:
    import xlwt

    workbook = xlwt.Workbook()
    sheet = workbook.add_sheet("Birds")
    for row, values in enumerate([("Bird", "Count"), ("Heron", 17), ("Egret", 5)]):
        for column, value in enumerate(values):
            sheet.write(row, column, value)
    workbook.save(str(path))


def _epub(path: Path) -> None:
    """A minimal EPUB 3: mimetype first and stored, container, package document, a chapter."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        book.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
            'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        book.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
            'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            '<dc:identifier id="id">kgot-test</dc:identifier><dc:title>Birds of the Marsh'
            "</dc:title><dc:creator>A. Heron</dc:creator><dc:language>en</dc:language>"
            '</metadata><manifest><item id="c1" href="chapter1.xhtml" '
            'media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/>'
            "</spine></package>",
        )
        book.writestr(
            "OEBPS/chapter1.xhtml",
            '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>'
            "Chapter 1</title></head><body><h1>Chapter 1</h1><p>The bittern booms at dusk.</p>"
            "</body></html>",
        )


def _ipynb(path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Heron counts\n"]},
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "outputs": [],
                "source": ["total = 17 + 5\n", "print(total)"],
            },
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def _png(path: Path) -> None:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (320, 200), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, 140, 120), fill="red")
    draw.text((160, 80), "42", fill="black")
    image.save(path)


def _wav(path: Path) -> None:
    with wave.open(str(path), "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(8000)
        frames = b"".join(
            struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / 8000)))
            for i in range(4000)
        )
        audio.writeframes(frames)


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One generated file per format, plus broken ones."""
    root = tmp_path_factory.mktemp("samples")
    files: dict[str, Path] = {}

    def add(name: str) -> Path:
        files[name] = root / name
        return files[name]

    _pdf(
        add("report.pdf"), ["Page one: the heron count was 17.", "Page two: the egret count was 5."]
    )
    _docx(add("report.docx"))
    _xlsx(add("sales.xlsx"))
    _xlsx(add("macros.xlsm"))  # a macro-enabled workbook is an xlsx package underneath
    _xls(add("birds.xls"))
    _epub(add("marsh.epub"))
    _ipynb(add("counts.ipynb"))
    add("records.jsonl").write_text('{"bird": "heron", "n": 3}\n\n{"bird": "egret", "n": 5}\n')
    add("people.csv").write_text("name,age,city\nAda,36,London\nAlan,41,Wilmslow\n")
    add("data.tsv").write_text("k\tv\nalpha\t1\nbeta\t2\n")
    _pptx(add("plan.pptx"))
    add("page.html").write_text(
        "<html><head><title>Birds</title></head><body><nav>Home | About</nav><main>"
        f"<h1>Herons</h1><p>{LONG_PARAGRAPH * 6}</p></main></body></html>"
    )
    add("config.json").write_text('{"name": "kgot", "tools": ["web_search", "python"], "n": 6}')
    add("feed.xml").write_text(
        '<?xml version="1.0"?><catalog><book id="b1"><title>Dune</title></book></catalog>'
    )
    add("notes.txt").write_text("Meeting moved to Thursday.\nBring the heron photos.\n")
    add("script.py").write_text("def answer():\n    return 42\n")
    _png(add("chart.png"))
    _wav(add("clip.wav"))
    with zipfile.ZipFile(add("bundle.zip"), "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(files["people.csv"], "tables/people.csv")
        archive.write(files["report.pdf"], "report.pdf")
        archive.writestr("readme.txt", "This bundle holds a table and a report.")
        archive.writestr("../../evil.txt", "path traversal attempt")
    add("broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer garbage")
    add("broken.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 40 + b"not really a zip")
    add("blob.bin").write_bytes(bytes(range(256)) * 8)
    add("empty.txt").write_text("")
    long_text = "\n\n".join(f"Paragraph {i}. {LONG_PARAGRAPH * 3}" for i in range(1, 121))
    add("long.txt").write_text(long_text)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as inner:
        inner.writestr("deep.txt", "the nested secret is 9")
    with zipfile.ZipFile(add("nested.zip"), "w") as outer:
        outer.writestr("inner.zip", buffer.getvalue())
    return files


ARTICLE_TEXT = LONG_PARAGRAPH * 5
