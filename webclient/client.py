"""kgot's HTTP client: bounded downloads, retries on transient failures only, URL safety.

Every request goes through one function, :meth:`Http._exchange`, which follows redirects
itself, one hop at a time, and (unless ``tools.allow_private_urls``) sends each hop through
:class:`~kgot.webclient.transport.PublicOnlyTransport`: it resolves the host, refuses it when any
address is not public (see :func:`is_public_address`), and connects to exactly the address it
checked. Checking and then letting the HTTP library resolve again would let a DNS-rebinding
name answer "public" to the check and "127.0.0.1" to the connection.

Two kinds of request use it:

* :meth:`Http.api` — JSON APIs at configured endpoints (MediaWiki, Wayback, search providers).
  The endpoint is trusted configuration: its own origin (scheme, host and port) may be on
  loopback or a private network. Its keys are for that origin alone, so it may redirect only
  there (or to the same host over https); anywhere else is refused. Since it never connects
  anywhere else, the address check has nothing to do and the proxy variables apply (a user
  behind a corporate proxy reaches the API through it).
* :meth:`Http.fetch` — a URL the *model* chose (or an API returned): every origin is checked,
  except the origin of a configured endpoint named by the caller (a Wayback snapshot served by
  the configured archive itself). It connects directly: a proxy would resolve names itself, out
  of reach of the check. A redirect to another origin drops every header but the harmless ones.

Messages and source references name a URL through :func:`shown_url` (no password, no key-like
query value), and an API call by its configured endpoint — never the query kgot built, which
holds SerpAPI's ``api_key``.

Bodies are read raw and decoded here (:class:`~kgot.webclient.decoding.BoundedBody`), never by
httpx: the download cap (``tools.max_download_mb``) holds for the bytes received and for the
bytes they decode to, with every decoding step bounded, so a small compressed answer cannot
inflate past it (a gzip or zstd "bomb"). ``Accept-Encoding`` names only what that decodes; a
chain of encodings or an unknown one is refused.

Retries (two, with backoff, honouring ``Retry-After`` up to a few seconds) happen only for
connection failures, timeouts and the statuses in :data:`RETRY_STATUSES`. Everything else,
including TLS failures, fails at once.
"""

from __future__ import annotations

import math
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote_plus, urljoin, urlsplit

from kgot.config import ToolsSettings
from kgot.errors import ToolFailure, TransientNetworkError
from kgot.retrying import (
    RetriesExhausted,
    RetryPolicy,
    answer_excerpt,
    cause_of_type,
    retry_after_from_headers,
    retry_async,
)
from kgot.version import __version__
from kgot.webclient.addresses import resolution_failure, ssl_context
from kgot.webclient.decoding import (
    BodyTooLarge,
    BoundedBody,
    CorruptBody,
    UnsupportedEncoding,
    accept_encoding,
)

if TYPE_CHECKING:
    import httpx

USER_AGENT = f"kgot/{__version__} (Knowledge Graph of Thoughts research agent; python-httpx)"
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# Statuses that say "try again shortly": request timeout, rate limit, server errors that are
# usually momentary (not 501/505, which will not change), and the CDN-edge 52x family.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524})
MAX_REDIRECTS = 8
MAX_RETRY_AFTER_S = 5.0
_EXCERPT_CHARS = 200
# Headers that may follow a redirect to another origin: they say nothing about the caller. Any
# other one (Authorization, X-Subscription-Token, an API's own key header) stays behind.
_PORTABLE_HEADERS = frozenset(
    {"accept", "accept-encoding", "accept-language", "connection", "user-agent"}
)
# Query parameters whose value is a credential (names compared lower-case, "-" read as "_").
_SECRET_PARAMS = frozenset(
    {"key", "apikey", "api_key", "token", "access_token", "auth", "password", "passwd", "pwd"}
    | {"secret", "client_secret", "sig", "signature", "appid"}
)
_SECRET_PARAM_ENDINGS = ("_key", "_token", "_secret", "_password", "_signature", "apikey")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")
MASK = "***"
# A secret shorter than this is not searched for in messages: masking every "a" in a message
# would hide it, and real keys are longer.
_MIN_MASKED_CHARS = 8

T = TypeVar("T")


@dataclass
class Fetched:
    """A downloaded response body."""

    url: str  # after redirects
    status: int
    content_type: str | None
    body: bytes  # decoded: any Content-Encoding is undone
    # Response headers (names lower-case), for callers that remember ETag and Last-Modified;
    # Content-Encoding and Content-Length among them describe the body as it was sent.
    headers: dict[str, str] = field(default_factory=dict)


class Http:
    """HTTP client settings shared by the tools of one run.

    Args:
        settings: timeouts, download cap and the private-address policy.
        retries: extra attempts after a transient failure.
        backoff_s: first retry delay; doubles each attempt.
    """

    def __init__(self, settings: ToolsSettings, *, retries: int = 2, backoff_s: float = 0.5):
        self.settings = settings
        self.retries = retries
        self.backoff_s = backoff_s
        # No jitter: one tool call is one request, not many voting at once. A server's
        # Retry-After lengthens the wait (up to a few seconds: a tool call should not stall a
        # step), never shortens it.
        self.retry_policy = RetryPolicy(
            max_retries=retries,
            backoff_base=backoff_s,
            backoff_max=math.inf,
            retry_after_cap=MAX_RETRY_AFTER_S,
            jitter=False,
            retry_after="extends",
        )
        self.max_bytes = settings.max_download_mb * 1024 * 1024

    def _client(self, trusted_endpoint: str | None, *, checked: bool) -> httpx.AsyncClient:
        """A client for one request and its redirects.

        Args:
            trusted_endpoint: the configured endpoint whose origin skips the address check.
            checked: whether connections go through the address check (unless
                ``tools.allow_private_urls``); without it httpx's own transport connects,
                honouring ``HTTP(S)_PROXY`` and ``NO_PROXY``.
        """
        # httpx loads on first use, and the transport with it (it is built on httpx): listing
        # the tools does not need it (~0.5 s of imports).
        import httpx

        from kgot.webclient.transport import PublicOnlyTransport

        timeout = httpx.Timeout(self.settings.timeout, connect=min(10.0, self.settings.timeout))
        transport = None  # httpx's own, which honours HTTP(S)_PROXY
        if checked and not self.settings.allow_private_urls:
            # A proxy would resolve names itself, out of reach of the address check, so
            # checked requests connect directly (httpx ignores proxy variables with a transport).
            trusted = {origin_of(trusted_endpoint)} if trusted_endpoint else set()
            transport = PublicOnlyTransport(trusted=frozenset(trusted))
        return httpx.AsyncClient(
            timeout=timeout,
            verify=ssl_context(),
            # Only what _read_capped decodes within the cap (httpx would offer br whenever a
            # brotli package happens to be installed).
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": accept_encoding()},
            follow_redirects=False,  # _exchange follows them, checking every hop's URL
            transport=transport,
        )

    async def api(
        self,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        service: str,
        setting: str,
        key_setting: str | None = None,
    ) -> Any:
        """Call a JSON API (GET, or POST when ``json_body`` is given) and decode its answer.

        Args:
            url: the endpoint (trusted configuration: its own origin may be private). Redirects
                are followed on its origin and to the same host over https; one to any other
                origin is refused, since the request's key would go along. Messages name this
                endpoint (through :func:`shown_url`), never the query built from ``params``.
            params, json_body, headers: the request.
            service: how messages name the API ("the Wikipedia API").
            setting: the setting that configures its endpoint ("tools.wikipedia_api"), named
                when the endpoint looks wrong.
            key_setting: the setting holding its key, named when the key is refused.

        Raises:
            ToolFailure: ``network`` (unreachable, failing after retries, not JSON),
                ``unavailable`` (wrong endpoint, refused key, or a redirect to another origin:
                a configuration problem), ``input`` (the API refused this request) or
                ``unsupported`` (an answer over the download cap). Its message and source
                reference carry no key, even one the API quoted back.
        """
        import httpx

        request = _Request("GET" if json_body is None else "POST", url, params, json_body, headers)
        endpoint = shown_url(url)

        async def attempt() -> Any:
            async with self._exchange(
                request, trusted_endpoint=url, service=service, setting=setting, api=True
            ) as response:
                body = await self._read_capped(response, endpoint)
            # Read in full (the status checks quote the body) and already decoded: without its
            # Content-Encoding, httpx would try to decode it a second time.
            answer = httpx.Response(
                response.status_code, headers=_decoded_headers(response.headers), content=body
            )
            _raise_for_api_status(answer, service, endpoint, setting, key_setting or setting)
            try:
                return answer.json()
            except ValueError:
                raise ToolFailure(
                    f"{service} answered with something that is not JSON ({_excerpt(answer)}); "
                    f"check {setting}, or use another tool",
                    kind="network",
                    source_ref=endpoint,
                ) from None
            except RecursionError:  # Python's JSON reader follows only so many levels
                raise ToolFailure(
                    f"{service} answered with JSON nested too deeply to read; check {setting}, "
                    "or use another tool",
                    kind="network",
                    source_ref=endpoint,
                ) from None

        try:
            return await self._with_retries(attempt)
        except ToolFailure as failure:
            # An API may quote the key it refused ("invalid key abc…") into the excerpt.
            secrets = _secret_values(params, headers)
            failure.args = (_masked(str(failure), secrets),)
            if failure.source_ref is not None:
                failure.source_ref = _masked(failure.source_ref, secrets)
            raise

    async def fetch(
        self,
        url: str,
        *,
        trusted_endpoint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Fetched:
        """Download ``url`` (following redirects) up to the size cap.

        Args:
            url: an absolute ``http``/``https`` URL: every origin on the way must be public
                (unless ``tools.allow_private_urls``).
            trusted_endpoint: a configured endpoint whose own origin is exempt from that check
                (the Wayback snapshot the configured archive serves itself).
            headers: extra request headers (``Accept``, ``If-None-Match``…); a redirect to
                another origin drops all but the harmless ones.

        Raises:
            ToolFailure: ``input`` (bad or refused URL), ``not_found``, ``network`` (also a
                body that does not decode), ``unsupported`` (larger than the download cap as
                sent or once decompressed, or compressed in a way kgot does not decode).
        """
        request = _Request("GET", url, headers={"Accept": BROWSER_ACCEPT, **(headers or {})})

        async def attempt() -> Fetched:
            async with self._exchange(
                request, trusted_endpoint=trusted_endpoint, service="the web server"
            ) as response:
                final = str(response.url)
                _raise_for_status(response, "the web server", shown_url(final))
                body = await self._read_capped(response, shown_url(final))
                return Fetched(
                    url=final,
                    status=response.status_code,
                    content_type=response.headers.get("content-type"),
                    body=body,
                    headers={k.lower(): v for k, v in response.headers.items()},
                )

        return await self._with_retries(attempt)

    @asynccontextmanager
    async def _exchange(
        self,
        request: _Request,
        *,
        trusted_endpoint: str | None,
        service: str,
        setting: str | None = None,
        api: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        """Send ``request`` and follow its redirects: the one way the tools reach the network.

        Every hop's URL is checked (:func:`check_url`). A page fetch (``api`` false) connects
        directly and, unless ``tools.allow_private_urls``, through the public-address check,
        but for the origin of ``trusted_endpoint``. An API call (``api``) stays on the
        endpoint's origin (see :meth:`api`), so it goes through httpx's own transport and any
        proxy the environment names. Yields the final response with its body not yet read (a
        redirect's body is never read), and closes it afterwards.
        """
        import httpx

        check_url(request.url)
        # What messages call a hop: an API call is its configured endpoint, whatever query was
        # built or redirected to; a page is its own URL.
        endpoint = shown_url(request.url)

        def shown(url: str) -> str:
            return endpoint if api else shown_url(url)

        home = _origin(request.url)
        async with self._client(trusted_endpoint, checked=not api) as client:
            current = client.build_request(
                request.method,
                request.url,
                params=request.params,
                json=request.json_body,
                headers=request.headers,
            )
            for _ in range(MAX_REDIRECTS + 1):
                url = str(current.url)
                try:
                    response = await client.send(current, stream=True)
                except ToolFailure as refused:  # from PublicOnlyBackend: name the URL
                    refused.source_ref = shown(url)
                    raise
                except (httpx.InvalidURL, httpx.UnsupportedProtocol) as error:
                    raise _invalid_url(shown(url), str(error)) from None
                except httpx.HTTPError as error:
                    raise _transport_failure(error, shown(url), service) from None
                try:
                    if not (response.is_redirect and "location" in response.headers):
                        yield response
                        return
                    following = _redirect_request(client, current, response)
                    if api and not _same_service(home, _origin(str(following.url))):
                        raise _foreign_redirect(service, endpoint, following.url, setting)
                    current = following
                finally:
                    await response.aclose()
        if setting is not None:
            raise ToolFailure(
                f"{service} at {endpoint} redirects in a loop; check {setting}",
                kind="unavailable",
                source_ref=endpoint,
            )
        raise ToolFailure(
            f"{endpoint} redirects more than {MAX_REDIRECTS} times; try the final address "
            "directly or another source",
            kind="network",
            source_ref=endpoint,
        )

    async def _read_capped(self, response: httpx.Response, url: str) -> bytes:
        """The body of ``response``, decoded, within the download cap.

        The raw bytes (``aiter_raw``, not httpx's decoding ``aiter_bytes``, which inflates a
        chunk whole before anything can count it) go through :class:`BoundedBody`: neither
        what arrives nor what it decodes to may pass the cap, and decoding stops there.

        Raises:
            ToolFailure: ``unsupported`` (over the cap, or an encoding kgot does not decode),
                ``network`` (a body that does not decode, or a transport failure).
        """
        import httpx

        cap_mb = self.settings.max_download_mb
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise _too_large(url, int(declared), cap_mb)
        body = BoundedBody(response.headers.get("content-encoding"), self.max_bytes)
        try:
            async for chunk in response.aiter_raw():
                body.feed(chunk)
            return body.finish()
        except BodyTooLarge as over:
            raise _too_large(url, None, cap_mb, decoded=over.decoded) from None
        except UnsupportedEncoding as refused:
            raise ToolFailure(
                f"{url} cannot be read: {refused}; try another source",
                kind="unsupported",
                source_ref=url,
            ) from None
        except CorruptBody as corrupt:
            raise ToolFailure(
                f"{url} sent a body that does not decode: {corrupt}; try again later or "
                "another source",
                kind="network",
                source_ref=url,
            ) from None
        except httpx.HTTPError as error:
            raise _transport_failure(error, url, "the web server") from None

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]]) -> T:
        try:
            return await retry_async(
                lambda number: attempt(),
                self.retry_policy,
                retryable=lambda error: isinstance(error, TransientNetworkError),
                retry_after=lambda error: (
                    error.retry_after if isinstance(error, TransientNetworkError) else None
                ),
            )
        except RetriesExhausted as gave_up:
            raise ToolFailure(
                f"{gave_up.error} (gave up after {gave_up.attempts} attempts)",
                kind="network",
                source_ref=getattr(gave_up.error, "source_ref", None),
            ) from None


@dataclass(frozen=True)
class _Request:
    """What to send first; redirects derive the next hops from it."""

    method: str
    url: str
    params: dict[str, Any] | None = None
    json_body: Any = None
    headers: dict[str, str] | None = None


def _redirect_request(
    client: httpx.AsyncClient, request: httpx.Request, response: httpx.Response
) -> httpx.Request:
    """The next hop of a redirect, as browsers make it (httpx's rules, which it applies only
    when it follows redirects itself — and then it reads every redirect's body, uncapped).

    To another origin (scheme, host or port) only the headers in :data:`_PORTABLE_HEADERS` go
    along, and no body: a key or a request body is for the origin it was meant for. The query
    is the one the ``Location`` names, never the first request's.
    """
    location = urljoin(str(request.url), response.headers["location"])
    check_url(location)
    method = request.method
    status = response.status_code
    if (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST"):
        method = "GET"
    foreign = _origin(location) != _origin(str(request.url))
    if foreign and method not in ("GET", "HEAD"):
        method = "GET"  # its body stays behind, so it cannot be re-sent as it was
    if foreign:
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PORTABLE_HEADERS}
    else:
        dropped = {"host", "cookie"}  # recomputed for the new URL (cookies from the jar)
        if method != request.method:
            dropped |= {"content-length", "content-type", "transfer-encoding"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
    content = request.content if method == request.method else None
    return client.build_request(method, location, headers=headers, content=content)


def _decoded_headers(headers: httpx.Headers) -> list[tuple[str, str]]:
    """``headers`` as they fit a body already decoded: no Content-Encoding, and no
    Content-Length (the encoded size). A list: a header may come more than once."""
    return [
        (name, value)
        for name, value in headers.multi_items()
        if name.lower() not in ("content-encoding", "content-length")
    ]


def _origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, with the scheme's default port filled in."""
    import httpx

    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.scheme, parsed.host.lower(), port


def _same_service(home: tuple[str, str, int], there: tuple[str, str, int]) -> bool:
    """Whether an API at ``home`` may redirect ``there``: its own origin, or its host over
    https on the default port (an ``http://`` endpoint that moved to ``https://``)."""
    return there == home or there == ("https", home[1], 443)


def _foreign_redirect(
    service: str, endpoint: str, target: httpx.URL, setting: str | None
) -> ToolFailure:
    scheme, host, port = _origin(str(target))
    where = f"{scheme}://{host}:{port}"
    fix = f"set {setting} to the new address if you trust it" if setting else "check its address"
    return ToolFailure(
        f"{service} at {endpoint} redirects to another site ({where}); kgot does not follow an "
        f"API elsewhere, since its key and request would go along — {fix}. Until then, use "
        "other tools",
        kind="unavailable",
        source_ref=endpoint,
    )


def shown_url(url: str) -> str:
    """``url`` as messages and source references name it: any user name and password in it,
    and the value of every query parameter named like a credential (``api_key``, ``key``,
    ``token``, ``access_token``, ``*_secret`` …), replaced by ``***``."""
    head, hash_mark, fragment = url.partition("#")
    head = _USERINFO.sub(rf"\g<scheme>{MASK}@", head, count=1)
    path, question_mark, query = head.partition("?")
    if question_mark:
        query = "&".join(_shown_param(part) for part in query.split("&"))
    return path + question_mark + query + hash_mark + fragment


def _shown_param(part: str) -> str:
    name, equals, value = part.partition("=")
    if equals and value and _is_secret_name(unquote_plus(name)):
        return f"{name}={MASK}"
    return part


def _is_secret_name(name: str) -> bool:
    normal = name.strip().lower().replace("-", "_")
    return normal in _SECRET_PARAMS or normal.endswith(_SECRET_PARAM_ENDINGS)


def _secret_values(params: dict[str, Any] | None, headers: dict[str, str] | None) -> list[str]:
    """The credentials in an API request: values of key-like parameters and of every header
    but the harmless ones (and each word of those, for "Bearer <key>")."""
    values = [str(v) for k, v in (params or {}).items() if _is_secret_name(k)]
    for name, value in (headers or {}).items():
        if name.lower() not in _PORTABLE_HEADERS | {"content-type"}:
            values += [value, *value.split()]
    return sorted({v for v in values if len(v) >= _MIN_MASKED_CHARS}, key=len, reverse=True)


def _masked(text: str, secrets: list[str]) -> str:
    for secret in secrets:  # longest first, so a key inside "Bearer <key>" goes with it
        text = text.replace(secret, MASK)
    return text


def origin_of(url: str) -> tuple[str, int]:
    """``(host, port)`` of ``url`` as a connection sees it (IDNA-encoded host, default port)."""
    import httpx

    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.raw_host.decode("ascii").lower(), port


def check_url(url: str) -> None:
    """Refuse anything but a well-formed absolute ``http``/``https`` URL.

    Raises:
        ToolFailure: ``input``, naming what is wrong.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port  # raises for a port out of range or not a number
    except ValueError as error:
        raise _invalid_url(url, str(error)) from None
    if parts.scheme not in ("http", "https") or not host:
        raise ToolFailure(
            f"{url!r} is not an http(s) URL; give a full address such as https://example.org/page",
            kind="input",
            source_ref=url,
        )
    if port == 0:
        raise _invalid_url(url, "port 0")


def _invalid_url(url: str, reason: str) -> ToolFailure:
    if "port" in reason.lower():
        reason = f"{reason}; a port is a number from 1 to 65535"
    return ToolFailure(
        f"{url!r} is not a valid URL ({reason}); give a full address such as "
        "https://example.org/page",
        kind="input",
        source_ref=url,
    )


def _raise_for_status(response: httpx.Response, service: str, url: str) -> None:
    """Statuses of a web page the model asked for."""
    status = response.status_code
    if status < 400:
        return
    if status in RETRY_STATUSES:
        raise TransientNetworkError(
            f"{service} answered HTTP {status} for {url}",
            source_ref=url,
            retry_after=retry_after_from_headers(response.headers),
        )
    if status in (404, 410):
        raise ToolFailure(
            f"{url} does not exist (HTTP {status}); check the address, or search for the "
            "page, or look for an archived copy with visit_page's date argument",
            kind="not_found",
            source_ref=url,
        )
    if status in (401, 403):
        raise ToolFailure(
            f"{service} refused access to {url} (HTTP {status}); the page needs a login or "
            "blocks automated readers — try another source or an archived copy",
            kind="network",
            source_ref=url,
        )
    raise ToolFailure(
        f"{service} answered HTTP {status} for {url}; try another source",
        kind="network",
        source_ref=url,
    )


def _raise_for_api_status(
    response: httpx.Response, service: str, url: str, setting: str, key_setting: str
) -> None:
    """Statuses of a configured API: a 404 or 401 there is a configuration problem."""
    status = response.status_code
    if status < 400:
        return
    if status in RETRY_STATUSES:
        raise TransientNetworkError(
            f"{service} answered HTTP {status}",
            source_ref=url,
            retry_after=retry_after_from_headers(response.headers),
        )
    detail = _excerpt(response)
    if status in (401, 403):
        raise ToolFailure(
            f"{service} refused the request (HTTP {status}: {detail}); its key or access is "
            f"wrong — check {key_setting}. Until that is fixed, use other tools",
            kind="unavailable",
            source_ref=url,
        )
    if status in (404, 405, 410):
        raise ToolFailure(
            f"{service} has no API at {url} (HTTP {status}); {setting} is probably wrong. "
            "Until that is fixed, use other tools",
            kind="unavailable",
            source_ref=url,
        )
    raise ToolFailure(
        f"{service} refused the request (HTTP {status}: {detail}); change the arguments or "
        "use another tool",
        kind="input",
        source_ref=url,
    )


def _excerpt(response: httpx.Response) -> str:
    """What the API said was wrong, as one short line."""
    try:
        data = response.json()
    except (ValueError, RecursionError):
        data = None
    return answer_excerpt(data, response.content, _EXCERPT_CHARS)


def _transport_failure(error: httpx.HTTPError, url: str, service: str) -> ToolFailure:
    import httpx

    if isinstance(error, httpx.TimeoutException):
        return TransientNetworkError(f"{service} did not answer in time ({url})", source_ref=url)
    tls = cause_of_type(error, ssl.SSLError)
    if tls is not None:
        return _tls_failure(tls, url)
    lookup = (
        cause_of_type(error, socket.gaierror) if isinstance(error, httpx.ConnectError) else None
    )
    if lookup is not None:
        failure = resolution_failure(urlsplit(url).hostname or url, lookup)
        failure.source_ref = url
        return failure
    if isinstance(error, httpx.TransportError):
        return TransientNetworkError(
            f"could not reach {service} at {url} ({type(error).__name__}: {error or 'no detail'})",
            source_ref=url,
        )
    return ToolFailure(f"request to {url} failed: {error}", kind="network", source_ref=url)


def _tls_failure(error: ssl.SSLError, url: str) -> ToolFailure:
    """A TLS problem will not go away on retry; say what it means instead."""
    host = urlsplit(url).hostname or url
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = error.verify_message or error.reason or str(error)
        return ToolFailure(
            f"the TLS certificate of {host} is not valid ({reason}); the site is misconfigured "
            "or not who it claims to be — use another source or an archived copy (date=)",
            kind="network",
            source_ref=url,
        )
    reason = error.reason or str(error)
    plain = "http://" + url.split("://", 1)[-1]
    return ToolFailure(
        f"the TLS handshake with {host} failed ({reason}); the server may not speak HTTPS on "
        f"this port — try {plain} or another source",
        kind="network",
        source_ref=url,
    )


def _too_large(url: str, size: int | None, cap_mb: int, *, decoded: bool = False) -> ToolFailure:
    shown = f"{size / 1024 / 1024:.1f} MB" if size else f"more than {cap_mb} MB"
    if decoded:  # a small download that inflates past the cap: say so, or it looks like a bug
        shown += " once decompressed"
    return ToolFailure(
        f"{url} is {shown}, over the download cap of {cap_mb} MB (tools.max_download_mb); "
        "look for a smaller version or a specific section of it",
        kind="unsupported",
        source_ref=url,
    )
