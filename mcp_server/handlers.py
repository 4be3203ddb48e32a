"""What every tool handler shares: the entity argument, error translation, worker threads."""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

import contextlib
from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kgot.errors import KgotError

__all__ = ["EntityArg", "client_errors", "in_thread"]

T = TypeVar("T")

EntityArg = Annotated[
    str | None,
    Field(
        description="The entity (tenant) to work on; required when this client may use more "
        "than one."
    ),
]


@contextlib.contextmanager
def client_errors() -> Iterator[None]:
    """kgot's own errors (the caller's mistake, or a refusal) as tool errors the model reads;
    any other exception stays a crash (the SDK answers it with a generic error and logs it)."""
    try:
        yield
    except KgotError as error:
        raise ToolError(str(error)) from None


async def in_thread(work: Callable[[], T]) -> T:
    """Blocking store work off the event loop, with kgot errors turned into tool errors."""
    with client_errors():
        return await anyio.to_thread.run_sync(work)
