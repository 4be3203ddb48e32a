"""What every tool handler shares: the entity argument, error translation, worker threads."""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

import contextlib
from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kgot.errors import KgotError
from kgot.persistence import MAX_ENTITY_NAME, MAX_ID_LENGTH

__all__ = [
    "MAX_FACT_ID_CHARS",
    "MAX_ID_CHARS",
    "MAX_NAME_CHARS",
    "MAX_REF_CHARS",
    "MAX_WORDS_CHARS",
    "EntityArg",
    "client_errors",
    "in_thread",
]

T = TypeVar("T")

# Every text argument has a length cap in its schema, so a client's runaway argument (a 5 MB
# id) is refused by the schema check, which never repeats it, before any kgot code would
# quote it in an error or a verdict.
MAX_ID_CHARS = MAX_ID_LENGTH  # ids are keys: the store refuses longer ones anyway
MAX_FACT_ID_CHARS = 3 * MAX_ID_LENGTH + 16  # an edge: 'source -[key]-> target'
MAX_NAME_CHARS = 200  # type names, relationships, property names, labels of things
MAX_WORDS_CHARS = 1_000  # a search
MAX_REF_CHARS = 4_000  # a source reference, a description, a claimed value

EntityArg = Annotated[
    str | None,
    Field(
        max_length=MAX_ENTITY_NAME,
        description="The entity (tenant) to work on; required when this client may use more "
        "than one.",
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
