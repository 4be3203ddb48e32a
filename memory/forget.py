"""Forgetting a fact on a person's word: ``kgot memory forget``, ``Memory.forget`` and the MCP
``forget`` tool (issue 27, item 14).

A fact is named the way search, ``get_node`` and ``history`` name it:

* a node id (``apple``): the node is retired, and every current edge to or from it with it
  (an edge cannot outlive its end);
* a node id and ``property`` (``apple``, ``ceo``): the node gets a new version without that
  property; its other properties, confidence and source stay;
* an edge as ``source -[key]-> target`` (or three words ``source relationship target``): that
  edge is retired.

Nothing is deleted. The retired rows close with the reason ``forgotten`` (history shows them,
``load_graph(as_of=…)`` still sees them before the forgetting), in one commit with the
provenance step ``memory:forget``; reads, search, views and upkeep no longer see them. Only
current facts of the session's own entity can be forgotten: an id of another entity, an old
version, an expired fact or an id merged away is refused like an unknown one, before anything
is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgot.errors import ChangesetError, UsageError
from kgot.graph_model import Changeset, Node

if TYPE_CHECKING:
    import networkx as nx

    from kgot.persistence import EntitySession, FactKey

__all__ = ["FORGET_STEP", "FORGOTTEN", "Forgotten", "forget"]

FORGET_STEP = "memory:forget"
FORGOTTEN = "forgotten"  # the close reason of every row a forgetting retires
_TRIES = 3  # a property's node re-read and written again when another writer changed it
# Metadata a new version of a node keeps when one of its properties is forgotten.
_KEPT_META = ("_confidence", "_source_kind", "_source_ref", "_expires_at")


@dataclass(frozen=True)
class Forgotten:
    """What a forgetting retired.

    Attributes:
        entity: the entity.
        kind: ``node``, ``property`` or ``edge``.
        fact: the fact as named: a node id, ``node.property`` or ``source -[key]-> target``.
        version: the entity's version after the forgetting.
        closed: every fact row closed, by id (a node's edges with it; for a property, the node,
            whose new version lacks the property).
        value: the forgotten property's value (``None`` for a node or an edge).
    """

    entity: str
    kind: str
    fact: str
    version: int
    closed: tuple[str, ...] = ()
    value: Any = field(default=None, compare=False)

    def line(self) -> str:
        """The confirmation in words."""
        if self.kind == "property":
            shown = self.value if isinstance(self.value, str) else repr(self.value)
            return (
                f"forgot {self.fact} (was {shown}) in entity {self.entity!r} at version "
                f"{self.version}; history keeps it"
            )
        edges = len(self.closed) - 1
        also = f" and its {edges} edge{'s' if edges != 1 else ''}" if edges > 0 else ""
        return (
            f"forgot {self.kind} {self.fact}{also} in entity {self.entity!r} at version "
            f"{self.version}; history keeps it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "kind": self.kind,
            "fact": self.fact,
            "version": self.version,
            "closed": list(self.closed),
            "closed_reason": FORGOTTEN,
            "value": self.value,
        }


def forget(
    session: EntitySession,
    fact: str | Sequence[str],
    *,
    property: str | None = None,
    by: str = "user",
) -> Forgotten:
    """Retire one current fact of ``session``'s entity with history kept (module docstring).
    ``fact``: a node id, an edge id ``source -[key]-> target``, or ``(source, relationship,
    target)``; ``property``: forget that property of the node ``fact`` names; ``by``: who
    asked (kept as the commit's run id: ``user``, ``mcp:<client>``).

    Raises:
        UsageError: no such current fact in this entity (or the node lacks the property, or
            its type requires it); nothing was written.
        EntityNotFoundError: the entity was deleted.
    """
    from kgot.persistence import Provenance, fact_id

    provenance = Provenance(run_id=by, step=FORGET_STEP)
    if not isinstance(fact, str):
        return _forget_edge(session, _named_edge(session, fact, property), provenance)
    if not fact.strip():
        raise UsageError("name the fact to forget: a node id or an edge 'source -[key]-> target'")
    edge = _edge_key(session, fact)
    if edge is not None:
        if property is not None:
            raise UsageError(
                f"{fact!r} is an edge; a property can only be forgotten on a node "
                "(give the node's id with the property)"
            )
        return _forget_edge(session, edge, provenance)
    if property is not None:
        return _forget_property(session, fact, property, provenance)
    _current_node(session, fact)
    done = session.close_facts_as_read({("node", fact): None}, FORGOTTEN, provenance)
    if ("node", fact) not in done.closed:  # retired by another writer since the read
        raise _unknown_node(session, fact)
    closed = [fact, *sorted(fact_id(key) for key in done.closed if key[0] == "edge")]
    return Forgotten(session.entity, "node", fact, done.version, tuple(closed))


def _named_edge(session: EntitySession, words: Sequence[str], property: str | None) -> FactKey:
    from kgot.memory.search import find_edge

    if len(words) != 3 or not all(isinstance(w, str) for w in words):
        raise UsageError(
            "name an edge as 'source -[key]-> target' or as three words SOURCE RELATIONSHIP "
            f"TARGET, not {len(words)} words"
        )
    if property is not None:
        raise UsageError("a property can only be forgotten on a node, not on an edge")
    source, relationship, target = words
    # Exact ids: forgetting never follows a merge to another node's facts.
    for end in (source, target):
        _current_node(session, end)
    return find_edge(session, source, relationship, target)


def _edge_key(session: EntitySession, text: str) -> FactKey | None:
    """The edge key ``text`` names, or ``None`` when it names a node (a node id may look like
    an edge id: the node wins, as everywhere else)."""
    from kgot.persistence import edge_key_from_id

    edge = edge_key_from_id(text)
    if edge is None or text in session.facts_around([text]):
        return None
    return edge


def _forget_edge(session: EntitySession, key: FactKey, provenance: Any) -> Forgotten:
    from kgot.persistence import fact_id

    source, target, edge = key[1], key[2], key[3]
    graph = session.facts_around([source])
    shown = fact_id(key)
    if not graph.has_edge(source, target, edge):
        raise UsageError(
            f"entity {session.entity!r} has no current edge {shown!r}; find edge ids with "
            "`kgot memory search --json` (an edge's id is 'source -[key]-> target')"
        )
    done = session.close_facts_as_read({key: None}, FORGOTTEN, provenance)
    if key not in done.closed:
        raise UsageError(
            f"edge {shown!r} of entity {session.entity!r} was retired by another writer "
            "meanwhile; nothing was forgotten"
        )
    return Forgotten(session.entity, "edge", shown, done.version, (shown,))


def _forget_property(session: EntitySession, node_id: str, prop: str, provenance: Any) -> Forgotten:
    from kgot.persistence import CommitConflictError

    if not prop.strip() or prop.startswith("_"):
        raise UsageError(
            f"{prop!r} is not a property that can be forgotten; give one of the node's "
            "properties (metadata such as _confidence is not a fact of its own)"
        )
    for _ in range(_TRIES):
        graph = _current_node(session, node_id)
        data = graph.nodes[node_id]
        label = str(data.get("label", ""))
        if prop == "label" or prop not in data:
            held = sorted(k for k in data if not k.startswith("_") and k != "label")
            raise UsageError(
                f"node {node_id!r} of entity {session.entity!r} has no property {prop!r}; "
                f"it has {', '.join(held) or 'none'}"
            )
        kept = {k: v for k, v in data.items() if not k.startswith("_") and k not in (prop, "label")}
        kept.update({k: data[k] for k in _KEPT_META if data.get(k) is not None})
        try:
            version = session.commit(
                Changeset(changed_nodes=(Node(node_id, label, kept),)),
                provenance,
                base=int(graph.graph["kgot_version"]),
                close_reasons={("node", node_id): FORGOTTEN},
            ).version
        except CommitConflictError:
            continue  # the node changed since the read: read it again
        except ChangesetError as refused:
            first = refused.problems[0] if refused.problems else str(refused)
            raise UsageError(
                f"cannot forget {node_id}.{prop}: the node would break its type {label!r} "
                f"({first}); forget the whole node instead"
            ) from None
        return Forgotten(
            session.entity, "property", f"{node_id}.{prop}", version, (node_id,), data[prop]
        )
    raise UsageError(
        f"node {node_id!r} of entity {session.entity!r} kept changing while it was being "
        "forgotten; nothing was forgotten, run the command again"
    )


def _current_node(session: EntitySession, node_id: str) -> nx.MultiDiGraph:
    """The facts around the current node ``node_id`` (exactly that id).

    Raises:
        UsageError: it is not a current node of this entity.
    """
    graph = session.facts_around([node_id])
    if node_id not in graph:
        raise _unknown_node(session, node_id)
    return graph


def _unknown_node(session: EntitySession, node_id: str) -> UsageError:
    merged_into = session.canonical_id(node_id)
    if merged_into is not None and merged_into != node_id:
        return UsageError(
            f"node {node_id!r} of entity {session.entity!r} was merged into {merged_into!r}; "
            f"forget {merged_into!r} (or one of its properties) if that is what you mean"
        )
    closed = [row for row in session.node_history(node_id) if row.get("valid_to_version")]
    if closed and closed[-1].get("closed_reason") == FORGOTTEN:
        return UsageError(
            f"node {node_id!r} of entity {session.entity!r} was forgotten already (version "
            f"{closed[-1]['valid_to_version']}); its history keeps it"
        )
    return UsageError(
        f"entity {session.entity!r} has no current node {node_id!r}; find ids with "
        "`kgot memory search` (a node's id, or an edge as 'source -[key]-> target')"
    )
