"""The upkeep pass over one entity's graph (issue 15, section 3): expire, prune, promote, merge.

:func:`run_upkeep` reads the entity's current facts once, decides every step on that snapshot
(each step sees what the steps before it left), and then writes, so a dry run reports exactly
what a real run would do. All clocks come from ``now``, which makes a pass reproducible.

1. **Expire.** A fact of a type with ``ttl_days`` whose last write or re-statement (the latest
   of ``_updated_at``, ``_reinforced_at`` and ``_created_at``) lies more than ``ttl_days``
   before ``now``, and a fact whose own ``_expires_at`` is not after ``now``, closes as
   ``expired``. Being read (retrievals, feedback) does not renew a time to live: a price quote
   is no truer for having been looked at. A fact whose ``_expires_at`` passed before the pass
   is already hidden from every read (``load_graph`` does not return it); the pass finds it
   through ``EntitySession.lapsed_facts`` and closes it too, with the edges it hid.
2. **Prune.** A fact of a decaying type (``half_life_days`` set; evergreen types never) whose
   weight ``confidence · retention(freshness, strength)`` (:mod:`kgot.memory.scoring`) is below
   :data:`~kgot.memory.scoring.PRUNE_BELOW` closes as ``pruned``. Use delays it: retrievals and
   good feedback raise the fact's strength, which closes part of the gap to 1.
3. **Promote.** A fact confirmed by at least :data:`PROMOTE_SOURCES` distinct sources whose
   confidence is below :data:`PROMOTED_CONFIDENCE` is raised to it: a new version that only
   changes ``_confidence`` (content, provenance and counters stay). The store counts distinct
   sources in ``_corroborations``: a new fact starts at 1 (its own source), and each later write
   of the same content from a *new* source (another ``source_ref``, or without one another
   run) adds 1; the same source writing it again only reinforces it. So ``_corroborations ≥ 3``
   is "three distinct sources", and three commits from one source stay at 1. (A content change
   starts the count afresh: the sources confirmed the old content.)
4. **Merge.** Entity resolution over the nodes that are left (:func:`kgot.memory.resolution
   .resolve_all`, as ``Memory.resolve(apply=True)`` does): each merge folds the alias nodes
   into the canonical one (``merge_nodes``). Suggestions are not filed here; ``kgot memory
   resolve --apply`` queues them.

Closing (1, 2) closes a node's current edges with it, for the same reason. Nothing is deleted:
closed facts stay in history (``node_history`` shows ``closed_reason``), and
``load_graph(as_of=…)`` still shows the graph before the pass. Every write carries the
provenance step ``memory:upkeep``.

Writers do not wait for the pass, so a fact may be re-stated between the read the pass decided
on and its close: a new row (changed, or a lapsed fact written again) or the row read updated
in place (reinforced, corroborated), or used (a pruned fact's strength). The closes are
conditional on each fact's row as read (``EntitySession.close_facts_as_read``): such a fact,
and the edges that would only have closed with it, stay current and are reported as ``left``
(not counted as closed); the next pass decides on what it then reads. A merge whose nodes
another writer changed is left the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory.merge_groups import merge_evidence, merged_properties, node_from_graph
from kgot.memory.resolution import Merge, resolve_all
from kgot.memory.scoring import (
    PRUNE_BELOW,
    SECONDS_PER_DAY,
    fact_freshness,
    parse_instant,
    retention,
    temporal_properties,
)
from kgot.memory.tickers import ticker_names, with_ticker_names
from kgot.memory.writes import TypeUpkeep
from kgot.persistence import ClosedFacts, CommitConflictError, FactAsRead, fact_id

if TYPE_CHECKING:
    import networkx as nx

    from kgot.persistence import EntitySession, FactKey, TypeCatalog, UpkeepSettings

__all__ = [
    "PROMOTED_CONFIDENCE",
    "PROMOTE_SOURCES",
    "UPKEEP_STEP",
    "UpkeepChange",
    "UpkeepReport",
    "parse_now",
    "run_upkeep",
]

UPKEEP_STEP = "memory:upkeep"
PROMOTE_SOURCES = 3  # distinct sources that make a fact well established
PROMOTED_CONFIDENCE = 0.9  # the confidence a well-established fact is raised to
ACTIONS = ("expired", "pruned", "promoted", "merged")
LEFT = "left"  # a fact the pass would have closed or merged, re-stated while the pass ran
_NOW_FORMAT = "an ISO 8601 date or date-time, e.g. 2026-03-01 or 2026-03-01T12:00:00Z"


@dataclass(frozen=True)
class UpkeepChange:
    """One thing the pass did (or, in a dry run, would do) to one fact.

    Attributes:
        action: ``expired``, ``pruned``, ``promoted`` or ``merged`` (counted); ``left`` (a
            fact the pass would have closed or merged, or an edge that would have closed with
            its node, that another writer re-stated while the pass ran: still current;
            counted apart); or ``skipped`` (a promotion or merge the fact's type no longer
            allows, or a close another writer made first; not counted).
        key: the fact's key (``("node", id)`` or ``("edge", source, target, key)``).
        what: the fact in words (``node 'x' (Company 'Apple Inc.')``).
        why: the figures behind the decision.
    """

    action: str
    key: FactKey
    what: str
    why: str

    def line(self) -> str:
        return f"{self.action} {self.what}: {self.why}"

    @property
    def fact(self) -> str:
        """The fact's id as search and history name it: a node id or
        ``source -[key]-> target``."""
        return fact_id(self.key)

    def to_json(self) -> dict[str, str]:
        return {
            "action": self.action,
            "fact": self.fact,
            "kind": self.key[0],
            "what": self.what,
            "why": self.why,
        }


@dataclass(frozen=True)
class UpkeepReport:
    """What an upkeep pass did: counts per action and one :class:`UpkeepChange` per fact.

    ``expired`` and ``pruned`` count closed facts, nodes and edges (a node's edges closed with
    it included); ``promoted`` counts facts raised; ``merged`` counts merged-away nodes;
    ``left`` counts facts (nodes and edges) left current because they were re-stated while the
    pass ran.
    """

    entity: str
    now: datetime
    dry_run: bool
    version_before: int
    version_after: int
    changes: tuple[UpkeepChange, ...] = ()

    def count(self, action: str) -> int:
        return sum(1 for change in self.changes if change.action == action)

    @property
    def expired(self) -> int:
        return self.count("expired")

    @property
    def pruned(self) -> int:
        return self.count("pruned")

    @property
    def promoted(self) -> int:
        return self.count("promoted")

    @property
    def merged(self) -> int:
        return self.count("merged")

    @property
    def left(self) -> int:
        return self.count(LEFT)

    def to_json(self, changes: bool = False) -> dict[str, Any]:
        """``{"expired": n, "pruned": n, "promoted": n, "merged": n}``, and ``"left": n`` when
        facts were left because they were re-stated during the pass (only then: a pass no
        writer raced prints the four keys it always did); ``changes``: also ``"changes"``, one
        object per fact (:meth:`UpkeepChange.to_json`), in the order the pass decided them."""
        counts: dict[str, Any] = {action: self.count(action) for action in ACTIONS}
        if self.left:
            counts[LEFT] = self.left
        if changes:
            counts["changes"] = [change.to_json() for change in self.changes]
        return counts

    def counter_lines(self) -> list[str]:
        """One line per counter (``left`` only when there are some)."""
        out = [f"{action}: {self.count(action)}" for action in ACTIONS]
        if self.left:
            out.append(f"{LEFT}: {self.left} (re-stated during the pass)")
        return out

    def lines(self, limit: int | None = None) -> list[str]:
        """The counter lines, then one line per change (the first ``limit`` of them)."""
        out = self.counter_lines()
        shown = self.changes if limit is None else self.changes[:limit]
        out += [f"  {change.line()}" for change in shown]
        if len(shown) < len(self.changes):
            out.append(f"  … and {len(self.changes) - len(shown)} more")
        return out


def parse_now(text: str) -> datetime:
    """``--now`` as an aware UTC datetime: an ISO 8601 date (midnight UTC) or date-time (no
    zone means UTC).

    Raises:
        UsageError: anything else.
    """
    parsed = parse_instant(text)
    if parsed is None:
        raise UsageError(f"--now must be {_NOW_FORMAT}; got {text!r}")
    return parsed.astimezone(UTC)


def run_upkeep(
    session: EntitySession, *, now: datetime | None = None, dry_run: bool = False
) -> UpkeepReport:
    """One upkeep pass over ``session``'s entity (module docstring); ``dry_run`` decides the
    same and writes nothing.

    A fact another writer re-stated while the pass ran is not closed nor merged: it is
    reported as ``left`` (module docstring).

    Raises:
        EntityNotFoundError: the entity was deleted.
        CommitConflictError: another writer changed a fact the pass was promoting while it ran
            (the closes before it stay written; run the pass again).
    """
    moment = _as_utc(now) if now is not None else datetime.now(UTC)
    # Tracking the graph (as Memory.resolve(apply=True) does) lets the merges after the
    # promotion commit count it as the pass's own, and other writers' changes as conflicts.
    graph = session.load_graph(include_meta=True, track=not dry_run)
    version = int(graph.graph["kgot_version"])
    types = _Types(session.type_catalog())

    expired = _Closes("expired")
    _lapsed(session, graph, moment, expired)
    _expire(graph, types, moment, expired)
    pruned = _Closes("pruned")
    _prune(graph, types, moment, session, pruned)
    promoted, promotion, skipped = _promote(graph, session, version)
    merges, merge_changes = _merge(graph, session, version)

    if dry_run:
        changes = (*expired.changes, *pruned.changes, *promoted, *skipped, *merge_changes)
        return UpkeepReport(session.entity, moment, dry_run, version, version, changes)

    from kgot.persistence import Provenance

    provenance = Provenance(run_id="", step=UPKEEP_STEP)
    closes: list[UpkeepChange] = []
    for closing in (expired, pruned):
        if closing.changes:
            done = session.close_facts_as_read(closing.facts, closing.action, provenance)
            closes += closing.settled(done)
    if not promotion.is_empty:
        session.commit(promotion, provenance)
    left_aliases: dict[str, str] = {}
    for merge, properties in merges:
        try:
            session.merge_nodes(
                merge.canonical, list(merge.aliases), provenance, properties=properties
            )
        except CommitConflictError:
            # Another writer changed one of the nodes since the read (merge_nodes checks the
            # rows against the view the pass read): the merge was decided on what is no
            # longer there, so it is left for the next pass; the other merges go ahead.
            left_aliases.update(dict.fromkeys(merge.aliases, merge.canonical))
    merge_changes = [_merge_left(change, left_aliases) for change in merge_changes]
    changes = (*closes, *promoted, *skipped, *merge_changes)
    after = _newest_version(session, version)
    return UpkeepReport(session.entity, moment, dry_run, version, after, changes)


# --------------------------------------------------------------------------------------------
# The steps: each decides on the working graph and removes (or updates) what it closed.


def _lapsed(session: EntitySession, graph: nx.MultiDiGraph, now: datetime, closes: _Closes) -> None:
    """Facts whose own ``_expires_at`` passed before the pass: reads (and so ``graph``) no
    longer show them, but they are still current rows until the pass closes them."""
    # Each closes only while its row is still lapsed: a fact written again since gets a new
    # row that is not. An edge listed only because its node lapsed fails that check and so
    # closes with its node, or stays when the node was written again.
    as_read = FactAsRead(lapsed_at=now)
    lapsed = session.lapsed_facts(now)
    nodes = {key[1] for key, _ in lapsed if key[0] == "node" and not graph.has_node(key[1])}
    for key, expires_at in lapsed:
        if key[0] == "node" and graph.has_node(key[1]):
            continue  # visible: _expire decides it
        if key[0] == "edge" and graph.has_edge(key[1], key[2], key[3]):
            continue
        what = f"node {key[1]!r}" if key[0] == "node" else f"edge {key[1]!r} -> {key[2]!r}"
        closes.add(UpkeepChange("expired", key, what, f"hidden since {expires_at}"), as_read)
        end = next((end for end in key[1:3] if end in nodes), None) if key[0] == "edge" else None
        if end is not None:
            closes.hanging[key] = end


def _expire(graph: nx.MultiDiGraph, types: _Types, now: datetime, closes: _Closes) -> None:
    for node_id, data in list(graph.nodes(data=True)):
        why = _expiry(data, types.settings("node", data.get("label")), now)
        if why is not None:
            _close_node(graph, node_id, why, closes, _as_read(data))
    for source, target, key, data in list(graph.edges(keys=True, data=True)):
        why = _expiry(data, types.settings("edge", data.get("relationship")), now)
        if why is not None:
            _close_edge(graph, (source, target, key), why, closes, _as_read(data))


def _expiry(data: Mapping[str, Any], settings: UpkeepSettings | None, now: datetime) -> str | None:
    """Why the fact has expired at ``now``, or ``None``."""
    expires_at = parse_instant(data.get("_expires_at"))
    if expires_at is not None and expires_at <= now:
        return f"its _expires_at {data['_expires_at']} is past"
    ttl = settings.ttl_days if settings is not None else None
    if ttl is None:
        return None
    written = [parse_instant(data.get(name)) for name in _WRITTEN]
    last = max((w for w in written if w is not None), default=None)
    if last is None:
        return None
    idle = (now - last).total_seconds() / SECONDS_PER_DAY
    if idle <= ttl:
        return None
    return f"last written {_age(idle)} ago, time to live {_setting(ttl)}"


_WRITTEN = ("_updated_at", "_reinforced_at", "_created_at")


def _prune(
    graph: nx.MultiDiGraph, types: _Types, now: datetime, session: EntitySession, closes: _Closes
) -> None:
    facts: list[tuple[FactKey, Mapping[str, Any], UpkeepSettings, Mapping[str, Any] | None]] = []
    for node_id, data in graph.nodes(data=True):
        settings, schema = types.decaying("node", data.get("label"))
        if settings is not None:
            facts.append((("node", node_id), data, settings, schema))
    for source, target, key, data in graph.edges(keys=True, data=True):
        settings, schema = types.decaying("edge", data.get("relationship"))
        if settings is not None:
            facts.append((("edge", source, target, key), data, settings, schema))
    if not facts:
        return
    use = session.fact_use([fact_key for fact_key, *_ in facts])
    weak: list[tuple[FactKey, str, FactAsRead]] = []
    for fact_key, data, settings, schema in facts:
        fresh, age = fact_freshness(
            data,
            now=now,
            half_life_days=settings.half_life_days,
            temporal=temporal_properties(schema),
        )
        strength = use[fact_key].strength if fact_key in use else 0.0
        confidence = _confidence(data)
        weight = confidence * retention(fresh, strength)
        if weight < PRUNE_BELOW:
            weak.append(
                (
                    fact_key,
                    f"weight {weight:.4f} < {PRUNE_BELOW} (confidence {confidence:g}, age "
                    f"{_age(age or 0.0)}, half-life {_setting(settings.half_life_days or 0)}, "
                    f"strength {strength:g})",
                    # The weight also rests on the strength read: a use since saves the fact.
                    _as_read(data, strength=strength),
                )
            )
    # Nodes first: a weak node's edges close with it, whatever their own weight.
    for fact_key, why, as_read in sorted(weak, key=lambda item: item[0][0] != "node"):
        if fact_key[0] == "node":
            if fact_key[1] in graph:
                _close_node(graph, fact_key[1], why, closes, as_read)
        elif graph.has_edge(fact_key[1], fact_key[2], fact_key[3]):
            _close_edge(graph, (fact_key[1], fact_key[2], fact_key[3]), why, closes, as_read)


def _promote(
    graph: nx.MultiDiGraph, session: EntitySession, version: int
) -> tuple[list[UpkeepChange], Changeset, list[UpkeepChange]]:
    """The promotions, the metadata-only changeset that writes them, and the skipped ones."""
    nodes: dict[FactKey, Node] = {}
    edges: dict[FactKey, Edge] = {}
    reasons: dict[FactKey, tuple[str, str]] = {}
    for node_id, data in graph.nodes(data=True):
        if _promotable(data):
            node = node_from_graph(node_id, data)
            properties = {**node.properties, "_confidence": PROMOTED_CONFIDENCE}
            nodes[("node", node_id)] = Node(node_id, node.label, properties)
            reasons[("node", node_id)] = (_describe_node(node_id, data), _promotion_why(data))
    for source, target, key, data in graph.edges(keys=True, data=True):
        if _promotable(data):
            plain = {k: v for k, v in data.items() if not k.startswith("_") and k != "relationship"}
            plain["_confidence"] = PROMOTED_CONFIDENCE
            edge = Edge(source, target, str(data.get("relationship", "")), key, plain)
            edges[("edge", source, target, key)] = edge
            reasons[("edge", source, target, key)] = (
                _describe_edge(source, target, key, data),
                _promotion_why(data),
            )
    if not reasons:
        return [], Changeset(), []

    def changeset(keys: Iterable[FactKey]) -> Changeset:
        wanted = list(keys)
        return Changeset(
            changed_nodes=tuple(nodes[k] for k in wanted if k in nodes),
            changed_edges=tuple(edges[k] for k in wanted if k in edges),
        )

    # A fact whose stored properties its type no longer accepts cannot get a new version:
    # find it before anything is written (one check; one per fact only when that fails).
    problems: dict[FactKey, str] = {}
    if session.check(changeset(reasons), base=version):
        for fact_key in reasons:
            found = session.check(changeset([fact_key]), base=version)
            if found:
                problems[fact_key] = found[0]
    promoted, skipped = [], []
    for fact_key, (what, why) in reasons.items():
        if fact_key in problems:
            skipped.append(
                UpkeepChange("skipped", fact_key, what, f"not promoted: {problems[fact_key]}")
            )
            continue
        promoted.append(UpkeepChange("promoted", fact_key, what, why))
        _set_confidence(graph, fact_key, PROMOTED_CONFIDENCE)
    return promoted, changeset(k for k in reasons if k not in problems), skipped


def _promotable(data: Mapping[str, Any]) -> bool:
    sources = data.get("_corroborations") or 0
    return bool(sources >= PROMOTE_SOURCES and _confidence(data) < PROMOTED_CONFIDENCE)


def _promotion_why(data: Mapping[str, Any]) -> str:
    return (
        f"{data.get('_corroborations')} distinct sources, confidence "
        f"{_confidence(data):g} -> {PROMOTED_CONFIDENCE:g}"
    )


def _merge(
    graph: nx.MultiDiGraph, session: EntitySession, version: int
) -> tuple[list[tuple[Merge, dict[str, Any]]], list[UpkeepChange]]:
    """The merges among the nodes left (with the canonical node's merged properties) and one
    change per merged-away node."""
    upkeep = TypeUpkeep(session.type_catalog())
    by_id = {node_id: node_from_graph(node_id, data) for node_id, data in graph.nodes(data=True)}
    labels = {node.label for node in by_id.values()}
    resolution = resolve_all(
        with_ticker_names(by_id.values(), ticker_names(graph)),
        upkeep.identity_by_type(labels),
        schemas_by_type=upkeep.schemas_by_type(labels),
        hints_by_type=upkeep.hints_by_type(labels),
        evidence=merge_evidence(graph),
        created_at={node_id: data.get("_created_at") for node_id, data in graph.nodes(data=True)},
    )
    merges: list[tuple[Merge, dict[str, Any]]] = []
    changes: list[UpkeepChange] = []
    for merge in resolution.merges:
        properties = merged_properties(
            by_id[merge.canonical],
            [by_id[alias] for alias in merge.aliases],
            aliases_allowed=upkeep.allows_aliases(merge.type),
        )
        canonical = Node(merge.canonical, merge.type, properties)
        problems = session.check(Changeset(changed_nodes=(canonical,)), base=version)
        for alias in merge.aliases:
            what = _describe_node(alias, graph.nodes[alias])
            if problems:
                why = f"not merged into {merge.canonical!r}: {problems[0]}"
                changes.append(UpkeepChange("skipped", ("node", alias), what, why))
            else:
                why = f"into {merge.canonical!r} ({merge.reason}, score {merge.score:g})"
                changes.append(UpkeepChange("merged", ("node", alias), what, why))
        if not problems:
            merges.append((merge, properties))
    return merges, changes


# --------------------------------------------------------------------------------------------
# Helpers


class _Types:
    """A type catalog's upkeep settings and schemas, by kind and name."""

    def __init__(self, catalog: TypeCatalog) -> None:
        self.catalog = catalog

    def settings(self, kind: str, name: Any) -> UpkeepSettings | None:
        type_def = self.catalog.get("node" if kind == "node" else "edge", str(name))
        return type_def.upkeep if type_def is not None else None

    def decaying(
        self, kind: str, name: Any
    ) -> tuple[UpkeepSettings | None, Mapping[str, Any] | None]:
        """The settings and schema of a type whose facts decay; ``(None, None)`` for an
        evergreen or unknown type."""
        type_def = self.catalog.get("node" if kind == "node" else "edge", str(name))
        if type_def is None or type_def.upkeep.evergreen:
            return None, None
        return type_def.upkeep, type_def.spec.properties


@dataclass
class _Closes:
    """What one step (expire or prune) decided to close: the report's changes, the facts it
    closes on their own with their rows as read, and the edges that close only with a node.

    Edges of a closed node are not asked for on their own: were the node re-stated meanwhile
    and left current, its edges must stay with it.
    """

    action: str
    changes: list[UpkeepChange] = field(default_factory=list)
    facts: dict[FactKey, FactAsRead] = field(default_factory=dict)
    hanging: dict[FactKey, str] = field(default_factory=dict)  # edge -> the node it closes with

    def add(self, change: UpkeepChange, as_read: FactAsRead) -> None:
        self.changes.append(change)
        self.facts[change.key] = as_read

    def settled(self, done: ClosedFacts) -> list[UpkeepChange]:
        """The changes as the store made them: what it left or found closed already is no
        longer reported as closed, and edges written during the pass that closed with their
        node are added."""
        out: list[UpkeepChange] = []
        for change in self.changes:
            key = change.key
            node = self.hanging.get(key)
            if key in done.closed:
                out.append(change)
            elif node is not None and ("node", node) in done.left:
                why = f"its node {node!r} was re-stated during the pass: not {self.action}"
                out.append(_with_action(change, LEFT, why))
            elif key in done.left:
                why = f"{done.left[key]} during the pass: not {self.action}"
                out.append(_with_action(change, LEFT, why))
            else:
                why = f"not {self.action}: another writer closed it during the pass"
                out.append(_with_action(change, "skipped", why))
        reported = {change.key for change in self.changes}
        for key, node in done.closed.items():
            if key not in reported:
                what = f"edge {key[1]!r} -> {key[2]!r} key {key[-1]!r}"
                why = f"closed with node {node!r} (written during the pass)"
                out.append(UpkeepChange(self.action, key, what, why))
        return out


def _with_action(change: UpkeepChange, action: str, why: str) -> UpkeepChange:
    return UpkeepChange(action, change.key, change.what, why)


def _merge_left(change: UpkeepChange, left: Mapping[str, str]) -> UpkeepChange:
    """``change`` as reported after the merges: an alias of a merge that was refused because
    another writer changed a node meanwhile is left."""
    if change.action != "merged" or change.key[1] not in left:
        return change
    why = f"not merged into {left[change.key[1]]!r}: a node was re-stated during the pass"
    return _with_action(change, LEFT, why)


def _as_read(data: Mapping[str, Any], strength: float | None = None) -> FactAsRead:
    """A fact's row as ``load_graph(include_meta=True)`` showed it (``_version`` is the row's
    ``valid_from_version``; an in-place re-statement moves ``_reinforced_at``)."""
    return FactAsRead(
        version=int(data["_version"]),
        reinforced_at=parse_instant(data.get("_reinforced_at")),
        corroborations=int(data.get("_corroborations") or 1),
        strength=strength,
    )


def _close_node(
    graph: nx.MultiDiGraph, node_id: str, why: str, closes: _Closes, as_read: FactAsRead
) -> None:
    """Close a node and its current edges (as the store will) in the working graph."""
    data = graph.nodes[node_id]
    change = UpkeepChange(closes.action, ("node", node_id), _describe_node(node_id, data), why)
    closes.add(change, as_read)
    incident = [*graph.out_edges(node_id, keys=True, data=True)]
    incident += [e for e in graph.in_edges(node_id, keys=True, data=True) if e[0] != node_id]
    for source, target, key, edge_data in incident:
        edge_key = ("edge", source, target, key)
        closes.changes.append(
            UpkeepChange(
                closes.action,
                edge_key,
                _describe_edge(source, target, key, edge_data),
                f"closed with node {node_id!r}",
            )
        )
        closes.hanging[edge_key] = node_id
    graph.remove_node(node_id)


def _close_edge(
    graph: nx.MultiDiGraph,
    ident: tuple[str, str, str],
    why: str,
    closes: _Closes,
    as_read: FactAsRead,
) -> None:
    source, target, key = ident
    data = graph.edges[source, target, key]
    what = _describe_edge(source, target, key, data)
    closes.add(UpkeepChange(closes.action, ("edge", *ident), what, why), as_read)
    graph.remove_edge(source, target, key)


def _set_confidence(graph: nx.MultiDiGraph, fact_key: Sequence[str], value: float) -> None:
    if fact_key[0] == "node":
        graph.nodes[fact_key[1]]["_confidence"] = value
    else:
        graph.edges[fact_key[1], fact_key[2], fact_key[3]]["_confidence"] = value


def _describe_node(node_id: str, data: Mapping[str, Any]) -> str:
    name = data.get("name")
    named = f" {name!r}" if isinstance(name, str) and name else ""
    return f"node {node_id!r} ({data.get('label')}{named})"


def _describe_edge(source: str, target: str, key: str, data: Mapping[str, Any]) -> str:
    relationship = data.get("relationship")
    keyed = f" key {key!r}" if key != relationship else ""
    return f"edge {source!r} -[{relationship}]-> {target!r}{keyed}"


def _confidence(data: Mapping[str, Any]) -> float:
    value = data.get("_confidence")
    if isinstance(value, int | float) and not math.isnan(value):
        return float(value)
    return 1.0  # the store's own default for a fact written without one


def _age(days: float) -> str:
    return f"{days:.1f} d"


def _setting(days: float) -> str:
    return f"{days:g} d"


def _newest_version(session: EntitySession, default: int) -> int:
    newest = session.commits(limit=1)
    return int(newest[0]["version"]) if newest else default


def _as_utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
