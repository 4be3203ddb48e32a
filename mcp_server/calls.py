"""The calls a server is serving, so that none ends in silence (issue 26).

A call ends early for two reasons: the server is stopping (a signal) or its client has gone
(stdin closed, stdout's pipe broken, an HTTP connection dropped). Either way the work stops
(an ``ask`` run is cancelled, which records it ``interrupted`` and leaves it resumable) and,
where someone can still read it, the call is answered: an error result saying why and, for
``ask``, which run to continue with ``kgot ask --resume``. Left to the SDK, a stopping server
answered nothing (or "Connection closed") and a dropped HTTP request kept its run going.

:class:`CallGuard` is SDK middleware around every request: it gives each call a cancel scope
of its own, so cancelling it leaves the SDK's request scope intact and the answer goes out by
the ordinary path. :func:`note_run` is how ``ask`` tells the call which run it started (the
run id is made inside ``ask``). :class:`Exchanges` is ASGI middleware that notices an HTTP
client going away and cancels the calls that client's request carried.

The SDK is imported only where an answer is built: ``asking`` imports :func:`note_run`, and
kgot imports ``asking`` without the ``mcp`` extra installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio

__all__ = ["Call", "CallGuard", "Exchanges", "note_run"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# How long a stopped call waits for its run to record itself interrupted before it answers,
# so that "continue it with kgot ask --resume" is true when the client reads it; the run's
# record is written at once on cancellation, the rest of its unwinding is not waited for.
RUN_SETTLE_S = 1.0
_UNAVAILABLE = -32000  # JSON-RPC's server-defined range; the SDK's "Connection closed" too


@dataclass(eq=False)
class Call:
    """One request being served."""

    method: str
    tool: str | None  # the tool of a tools/call
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    run_id: str | None = None  # the run an ``ask`` started
    run: asyncio.Future[Any] | None = None
    why: str | None = None  # why it was stopped; None while it runs

    def stop(self, why: str) -> None:
        if self.why is None:
            self.why = why
        self.scope.cancel()


_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar("kgot_mcp_call", default=None)


def note_run(run_id: str, run: asyncio.Future[Any]) -> None:
    """Tell the call being served that it started run ``run_id`` (the task ``run``): a call
    stopped early then names the run and waits briefly for it to record itself interrupted.
    Outside a guarded call (tests calling ``ask`` directly) it does nothing."""
    call = _call.get()
    if call is not None:
        call.run_id = run_id
        call.run = run


class CallGuard:
    """SDK middleware (``server.middleware``): every request runs in a cancel scope of its own,
    and :meth:`stop` ends them all with an answer."""

    def __init__(self) -> None:
        self.calls: set[Call] = set()
        self.stopping: str | None = None
        self.interrupted_runs: list[str] = []  # the runs of the calls stop() stopped

    def stop(self, why: str) -> None:
        """Stop every call now and refuse new ones; ``why`` opens their answers ("the MCP
        server is stopping (SIGTERM)")."""
        if self.stopping is None:
            self.stopping = why
        for call in list(self.calls):
            call.stop(why)

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.request_id is None or ctx.method == "initialize":
            return await call_next(ctx)  # notifications, and the handshake (answered inline)
        params = ctx.params or {}
        tool = params.get("name") if ctx.method == "tools/call" else None
        call = Call(ctx.method, tool if isinstance(tool, str) else None)
        if self.stopping is not None:
            call.why = self.stopping
            return self._answer(call)
        exchange = _exchange.get()
        if exchange is not None and exchange.finished:
            exchange = None  # a context inherited from an earlier request of the session
        token = _call.set(call)
        self.calls.add(call)
        if exchange is not None:
            exchange.calls.add(call)
        try:
            with call.scope:
                return await call_next(ctx)
            # Only our own cancel lands here: the SDK's (the client cancelled, the session
            # ended) is not caught by this scope and goes on up, unanswered as the SDK wants.
            await self._settled(call)
            return self._answer(call)
        finally:
            _call.reset(token)
            self.calls.discard(call)
            if exchange is not None:
                exchange.calls.discard(call)

    async def _settled(self, call: Call) -> None:
        """Give a cancelled run a moment to record itself interrupted."""
        if call.run is None:
            return
        if call.run_id is not None and self.stopping is not None:
            self.interrupted_runs.append(call.run_id)
        with anyio.move_on_after(RUN_SETTLE_S, shield=True):
            await asyncio.wait([call.run])

    def _answer(self, call: Call) -> Any:
        """What a stopped call answers: an error result for a tool, an error for the rest."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CallToolResult, TextContent

        why = call.why or "stopped"
        if call.run_id is not None:
            text = (
                f"{why}: run {call.run_id} is interrupted; continue it with "
                f"`kgot ask --resume {call.run_id}`"
            )
        else:
            text = f"{why}: {call.tool or call.method} was stopped before it finished"
        if call.method != "tools/call":
            raise MCPError(code=_UNAVAILABLE, message=text)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


@dataclass(eq=False)
class Exchange:
    """One HTTP request being served, with the calls it carries."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    calls: set[Call] = field(default_factory=set)
    started: bool = False  # the response's head was sent
    complete: bool = False  # its last body part was sent
    finished: bool = False  # the application returned
    done: anyio.Event = field(default_factory=anyio.Event)

    def client_gone(self) -> None:
        for call in list(self.calls):
            call.stop("the client went away")


_exchange: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "kgot_mcp_exchange", default=None
)


class Exchanges:
    """ASGI middleware over the MCP app: knows the HTTP requests in flight, cancels the calls
    of a request whose client disconnects, and ends every request when the server stops.

    The SDK hands a request's messages to the session with the context of the task that
    received it, so the calls a request starts see its :class:`Exchange` (``_exchange``).
    """

    def __init__(self, app: App) -> None:
        self.app = app
        self.open: set[Exchange] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange()

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not exchange.complete:
                exchange.client_gone()
            return message

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                exchange.complete = True
            await send(message)

        token = _exchange.set(exchange)
        self.open.add(exchange)
        try:
            with exchange.scope:
                await self.app(scope, watched_receive, watched_send)
            if exchange.scope.cancelled_caught:
                await self._close(exchange, send)
        finally:
            exchange.finished = True
            self.open.discard(exchange)
            exchange.done.set()
            _exchange.reset(token)

    async def _close(self, exchange: Exchange, send: Send) -> None:
        """End a response cut short by the server stopping: a streamed one (an SSE stream) with
        its last, empty part, one not begun with 503."""
        with contextlib.suppress(Exception):  # the client may be gone too
            if not exchange.started:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"the server is stopping"})
            elif not exchange.complete:
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def stop(self, guard: CallGuard, why: str, answer_s: float) -> None:
        """Stop every call (:meth:`CallGuard.stop`), wait (at most ``answer_s``) for the
        requests that carried them to send their answers, then end every request still open
        (the clients' SSE streams for notifications), so that the connections close."""
        carrying = [exchange for exchange in self.open if exchange.calls]
        guard.stop(why)
        with anyio.move_on_after(answer_s):
            for exchange in carrying:
                await exchange.done.wait()
        for exchange in list(self.open):
            exchange.scope.cancel()
