"""The stdio transport of ``kgot mcp serve``: JSON-RPC messages one a line on stdin and stdout,
read and written on the event loop.

The SDK's transport (``mcp.server.stdio.stdio_server``) reads stdin in a worker thread. A
thread blocked in ``read`` cannot be woken, so Ctrl-C waited for the client's next line, and
the server could stop neither promptly nor at a moment of its choosing. Here stdin and stdout
are asyncio pipe transports: a signal, the client closing stdin and the client vanishing (its
end of stdout's pipe closed) all reach the loop at once, and the server decides when the
SDK sees the end of input: after the calls in flight have been answered.

The wire also keeps the ids of the requests read and not yet answered
(:attr:`StdioWire.pending`), so a stopping server knows when every call has had its answer
written.

While serving, descriptor 0 reads the null device and 1 writes to stderr, as under the SDK's
transport: a child process (a sandbox job, a tool) or a stray ``print`` can neither take the
client's input nor corrupt its output. Both are restored on the way out, blocking again (the
pipe transports make them non-blocking, and a terminal's setting is shared with the shell).
Input that is not a pipe, socket or terminal (a file, ``/dev/null``) cannot be watched by the
loop; it is read in a worker thread, where a read never waits for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
from mcp.shared.message import SessionMessage
from mcp.types import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from kgot.errors import UsageError

__all__ = ["StdioWire", "stdio_wire"]

_READ_AHEAD = 64  # lines read ahead of the server before stdin is paused
_CHUNK = 1 << 16
_FLUSH_S = 1.0  # at the end, how long output still buffered may take to reach the client


class _Lines(asyncio.Protocol):
    """Bytes from stdin cut into lines; ``None`` once the input has ended."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.buffer = bytearray()
        self.transport: asyncio.ReadTransport | None = None
        self.paused = False
        self.ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\n")) >= 0:
            self.queue.put_nowait(bytes(self.buffer[:end]))
            del self.buffer[: end + 1]
        if self.transport is not None and not self.paused and self.queue.qsize() >= _READ_AHEAD:
            self.transport.pause_reading()
            self.paused = True

    def eof_received(self) -> bool | None:
        self.end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.end()

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self.buffer.strip():  # a last message without its newline
            self.queue.put_nowait(bytes(self.buffer))
        self.buffer.clear()
        self.queue.put_nowait(None)

    async def next(self) -> bytes | None:
        line = await self.queue.get()
        if self.paused and self.transport is not None and self.queue.qsize() < _READ_AHEAD // 2:
            self.transport.resume_reading()
            self.paused = False
        return line


class _Output(asyncio.Protocol):
    """stdout's pipe: flow control, and whether its reader is gone."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()
        self.writable.set()

    async def put(self, data: bytes) -> None:
        """Write ``data`` once the pipe has room.

        Raises:
            BrokenPipeError: the client closed its end.
        """
        if self.transport is None or self.transport.is_closing():
            raise BrokenPipeError
        self.transport.write(data)
        await self.writable.wait()

    async def flush(self) -> None:
        """Until what was written has left (or the pipe broke)."""
        while self.transport is not None and not self.transport.is_closing():
            if self.writable.is_set() and not self.transport.get_write_buffer_size():
                return
            await asyncio.sleep(0.01)

    def abort(self) -> None:
        """Drop what could not be written and let go of the pipe."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()  # which fails on a transport already closed


class _FileOutput:
    """stdout that the loop cannot watch (a file, ``/dev/null``): plain writes, which never
    wait for long there."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lost = asyncio.Event()  # never set: a file has no reader to lose

    async def put(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def flush(self) -> None:
        return None

    def abort(self) -> None:
        return None


class StdioWire:
    """The server's side of the stdio pipes (:func:`stdio_wire`).

    ``read_stream`` and ``write_stream`` are what the SDK's ``Server.run`` serves.
    ``client_done`` is set when stdin ends or stdout's reader is gone; the SDK sees the end of
    input only at :meth:`end_input`.
    """

    def __init__(self) -> None:
        self._to_server, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self._from_server = anyio.create_memory_object_stream[SessionMessage](0)
        self.pending: set[Any] = set()  # ids of requests read and not yet answered
        self.client_done = anyio.Event()
        self.output_gone = False
        self.written = anyio.Event()  # the server closed its side and all was written
        self._answered = anyio.Event()
        self._answered.set()

    def end_input(self) -> None:
        """Let the server see the end of its input: it finishes what it is doing and returns."""
        self._to_server.close()

    async def answered(self) -> None:
        """Until every request read has been answered (or the answer dropped with the
        client gone)."""
        await self._answered.wait()

    def _track(self, message: Any, *, inbound: bool) -> None:
        if inbound and isinstance(message, JSONRPCRequest):
            self.pending.add(message.id)
        elif inbound and isinstance(message, JSONRPCNotification):
            if message.method == "notifications/cancelled":  # the SDK never answers those
                self.pending.discard((message.params or {}).get("requestId"))
        elif not inbound and isinstance(message, JSONRPCResponse | JSONRPCError):
            self.pending.discard(message.id)
        if self.pending and self._answered.is_set():
            self._answered = anyio.Event()
        elif not self.pending:
            self._answered.set()

    async def _read(self, lines: _Lines) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            while (line := await lines.next()) is not None:
                if not line.strip():
                    continue
                item: SessionMessage | Exception
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as error:  # the SDK's transports hand bad lines on as errors
                    item = error
                else:
                    self._track(message, inbound=True)
                    item = SessionMessage(message)
                await self._to_server.send(item)
        self.client_done.set()

    async def _write(self, output: _Output | _FileOutput) -> None:
        async with self._from_server:
            async for message in self._from_server:
                if not self.output_gone:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await output.put(data.encode() + b"\n")
                    except OSError:  # BrokenPipeError: the client closed its end
                        self._gone()
                self._track(message.message, inbound=False)  # sent, or dropped with the client
        self.written.set()

    def _gone(self) -> None:
        self.output_gone = True
        self.client_done.set()

    async def _watch(self, output: _Output | _FileOutput) -> None:
        await output.lost.wait()  # the client closed its end, even while nothing is written
        self._gone()


@contextlib.asynccontextmanager
async def stdio_wire() -> AsyncIterator[StdioWire]:
    """Serve stdin and stdout (module docstring) while inside.

    Raises:
        UsageError: stdin or stdout is closed.
    """
    loop = asyncio.get_running_loop()
    wire = StdioWire()
    with _claimed(0, _null_input) as wire_in, _claimed(1, _stderr_output) as wire_out:
        lines = _Lines()
        output: _Output | _FileOutput
        async with anyio.create_task_group() as tasks:
            if _watchable(wire_in):
                await loop.connect_read_pipe(lambda: lines, _file(wire_in, "rb"))
            else:
                tasks.start_soon(_read_in_thread, wire_in, lines)
            if _watchable(wire_out):
                pipe = _Output()
                await loop.connect_write_pipe(lambda: pipe, _file(wire_out, "wb"))
                output = pipe
            else:
                output = _FileOutput(wire_out)
            tasks.start_soon(wire._read, lines)
            tasks.start_soon(wire._write, output)
            tasks.start_soon(wire._watch, output)
            try:
                yield wire
                # The server has returned: what it wrote last (its answers) still goes out.
                wire.end_input()
                await wire.write_stream.aclose()
                with anyio.move_on_after(_FLUSH_S):
                    await wire.written.wait()
                    await output.flush()
            finally:
                tasks.cancel_scope.cancel()
                if lines.transport is not None:
                    lines.transport.close()
                output.abort()


def _watchable(fd: int) -> bool:
    """Whether the loop can watch ``fd``: a pipe, a socket or a terminal (epoll refuses files
    and ``/dev/null``)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _file(fd: int, mode: str) -> Any:
    # closefd=False: the descriptor is restored and closed by `_claimed`, after the transport
    return open(fd, mode, buffering=0, closefd=False)


async def _read_in_thread(fd: int, lines: _Lines) -> None:
    while data := await anyio.to_thread.run_sync(os.read, fd, _CHUNK, abandon_on_cancel=True):
        lines.data_received(data)
    lines.end()


def _null_input() -> int:
    return os.open(os.devnull, os.O_RDONLY)


def _stderr_output() -> int:
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


@contextlib.contextmanager
def _claimed(fd: int, diversion: Callable[[], int]) -> Iterator[int]:
    """A private copy of standard descriptor ``fd`` (the wire), with ``fd`` itself pointed at
    ``diversion()`` while inside; on the way out ``fd`` is the wire again, blocking."""
    try:
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        name = "stdin" if fd == 0 else "stdout"
        raise UsageError(
            f"{name} is closed; an MCP client starts `kgot mcp serve` with pipes on stdin and "
            "stdout"
        ) from None
    other = diversion()
    os.dup2(other, fd)
    os.close(other)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        with contextlib.suppress(OSError):
            os.set_blocking(fd, True)
        os.close(private)
