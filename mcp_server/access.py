"""Who may touch which entity: one grant per client, one store session per entity.

Every tool and resource goes through :meth:`Tenancy.session` (or :meth:`Tenancy.entity`) before
it reads or writes anything. An entity outside the client's grant gets exactly the answer an
entity that does not exist gets (:func:`no_entity`), decided before the store is asked, so
neither the words nor the work done tell them apart.

Sessions are kept per entity for the server's life: the memory's search index, the write-time
snapshot and the claim checker's graph are cached per session, so a warm search costs a few
milliseconds instead of a graph load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kgot.errors import EntityNotFoundError, UsageError
from kgot.mcp_server.tokens import Grant

if TYPE_CHECKING:
    from kgot.memory import Memory, NodeEmbedder
    from kgot.persistence import EntitySession, Store

__all__ = ["AccessError", "Tenancy", "no_entity"]

T = TypeVar("T")


class AccessError(UsageError):
    """The client may not do this (unknown or ungranted entity, a missing scope)."""


def no_entity(name: str, grant: Grant) -> AccessError:
    """The one answer for an entity the client may not use *and* for one that does not exist."""
    return AccessError(
        f"no entity named {name!r} for this client; use one of: {', '.join(grant.entities)}"
    )


class Tenancy:
    """The store, the sessions per entity and the checks that guard them (module docstring)."""

    def __init__(self, store: Store, *, embedder: NodeEmbedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._lock = threading.Lock()
        self._sessions: dict[str, EntitySession] = {}
        self._memories: dict[str, Memory] = {}
        self._write_locks: dict[str, threading.Lock] = {}

    def entity(self, grant: Grant, requested: str | None) -> str:
        """The entity a call works on: ``requested``, or the grant's only one.

        Raises:
            AccessError: ``requested`` is not in the grant, or none is named and the grant
                holds several.
        """
        if requested is None or not requested.strip():
            if len(grant.entities) == 1:
                return grant.entities[0]
            raise AccessError(
                f"this client may use several entities ({', '.join(grant.entities)}); name one "
                "with the entity argument"
            )
        if requested not in grant.entities:
            raise no_entity(requested, grant)
        return requested

    @staticmethod
    def require(grant: Grant, scope: str, what: str) -> None:
        """Refuse ``what`` unless the grant has ``scope``.

        Raises:
            AccessError: the scope is missing.
        """
        if not grant.allows(scope):
            raise AccessError(
                f"{what} needs the {scope!r} scope, which this client's token lacks; ask for "
                f"a token with --scope {scope}"
            )

    def session(self, grant: Grant, requested: str | None) -> EntitySession:
        """The session of the entity a call works on (checked against the grant first).

        Raises:
            AccessError: not granted, or the entity does not exist (the same answer).
        """
        name = self.entity(grant, requested)
        with self._lock:
            found = self._sessions.get(name)
        if found is not None:
            return found
        try:
            opened = self.store.session(name)
        except EntityNotFoundError:
            raise no_entity(name, grant) from None
        with self._lock:
            return self._sessions.setdefault(name, opened)

    def memory(self, grant: Grant, requested: str | None) -> Memory:
        """The memory (:class:`kgot.memory.Memory`) of the entity a call works on."""
        from kgot.memory import Memory

        session = self.session(grant, requested)
        with self._lock:
            found = self._memories.get(session.entity)
            if found is None or found.session is not session:
                found = Memory(session, embedder=self.embedder)
                self._memories[session.entity] = found
            return found

    def write_lock(self, entity: str) -> threading.Lock:
        """Serialises this server's writes to one entity (read, decide, commit as one step)."""
        with self._lock:
            return self._write_locks.setdefault(entity, threading.Lock())

    def run(self, grant: Grant, requested: str | None, work: Callable[[EntitySession], T]) -> T:
        """``work(session)``; a session whose entity was deleted (and maybe created again under
        the same name) is dropped and the work tried once on a fresh one.

        Raises:
            AccessError: not granted, or the entity does not exist.
        """
        session = self.session(grant, requested)
        try:
            return work(session)
        except EntityNotFoundError:
            self.forget(session.entity)
        try:
            return work(self.session(grant, requested))
        except EntityNotFoundError:
            self.forget(session.entity)
            raise no_entity(session.entity, grant) from None

    def forget(self, entity: str) -> None:
        with self._lock:
            self._sessions.pop(entity, None)
            self._memories.pop(entity, None)
