"""Response bodies decoded within the download cap, whatever their compression ratio.

httpx undoes a ``Content-Encoding`` one network chunk at a time, with no limit on what a chunk
inflates to, so a cap counted after decoding comes too late: 591 bytes of ``gzip, gzip`` became
560 MB, 65 KB of zstd 2 GB and a MemoryError. :class:`BoundedBody` takes the raw (still encoded)
chunks instead and decodes them with a bound on every call: gzip and deflate never produce more
than ``limit + 1`` bytes in all, zstd at most two of its 128 KiB blocks more.

One coding at most is accepted (a chain such as ``gzip, gzip`` does nothing for a real page but
multiply the ratio), and only the ones decoded here: identity, gzip, deflate (zlib-wrapped, or
raw as some servers send it) and zstd when the ``zstandard`` package is installed.
:func:`accept_encoding` names exactly those, so a server that honours it sends nothing else.
Brotli is not decoded: its Python bindings cannot bound their output in every version, and
without ``br`` in ``Accept-Encoding`` a server has no reason to send it.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Protocol

# RFC 9659: a zstd-encoded HTTP body needs a window of 8 MB at most; a frame asking for more
# would make the decoder allocate it (up to 128 MiB by default) before producing anything.
ZSTD_MAX_WINDOW = 8 * 1024 * 1024
# A zstd block decodes to at most 128 KiB and takes at least 4 bytes (a 3-byte header and one
# byte of an RLE block): that bounds what a slice of input can produce (see _Zstd).
_ZSTD_BLOCK = 128 * 1024
_ZSTD_MIN_BLOCK_BYTES = 4
_ZSTD_MAX_SLICE = 64 * 1024
_MAX_SHOWN_HEADER = 60


class BodyTooLarge(Exception):
    """The body arrives, or decodes, to more than the limit."""

    def __init__(self, *, decoded: bool) -> None:
        super().__init__("over the limit")
        self.decoded = decoded  # whether it was decoding that went over (a compression bomb?)


class UnsupportedEncoding(Exception):
    """The body's ``Content-Encoding`` is not one kgot decodes; the message says why."""


class CorruptBody(Exception):
    """The body does not decode as its ``Content-Encoding`` says; the message says how."""


class _Inflater(Protocol):
    """One coding's decoder.

    Both methods take ``room``, what the limit still allows, and return the output; more than
    ``room`` bytes means the body is over the limit (the caller stops there). However high the
    compression ratio, one call produces a bounded amount (see each class).
    """

    def inflate(self, data: bytes, room: int) -> bytes: ...

    def finish(self, room: int) -> bytes: ...


class _Identity:
    def inflate(self, data: bytes, room: int) -> bytes:
        return data  # one network chunk: as big as it arrived

    def finish(self, room: int) -> bytes:
        return b""


class _Zlib:
    """gzip or zlib-wrapped / raw deflate, through ``zlib``'s ``max_length``: never more than
    ``room + 1`` bytes per call. The input the bound kept back waits in ``unconsumed_tail``.

    A truncated stream is read as far as it goes and data after the end of the stream (a second
    gzip member, trailing padding) is ignored, as httpx does: neither can add output.
    """

    def __init__(self, wbits: int, coding: str) -> None:
        self._inflater = zlib.decompressobj(wbits)
        self._coding = coding

    def inflate(self, data: bytes, room: int) -> bytes:
        pieces: list[bytes] = []
        produced = 0
        pending = data
        while pending and not self._inflater.eof and produced <= room:
            # max_length must stay >= 1: zlib reads 0 as "no limit".
            piece = self._decompress(pending, room + 1 - produced)
            pieces.append(piece)
            produced += len(piece)
            # Non-empty only when the bound stopped zlib, which then produced max_length bytes:
            # each turn of the loop either makes output or ends it.
            pending = self._inflater.unconsumed_tail
        return b"".join(pieces)

    def finish(self, room: int) -> bytes:
        if self._inflater.eof:
            return b""
        # Output zlib held back when the input ran out mid-match, bounded like the rest.
        return self._decompress(b"", room + 1)

    def _decompress(self, data: bytes, max_length: int) -> bytes:
        try:
            return self._inflater.decompress(data, max_length)
        except zlib.error as error:
            raise CorruptBody(f"its {self._coding} data is corrupt ({error})") from None


class _Deflate:
    """``deflate``: zlib-wrapped as RFC 9110 says, or raw deflate as some servers send it. The
    first two bytes tell which (a zlib header names method 8 and is a multiple of 31)."""

    def __init__(self) -> None:
        self._head = b""
        self._zlib: _Zlib | None = None

    def inflate(self, data: bytes, room: int) -> bytes:
        if self._zlib is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            cmf, flg = self._head[0], self._head[1]
            wrapped = cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0
            self._zlib = _Zlib(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS, "deflate")
            data, self._head = self._head, b""
        return self._zlib.inflate(data, room)

    def finish(self, room: int) -> bytes:
        if self._zlib is None:
            if self._head:
                raise CorruptBody("its deflate data is corrupt (one byte long)")
            return b""
        return self._zlib.finish(room)


class _Zstd:
    """zstd through ``zstandard``'s ``decompressobj``, whose ``decompress`` has no output limit:
    the input goes in slices small enough that their output is bounded anyway. A slice of ``n``
    bytes completes at most ``n / 4 + 1`` blocks of at most 128 KiB each, so a slice of 4 bytes
    per block of ``room`` makes at most ``room`` plus two blocks.
    """

    def __init__(self) -> None:
        import zstandard

        self._error = zstandard.ZstdError
        decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        # Across frames: a body may hold several, as a gzip body may hold several members.
        self._inflater = decompressor.decompressobj(read_across_frames=True)

    def inflate(self, data: bytes, room: int) -> bytes:
        pieces: list[bytes] = []
        produced = 0
        view = memoryview(data)
        start = 0
        while start < len(view) and produced <= room:
            blocks = max(1, (room - produced) // _ZSTD_BLOCK)
            end = start + min(_ZSTD_MIN_BLOCK_BYTES * blocks, _ZSTD_MAX_SLICE)
            try:
                piece = self._inflater.decompress(view[start:end])
            except self._error as error:
                raise CorruptBody(f"its zstd data is corrupt ({error})") from None
            pieces.append(piece)
            produced += len(piece)
            start = end
        return b"".join(pieces)

    def finish(self, room: int) -> bytes:
        return b""  # decompressobj hands out everything each call; it keeps nothing back


@cache
def _zstd_available() -> bool:
    """Whether zstd can be decoded: ``zstandard`` installed, recent enough to read a body of
    several frames (``read_across_frames``, 0.20 on)."""
    try:
        import zstandard

        zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    except (ImportError, TypeError):
        return False
    return True


@cache
def _codings() -> Mapping[str, Callable[[], _Inflater]]:
    """The codings decoded here, by ``Content-Encoding`` name (made once: the set is fixed)."""
    codings: dict[str, Callable[[], _Inflater]] = {
        "gzip": lambda: _Zlib(16 + zlib.MAX_WBITS, "gzip"),
        "x-gzip": lambda: _Zlib(16 + zlib.MAX_WBITS, "gzip"),  # RFC 9110: the same as gzip
        "deflate": _Deflate,
    }
    if _zstd_available():
        codings["zstd"] = _Zstd
    return codings


@cache
def accept_encoding() -> str:
    """The ``Accept-Encoding`` of every request: exactly the codings :class:`BoundedBody`
    decodes, so that a server never has a reason to send another."""
    return ", ".join(name for name in _codings() if name != "x-gzip")


def _inflater_for(content_encoding: str | None) -> Callable[[], _Inflater]:
    """The decoder of a ``Content-Encoding`` value (several headers arrive comma-joined).

    Raises:
        UnsupportedEncoding: a chain of codings, or one not decoded here.
    """
    header = content_encoding or ""
    names = [part.strip().lower() for part in header.split(",")]
    names = [name for name in names if name and name != "identity"]
    if not names:
        return _Identity
    shown = repr(header if len(header) <= _MAX_SHOWN_HEADER else header[:_MAX_SHOWN_HEADER] + "…")
    if len(names) > 1:
        raise UnsupportedEncoding(
            f"it is compressed {len(names)} times over (Content-Encoding: {shown}), which no "
            "real page needs; kgot decodes one compression at most"
        )
    codings = _codings()
    if names[0] not in codings:
        raise UnsupportedEncoding(
            f"it is compressed with an encoding kgot does not decode (Content-Encoding: "
            f"{shown}; kgot asks for {accept_encoding()})"
        )
    return codings[names[0]]


class BoundedBody:
    """A response body read from its raw chunks: decoded, and never more than ``limit`` bytes
    either as it arrives or once decoded.

    Args:
        content_encoding: the response's ``Content-Encoding`` header, if any.
        limit: the most bytes accepted, encoded or decoded.

    A refused encoding is reported by the first chunk that has data, not here: a body-less
    answer (a 304 to a conditional request) may name any encoding, since there is nothing to
    decode.
    """

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.received = 0  # raw bytes, as they came off the wire
        self.produced = 0  # decoded bytes the decoder produced in all (kept or not)
        self._header = content_encoding
        self._inflater: _Inflater | None = None
        self._encoded = False
        self._pieces: list[bytes] = []
        self._size = 0

    def feed(self, raw: bytes) -> None:
        """Take the next raw chunk.

        Raises:
            BodyTooLarge: over the limit, as received or decoded.
            UnsupportedEncoding, CorruptBody: as their names say.
        """
        if not raw:
            return
        self.received += len(raw)
        if self.received > self.limit:
            self._keep_start(raw[: len(raw) - (self.received - self.limit)])
            raise BodyTooLarge(decoded=False)
        self._keep(self._decoder().inflate(raw, self.limit - self._size))

    def finish(self) -> bytes:
        """The whole decoded body, once the last chunk is in.

        Raises:
            BodyTooLarge, CorruptBody: as for :meth:`feed`.
        """
        if self._inflater is not None:
            self._keep(self._inflater.finish(self.limit - self._size))
        return b"".join(self._pieces)

    def kept(self) -> bytes:
        """What was decoded within the limit so far (after :class:`BodyTooLarge` too: the
        start of a body too large to take whole, e.g. for an error's excerpt)."""
        return b"".join(self._pieces)

    def _decoder(self) -> _Inflater:
        """The body's decoder, made on first use (see the class's notes on refusals)."""
        if self._inflater is None:
            make = _inflater_for(self._header)
            self._encoded = make is not _Identity
            self._inflater = make()
        return self._inflater

    def _keep_start(self, raw: bytes) -> None:
        """Keep what ``raw``, the part of a chunk within the limit as received, decodes to
        within the limit, before the body is refused as too large as received (for
        :meth:`kept`). The refusal stands whatever that part holds: its own failures (an
        encoding refused, corrupt data, a decoded overflow) are not reported."""
        if not raw:
            return
        with contextlib.suppress(BodyTooLarge, UnsupportedEncoding, CorruptBody):
            self._keep(self._decoder().inflate(raw, self.limit - self._size))

    def _keep(self, piece: bytes) -> None:
        """Keep ``piece``; past the limit, keep the part of it that fits, then refuse."""
        self.produced += len(piece)
        room = self.limit - self._size
        if len(piece) > room:
            if room > 0:
                self._pieces.append(piece[:room])
                self._size += room
            raise BodyTooLarge(decoded=self._encoded)
        if piece:
            self._pieces.append(piece)
            self._size += len(piece)
