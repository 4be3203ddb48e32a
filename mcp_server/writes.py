"""Writes of the MCP tools: ``save_facts`` (a changeset through the entity's memory) and
``propose_type`` (the agent's type rules).

``save_facts`` turns node-link objects into one changeset. A node whose id is already a current
node (or an id merged into one) is an update of it: its properties are laid over the stored
ones, and the memory's functional rules decide whether a new value supersedes the old. Other
nodes are added, and the memory lands a duplicate on the node it is. The changeset is committed
through :meth:`kgot.memory.Memory.commit` (the write-time hook: resolution, merges followed,
contradiction rules, type checks) with provenance ``mcp:<label>``. A type or structure violation
writes nothing and comes back as the list of violations.

Other processes may write the same entity (one ``kgot mcp serve`` per editor window on one
database). A commit that lost the race to one of them (a conflict on facts it changed, or a
busy store) is read again and retried with jittered backoff; one still losing after the last
try is a :class:`~kgot.errors.WriteConflictError` naming the facts, which the tool returns as
an error result telling the client to call again.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kgot.errors import ChangesetError, UsageError, WriteConflictError
from kgot.graph_model import Changeset, Edge, Node
from kgot.mcp_server.tool_schemas import EdgeIn, Landing, NodeIn, SaveOut, TypeOut
from kgot.persistence import edge_key, fact_id
from kgot.retrying import RetriesExhausted, RetryPolicy, retry_async

if TYPE_CHECKING:
    from kgot.config import Trust
    from kgot.memory import Memory, WriteOutcome
    from kgot.persistence import EntitySession

__all__ = ["MAX_SAVE_EDGES", "MAX_SAVE_NODES", "RETRY_POLICY", "propose_type", "save_facts"]

T = TypeVar("T")

MAX_SAVE_NODES = 200
MAX_SAVE_EDGES = 500
# Writes that lost a race to another process (a commit conflict, a busy store) are tried again
# after a short, jittered wait: the next try reads what the other writer wrote, so it usually
# goes through at once, and the jitter keeps servers from colliding again in lock-step. The
# waits grow (0.025-0.05 s doubling up to 1-2 s; ten tries, about 7 s of waiting) because a
# writer that keeps losing is the slower one: one whose client writes back to back commits
# every few tens of milliseconds, and a try that starts while such a burst goes on mostly loses
# again until the burst ends.
RETRY_POLICY = RetryPolicy(max_retries=9, backoff_base=0.05, backoff_max=2.0, total_timeout=30.0)
_NAMED = 5  # contested facts a conflict error names


def save_facts(
    memory: Memory,
    nodes: Sequence[NodeIn],
    edges: Sequence[EdgeIn],
    *,
    label: str,
    trust: Trust,
    source_ref: str | None = None,
    confidence: float | None = None,
) -> SaveOut:
    """Commit ``nodes`` and ``edges`` to the memory's entity (module docstring). The caller
    holds the entity's write lock (which serialises this server's writes, not other
    processes': their commits may conflict, and are retried, see :data:`RETRY_POLICY`).

    Raises:
        UsageError: too many facts, an empty call, a confidence outside 0..1.
        WriteConflictError: other writers changed the call's facts before every try; nothing
            was written.
        StoreBusyError: the store stayed busy through every try; nothing was written.
    """
    from kgot.persistence import CommitConflictError, Provenance

    if not nodes and not edges:
        raise UsageError("give at least one node or edge to save")
    if len(nodes) > MAX_SAVE_NODES or len(edges) > MAX_SAVE_EDGES:
        raise UsageError(
            f"save at most {MAX_SAVE_NODES} nodes and {MAX_SAVE_EDGES} edges per call "
            f"(got {len(nodes)} and {len(edges)}); split the call"
        )
    if confidence is not None and not 0 <= confidence <= 1:
        raise UsageError(f"confidence must be within 0..1, not {confidence}")
    session = memory.session
    provenance = Provenance(
        run_id=f"mcp:{label}",
        step="mcp:save_facts",
        source_ref=source_ref,
        source_kind=trust.source_kind,
        confidence=confidence if confidence is not None else trust.confidence,
        # One key per call: a try that failed after its commit (the store busy while the
        # memory filed its suggestions) is not written twice by the next try.
        result_key=f"mcp:save_facts:{uuid.uuid4().hex}",
    )

    def attempt() -> SaveOut:
        session.refresh()  # the view is the current version: another writer's facts are seen
        changeset = _changeset(session, nodes, edges)
        try:
            outcome = memory.commit(changeset, provenance)
        except CommitConflictError:
            raise  # another process wrote these facts meanwhile: read them and try again
        except ChangesetError as violation:
            return SaveOut(
                entity=session.entity, written=False, violations=list(violation.problems)
            )
        return _report(session, outcome)

    try:
        return _retried(attempt)
    except RetriesExhausted as exhausted:
        if not isinstance(exhausted.error, CommitConflictError):
            raise exhausted.error from None  # a store that stayed busy: its own message
        contested = _contested(session.refresh(), session, nodes, edges)
        raise WriteConflictError(
            f"another writer changed {contested} of entity {session.entity!r} meanwhile; "
            f"call save_facts again (nothing was written; tried {exhausted.attempts} times)"
        ) from None


def _retried(attempt: Callable[[], T]) -> T:
    """``attempt()``, tried again after a commit conflict or a busy store as
    :data:`RETRY_POLICY` allows (:class:`RetriesExhausted` when every try failed so).

    The tools call this from a worker thread (``handlers.in_thread``), which has no event loop,
    so the project's retry loop (:func:`kgot.retrying.retry_async`) runs on a private one
    here: each try blocks it, and so do the jittered waits between tries, which is what this
    thread is for. The server's own writes to the entity stay serialised meanwhile.
    """
    from kgot.persistence import CommitConflictError, StoreBusyError

    async def once(_number: int) -> T:
        return attempt()

    def transient(error: Exception) -> bool:
        return isinstance(error, CommitConflictError | StoreBusyError)

    return asyncio.run(retry_async(once, RETRY_POLICY, retryable=transient))


def _contested(
    theirs: Changeset, session: EntitySession, nodes: Sequence[NodeIn], edges: Sequence[EdgeIn]
) -> str:
    """The facts of the call that other writers changed (``theirs``: their changes since the
    failed try's view), named as the call named them."""
    touched = {n.id for n in (*theirs.added_nodes, *theirs.changed_nodes)}
    touched.update(theirs.removed_nodes)
    touched_edges = {e.ident for e in (*theirs.added_edges, *theirs.changed_edges)}
    touched_edges.update(theirs.removed_edges)
    canonical = session.canonical_ids([node.id for node in nodes])
    named = [
        repr(node.id) for node in nodes if node.id in touched or canonical.get(node.id) in touched
    ]
    for edge in edges:
        ident = Edge(edge.source, edge.target, edge.relationship, edge.key or "").ident
        if ident in touched_edges or {edge.source, edge.target} & set(theirs.removed_nodes):
            named.append(repr(fact_id(edge_key(*ident))))
    named = list(dict.fromkeys(named))
    if not named:  # e.g. a type the call uses changed, or the change was undone since
        return "the facts or types this call writes"
    shown = ", ".join(named[:_NAMED])
    return shown if len(named) <= _NAMED else f"{shown} and {len(named) - _NAMED} more"


def _changeset(
    session: EntitySession, nodes: Sequence[NodeIn], edges: Sequence[EdgeIn]
) -> Changeset:
    ids = [node.id for node in nodes]
    canonical = session.canonical_ids(ids)
    added: list[Node] = []
    changed: dict[str, Node] = {}
    for node in nodes:
        target = canonical.get(node.id)
        if target is None:
            added.append(Node(node.id, node.label, dict(node.properties)))
            continue
        stored = _stored_properties(session, target)
        merged = {**stored, **(changed[target].properties if target in changed else {})}
        merged.update(node.properties)
        if target == node.id and merged == stored and target not in changed:
            added.append(Node(node.id, node.label, dict(node.properties)))  # a re-statement
        else:
            changed[target] = Node(target, node.label, merged)
    return Changeset(
        added_nodes=tuple(added),
        changed_nodes=tuple(changed.values()),
        added_edges=tuple(
            Edge(e.source, e.target, e.relationship, e.key or "", dict(e.properties)) for e in edges
        ),
    )


def _stored_properties(session: EntitySession, node_id: str) -> dict[str, Any]:
    rows = [row for row in session.node_history(node_id) if row.get("valid_to_version") is None]
    return dict(rows[-1].get("properties") or {}) if rows else {}


def _report(session: EntitySession, outcome: WriteOutcome) -> SaveOut:
    """What became of each fact (:class:`kgot.memory.WriteOutcome`), as the tool answers."""
    return SaveOut(
        entity=session.entity,
        written=True,
        version=outcome.version if outcome.version is not None else session.version,
        inserted=[*outcome.inserted_nodes, *(e.fact_id for e in outcome.inserted_edges)],
        updated=[*outcome.updated_nodes, *(e.fact_id for e in outcome.updated_edges)],
        corroborated=[fact_id(key) for key in outcome.restated],
        merged=[Landing(id=merged.given, into=merged.into) for merged in outcome.merged],
        superseded=[fact_id(key) for key in outcome.superseded],
        queued=outcome.queued,
        notes=list(outcome.notes),
    )


def propose_type(session: EntitySession, spec: Mapping[str, Any], *, label: str) -> TypeOut:
    """Store a type scoped to the session's entity under the agent's rules (the same as the
    type tools of a run: a justification, a new name, a valid schema, a fitting example).

    Raises:
        UsageError: a broken rule (the message names each one and its JSON path).
    """
    from kgot.persistence import TypeRejectedError, TypeSpec

    fields = {k: v for k, v in spec.items() if v is not None}
    justification = str(fields.pop("justification", "") or "")
    try:
        parsed = TypeSpec.from_mapping(fields)
        # Another process proposing the same name meanwhile is no conflict to retry: the
        # entity is locked while the name is checked, so the later one reads "not new".
        created = _retried(
            lambda: session.create_type(
                parsed, created_by="agent", justification=justification, run_id=f"mcp:{label}"
            )
        )
    except TypeRejectedError as rejected:
        raise UsageError(f"{rejected}; fix the definition, or use an existing type") from None
    except RetriesExhausted as exhausted:
        raise exhausted.error from None  # the store stayed busy: its own message
    return TypeOut(
        entity=session.entity,
        created=json.loads(json.dumps(created.to_dict(), default=str)),
        summary=(
            f"created {created.kind} type {created.name} (version {created.version}) for entity "
            f"{session.entity!r}; use it in save_facts from now on"
        ),
    )
