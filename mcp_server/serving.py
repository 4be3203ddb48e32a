"""Running the MCP server: stdio (one tenant, fixed on the command line) or Streamable HTTP
(bearer tokens from a tokens file).

Everything a person can get wrong is checked before the server answers anything, each with one
line and exit code 2 (:class:`~kgot.errors.UsageError`): the SDK missing, an unknown entity, a
malformed or empty tokens file, an address that is not ``HOST:PORT``, a port in use.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.errors import EntityNotFoundError, UsageError
from kgot.mcp_server.asking import AskLimits
from kgot.mcp_server.tokens import SCOPES, Grant, TokenRegistry

if TYPE_CHECKING:
    from kgot.config import Settings
    from kgot.mcp_server.server import KgotMCP
    from kgot.persistence import Store

__all__ = ["HttpAddress", "ServeOptions", "parse_address", "serve_http", "serve_stdio"]

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeOptions:
    """What ``kgot mcp serve`` was asked for, besides the transport."""

    allow_query: bool = False
    limits: AskLimits = field(default_factory=AskLimits)


@dataclass(frozen=True)
class HttpAddress:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"


def require_sdk() -> None:
    """Refuse to serve without the ``mcp`` package (the optional extra).

    Raises:
        UsageError: the SDK is missing or too old.
    """
    try:
        from mcp.server.mcpserver import MCPServer  # noqa: F401
    except ImportError:
        raise UsageError(
            "the MCP server needs the mcp package 2.x: pip install 'kgot[mcp]'"
        ) from None


def parse_address(text: str) -> HttpAddress:
    """``HOST:PORT`` (``[::1]:8765`` for IPv6).

    Raises:
        UsageError: anything else.
    """
    host, _, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765, not {text!r}")
    return HttpAddress(host, int(port))


def _app(store: Store, settings: Settings, options: ServeOptions, grant: Grant | None) -> KgotMCP:
    from kgot.mcp_server.access import Tenancy
    from kgot.mcp_server.server import KgotMCP

    if options.allow_query and settings.sandbox.kind == "subprocess":
        # the query tool runs a client's code: without isolation it could read the store's
        # files, every entity's rows included
        raise UsageError(
            "--allow-query needs an isolating sandbox, and sandbox kind subprocess runs code "
            "unconfined on this machine; set KGOT_SANDBOX (or [sandbox] kind) to auto, bwrap, "
            "fallback or docker, or drop --allow-query"
        )

    embedder = None
    if settings.memory.embeddings:
        from kgot.memory.embeddings import embedder_from_settings

        embedder = embedder_from_settings(settings.memory)  # ConfigError: exit 2
    return KgotMCP(
        tenancy=Tenancy(store, embedder=embedder),
        settings=settings,
        limits=options.limits,
        fixed_grant=grant,
        allow_query=options.allow_query,
    )


def serve_stdio(
    store: Store, settings: Settings, entity: str, options: ServeOptions, *, label: str = "stdio"
) -> None:
    """Serve one entity over stdin/stdout until the client closes the pipe.

    Raises:
        UsageError: the SDK is missing, the entity does not exist.
    """
    import anyio

    from kgot.mcp_server.server import build_server

    require_sdk()
    try:
        store.get_entity(entity)
    except EntityNotFoundError:
        raise UsageError(
            f"no entity named {entity!r}; create it with `kgot entities create {entity}` or see "
            "`kgot entities list`"
        ) from None
    scopes = set(SCOPES) if options.allow_query else set(SCOPES) - {"admin"}
    app = _app(store, settings, options, Grant(label, (entity,), frozenset(scopes)))
    server = build_server(app)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        app.close()


def serve_http(
    store: Store,
    settings: Settings,
    address: HttpAddress,
    tokens_path: Path,
    options: ServeOptions,
) -> None:
    """Serve Streamable HTTP at ``address`` (path ``/mcp``) until interrupted; every request
    needs a bearer token of ``tokens_path``.

    Raises:
        UsageError: the SDK is missing, the tokens file is missing, malformed or empty, the
            port is in use or the host cannot be bound.
    """
    require_sdk()
    registry = TokenRegistry(tokens_path)  # UsageError for a missing or malformed file
    if not registry.load().records:
        raise UsageError(
            f"tokens file {tokens_path} holds no token; add one with `kgot mcp token add LABEL "
            f"--entity NAME --scope read --tokens {tokens_path}`"
        )
    with _bound(address) as listening:
        app = _app(store, settings, options, None)
        try:
            _run_http(app, registry, address, listening)
        finally:
            app.close()


@contextlib.contextmanager
def _bound(address: HttpAddress) -> Iterator[socket.socket]:
    """A listening socket at ``address``, bound before anything else starts."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise UsageError(f"cannot resolve host {address.host!r} ({error.strerror})") from None
    family, kind, proto, _name, where = infos[0]
    listening = socket.socket(family, kind, proto)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(where)
        listening.listen(128)
    except OSError as error:
        listening.close()
        if error.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {address.port} on {address.host} is in use; stop what holds it or choose "
                "another with --http HOST:PORT"
            ) from None
        raise UsageError(
            f"cannot listen on {address.host}:{address.port} ({error.strerror or error})"
        ) from None
    try:
        yield listening
    finally:
        listening.close()


class _Verifier:
    """The SDK's token verifier over the tokens file: a known token becomes an access token
    whose client id is the label and whose claims carry the granted entities."""

    def __init__(self, registry: TokenRegistry) -> None:
        self.registry = registry

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        grant = self.registry.lookup(token)
        if grant is None:
            return None
        return AccessToken(
            token="",  # the secret is not kept around
            client_id=grant.label,
            scopes=sorted(grant.scopes),
            claims={"entities": list(grant.entities)},
        )


def _run_http(
    app: KgotMCP, registry: TokenRegistry, address: HttpAddress, listening: socket.socket
) -> None:
    import anyio
    import uvicorn
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer

    from kgot.mcp_server.server import build_server

    # The SDK's bearer-token middleware; kgot issues its own tokens, so there is no OAuth
    # authorization server and no protected-resource metadata to advertise.
    auth = AuthSettings(issuer_url=address.url.removesuffix(MCP_PATH), resource_server_url=None)
    server: MCPServer = build_server(app, token_verifier=_Verifier(registry), auth=auth)
    starlette = server.streamable_http_app(streamable_http_path=MCP_PATH, host=address.host)
    config = uvicorn.Config(
        starlette, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=30
    )
    if address.host not in _LOOPBACK:
        sys.stderr.write(
            "kgot: warning: serving beyond this machine without TLS: bearer tokens travel in "
            "clear text; put a TLS-terminating proxy in front\n"
        )
    sys.stderr.write(f"kgot: MCP server at {address.url} (tokens: {registry.path})\n")
    sys.stderr.flush()
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[listening]))
