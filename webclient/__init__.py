"""kgot's HTTP client: bounded downloads, retries on transient failures only, URL safety.

Entry point: :class:`Http` — ``api()`` for JSON APIs at configured endpoints, ``fetch()`` for
a URL a model chose, each hop of it checked to reach only public addresses. The web tools, the
aides' feeds and web searches and their webhook outputs all go through it.

The modules, in the order they depend on each other:

* :mod:`.addresses` — which addresses are public, resolving a host to them, the TLS context;
* :mod:`.transport` — the httpx transport that connects only to the address it checked;
* :mod:`.decoding` — response bodies decoded within the download cap (no compression bombs);
* :mod:`.client` — :class:`Http` itself: redirects, retries, caps, messages without secrets.

Named ``webclient`` rather than ``http``: the checkout's root is the ``kgot`` package and is on
``sys.path`` when tests run from it, so a top-level ``http`` folder would hide the standard
library's. See docs/tools.md (Network safety).
"""

from __future__ import annotations

from kgot.webclient.client import USER_AGENT, Fetched, Http, shown_url
from kgot.webclient.decoding import BodyTooLarge, BoundedBody, CorruptBody, UnsupportedEncoding

__all__ = [
    "USER_AGENT",
    "BodyTooLarge",
    "BoundedBody",
    "CorruptBody",
    "Fetched",
    "Http",
    "UnsupportedEncoding",
    "shown_url",
]
