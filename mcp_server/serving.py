"""Running the MCP server: stdio (one tenant, fixed on the command line) or Streamable HTTP
(bearer tokens from a tokens file).

Everything a person can get wrong is checked before the server answers anything, each with one
line and exit code 2 (:class:`~kgot.errors.UsageError`): the SDK missing, an unknown entity, a
malformed or empty tokens file, an address that is not ``HOST:PORT``, a port in use.

Stopping (issue 26). SIGINT, SIGTERM and SIGHUP stop either transport the way they stop
``kgot ask``: every call in flight is cancelled and answered (an error result saying the server
is stopping; for ``ask``, the run it interrupted and how to resume it), its run is recorded
``interrupted``, and the server returns :class:`Stopped` within about two seconds (the command
exits 128 + the signal's number). A client that goes away is no error: over stdio (stdin closed,
or stdout's pipe broken) its calls are cancelled and answered where it can still read, and the
server returns ``None`` (exit 0, nothing printed); over HTTP a dropped request's calls are
cancelled and the server goes on serving (:mod:`kgot.mcp_server.calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.errors import KgotError, UsageError
from kgot.mcp_server.asking import AskLimits
from kgot.mcp_server.client_config import require_entity
from kgot.mcp_server.tokens import SCOPES, Grant, TokenRegistry

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from kgot.config import Settings
    from kgot.mcp_server.calls import CallGuard, Exchanges
    from kgot.mcp_server.server import KgotMCP
    from kgot.persistence import Store

__all__ = [
    "HttpAddress",
    "ServeOptions",
    "Stopped",
    "parse_address",
    "serve_http",
    "serve_stdio",
]

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long a stopping server waits for the calls in flight to answer, and then for the SDK to
# wind down: a stop takes about two seconds at most, whatever the calls were doing.
ANSWER_S = 1.5


@dataclass(frozen=True)
class ServeOptions:
    """What ``kgot mcp serve`` was asked for, besides the transport."""

    allow_query: bool = False
    limits: AskLimits = field(default_factory=AskLimits)


@dataclass(frozen=True)
class Stopped:
    """The server was stopped by signal ``signum``; the calls in flight were answered and the
    ``ask`` runs among them (``runs``) recorded interrupted."""

    signum: int
    runs: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        name = signal.Signals(self.signum).name
        if not self.runs:
            return f"stopped by {name}"
        return (
            f"stopped by {name}; interrupted run(s) {', '.join(self.runs)}: continue one with "
            "`kgot ask --resume RUN_ID`"
        )


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
            "the MCP server needs the mcp package 2.x: run pip install -e '.[mcp]' in the kgot "
            "checkout"
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
        from kgot.memory import embedder_from_settings

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
) -> Stopped | None:
    """Serve one entity over stdin/stdout until the client closes the pipe (``None``) or a
    signal stops the server (module docstring).

    Raises:
        UsageError: the SDK is missing, the entity does not exist, stdin or stdout is closed.
    """
    import anyio

    from kgot.mcp_server.calls import CallGuard
    from kgot.mcp_server.server import build_server

    require_sdk()
    require_entity(store, entity)
    scopes = set(SCOPES) if options.allow_query else set(SCOPES) - {"admin"}
    app = _app(store, settings, options, Grant(label, (entity,), frozenset(scopes)))
    server = build_server(app)
    guard = CallGuard()
    server.middleware.append(guard)
    try:
        signum = anyio.run(_serve_stdio, server, guard)
    finally:
        app.close()
    return None if signum is None else Stopped(signum, tuple(guard.interrupted_runs))


async def _serve_stdio(server: MCPServer, guard: CallGuard) -> int | None:
    """Serve until the client is done or gone, or a signal comes; then stop every call, wait
    for the answers to go out and let the SDK see the end of its input. Returns the signal."""
    import anyio

    from kgot.mcp_server.stdio import stdio_wire

    # MCPServer.run_stdio_async always serves the SDK's own stdio transport (stdin read in a
    # thread, which no signal wakes); its low-level server serves any pair of streams.
    lowlevel = server._lowlevel_server
    received: list[int] = []
    woken = anyio.Event()
    served = anyio.Event()

    def on_signal(signum: int) -> None:
        received.append(signum)
        woken.set()

    async def serve() -> None:
        try:
            options = lowlevel.create_initialization_options()
            await lowlevel.run(wire.read_stream, wire.write_stream, options)
        finally:
            served.set()
            woken.set()

    async def client_done() -> None:
        await wire.client_done.wait()
        woken.set()

    async with stdio_wire() as wire, anyio.create_task_group() as tasks:
        with _stopped_by_signals(on_signal):
            tasks.start_soon(serve)
            tasks.start_soon(client_done)
            await woken.wait()
            if not served.is_set():
                if received:
                    name = signal.Signals(received[0]).name
                    guard.stop(f"the MCP server is stopping ({name})")
                else:
                    guard.stop("the client closed the connection")
                with anyio.move_on_after(ANSWER_S):
                    await wire.answered()
                wire.end_input()
                with anyio.move_on_after(ANSWER_S):
                    await served.wait()
            tasks.cancel_scope.cancel()
    return received[0] if received else None


@contextlib.contextmanager
def _stopped_by_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """While inside, SIGINT, SIGTERM and SIGHUP call ``on_signal(signum)`` on the event loop,
    which they wake whatever it waits for; the first also gives every signal back its former
    action, so a second one ends the process at once (the stop is bounded, a hang is not).

    A signal ignored when the server started stays ignored: ``nohup`` ignores SIGHUP, and a
    shell ignores SIGINT for the jobs it starts in the background.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    former: dict[int, Any] = {
        signum: signal.getsignal(signum)
        for signum in _STOP_SIGNALS
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    active: list[int] = []

    def give_back() -> None:
        while active:
            signum = active.pop()
            loop.remove_signal_handler(signum)
            signal.signal(signum, former[signum])

    def first(signum: int) -> None:
        give_back()
        on_signal(signum)

    for signum in former:
        loop.add_signal_handler(signum, first, signum)
        active.append(signum)
    try:
        yield
    finally:
        give_back()


def serve_http(
    store: Store,
    settings: Settings,
    address: HttpAddress,
    tokens_path: Path,
    options: ServeOptions,
) -> Stopped:
    """Serve Streamable HTTP at ``address`` (path ``/mcp``) until a signal stops the server
    (module docstring); every request needs a bearer token of ``tokens_path``.

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
            return _run_http(app, registry, address, listening)
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
) -> Stopped:
    import anyio
    import uvicorn
    from mcp.server.auth.settings import AuthSettings

    from kgot.mcp_server.calls import CallGuard, Exchanges
    from kgot.mcp_server.server import build_server

    # The SDK's bearer-token middleware; kgot issues its own tokens, so there is no OAuth
    # authorization server and no protected-resource metadata to advertise.
    auth = AuthSettings(issuer_url=address.url.removesuffix(MCP_PATH), resource_server_url=None)
    server: MCPServer = build_server(app, token_verifier=_Verifier(registry), auth=auth)
    guard = CallGuard()
    server.middleware.append(guard)
    starlette = server.streamable_http_app(streamable_http_path=MCP_PATH, host=address.host)
    exchanges = Exchanges(starlette)
    config = uvicorn.Config(
        exchanges,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=30,
        # a bound only: by the time uvicorn waits, every request has been answered or ended
        timeout_graceful_shutdown=int(ANSWER_S) + 1,
    )
    if address.host not in _LOOPBACK:
        sys.stderr.write(
            "kgot: warning: serving beyond this machine without TLS: bearer tokens travel in "
            "clear text; put a TLS-terminating proxy in front\n"
        )
    sys.stderr.write(f"kgot: MCP server at {address.url} (tokens: {registry.path})\n")
    sys.stderr.flush()
    signum = anyio.run(_serve_http, config, listening, guard, exchanges)
    if signum is None:  # uvicorn gave up on its own (its startup failed) and said why
        raise KgotError("the MCP server could not start; see the messages above")
    return Stopped(signum, tuple(guard.interrupted_runs))


async def _serve_http(
    config: Any, listening: socket.socket, guard: CallGuard, exchanges: Exchanges
) -> int | None:
    """Serve until a signal; then answer the calls in flight, end the requests still open and
    let uvicorn shut down. Returns the signal.

    uvicorn's own handling would not do: on SIGINT or SIGTERM it waits for open responses (an
    ``ask`` in flight, a client's notification stream) without limit, then cancels the calls
    unanswered, and it ends a SIGTERM with the signal's default action (no 143, no cleanup).
    """
    import anyio
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # kgot's handlers (below) stop the server

    web = Server(config)
    received: list[int] = []

    async def stop(signum: int) -> None:
        why = f"the MCP server is stopping ({signal.Signals(signum).name})"
        await exchanges.stop(guard, why, ANSWER_S)
        web.should_exit = True

    async with anyio.create_task_group() as tasks:

        def on_signal(signum: int) -> None:
            received.append(signum)
            tasks.start_soon(stop, signum)

        with _stopped_by_signals(on_signal):
            await web.serve(sockets=[listening])
    return received[0] if received else None
