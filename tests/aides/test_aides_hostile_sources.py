"""Sources that try to trick an aide (issue 25): a folder holding links to files or folders
outside it is not read through them and says so; a feed whose entry carries a lone surrogate,
a NUL character reference or a raw NUL byte is still added and polled, its good entries come
through and every text an item carries is storable (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import aide_rows, create_aide, sources
from kgot.aides.sources import (
    SourceItem,
    parse_source_spec,
    poll,
    poll_dir,
    poll_feed_file,
    poll_rss,
)
from kgot.cli.main import main
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.test_aides_sources import FIRST, SECOND, make_settings, rss, write
from kgot.tests.tools.tool_fixtures import FixtureServer

# --------------------------------------------------------------------------- folders and links


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the watched folder standing in for /etc/passwd."""
    return write(tmp_path / "etc" / "passwd", "root:x:0:0:root:/root:/bin/bash")


def _texts(items: tuple[SourceItem, ...]) -> list[str]:
    return sorted(i.text for i in items)


def test_a_link_to_a_file_outside_the_folder_is_not_read_and_is_reported(
    tmp_path: Path, secret: Path
) -> None:
    inbox = tmp_path / "inbox"
    write(inbox / "note.txt", "Acme opened a plant.")
    (inbox / "passwd.txt").symlink_to(secret)
    write(inbox / "sub" / "memo.md", "Jane Roe is the CFO.")
    (inbox / "sub" / "deep.md").symlink_to(secret)  # at any depth

    result = poll_dir(inbox, None, settings=make_settings())

    assert _texts(result.items) == ["Acme opened a plant.", "Jane Roe is the CFO."]
    assert all("root:x" not in i.text for i in result.items)
    assert result.error is not None and "\n" not in result.error
    assert "passwd.txt is a link to" in result.error
    assert f"sub{os.sep}deep.md is a link to" in result.error
    assert "outside the folder" in result.error
    # Never recorded as read: removing the link leaves nothing behind.
    assert not any("passwd" in key or "deep" in key for key in result.cursor["files"])


def test_a_linked_subfolder_pointing_outside_is_not_walked_and_is_reported(
    tmp_path: Path, secret: Path
) -> None:
    inbox = tmp_path / "inbox"
    write(inbox / "note.txt", "Acme opened a plant.")
    write(secret.parent / "shadow.txt", "secret shadow")
    (inbox / "etc").symlink_to(secret.parent, target_is_directory=True)

    result = poll_dir(inbox, None, settings=make_settings())

    assert _texts(result.items) == ["Acme opened a plant."]
    assert result.error is not None and "etc is a link to" in result.error
    assert "outside the folder" in result.error


def test_a_link_that_stays_inside_is_skipped_quietly_its_target_read_once(
    tmp_path: Path, secret: Path
) -> None:
    """Links are never followed: one that stays inside points at a file the walk reads under
    its own name anyway, so following it would only ingest the same text twice."""
    inbox = tmp_path / "inbox"
    report = write(inbox / "2026" / "report.md", "Acme's annual report.")
    (inbox / "latest.md").symlink_to(report)
    (inbox / "again").symlink_to(inbox / "2026", target_is_directory=True)  # would loop
    (inbox / "loop").symlink_to(inbox, target_is_directory=True)

    result = poll_dir(inbox, None, settings=make_settings())

    assert [i.source_ref for i in result.items] == [str(report)]
    assert result.error is None


def test_a_link_inside_that_goes_through_a_link_outside_is_not_followed(
    tmp_path: Path, secret: Path
) -> None:
    """``inbox/x.md → /outside/ln/report.md`` with ``/outside/ln → inbox/2026``: its real path is
    inside, but whoever owns /outside can turn it towards any file, so it is not read."""
    inbox = tmp_path / "inbox"
    report = write(inbox / "2026" / "report.md", "Acme's annual report.")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ln").symlink_to(inbox / "2026", target_is_directory=True)
    (inbox / "x.md").symlink_to(outside / "ln" / "report.md")

    first = poll_dir(inbox, None, settings=make_settings())
    assert [i.source_ref for i in first.items] == [str(report)]

    # Turned towards the secret: reported, still not read.
    (outside / "ln").unlink()
    (outside / "ln").symlink_to(secret.parent, target_is_directory=True)
    (inbox / "x.md").unlink()
    (inbox / "x.md").symlink_to(outside / "ln" / "passwd")
    later = poll_dir(inbox, first.cursor, settings=make_settings())
    assert later.items == ()
    assert later.error is not None and "x.md is a link to" in later.error


def _scan(inbox: Path) -> sources._FolderScan:
    return sources._FolderScan(
        settings=make_settings(),
        settled_before=time.time(),
        files={},
        failures={},
        folder=inbox,
        root=os.path.realpath(inbox),
    )


def test_a_folder_swapped_for_a_link_after_the_walk_is_not_read_through(
    tmp_path: Path, secret: Path
) -> None:
    """The walk saw a real subfolder; by the time the file is opened it is a link to /etc.
    The open (O_NOFOLLOW, then its real path and inode checked) refuses it."""
    inbox = tmp_path / "inbox"
    write(inbox / "note.txt", "Acme opened a plant.")
    (inbox / "sub").symlink_to(secret.parent, target_is_directory=True)
    scan = _scan(inbox)
    asyncio.run(scan.visit(inbox / "sub" / "passwd"))  # as if the walk had yielded it
    asyncio.run(scan.visit(inbox / "note.txt"))
    assert [i.text for i in scan.items] == ["Acme opened a plant."]
    assert any("outside the folder" in p for p in scan.problems), scan.problems
    assert str(inbox / "sub" / "passwd") not in scan.files


def _after_fstat(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object]) -> None:
    """Run ``action`` once the file is open and checked by ``fstat``: a change mid-read."""
    fstat = os.fstat

    def changing(descriptor: int) -> os.stat_result:
        result = fstat(descriptor)
        action()
        return result

    monkeypatch.setattr(os, "fstat", changing)


def test_a_file_replaced_while_it_is_read_is_not_read_and_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = tmp_path / "inbox"
    note = write(inbox / "note.txt", "Acme opened a plant.")
    other = write(tmp_path / "other.txt", "Someone else's text.")
    _after_fstat(monkeypatch, lambda: os.replace(other, note))
    scan = _scan(inbox)
    asyncio.run(scan.visit(note))
    monkeypatch.undo()
    assert scan.items == []
    assert scan.problems == ["note.txt changed while it was read; not read"]
    assert str(note) not in scan.files  # read at the next poll


def test_a_file_removed_while_it_is_read_is_skipped_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = tmp_path / "inbox"
    note = write(inbox / "note.txt", "Acme opened a plant.")
    _after_fstat(monkeypatch, note.unlink)
    scan = _scan(inbox)
    asyncio.run(scan.visit(note))
    monkeypatch.undo()
    assert scan.items == [] and scan.problems == [] and scan.files == {}


def test_a_watched_folder_turned_into_a_link_is_refused(tmp_path: Path, secret: Path) -> None:
    real = tmp_path / "real-inbox"
    write(real / "note.txt", "Acme opened a plant.")
    link = tmp_path / "inbox"
    link.symlink_to(real, target_is_directory=True)
    # Added through the link: resolved once, the real folder is watched.
    assert parse_source_spec("dir", str(link)) == {"path": str(real)}
    # The stored folder itself replaced by a link to /etc: refused, nothing read.
    watched = tmp_path / "watched"
    watched.symlink_to(secret.parent, target_is_directory=True)
    result = poll("dir", {"path": str(watched)}, None, settings=make_settings())
    assert result.items == ()
    assert result.error is not None and "is a link" in result.error


def test_a_folder_above_the_watched_one_turned_into_a_link_is_refused(tmp_path: Path) -> None:
    """``/home/ann/inbox`` is watched; ``/home/ann`` is then replaced by a link to a folder
    holding an ``inbox`` of other files: the stored path now leads there, and is refused."""
    home = tmp_path / "home"
    inbox = write(home / "inbox" / "note.txt", "Acme opened a plant.").parent
    spec = parse_source_spec("dir", str(inbox))
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "inbox" / "passwd.txt", "root:x:0:0:root:/root:/bin/bash")
    home.rename(tmp_path / "old-home")
    home.symlink_to(elsewhere, target_is_directory=True)

    result = poll("dir", spec, None, settings=make_settings())

    assert result.items == ()
    assert result.error is not None and "is a link" in result.error
    assert str(elsewhere / "inbox") in result.error


def test_file_names_and_contents_with_nul_or_undecodable_bytes_are_storable(
    tmp_path: Path,
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    stamp = time.time() - 60
    for name, content in ((b"caf\xe9.txt", b"Acme bought Beta."), (b"nul.txt", b"Acme\x00 x")):
        odd = os.path.join(os.fsencode(inbox), name)  # caf\xe9: a Latin-1 name, not UTF-8
        with open(odd, "wb") as handle:
            handle.write(content)
        os.utime(odd, (stamp, stamp))

    result = poll_dir(inbox, None, settings=make_settings())

    [item] = result.items
    assert item.text == "Acme bought Beta." and item.title == "caf\ufffd.txt"
    for text in (item.item_id, item.title, item.text, item.source_ref):
        _assert_storable(text)
    # A NUL makes a .txt binary: reported as no document, by a storable name.
    assert result.error is not None and "nul.txt is not a document" in result.error
    for text in (result.error, *result.cursor["files"], *result.cursor["failures"]):
        _assert_storable(text)
    json.dumps(result.cursor).encode("utf-8")
    again = poll_dir(inbox, result.cursor, settings=make_settings())
    assert again.items == ()


# --------------------------------------------------------------------------- feeds

BAD_ENTRY = (
    "<item><title>Bad &#xD800; title &#0; here</title>"
    "<link>https://acme.example/news/bad</link>"
    "<guid>https://acme.example/news/bad&#xDFFF;</guid>"
    "<pubDate>Mon, 02 Mar 2026 10:00:00 GMT</pubDate>"
    "<description>NUL \x00 raw, &amp;#xD800; escaped, &amp;#0; too</description></item>"
)


def hostile_feed() -> bytes:
    """FIRST and SECOND beside one entry with a lone surrogate, ``&#0;`` and a raw NUL."""
    return rss(FIRST).replace("</channel>", BAD_ENTRY + rss(SECOND).split("<channel>")[1]).encode()


def _assert_storable(text: str) -> None:
    assert "\x00" not in text, text
    assert not re.search("[\ud800-\udfff]", text), ascii(text)
    text.encode("utf-8")  # no lone surrogate


def _assert_items_storable(items: tuple[SourceItem, ...]) -> None:
    for item in items:
        for text in (item.item_id, item.title, item.text, item.source_ref):
            _assert_storable(text)


def test_a_feed_file_with_surrogates_and_nuls_is_added_and_polled(tmp_path: Path) -> None:
    feed = tmp_path / "bad.xml"
    feed.write_bytes(hostile_feed())
    stamp = time.time() - 60
    os.utime(feed, (stamp, stamp))
    assert b"\x00" in feed.read_bytes()

    assert parse_source_spec("rss", str(feed)) == {"path": str(feed.resolve())}
    result = poll_feed_file(feed, None, settings=make_settings())

    assert result.error is None
    titles = [i.title for i in result.items]
    assert titles == ["Acme earnings up", "Bad \ufffd title \ufffd here", "Acme hires a CFO"]
    _assert_items_storable(result.items)
    bad = result.items[1]
    assert bad.item_id == "https://acme.example/news/bad\ufffd"
    assert "NUL \ufffd raw, \ufffd escaped, \ufffd too" in bad.text
    json.dumps(result.cursor).encode("utf-8")


def test_a_utf16_feed_with_a_surrogate_reference_is_read(tmp_path: Path) -> None:
    body = hostile_feed().decode().replace('encoding="utf-8"', 'encoding="utf-16"')
    feed = tmp_path / "wide.xml"
    feed.write_bytes(body.replace("\x00", "").encode("utf-16"))
    stamp = time.time() - 60
    os.utime(feed, (stamp, stamp))
    result = poll_feed_file(feed, None, settings=make_settings())
    assert result.error is None
    assert [i.title for i in result.items][1] == "Bad \ufffd title \ufffd here"
    _assert_items_storable(result.items)


def test_a_hostile_feed_over_http_is_read_in_any_encoding() -> None:
    """Over http the content type may name the charset: a UTF-16 feed re-encoded as UTF-8 is
    no longer parsed as UTF-16 because its header said so."""
    web = FixtureServer()
    try:
        utf8 = web.page("/feed.xml", hostile_feed(), "application/rss+xml; charset=utf-8")
        body = hostile_feed().decode().replace('encoding="utf-8"', 'encoding="utf-16"')
        wide = web.page(
            "/wide.xml",
            body.replace("\x00", "").encode("utf-16"),
            "application/rss+xml; charset=utf-16",
        )
        for url in (utf8, wide):
            result = poll_rss(url, None, settings=make_settings())
            assert result.error is None, result.error
            assert [i.title for i in result.items] == [
                "Acme earnings up",
                "Bad \ufffd title \ufffd here",
                "Acme hires a CFO",
            ]
            _assert_items_storable(result.items)
    finally:
        web.close()


def test_an_entry_that_cannot_be_converted_fails_alone_and_is_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = sources._entry_text

    def entry_text(entry: Any) -> str:
        if "bad" in str(entry.get("link")):
            raise ValueError("cannot convert this one")
        return original(entry)

    monkeypatch.setattr(sources, "_entry_text", entry_text)
    feed = tmp_path / "bad.xml"
    feed.write_bytes(hostile_feed())
    os.utime(feed, (time.time() - 60, time.time() - 60))

    assert parse_source_spec("rss", str(feed)) == {"path": str(feed.resolve())}
    first = poll_feed_file(feed, None, settings=make_settings())
    assert [i.title for i in first.items] == ["Acme earnings up", "Acme hires a CFO"]
    assert first.error is not None and "\n" not in first.error
    assert first.error.startswith(f"the feed file {feed} skipped 1 entry it could not read")
    assert "https://acme.example/news/bad" in first.error
    assert "ValueError: cannot convert this one" in first.error
    _assert_storable(first.error)

    # Rewritten with one more entry: the bad one is not reported again (it would fail the same
    # way every poll and keep the source looking broken).
    third = {**FIRST, "title": "Acme opens Lyon", "slug": "lyon", "guid": "urn:acme:lyon"}
    feed.write_bytes(
        hostile_feed().replace(
            b"<channel>",
            b"<channel>" + rss(third).split("<channel>")[1].split("</channel>")[0].encode(),
            1,
        )
    )
    os.utime(feed, (time.time() - 30, time.time() - 30))
    later = poll_feed_file(feed, first.cursor, settings=make_settings())
    assert [i.title for i in later.items] == ["Acme opens Lyon"]
    assert later.error is None


def test_a_feed_the_parser_crashes_on_is_one_line_not_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import feedparser

    def crash(*_args: Any, **_kwargs: Any) -> Any:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(feedparser, "parse", crash)
    feed = write(tmp_path / "feed.xml", rss(FIRST))
    with pytest.raises(sources.UsageError, match="is not a readable RSS or Atom feed") as raised:
        parse_source_spec("rss", str(feed))
    assert "\n" not in str(raised.value)
    result = poll_feed_file(feed, None, settings=make_settings())
    assert result.items == () and result.error is not None and "\n" not in result.error


def test_hostile_feed_items_are_recorded_by_an_aide(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    """The items of the hostile feed go into the store's item log (SQLite and PostgreSQL)."""
    feed = tmp_path / "bad.xml"
    feed.write_bytes(hostile_feed())
    os.utime(feed, (time.time() - 60, time.time() - 60))
    aide = create_aide(store, "news", "acme", settings=settings)
    aide.add_source("rss", str(feed))
    [source] = aide_rows.sources(store, aide.row)
    result = poll("rss", source.spec, None, settings=make_settings())
    assert result.error is None and len(result.items) == 3
    aide_rows.record_poll(
        store,
        aide.row,
        source.id,
        result.items,
        cursor=result.cursor,
        error=result.error,
        now=datetime.now(UTC),
    )
    stored = aide_rows.items(store, aide.row, "new")
    assert sorted(row.title for row in stored) == sorted(i.title for i in result.items)
    assert sorted(row.text for row in stored) == sorted(i.text for i in result.items)
    [source] = aide_rows.sources(store, aide.row)
    assert source.last_error is None  # no item refused by the database


# --------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_adds_a_hostile_feed_file_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", str(tmp_path / "x.db"))
    bad = tmp_path / "bad.xml"
    bad.write_bytes(hostile_feed())
    notes = write(tmp_path / "notes.xml", "<p>\x00 not a feed &#xD800;</p>")
    assert main(["aide", "create", "news", "--entity", "acme", *db]) == 0
    capsys.readouterr()

    code = main(["aide", "source", "add", "news", "--rss", str(bad), *db])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert re.fullmatch(r"added rss source \d+ to aide news", out.strip())
    assert "Traceback" not in err

    code = main(["aide", "source", "add", "news", "--rss", str(notes), *db])
    out, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "is not a readable RSS or Atom feed" in err
