"""The memory of one entity: ``open_memory(store, entity)`` and what it offers (issue 15).

:class:`Memory` works on one entity's session only; no other entity's rows are read or written.

* :meth:`Memory.resolve` runs entity resolution (:mod:`kgot.memory.resolution`) over the
  entity's current nodes, type by type, with each type's ``identity`` setting, each node's
  evidence (its current edges plus its corroborations) and its creation time. Without
  ``apply`` nothing is written, not even the curation queue. With ``apply`` each merge is one
  ``merge_nodes`` commit (provenance step ``memory:resolve``; properties unioned, the aliases'
  names joining ``aliases``) and the suggestions are filed in the queue (a suggestion a person
  rejected before is not filed again).
* :meth:`Memory.suggestions`, :meth:`Memory.accept`, :meth:`Memory.reject`: the curation queue.
  Accepting a merge suggestion merges the two nodes (the one with more evidence stays);
  accepting a contradiction suggestion lets the newer value supersede the kept one.
* :meth:`Memory.forget`: retire a node, a property of a node or an edge on a person's word,
  history kept (:mod:`kgot.memory.forget`).
* :meth:`Memory.prepare` / :meth:`Memory.commit`: writes through the write-time hook
  (:func:`kgot.memory.writes.prepare_changeset`).
* Embeddings (optional, :mod:`kgot.memory.embeddings`): with an embedder (``open_memory(...,
  settings=...)`` or ``embedder=``) a commit embeds the nodes whose text changed, after the
  commit and never failing it, and :meth:`Memory.resolve` takes a cosine above
  ``embedding_similarity`` as extra evidence for a similar-spelling pair. Without one nothing
  is embedded.

Bad input (an unknown suggestion id, one of another entity, one already decided) raises
:class:`kgot.errors.UsageError` before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory.merge_groups import merge_evidence, merged_properties, node_from_graph
from kgot.memory.resolution import Resolution, Suggestion, resolve_all
from kgot.memory.tickers import ticker_names, with_ticker_names
from kgot.memory.upkeep import run_upkeep
from kgot.memory.writes import PreparedChangeset, TypeUpkeep, prepare_changeset

if TYPE_CHECKING:
    from datetime import datetime

    from langchain_core.language_models import BaseChatModel

    from kgot.config import MemorySettings
    from kgot.llm import LLMClient
    from kgot.memory.embeddings import EmbedReport, NodeEmbedder
    from kgot.memory.forget import Forgotten
    from kgot.memory.resolution import PairExplanation
    from kgot.memory.search import SearchHit
    from kgot.memory.upkeep import UpkeepReport
    from kgot.memory.verify import Verdict
    from kgot.memory.write_outcome import WriteOutcome
    from kgot.persistence import EntitySession, FactUse, Provenance, Store
    from kgot.persistence import Suggestion as StoredSuggestion

__all__ = ["Memory", "QueuedResolution", "open_memory"]

RESOLVE_STEP = "memory:resolve"
ACCEPT_STEP = "memory:accept"


def open_memory(
    store: Store,
    entity: str,
    *,
    settings: MemorySettings | None = None,
    embedder: NodeEmbedder | None = None,
) -> Memory:
    """The memory of ``entity`` in ``store``; embeddings from ``embedder``, else from
    ``settings`` (``[memory] embeddings`` / ``embeddings_base_url``), else off.

    Raises:
        EntityNotFoundError: no entity has that name.
        ConfigError: ``settings`` describe embeddings that cannot be set up.
    """
    if embedder is None and settings is not None:
        from kgot.memory.embeddings import embedder_from_settings

        embedder = embedder_from_settings(settings)
    return Memory(store.session(entity), embedder=embedder)


@dataclass(frozen=True)
class QueuedResolution(Resolution):
    """A :class:`Resolution` whose suggestions carry their curation-queue ids (``None`` for a
    suggestion not filed: a dry run shows the ids of suggestions already open)."""

    suggestion_ids: tuple[int | None, ...] = ()
    applied: bool = False

    def to_json(self, suggestion_ids: Sequence[int | None] | None = None) -> dict[str, Any]:
        ids = suggestion_ids if suggestion_ids is not None else self.suggestion_ids
        return {
            "merges": [merge.to_json() for merge in self.merges],
            "suggestions": [
                {"id": suggestion_id, **suggestion.to_json()}
                for suggestion, suggestion_id in zip(self.suggestions, ids, strict=True)
            ],
        }


class Memory:
    """Upkeep of one entity's graph (module docstring)."""

    def __init__(self, session: EntitySession, *, embedder: NodeEmbedder | None = None) -> None:
        self.session = session
        self.embedder = embedder

    @property
    def entity(self) -> str:
        return self.session.entity

    # ---------------------------------------------------------------------------- resolution

    def resolve(self, apply: bool = False) -> QueuedResolution:
        """Merges and suggestions among the entity's current nodes; ``apply`` commits the
        merges and files the suggestions (module docstring)."""
        graph = self.session.load_graph(include_meta=True, track=apply)
        upkeep = TypeUpkeep(self.session.type_catalog())
        nodes = [node_from_graph(node_id, data) for node_id, data in graph.nodes(data=True)]
        evidence = merge_evidence(graph)
        created_at = {node_id: data.get("_created_at") for node_id, data in graph.nodes(data=True)}
        labels = {node.label for node in nodes}
        resolution = resolve_all(
            with_ticker_names(nodes, ticker_names(graph)),
            upkeep.identity_by_type(labels),
            schemas_by_type=upkeep.schemas_by_type(labels),
            hints_by_type=upkeep.hints_by_type(labels),
            evidence=evidence,
            created_at=created_at,
            **self._embedding_evidence(store=apply),
        )
        if not apply:
            open_ids = self._open_merge_ids()
            ids = tuple(open_ids.get(_pair_key(s.nodes, s.type)) for s in resolution.suggestions)
            return QueuedResolution(resolution.merges, resolution.suggestions, ids, False)
        from kgot.persistence import Provenance

        by_id = {node.id: node for node in nodes}
        for merge in resolution.merges:
            properties = merged_properties(
                by_id[merge.canonical],
                [by_id[alias] for alias in merge.aliases],
                aliases_allowed=upkeep.allows_aliases(merge.type),
            )
            self.session.merge_nodes(
                merge.canonical,
                list(merge.aliases),
                Provenance(run_id="", step=RESOLVE_STEP),
                properties=properties,
            )
        open_ids, rejected = self._open_merge_ids(), self._rejected_merges()
        ids = tuple(self._file(s, open_ids, rejected) for s in resolution.suggestions)
        return QueuedResolution(resolution.merges, resolution.suggestions, ids, True)

    def explain(self, a: str, b: str) -> PairExplanation:
        """Why resolution would merge nodes ``a`` and ``b``, suggest them or keep them apart:
        the name rules' verdict, the identities, and each shared field's comparison and
        weight under the model of the entity's nodes of their type
        (:func:`kgot.memory.resolution.explain_pair`). Merged-away ids lead to their node.

        Raises:
            UsageError: no such current node, the two are one node, or their types differ.
        """
        from kgot.memory.resolution import explain_pair

        graph = self.session.load_graph(include_meta=True, track=False)
        ids = [self.session.canonical_id(node_id) or node_id for node_id in (a, b)]
        for given, node_id in zip((a, b), ids, strict=True):
            if node_id not in graph:
                raise UsageError(
                    f"no current node {given!r} in entity {self.entity!r}; node ids come from "
                    f"`kgot memory search --entity {self.entity} …`"
                )
        if ids[0] == ids[1]:
            raise UsageError(f"{a!r} and {b!r} are one node already ({ids[0]!r})")
        label = str(graph.nodes[ids[0]].get("label", ""))
        upkeep = TypeUpkeep(self.session.type_catalog())
        nodes = [
            node_from_graph(node_id, data)
            for node_id, data in graph.nodes(data=True)
            if data.get("label") == label or node_id == ids[1]
        ]
        try:
            return explain_pair(
                nodes,
                ids[0],
                ids[1],
                upkeep.identity(label),
                schema=upkeep.schemas_by_type([label]).get(label),
                hints=upkeep.hints_by_type([label]).get(label),
            )
        except ValueError as refused:
            raise UsageError(str(refused)) from None

    def _embedding_evidence(self, *, store: bool) -> dict[str, Any]:
        """``resolve_all`` options that add the embedder's cosines (none when off); vectors
        made for a dry run are not stored."""
        if self.embedder is None:
            return {}
        import dataclasses

        from kgot.memory.embeddings import vector_lookup
        from kgot.memory.resolution import DEFAULT_THRESHOLDS

        return {
            "vector_lookup": vector_lookup(self.session, self.embedder, store=store),
            "thresholds": dataclasses.replace(
                DEFAULT_THRESHOLDS, embedding_cosine=self.embedder.similarity
            ),
        }

    def _file(
        self,
        suggestion: Suggestion,
        open_ids: Mapping[tuple[str, ...], int],
        rejected: set[tuple[str, ...]],
    ) -> int | None:
        pair = _pair_key(suggestion.nodes, suggestion.type)
        if pair in rejected:
            return None  # a person said no before
        if pair in open_ids:
            return open_ids[pair]  # queued before (maybe for another reason)
        payload: dict[str, Any] = {
            "nodes": list(suggestion.nodes),
            "type": suggestion.type,
            "reason": suggestion.reason,
        }
        # The field model's evidence goes with it, for the person (or model) who decides.
        row = suggestion.to_json()
        payload.update({k: row[k] for k in ("weight", "evidence") if k in row})
        return int(self.session.suggest("merge", payload, suggestion.score))

    def _open_merge_ids(self) -> dict[tuple[str, ...], int]:
        found: dict[tuple[str, ...], int] = {}
        for row in self.session.suggestions("open"):
            key = _suggestion_pair(row)
            if key is not None:
                found.setdefault(key, row.id)
        return found

    def _rejected_merges(self) -> set[tuple[str, ...]]:
        pairs = (_suggestion_pair(row) for row in self.session.suggestions("rejected"))
        return {pair for pair in pairs if pair is not None}

    # ---------------------------------------------------------------------------- the queue

    def suggestions(self, status: str = "open") -> list[StoredSuggestion]:
        """The entity's suggestions with ``status`` (``open``, ``accepted``, ``rejected``)."""
        return list(self.session.suggestions(status))

    def _open_suggestion(self, suggestion_id: int) -> StoredSuggestion:
        """The open suggestion ``suggestion_id`` of this entity; another entity's id reads
        like an unknown one (the store raises ``SuggestionNotFoundError``)."""
        found = self.session.suggestion(suggestion_id)
        if found.status != "open":
            raise UsageError(
                f"suggestion {suggestion_id} in entity {self.entity!r} was already "
                f"{found.status}; only open suggestions are decided"
            )
        return found

    def accept(
        self,
        suggestion_id: int,
        *,
        provenance: Provenance | None = None,
        decision: Mapping[str, Any] | None = None,
    ) -> str:
        """Carry out an open suggestion; a line saying what was done. ``provenance``: the
        commit's (default: a person, step ``memory:accept``); ``decision``: who decided and
        why, kept with the suggestion (default ``{"by": "person"}``).

        Raises:
            UsageError: no open suggestion with that id in this entity, or its nodes are no
                longer in the graph; nothing was written.
        """
        row = self._open_suggestion(suggestion_id)
        payload = dict(row.payload)
        if provenance is None:
            from kgot.persistence import Provenance

            provenance = Provenance(run_id="", step=ACCEPT_STEP)
        decided = dict(decision) if decision is not None else {"by": "person"}
        if row.kind == "merge":
            done = self._accept_merge(suggestion_id, payload, provenance, decided)
        elif row.kind == "contradiction":
            done = self._accept_contradiction(suggestion_id, payload, provenance, decided)
        else:
            raise UsageError(f"suggestion {suggestion_id} has an unknown kind {row.kind!r}")
        # The write above marked the suggestion accepted in its own transaction (decides=):
        # a reject from another process in between refuses the write instead.
        return done

    def reject(self, suggestion_id: int, *, decision: Mapping[str, Any] | None = None) -> str:
        """Close an open suggestion without changing the graph. ``decision``: who decided and
        why, kept with the suggestion (default ``{"by": "person"}``)."""
        self._open_suggestion(suggestion_id)
        decided = dict(decision) if decision is not None else {"by": "person"}
        self.session.decide_suggestion(suggestion_id, False, decided)
        return f"rejected suggestion {suggestion_id}; the graph is unchanged"

    def _current(self, suggestion_id: int, node_id: str) -> str:
        found = self.session.canonical_id(node_id)
        if found is None:
            raise UsageError(
                f"suggestion {suggestion_id} names node {node_id!r}, which is no longer in "
                f"entity {self.entity!r}; reject it with: kgot memory reject --entity "
                f"{self.entity} {suggestion_id}"
            )
        return found

    def _accept_merge(
        self,
        suggestion_id: int,
        payload: Mapping[str, Any],
        provenance: Provenance,
        decision: Mapping[str, Any],
    ) -> str:

        ends = [self._current(suggestion_id, str(n)) for n in payload.get("nodes", ())]
        graph = self.session.load_graph(include_meta=True)
        ends = list(dict.fromkeys(ends))
        missing = [n for n in ends if n not in graph]
        if missing:
            raise UsageError(
                f"suggestion {suggestion_id} names node {missing[0]!r}, which is no longer in "
                f"entity {self.entity!r}; reject it instead"
            )
        if len(ends) < 2:
            self.session.decide_suggestion(suggestion_id, True, decision)
            return f"accepted suggestion {suggestion_id}: the nodes were already merged"
        evidence = merge_evidence(graph)
        ordered = sorted(
            ends,
            key=lambda n: (-evidence.get(n, 0.0), str(graph.nodes[n].get("_created_at")), n),
        )
        canonical, aliases = ordered[0], ordered[1:]
        nodes = {n: node_from_graph(n, graph.nodes[n]) for n in ordered}
        label = nodes[canonical].label
        upkeep = TypeUpkeep(self.session.type_catalog())
        if "weight" not in payload:
            # Names alone suggested it: different identities mean two things (the values were
            # set after the suggestion). A field-model suggestion weighed them already, so a
            # person who accepts it decides that one value was wrong (history keeps it).
            _refuse_identity_conflict(suggestion_id, self.entity, nodes, upkeep.identity(label))
        properties = merged_properties(
            nodes[canonical],
            [nodes[a] for a in aliases],
            aliases_allowed=upkeep.allows_aliases(label),
        )
        self.session.merge_nodes(
            canonical,
            aliases,
            provenance,
            properties=properties,
            decides=suggestion_id,
            decision=decision,
        )
        return f"accepted suggestion {suggestion_id}: merged {', '.join(aliases)} into {canonical}"

    def _accept_contradiction(
        self,
        suggestion_id: int,
        payload: Mapping[str, Any],
        provenance: Provenance,
        decision: Mapping[str, Any],
    ) -> str:

        graph = self.session.load_graph(include_meta=True)
        confidence = payload.get("new_confidence")
        meta = {"_confidence": float(confidence)} if confidence is not None else {}
        if payload.get("fact") == "node":
            node_id = self._current(suggestion_id, str(payload["node"]))
            if node_id not in graph:
                raise UsageError(
                    f"suggestion {suggestion_id} names node {node_id!r}, which is no longer in "
                    f"entity {self.entity!r}; reject it instead"
                )
            node = node_from_graph(node_id, graph.nodes[node_id])
            prop = str(payload["property"])
            if node.properties.get(prop) != payload.get("old"):
                # A later write replaced the value the suggestion weighed: taking the queued
                # one now would overwrite a newer fact nobody compared it with.
                raise UsageError(
                    f"suggestion {suggestion_id} is out of date: {node_id}.{prop} is now "
                    f"{node.properties.get(prop)!r}, not {payload.get('old')!r}; reject it "
                    f"with: kgot memory reject --entity {self.entity} {suggestion_id}"
                )
            properties = {**node.properties, prop: payload["new"], **meta}
            self.session.commit(
                Changeset(changed_nodes=(Node(node_id, node.label, properties),)),
                provenance,
                close_reasons={("node", node_id): "contradicted"},
                decides=suggestion_id,
                decision=decision,
            )
            return (
                f"accepted suggestion {suggestion_id}: {node_id}.{prop} is now "
                f"{payload['new']!r} (was {node.properties.get(prop)!r})"
            )
        source = self._current(suggestion_id, str(payload["source"]))
        new = dict(payload["new"])
        target = self._current(suggestion_id, str(new["target"]))
        old = dict(payload["old"])
        old_ident = (source, self._current(suggestion_id, str(old["target"])), str(old["key"]))
        relationship = str(payload["relationship"])
        edge = Edge(
            source,
            target,
            relationship,
            str(new.get("key") or relationship),
            {**dict(new.get("properties") or {}), **meta},
        )
        present = graph.has_edge(*old_ident)
        holders = sorted(
            other
            for _, other, key, data in graph.out_edges(source, keys=True, data=True)
            if data.get("relationship") == relationship and (source, other, key) != old_ident
        )
        if holders:
            # A later edge replaced the one the suggestion weighed: adding the queued one
            # would leave two current edges of a relationship that allows one.
            raise UsageError(
                f"suggestion {suggestion_id} is out of date: {source} -{relationship}-> is "
                f"now {', '.join(holders)}, not {old_ident[1]}; reject it with: kgot memory "
                f"reject --entity {self.entity} {suggestion_id}"
            )
        self.session.commit(
            Changeset(
                added_edges=(edge,),
                removed_edges=(old_ident,) if present else (),
            ),
            provenance,
            close_reasons={("edge", *old_ident): "contradicted"} if present else None,
            decides=suggestion_id,
            decision=decision,
        )
        return (
            f"accepted suggestion {suggestion_id}: {source} -{relationship}-> is now {target} "
            f"(was {old_ident[1]})"
        )

    # ---------------------------------------------------------------------------- upkeep

    def upkeep(self, now: datetime | None = None, dry_run: bool = False) -> UpkeepReport:
        """One upkeep pass: expire, prune, promote, merge (:mod:`kgot.memory.upkeep`); all
        clocks read ``now`` (default: the current time); ``dry_run`` writes nothing."""
        return run_upkeep(self.session, now=now, dry_run=dry_run)

    # ---------------------------------------------------------------------------- search

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        type: str | None = None,
        min_confidence: float | None = None,
        now: datetime | None = None,
    ) -> list[SearchHit]:
        """The entity's current facts best matching ``query``, ranked
        (:func:`kgot.memory.search.search`). Searching does not count as a use: call
        :meth:`used` with the hits the caller actually used."""
        from kgot.memory.search import search

        return search(
            self.session,
            query,
            limit=limit,
            type=type,
            min_confidence=min_confidence,
            now=now,
            embedder=self.embedder,
        )

    def used(self, facts: Iterable[SearchHit | str | Sequence[str]]) -> int:
        """Record that the facts (hits, ids as :meth:`feedback` takes them, or fact keys) went
        into an answer the caller used: +0.10 strength each, capped at 1. Returns how many
        current facts were counted (others are skipped)."""
        from kgot.memory.search import SearchHit, fact_key_for

        keys = [
            fact.key
            if isinstance(fact, SearchHit)
            else fact_key_for(self.session, fact)
            if isinstance(fact, str)
            else tuple(fact)
            for fact in facts
        ]
        return self.session.record_use(keys)

    def feedback(self, fact: str | Sequence[str], good: bool) -> FactUse:
        """Feedback on one current fact: ``good`` adds 0.20 to its strength (capped at 1),
        both are counted. ``fact``: a node id (a merged-away id leads to its node), an edge
        as search shows it (``source -[key]-> target``), or a fact key.

        Raises:
            UsageError: no such current fact in this entity.
        """
        from kgot.memory.search import fact_key_for

        key = fact_key_for(self.session, fact) if isinstance(fact, str) else tuple(fact)
        return self.session.feedback(key, good)

    def forget(
        self, fact: str | Sequence[str], *, property: str | None = None, by: str = "user"
    ) -> Forgotten:
        """Retire one current fact of this entity, history kept (closed as ``forgotten``):
        a node with its edges (``fact`` its id), one ``property`` of a node, or an edge
        (``source -[key]-> target``, or three words source, relationship, target). ``by``
        names who asked (the commit's run id). Search and reads no longer return it
        (:func:`kgot.memory.forget.forget`).

        Raises:
            UsageError: no such current fact in this entity; nothing was written.
        """
        from kgot.memory.forget import forget

        return forget(self.session, fact, property=property, by=by)

    # ---------------------------------------------------------------------------- writing

    def prepare(
        self, changeset: Changeset, *, confidence: float | None = None
    ) -> PreparedChangeset:
        """The write-time hook for ``changeset`` (:func:`kgot.memory.writes.prepare_changeset`)."""
        return prepare_changeset(self.session, changeset, confidence=confidence)

    def commit(self, changeset: Changeset, provenance: Provenance) -> WriteOutcome:
        """Commit ``changeset`` through the write-time hook (the one write pipeline,
        :mod:`kgot.memory.write_outcome`): what the hook and the commit did; its suggestions
        are filed and, with embeddings on, the nodes it wrote embedded."""
        from kgot.memory.write_outcome import commit_prepared

        prepared = self.prepare(changeset, confidence=provenance.confidence)
        return commit_prepared(self.session, prepared, provenance, embedder=self.embedder)

    def embed(self) -> EmbedReport:
        """Embed every current node whose vector is missing or stale (after embeddings were
        turned on, or an outage of the endpoint); nothing without an embedder.

        Raises:
            Exception: what the embedding endpoint raised (vectors stored before it stay).
        """
        from kgot.memory.embeddings import EmbedReport, embed_nodes

        if self.embedder is None:
            return EmbedReport()
        return embed_nodes(self.session, self.embedder)

    # ---------------------------------------------------------------------------- claims

    def verify_claim(
        self,
        subject: str,
        *,
        property: str | None = None,
        value: Any = None,
        relation: str | None = None,
        object: str | None = None,
        now: datetime | None = None,
    ) -> Verdict:
        """Check a structured claim against the entity's graph, without a model
        (:func:`kgot.memory.verify.verify_claim`)."""
        from kgot.memory.verify import verify_claim

        return verify_claim(
            self.session,
            subject,
            property=property,
            value=value,
            relation=relation,
            object=object,
            now=now,
        )

    def verify_text(
        self, text: str, model: LLMClient | BaseChatModel, *, now: datetime | None = None
    ) -> Verdict:
        """Have ``model`` extract the claim ``text`` makes, then check it
        (:func:`kgot.memory.verify.verify_text`; not from inside an event loop)."""
        from kgot.memory.verify import verify_text

        return verify_text(self.session, text, model, now=now)


# --------------------------------------------------------------------------------------------
# Helpers


def _refuse_identity_conflict(
    suggestion_id: int, entity: str, nodes: Mapping[str, Node], identity: Sequence[str]
) -> None:
    """Refuse a merge of nodes with different non-empty values of an identity property: they
    are two things (the suggestion was queued before the values were set), and the merge
    would silently drop the aliases' values from the current graph.

    Raises:
        UsageError: two of ``nodes`` differ on an identity property.
    """
    from kgot.memory.resolution import identity_value

    for prop in identity:
        holders: dict[str, str] = {}  # comparable value -> the first node holding it
        for node_id, node in nodes.items():
            value = identity_value(node.properties.get(prop))
            if value is not None:
                holders.setdefault(value, node_id)
        if len(holders) > 1:
            shown = ", ".join(
                f"{node_id} has {nodes[node_id].properties.get(prop)!r}"
                for node_id in holders.values()
            )
            raise UsageError(
                f"suggestion {suggestion_id} would merge nodes whose identity property "
                f"{prop!r} differs ({shown}), so they are different things; reject it with: "
                f"kgot memory reject --entity {entity} {suggestion_id}"
            )


def _pair_key(nodes: Sequence[str], label: str) -> tuple[str, ...]:
    return (*sorted(nodes), label)


def _suggestion_pair(row: StoredSuggestion) -> tuple[str, ...] | None:
    if row.kind != "merge":
        return None
    payload = row.payload
    nodes = payload.get("nodes")
    if not isinstance(nodes, list | tuple) or len(nodes) != 2:
        return None
    return _pair_key([str(n) for n in nodes], str(payload.get("type", "")))
