"""Checking a claim against an entity's graph (issue 15, section 5).

:func:`verify_claim` answers "does the graph say that?" for one structured claim, without a
model: ``subject`` has ``property`` = ``value``, or ``subject`` -``relation``-> ``object``.
:func:`verify_text` first has a model extract that structure from a sentence (one structured
call, plus the client's usual re-asks after invalid output), then runs the same check.

**The subject** is found by its id, by an id that was merged away (followed to its canonical
node), or by its names (``name`` and each of ``aliases``, compared with the entity resolution
rules of :mod:`kgot.memory.resolution`: case, punctuation, legal forms and word order do not
matter; a near-identical spelling counts). When two or more nodes answer to the subject the
check does not guess: the verdict is ``inconclusive`` and ``candidates`` lists them. When none
does, ``candidates`` lists nodes that only may be meant.

**Evidence.** A property claim looks at the subject's property of that name and at its edges of
the same name (``ceo`` may be a property or an edge); a relation claim looks at its edges of
that relationship and at a property of the same name. Names of properties and relationships
compare without case, spaces or hyphens (``CEO`` = ``ceo``, ``works for`` = ``works_for``).

* A current fact with the claimed value **supports** the claim. Values compare as what they
  are: strings folded like names (``Apple Inc.`` = ``apple``); numbers at the coarser of the two
  precisions (``190`` agrees with ``189.98``, ``3.2`` with ``3.24``; ``$1,200`` and ``12%`` are
  numbers); dates at the coarser precision (``2011`` agrees with ``2011-08-24``); a list holds a
  value when one of its items does. An edge's target matches the object by id, merged-away id
  or name.
* A current fact with another value **contradicts** it only when the property is one of its
  type's ``functional`` properties, or the relationship's edge type is ``functional``: a
  single-valued fact with another value rules the claimed one out. For any other property or
  relationship a different value is no contradiction (a company has many products).
* A value that held once but was replaced (or removed, or expired) is reported under
  ``superseded`` with the reason its fact closed and when, and a note says it held until then.
  It neither supports nor contradicts the claim: the verdict speaks of the current graph.

**Verdict and confidence.** Each fact weighs ``confidence × freshness`` (its stored confidence;
freshness from its type's half-life at ``now``, :mod:`kgot.memory.scoring`). The supporting
facts together give ``S = 1 − Π(1 − wᵢ)`` (the chance that at least one of them is right, were
they independent); the contradicting ones likewise ``C``.

* only supporting facts: ``corroborated``, confidence ``S``;
* only contradicting facts: ``contradicted``, confidence ``C``;
* both: ``mixed``, confidence ``min(S, C)`` (how surely the graph really holds both sides);
* neither, or an unknown or ambiguous subject: ``inconclusive``, confidence 0.

Only the one entity's session is read: another entity's facts never count. A check reads only
what the claim can be about, by index: the nodes its subject and object texts may name (found
through the store's search index: their words, the words run together, a word within one typo)
with their edges and neighbours, so its cost follows those nodes, not the entity's size. A
subject given as an acronym finds the nodes holding it as a word; one that only a name's
initials would match ("IBM" for "International Business Machines") is not offered as a
candidate.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kgot.errors import UsageError
from kgot.graph_model import Node

if TYPE_CHECKING:
    import networkx as nx
    from langchain_core.language_models import BaseChatModel

    from kgot.llm import LLMClient
    from kgot.memory.names import NormalName
    from kgot.memory.resolution import ResolutionIndex
    from kgot.persistence import EntitySession, TypeCatalog

__all__ = [
    "VERDICTS",
    "Claim",
    "ExtractedClaim",
    "Superseded",
    "Verdict",
    "averify_text",
    "edge_fact_id",
    "values_match",
    "verify_claim",
    "verify_text",
]

VERDICTS = ("corroborated", "contradicted", "mixed", "inconclusive")
EXTRACT_STEP = "verify_claim"  # the step name a scripted model keys its reply on
_VOCABULARY_CHARS = 4000  # how much of the entity's type vocabulary the extraction prompt shows


# --------------------------------------------------------------------------------------------
# The claim and the verdict


@dataclass(frozen=True)
class Claim:
    """One structured claim: ``subject`` has ``property`` = ``value``, or ``subject``
    -``relation``-> ``object``."""

    subject: str
    property: str | None = None
    value: Any = None
    relation: str | None = None
    object: str | None = None

    @classmethod
    def checked(
        cls,
        subject: str,
        property: str | None = None,
        value: Any = None,
        relation: str | None = None,
        object: str | None = None,
        *,
        spell: Callable[[str], str] = str,
    ) -> Claim:
        """The claim, or :class:`UsageError` naming what is missing or too much. ``spell``
        writes a part's name as the caller knows it: ``--property`` on the command line,
        ``property`` for the Python API and the MCP tool."""
        subject = subject.strip() if isinstance(subject, str) else ""
        if not subject:
            raise UsageError(
                f"the claim needs a subject: give {spell('subject')} (a node's id or name)"
            )
        property = _blank_to_none(property)
        relation = _blank_to_none(relation)
        object = _blank_to_none(object)
        if isinstance(value, str) and not value.strip():
            value = None
        as_property = f"{spell('property')} P {spell('value')} V"
        as_relation = f"{spell('relation')} R {spell('object')} O"
        if property is not None and relation is not None:
            raise UsageError(f"a claim is either {as_property} or {as_relation}, not both")
        if property is None and relation is None:
            raise UsageError(
                f"the claim needs {as_property} or {as_relation} (or a sentence to extract it from)"
            )
        if property is not None and value is None:
            raise UsageError(
                f"{spell('property')} {_cut(property)} needs {spell('value')} (the value claimed)"
            )
        if relation is not None and object is None:
            raise UsageError(
                f"{spell('relation')} {_cut(relation)} needs {spell('object')} "
                "(the node it points to)"
            )
        if property is None and value is not None:
            raise UsageError(
                f"{spell('value')} belongs to {spell('property')}; add {spell('property')} P"
            )
        if relation is None and object is not None:
            raise UsageError(
                f"{spell('object')} belongs to {spell('relation')}; add {spell('relation')} R"
            )
        return cls(subject, property, value, relation, object)

    def to_json(self) -> dict[str, Any]:
        if self.property is not None:
            return {"subject": self.subject, "property": self.property, "value": self.value}
        return {"subject": self.subject, "relation": self.relation, "object": self.object}

    def describe(self) -> str:
        if self.property is not None:
            return f"{self.subject}.{self.property} = {self.value!r}"
        return f"{self.subject} -{self.relation}-> {self.object}"


@dataclass(frozen=True)
class Superseded:
    """A fact that held the claimed value once and was closed (or expired) since."""

    id: str
    value: Any
    closed_reason: str | None
    superseded_at: str | None
    held_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "value": self.value,
            "closed_reason": self.closed_reason,
            "superseded_at": self.superseded_at,
            "held_from": self.held_from,
        }


@dataclass(frozen=True)
class Verdict:
    """What the graph says about a claim (module docstring).

    ``supporting`` and ``contradicting`` hold fact ids: a node's id, or an edge's
    ``source -[key]-> target`` (:func:`edge_fact_id`). ``subject_id`` is the node the subject
    resolved to (``None`` when unknown or ambiguous); ``candidates`` the nodes it may mean when
    it did not resolve to one. ``text`` is the sentence a free-text claim came from.
    """

    verdict: str
    claim: Claim | None
    supporting: tuple[str, ...] = ()
    contradicting: tuple[str, ...] = ()
    confidence: float = 0.0
    subject_id: str | None = None
    candidates: tuple[str, ...] = ()
    superseded: tuple[Superseded, ...] = ()
    notes: tuple[str, ...] = ()
    text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The issue's four keys first, then ``claim``, ``subject_id``, ``candidates``,
        ``superseded``, ``notes`` (and ``text`` for a free-text claim)."""
        data: dict[str, Any] = {
            "verdict": self.verdict,
            "supporting": list(self.supporting),
            "contradicting": list(self.contradicting),
            "confidence": self.confidence,
            "claim": self.claim.to_json() if self.claim is not None else None,
            "subject_id": self.subject_id,
            "candidates": list(self.candidates),
            "superseded": [s.to_json() for s in self.superseded],
            "notes": list(self.notes),
        }
        if self.text is not None:
            data["text"] = self.text
        return data


def edge_fact_id(source: str, target: str, key: str) -> str:
    """The id a verdict gives an edge fact (:func:`kgot.persistence.fact_id`)."""
    from kgot.persistence import edge_key, fact_id

    return fact_id(edge_key(source, target, key))


# --------------------------------------------------------------------------------------------
# Structured claims


def verify_claim(
    session: EntitySession,
    subject: str,
    *,
    property: str | None = None,
    value: Any = None,
    relation: str | None = None,
    object: str | None = None,
    now: datetime | None = None,
) -> Verdict:
    """Check one claim against ``session``'s entity (module docstring); no model is used.

    Args:
        session: the entity whose current graph is the evidence (only it is read).
        subject: a node's id, a merged-away id or a name.
        property, value: a property claim (both, or neither).
        relation, object: a relation claim (both, or neither); ``object`` is an id or a name.
        now: the moment freshness is computed at (default: now), for reproducible figures.

    Raises:
        UsageError: neither or both kinds of claim, or half of one.
        EntityNotFoundError: the entity was deleted.
    """
    claim = Claim.checked(subject, property, value, relation, object)
    return _check(session, claim, now)


def _check(session: EntitySession, claim: Claim, now: datetime | None) -> Verdict:
    moment = _aware(now) if now is not None else datetime.now(UTC)
    facts = _facts_for(session, claim)
    return _Checker(session, facts, session.type_catalog(), moment).run(claim)


_PROBE_ID = "\x00claim"  # the id of the claim's subject as a node to match (no node has it)
MAX_NAMED = 500  # nodes a subject or object text can name, most words held first


def _facts_for(session: EntitySession, claim: Claim) -> _Facts:
    """The facts a claim can be about, read by index: the nodes its subject and object texts
    may name (:func:`_named_nodes`), their current edges and the nodes at the other ends."""
    seeds: set[str] = set()
    for text in (claim.subject, claim.object):
        if text is not None:
            seeds |= _named_nodes(session, text)
    graph = session.facts_around(seeds)
    return _Facts(int(graph.graph.get("kgot_version", 0)), graph)


def _named_nodes(session: EntitySession, text: str) -> set[str]:
    """Nodes ``text`` may name: the node of that id, the node it was merged into, and nodes
    holding its words in the search index (:mod:`kgot.memory.search_index`) — each word as it
    is, all of them run together (``I.B.M.`` → ``ibm``), or a word spelled within one typo
    of it — at most :data:`MAX_NAMED`, those holding the most of them first. A ticker is a
    word of its company (or of the security whose issuer the company is, which the edges read
    around it bring in)."""
    from kgot.memory import search_index
    from kgot.memory.names import fold_text

    named = {text}
    canonical = session.canonical_id(text)
    if canonical is not None:
        named.add(canonical)
    search_index.update_search_index(session)
    words = fold_text(text).split()
    if not words:
        return named
    looked_for = dict.fromkeys([*words, "".join(words)])
    terms: dict[str, str] = {}  # index word -> the text's word it stands for
    for word, found in search_index.word_matches(session, looked_for, prefix=False).items():
        terms.update(dict.fromkeys((term for term, _ in found), word))
    held: dict[str, set[str]] = {}
    for posting in search_index.postings(session, terms):
        if posting.key[0] == "node":
            held.setdefault(posting.key[1], set()).add(terms[posting.term])
    ranked = sorted(held, key=lambda node_id: (-len(held[node_id]), node_id))
    return named | set(ranked[:MAX_NAMED])


class _Facts:
    """The facts a claim can be about (:func:`_facts_for`) as
    ``load_graph(include_meta=True)`` shows them, read at ``version``, with name lookups built
    on first use: exact normalised names (every node that has one, so two same-named nodes are
    seen as ambiguous) and the resolution index for the near matches
    (:func:`kgot.memory.resolution.match_existing`, per type)."""

    def __init__(self, version: int, graph: nx.MultiDiGraph) -> None:
        self.version = version
        self.graph = graph
        self.labels = {str(d.get("label", "")) for _, d in graph.nodes(data=True)}
        self._lock = threading.Lock()
        self._exact: tuple[dict[str, set[str]], ...] | None = None
        self._index: ResolutionIndex | None = None

    def exact(self, text: str) -> set[str]:
        """Nodes one of whose names equals ``text`` once normalised (resolution's exact and
        same-letters rules), under their type's legal-form rules."""
        tables = self._tables()
        found: set[str] = set()
        for organisation, (keys, compacts, fulls) in ((False, tables[:3]), (True, tables[3:])):
            probe = _normal(text, organisation)
            if not probe.key:
                continue
            for table, form in (
                (keys, probe.key),
                (compacts, probe.compact),
                (fulls, probe.full_compact),
            ):
                found.update(
                    n for n in table.get(form, ()) if _is_org(self.graph, n) == organisation
                )
        return found

    def _tables(self) -> tuple[dict[str, set[str]], ...]:
        with self._lock:
            if self._exact is None:
                tables: tuple[dict[str, set[str]], ...] = tuple({} for _ in range(6))
                for node_id, data in self.graph.nodes(data=True):
                    organisation = _is_org(self.graph, node_id)
                    keys, compacts, fulls = tables[3:] if organisation else tables[:3]
                    for name in _names(node_id, data):
                        normal = _normal(name, organisation)
                        if normal.key:
                            keys.setdefault(normal.key, set()).add(node_id)
                            compacts.setdefault(normal.compact, set()).add(node_id)
                            fulls.setdefault(normal.full_compact, set()).add(node_id)
                self._exact = tables
            return self._exact

    def index(self) -> ResolutionIndex:
        """The resolution index of every node, a company's tickers among its names (a claim
        about "NVDA" is about NVIDIA when the graph links the two). The probe carries a name
        only, so the types' field hints have nothing to weigh here."""
        from kgot.memory.resolution import ResolutionIndex
        from kgot.memory.tickers import ticker_names, with_ticker_names

        with self._lock:
            if self._index is None:
                self._index = ResolutionIndex.build(
                    with_ticker_names(
                        (
                            Node(n, str(d.get("label", "")), _plain(d))
                            for n, d in self.graph.nodes(data=True)
                        ),
                        ticker_names(self.graph),
                    )
                )
            return self._index


def _is_org(graph: nx.MultiDiGraph, node_id: str) -> bool:
    from kgot.memory.names import is_organisation_type

    return is_organisation_type(str(graph.nodes[node_id].get("label", "")))


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not k.startswith("_") and k != "label"}


# --------------------------------------------------------------------------------------------
# Free-text claims


class ExtractedClaim(BaseModel):
    """The claim a sentence makes, as the model extracts it."""

    model_config = ConfigDict(extra="forbid")

    subject: str = Field(
        description="The thing the claim is about, as named in the text (or a node id)."
    )
    property: str | None = Field(
        default=None,
        description="For a claim about a value: the property name, preferably one listed "
        "(e.g. ceo, founded, price). Leave empty for a relation claim.",
    )
    value: str | int | float | bool | None = Field(
        default=None, description="The value the text claims for the property."
    )
    relation: str | None = Field(
        default=None,
        description="For a claim linking two things: the relationship, preferably one listed "
        "(e.g. headquartered_in, works_for), pointing from subject to object.",
    )
    object: str | None = Field(
        default=None, description="The thing the relationship points to, as named in the text."
    )

    @model_validator(mode="after")
    def _one_form(self) -> ExtractedClaim:
        if self.property and self.relation:
            raise ValueError("give either property and value, or relation and object, not both")
        if self.property and self.value in (None, ""):
            raise ValueError("a property claim needs its value")
        if self.relation and not self.object:
            raise ValueError("a relation claim needs its object")
        return self


async def averify_text(
    session: EntitySession,
    text: str,
    model: LLMClient | BaseChatModel,
    *,
    now: datetime | None = None,
) -> Verdict:
    """Extract the claim ``text`` makes with ``model`` (one structured call, step
    ``verify_claim``), then check it like :func:`verify_claim`. A text the model finds no
    checkable claim in is ``inconclusive`` with a note.

    Raises:
        UsageError: an empty text.
        StructuredOutputError, ModelError: the model gave no valid claim or failed.
    """
    sentence = text.strip() if isinstance(text, str) else ""
    if not sentence:
        raise UsageError('the claim text is empty; give a sentence such as "Apple\'s CEO is X"')
    from langchain_core.messages import HumanMessage, SystemMessage

    client = _client(model)
    vocabulary = _vocabulary(session.type_catalog())
    messages = [
        SystemMessage(
            "Extract the one factual claim the user's text makes, to check it against a "
            "knowledge graph. Either a property claim (subject, property, value) or a relation "
            "claim (subject, relation, object), never both. Use the graph's names below where "
            "one fits; keep names as the text writes them. If the text makes no checkable "
            "claim, give the subject with neither property nor relation.\n\n" + vocabulary
        ),
        HumanMessage(sentence),
    ]
    extracted = await client.structured(messages, ExtractedClaim, step=EXTRACT_STEP)
    if not (extracted.subject.strip() and (extracted.property or extracted.relation)):
        return Verdict(
            "inconclusive",
            None,
            notes=("the model found no checkable claim in the text",),
            text=sentence,
        )
    claim = Claim.checked(
        extracted.subject,
        extracted.property,
        extracted.value,
        extracted.relation,
        extracted.object,
    )
    verdict = await asyncio.to_thread(_check, session, claim, now)
    return _with_text(verdict, sentence)


def verify_text(
    session: EntitySession,
    text: str,
    model: LLMClient | BaseChatModel,
    *,
    now: datetime | None = None,
) -> Verdict:
    """:func:`averify_text` for code that is not in an event loop (the CLI)."""
    return asyncio.run(averify_text(session, text, model, now=now))


def _with_text(verdict: Verdict, text: str) -> Verdict:
    from dataclasses import replace

    return replace(verdict, text=text)


def _client(model: LLMClient | BaseChatModel) -> LLMClient:
    from kgot.llm import LLMClient, describe_endpoint, describe_model

    if isinstance(model, LLMClient):
        return model
    return LLMClient(
        model,
        role="execution",
        model_name=describe_model(model),
        endpoint=describe_endpoint(model),
    )


def _vocabulary(catalog: TypeCatalog) -> str:
    """The entity's node types with their properties and its relationships, for the prompt."""
    lines = ["Node types (properties):"]
    for name, type_def in sorted(catalog.node_types.items()):
        declared = (type_def.spec.properties or {}).get("properties") or {}
        lines.append(f"- {name}: {', '.join(declared) or '(any)'}")
    lines.append("Relationships: " + (", ".join(sorted(catalog.edge_types)) or "(none)"))
    text = "\n".join(lines)
    return text if len(text) <= _VOCABULARY_CHARS else text[:_VOCABULARY_CHARS] + " …"


# --------------------------------------------------------------------------------------------
# The check


@dataclass
class _Evidence:
    supporting: dict[str, float] = field(default_factory=dict)  # fact id -> weight
    contradicting: dict[str, float] = field(default_factory=dict)
    superseded: list[Superseded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Checker:
    def __init__(
        self,
        session: EntitySession,
        facts: _Facts,
        catalog: TypeCatalog,
        now: datetime,
    ) -> None:
        self.session = session
        self.facts = facts
        self.graph = facts.graph
        self.catalog = catalog
        self.now = now
        self.wall_clock = datetime.now(UTC)

    def alive(self, data: Mapping[str, Any]) -> bool:
        """Not expired on the wall clock (a fact may expire between the read and the check;
        reads hide expired facts)."""
        from kgot.memory.scoring import parse_instant

        expires = parse_instant(data.get("_expires_at"))
        return expires is None or expires > self.wall_clock

    # ------------------------------------------------------------------------ entry

    def run(self, claim: Claim) -> Verdict:
        found, candidates, notes = self.resolve(claim.subject)
        if len(found) != 1:
            if found:
                listed = ", ".join(f"{n} ({self._label(n)})" for n in found)
                notes.append(
                    f"{claim.subject!r} names {len(found)} nodes: {listed}; name one by its id"
                )
            else:
                notes.append(f"no node in entity {self.session.entity!r} is {claim.subject!r}")
                if candidates:
                    notes.append(f"it may be: {', '.join(candidates)}")
            gone = () if found else self._former_node(claim)
            notes += [_held_note(old) for old in gone]
            return Verdict(
                "inconclusive",
                claim,
                candidates=tuple(found or candidates),
                superseded=gone,
                notes=tuple(notes),
            )
        subject_id = found[0]
        evidence = _Evidence(notes=notes)
        if claim.property is not None:
            self.property_evidence(subject_id, claim.property, claim.value, evidence)
            self.edge_evidence(subject_id, claim.property, str(claim.value), evidence)
        else:
            assert claim.relation is not None and claim.object is not None
            self.edge_evidence(subject_id, claim.relation, claim.object, evidence)
            self.property_evidence(subject_id, claim.relation, claim.object, evidence)
        if evidence.supporting:
            evidence.superseded.clear()  # the value holds now; an old episode is moot
        evidence.notes += [_held_note(old) for old in evidence.superseded]
        return _verdict(claim, subject_id, evidence)

    def _former_node(self, claim: Claim) -> tuple[Superseded, ...]:
        """For a subject that is the id of a node no longer current (removed, expired): the
        claimed property's values that ended with it."""
        current = claim.subject in self.graph and self.alive(self.graph.nodes[claim.subject])
        if claim.property is None or current:
            return ()
        history = self.session.node_history(claim.subject)
        wanted = _term(claim.property)
        names = {k for row in history for k in (row.get("properties") or {}) if _term(k) == wanted}
        if not names:
            return ()
        prop = sorted(names)[0]
        return tuple(
            _ended_episodes(
                history,
                lambda row: (row.get("properties") or {}).get(prop),
                claim.value,
                claim.subject,
                self.now,
            )
        )

    # ------------------------------------------------------------------------ subjects

    def resolve(self, text: str) -> tuple[list[str], list[str], list[str]]:
        """``(nodes it is, nodes it may be, notes)`` for a subject or object text."""
        if text in self.graph and self.alive(self.graph.nodes[text]):
            return [text], [], []
        canonical = self.session.canonical_id(text)
        if canonical is not None and canonical in self.graph:
            return [canonical], [], [f"{text!r} was merged into {canonical!r}"]
        exact = sorted(n for n in self.facts.exact(text) if self.alive(self.graph.nodes[n]))
        if exact:
            return exact, [], []
        from kgot.memory.resolution import match_existing

        close: list[str] = []
        maybe: list[tuple[float, str]] = []
        index = self.facts.index()
        for label in sorted(self.facts.labels):
            match = match_existing(Node(_PROBE_ID, label, {"name": text}), index)
            if match is None or not self.alive(self.graph.nodes[match.node_id]):
                continue
            if match.merge:
                close.append(match.node_id)
            else:
                maybe.append((match.score, match.node_id))
        if close:
            return sorted(close), [], []
        maybe.sort(key=lambda item: (-item[0], item[1]))
        return [], [node_id for _, node_id in maybe[:5]], []

    def _name_verdict(self, text: str, label: str, names: Sequence[str]) -> Any:
        from kgot.memory.names import is_organisation_type
        from kgot.memory.resolution import compare_names

        organisation = is_organisation_type(label)
        probe = _normal(text, organisation)
        best = None
        for name in names:
            verdict = compare_names(probe, _normal(name, organisation))
            if verdict is not None and (best is None or verdict.rank() > best.rank()):
                best = verdict
        return best

    def _label(self, node_id: str) -> str:
        return str(self.graph.nodes[node_id].get("label", ""))

    def _matches_node(self, text: str, node_id: str, canonical: str | None) -> bool:
        if node_id in (text, canonical):
            return True
        data = self.graph.nodes[node_id]
        verdict = self._name_verdict(text, self._label(node_id), _names(node_id, data))
        if verdict is not None and verdict.merge:
            return True
        return any(values_match(name, text) for name in _names(node_id, data))

    # ------------------------------------------------------------------------ properties

    def property_evidence(
        self, node_id: str, claimed_property: str, value: Any, evidence: _Evidence
    ) -> None:
        data = self.graph.nodes[node_id]
        label = self._label(node_id)
        prop = self._property_name(label, data, claimed_property)
        if prop is None:
            return
        upkeep = self._upkeep("node", label)
        functional = prop in tuple(getattr(upkeep, "functional", ()) or ())
        current = data.get(prop)
        if not _empty(current) and self.alive(data):
            weight = self._weight(data, "node", label)
            if values_match(current, value):
                evidence.supporting[node_id] = weight
            elif functional:
                evidence.contradicting[node_id] = weight
                evidence.notes.append(
                    f"{node_id}.{prop} is {current!r} (single-valued), not {value!r}"
                )
            else:
                evidence.notes.append(
                    f"{node_id}.{prop} is {current!r}; {label} may have several values of "
                    f"{prop}, so that neither supports nor contradicts {value!r}"
                )
        evidence.superseded.extend(self._superseded_values(node_id, prop, value))

    def _property_name(self, label: str, data: Mapping[str, Any], claimed: str) -> str | None:
        """The subject's property the claim names (its own, or one its type declares)."""
        wanted = _term(claimed)
        own = [k for k in data if not k.startswith("_") and k != "label"]
        type_def = self.catalog.get("node", label)
        declared = list(
            ((type_def.spec.properties or {}).get("properties") or {}) if type_def else []
        )
        for name in (*own, *declared):
            if _term(name) == wanted:
                return str(name)
        return None

    def _superseded_values(self, node_id: str, prop: str, value: Any) -> list[Superseded]:
        history = self.session.node_history(node_id)
        return _ended_episodes(
            history,
            lambda row: (row.get("properties") or {}).get(prop),
            value,
            node_id,
            self.now,
        )

    # ------------------------------------------------------------------------ edges

    def edge_evidence(
        self, source: str, claimed_relation: str, obj: str, evidence: _Evidence
    ) -> None:
        wanted = _term(claimed_relation)
        canonical = self.session.canonical_id(obj) if obj not in self.graph else obj
        relationships: set[str] = {r for r in self.catalog.edge_types if _term(r) == wanted}
        others: list[str] = []
        for _, target, key, data in self.graph.out_edges(source, keys=True, data=True):
            if not (self.alive(data) and self.alive(self.graph.nodes[target])):
                continue
            relationship = str(data.get("relationship", key))
            if _term(relationship) != wanted:
                continue
            relationships.add(relationship)
            fact = edge_fact_id(source, target, key)
            weight = self._weight(data, "edge", relationship)
            if self._matches_node(obj, target, canonical):
                evidence.supporting[fact] = weight
            elif getattr(self._upkeep("edge", relationship), "functional_edge", False):
                evidence.contradicting[fact] = weight
                evidence.notes.append(
                    f"{source} -{relationship}-> {target} (one per source), not {obj!r}"
                )
            else:
                others.append(target)
        if others:
            evidence.notes.append(
                f"{source} also has {claimed_relation} {', '.join(sorted(others))}; that "
                "relationship may have several targets, so they neither support nor contradict"
            )
        if relationships:
            evidence.superseded.extend(self._superseded_edges(source, relationships, obj))

    def _superseded_edges(
        self, source: str, relationships: Iterable[str], obj: str
    ) -> list[Superseded]:
        targets = self.resolve(obj)[0]
        ids = list(dict.fromkeys([obj, *targets]))
        found: list[Superseded] = []
        for relationship in sorted(relationships):
            for target in ids:
                history = self.session.edge_history(source, target, relationship)
                found.extend(
                    _ended_episodes(
                        history,
                        functools.partial(_constant, target),
                        target,
                        edge_fact_id(source, target, relationship),
                        self.now,
                    )
                )
        return found

    # ------------------------------------------------------------------------ weights

    def _upkeep(self, kind: str, name: str) -> Any:
        type_def = self.catalog.get("node" if kind == "node" else "edge", name)
        return getattr(type_def, "upkeep", None) if type_def is not None else None

    def _weight(self, data: Mapping[str, Any], kind: str, name: str) -> float:
        """``confidence × freshness`` of one fact (module docstring)."""
        from kgot.memory.scoring import fact_freshness, temporal_properties

        confidence = data.get("_confidence")
        trust = float(confidence) if isinstance(confidence, int | float) else 1.0
        type_def = self.catalog.get("node" if kind == "node" else "edge", name)
        half_life = getattr(self._upkeep(kind, name), "half_life_days", None)
        schema = type_def.spec.properties if type_def is not None else None
        fresh, _ = fact_freshness(
            data, now=self.now, half_life_days=half_life, temporal=temporal_properties(schema)
        )
        return min(max(trust * fresh, 0.0), 1.0)


def _verdict(claim: Claim, subject_id: str, evidence: _Evidence) -> Verdict:
    support = _combined(evidence.supporting.values())
    against = _combined(evidence.contradicting.values())
    if evidence.supporting and evidence.contradicting:
        verdict, confidence = "mixed", min(support, against)
    elif evidence.supporting:
        verdict, confidence = "corroborated", support
    elif evidence.contradicting:
        verdict, confidence = "contradicted", against
    else:
        verdict, confidence = "inconclusive", 0.0
        if not evidence.superseded and not evidence.notes:
            evidence.notes.append(f"the graph says nothing about {claim.describe()}")
    return Verdict(
        verdict,
        claim,
        supporting=tuple(sorted(evidence.supporting)),
        contradicting=tuple(sorted(evidence.contradicting)),
        confidence=round(confidence, 4),
        subject_id=subject_id,
        superseded=tuple(evidence.superseded),
        notes=tuple(dict.fromkeys(evidence.notes)),
    )


def _held_note(old: Superseded) -> str:
    edge = " -[" in old.id  # an edge holds its target; a node the property's value
    held = f"{old.id} held" if edge else f"{old.id} held {old.value!r}"
    return (
        f"{held} until {old.superseded_at or 'an unknown time'} ({old.closed_reason or 'closed'})"
    )


def _combined(weights: Iterable[float]) -> float:
    """``1 − Π(1 − w)``: the chance at least one of independent facts is right."""
    doubt = 1.0
    for weight in weights:
        doubt *= 1.0 - min(max(weight, 0.0), 1.0)
    return 1.0 - doubt


def _ended_episodes(
    history: Sequence[Mapping[str, Any]],
    value_of: Callable[[Mapping[str, Any]], Any],
    claimed: Any,
    fact_id: str,
    now: datetime,
) -> list[Superseded]:
    """The stretches of ``history`` (oldest first) in which the fact held ``claimed`` and that
    ended: the version closed (or expired) and the next version, if any, holds something else.
    A version closed by a merge with no successor moved to the canonical node: not an end."""

    def holds(row: Mapping[str, Any]) -> bool:
        value = value_of(row)
        return not _empty(value) and values_match(value, claimed)

    found: list[Superseded] = []
    held_from: str | None = None
    for position, row in enumerate(history):
        if not holds(row):
            held_from = None
            continue
        held_from = held_from or row.get("created_at")
        ended, reason, at = _ended(row, now)
        following = history[position + 1] if position + 1 < len(history) else None
        if not ended or (following is not None and holds(following)):
            continue  # still current, or the value went on in the next version
        if reason == "merged" and following is None:
            continue
        found.append(Superseded(fact_id, value_of(row), reason, at, held_from))
        held_from = None
    return found


def _ended(row: Mapping[str, Any], now: datetime) -> tuple[bool, str | None, str | None]:
    """Whether a stored version stopped holding, why and when (a version past its expiry that
    no upkeep pass closed yet counts as ``expired``)."""
    if row.get("valid_to_version") is not None:
        return True, row.get("closed_reason"), row.get("superseded_at")
    from kgot.memory.scoring import parse_instant

    expires = parse_instant(row.get("expires_at"))
    if expires is not None and expires <= now:
        return True, "expired", row.get("expires_at")
    return False, None, None


# --------------------------------------------------------------------------------------------
# Comparing values


def values_match(stored: Any, claimed: Any) -> bool:
    """Whether a stored value states the claimed one (module docstring: names fold, numbers
    and dates agree at the coarser precision, a list holds a value when an item does)."""
    if isinstance(claimed, list | tuple):
        return bool(claimed) and all(values_match(stored, item) for item in claimed)
    if isinstance(stored, list | tuple):
        return any(values_match(item, claimed) for item in stored)
    if isinstance(stored, dict) or isinstance(claimed, dict):
        return json.dumps(stored, sort_keys=True, default=str) == json.dumps(
            claimed, sort_keys=True, default=str
        )
    if isinstance(stored, bool) or isinstance(claimed, bool):
        first, second = _boolean(stored), _boolean(claimed)
        return first is not None and first == second
    first_date, second_date = _date(stored), _date(claimed)
    if first_date is not None and second_date is not None:
        return _same_date(first_date, second_date)
    first_number, second_number = _number(stored), _number(claimed)
    if first_number is not None and second_number is not None:
        value_a, step_a = first_number
        value_b, step_b = second_number
        return abs(value_a - value_b) <= max(step_a, step_b) / 2 + 1e-9 * max(
            abs(value_a), abs(value_b), 1.0
        )
    if first_number is not None or second_number is not None:
        return False  # one side is a number, the other is not one
    return _same_text(str(stored), str(claimed))


def _same_text(first: str, second: str) -> bool:
    from kgot.memory.names import fold_text

    if fold_text(first).split() == fold_text(second).split():
        return True
    a, b = _normal(first, True), _normal(second, True)
    return bool(a.key) and (a.key == b.key or a.compact == b.compact)


_BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}


def _boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _BOOLEANS.get(value.strip().casefold())
    return None


_MULTIPLIERS = {
    "k": 10**3,
    "thousand": 10**3,
    "m": 10**6,
    "mn": 10**6,
    "million": 10**6,
    "b": 10**9,
    "bn": 10**9,
    "billion": 10**9,
    "t": 10**12,
    "tn": 10**12,
    "trillion": 10**12,
}
_NUMBER = re.compile(
    r"^[\s$€£¥]*(?P<sign>[-+])?[\s$€£¥]*(?P<digits>\d[\d,_ ]*(?:\.\d+)?|\.\d+)\s*"
    r"(?P<suffix>[a-z]+|%)?\s*$"
)


def _number(value: Any) -> tuple[float, float] | None:
    """``(value, step)``: a number and the precision it was given at (``190`` → step 1,
    ``3.25`` → 0.01, ``3.2 billion`` → 10⁸); None for anything that is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value), 1.0
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return value, _step(Decimal(repr(value)))
    if not isinstance(value, str):
        return None
    matched = _NUMBER.match(unicodedata.normalize("NFKC", value).casefold())
    if matched is None:
        return None
    suffix = matched.group("suffix")
    if suffix is not None and suffix != "%" and suffix not in _MULTIPLIERS:
        return None
    try:
        number = Decimal(re.sub(r"[,_ ]", "", matched.group("digits")))
    except InvalidOperation:
        return None
    scale = _MULTIPLIERS.get(suffix or "", 1)
    sign = -1.0 if matched.group("sign") == "-" else 1.0
    return sign * float(number) * scale, _step(number) * scale


def _step(number: Decimal) -> float:
    """The precision a number was written at: 1 for an integer, 0.01 for ``3.25``."""
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or exponent >= 0:
        return 1.0
    return float(10.0**exponent)


_DATE_FORMATS = ("%B %d, %Y", "%d %B %Y", "%b %d, %Y", "%d %b %Y", "%Y/%m/%d", "%B %Y", "%b %Y")


def _date(value: Any) -> tuple[datetime, str] | None:
    """``(instant, precision)`` with precision ``year``, ``month``, ``day`` or ``time``."""
    if isinstance(value, datetime):
        return _aware(value), "time"
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC), "day"
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"\d{4}", text):
        return datetime(int(text), 1, 1, tzinfo=UTC), "year"
    if re.fullmatch(r"\d{4}-\d{2}", text):
        year, month = text.split("-")
        if 1 <= int(month) <= 12:
            return datetime(int(year), int(month), 1, tzinfo=UTC), "month"
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return datetime.fromisoformat(text).replace(tzinfo=UTC), "day"
        except ValueError:
            return None
    if re.match(r"\d{4}-\d{2}-\d{2}[T ]\d", text):
        from kgot.memory.scoring import parse_instant

        parsed = parse_instant(text)
        return (parsed, "time") if parsed is not None else None
    for pattern in _DATE_FORMATS:
        try:
            parsed_date = datetime.strptime(text, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
        return parsed_date, "month" if "%d" not in pattern else "day"
    return None


_PRECISIONS = ("year", "month", "day", "time")


def _same_date(first: tuple[datetime, str], second: tuple[datetime, str]) -> bool:
    """Equal at the coarser of the two precisions (a year agrees with any day in it)."""
    precision = min(first[1], second[1], key=_PRECISIONS.index)
    a, b = first[0].astimezone(UTC), second[0].astimezone(UTC)
    if precision == "time":
        return a == b
    parts = {"year": 1, "month": 2, "day": 3}[precision]
    return a.timetuple()[:parts] == b.timetuple()[:parts]


# --------------------------------------------------------------------------------------------
# Small helpers


def _names(node_id: str, data: Mapping[str, Any]) -> list[str]:
    from kgot.memory.resolution import node_names

    return node_names(data) or [node_id]


def _normal(text: str, organisation: bool) -> NormalName:
    from kgot.memory.names import normalize_name

    return normalize_name(text, organisation=organisation)


def _term(name: str) -> str:
    """A property or relationship name without case, spaces, hyphens or underscores."""
    return re.sub(r"[\s_\-]+", "", unicodedata.normalize("NFKC", name).casefold())


def _constant(value: Any, _row: Mapping[str, Any]) -> Any:
    return value  # an edge version "holds" its target


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


def _cut(name: str, limit: int = 80) -> str:
    """A name quoted back in an error, cut to ``limit`` characters."""
    return name if len(name) <= limit else f"{name[:limit]}…"


def _blank_to_none(text: str | None) -> str | None:
    if text is None:
        return None
    text = str(text).strip()
    return text or None


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
