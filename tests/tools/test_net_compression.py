"""Compressed answers stay within the download cap (issue 25): a gzip or zstd "bomb" fails at
the cap with little memory used, a chain of encodings or an unknown one is refused in one line,
and ordinary compressed pages, API answers and bodies exactly at the cap still read."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
import json
import os
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from kgot.tests.tools.tool_fixtures import (
    FixtureServer,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext
from kgot.tools.base import ToolFailure
from kgot.webclient.client import Fetched, Http
from kgot.webclient.decoding import ZSTD_MAX_WINDOW, BodyTooLarge, BoundedBody, accept_encoding

MB = 1024 * 1024
HAS_ZSTD = importlib.util.find_spec("zstandard") is not None
needs_zstd = pytest.mark.skipif(not HAS_ZSTD, reason="zstandard is not installed: zstd unused")
# Half a megabyte that compresses to a few hundred KB (the hashes): many network chunks either way.
PAGE = (
    "<html><body><article><h1>Herons</h1>"
    + "".join(
        f"<p>Heron note {i}: grey herons wait ({hashlib.sha256(bytes(i)).hexdigest()}).</p>"
        for i in range(6000)
    )
    + "</article></body></html>"
).encode()
# Well under the bombs' decoded sizes, well over what a bounded reader needs for a 1 MB cap.
PEAK_LIMIT = 8 * MB


def gzip_of_zeros(size: int) -> bytes:
    """``size`` zero bytes gzipped, without ever holding them (about 1 KB per MB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MB)
    parts = [packer.compress(block) for _ in range(size // MB)]
    parts.append(packer.compress(bytes(size % MB)))
    return b"".join(parts) + packer.flush()


def zstd_of_zeros(size: int) -> bytes:
    import zstandard

    packer = zstandard.ZstdCompressor(level=3).compressobj()
    block = bytes(MB)
    parts = [packer.compress(block) for _ in range(size // MB)]
    return b"".join(parts) + packer.flush()


def fetch(url: str, cap_mb: int = 1) -> Fetched:
    return asyncio.run(Http(tools_settings(max_download_mb=cap_mb), retries=0).fetch(url))


def refused(url: str, cap_mb: int = 1) -> ToolFailure:
    with pytest.raises(ToolFailure) as failure:
        fetch(url, cap_mb)
    return failure.value


def peak_fetching(server: FixtureServer, url: str) -> int:
    """The most memory Python held at once (all threads) while fetching ``url``, failing or
    not. A small page first: imports and the TLS context are not the fetch's own."""
    fetch(server.page("/warm-up.html", "<p>warm</p>"))
    return peak_while(lambda: fetch(url))


def peak_while(action: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        action()
    except ToolFailure:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def encoded(server: FixtureServer, path: str, body: bytes, encoding: str, **kw: Any) -> str:
    return server.route(
        path,
        Response(200, body, kw.get("content_type", "text/html"), {"Content-Encoding": encoding}),
    )


# -- bombs ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_gzip_bomb_fails_at_the_cap_in_little_memory(server):
    bomb = gzip_of_zeros(50 * MB)
    assert len(bomb) < 60_000  # 50 MB of zeros in ~50 KB
    url = encoded(server, "/bomb.html", bomb, "gzip")
    peak = peak_fetching(server, url)
    assert peak < PEAK_LIMIT, f"peak {peak / MB:.1f} MB while refusing a 50 MB gzip bomb"
    failure = refused(url)
    assert failure.kind == "unsupported"
    assert "once decompressed" in str(failure) and "download cap of 1 MB" in str(failure)


@pytest.mark.slow
def test_gzip_bomb_never_decodes_more_than_the_cap_plus_one_byte():
    bomb = gzip_of_zeros(50 * MB)
    body = BoundedBody("gzip", MB)
    with pytest.raises(BodyTooLarge) as over:
        for start in range(0, len(bomb), 16384):  # the chunks as a network might hand them
            body.feed(bomb[start : start + 16384])
    assert over.value.decoded
    assert body.produced == MB + 1


@pytest.mark.slow
@needs_zstd
def test_zstd_bomb_fails_at_the_cap_in_little_memory(server):
    bomb = zstd_of_zeros(512 * MB)
    assert len(bomb) < 40_000
    url = encoded(server, "/bomb.zst", bomb, "zstd")
    peak = peak_fetching(server, url)
    assert peak < PEAK_LIMIT, f"peak {peak / MB:.1f} MB while refusing a 512 MB zstd bomb"
    failure = refused(url)
    assert failure.kind == "unsupported" and "once decompressed" in str(failure)
    body = BoundedBody("zstd", MB)
    with pytest.raises(BodyTooLarge):
        body.feed(bomb)  # in one piece: the decoder bounds itself, not the network's chunks
    assert body.produced <= MB + 2 * 128 * 1024  # at most two zstd blocks past the cap


@needs_zstd
def test_zstd_frame_asking_for_a_huge_window_is_refused_before_allocating_it(server):
    import zstandard

    # A streamed frame (no content size) declaring a 128 MiB window, past RFC 9659's 8 MB.
    params = zstandard.ZstdCompressionParameters.from_level(1, window_log=27)
    packer = zstandard.ZstdCompressor(compression_params=params).compressobj()
    frame = packer.compress(b"x" * 1000) + packer.flush()
    assert ZSTD_MAX_WINDOW < 2**27
    failure = refused(encoded(server, "/wide.zst", frame, "zstd"))
    assert (
        failure.kind == "network" and "zstd" in str(failure) and "does not decode" in str(failure)
    )


# -- refused encodings ---------------------------------------------------------------------


def test_chained_encodings_are_refused(server):
    body = gzip.compress(gzip.compress(PAGE))
    failure = refused(encoded(server, "/twice.html", body, "gzip, gzip"))
    assert failure.kind == "unsupported"
    message = str(failure)
    assert "compressed 2 times over" in message and "'gzip, gzip'" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "encoding", ["compress", "x-snappy"] + ([] if "br" in accept_encoding() else ["br"])
)
def test_unknown_encodings_are_refused(server, encoding):
    failure = refused(encoded(server, "/odd.html", b"\x1f\x9d" + b"\x00" * 100, encoding))
    assert failure.kind == "unsupported"
    message = str(failure)
    assert f"Content-Encoding: {encoding!r}" in message and "does not decode" in message
    assert accept_encoding() in message and "\n" not in message


def test_a_body_that_does_not_decode_is_a_network_failure(server):
    failure = refused(encoded(server, "/broken.html", b"\x1f\x8b\x08\x00garbage" * 10, "gzip"))
    assert failure.kind == "network" and "gzip data is corrupt" in str(failure)


def test_an_empty_answer_naming_an_unknown_encoding_is_not_refused(server):
    # A 204 (or a feed's 304) has no body to decode, whatever its headers say.
    server.route("/nothing", Response(204, b"", "text/html", {"Content-Encoding": "br"}))
    assert fetch(server.url("/nothing")).body == b""


# -- ordinary pages ------------------------------------------------------------------------


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "identity": lambda data: data,
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # zlib-wrapped, as RFC 9110 says
    "deflate-raw": _raw_deflate,  # what some servers send as "deflate"
}
if HAS_ZSTD:
    ENCODERS["zstd"] = _zstd


@pytest.mark.parametrize("name", list(ENCODERS))
def test_compressed_pages_read_as_before(server, name):
    encoding = name.removesuffix("-raw")
    url = encoded(server, f"/page-{name}.html", ENCODERS[name](PAGE), encoding)
    assert len(ENCODERS[name](PAGE)) > 200_000  # many network chunks, decoded as one page
    assert fetch(url).body == PAGE


def test_accept_encoding_names_what_kgot_decodes(server):
    server.page("/plain.html", PAGE)
    fetch(server.url("/plain.html"))
    sent = server.requests[-1].headers["accept-encoding"]
    assert sent == accept_encoding()
    assert set(sent.split(", ")) == {"gzip", "deflate"} | ({"zstd"} if HAS_ZSTD else set())


@pytest.mark.slow
def test_visit_page_reads_a_gzipped_page(server):
    url = encoded(server, "/gz.html", gzip.compress(PAGE), "gzip")
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    outcome = call(runner, "visit_page", url=url)
    assert outcome.ok and "Heron note 1:" in outcome.output


def test_a_gzipped_api_answer_is_decoded_once(server):
    answer = json.dumps({"query": {"pages": [{"title": "Heron"}]}}).encode()
    encoded(server, "/w/api.php", gzip.compress(answer), "gzip", content_type="application/json")
    data = asyncio.run(
        Http(tools_settings(server), retries=0).api(
            server.url("/w/api.php"), service="the Wikipedia API", setting="tools.wikipedia_api"
        )
    )
    assert data == {"query": {"pages": [{"title": "Heron"}]}}


# -- the cap's edge ------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_body_exactly_at_the_cap_passes_and_one_byte_more_fails(server, encoding):
    exact = os.urandom(MB // 2).hex().encode()  # gzips to ~0.6 MB: under the cap as sent
    encode = ENCODERS[encoding]
    assert fetch(encoded(server, "/exact", encode(exact), encoding)).body == exact
    failure = refused(encoded(server, "/over", encode(exact + b"!"), encoding))
    assert failure.kind == "unsupported" and "download cap of 1 MB" in str(failure)
    assert ("once decompressed" in str(failure)) == (encoding == "gzip")


def test_a_compressed_body_over_the_cap_as_sent_fails_too():
    # Incompressible data inflates to about its own size: past the cap as received already.
    body = BoundedBody("gzip", MB)
    data = gzip.compress(os.urandom(MB + 4096))
    with pytest.raises(BodyTooLarge):
        for start in range(0, len(data), 65536):
            body.feed(data[start : start + 65536])
    assert body.received <= MB + 65536 and body.produced <= MB + 1


# -- the start of a body over the limit ----------------------------------------------------


def feed_all(body: BoundedBody, data: bytes, chunk: int) -> BodyTooLarge:
    with pytest.raises(BodyTooLarge) as over:
        for start in range(0, len(data), chunk):
            body.feed(data[start : start + chunk])
    return over.value


@pytest.mark.parametrize("chunk", [1000, 4096, 10_000])
def test_a_plain_body_over_the_limit_keeps_its_first_bytes(chunk):
    text = os.urandom(5000).hex().encode()  # 10 KB
    body = BoundedBody(None, 4096)
    over = feed_all(body, text, chunk)
    assert not over.decoded
    assert body.kept() == text[:4096]


def test_a_body_decoding_over_the_limit_keeps_its_first_bytes():
    text = b"".join(b"line %d of a long refusal\n" % (i % 10) for i in range(2000))  # 50 KB
    data = gzip.compress(text)
    assert len(data) < 4096  # only decoding goes over
    body = BoundedBody("gzip", 4096)
    over = feed_all(body, data, 1000)
    assert over.decoded
    assert body.kept() == text[:4096]


@pytest.mark.parametrize("chunk", [1000, 10_000])
def test_a_compressed_body_over_the_limit_as_sent_keeps_its_first_bytes(chunk):
    text = os.urandom(5000).hex().encode()  # gzips to some 5.6 KB: over 4 KB as received
    data = gzip.compress(text)
    assert len(data) > 4096
    body = BoundedBody("gzip", 4096)
    feed_all(body, data, chunk)
    assert body.kept() == text[:4096]
    assert body.received <= 4096 + chunk and body.produced <= 4096 + 1


def test_an_undecodable_body_over_the_limit_as_sent_is_still_too_large():
    body = BoundedBody("br", 4096)
    over = feed_all(body, os.urandom(10_000), 10_000)
    assert not over.decoded
    assert body.kept() == b""
