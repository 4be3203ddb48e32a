"""What an aide reads: RSS/Atom feeds, folders of documents and web searches.

Each kind of source is polled by one function that takes the source's spec (from
:func:`parse_source_spec`) and the cursor it returned last time, and gives back a
:class:`PollResult`: the items found, the cursor to keep, and an error line when the source
failed. A poll never raises for a failing source (an unreachable feed, a damaged file): the
runtime reports the error and polls again next cycle, and one bad source never stops the others.

The cursor is plain JSON (it lives in the store beside the source). The runtime should save the
returned cursor in the same transaction as the items, so a crash between the two neither loses
nor repeats an item; a failed poll returns the cursor it was given.

Every item has a stable :attr:`SourceItem.item_id` — its URL or feed id, or for a file its path
and content hash (a changed file is a new item) — so an item seen before can be skipped.

A feed is read from an http(s) URL or from a file on this machine (a path or a ``file://``
URL: offline demos, feeds another program writes to disk); both go through the same parser,
and a feed file is read again only when it changed, like a folder's files.

Network access goes through kgot's HTTP client (:class:`kgot.webclient.Http`): each hop's
address is checked unless ``tools.allow_private_urls``, downloads are capped at
``tools.max_download_mb``, and requests time out after ``tools.timeout``. Documents other than
plain text are parsed in the sandbox's conversion workers, as the file tools do.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import io
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

from kgot.errors import UsageError
from kgot.persistence import storable_text
from kgot.retrying import one_line
from kgot.sandbox import is_under

if TYPE_CHECKING:
    from kgot.config import Settings
    from kgot.webclient import Http

SourceKind = Literal["rss", "dir", "search"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("rss", "dir", "search")

MAX_TEXT_CHARS = 100_000  # of one item: a long document is cut, saying how much was left out
MAX_SEEN_IDS = 2_000  # ids a feed or search cursor remembers (the newest are kept)
MAX_FEED_ENTRIES = 500  # entries read from one feed answer
MAX_DIR_ITEMS = 100  # new or changed files turned into items per poll; the rest wait
MAX_FILE_TRIES = 3  # failed conversions of one version of a file before it is given up
MAX_QUERY_CHARS = 500
DEFAULT_SEARCH_RESULTS = 10
DEFAULT_SETTLE_SECONDS = 2.0  # a file written this recently may be half-written: next poll
DIR_EXTENSIONS = frozenset({".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".json"})
_PLAIN_EXTENSIONS = frozenset({".md", ".markdown", ".txt"})
FEED_ACCEPT = (
    "application/rss+xml, application/atom+xml, application/rdf+xml;q=0.9, "
    "application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
)
_FETCH_RETRIES = 1  # the next cycle is the real retry; a poll should not stall the cycle


@dataclass(frozen=True)
class SourceItem:
    """One thing a source produced, ready to ingest.

    Attributes:
        item_id: stable identity: the entry's URL or feed id, a result's URL, or a file's
            absolute path and content hash; else a hash of the content.
        title: a short title (the entry's, the file's name…).
        text: plain text to ingest, at most :data:`MAX_TEXT_CHARS` characters.
        source_ref: where it came from (a URL or an absolute path), kept as provenance.
        published_at: when the source says it was published or changed, if it says.
        kind: the source kind that produced it (``rss``, ``dir`` or ``search``).
    """

    item_id: str
    title: str
    text: str
    source_ref: str
    published_at: datetime | None
    kind: str

    def __post_init__(self) -> None:
        # Whatever produced the item (a hostile feed, a file named in Latin-1, a converter's
        # output), its texts go to the store and to the models: a NUL (PostgreSQL's text
        # refuses it) or a lone surrogate (it has no UTF-8) would break the poll recording it.
        for name in ("item_id", "title", "text", "source_ref"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, storable_text(value))


@dataclass(frozen=True)
class PollResult:
    """What one poll of one source found.

    Attributes:
        items: new items, oldest first where the source says.
        cursor: JSON-able state to pass to the next poll of this source.
        error: one line saying what failed (the whole source, or some of its files), or
            ``None``. Items and an error can come together: a folder whose one file is damaged
            still delivers the others.
    """

    items: tuple[SourceItem, ...] = ()
    cursor: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self) -> None:
        # The error names files and entries, which may carry the same unstorable characters;
        # it is stored and shown (logged, printed), so it is cleaned here, once.
        if self.error is not None:
            object.__setattr__(self, "error", storable_text(self.error))


# --------------------------------------------------------------------------- specs


def parse_source_spec(kind: str, value: str, *, max_mb: float = 25) -> dict[str, Any]:
    """Check what a user gave for a source and return its spec.

    Args:
        kind: ``rss`` (a feed's http(s) URL, or a feed file's path or ``file://`` URL), ``dir``
            (a folder) or ``search`` (a web search query).
        value: what the user typed.
        max_mb: the largest feed file accepted (``tools.max_download_mb``, as for a download).

    Returns:
        ``{"url": …}`` (a feed on the web), ``{"path": <absolute file>}`` (a feed file, which
        was read and parsed as a feed), ``{"path": <absolute folder>}`` or ``{"query": …}``.

    Raises:
        UsageError: one line naming what is wrong and how to fix it.
    """
    text = (value or "").strip()
    if kind == "rss":
        return _feed_spec(text, max_mb)
    if kind == "dir":
        if not text:
            raise UsageError("--dir needs a folder, such as ./inbox")
        path = Path(text).expanduser()
        if not path.is_dir():
            raise UsageError(
                f"--dir {text!r} is not an existing folder; create it or give the right path"
            )
        return {"path": str(path.resolve())}
    if kind == "search":
        if not text:
            raise UsageError('--search needs a query, such as "Acme Corp earnings"')
        if len(text) > MAX_QUERY_CHARS:
            raise UsageError(
                f"--search query is {len(text)} characters; keep it under {MAX_QUERY_CHARS}"
            )
        return {"query": " ".join(text.split())}
    raise UsageError(
        f"unknown source kind {kind!r}; use one of {', '.join('--' + k for k in SOURCE_KINDS)}"
    )


def _feed_spec(text: str, max_mb: float) -> dict[str, Any]:
    """``{"url": …}`` for an http(s) feed, ``{"path": …}`` for a feed file that parses."""
    parts = urlsplit(text)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise UsageError(
                f"--rss {text!r}: a file URL names a file on this machine by its absolute path, "
                "such as file:///srv/feeds/markets.xml"
            )
        return _feed_file_spec(text, Path(url2pathname(parts.path)), max_mb)
    if parts.scheme in ("http", "https") or "://" in text or not text:
        try:
            port = parts.port  # raises for a port that is not a number from 0 to 65535
        except ValueError:
            port = 0
        if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
            raise UsageError(f"{_FEED_NEEDS} (got {text!r})")
        return {"url": text}
    return _feed_file_spec(text, Path(text).expanduser(), max_mb)


_FEED_NEEDS = (
    "--rss needs the http(s) URL of a feed or the path of a feed file, such as "
    "https://example.com/feed.xml or ./feeds/markets.xml"
)


def _feed_file_spec(text: str, path: Path, max_mb: float) -> dict[str, Any]:
    """Check that ``path`` is a readable feed now (a typo or a notes file is caught when the
    source is added, not in every later cycle's report)."""
    if path.is_dir():
        raise UsageError(
            f"--rss {text!r} is a folder; add a folder of documents with --dir, or name the "
            "feed file in it"
        )
    if not path.is_file():
        raise UsageError(f"{_FEED_NEEDS} (got {text!r}: no such file)")
    try:
        size = path.stat().st_size
        if size > max_mb * 1024 * 1024:
            raise UsageError(
                f"--rss {text!r} is {size / 1024 / 1024:.1f} MB, over the {max_mb:g} MB cap "
                "(tools.max_download_mb); raise the cap or name a smaller feed file"
            )
        body = path.read_bytes()
    except OSError as error:
        raise UsageError(
            f"--rss {text!r}: cannot read it ({error.strerror or error}); fix its permissions"
        ) from None
    resolved = path.resolve()
    # Entries that cannot be read do not refuse the feed: its polls skip them and say so.
    problem = _parse_feed(body, resolved.as_uri(), None).problem
    if problem is not None:
        raise UsageError(
            f"--rss {text!r} {problem}; name a feed file (documents that are not feeds go in "
            "a --dir folder)"
        )
    return {"path": str(resolved)}


# --------------------------------------------------------------------------- dispatch


async def poll_async(
    kind: str,
    spec: Mapping[str, Any],
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
) -> PollResult:
    """Poll one source of any kind (see :func:`poll`)."""
    previous = dict(cursor or {})
    fields = {"rss": ("url", "path"), "dir": ("path",), "search": ("query",)}.get(kind)
    if fields is None:
        return PollResult((), previous, f"unknown source kind {kind!r}")
    if not any(spec.get(name) for name in fields):
        return PollResult(
            (), previous, f"the {kind} source's spec has no {' or '.join(fields)}; add it again"
        )
    settle = float(spec.get("settle_seconds", DEFAULT_SETTLE_SECONDS))
    try:
        if kind == "rss" and spec.get("url"):
            return await poll_rss_async(spec["url"], previous, settings=settings, now=now)
        if kind == "rss":
            return await poll_feed_file_async(
                spec["path"], previous, settings=settings, now=now, settle_seconds=settle
            )
        if kind == "dir":
            return await poll_dir_async(
                spec["path"], previous, settings=settings, now=now, settle_seconds=settle
            )
        return await poll_search_async(
            spec["query"],
            previous,
            settings=settings,
            now=now,
            max_results=int(spec.get("max_results", DEFAULT_SEARCH_RESULTS)),
        )
    except Exception as error:  # a bug here must not stop the aide's other sources
        return PollResult((), previous, f"polling failed unexpectedly ({_describe(error)})")


def poll(
    kind: str,
    spec: Mapping[str, Any],
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
) -> PollResult:
    """Poll one source: the dispatcher over :func:`poll_rss`, :func:`poll_dir` and
    :func:`poll_search`.

    Args:
        kind: ``rss`` (a URL, or a feed file: :func:`poll_feed_file`), ``dir`` or ``search``.
        spec: the source's spec from :func:`parse_source_spec`.
        cursor: what the previous poll returned (``None`` or ``{}`` the first time).
        settings: effective settings (``[tools]`` for network, timeouts and the parsers).
        now: the time of the poll (for reproducible tests); the current time by default.

    Returns:
        The :class:`PollResult`; never raises for a failing source.
    """
    return asyncio.run(poll_async(kind, spec, cursor, settings=settings, now=now))


# --------------------------------------------------------------------------- RSS and Atom


def poll_rss(
    url: str, cursor: Mapping[str, Any] | None, *, settings: Settings, now: datetime | None = None
) -> PollResult:
    """The new entries of the RSS or Atom feed at ``url`` (see :func:`poll_rss_async`)."""
    return asyncio.run(poll_rss_async(url, cursor, settings=settings, now=now))


async def poll_rss_async(
    url: str, cursor: Mapping[str, Any] | None, *, settings: Settings, now: datetime | None = None
) -> PollResult:
    """The new entries of the RSS (0.9x, 1.0, 2.0) or Atom feed at ``url``.

    The feed is downloaded with the tools' HTTP client, conditionally (``If-None-Match`` and
    ``If-Modified-Since`` from the cursor: an unchanged feed answers 304 and costs nothing), and
    parsed by feedparser from the downloaded bytes; feedparser never opens a URL or file itself.
    An entry's text is its title and its longest content or summary, HTML turned into text.

    Cursor: ``etag`` and ``modified`` (the server's validators) and ``seen`` (ids of entries
    already returned, the newest :data:`MAX_SEEN_IDS`).
    """
    from kgot.tools import ToolFailure
    from kgot.webclient import shown_url

    previous = dict(cursor or {})
    shown = shown_url(url)
    conditional: dict[str, str] = {"Accept": FEED_ACCEPT}
    if previous.get("etag"):
        conditional["If-None-Match"] = str(previous["etag"])
    if previous.get("modified"):
        conditional["If-Modified-Since"] = str(previous["modified"])
    http = _http(settings)
    try:
        fetched = await asyncio.wait_for(
            http.fetch(url, headers=conditional), _overall_timeout(settings)
        )
    except TimeoutError:
        return PollResult((), previous, f"the feed {shown} did not answer in time")
    except ToolFailure as failure:
        return PollResult((), previous, f"cannot read the feed {shown}: {one_line(str(failure))}")
    if fetched.status == 304:
        return PollResult((), previous, None)

    feed = _parse_feed(fetched.body, fetched.url, fetched.content_type)
    if feed.problem is not None:
        return PollResult(
            (),
            previous,
            f"the feed {shown} {feed.problem}; check the address or ask the site for its feed URL",
        )
    items, seen, skipped = _unseen(feed, previous)
    next_cursor: dict[str, Any] = {"seen": seen}
    for header, key in (("etag", "etag"), ("last-modified", "modified")):
        if fetched.headers.get(header):
            next_cursor[key] = fetched.headers[header]
    return PollResult(
        items, next_cursor, one_line(f"the feed {shown} {skipped}", 600) if skipped else None
    )


def _unseen(
    feed: _ParsedFeed, previous: Mapping[str, Any]
) -> tuple[tuple[SourceItem, ...], list[str], str | None]:
    """The entries whose ids the cursor's ``seen`` lacks, oldest first, the ids to keep, and a
    note naming the entries skipped as unreadable.

    A skipped entry's id is kept as seen: its conversion fails the same way every time, so it
    is reported once instead of making the source look broken at every poll.
    """
    seen = [str(i) for i in previous.get("seen") or []]
    known = set(seen)
    items = []
    for item in feed.entries:
        if item.item_id in known:
            continue
        known.add(item.item_id)
        seen.append(item.item_id)
        items.append(item)
    items.sort(key=lambda i: i.published_at or datetime.max.replace(tzinfo=UTC))
    skipped: list[str] = []
    for key, name, why in feed.skipped:
        if key in known:
            continue
        if key:  # one without an id ("entry 3") is named at every poll: nothing to remember
            known.add(key)
            seen.append(key)
        skipped.append(f"{one_line(name, 120)!r} ({why})")
    note = None
    if skipped:
        count = "1 entry" if len(skipped) == 1 else f"{len(skipped)} entries"
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        note = f"skipped {count} it could not read: {'; '.join(skipped[:3])}{more}"
    return tuple(items), seen[-MAX_SEEN_IDS:], note


def poll_feed_file(
    path: str | Path,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> PollResult:
    """The new entries of an RSS or Atom feed file (see :func:`poll_feed_file_async`)."""
    return asyncio.run(
        poll_feed_file_async(
            path, cursor, settings=settings, now=now, settle_seconds=settle_seconds
        )
    )


async def poll_feed_file_async(
    path: str | Path,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> PollResult:
    """The new entries of the RSS or Atom feed in a file on this machine.

    The file is read only when its size or modification time differ from the cursor's, and
    parsed only when its content hash does too (a touched file costs a hash); a file written in
    the last ``settle_seconds`` may be half-written and waits for the next poll, as in a
    folder. Entries are read by the parser http feeds use, with the file's ``file://`` URL
    standing for the feed's address: an entry's id is its guid (a feed-local guid prefixed
    with that URL), else its link, else a hash of its text, so it stays the same while the
    file is rewritten with more entries. A missing, oversized or malformed file is an error
    line and keeps the cursor (the next poll tries again).

    Cursor: ``file`` (``[size, mtime_ns, sha256]`` of the version read) and ``seen`` (ids of
    entries already returned, the newest :data:`MAX_SEEN_IDS`).
    """
    previous = dict(cursor or {})
    feed = Path(path)
    try:
        stat = feed.stat()
    except OSError:
        return PollResult((), previous, f"the feed file {feed} does not exist any more")
    if not feed.is_file():
        return PollResult((), previous, f"the feed file {feed} is not a file any more")
    if stat.st_mtime > time.time() - settle_seconds:
        return PollResult((), previous, None)  # maybe still being written: next poll
    known = previous.get("file")
    if known and known[0] == stat.st_size and known[1] == stat.st_mtime_ns:
        return PollResult((), previous, None)
    cap_mb = settings.tools.max_download_mb
    if stat.st_size > cap_mb * 1024 * 1024:
        return PollResult(
            (),
            previous,
            f"the feed file {feed} is over the {cap_mb} MB cap (tools.max_download_mb)",
        )
    try:
        body = await asyncio.to_thread(feed.read_bytes)
    except OSError as error:
        return PollResult(
            (), previous, f"cannot read the feed file {feed} ({error.strerror or error})"
        )
    record = [stat.st_size, stat.st_mtime_ns, hashlib.sha256(body).hexdigest()]
    if known and known[2] == record[2]:
        return PollResult((), {**previous, "file": record}, None)  # touched, not changed
    parsed = _parse_feed(body, feed.resolve().as_uri(), None)
    if parsed.problem is not None:
        return PollResult(
            (), previous, f"the feed file {feed} {parsed.problem}; fix or replace the file"
        )
    items, seen, skipped = _unseen(parsed, previous)
    note = one_line(f"the feed file {feed} {skipped}", 600) if skipped else None
    return PollResult(items, {"file": record, "seen": seen}, note)


@dataclass(frozen=True)
class _ParsedFeed:
    """A feed body read: its entries that say something, the entries that could not be read
    (``(id, name, why)``: the id they would have had, or ``""``, and how to name them), or why
    it is not a feed."""

    entries: list[SourceItem]
    skipped: list[tuple[str, str, str]]
    problem: str | None = None


def _parse_feed(body: bytes, url: str, content_type: str | None) -> _ParsedFeed:
    """The entries of a feed body, the ones that could not be read, or why it is not a feed.

    One bad entry fails alone: an entry whose conversion raises is named in ``skipped`` and
    the others come through. The body is cleaned first (:func:`_xml_safe`) because
    feedparser's fallback parser crashes on a reference to a lone surrogate, which would make
    the whole feed unreadable.
    """
    import feedparser

    body, content_type = _xml_safe(body, content_type)
    headers = {"content-location": url}
    if content_type:
        headers["content-type"] = content_type
    try:
        # A stream, never bytes or str: given those, feedparser tries them as a URL or a file.
        parsed = feedparser.parse(io.BytesIO(body), response_headers=headers)
    except Exception as error:  # its fallback parser has crashed on hostile bytes before
        return _ParsedFeed(
            [], [], f"is not a readable RSS or Atom feed (the parser failed: {_describe(error)})"
        )
    entries: list[SourceItem] = []
    skipped: list[tuple[str, str, str]] = []
    for number, entry in enumerate(list(parsed.get("entries") or [])[:MAX_FEED_ENTRIES], 1):
        try:
            item = _feed_item(entry, url)
        except Exception as error:  # one entry in a shape nobody foresaw: skip it, not the feed
            try:
                key = _entry_key(entry, url)
            except Exception:
                key = ""
            skipped.append((key, key or f"entry {number}", _describe(error)))
            continue
        if item.text:  # a truncated feed leaves empty shells
            entries.append(item)
    # No recognised format (an HTML page) or a parse failure, and nothing to show for it.
    if not entries and not skipped and (parsed.get("bozo") or not parsed.get("version")):
        reason = parsed.get("bozo_exception")
        # Cleaned here: the problem is a UsageError's text too (parse_source_spec).
        detail = f" ({one_line(storable_text(str(reason)), 120)})" if reason else ""
        return _ParsedFeed([], [], f"is not a readable RSS or Atom feed{detail}")
    return _ParsedFeed(entries, skipped)


# Character references XML 1.0 forbids (NUL, other C0 controls, lone surrogates, FFFE/FFFF,
# beyond 10FFFF). Expat rejects the document for one, feedparser falls back to its loose
# parser, and that one raises on a surrogate: the whole feed would be lost for one entry.
_CHAR_REF = re.compile(rb"&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));")
_REPLACEMENT_REF = b"&#xFFFD;"
# UTF-16 and UTF-32 bodies, by byte-order mark or by how ``<`` begins them (XML 1.0, F.1);
# the 32-bit marks first: FF FE 00 00 also begins with UTF-16's FF FE.
_WIDE_STARTS: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16"),
    (b"\xff\xfe", "utf-16"),
    (b"\x00<", "utf-16-be"),
    (b"<\x00", "utf-16-le"),
)
_XML_DECLARED_ENCODING = re.compile(r"""^(\s*<\?xml[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")
_CHARSET_PARAMETER = re.compile(r";\s*charset\s*=[^;]*", re.IGNORECASE)


def _xml_allowed(code: int) -> bool:
    """Whether XML 1.0's ``Char`` production admits this code point."""
    return (
        code in (0x9, 0xA, 0xD)
        or 0x20 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


def _safe_ref(match: re.Match[bytes]) -> bytes:
    hexa, decimal = match.group(1), match.group(2)
    digits = hexa or decimal
    if len(digits) > 8:  # far beyond 10FFFF (and int() refuses thousands of digits)
        return _REPLACEMENT_REF
    code = int(digits, 16) if hexa else int(digits)
    return match.group(0) if _xml_allowed(code) else _REPLACEMENT_REF


def _xml_safe(body: bytes, content_type: str | None) -> tuple[bytes, str | None]:
    """A feed body whose forbidden character references and raw NUL bytes are U+FFFD
    references, and the content type to parse it with.

    A UTF-16 or UTF-32 body is first re-encoded as UTF-8 (its NUL bytes are its encoding, and
    its references cannot be found byte-wise), its XML declaration and content type told so.
    Any other body is ASCII-compatible (UTF-8, the ISO-8859 and Windows code pages, the East
    Asian multi-byte encodings): a NUL byte is never part of a character there, and an ``&#``
    reference is those very bytes. A reference (not the UTF-8 bytes of U+FFFD) replaces a raw
    NUL, whatever the encoding.
    """
    for start, codec in _WIDE_STARTS:
        if body.startswith(start):
            text = body.decode(codec, errors="replace").lstrip("\ufeff")
            text = _XML_DECLARED_ENCODING.sub(r"\g<1>\g<2>utf-8\g<2>", text, count=1)
            # ``replace`` has already turned undecodable units and lone surrogates into U+FFFD.
            body = text.encode("utf-8")
            if content_type:
                content_type = _CHARSET_PARAMETER.sub("", content_type)
            break
    if b"&#" in body:
        body = _CHAR_REF.sub(_safe_ref, body)
    return body.replace(b"\x00", _REPLACEMENT_REF), content_type


def _entry_key(entry: Mapping[str, Any], feed_url: str) -> str:
    """An entry's id: its guid (a feed-local one scoped by the feed's URL), else its link;
    storable, as the cursor that remembers it compares it with what it stored."""
    guid = storable_text(str(entry.get("id") or "")).strip()
    if guid and ":" not in guid:
        guid = f"{feed_url}#{guid}"  # "42" means something only within its feed
    return guid or storable_text(str(entry.get("link") or "")).strip()


def _feed_item(entry: Mapping[str, Any], feed_url: str) -> SourceItem:
    link = str(entry.get("link") or "").strip()
    title = _clean_line(str(entry.get("title") or ""))
    body = _entry_text(entry)
    text = "\n\n".join(part for part in (title, body) if part)
    return SourceItem(
        item_id=_entry_key(entry, feed_url) or _content_id(text),
        title=title or _first_line(body) or link or feed_url,
        text=_capped(text),
        source_ref=link or feed_url,
        published_at=_entry_time(entry),
        kind="rss",
    )


def _entry_text(entry: Mapping[str, Any]) -> str:
    """The longest of an entry's contents and its summary, as plain text."""
    candidates: list[tuple[str, str]] = []
    for content in entry.get("content") or []:
        candidates.append((str(content.get("value") or ""), str(content.get("type") or "")))
    detail = entry.get("summary_detail") or {}
    if entry.get("summary"):
        candidates.append((str(entry["summary"]), str(detail.get("type") or "text/html")))
    texts = [
        _clean_text(value) if kind == "text/plain" else html_to_text(value)
        for value, kind in candidates
    ]
    return max(texts, key=len, default="")


def _entry_time(entry: Mapping[str, Any]) -> datetime | None:
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        value = entry.get(key)
        if value:
            try:
                year, month, day, hour, minute, second = (int(v) for v in value[:6])
                # feedparser gives every date as a UTC struct_time
                return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
            except (TypeError, ValueError):
                continue
    return None


# --------------------------------------------------------------------------- folders


def poll_dir(
    path: str | Path,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> PollResult:
    """The new or changed documents in a folder (see :func:`poll_dir_async`)."""
    return asyncio.run(
        poll_dir_async(path, cursor, settings=settings, now=now, settle_seconds=settle_seconds)
    )


async def poll_dir_async(
    path: str | Path,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> PollResult:
    """The new or changed documents (.md .txt .html .pdf .json) in a folder and its subfolders.

    A file is new or changed when its size and modification time differ from the cursor's and
    its content hash does too (a touched but unchanged file is not an item again). Text and
    Markdown are read directly; HTML, PDF and JSON are parsed in the sandbox's conversion
    workers. Hidden files and editors' ``~`` files are skipped, files written in the last
    ``settle_seconds`` (maybe half-written) are left for later. A file that cannot be read is
    tried again in the next polls, :data:`MAX_FILE_TRIES` times per version, and reported.

    Nothing is read through a link: links to files and to folders are never followed (one
    leaving the folder is reported; the target of one staying inside is read under its own
    name), and each file is opened without following a link and checked to be the file at a
    real path inside the folder, so a link put in place meanwhile is not read through either.

    Cursor: ``files`` (``{path: [size, mtime_ns, sha256]}``) and ``failures``
    (``{path: [sha256, tries]}``).
    """
    previous = dict(cursor or {})
    folder = Path(path)
    root = os.path.abspath(folder)  # the path stored: resolved when the source was added
    real = os.path.realpath(folder)
    if real != root:
        # A link on its path now (the folder itself or one above it) was put there since,
        # and everything under its target would count as inside.
        return PollResult(
            (),
            previous,
            f"the folder {folder} resolves to {real} now: it or a folder above it is a link; "
            "add the folder itself as the source again",
        )
    if not folder.is_dir():
        return PollResult((), previous, f"the folder {folder} does not exist any more")
    scan = _FolderScan(
        settings=settings,
        # Modification times are the real clock's, so the window is too (not ``now``, which a
        # caller may set to any time).
        settled_before=time.time() - settle_seconds,
        files={str(k): list(v) for k, v in dict(previous.get("files") or {}).items()},
        failures={str(k): list(v) for k, v in dict(previous.get("failures") or {}).items()},
        folder=folder,
        root=root,
    )
    present: set[str] = set()
    for candidate in _documents_in(folder, scan.root, scan.problems):
        present.add(_path_key(candidate))
        if len(scan.items) < MAX_DIR_ITEMS:  # the rest wait for the next poll
            await scan.visit(candidate)
    # Forget files that are gone: one that comes back is new again.
    next_cursor = {
        "files": {k: v for k, v in scan.files.items() if k in present},
        "failures": {k: v for k, v in scan.failures.items() if k in present},
    }
    items = sorted(
        scan.items,
        key=lambda i: (i.published_at or datetime.min.replace(tzinfo=UTC), i.source_ref),
    )
    return PollResult(tuple(items), next_cursor, _summarise(scan.problems, folder))


@dataclass
class _FolderScan:
    """One poll of a folder: the cursor's records as they change, and what was found.

    ``files`` maps a path to ``[size, mtime_ns, sha256]`` of the version already handled (its
    hash ``None`` when it was too large to read); ``failures`` maps a path to ``[sha256,
    tries]`` of a version that could not be read yet. ``root`` is the folder's absolute path,
    found to be its real path when the poll began: nothing outside it is read.
    """

    settings: Settings
    settled_before: float
    files: dict[str, list[Any]]
    failures: dict[str, list[Any]]
    folder: Path
    root: str
    problems: list[str] = field(default_factory=list)
    items: list[SourceItem] = field(default_factory=list)
    parser_down: bool = False

    async def visit(self, candidate: Path) -> None:
        """Look at one file: an item when it is new or changed and readable."""
        key = _path_key(candidate)
        try:
            # lstat: a quick look that follows no link; only the open in _load decides what
            # is read.
            stat = candidate.lstat()
        except OSError:
            return  # removed meanwhile
        if stat.st_mtime > self.settled_before:
            return  # maybe still being written: next poll
        known = self.files.get(key)
        if known and known[0] == stat.st_size and known[1] == stat.st_mtime_ns:
            return
        loaded = self._load(candidate, key, known)
        if loaded is None:
            return
        stat, content = loaded
        digest = hashlib.sha256(content).hexdigest()
        if known and known[2] == digest:
            self.files[key] = [stat.st_size, stat.st_mtime_ns, digest]  # touched, not changed
            return
        if self.parser_down and candidate.suffix.lower() not in _PLAIN_EXTENSIONS:
            return  # said once; the file waits for a poll where the parser starts
        try:
            title, text = await _read_file(candidate, content, self.settings)
        except _ParserUnavailable as down:
            self.parser_down = True
            self.problems.append(f"{down}; documents other than text wait for the next poll")
            return
        except OSError as error:  # the private copy for the parser could not be written
            self.problems.append(f"cannot read {candidate.name} ({error.strerror or error})")
            return
        except _Unreadable as unreadable:
            self._failed(key, digest, [stat.st_size, stat.st_mtime_ns, digest], str(unreadable))
            return
        self.files[key] = [stat.st_size, stat.st_mtime_ns, digest]
        self.failures.pop(key, None)
        if not text.strip():
            self.problems.append(f"{candidate.name} has no text (a scanned PDF?); skipped")
            return
        self.items.append(
            SourceItem(
                item_id=f"{key}#sha256:{digest}",
                title=title or candidate.name,
                text=_capped(text),
                source_ref=key,
                published_at=datetime.fromtimestamp(stat.st_mtime, UTC),
                kind="dir",
            )
        )

    def _load(
        self, candidate: Path, key: str, known: list[Any] | None
    ) -> tuple[os.stat_result, bytes] | None:
        """The file's status and bytes, if it is a file inside the folder within the cap;
        else ``None``, the reason noted."""
        cap_mb = self.settings.tools.max_download_mb
        try:
            stat, content = _read_inside(candidate, self.root, int(cap_mb * 1024 * 1024))
        except _NotRead as why:
            self.problems.append(f"{_shown(self.folder, candidate)} {why}; not read")
            return None
        except FileNotFoundError:
            return None  # removed meanwhile
        except OSError as error:
            self.problems.append(f"cannot read {candidate.name} ({error.strerror or error})")
            return None
        if content is None:
            if not (known and known[2] is None):  # said once, not every poll
                self.problems.append(
                    f"{candidate.name} is over the {cap_mb} MB cap (tools.max_download_mb)"
                )
            self.files[key] = [stat.st_size, stat.st_mtime_ns, None]
            return None
        return stat, content

    def _failed(self, key: str, digest: str, record: list[Any], why: str) -> None:
        """Count a failed read of this version; after :data:`MAX_FILE_TRIES` give it up."""
        earlier = self.failures.get(key)
        tries = int(earlier[1]) + 1 if earlier and earlier[0] == digest else 1
        if tries >= MAX_FILE_TRIES:
            self.files[key] = record
            self.failures.pop(key, None)
            self.problems.append(f"{why} (gave up after {tries} tries)")
        else:
            self.failures[key] = [digest, tries]
            self.problems.append(f"{why} (will try again)")


def _documents_in(folder: Path, root: str, problems: list[str]) -> Iterator[Path]:
    """Candidate documents under ``folder``, in a stable order (a folder's files by name, then
    its subfolders', depth first), hidden and editor files skipped.

    No link is followed, to a file or to a folder: a link leaving the folder (its real path is
    not under ``root``) could read any file on the machine, and is named in ``problems``; one
    that stays inside points at a file the walk reads under its own name anyway (and a link to
    a folder inside could loop), so it is skipped quietly. A folder that cannot be listed is
    named in ``problems`` too.
    """
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            problems.append(f"cannot list {_shown(folder, current)} ({error.strerror or error})")
            continue
        subfolders: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            candidate = Path(entry.path)
            try:
                if entry.is_symlink():
                    _note_link(folder, root, candidate, problems)
                elif entry.is_dir(follow_symlinks=False):
                    subfolders.append(candidate)
                elif _is_document_name(entry.name) and entry.is_file(follow_symlinks=False):
                    yield candidate
            except OSError:
                continue  # removed meanwhile
        pending.extend(reversed(subfolders))


def _is_document_name(name: str) -> bool:
    return not name.startswith((".", "~")) and Path(name).suffix.lower() in DIR_EXTENSIONS


def _note_link(folder: Path, root: str, link: Path, problems: list[str]) -> None:
    """Name a link that leaves the folder (one the walk would have read: a document's name,
    or a folder); it is never followed either way. Resolving it reads no file."""
    target = os.path.realpath(link)
    if is_under(target, root):
        return
    if _is_document_name(link.name) or os.path.isdir(target):
        problems.append(
            f"{_shown(folder, link)} is a link to {target}, outside the folder; not read"
        )


class _NotRead(Exception):
    """The file opened at a document's path is not one to read: not a regular file, outside
    the folder (a link put on its path meanwhile), or not the file now at its real path (it
    changed while it was read). The message says which, following the file's name."""


_OPEN_FLAGS = (
    os.O_RDONLY
    # The last component is never followed: a link there fails the open (ELOOP).
    | getattr(os, "O_NOFOLLOW", 0)
    # A FIFO swapped in under a document's name would block the open forever.
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_inside(path: Path, root: str, cap: int) -> tuple[os.stat_result, bytes | None]:
    """The file's status and bytes (``None`` when over ``cap`` bytes), if it is a regular file
    inside ``root``.

    Time-of-check to time-of-use safe: the file is opened first (the last component not
    followed) and the open file itself is checked: a regular file, and the very inode found at
    its real path, which is under ``root``. A folder on its path swapped for a link to /etc
    after the walk saw it fails the check, whenever the swap happens.

    Raises:
        _NotRead: not a regular file, not inside ``root``, or not the file now at its real
            path (swapped meanwhile).
        FileNotFoundError: it is gone (removed meanwhile, maybe once opened).
        OSError: it cannot be opened or read (ELOOP: it is a link now).
    """
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        stat = os.fstat(descriptor)
        if not S_ISREG(stat.st_mode):
            raise _NotRead("is not a regular file")
        real = os.path.realpath(path)
        if not is_under(real, root):
            raise _NotRead(f"resolves to {real}, outside the folder")
        there = os.stat(real)
        if (there.st_dev, there.st_ino) != (stat.st_dev, stat.st_ino):
            raise _NotRead("changed while it was read")
        if stat.st_size > cap:
            return stat, None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            content = handle.read(cap + 1)
        return stat, (content if len(content) <= cap else None)  # grew past the cap meanwhile
    finally:
        os.close(descriptor)


def _path_key(path: Path) -> str:
    """A file's path as the cursor and its items name it: a name that is not UTF-8 (Python
    decodes its bytes to lone surrogates) gets U+FFFD, so it can be stored."""
    return storable_text(str(path))


def _shown(folder: Path, path: Path | str) -> str:
    """``path`` relative to the watched folder, for a problem line."""
    try:
        return str(Path(path).relative_to(folder)) if Path(path) != folder else "."
    except ValueError:
        return str(path)


class _Unreadable(Exception):
    """A file that could not be turned into text; the message names it and says why."""


class _ParserUnavailable(Exception):
    """The sandbox's document parser cannot start: no file's fault, so no file is given up."""


async def _read_file(path: Path, content: bytes, settings: Settings) -> tuple[str | None, str]:
    """The title (if any) and text of a document, from the bytes that were hashed (so the text
    always belongs to the hash in the item's id, even if the file changes meanwhile).

    Raises:
        _Unreadable: the file is damaged, not a document, or its parse failed.
        _ParserUnavailable: the conversion workers cannot start.
    """
    from kgot import documents

    outcome = await documents.read_document(content, settings, name=path.name)
    if isinstance(outcome, documents.DocumentText):
        return outcome.title, outcome.text
    if outcome.problem == "parser_unavailable":
        raise _ParserUnavailable(one_line(outcome.detail, 300))
    if outcome.problem == "not_a_document":
        raise _Unreadable(f"{path.name} is not a document kgot reads")
    raise _Unreadable(f"cannot read {path.name}: {one_line(outcome.detail, 200)}")


def _summarise(problems: list[str], folder: Path) -> str | None:
    if not problems:
        return None
    shown = "; ".join(problems[:3])
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return one_line(f"in {folder}: {shown}{more}", 600)


# --------------------------------------------------------------------------- web search


def poll_search(
    query: str,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    max_results: int = DEFAULT_SEARCH_RESULTS,
) -> PollResult:
    """New results of a web search (see :func:`poll_search_async`)."""
    return asyncio.run(
        poll_search_async(query, cursor, settings=settings, now=now, max_results=max_results)
    )


async def poll_search_async(
    query: str,
    cursor: Mapping[str, Any] | None,
    *,
    settings: Settings,
    now: datetime | None = None,
    max_results: int = DEFAULT_SEARCH_RESULTS,
) -> PollResult:
    """Results of ``query`` not returned before, through web_search's providers.

    The providers are the web_search tool's, in its order (SerpAPI, Tavily, Brave, SearXNG when
    configured, then ddgs): the first that returns results answers. An item is one result: its
    title and snippet, identified by its URL.

    Cursor: ``seen`` (result URLs already returned, the newest :data:`MAX_SEEN_IDS`).
    """
    from kgot.tools import ToolFailure, providers_for

    previous = dict(cursor or {})
    chain = providers_for(settings.tools, _http(settings))
    if not chain:
        return PollResult(
            (),
            previous,
            "no search provider is configured (tools.search_backend is `none` and no keys are "
            "set); configure one or remove this source",
        )
    limit = max(1, min(int(max_results), 20))
    failures: list[str] = []
    hits: list[Any] = []
    for provider in chain:
        try:
            found = await asyncio.wait_for(
                provider.search(query, limit, None), _overall_timeout(settings)
            )
        except TimeoutError:
            failures.append(f"{provider.name}: did not answer in time")
            continue
        except ToolFailure as failure:
            failures.append(f"{provider.name}: {one_line(str(failure), 200)}")
            continue
        hits = [h for h in found if h.url][:limit]
        if hits:
            break
    if not hits and failures:
        return PollResult(
            (), previous, one_line(f"web search for {query!r} failed: {'; '.join(failures)}", 600)
        )
    seen = [str(u) for u in previous.get("seen") or []]
    known = set(seen)
    items = []
    for hit in hits:
        if hit.url in known:
            continue
        known.add(hit.url)
        seen.append(hit.url)
        title = _clean_line(hit.title) or hit.url
        items.append(
            SourceItem(
                item_id=hit.url,
                title=title,
                text=_capped("\n\n".join(p for p in (title, _clean_text(hit.snippet)) if p)),
                source_ref=hit.url,
                published_at=None,
                kind="search",
            )
        )
    return PollResult(tuple(items), {"seen": seen[-MAX_SEEN_IDS:]}, None)


# --------------------------------------------------------------------------- shared helpers


def _http(settings: Settings) -> Http:
    from kgot.webclient import Http

    return Http(settings.tools, retries=_FETCH_RETRIES)


def _overall_timeout(settings: Settings) -> float:
    """The longest one request may take in all, retries included: httpx's timeout is per read,
    so a server that trickles bytes would otherwise hold the poll forever."""
    return settings.tools.timeout * (_FETCH_RETRIES + 1) + 5.0


_BLOCKS = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre"}
    | {"section", "article", "header", "footer", "ul", "ol", "table", "hr", "dt", "dd"}
)
_SKIPPED = frozenset({"script", "style", "template", "noscript"})
_HTML_SPACE = re.compile(r"[ \t\n\r\f]+")


class _TextCollector(HTMLParser):
    """Text of an HTML fragment with a line break at each block (standard library only: a
    feed's HTML is small, and this parser runs no code and fetches nothing)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0
        self._preformatted = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag == "pre":
            self._preformatted += 1
        if tag in _BLOCKS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag == "pre":
            self._preformatted = max(0, self._preformatted - 1)
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        # Line breaks in HTML source are spaces, except inside <pre>.
        self.parts.append(data if self._preformatted else _HTML_SPACE.sub(" ", data))


def html_to_text(fragment: str) -> str:
    """Plain text of an HTML fragment (a feed entry's summary or content): tags dropped,
    entities decoded, one line per paragraph or list item."""
    if "<" not in fragment:
        return _clean_text(html.unescape(fragment))
    collector = _TextCollector()
    try:
        collector.feed(fragment)
        collector.close()
    except (AssertionError, ValueError):  # HTMLParser's own failures on broken markup
        from kgot.tools import strip_markup

        return strip_markup(fragment)
    return _clean_text("".join(collector.parts))


_SPACES = re.compile(r"[ \t\f\v\r\u00a0]+")


def _clean_text(text: str) -> str:
    """Spaces collapsed within lines, blank lines collapsed to one, ends trimmed."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _clean_line(text: str) -> str:
    return " ".join(html_to_text(text).split())


def _first_line(text: str) -> str:
    return one_line(text.split("\n", 1)[0], 120) if text else ""


def _capped(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    left = len(text) - MAX_TEXT_CHARS
    return f"{text[:MAX_TEXT_CHARS]}\n[… {left:,} more characters not read]"


def _content_id(text: str) -> str:
    # Of the text as the item stores it: a lone surrogate has no UTF-8 to hash.
    return "sha256:" + hashlib.sha256(storable_text(text).encode("utf-8")).hexdigest()


def _describe(error: BaseException) -> str:
    return one_line(f"{type(error).__name__}: {error}", 200)
