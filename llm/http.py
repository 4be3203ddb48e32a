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

:func:`ensure_reachable` checks once that a configured base URL answers at all, before the
votes fan out: a server that is down is one clear configuration error in milliseconds, not
every vote's retries (5 × 5 failed requests, 15-20 s).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
import weakref

import httpx

from kgot.errors import ConfigError
from kgot.retrying import body_excerpt, causes, one_line

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


# Seconds to open a connection to a configured endpoint before calling it unreachable: a server
# on the machine or the network answers a connect in milliseconds, and the first request of a
# run must not wait for a dead one as long as a model's answer.
PROBE_CONNECT_TIMEOUT = 2.0
# How long a successful probe vouches for a URL: a long-lived process (the MCP server, an aide)
# looks again later instead of trusting a server that may have gone since.
REACHABLE_FOR = 60.0

_probe_lock = threading.Lock()
_reachable_until: dict[str, float] = {}
# Loop -> URL -> the probe under way there: concurrent callers wait for the one probe.
_probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Task[None]]] = (
    weakref.WeakKeyDictionary()
)


async def ensure_reachable(base_url: str) -> None:
    """Return once ``base_url`` is known to accept connections; probe it if not known yet.

    The probe is one ``GET {base_url}/models``: *any* HTTP answer, an error status included,
    or an answer slow to come, proves the server is there (what the chat requests make of it
    is theirs to say, with their retries). Only failing to connect at all — refused, no such
    host, no connection within :data:`PROBE_CONNECT_TIMEOUT` seconds — fails. Callers that ask
    while a probe of the URL is under way on their loop wait for that probe; a success is
    remembered for :data:`REACHABLE_FOR` seconds (across event loops), a failure not at all.

    Raises:
        ConfigError: the endpoint cannot be reached (names the URL, the reason and what to
            check), or ``base_url`` is not an http(s) URL.
    """
    if time.monotonic() < _reachable_until.get(base_url, -1.0):
        return
    loop = asyncio.get_running_loop()
    with _probe_lock:
        under_way = _probes.setdefault(loop, {})
        task = under_way.get(base_url)
        if task is None:
            task = loop.create_task(_probe(base_url), name=f"kgot: probe {base_url}")
            under_way[base_url] = task
            task.add_done_callback(lambda done: _forget_probe(loop, base_url, done))
    # Shielded: a caller cancelled while waiting (a vote of a stopped step) must not cancel
    # the probe the others wait for.
    await asyncio.shield(task)


def _forget_probe(loop: asyncio.AbstractEventLoop, base_url: str, done: asyncio.Task[None]) -> None:
    with _probe_lock:
        _probes.get(loop, {}).pop(base_url, None)
    if not done.cancelled():
        done.exception()  # seen: a failure whose waiters were all cancelled is no loose end


async def _probe(base_url: str) -> None:
    url = base_url.rstrip("/") + "/models"
    timeout = httpx.Timeout(PROBE_CONNECT_TIMEOUT, connect=PROBE_CONNECT_TIMEOUT)
    try:
        proxy = _proxy_for(httpx.URL(url))
        async with httpx.AsyncClient(timeout=timeout, proxy=proxy) as client:
            await client.get(url)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        raise ConfigError(
            f"model endpoint {base_url!r} is not an http(s) URL; set it to the API's base URL, "
            "e.g. http://127.0.0.1:8080/v1 (--base-url, KGOT_BASE_URL or llm.base_url)"
        ) from None
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as error:
        raise ConfigError(
            f"model endpoint {base_url} is unreachable ({_reason(error)}); check that the server "
            "is running and the URL is right (--base-url, KGOT_BASE_URL or llm.base_url)"
        ) from None
    except httpx.HTTPError:
        pass  # connected, but the answer was slow or odd: the server is there
    with _probe_lock:
        _reachable_until[base_url] = time.monotonic() + REACHABLE_FOR


def _reason(error: httpx.HTTPError) -> str:
    """Why a connection failed, in a few words (the innermost cause says it best:
    ``[Errno 111] Connection refused`` rather than ``All connection attempts failed``)."""
    if isinstance(error, httpx.ConnectTimeout):
        return f"no connection within {PROBE_CONNECT_TIMEOUT:g} s"
    *_, deepest = causes(error)
    return one_line(str(deepest)) or one_line(str(error)) or type(error).__name__
