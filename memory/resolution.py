"""Entity resolution: which nodes of one type are one real thing. Pure, no store.

Rules, in the order they decide (the issue's section 1):

1. Only nodes of the same type are compared (:func:`resolve_all` groups by label).
2. Identity properties decide first. Two nodes with an equal non-empty value of an identity
   property, and no identity property on which both have *different* non-empty values, are the
   same thing (score 1). Different non-empty values mean never the same, even under equal names
   (``GOOGL`` and ``GOOG`` are two Assets called "Alphabet Inc.").
3. Otherwise names decide: a node's ``name`` and each of its ``aliases``, normalised by
   :mod:`kgot.memory.names`. Merge (auto) on

   * the same normalised name ("Apple Inc." = "Apple, Inc." = "apple incorporated"; an alias
     equal to the other node's name counts), the same letters without spaces ("ExxonMobil" =
     "Exxon Mobil", "IBM" = "I.B.M."), or the same words in another order ("Cook, Tim");
   * near-identical spelling: rapidfuzz similarity of the word-sorted names ≥ ``merge`` (0.92),
     both names of at least two words, the same number of words, and every word that differs
     at least 4 letters long and one edit from its counterpart (a typo, not "Class A" vs
     "Class C"), and not that word with a vowel or "h" appended (Paul/Paula, Sara/Sarah).

   Suggest (queue for a person) on similar spelling down to ``suggest`` (0.80), a one-word
   near-match, an acronym that equals the other name's initials ("IBM" ~ "International
   Business Machines", unless more than a few names have those initials), names equal up to
   initials ("J. Smith" ~ "John Smith"), and one name's words contained in the other's ("Meta"
   ~ "Meta Financial Group") when few names contain them.
   Names whose numbers differ ("Apollo 11", "Apollo 13") are never merged nor suggested.
4. An embedding cosine above ``embedding_cosine`` (0.92) is extra evidence only: it turns a
   similar-spelling suggestion into a merge, nothing else.

Merged groups are closed transitively, but a group whose members carry conflicting identity
values is not merged on names: its name links become suggestions. The canonical node of a
group has the most evidence (edges + corroborations, passed in), then is the oldest
(``created_at`` passed in), then has the smallest id.

Scale: candidates come from blocks (equal keys; the first three letters of each word, split
further where a block is large, compared with :func:`rapidfuzz.process.cdist` under a score
cut-off; initials; word postings), never from all pairs. :class:`ResolutionIndex` keeps the
same blocks for :func:`match_existing`, the write-time lookup of one new node.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import Levenshtein

from kgot.graph_model import Node
from kgot.memory.field_evidence import (
    Encoded,
    FieldEvidence,
    FieldKind,
    FieldModel,
    fit_model,
    infer_kinds,
    probability,
    record_values,
)
from kgot.memory.names import (
    NormalName,
    is_organisation_type,
    legal_systems_differ,
    normalize_name,
)
from kgot.memory.scoring import parse_instant

__all__ = [
    "Match",
    "Merge",
    "NameVerdict",
    "PairExplanation",
    "Resolution",
    "ResolutionIndex",
    "Suggestion",
    "Thresholds",
    "TypeHints",
    "VectorLookup",
    "compare_names",
    "explain_pair",
    "identity_value",
    "match_existing",
    "node_names",
    "resolve",
    "resolve_all",
]

# Texts -> vectors (one per text), e.g. a LangChain embeddings' embed_documents.
Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]
# Node ids -> the vectors found for them (ids without one left out), e.g. stored embeddings of
# whole nodes (kgot.memory.embeddings); asked only for the nodes of promotable pairs.
VectorLookup = Callable[[Sequence[str]], Mapping[str, Sequence[float]]]

# Verdict kinds. Only "spelling" may be promoted by embeddings.
_IDENTITY = "identity"
_SPELLING = "spelling"
_FIELDS = "fields"  # decided by the field model
# Fields whose equal values make candidates (a block); text and categories are too common.
BLOCKING_KINDS = frozenset(
    {FieldKind.NAME, FieldKind.DATE, FieldKind.IDENTIFIER, FieldKind.POSTCODE}
)
_NAME_FIELD = "name"  # the node's name as a field, when the type has no name parts
_NEAR_IDENTITY_LENGTH = 6  # identity values this long may be one typing slip apart
_AGREEING_TO_MERGE = 2  # fields that must agree for the field model to merge
_RARE_BLOCK = 5  # a field value held by this few nodes makes each of them a candidate alone
_KIND_SAMPLE = 2_000  # records read to infer how each field is compared


@dataclass(frozen=True)
class Thresholds:
    """Cut-offs of the rules (module docstring). Scores are 0–1."""

    merge: float = 0.92
    suggest: float = 0.80
    acronym: float = 0.85  # the score given to acronym and initials suggestions
    containment: float = 0.75  # the highest score given to "one name's words in the other's"
    embedding_cosine: float = 0.92
    word_similarity: float = 0.80  # a differing word must be this close to its counterpart
    max_block: int = 300  # a block larger than this is split by a longer prefix
    # More names containing a name's words, or sharing an acronym's initials, make it too
    # generic to suggest.
    max_containing: int = 5
    # The field model (memory.field_evidence): the posterior probability of one thing at which
    # a pair that shares fields besides its names merges, and at which it is suggested.
    field_merge: float = 0.95
    field_suggest: float = 0.5
    field_block: int = 50  # nodes sharing one field value beyond this are too many to pair
    # Another identity value entirely is strong evidence of two things, not a veto: after the
    # field model weighed it, a pair merges only at this probability (else a suggestion).
    field_merge_other_id: float = 0.9999


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class TypeHints:
    """What a type declares about resolving its nodes (a type file's ``resolution``):
    ``compare`` maps a property to how it is compared (a :class:`FieldKind` value, or
    ``ignore``) over what is inferred; ``merge_at`` / ``suggest_at`` replace the field model's
    probabilities (:attr:`Thresholds.field_merge`, :attr:`Thresholds.field_suggest`)."""

    compare: Mapping[str, str] = field(default_factory=dict)
    merge_at: float | None = None
    suggest_at: float | None = None

    def thresholds(self, base: Thresholds) -> Thresholds:
        return dataclasses.replace(
            base,
            field_merge=self.merge_at if self.merge_at is not None else base.field_merge,
            field_suggest=self.suggest_at if self.suggest_at is not None else base.field_suggest,
        )


# --------------------------------------------------------------------------------------------
# Results (the JSON of `kgot memory resolve --json`)


@dataclass(frozen=True)
class Merge:
    """Nodes to fold into ``canonical``; ``score`` is the weakest link that joined them."""

    canonical: str
    aliases: tuple[str, ...]
    type: str
    score: float
    reason: str
    # the field model's evidence for the weakest link, when the fields decided it
    evidence: tuple[FieldEvidence, ...] = ()
    weight: float | None = None

    def to_json(self) -> dict[str, Any]:
        row = {
            "canonical": self.canonical,
            "aliases": list(self.aliases),
            "type": self.type,
            "score": self.score,
            "reason": self.reason,
        }
        return row | _evidence_json(self.evidence, self.weight)


@dataclass(frozen=True)
class Suggestion:
    """Two nodes that may be one thing; for a person to decide. ``reason`` goes into the
    curation queue's payload; the JSON row carries the queue's ``id`` instead."""

    nodes: tuple[str, str]
    type: str
    score: float
    reason: str
    evidence: tuple[FieldEvidence, ...] = ()
    weight: float | None = None

    def to_json(self, suggestion_id: int | None = None) -> dict[str, Any]:
        row: dict[str, Any] = {} if suggestion_id is None else {"id": suggestion_id}
        row.update({"nodes": list(self.nodes), "type": self.type, "score": self.score})
        return row | _evidence_json(self.evidence, self.weight)


def _evidence_json(evidence: Sequence[FieldEvidence], weight: float | None) -> dict[str, Any]:
    """The field model's evidence in a merge's or suggestion's JSON (absent when names
    alone decided)."""
    if weight is None:
        return {}
    return {"weight": round(weight, 2), "evidence": [e.to_json() for e in evidence]}


@dataclass(frozen=True)
class Resolution:
    merges: tuple[Merge, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()

    def to_json(self, suggestion_ids: Sequence[int] | None = None) -> dict[str, Any]:
        """``suggestion_ids``: the queue ids, one per suggestion, once they are queued."""
        ids: Sequence[int | None] = (
            suggestion_ids if suggestion_ids is not None else [None] * len(self.suggestions)
        )
        return {
            "merges": [merge.to_json() for merge in self.merges],
            "suggestions": [s.to_json(i) for s, i in zip(self.suggestions, ids, strict=True)],
        }


@dataclass(frozen=True)
class Match:
    """Where a new node lands: ``merge`` True = it is ``node_id``; False = maybe (suggest)."""

    node_id: str
    score: float
    reason: str
    merge: bool


@dataclass(frozen=True, slots=True)
class NameVerdict:
    """How two nodes compare: ``merge`` or a suggestion at ``score`` for ``reason``; a verdict
    of the field model (kind ``fields``) carries the per-field ``evidence`` and the match
    ``weight`` (log2 odds) it summed."""

    merge: bool
    score: float
    reason: str
    kind: str
    evidence: tuple[FieldEvidence, ...] = ()
    weight: float | None = None

    def rank(self) -> tuple[bool, float]:
        return (self.merge, self.score)


# --------------------------------------------------------------------------------------------
# Comparing two names


def compare_names(
    a: NormalName, b: NormalName, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> NameVerdict | None:
    """The name rules of the module docstring for one pair of names; None = unrelated. Names
    equal but for legal forms of different systems ("Merck & Co." and "Merck KGaA") are only
    suggested: the legal form is evidence of which company is meant."""
    verdict = _compare_name_forms(a, b, thresholds)
    if verdict is not None and verdict.merge and legal_systems_differ(a, b):
        systems = f"{'/'.join(sorted(a.legal_systems))} and {'/'.join(sorted(b.legal_systems))}"
        return NameVerdict(
            False,
            min(verdict.score, thresholds.acronym),
            f"{verdict.reason}, but legal forms of different systems ({systems})",
            "legal",
        )
    return verdict


def _compare_name_forms(a: NormalName, b: NormalName, thresholds: Thresholds) -> NameVerdict | None:
    if not a.key or not b.key:
        return None
    if a.key == b.key:
        return NameVerdict(True, 1.0, f"same name '{a.key}'", "exact")
    if a.compact == b.compact:
        return NameVerdict(True, 0.98, f"same letters '{a.compact}'", "compact")
    if a.full_compact == b.full_compact:
        return NameVerdict(True, 0.98, f"same letters '{a.full_compact}'", "compact")
    if a.numbers != b.numbers:
        return None
    if a.sorted_key == b.sorted_key:
        return NameVerdict(True, 0.97, f"same words '{a.sorted_key}'", "order")
    if a.acronym_like and a.compact in b.initials:
        return NameVerdict(False, thresholds.acronym, f"acronym '{a.compact}'", "acronym")
    if b.acronym_like and b.compact in a.initials:
        return NameVerdict(False, thresholds.acronym, f"acronym '{b.compact}'", "acronym")
    similarity = fuzz.ratio(a.sorted_key, b.sorted_key) / 100.0
    differing = _differing_words(a, b, thresholds) if similarity >= thresholds.suggest else None
    if differing is not None:
        if (
            similarity >= thresholds.merge
            and min(len(a.words), len(b.words)) >= 2
            and all(_is_typo(x, y) for x, y in differing)
        ):
            return NameVerdict(True, similarity, "near-identical spelling", _SPELLING)
        return NameVerdict(False, similarity, "similar spelling", _SPELLING)
    if _initials_compatible(a, b):
        return NameVerdict(False, thresholds.acronym, "same name up to initials", "initials")
    small, large = (a, b) if len(a.words) <= len(b.words) else (b, a)
    if len(small.words) < len(large.words) and small.word_set < large.word_set:
        share = len(small.compact) / max(len(large.compact), 1)
        score = round(min(thresholds.containment, 0.5 + 0.5 * share), 3)
        return NameVerdict(False, score, f"'{small.key}' is part of '{large.key}'", "contained")
    return None


def _differing_words(
    a: NormalName, b: NormalName, thresholds: Thresholds
) -> list[tuple[str, str]] | None:
    """The words that differ, paired with their counterparts, when the names have the same
    number of words and each differing word has a close counterpart of ≥ 4 letters (the
    difference is spelling, not another word); None otherwise."""
    if len(a.words) != len(b.words):
        return None
    only_a = sorted(_multiset_minus(a.words, b.words))
    unmatched = sorted(_multiset_minus(b.words, a.words))
    if len(only_a) != len(unmatched):
        return None
    pairs: list[tuple[str, str]] = []
    for word in only_a:
        if len(word) < 4:
            return None
        best = max(unmatched, key=lambda other: fuzz.ratio(word, other))
        if len(best) < 4 or fuzz.ratio(word, best) / 100.0 < thresholds.word_similarity:
            return None
        unmatched.remove(best)
        pairs.append((word, best))
    return pairs


# A word and the same word with one of these letters added are often two names (Paul/Paula,
# Daniel/Daniela, Louis/Louise, Sara/Sarah), not a typo.
_NAME_ENDINGS = frozenset("aeiouyh")


def _is_typo(x: str, y: str) -> bool:
    """Whether ``x`` and ``y`` are one word misspelt: one edit apart (two for words of ten
    letters or more), and not a name with a vowel or "h" appended."""
    short, long = (x, y) if len(x) <= len(y) else (y, x)
    if len(long) == len(short) + 1 and long.startswith(short) and long[-1] in _NAME_ENDINGS:
        return False
    return Levenshtein.distance(x, y) <= (2 if len(short) >= 10 else 1)


def _multiset_minus(words: Sequence[str], other: Sequence[str]) -> list[str]:
    rest = list(other)
    out: list[str] = []
    for word in words:
        if word in rest:
            rest.remove(word)
        else:
            out.append(word)
    return out


def _initials_compatible(a: NormalName, b: NormalName) -> bool:
    """ "J. Smith" ~ "John Smith", "J R R Tolkien" ~ "John Ronald Reuel Tolkien": same number
    of words in order, the last word equal (≥ 2 letters), every other pair equal or an initial
    of the other, at least one initial."""
    if len(a.words) != len(b.words) or len(a.words) < 2:
        return False
    if a.words[-1] != b.words[-1] or len(a.words[-1]) < 2:
        return False
    initial_seen = False
    for x, y in zip(a.words[:-1], b.words[:-1], strict=True):
        if x == y:
            continue
        if (len(x) == 1 and y.startswith(x)) or (len(y) == 1 and x.startswith(y)):
            initial_seen = True
            continue
        return False
    return initial_seen


# --------------------------------------------------------------------------------------------
# Node data


def node_names(properties: Mapping[str, Any]) -> list[str]:
    """A node's names: ``name`` then each of ``aliases`` (a list, or one string), de-duplicated."""
    names: list[str] = []
    raw_name = properties.get("name")
    if isinstance(raw_name, str) and raw_name.strip():
        names.append(raw_name)
    aliases = properties.get("aliases")
    if isinstance(aliases, str):
        aliases = [aliases]
    if isinstance(aliases, list | tuple):
        names.extend(a for a in aliases if isinstance(a, str) and a.strip() and a not in names)
    return names


def identity_value(value: Any) -> str | None:
    """Comparable form of an identity value, None when empty. Strings are NFKC'd, trimmed and
    case-folded ("googl" is the symbol GOOGL)."""
    if value is None or (isinstance(value, str | list | tuple | dict) and not value):
        return None
    if isinstance(value, str):
        return unicodedata.normalize("NFKC", value).strip().casefold() or None
    return json.dumps(value, sort_keys=True, default=str)


def _identity_of(properties: Mapping[str, Any], identity: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for prop in identity:
        value = identity_value(properties.get(prop))
        if value is not None:
            values[prop] = value
    return values


def _identity_relation(a: Mapping[str, str], b: Mapping[str, str]) -> str | None:
    """ "same", "different" (never the same thing) or None (identity says nothing)."""
    same = False
    for prop, value in a.items():
        other = b.get(prop)
        if other is None:
            continue
        if other != value:
            return "different"
        same = True
    return "same" if same else None


@dataclass(slots=True)
class _NodeEntry:
    id: str
    names: tuple[NormalName, ...]
    identity: dict[str, str]
    order: int


# --------------------------------------------------------------------------------------------
# The blocks of one type


@dataclass
class TypeIndex:
    type: str
    identity_props: tuple[str, ...]
    organisation: bool
    thresholds: Thresholds
    nodes: dict[str, _NodeEntry] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    # One row per (node, name): the node id and the normalised name.
    name_node: list[str] = field(default_factory=list)
    names: list[NormalName] = field(default_factory=list)
    by_key: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_compact: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_sorted: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_initials: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_acronym: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_initials_form: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_word: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_prefix: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_long_prefix: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_identity: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    # The type's declared properties (JSON Schema), for the field model's comparison kinds.
    schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    compare: Mapping[str, str] = field(default_factory=dict)  # the type's comparison hints
    # node id -> its scalar properties other than names and metadata
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    fields: TypeFields | None = None  # built on first use (fields_of)
    # Set when the index holds only a write's candidates read from the store
    # (kgot.memory.resolution_store): the types' block sizes there, by stored key, and
    # whether the type was found to have no field model (then ``fields`` stays None).
    sizes: Mapping[str, int] | None = None
    fields_absent: bool = False

    def block_size(self, key: str, rows: Sized) -> int:
        """How many nodes the block ``key`` (a stored key, :func:`name_keys`) holds: in the
        store when the index holds only candidates, else here."""
        if self.sizes is None:
            return len(rows)
        return self.sizes.get(key, len(rows))

    def normalise(self, names: Iterable[str]) -> tuple[NormalName, ...]:
        out: list[NormalName] = []
        for text in names:
            name = normalize_name(text, organisation=self.organisation)
            if name.key and all(name.key != seen.key for seen in out):
                out.append(name)
        return tuple(out)

    def add(self, node: Node) -> _NodeEntry:
        """Add ``node`` (or update it: names it had stay findable; a merged node keeps its old
        names as aliases anyway)."""
        identity = _identity_of(node.properties, self.identity_props)
        names = self.normalise(node_names(node.properties))
        old = self.nodes.get(node.id)
        self.removed.discard(node.id)
        if old is not None:
            known = {name.key for name in old.names}
            entry = _NodeEntry(
                node.id,
                old.names + tuple(n for n in names if n.key not in known),
                identity,
                old.order,
            )
            names = tuple(n for n in names if n.key not in known)
        else:
            entry = _NodeEntry(node.id, names, identity, len(self.nodes))
        self.nodes[node.id] = entry
        self.values[node.id] = {
            k: v
            for k, v in node.properties.items()
            if not k.startswith("_") and k not in ("name", "aliases")
        }
        if self.fields is not None:
            self.fields.add(node.id, self.values[node.id], entry.names)
        for prop, value in identity.items():
            if old is None or old.identity.get(prop) != value:
                self.by_identity[(prop, value)].append(node.id)
        for name in names:
            row = len(self.names)
            self.names.append(name)
            self.name_node.append(node.id)
            self.by_key[name.key].append(row)
            self.by_compact[name.compact].append(row)
            if name.full_compact != name.compact:
                self.by_compact[name.full_compact].append(row)
            self.by_sorted[name.sorted_key].append(row)
            for initials in name.initials:
                self.by_initials[initials].append(row)
            if name.acronym_like:
                self.by_acronym[name.compact].append(row)
            form = initials_form(name)
            if form is not None:
                self.by_initials_form[form].append(row)
            for word in set(name.words):
                self.by_word[word].append(row)
            for prefix, long_prefix in block_keys(name):
                self.by_prefix[prefix].append(row)
                self.by_long_prefix[long_prefix].append(row)
        return entry

    def remove(self, node_id: str) -> None:
        """Forget ``node_id`` (merged away): lookups skip it."""
        self.removed.add(node_id)

    def live(self, node_id: str) -> bool:
        return node_id not in self.removed

    def identity_relation(self, a: str, b: str) -> str | None:
        return _identity_relation(self.nodes[a].identity, self.nodes[b].identity)


# --------------------------------------------------------------------------------------------
# The blocks as keys in the store (kgot.memory.resolution_store)
#
# A write to a large type reads only the nodes that share a block with the new one. Each
# block of the index above has a stored key: "<table>:<value>", the table one letter. Lookups
# whose choice depends on a block's size (an acronym's expansions, a prefix too common, a word
# too common to walk) ask the index's ``block_size``, which answers from the store's counts.


def name_keys(name: NormalName) -> set[str]:
    """The stored keys of the blocks ``name`` is filed under (what :meth:`TypeIndex.add`
    files it under): k key, c compact forms, s sorted key, i initials, a acronym, f initials
    form, h the same form for names with an initial, w words, v the set of words (for the
    names whose words are a subset of another's), p and l short and long prefixes (each with
    the name's sorted key: :func:`prefix_key`)."""
    keys = {f"k:{name.key}", f"c:{name.compact}", f"c:{name.full_compact}", f"s:{name.sorted_key}"}
    keys.update(f"i:{initials}" for initials in name.initials)
    if name.acronym_like:
        keys.add(f"a:{name.compact}")
    form = initials_form(name)
    if form is not None:
        keys.add(f"f:{form}")
        if has_initial(name):
            keys.add(f"h:{form}")
    keys.update(f"w:{word}" for word in set(name.words))
    if name.word_set:
        keys.add(word_set_key(name.word_set))
    for prefix, long_prefix in block_keys(name):
        # A prefix block is compared by spelling (the sorted keys): filed with the name's
        # sorted key, its distinct spellings are one index range of the store's keys.
        keys.update((prefix_key("p", prefix, name), prefix_key("l", long_prefix, name)))
    return keys


def word_set_key(words: Iterable[str]) -> str:
    return "v:" + " ".join(sorted(set(words)))


def prefix_key(table: str, prefix: str, name: NormalName) -> str:
    """The stored key of ``name`` in the prefix block ``prefix`` (``table``: p short, l
    long): the prefix, then the name's sorted key."""
    return f"{table}:{prefix}\x1f{name.sorted_key}"


def identity_key(prop: str, value: str) -> str:
    return f"d:{prop}\x1f{value}"


def field_key(prop: str, form: str) -> str:
    return f"b:{prop}\x1f{form}"


def initials_form(name: NormalName) -> str | None:
    """ "j r r|tolkien" for both "J. R. R. Tolkien" and "John Ronald Reuel Tolkien": where names
    equal up to initials meet."""
    if len(name.words) < 2 or len(name.words[-1]) < 2:
        return None
    return " ".join(word[0] for word in name.words[:-1]) + "|" + name.words[-1]


def has_initial(name: NormalName) -> bool:
    return any(len(word) == 1 for word in name.words[:-1])


def block_keys(name: NormalName) -> list[tuple[str, str]]:
    """(three-letter, six-letter) prefixes of the name's words of ≥ 2 letters; a name of only
    one-letter words blocks on its compact form."""
    # Sorted, so blocks fill in the same order in every process (set order follows the hash
    # seed) and equal scores keep the same reason.
    words = sorted({word for word in name.words if len(word) >= 2}) or [name.compact]
    return [(word[:3], word[:6]) for word in words]


# --------------------------------------------------------------------------------------------
# Evidence from fields (memory.field_evidence)


@dataclass
class TypeFields:
    """The field model of one type's nodes: the comparable fields, each node's values, the
    blocks of equal values that make candidates, and the fitted model."""

    kinds: dict[str, FieldKind]
    block_limit: int
    identity: tuple[str, ...] = ()
    records: dict[str, dict[str, str]] = field(default_factory=dict)
    blocks: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    model: FieldModel | None = None
    sizes: Mapping[str, int] | None = None  # block sizes in the store (see TypeIndex.sizes)

    @property
    def name_field(self) -> bool:
        return _NAME_FIELD in self.kinds

    def record(self, values: Mapping[str, Any], names: Sequence[NormalName]) -> dict[str, str]:
        """The comparable values of a node with these properties and names."""
        record = record_values(values, (prop for prop in self.kinds if prop != _NAME_FIELD))
        if self.name_field and names:
            record[_NAME_FIELD] = names[0].key
        return record

    def add(self, node_id: str, values: Mapping[str, Any], names: Sequence[NormalName]) -> None:
        record = self.records[node_id] = self.record(values, names)
        for prop, value in record.items():
            if self.kinds[prop] in BLOCKING_KINDS:
                self.blocks[(prop, block_form(self.kinds[prop], value))].append(node_id)

    def weighs(self, prop: str) -> bool:
        """Whether a field shared by two records gives the field model a say: any but the
        name (the name rules' to judge) and identities (the identity rule's)."""
        return prop != _NAME_FIELD and prop not in self.identity

    def shares_fields(self, a: Mapping[str, str], b: Mapping[str, str]) -> bool:
        """Whether two records both hold a field that :meth:`weighs`."""
        return any(prop in b for prop in a if self.weighs(prop))

    def candidates(self, record: Mapping[str, str]) -> set[str]:
        """Nodes worth weighing against a new ``record`` (write time): those sharing two of
        its blocking values, or one that few nodes hold (a birth date, an id). A record of
        one thing keeps at least two fields intact even with typos; weighing every namesake
        in a large block would cost a commit milliseconds per node."""
        hits: Counter[str] = Counter()
        rare: set[str] = set()
        for prop, value in record.items():
            if self.kinds[prop] in BLOCKING_KINDS:
                form = block_form(self.kinds[prop], value)
                block = self.blocks.get((prop, form), ())
                size = len(block)
                if self.sizes is not None:
                    size = self.sizes.get(field_key(prop, form), size)
                if size <= _RARE_BLOCK:
                    rare.update(block)
                elif size <= self.block_limit:
                    hits.update(set(block))
        return rare | {node_id for node_id, count in hits.items() if count >= 2}

    def block_pairs(self, position: Mapping[str, int]) -> np.ndarray:
        """Candidate pairs from the blocks, as pair codes ``a * n + b`` of record positions
        (``a < b``): the pairs that share two blocking values, or one that few records hold
        (:data:`_RARE_BLOCK`). Pairs sharing only one common value (a popular given name) are
        too many to weigh in a large population and rarely one thing; the name rules still
        bring every pair whose names match."""
        size = len(position)
        common: list[np.ndarray] = []
        rare: list[np.ndarray] = [np.empty(0, dtype=np.int64)]
        for block in self.blocks.values():
            members = np.unique(np.fromiter((position[n] for n in block), dtype=np.int64))
            if not 2 <= len(members) <= self.block_limit:
                continue
            first, second = np.triu_indices(len(members), 1)
            codes = members[first] * size + members[second]
            (rare if len(members) <= _RARE_BLOCK else common).append(codes)
        shared = np.empty(0, dtype=np.int64)
        if common:
            codes, counts = np.unique(np.concatenate(common), return_counts=True)
            shared = codes[counts >= 2]
        return np.union1d(shared, np.concatenate(rare))


def block_form(kind: FieldKind, value: str) -> str:
    """Equal forms share a block: ids and codes as letters and digits, dates as digits."""
    if kind in (FieldKind.IDENTIFIER, FieldKind.POSTCODE, FieldKind.DATE):
        return "".join(ch for ch in value if ch.isalnum()) or value
    return value


def fields_of(index: TypeIndex) -> TypeFields | None:
    """The type's field model state, built on first use; ``None`` when its nodes carry no
    comparable field besides names, or the type is an organisation (whose names the name
    rules know best: legal forms, acronyms)."""
    if index.fields is not None:
        return index.fields
    if index.organisation or index.fields_absent:
        return None
    # The kinds are read from a sample: a few thousand records say how a field looks.
    records = [index.values[node_id] for node_id in itertools.islice(index.nodes, _KIND_SAMPLE)]
    kinds = infer_kinds(records, index.schema, identity=index.identity_props, hints=index.compare)
    if not kinds:
        return None
    if not any(kind is FieldKind.NAME for kind in kinds.values()):
        kinds = {_NAME_FIELD: FieldKind.NAME, **kinds}
    state = TypeFields(kinds, index.thresholds.field_block, index.identity_props)
    for node_id, entry in index.nodes.items():
        state.add(node_id, index.values[node_id], entry.names)
    index.fields = state
    return state


def _fit(
    state: TypeFields, encoded: Encoded, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fit the model on the candidate pairs ``codes`` (``a * n + b`` of positions in
    ``encoded``); return the pairs' left and right positions, levels and match weights."""
    size = max(len(encoded.ids), 1)
    left, right = codes // size, codes % size
    levels = encoded.levels(left, right)
    state.model = fit_model(encoded, left, right, levels=levels)
    return left, right, levels, state.model.weights(encoded, left, right, levels=levels)


def _candidates(
    state: TypeFields, named: Iterable[tuple[str, str]]
) -> tuple[Encoded, np.ndarray, np.ndarray]:
    """The type's records encoded, and the candidate pairs as codes ``a * n + b`` of their
    positions: the ``named`` pairs (the name rules', as codes too) and the blocks' pairs."""
    encoded = Encoded.of(state.records, state.kinds)
    position = {node_id: n for n, node_id in enumerate(encoded.ids)}
    size = max(len(encoded.ids), 1)
    named_codes = np.array(
        [min(position[a], position[b]) * size + max(position[a], position[b]) for a, b in named],
        dtype=np.int64,
    )
    return encoded, np.union1d(named_codes, state.block_pairs(position)), named_codes


def model_of(state: TypeFields) -> FieldModel:
    """The fitted model, fitting it on the blocks' pairs the first time (write time)."""
    if state.model is None:
        encoded, codes, _named = _candidates(state, ())
        _fit(state, encoded, codes)
    assert state.model is not None
    return state.model


def _field_verdict(
    thresholds: Thresholds,
    model: FieldModel,
    records: tuple[Mapping[str, str], Mapping[str, str]],
    identities: tuple[Mapping[str, str], Mapping[str, str]],
    weight: float,
    *,
    explained: bool = True,
) -> NameVerdict | None:
    """What the fields say of two nodes that share some (their ``records`` and identity
    values, and the pair's match ``weight``): merge, suggest, or nothing (which also
    overrules a name match: two people of one name born decades apart). Equal identities are
    the identity rule's to merge. Without ``explained`` the verdict carries no evidence yet (a
    batch explains only the links it reports, see :func:`_cluster`)."""
    chance = probability(weight)
    if chance < thresholds.field_suggest:
        return None
    relation = _identity_relation(*identities)
    evidence = tuple(model.explain(*records)) if explained else ()
    # Different identities make a merge unlikely, never impossible: an id one typing slip
    # apart is weighed like any field; another id entirely needs near-certainty from the rest.
    near = all(
        _near_values(value, identities[1][prop])
        for prop, value in identities[0].items()
        if prop in identities[1]
    )
    # One coincidence is never a merge, however rare the value: two notes written on the
    # same day with other titles are two notes. Two fields must agree (names count).
    merge = (
        chance
        >= (thresholds.field_merge if relation is None or near else thresholds.field_merge_other_id)
        and model.agreeing(*records) >= _AGREEING_TO_MERGE
    )
    # Unexplained verdicts get their reason when explained (only those reported are).
    reason = _fields_reason(evidence, chance) if explained else f"probability {chance:.3f}"
    return NameVerdict(merge, round(chance, 3), reason, _FIELDS, evidence, weight)


def _fields_reason(evidence: Sequence[FieldEvidence], chance: float) -> str:
    agree = [e.property for e in evidence if e.weight > 0][:4]
    differ = [f"{e.property} {e.level}" for e in evidence if e.weight < 0][:2]
    text = f"fields agree: {', '.join(agree) or 'none'}"
    if differ:
        text += f"; {', '.join(differ)}"
    return f"{text}; probability {chance:.3f}"


def _with_fields(
    index: TypeIndex, verdicts: dict[tuple[str, str], NameVerdict]
) -> dict[tuple[str, str], NameVerdict]:
    """The name rules' ``verdicts`` judged again with the fields: every pair that shares a
    field besides names (found by a name or by equal field values) is the field model's to
    decide. The pairs are weighed as arrays; only those the model or the names put forward
    become verdicts."""
    state = fields_of(index)
    if state is None:
        return verdicts
    encoded, codes, named = _candidates(state, verdicts)
    if not len(codes):
        return verdicts
    left, right, levels, weights = _fit(state, encoded, codes)
    # Only a field besides names and identities gives the fields a say: identities alone
    # are the identity rule's (GOOG and GOOGL stay two symbols, not a suggestion).
    evidence = [n for n, prop in enumerate(state.kinds) if state.weighs(prop)]
    if not evidence:
        return verdicts
    shared = (levels[:, evidence] >= 0).any(axis=1)
    likely = weights >= _log_odds(index.thresholds.field_suggest)
    visit = shared & (likely | np.isin(codes, named))
    judged = dict(verdicts)
    assert state.model is not None
    for row in np.flatnonzero(visit):
        x, y = encoded.ids[int(left[row])], encoded.ids[int(right[row])]
        pair = (x, y) if x < y else (y, x)
        if index.identity_relation(x, y) == "same":
            continue
        verdict = _field_verdict(
            index.thresholds,
            state.model,
            (state.records[x], state.records[y]),
            (index.nodes[x].identity, index.nodes[y].identity),
            float(weights[row]),
            explained=False,
        )
        if verdict is None:
            judged.pop(pair, None)
        else:
            judged[pair] = verdict
    return judged


def _log_odds(chance: float) -> float:
    """The match weight (log2 odds) of a posterior probability."""
    return math.log2(chance / (1 - chance))


# --------------------------------------------------------------------------------------------
# Evidence from embeddings


class _Cosines:
    """Cosine of two nodes' vectors, from given vectors or computed lazily from their names."""

    def __init__(
        self,
        vectors: Mapping[str, Sequence[float]] | None,
        embed: Embedder | None,
        text_of: Callable[[str], str],
        lookup: VectorLookup | None = None,
    ) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        for node_id, vector in (vectors or {}).items():
            self.vectors[node_id] = _unit(vector)
        self.embed = embed
        self.text_of = text_of
        self.lookup = lookup
        self.looked_up: set[str] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.vectors) or self.embed is not None or self.lookup is not None

    def prepare(self, node_ids: Iterable[str]) -> None:
        missing = sorted({n for n in node_ids if n not in self.vectors})
        if missing and self.lookup is not None:
            ask = [n for n in missing if n not in self.looked_up]
            self.looked_up.update(ask)
            for node_id, vector in (self.lookup(ask) if ask else {}).items():
                self.vectors[node_id] = _unit(vector)
            missing = [n for n in missing if n not in self.vectors]
        if not missing or self.embed is None:
            return
        for node_id, vector in zip(
            missing, self.embed([self.text_of(n) for n in missing]), strict=True
        ):
            self.vectors[node_id] = _unit(vector)

    def cosine(self, a: str, b: str) -> float | None:
        self.prepare((a, b))
        va, vb = self.vectors.get(a), self.vectors.get(b)
        if va is None or vb is None or va.shape != vb.shape:
            return None
        return float(np.dot(va, vb))


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


def _with_embedding(
    verdict: NameVerdict, cosine: float | None, thresholds: Thresholds
) -> NameVerdict:
    if (
        verdict.merge
        or verdict.kind != _SPELLING
        or cosine is None
        or cosine <= thresholds.embedding_cosine
    ):
        return verdict
    return NameVerdict(
        True, verdict.score, f"{verdict.reason}, embeddings agree (cosine {cosine:.2f})", _SPELLING
    )


# --------------------------------------------------------------------------------------------
# Batch resolution


def resolve(
    nodes: Iterable[Node],
    identity: Sequence[str] = (),
    *,
    evidence: Mapping[str, float] | None = None,
    created_at: Mapping[str, datetime | str | None] | None = None,
    vectors: Mapping[str, Sequence[float]] | None = None,
    embed: Embedder | None = None,
    vector_lookup: VectorLookup | None = None,
    legal_forms: bool | None = None,
    schema: Mapping[str, Mapping[str, Any]] | None = None,
    hints: TypeHints | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> Resolution:
    """Merges and suggestions among ``nodes``, all of one type whose identity properties are
    ``identity``, whose declared properties (JSON Schema ``properties``) are ``schema`` and
    whose resolution hints are ``hints``.

    ``evidence``: node id → edges + corroborations; ``created_at``: node id → first version
    time (both choose the canonical node). ``vectors`` (node id → embedding), ``vector_lookup``
    (node ids → their embeddings, asked only for the nodes of promotable pairs) or ``embed``
    (names → embeddings) add embedding evidence. ``legal_forms``: whether short legal forms
    (Co, AG, SE, …) are dropped from names; by default when the type is an organisation
    (:func:`kgot.memory.names.is_organisation_type`).
    """
    node_list = list(nodes)
    if not node_list:
        return Resolution()
    labels = sorted({node.label for node in node_list})
    if len(labels) > 1:
        raise ValueError(
            f"resolve compares nodes of one type, got {', '.join(labels)}; use resolve_all"
        )
    hints = hints or TypeHints()
    index = TypeIndex(
        labels[0],
        tuple(identity),
        is_organisation_type(labels[0]) if legal_forms is None else legal_forms,
        hints.thresholds(thresholds),
        schema=schema or {},
        compare=hints.compare,
    )
    for node in node_list:
        index.add(node)
    cosines = _Cosines(vectors, embed, lambda n: index.nodes[n].names[0].raw, vector_lookup)
    verdicts = _with_fields(index, _candidate_verdicts(index))
    if cosines.enabled:
        promotable = [pair for pair, v in verdicts.items() if not v.merge and v.kind == _SPELLING]
        cosines.prepare(node_id for pair in promotable for node_id in pair)
        for pair in promotable:
            verdicts[pair] = _with_embedding(verdicts[pair], cosines.cosine(*pair), thresholds)
    return _cluster(index, verdicts, evidence or {}, created_at or {})


def resolve_all(
    nodes: Iterable[Node],
    identity_by_type: Mapping[str, Sequence[str]] | None = None,
    *,
    schemas_by_type: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    hints_by_type: Mapping[str, TypeHints] | None = None,
    **options: Any,
) -> Resolution:
    """:func:`resolve` per type (with its schema and hints from ``schemas_by_type`` and
    ``hints_by_type``): nodes of different types are never compared."""
    by_type: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        by_type[node.label].append(node)
    merges: list[Merge] = []
    suggestions: list[Suggestion] = []
    for label in sorted(by_type):
        part = resolve(
            by_type[label],
            (identity_by_type or {}).get(label, ()),
            schema=(schemas_by_type or {}).get(label),
            hints=(hints_by_type or {}).get(label),
            **options,
        )
        merges.extend(part.merges)
        suggestions.extend(part.suggestions)
    return Resolution(tuple(merges), tuple(suggestions))


def _candidate_verdicts(index: TypeIndex) -> dict[tuple[str, str], NameVerdict]:
    """Every candidate pair of nodes (ids sorted) with its best verdict."""
    verdicts: dict[tuple[str, str], NameVerdict] = {}

    def offer(a: str, b: str, verdict: NameVerdict) -> None:
        pair = (a, b) if a < b else (b, a)
        current = verdicts.get(pair)
        if current is None or verdict.rank() > current.rank():
            verdicts[pair] = verdict

    # Identity: equal values link, unless another identity property differs.
    for (prop, value), ids in index.by_identity.items():
        for a, b in _group_pairs(ids):
            if index.identity_relation(a, b) == "same":
                offer(a, b, NameVerdict(True, 1.0, f"same {prop} '{value}'", _IDENTITY))

    rows_seen: set[tuple[int, int]] = set()
    # Many nodes share a spelling ("John Smith"); each pair of spellings is judged once.
    judged: dict[tuple[NormalName, NormalName], NameVerdict | None] = {}
    for i, j in _candidate_rows(index):
        a, b = index.name_node[i], index.name_node[j]
        key = (i, j) if i < j else (j, i)
        if a == b or key in rows_seen:
            continue
        rows_seen.add(key)
        if index.identity_relation(a, b) == "different":
            continue
        names = (index.names[i], index.names[j])
        if names in judged:
            verdict = judged[names]
        else:
            verdict = judged[names] = compare_names(*names, index.thresholds)
        if verdict is not None:
            offer(a, b, verdict)
    return verdicts


def _candidate_rows(index: TypeIndex) -> Iterator[tuple[int, int]]:
    """Pairs of name rows worth comparing, from the blocks; never all pairs."""
    limit = index.thresholds.max_block
    # Equal keys: small groups pairwise (so a conflict in the group is seen), large ones chained.
    for table in (index.by_key, index.by_compact, index.by_sorted):
        for rows in table.values():
            yield from _group_pairs(rows)
    # Acronyms against initials, unless so many names have those initials that the acronym
    # says nothing.
    for compact, rows in index.by_acronym.items():
        expanded = index.by_initials.get(compact, ())
        if len(expanded) <= index.thresholds.max_containing:
            yield from ((i, j) for i in rows for j in expanded)
    # Initials against full first names, within one surname and the same first letters.
    # These only ever suggest, so one node per spelling is enough (the others of that spelling
    # merge with it, and suggestions are reported between canonical nodes).
    for rows in index.by_initials_form.values():
        spellings = list({index.names[row]: row for row in reversed(rows)}.values())[:limit]
        for i in spellings:
            if has_initial(index.names[i]):
                yield from ((i, j) for j in spellings)
    # Spelling: prefix blocks, cdist under the suggestion cut-off.
    cutoff = index.thresholds.suggest * 100
    for rows in _fuzzy_blocks(index):
        texts = [index.names[row].sorted_key for row in rows]
        scores = process.cdist(texts, texts, scorer=fuzz.ratio, score_cutoff=cutoff, workers=1)
        for x, y in zip(*np.nonzero(np.triu(scores, 1)), strict=True):
            yield rows[int(x)], rows[int(y)]
    # Containment: a name whose words few other names contain.
    for row, name in enumerate(index.names):
        for other in _containing_rows(index, name, index.thresholds.max_containing):
            yield row, other


def _group_pairs(items: Sequence[Any], pairwise_up_to: int = 40) -> list[tuple[Any, Any]]:
    unique = list(dict.fromkeys(items))
    if len(unique) <= pairwise_up_to:
        return [(x, y) for n, x in enumerate(unique) for y in unique[n + 1 :]]
    return [(unique[0], y) for y in unique[1:]]


def _fuzzy_blocks(index: TypeIndex) -> Iterable[list[int]]:
    """Rows sharing a word prefix; a block over ``max_block`` rows is replaced by its
    six-letter sub-blocks (a typo in a very common word's first six letters is missed)."""
    limit = index.thresholds.max_block
    for prefix, rows in index.by_prefix.items():
        unique = list(dict.fromkeys(rows))
        if len(unique) < 2:
            continue
        if len(unique) <= limit:
            yield unique
            continue
        for long_prefix in sorted(
            {long for name_row in unique for _, long in block_keys(index.names[name_row])}
        ):
            if not long_prefix.startswith(prefix):
                continue
            sub = list(dict.fromkeys(index.by_long_prefix[long_prefix]))
            if 2 <= len(sub) <= limit:
                yield sub


def _containing_rows(index: TypeIndex, name: NormalName, limit: int) -> list[int]:
    """Rows whose words include all of ``name``'s (and more), if there are at most ``limit``."""
    sized = sorted(
        (index.block_size("w:" + word, posting), word, posting)
        for word in set(name.words)
        for posting in [index.by_word.get(word, [])]
    )
    if not sized or sized[0][0] > limit * 4 + 1:
        return []
    found = set(sized[0][2])
    for _size, _word, posting in sized[1:]:
        found &= set(posting)
    rows = sorted(r for r in found if len(index.names[r].words) > len(name.words))
    return rows if len(rows) <= limit else []


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = self.parent.setdefault(x, x)
        while root != self.parent[root]:
            root = self.parent[root]
        while x != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _components(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    union = _UnionFind()
    for a, b in pairs:
        union.union(a, b)
    groups: dict[str, list[str]] = defaultdict(list)
    for node_id in union.parent:
        groups[union.find(node_id)].append(node_id)
    return groups


def _conflicting(
    index: TypeIndex, members: Iterable[str], weighed: Mapping[str, str] | None = None
) -> bool:
    """Whether the members hold two identity values of one property that are two things (a
    value one typing slip from another is not). Members the field model merged, having
    weighed their identities (``weighed``: member → its group), never conflict with each
    other."""
    seen: dict[str, dict[str, str]] = defaultdict(dict)  # prop -> value -> group
    for node_id in members:
        group = (weighed or {}).get(node_id, node_id)
        for prop, value in index.nodes[node_id].identity.items():
            for other, other_group in seen[prop].items():
                if other_group != group and not _near_values(value, other):
                    return True
            seen[prop].setdefault(value, group)
    return False


def _near_values(value: str, other: str) -> bool:
    """Equal, or one edit (a transposition included) apart on values long enough for that to
    be a typing slip (``GOOG`` and ``GOOGL`` are two symbols)."""
    if value == other:
        return True
    if min(len(value), len(other)) < _NEAR_IDENTITY_LENGTH:
        return False
    return Levenshtein.distance(value, other) <= 1 or (
        sorted(value) == sorted(other)
        and sum(x != y for x, y in zip(value, other, strict=False)) == 2
    )


def _cluster(
    index: TypeIndex,
    verdicts: Mapping[tuple[str, str], NameVerdict],
    evidence: Mapping[str, float],
    created_at: Mapping[str, datetime | str | None],
) -> Resolution:
    merge_pairs = {pair: v for pair, v in verdicts.items() if v.merge}
    suggest_pairs = {pair: v for pair, v in verdicts.items() if not v.merge}
    # A group that would join different identities is not merged on names; if identity
    # links alone still conflict (a chain across two identity properties), nothing merges.
    for only_identity in (False, True):
        components = _components(merge_pairs)
        component_of = {member: root for root, members in components.items() for member in members}
        weighed = {
            member: root
            for root, members in _components(
                pair for pair, verdict in merge_pairs.items() if verdict.kind == _FIELDS
            ).items()
            for member in members
        }
        bad = {
            root for root, members in components.items() if _conflicting(index, members, weighed)
        }
        if not bad:
            break
        for pair, verdict in list(merge_pairs.items()):
            # identity links, and field-model links, which weighed the identities already
            trusted = verdict.kind in (_IDENTITY, _FIELDS)
            if component_of[pair[0]] in bad and (only_identity or not trusted):
                del merge_pairs[pair]
                suggest_pairs[pair] = NameVerdict(
                    False, verdict.score, f"{verdict.reason}, but identities conflict", "conflict"
                )

    # Ties end on the id, not on input order, so the same graph always gives the same answer.
    def priority(node_id: str) -> tuple[float, datetime, str]:
        return (-float(evidence.get(node_id, 0)), _as_datetime(created_at.get(node_id)), node_id)

    canonical: dict[str, str] = {}
    merges: list[Merge] = []
    groups = _components(merge_pairs)
    root_of = {member: root for root, members in groups.items() for member in members}
    links_of: dict[str, list[tuple[tuple[str, str], NameVerdict]]] = defaultdict(list)
    for pair, verdict in merge_pairs.items():
        links_of[root_of[pair[0]]].append((pair, verdict))
    for root, members in groups.items():
        ordered = sorted(members, key=priority)
        for member in ordered:
            canonical[member] = ordered[0]
        weakest_pair, weakest = min(links_of[root], key=lambda link: link[1].score)
        weakest = _explained(index, weakest_pair, weakest)
        # The field model's other links are explained by the weakest one's evidence.
        links = [
            weakest,
            *(v for pair, v in links_of[root] if pair != weakest_pair and v.kind != _FIELDS),
        ]
        reasons = list(dict.fromkeys(v.reason for v in sorted(links, key=lambda v: -v.score)))
        reason = "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
        merges.append(
            Merge(
                canonical=ordered[0],
                aliases=tuple(sorted(ordered[1:])),
                type=index.type,
                score=round(weakest.score, 3),
                reason=reason,
                evidence=weakest.evidence,
                weight=weakest.weight,
            )
        )
    best: dict[tuple[str, str], NameVerdict] = {}
    asked: dict[tuple[str, str], tuple[str, str]] = {}  # canonical pair -> the pair judged
    for (a, b), verdict in suggest_pairs.items():
        ca, cb = canonical.get(a, a), canonical.get(b, b)
        if ca == cb:
            continue
        pair = (ca, cb) if ca < cb else (cb, ca)
        if pair not in best or verdict.score > best[pair].score:
            best[pair] = verdict
            asked[pair] = (a, b)
    suggestions = []
    for pair, verdict in best.items():
        v = _explained(index, asked[pair], verdict)
        suggestions.append(
            Suggestion(pair, index.type, round(v.score, 3), v.reason, v.evidence, v.weight)
        )
    merges.sort(key=lambda m: (m.type, m.canonical))
    suggestions.sort(key=lambda s: (-s.score, s.nodes))
    return Resolution(tuple(merges), tuple(suggestions))


def _explained(index: TypeIndex, pair: tuple[str, str], verdict: NameVerdict) -> NameVerdict:
    """``verdict`` with the field model's evidence and the reason it gives, when the fields
    decided it and the batch left the explaining for the links it reports."""
    state = index.fields
    if verdict.kind != _FIELDS or verdict.evidence or state is None or state.model is None:
        return verdict
    a, b = pair
    evidence = tuple(state.model.explain(state.records[a], state.records[b]))
    return dataclasses.replace(
        verdict, evidence=evidence, reason=_fields_reason(evidence, verdict.score)
    )


_NEVER = datetime.max.replace(tzinfo=UTC)


def _as_datetime(value: datetime | str | None) -> datetime:
    """Unknown times sort last; naive times are taken as UTC."""
    return parse_instant(value) or _NEVER


# --------------------------------------------------------------------------------------------
# Write time


class ResolutionIndex:
    """The blocks of :func:`resolve`, kept for the nodes of a graph so that one new node can be
    matched in O(candidates): build it once (:meth:`build`), keep it current with :meth:`add`
    and :meth:`remove`, ask :func:`match_existing`.

    A type's blocks are built when that type is first asked about or changed: a write of notes
    does not pay for the blocks of the entity's people and companies.
    """

    def __init__(
        self,
        identity_by_type: Mapping[str, Sequence[str]] | None = None,
        *,
        legal_forms: Mapping[str, bool] | None = None,
        schemas_by_type: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        hints_by_type: Mapping[str, TypeHints] | None = None,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
    ) -> None:
        self.identity_by_type = dict(identity_by_type or {})
        self.schemas_by_type = dict(schemas_by_type or {})
        self.hints_by_type = dict(hints_by_type or {})
        self.legal_forms = dict(legal_forms or {})
        self.thresholds = thresholds
        self._types: dict[str, TypeIndex] = {}
        self._pending: dict[str, list[Node]] = {}  # by type: nodes not in blocks yet

    @classmethod
    def build(
        cls,
        nodes: Iterable[Node],
        identity_by_type: Mapping[str, Sequence[str]] | None = None,
        **options: Any,
    ) -> ResolutionIndex:
        index = cls(identity_by_type, **options)
        for node in nodes:
            index._pending.setdefault(node.label, []).append(node)
        return index

    def type_index(self, label: str) -> TypeIndex | None:
        """The blocks of ``label``'s nodes (built now if they were not), or None when the
        index holds no node of that type."""
        if label in self._pending:
            return self.for_type(label)
        return self._types.get(label)

    def for_type(self, label: str) -> TypeIndex:
        found = self._types.get(label)
        if found is None:
            hints = self.hints_by_type.get(label) or TypeHints()
            found = TypeIndex(
                label,
                tuple(self.identity_by_type.get(label, ())),
                self.legal_forms.get(label, is_organisation_type(label)),
                hints.thresholds(self.thresholds),
                schema=self.schemas_by_type.get(label) or {},
                compare=hints.compare,
            )
            self._types[label] = found
            for node in self._pending.pop(label, ()):
                found.add(node)
        return found

    def add(self, node: Node) -> None:
        self.for_type(node.label).add(node)

    def remove(self, node_id: str, label: str | None = None) -> None:
        labels = [*self._types, *self._pending]
        if label is not None and label in labels:
            labels = [label]
        for name in labels:
            if name in self._pending:
                self.for_type(name)
            type_index = self._types.get(name)
            if type_index is not None and node_id in type_index.nodes:
                type_index.remove(node_id)

    def __len__(self) -> int:
        held = sum(len(t.nodes) - len(t.removed) for t in self._types.values())
        return held + sum(len(nodes) for nodes in self._pending.values())


def match_existing(
    new_node: Node,
    existing_index: ResolutionIndex,
    *,
    vectors: Mapping[str, Sequence[float]] | None = None,
    embed: Embedder | None = None,
) -> Match | None:
    """The existing node ``new_node`` resolves onto (``merge``), or the best one it may be
    (a suggestion), or None. Only nodes of ``new_node``'s type are candidates; ``new_node``
    itself (same id) is skipped. The index is not changed."""
    index = existing_index.type_index(new_node.label)
    if index is None or not index.nodes:
        return None
    thresholds = index.thresholds
    identity = _identity_of(new_node.properties, index.identity_props)
    names = index.normalise(node_names(new_node.properties))
    best: dict[str, NameVerdict] = {}

    def offer(node_id: str, verdict: NameVerdict) -> None:
        if node_id not in best or verdict.rank() > best[node_id].rank():
            best[node_id] = verdict

    for prop, value in identity.items():
        for node_id in index.by_identity.get((prop, value), ()):
            relation = _identity_relation(identity, index.nodes[node_id].identity)
            if node_id != new_node.id and index.live(node_id) and relation == "same":
                offer(node_id, NameVerdict(True, 1.0, f"same {prop} '{value}'", _IDENTITY))
    for name in names:
        for row in _lookup_rows(index, name):
            node_id = index.name_node[row]
            if node_id == new_node.id or not index.live(node_id):
                continue
            if _identity_relation(identity, index.nodes[node_id].identity) == "different":
                continue
            verdict = compare_names(name, index.names[row], thresholds)
            if verdict is not None:
                offer(node_id, verdict)
    record = _judge_with_fields(index, new_node, names, identity, best)
    if not best:
        return None
    if vectors is not None or embed is not None:
        own = names[0].raw if names else ""
        cosines = _Cosines(
            vectors, embed, lambda n: own if n == new_node.id else index.nodes[n].names[0].raw
        )
        for node_id, verdict in list(best.items()):
            cosine = cosines.cosine(new_node.id, node_id) if verdict.kind == _SPELLING else None
            best[node_id] = _with_embedding(verdict, cosine, thresholds)
    return _explain_match(index, best, _best_match(index, best), record, identity)


def _explain_match(
    index: TypeIndex,
    best: Mapping[str, NameVerdict],
    match: Match,
    record: Mapping[str, str] | None,
    identity: Mapping[str, str],
) -> Match:
    """``match`` with the field model's reason, when the fields decided it: explained once,
    for the node the new one lands on or is suggested with, not for every candidate.

    A write never lands on a node whose identifying values it contradicts (another birth
    date, another id): landing would overwrite them, one thing's record quietly becoming
    another's. However likely the model finds the pair, it is a suggestion."""
    state = index.fields
    if best[match.node_id].kind != _FIELDS or record is None or state is None:
        return match
    assert state.model is not None
    evidence = state.model.explain(record, state.records[match.node_id])
    reason = _fields_reason(evidence, match.score)
    if not match.merge:
        return dataclasses.replace(match, reason=reason)
    known = index.nodes[match.node_id].identity
    differing = [
        *(p for p, v in identity.items() if known.get(p) not in (None, v)),
        *state.model.contradictions(evidence),
    ]
    if not differing:
        return dataclasses.replace(match, reason=reason)
    contradicted = ", ".join(dict.fromkeys(differing))
    return dataclasses.replace(
        match, merge=False, reason=f"{reason}; not merged at write time: {contradicted} differ"
    )


def _judge_with_fields(
    index: TypeIndex,
    new_node: Node,
    names: Sequence[NormalName],
    identity: Mapping[str, str],
    best: dict[str, NameVerdict],
) -> dict[str, str] | None:
    """Judge ``new_node`` against the existing nodes it shares fields with (found by name or
    by an equal field value), as :func:`resolve` does: the field model's verdict replaces the
    name rules' in ``best``, and a pair the fields say are two things is dropped (a second
    person of the same name lands on a new node, not on the first one's). Returns the new
    node's record (``None``: the fields had no say)."""
    state = fields_of(index)
    if state is None:
        return None
    values = {k: v for k, v in new_node.properties.items() if not k.startswith("_")}
    record = state.record(values, names)
    if not any(state.weighs(prop) for prop in record):
        return None
    model = model_of(state)
    for node_id in set(best) | state.candidates(record):
        other = state.records.get(node_id)
        if node_id == new_node.id or not index.live(node_id) or other is None:
            continue
        known = index.nodes[node_id].identity
        if not state.shares_fields(record, other) or _identity_relation(identity, known) == "same":
            continue
        verdict = _field_verdict(
            index.thresholds,
            model,
            (record, other),
            (identity, known),
            model.weight(record, other),
            explained=False,
        )
        if verdict is None:
            best.pop(node_id, None)
        else:
            best[node_id] = verdict
    return record


def _best_match(index: TypeIndex, best: dict[str, NameVerdict]) -> Match:
    # Two existing nodes the new one would merge with, under different identities: ambiguous.
    merging = [node_id for node_id, v in best.items() if v.merge]
    if len(merging) > 1 and _conflicting(index, merging):
        for node_id in merging:
            verdict = best[node_id]
            best[node_id] = NameVerdict(False, verdict.score, verdict.reason, "conflict")
    node_id, verdict = max(
        best.items(), key=lambda item: (item[1].rank(), -index.nodes[item[0]].order)
    )
    return Match(node_id, round(verdict.score, 3), verdict.reason, verdict.merge)


def _lookup_rows(index: TypeIndex, name: NormalName) -> set[int]:
    """Rows of the index worth comparing with ``name``: the blocks it falls in."""
    thresholds = index.thresholds
    rows: set[int] = set()
    for table, key in (
        (index.by_key, name.key),
        (index.by_compact, name.compact),
        (index.by_compact, name.full_compact),
        (index.by_sorted, name.sorted_key),
    ):
        rows.update(table.get(key, ()))
    if name.acronym_like:
        expanded = index.by_initials.get(name.compact, ())
        if index.block_size("i:" + name.compact, expanded) <= thresholds.max_containing:
            rows.update(expanded)
    for initials in name.initials:
        holding = index.by_initials.get(initials, ())
        if index.block_size("i:" + initials, holding) < thresholds.max_containing:
            rows.update(index.by_acronym.get(initials, ()))
    form = initials_form(name)
    if form is not None:
        same_form = index.by_initials_form.get(form, [])
        if has_initial(name):
            rows.update(same_form[: thresholds.max_block])
        else:
            rows.update(r for r in same_form if has_initial(index.names[r]))
    cutoff = thresholds.suggest * 100
    for prefix, long_prefix in block_keys(name):
        block = index.by_prefix.get(prefix, [])
        if index.block_size("p:" + prefix, block) > thresholds.max_block:
            block = index.by_long_prefix.get(long_prefix, [])
        if block:
            texts = [index.names[row].sorted_key for row in block]
            for _, _, position in process.extract(
                name.sorted_key, texts, scorer=fuzz.ratio, score_cutoff=cutoff, limit=None
            ):
                rows.add(block[position])
    rows.update(_containing_rows(index, name, thresholds.max_containing))
    rows.update(_contained_rows(index, name, thresholds.max_containing))
    return rows


def _contained_rows(index: TypeIndex, name: NormalName, limit: int) -> list[int]:
    """Rows whose words are a strict subset of ``name``'s, if at most ``limit``."""
    words = name.word_set
    # Count, per row, how many of the name's words it holds (a row is posted once per word
    # it has): a row all of whose words are counted is a subset. Words too common to walk
    # (over 2,000 rows) are not walked but still count for the rows found through the others.
    skipped: set[str] = set()
    walked: list[Sequence[int]] = []
    for word in words:
        posting = index.by_word.get(word, ())
        if index.block_size("w:" + word, posting) > 2000:
            skipped.add(word)
        else:
            walked.append(posting)
    counts = Counter(chain.from_iterable(walked))  # counted in C: the hot loop of a write
    size = len(name.words)
    found = []
    for row, count in counts.items():
        other = index.names[row]
        if len(other.words) >= size:
            continue
        held = count + (len(skipped & other.word_set) if skipped else 0)
        if held == len(other.word_set) and other.word_set != words:
            found.append(row)
    return sorted(found) if len(found) <= limit else []


# --------------------------------------------------------------------------------------------
# Explaining one pair (`kgot memory resolve --explain A B`)


@dataclass(frozen=True)
class PairExplanation:
    """Why :func:`resolve` would merge two nodes, suggest them, or keep them apart, taken on
    their own (a group can still join them through a third node): what the name rules say,
    what the identities say, and each shared field's comparison and weight under the model
    estimated from the entity's nodes of the type."""

    nodes: tuple[str, str]
    type: str
    decision: str  # "merge", "suggest" or "separate"
    reason: str
    names: NameVerdict | None
    identity: str | None  # "same", "different" or None (no identity value in common)
    evidence: tuple[FieldEvidence, ...] = ()
    prior_weight: float | None = None  # log2 prior odds of the field model
    weight: float | None = None  # the pair's match weight, when the fields had a say
    probability: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "type": self.type,
            "decision": self.decision,
            "reason": self.reason,
            "names": None
            if self.names is None
            else {
                "merge": self.names.merge,
                "score": self.names.score,
                "reason": self.names.reason,
            },
            "identity": self.identity,
            "prior_weight": None if self.prior_weight is None else round(self.prior_weight, 2),
            "weight": None if self.weight is None else round(self.weight, 2),
            "probability": None if self.probability is None else round(self.probability, 4),
            "evidence": [e.to_json() for e in self.evidence],
        }

    def lines(self) -> list[str]:
        """The explanation for people: a headline, the names, the identity, then one line per
        field (its two values, how they compare, and the weight it adds)."""
        a, b = self.nodes
        head = f"{self.type} {a} and {b}: {self.decision} ({self.reason})"
        names = self.names
        out = [
            head,
            "  names: "
            + (
                "unrelated"
                if names is None
                else f"{names.reason} (the name rules would "
                f"{'merge' if names.merge else 'suggest'}, score {names.score:.3f})"
            ),
            f"  identity: {self.identity or 'no value in common'}",
        ]
        if self.weight is None:
            out.append("  fields: none besides names and identities in common; names decide")
            return out
        width = max([len(e.property) for e in self.evidence] + [5])
        out.append(f"  {'prior':<{width}}  {self.prior_weight:+.1f}")
        for e in self.evidence:
            shown = f"{e.values[0]!r} | {e.values[1]!r}"
            out.append(f"  {e.property:<{width}}  {e.weight:+.1f}  {e.level}: {shown}")
        out.append(f"  {'total':<{width}}  {self.weight:+.1f}  probability {self.probability:.4f}")
        return out


def explain_pair(
    nodes: Iterable[Node],
    a: str,
    b: str,
    identity: Sequence[str] = (),
    *,
    schema: Mapping[str, Mapping[str, Any]] | None = None,
    hints: TypeHints | None = None,
    legal_forms: bool | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> PairExplanation:
    """How :func:`resolve` judges nodes ``a`` and ``b`` among ``nodes`` (all of their type:
    the field model is estimated from the whole population, as in a batch).

    Raises:
        ValueError: ``a`` or ``b`` is not among ``nodes``, or their types differ.
    """
    node_list = list(nodes)
    by_id = {node.id: node for node in node_list}
    missing = [node_id for node_id in (a, b) if node_id not in by_id]
    if missing:
        raise ValueError(f"no node {missing[0]!r} among the nodes to compare")
    label = by_id[a].label
    if by_id[b].label != label:
        raise ValueError(
            f"{a!r} is a {label} and {b!r} a {by_id[b].label}: only nodes of one type are "
            "ever the same thing"
        )
    hints = hints or TypeHints()
    thresholds = hints.thresholds(thresholds)
    index = TypeIndex(
        label,
        tuple(identity),
        is_organisation_type(label) if legal_forms is None else legal_forms,
        thresholds,
        schema=schema or {},
        compare=hints.compare,
    )
    for node in node_list:
        if node.label == label:
            index.add(node)
    names = max(
        (
            verdict
            for x in index.nodes[a].names
            for y in index.nodes[b].names
            if (verdict := compare_names(x, y, thresholds)) is not None
        ),
        key=NameVerdict.rank,
        default=None,
    )
    relation = index.identity_relation(a, b)
    explained = PairExplanation((a, b), label, "separate", "", names, relation)
    state = fields_of(index)
    if state is not None and state.shares_fields(state.records[a], state.records[b]):
        encoded, codes, _named = _candidates(state, {*_candidate_verdicts(index), (a, b)})
        _fit(state, encoded, codes)
        assert state.model is not None
        model = state.model
        weight = model.weight(state.records[a], state.records[b])
        verdict = _field_verdict(
            thresholds,
            model,
            (state.records[a], state.records[b]),
            (index.nodes[a].identity, index.nodes[b].identity),
            weight,
        )
        explained = dataclasses.replace(
            explained,
            evidence=tuple(model.explain(state.records[a], state.records[b])),
            prior_weight=math.log2(model.prior / (1 - model.prior)),
            weight=weight,
            probability=probability(weight),
        )
        if relation != "same":
            return _decided(explained, verdict, "the fields say two things")
    if relation == "same":
        shared = sorted(set(index.nodes[a].identity.items()) & set(index.nodes[b].identity.items()))
        prop, value = shared[0]
        return dataclasses.replace(explained, decision="merge", reason=f"same {prop} '{value}'")
    if relation == "different":
        return dataclasses.replace(explained, reason="their identities differ")
    return _decided(explained, names, "the names are unrelated")


def _decided(
    explained: PairExplanation, verdict: NameVerdict | None, otherwise: str
) -> PairExplanation:
    if verdict is None:
        return dataclasses.replace(explained, reason=otherwise)
    decision = "merge" if verdict.merge else "suggest"
    return dataclasses.replace(explained, decision=decision, reason=verdict.reason)
