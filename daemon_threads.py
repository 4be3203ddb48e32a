"""Blocking work off the event loop, without holding up interpreter exit.

``asyncio.to_thread`` uses the loop's default executor, whose threads Python joins at exit —
before ``atexit`` handlers run. A sandbox job or a document parse abandoned by Ctrl-C would then
keep ``kgot`` alive until its own deadline. The blocking calls of the tools and of document
parsing run in daemon threads instead: a cancelled call stops being awaited at once, and exit
does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_blocking(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``function(*args, **kwargs)`` in a daemon thread and await its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():  # the caller may have been cancelled meanwhile
            setter(value)

    def work() -> None:
        try:
            result = function(*args, **kwargs)
        except BaseException as error:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(deliver, future.set_exception, error)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(deliver, future.set_result, result)

    name = f"kgot-tool-{getattr(function, '__name__', 'call')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
