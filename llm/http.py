"""An async HTTP client for OpenAI-compatible models that survives a change of event loop.

langchain-openai caches one ``httpx.AsyncClient`` per (base URL, timeout) for the whole process
(langchain-ai/langchain#35783). Its pooled connections belong to the event loop that opened
them, so the second ``asyncio.run`` in a process — a second ``kgot.ask()`` from Python, a
``--resume`` after a run, one test after another — fails with "Event loop is closed". kgot hands
every OpenAI-compatible model its own client whose transport keeps one connection pool per
running loop instead.

The same transport refuses a successful response whose body is not JSON (an HTML page from a
proxy or login portal, garbage): :class:`UnreadableAnswer` says what came back, where the SDK
would only report a JSON decoding error or an "unexpected response type".
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
import weakref

import httpx

from kgot.retrying import body_excerpt

# Enough for many concurrent votes and tool calls; the SDK's own default is of the same order.
_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30)


class UnreadableAnswer(Exception):
    """The endpoint answered with a body that is not JSON, so it is no OpenAI-compatible API.

    Attributes:
        status: the HTTP status.
        content_type: the ``Content-Type`` header (empty when there was none).
        excerpt: the start of the body, sanitised for one line (see
            :func:`kgot.retrying.body_excerpt`).
        too_deep: the body is JSON, but nested past what Python's JSON reader can follow.
    """

    def __init__(self, status: int, content_type: str, excerpt: str, *, too_deep: bool) -> None:
        self.status = status
        self.content_type = content_type
        self.excerpt = excerpt
        self.too_deep = too_deep
        what = "JSON nested too deeply to read" if too_deep else "a body that is not JSON"
        super().__init__(
            f"HTTP {status} with {what} ({content_type or 'no content type'}): {excerpt}"
        )


class LoopLocalTransport(httpx.AsyncBaseTransport):
    """Routes each request through a connection pool owned by the running event loop.

    Proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``, …) are honoured, as a default
    ``httpx.AsyncClient`` would.
    """

    def __init__(self, limits: httpx.Limits = _LIMITS) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        # Loop -> (proxy URL or None) -> transport; a pool disappears with its loop.
        self._pools: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str | None, httpx.AsyncHTTPTransport]
        ] = weakref.WeakKeyDictionary()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._transport_for(request.url).handle_async_request(request)
        if response.is_success and not _is_event_stream(response):
            await _refuse_unreadable(response)
        return response

    def _transport_for(self, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        loop = asyncio.get_running_loop()
        proxy = _proxy_for(url)
        with self._lock:
            pools = self._pools.setdefault(loop, {})
            transport = pools.get(proxy)
            if transport is None:
                transport = httpx.AsyncHTTPTransport(limits=self._limits, proxy=proxy)
                pools[proxy] = transport
        return transport

    async def aclose(self) -> None:
        """Close the pools of the running loop (others close with their loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pools = self._pools.pop(loop, {})
        for transport in pools.values():
            await transport.aclose()


def loop_safe_async_client() -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` usable from any number of successive event loops."""
    return httpx.AsyncClient(transport=LoopLocalTransport(), follow_redirects=True)


def _is_event_stream(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


async def _refuse_unreadable(response: httpx.Response) -> None:
    """Raise :class:`UnreadableAnswer` unless the (read) body parses as JSON.

    The body is read here; the client reuses what was read. Parsing twice costs microseconds
    against a model's answer time, and catches what the SDK would misreport.
    """
    body = await response.aread()
    try:
        json.loads(body)
    except RecursionError:
        too_deep = True
    except ValueError:  # also UnicodeDecodeError
        too_deep = False
    else:
        return
    raise UnreadableAnswer(
        response.status_code,
        response.headers.get("content-type", ""),
        body_excerpt(body),
        too_deep=too_deep,
    )


def _proxy_for(url: httpx.URL) -> str | None:
    if urllib.request.proxy_bypass(url.host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(url.scheme) or proxies.get("all")
