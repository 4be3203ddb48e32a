"""Naming facts across commits: fact keys and close reasons (pure, no database access).

A *fact key* names a node or an edge independently of its versions: ``("node", node_id)`` or
``("edge", source, target, key)``. Memory upkeep passes them to
:meth:`~kgot.persistence.EntitySession.commit` (``close_reasons``),
:meth:`~kgot.persistence.EntitySession.close_facts` and the fact-use methods.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kgot.errors import UsageError
from kgot.persistence.schema import CLOSE_REASONS

FactKey = tuple[str, ...]
"""``("node", node_id)`` or ``("edge", source, target, key)``."""


def node_key(node_id: str) -> FactKey:
    return ("node", node_id)


def edge_key(source: str, target: str, key: str) -> FactKey:
    return ("edge", source, target, key)


def fact_id(key: FactKey) -> str:
    """How a fact is named to people and clients (search, history, forget, MCP, write
    reports): a node's id, or an edge as ``source -[key]-> target``."""
    if key[0] == "node":
        return key[1]
    return f"{key[1]} -[{key[3]}]-> {key[2]}"


# An edge's fact id; the source is matched lazily and the target takes the rest, so ids that
# hold the separator themselves still split where fact_id joined them (as long as the source
# does not).
_EDGE_FACT_ID = re.compile(r"^(?P<source>.+?) -\[(?P<key>.+?)\]-> (?P<target>.+)$", re.DOTALL)


def edge_key_from_id(text: str) -> FactKey | None:
    """The fact key of an edge named as :func:`fact_id` names it (``source -[key]-> target``,
    as a person or client gives it back); ``None`` for any other text (a node id)."""
    found = _EDGE_FACT_ID.match(text)
    if found is None:
        return None
    return edge_key(found["source"], found["target"], found["key"])


def checked_key(key: Any) -> FactKey:
    """``key`` as a :data:`FactKey`.

    Raises:
        UsageError: ``key`` is not shaped like one.
    """
    if isinstance(key, tuple | list) and all(isinstance(part, str) for part in key):
        if len(key) == 2 and key[0] == "node":
            return ("node", key[1])
        if len(key) == 4 and key[0] == "edge":
            return ("edge", key[1], key[2], key[3])
    raise UsageError(f"fact key {key!r} is not ('node', node_id) or ('edge', source, target, key)")


def checked_reason(reason: Any) -> str:
    """``reason`` if it is one of :data:`CLOSE_REASONS`.

    Raises:
        UsageError: any other value.
    """
    if reason not in CLOSE_REASONS:
        raise UsageError(f"close reason {reason!r} is not one of {', '.join(CLOSE_REASONS)}")
    return str(reason)


def checked_reasons(reasons: Mapping[Any, Any] | None) -> dict[FactKey, str]:
    """``close_reasons`` of a commit, keys and reasons checked."""
    if not reasons:
        return {}
    return {checked_key(key): checked_reason(reason) for key, reason in reasons.items()}


def stored_key(key: FactKey) -> tuple[str, str]:
    """``(kind, fact_key text)`` as ``kgot_fact_use`` stores a key: a node's id, an edge's
    JSON array ``[source, target, key]`` (no separator could be ambiguous)."""
    if key[0] == "node":
        return "node", key[1]
    return "edge", json.dumps(list(key[1:]), ensure_ascii=False)


def key_from_stored(kind: str, text: str) -> FactKey:
    if kind == "node":
        return ("node", text)
    source, target, key = json.loads(text)
    return ("edge", source, target, key)


def split_keys(keys: Iterable[Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Checked ``keys`` as node ids and edge identities, each once, in order."""
    nodes: dict[str, None] = {}
    edges: dict[tuple[str, str, str], None] = {}
    for raw in keys:
        key = checked_key(raw)
        if key[0] == "node":
            nodes[key[1]] = None
        else:
            edges[(key[1], key[2], key[3])] = None
    return list(nodes), list(edges)
