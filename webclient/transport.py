"""The connection layer behind the address check of every request the tools make.

:class:`PublicOnlyBackend` is an httpcore network backend whose ``connect_tcp`` resolves the
host itself, refuses it unless every address is public, and connects to exactly the address it
checked — so a DNS-rebinding name cannot answer "public" to the check and "127.0.0.1" to the
connection. Only the origins it is told to trust (a configured API endpoint) skip the check.
:class:`PublicOnlyTransport` is httpx's own transport on a pool built with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from kgot.webclient.addresses import public_addresses, ssl_context


class PublicOnlyBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that only connects to public addresses it has checked.

    ``connect_tcp`` resolves the host itself, refuses it when *any* address is not public (a
    name that mixes public and private answers is as dangerous as a private one), and then
    connects to the checked addresses in turn. httpcore starts TLS on the returned stream with
    the original host name, so certificate checks and SNI are unchanged, and httpx sends the
    original ``Host`` header.

    Args:
        trusted: ``(host, port)`` origins connected to without the check: configured endpoints,
            which a user may run on loopback or a private network (see
            :func:`kgot.webclient.client.origin_of`).
    """

    def __init__(self, trusted: frozenset[tuple[str, int]] = frozenset()) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._trusted = trusted

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if (host.lower(), port) in self._trusted:
            return await self._inner.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )
        addresses = await public_addresses(host, port, timeout=timeout)
        failure: Exception | None = None
        deadline = None if timeout is None else time.monotonic() + timeout
        for address in addresses:
            remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=remaining,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None  # public_addresses never returns an empty list
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable from the tools")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PublicOnlyTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, with its connection pool built on :class:`PublicOnlyBackend`."""

    def __init__(self, trusted: frozenset[tuple[str, int]] = frozenset()) -> None:
        super().__init__(verify=ssl_context(), trust_env=False)
        # httpx does not take a network backend; its pool does. Same settings as httpx's
        # default pool, only the backend differs.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=PublicOnlyBackend(trusted),
        )
