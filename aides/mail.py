"""Mail headers built from literal text: what an aide's email output writes into its headers.

Header values come from data kgot does not control (an aide's name, a subject a program chose,
a delivery key). The :mod:`email` package's default policy *parses* every value it is given:
an RFC 2047 encoded word in it (``=?utf-8?q?x=0D=0AReply-To:_evil@example.com?=``) is decoded,
and on Pythons without the fix of CVE-2024-6923 (3.11.7 among them) the decoded CR LF is
written out as a header break, so the value injects headers of its own (``Reply-To``, ``Bcc``).

The headers here are never parsed: each is an object the policy stores and folds as it is (a
value with a ``name`` attribute is "a header object" to :class:`email.policy.EmailPolicy`; its
``fold`` writes the line). Their text is literal: control characters (CR, LF, …), line
separators and the other characters :func:`kgot.retrying.one_line` drops become spaces, and a
value that is not plain printable ASCII, or that holds ``=?``, is written as encoded words made
here (:class:`email.header.Header`), whose decoding gives back exactly the literal text.
So whatever the interpreter, no value can start a header, and a reader sees the text as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from email.header import Header
from typing import TYPE_CHECKING

from kgot.retrying import one_line

if TYPE_CHECKING:
    from email.policy import Policy

__all__ = ["AddressHeader", "TextHeader"]

# Control characters and the Unicode line and paragraph separators: str.splitlines() breaks a
# value at every one of them (so does the email package), and none belongs in an address.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PLAIN = re.compile(r"[\x20-\x7e]*")
MAX_LINE = 78  # RFC 5322's recommended line length; the hard limit is 998
MAX_TEXT = 200  # characters of a text header's value; a longer one is cut with an ellipsis


def _needs_encoding(text: str) -> bool:
    """A value a reader could take for something else: anything beyond printable ASCII, or an
    ``=?`` that would read as the start of an encoded word."""
    return _PLAIN.fullmatch(text) is None or "=?" in text


class TextHeader(str):
    """An unstructured header (Subject, X-…): its ``str`` is the literal text, ``value`` as one
    line (:func:`~kgot.retrying.one_line`: control characters and line separators become
    spaces, runs of spaces one space) of at most ``limit`` characters; it is written as that
    text when plain, else as UTF-8 encoded words that decode back to it.

    Set it on an :class:`email.message.EmailMessage`: ``message["Subject"] = TextHeader(
    "Subject", text)``.
    """

    name: str

    def __new__(cls, name: str, value: str, limit: int = MAX_TEXT) -> TextHeader:
        header = super().__new__(cls, one_line(value, limit))
        header.name = name
        return header

    def fold(self, *, policy: Policy) -> str:
        """The header's lines, ending with ``policy.linesep`` (called by the generator)."""
        text = str(self)
        charset = "utf-8" if _needs_encoding(text) else "us-ascii"
        folded = Header(text, charset, header_name=self.name).encode(
            linesep=policy.linesep, maxlinelen=policy.max_line_length or MAX_LINE
        )
        return f"{self.name}: {folded}{policy.linesep}"


class AddressHeader(str):
    """An address header (From, To) holding bare addresses, written as given and joined by
    ``", "``. Its ``str`` is that list: :meth:`smtplib.SMTP.send_message` takes the envelope's
    sender and recipients from it.

    Addresses are never encoded (an address is not text to decode) and never parsed; control
    characters, which no address holds, are dropped, so none can break the line.
    """

    name: str
    addresses: tuple[str, ...]

    def __new__(cls, name: str, addresses: Iterable[str]) -> AddressHeader:
        cleaned = tuple(
            kept for kept in ("".join(_BREAKS.sub("", a).split()) for a in addresses) if kept
        )
        header = super().__new__(cls, ", ".join(cleaned))
        header.name = name
        header.addresses = cleaned
        return header

    def fold(self, *, policy: Policy) -> str:
        """The header's lines: the addresses, a new line before one that would overflow."""
        limit = policy.max_line_length or MAX_LINE
        lines = [f"{self.name}:"]
        for number, address in enumerate(self.addresses):
            item = f" {address}{',' if number < len(self.addresses) - 1 else ''}"
            if len(lines[-1]) + len(item) > limit and lines[-1] != f"{self.name}:":
                lines.append("")
            lines[-1] += item
        return policy.linesep.join(lines) + policy.linesep
