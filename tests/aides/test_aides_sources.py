"""Aide sources with real parts: feeds served by a loopback HTTP server and parsed by feedparser,
folders read directly or through the sandbox's conversion workers, searches through a loopback
SearXNG."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import sources
from kgot.aides.sources import (
    PollResult,
    parse_source_spec,
    poll,
    poll_dir,
    poll_feed_file,
    poll_rss,
    poll_search,
)
from kgot.config import Settings, ToolsSettings
from kgot.errors import UsageError
from kgot.tests.tools.tool_fixtures import FixtureServer, Request, Response

RSS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0">
  <channel>
    <title>Acme news</title>
    <link>https://acme.example/</link>
    <description>What Acme does</description>
    {items}
  </channel>
</rss>
"""

RSS_ITEM = """
    <item>
      <title>{title}</title>
      <link>https://acme.example/news/{slug}</link>
      <guid isPermaLink="false">{guid}</guid>
      <pubDate>{date}</pubDate>
      <description>{description}</description>
    </item>
"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Acme engineering</title>
  <id>urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6</id>
  <updated>2026-03-02T10:00:00Z</updated>
  <entry>
    <title type="html">Acme ships &lt;b&gt;Rocket 2&lt;/b&gt;</title>
    <link href="/posts/rocket-2"/>
    <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
    <updated>2026-03-02T10:00:00Z</updated>
    <summary>Short summary.</summary>
    <content type="html">&lt;p&gt;Rocket 2 has two stages.&lt;/p&gt;
      &lt;ul&gt;&lt;li&gt;Stage one burns
      kerosene.&lt;/li&gt;&lt;li&gt;Stage two burns hydrogen.&lt;/li&gt;&lt;/ul&gt;
      &lt;script&gt;alert("x")&lt;/script&gt;</content>
  </entry>
</feed>
"""


def rss(*entries: dict[str, str]) -> str:
    return RSS.format(items="".join(RSS_ITEM.format(**entry) for entry in entries))


FIRST = {
    "title": "Acme earnings up",
    "slug": "earnings",
    "guid": "https://acme.example/news/earnings",
    "date": "Mon, 02 Mar 2026 09:00:00 GMT",
    "description": "&lt;p&gt;Revenue rose 12 %.&lt;/p&gt;&lt;p&gt;Profit &amp;amp; cash "
    "doubled.&lt;/p&gt;",
}
SECOND = {
    "title": "Acme hires a CFO",
    "slug": "cfo",
    "guid": "42",  # a feed-local id: only meaningful with the feed's URL
    "date": "Tue, 03 Mar 2026 09:00:00 GMT",
    "description": "Jane Roe joins as CFO.",
}


@pytest.fixture
def web() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


def make_settings(**tools: Any) -> Settings:
    values: dict[str, Any] = {"allow_private_urls": True, "timeout": 5.0, "search_backend": "none"}
    values.update(tools)
    return Settings(tools=ToolsSettings(**values))


# --------------------------------------------------------------------------- specs


def test_source_specs_are_checked_with_one_line_naming_the_fix(tmp_path: Path) -> None:
    assert parse_source_spec("rss", " https://acme.example/feed.xml ") == {
        "url": "https://acme.example/feed.xml"
    }
    for bad in ("acme.example/feed.xml", "ftp://acme.example/feed", "", "http://", "http://a:0/"):
        with pytest.raises(UsageError, match=r"--rss needs the http\(s\) URL of a feed"):
            parse_source_spec("rss", bad)

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    os.chdir(tmp_path)
    assert parse_source_spec("dir", "inbox") == {"path": str(inbox.resolve())}
    with pytest.raises(UsageError, match="is not an existing folder"):
        parse_source_spec("dir", str(tmp_path / "missing"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError, match="is not an existing folder"):
        parse_source_spec("dir", str(tmp_path / "file.txt"))

    assert parse_source_spec("search", "  Acme   Corp earnings ") == {"query": "Acme Corp earnings"}
    with pytest.raises(UsageError, match="--search needs a query"):
        parse_source_spec("search", "   ")
    with pytest.raises(UsageError, match="unknown source kind 'ftp'; use one of --rss, --dir"):
        parse_source_spec("ftp", "x")
    for kind, value in (("rss", "nope"), ("dir", "/nope/nope"), ("search", "")):
        with pytest.raises(UsageError) as raised:
            parse_source_spec(kind, value)
        assert "\n" not in str(raised.value)


# --------------------------------------------------------------------------- feeds


def test_rss_items_have_stable_ids_plain_text_and_dates(web: FixtureServer) -> None:
    url = web.page("/feed.xml", rss(FIRST, SECOND), "application/rss+xml")
    result = poll_rss(url, None, settings=make_settings())

    assert result.error is None
    assert [i.title for i in result.items] == ["Acme earnings up", "Acme hires a CFO"]
    first, second = result.items
    assert first.item_id == "https://acme.example/news/earnings"
    assert second.item_id == f"{url}#42"
    assert first.source_ref == "https://acme.example/news/earnings"
    assert first.kind == "rss"
    assert first.published_at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    # HTML became text: paragraphs on their own lines, entities decoded, no tags.
    assert first.text == "Acme earnings up\n\nRevenue rose 12 %.\n\nProfit & cash doubled."
    assert "<" not in first.text

    # Seen entries are not returned again; a new entry is.
    again = poll_rss(url, result.cursor, settings=make_settings())
    assert again.error is None and again.items == ()
    third = {**FIRST, "title": "Acme opens a plant", "slug": "plant", "guid": "urn:acme:plant"}
    web.page("/feed.xml", rss(third, FIRST, SECOND), "application/rss+xml")
    later = poll_rss(url, again.cursor, settings=make_settings())
    assert [i.item_id for i in later.items] == ["urn:acme:plant"]
    json.dumps(later.cursor)  # the cursor is stored as JSON


def test_atom_entries_resolve_links_and_drop_scripts(web: FixtureServer) -> None:
    url = web.page("/atom", ATOM, "application/atom+xml")
    result = poll_rss(url, {}, settings=make_settings())

    assert result.error is None
    (entry,) = result.items
    assert entry.item_id == "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a"
    assert entry.title == "Acme ships Rocket 2"
    assert entry.source_ref == web.url("/posts/rocket-2")  # relative to the feed's address
    assert entry.published_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    # The longest of content and summary, as text with one line per block.
    assert "Rocket 2 has two stages.\n" in entry.text
    assert "- Stage one burns kerosene." in entry.text
    assert "alert" not in entry.text and "Short summary" not in entry.text


RSS1 = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
  xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://acme.example/rss1">
    <title>Acme (RSS 1.0)</title>
    <link>https://acme.example/</link>
    <description>d</description>
    <items><rdf:Seq><rdf:li resource="https://acme.example/n/1"/></rdf:Seq></items>
  </channel>
  <item rdf:about="https://acme.example/n/1">
    <title>Acme moves to Lyon</title>
    <link>https://acme.example/n/1</link>
    <description>The head office moves in May.</description>
    <dc:date>2026-03-04T08:30:00Z</dc:date>
  </item>
</rdf:RDF>
"""


def test_rss_1_0_is_read_too(web: FixtureServer) -> None:
    result = poll_rss(
        web.page("/rss1", RSS1, "application/rdf+xml"), None, settings=make_settings()
    )
    assert result.error is None
    (item,) = result.items
    assert item.item_id == "https://acme.example/n/1"
    assert item.text == "Acme moves to Lyon\n\nThe head office moves in May."
    assert item.published_at == datetime(2026, 3, 4, 8, 30, tzinfo=UTC)


def test_an_unchanged_feed_answers_304_to_the_cursors_validators(web: FixtureServer) -> None:
    body = rss(FIRST)

    def feed(request: Request) -> Response:
        if request.headers.get("if-none-match") == '"v1"':
            return Response(304, b"", "application/rss+xml", {"ETag": '"v1"'})
        headers = {"ETag": '"v1"', "Last-Modified": "Mon, 02 Mar 2026 09:00:00 GMT"}
        return Response(200, body, "application/rss+xml", headers)

    url = web.route("/etag.xml", feed)
    first = poll_rss(url, None, settings=make_settings())
    assert len(first.items) == 1
    assert first.cursor["etag"] == '"v1"'
    assert first.cursor["modified"] == "Mon, 02 Mar 2026 09:00:00 GMT"

    second = poll_rss(url, first.cursor, settings=make_settings())
    assert second == PollResult((), first.cursor, None)
    sent = web.requests[-1].headers
    assert sent["if-none-match"] == '"v1"'
    assert sent["if-modified-since"] == "Mon, 02 Mar 2026 09:00:00 GMT"
    assert "rss+xml" in sent["accept"]


def test_a_malformed_feed_is_one_error_line_and_keeps_the_cursor(web: FixtureServer) -> None:
    cursor = {"seen": ["urn:old"], "etag": '"old"'}
    for path, body in (
        ("/broken.xml", "<rss><channel><item><title>broken</titl"),
        ("/page.html", "<html><body><p>Not a feed at all</p></body></html>"),
        # Given bytes or a string, feedparser would open a file of that name; the body of a
        # feed must never be taken for a path.
        ("/path.xml", str(Path(__file__).resolve())),
    ):
        url = web.page(path, body, "text/xml")
        result = poll_rss(url, cursor, settings=make_settings())
        assert result.items == ()
        assert result.cursor == cursor
        assert result.error is not None
        assert "is not a readable RSS or Atom feed" in result.error, result.error
        assert "\n" not in result.error
    # A well-formed feed with no entries is not an error.
    empty = poll_rss(
        web.page("/empty.xml", rss(), "application/rss+xml"), None, settings=make_settings()
    )
    assert empty.items == () and empty.error is None


@pytest.mark.slow
def test_http_errors_and_refused_addresses_are_reported_not_raised(web: FixtureServer) -> None:
    url = web.page("/down.xml", "<h1>oops</h1>", status=500)
    result = poll_rss(url, {"seen": []}, settings=make_settings())
    assert result.items == () and result.cursor == {"seen": []}
    assert result.error is not None and "HTTP 500" in result.error
    assert web.hits["/down.xml"] == 2  # one retry; the next cycle is the real one

    missing = poll_rss(web.url("/missing.xml"), None, settings=make_settings())
    assert missing.error is not None and "HTTP 404" in missing.error

    # Without tools.allow_private_urls a loopback feed is refused by the address check.
    refused = poll_rss(
        web.page("/fine.xml", rss(FIRST)), None, settings=make_settings(allow_private_urls=False)
    )
    assert refused.error is not None and "non-public address" in refused.error
    assert web.hits["/fine.xml"] == 0

    # The dispatcher turns a bad spec into an error too.
    assert "has no url" in (poll("rss", {}, None, settings=make_settings()).error or "")


@pytest.mark.slow
def test_a_slow_feed_times_out_as_an_error_not_a_hang(web: FixtureServer) -> None:
    def slow(request: Request) -> Response:
        web.release.wait(20)
        return Response(200, rss(FIRST), "application/rss+xml")

    url = web.route("/slow.xml", slow)
    started = time.monotonic()
    result = poll("rss", {"url": url}, None, settings=make_settings(timeout=0.5))
    elapsed = time.monotonic() - started

    assert result.items == ()
    assert result.error is not None and "did not answer in time" in result.error
    assert elapsed < 5, elapsed


# --------------------------------------------------------------------------- feed files


def test_a_feed_file_is_a_source_by_path_or_file_url(tmp_path: Path) -> None:
    feeds = tmp_path / "feeds"
    feed = write(feeds / "day 1.xml", rss(FIRST))
    os.chdir(tmp_path)
    expected = {"path": str(feed.resolve())}
    assert parse_source_spec("rss", "feeds/day 1.xml") == expected
    assert parse_source_spec("rss", f" {feed.as_uri()} ") == expected  # file:///…/day%201.xml
    assert parse_source_spec("rss", "file://localhost" + feed.as_uri()[7:]) == expected
    # The http(s) form is unchanged.
    assert parse_source_spec("rss", "http://127.0.0.1:8765/day1.xml") == {
        "url": "http://127.0.0.1:8765/day1.xml"
    }

    write(tmp_path / "notes.md", "# Notes\n\nAcme opened a plant.")
    (tmp_path / "big.xml").write_bytes(b" " * 2048)
    for bad, message in (
        ("feeds/day2.xml", r"--rss needs the http\(s\) URL of a feed or the path of a feed file"),
        ("feeds/day2.xml", r"\(got 'feeds/day2.xml': no such file\)"),
        (feed.as_uri().replace("day%201", "day2"), "no such file"),
        ("feeds", "is a folder; add a folder of documents with --dir"),
        ("notes.md", "is not a readable RSS or Atom feed.*documents that are not feeds go in"),
        ("file://server/srv/feed.xml", "a file URL names a file on this machine"),
        ("file:feed.xml", "a file URL names a file on this machine"),
    ):
        with pytest.raises(UsageError, match=message) as raised:
            parse_source_spec("rss", bad)
        assert "\n" not in str(raised.value)
    with pytest.raises(UsageError, match=r"over the 0.001 MB cap \(tools.max_download_mb\)"):
        parse_source_spec("rss", "big.xml", max_mb=0.001)
    if os.geteuid() != 0:  # root reads any file
        locked = write(tmp_path / "locked.xml", rss(FIRST))
        locked.chmod(0)
        with pytest.raises(UsageError, match="cannot read it"):
            parse_source_spec("rss", str(locked))


def test_a_feed_file_yields_new_entries_once_and_is_read_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = write(tmp_path / "feed.xml", rss(FIRST, SECOND))
    settings = make_settings(allow_private_urls=False)  # a file needs no network allowance

    first = poll_feed_file(feed, None, settings=settings)
    assert first.error is None
    assert [i.title for i in first.items] == ["Acme earnings up", "Acme hires a CFO"]
    earnings, cfo = first.items
    assert earnings.item_id == "https://acme.example/news/earnings"  # its guid, as over http
    assert cfo.item_id == f"{feed.as_uri()}#42"  # a feed-local guid, scoped by the file's URL
    assert earnings.source_ref == "https://acme.example/news/earnings"
    assert earnings.text == "Acme earnings up\n\nRevenue rose 12 %.\n\nProfit & cash doubled."
    assert earnings.published_at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert earnings.kind == "rss"
    json.dumps(first.cursor)

    # Unchanged: the file is not even read. Touched but not changed: read, hashed, no items.
    reads: list[Path] = []
    original = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self) or original(self))
    assert poll_feed_file(feed, first.cursor, settings=settings) == PollResult(
        (), first.cursor, None
    )
    assert reads == []
    stamp = time.time() - 30
    os.utime(feed, (stamp, stamp))
    touched = poll_feed_file(feed, first.cursor, settings=settings)
    assert touched.items == () and touched.error is None and reads == [feed]
    assert touched.cursor["seen"] == first.cursor["seen"]

    # Rewritten with one more entry: only that one, with the same ids as before for the rest.
    third = {**FIRST, "title": "Acme opens Lyon", "slug": "lyon", "guid": "urn:acme:lyon"}
    third["date"] = "Wed, 04 Mar 2026 09:00:00 GMT"
    write(feed, rss(third, FIRST, SECOND), age_s=20)
    later = poll_feed_file(feed, touched.cursor, settings=settings)
    assert [i.item_id for i in later.items] == ["urn:acme:lyon"]

    # Still being written: the next poll reads it (the dispatcher takes the window from the
    # spec, as for a folder).
    write(feed, rss(third, FIRST, SECOND, {**SECOND, "guid": "43", "title": "Acme IPO"}), age_s=0)
    spec = {"path": str(feed)}
    assert poll("rss", spec, later.cursor, settings=settings) == PollResult((), later.cursor, None)
    ready = poll("rss", {**spec, "settle_seconds": 0}, later.cursor, settings=settings)
    assert [i.item_id for i in ready.items] == [f"{feed.as_uri()}#43"]


def test_a_feed_file_that_breaks_or_goes_is_an_error_line_keeping_the_cursor(
    tmp_path: Path,
) -> None:
    feed = write(tmp_path / "feed.xml", rss(FIRST))
    settings = make_settings()
    first = poll_feed_file(feed, None, settings=settings)

    for body in ("<rss><channel><item><title>broken</titl", "<html><p>a page</p></html>"):
        write(feed, body, age_s=10)
        broken = poll_feed_file(feed, first.cursor, settings=settings)
        assert broken.items == () and broken.cursor == first.cursor
        assert broken.error is not None and "\n" not in broken.error
        assert broken.error.startswith(f"the feed file {feed} is not a readable RSS or Atom feed")
    # Fixed: read again (the broken version was not recorded), nothing new to say.
    write(feed, rss(FIRST), age_s=5)
    fixed = poll_feed_file(feed, first.cursor, settings=settings)
    assert fixed.items == () and fixed.error is None

    write(feed, rss({**FIRST, "description": "x" * (1024 * 1024)}), age_s=5)
    big = poll_feed_file(feed, fixed.cursor, settings=make_settings(max_download_mb=1))
    assert big.items == () and big.cursor == fixed.cursor
    assert big.error == f"the feed file {feed} is over the 1 MB cap (tools.max_download_mb)"

    feed.unlink()
    gone = poll("rss", {"path": str(feed)}, fixed.cursor, settings=settings)
    assert gone == PollResult((), fixed.cursor, f"the feed file {feed} does not exist any more")


# --------------------------------------------------------------------------- folders


def write(path: Path, text: str, *, age_s: float = 60.0) -> Path:
    """Write a file that looks settled (modified ``age_s`` seconds ago)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_a_folder_yields_new_and_changed_files_once(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    note = write(inbox / "note.md", "# Acme\n\nAcme opened a plant in Lyon.")
    memo = write(inbox / "sub" / "memo.txt", "Jane Roe is the CFO of Acme.")
    write(inbox / "picture.png", "not a document")
    write(inbox / ".hidden.md", "hidden")
    write(inbox / "~draft.md", "an editor's lock file")
    settings = make_settings()

    first = poll_dir(inbox, None, settings=settings)
    assert first.error is None
    assert sorted(i.source_ref for i in first.items) == [str(note), str(memo)]
    by_path = {i.source_ref: i for i in first.items}
    assert by_path[str(note)].text == "# Acme\n\nAcme opened a plant in Lyon."
    assert by_path[str(note)].title == "note.md"
    assert by_path[str(note)].kind == "dir"
    assert by_path[str(note)].item_id.startswith(f"{note}#sha256:")
    json.dumps(first.cursor)

    # Unchanged: nothing. Touched but not changed: nothing.
    assert poll_dir(inbox, first.cursor, settings=settings).items == ()
    os.utime(note, None)
    os.utime(note, (time.time() - 30, time.time() - 30))
    touched = poll_dir(inbox, first.cursor, settings=settings)
    assert touched.items == () and touched.error is None

    # Changed: a new item with a new id; a new file: an item.
    write(note, "# Acme\n\nAcme closed the Lyon plant.", age_s=20)
    extra = write(inbox / "extra.txt", "Acme bought Beta Ltd.")
    changed = poll_dir(inbox, touched.cursor, settings=settings)
    assert sorted(i.source_ref for i in changed.items) == [str(extra), str(note)]
    new_note = next(i for i in changed.items if i.source_ref == str(note))
    assert new_note.item_id != by_path[str(note)].item_id
    assert "closed" in new_note.text

    # A deleted file is forgotten (it is new again if it comes back).
    memo.unlink()
    after = poll_dir(inbox, changed.cursor, settings=settings)
    assert str(memo) not in after.cursor["files"]


def test_a_file_still_being_written_waits_for_the_next_poll(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    fresh = write(inbox / "fresh.txt", "half of a rep", age_s=0)
    settings = make_settings()
    # ``now`` far ahead does not make a fresh file settled: the window is the real clock's.
    ahead = datetime.fromtimestamp(time.time() + 3600, UTC)
    waiting = poll_dir(inbox, None, settings=settings, settle_seconds=30, now=ahead)
    assert waiting.items == () and str(fresh) not in waiting.cursor["files"]
    write(fresh, "half of a report, now whole", age_s=60)  # written a minute ago
    ready = poll_dir(inbox, waiting.cursor, settings=settings, settle_seconds=30)
    assert [i.text for i in ready.items] == ["half of a report, now whole"]
    # The dispatcher reads the window from the spec.
    write(inbox / "new.txt", "brand new", age_s=0)
    spec = {"path": str(inbox), "settle_seconds": 0}
    assert [i.text for i in poll("dir", spec, ready.cursor, settings=settings).items] == [
        "brand new"
    ]


def test_a_large_folder_is_read_a_batch_per_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_DIR_ITEMS", 2)
    inbox = tmp_path / "inbox"
    for number in range(3):
        write(inbox / f"n{number}.txt", f"note {number}")
    settings = make_settings()
    first = poll_dir(inbox, None, settings=settings)
    second = poll_dir(inbox, first.cursor, settings=settings)
    third = poll_dir(inbox, second.cursor, settings=settings)
    assert (len(first.items), len(second.items), len(third.items)) == (2, 1, 0)
    assert {i.text for i in first.items + second.items} == {"note 0", "note 1", "note 2"}


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    result = poll("dir", {"path": str(tmp_path / "gone")}, {"files": {}}, settings=make_settings())
    assert result == PollResult(
        (), {"files": {}}, f"the folder {tmp_path / 'gone'} does not exist any more"
    )


@pytest.mark.slow
def test_documents_are_converted_in_the_sandbox(tmp_path: Path) -> None:
    from kgot.tests.tools.tool_fixtures import _pdf

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _pdf(inbox / "report.pdf", ["Page one: the heron count was 17.", "Page two: egrets 5."])
    old = time.time() - 60
    os.utime(inbox / "report.pdf", (old, old))
    write(
        inbox / "page.html",
        "<html><head><title>Acme plant</title></head><body><article>"
        "<h1>Acme plant</h1><p>Acme opened a plant in Lyon in 2025, with 300 workers "
        "building rockets for the European market.</p></article></body></html>",
    )
    write(inbox / "data.json", '{"company": "Acme", "employees": 1200}')
    write(inbox / "broken.pdf", "%PDF-1.7\n1 0 obj <<>> endobj\ntrailer garbage")
    settings = make_settings(timeout=60)

    result = poll_dir(inbox, None, settings=settings)
    if result.error and "cannot start the document parser" in result.error:
        pytest.skip(result.error)  # the conftest fails this where a sandbox can run
    by_name = {Path(i.source_ref).name: i for i in result.items}
    assert sorted(by_name) == ["data.json", "page.html", "report.pdf"]
    assert "heron count was 17" in by_name["report.pdf"].text
    assert "egrets 5" in by_name["report.pdf"].text
    assert "plant in Lyon" in by_name["page.html"].text
    assert by_name["page.html"].title == "Acme plant"
    assert json.loads(by_name["data.json"].text) == {"company": "Acme", "employees": 1200}
    # The damaged PDF is reported, tried again in the next polls, then given up.
    assert result.error is not None and "broken.pdf" in result.error
    assert "will try again" in result.error
    assert str(inbox / "broken.pdf") not in result.cursor["files"]
    second = poll_dir(inbox, result.cursor, settings=settings)
    assert second.items == () and "will try again" in (second.error or "")
    third = poll_dir(inbox, second.cursor, settings=settings)
    assert third.items == () and "gave up after 3 tries" in (third.error or "")
    fourth = poll_dir(inbox, third.cursor, settings=settings)
    assert fourth == PollResult((), third.cursor, None)


def test_a_parser_that_cannot_start_gives_up_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.documents import convert_pool

    class DownPool:  # what the pool raises on a machine whose sandbox cannot start
        calls = 0

        async def aconvert(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            DownPool.calls += 1
            raise convert_pool.ParserUnavailable("no sandbox")

    monkeypatch.setattr(convert_pool, "shared_pool", lambda *args, **kwargs: DownPool())
    inbox = tmp_path / "inbox"
    for name in ("a.html", "b.json", "c.pdf"):
        write(inbox / name, "<p>x</p>" if name.endswith("html") else '{"a": 1}')
    write(inbox / "note.txt", "still read")
    settings = make_settings()
    cursor: dict[str, Any] | None = None
    for _ in range(4):  # more polls than MAX_FILE_TRIES: nothing is given up
        result = poll_dir(inbox, cursor, settings=settings)
        cursor = result.cursor
        assert result.error is not None and "cannot start the document parser" in result.error
        assert result.error.count("cannot start") == 1
    assert DownPool.calls == 4  # one attempt per poll, not one per document
    assert cursor is not None and sorted(Path(p).name for p in cursor["files"]) == ["note.txt"]


# --------------------------------------------------------------------------- web search


def searxng(rows: list[dict[str, str]]) -> Response:
    return Response(200, json.dumps({"results": rows}), "application/json")


def test_search_results_become_items_once(
    web: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_SEEN_IDS", 3)
    rows = [
        {"url": "https://news.example/a", "title": "Acme <b>earnings</b>", "content": "Up 12 %."},
        {"url": "https://news.example/b", "title": "Acme CFO", "content": "Jane Roe joins."},
        {"url": "", "title": "no address", "content": "dropped"},
    ]
    web.route("/searx/search", searxng(rows))
    settings = make_settings(searxng_url=web.url("/searx"))

    first = poll("search", {"query": "Acme Corp earnings"}, None, settings=settings)
    assert first.error is None
    assert [i.item_id for i in first.items] == ["https://news.example/a", "https://news.example/b"]
    assert first.items[0].title == "Acme earnings"
    assert first.items[0].text == "Acme earnings\n\nUp 12 %."
    assert first.items[0].kind == "search" and first.items[0].source_ref == rows[0]["url"]
    assert web.requests[-1].query["q"] == "Acme Corp earnings"

    assert poll_search("Acme Corp earnings", first.cursor, settings=settings).items == ()
    more = [
        *rows[:2],
        {"url": "https://news.example/c", "title": "C", "content": ""},
        {"url": "https://news.example/d", "title": "D", "content": ""},
    ]
    web.route("/searx/search", searxng(more))
    later = poll_search("Acme Corp earnings", first.cursor, settings=settings)
    assert [i.item_id for i in later.items] == ["https://news.example/c", "https://news.example/d"]
    assert later.cursor["seen"] == [  # bounded: the newest are kept
        "https://news.example/b",
        "https://news.example/c",
        "https://news.example/d",
    ]


@pytest.mark.slow
def test_search_failures_are_errors(web: FixtureServer) -> None:
    none = poll_search("Acme", {"seen": ["x"]}, settings=make_settings())
    assert none.items == () and none.cursor == {"seen": ["x"]}
    assert none.error is not None and "no search provider is configured" in none.error

    web.page("/searx/search", "<h1>down</h1>", status=503)
    failed = poll_search("Acme", None, settings=make_settings(searxng_url=web.url("/searx")))
    assert failed.error is not None and "web search for 'Acme' failed" in failed.error
    assert "HTTP 503" in failed.error
