"""Evidence from every typed property: a Fellegi–Sunter model of one entity's nodes of one type.

Names alone cannot tell two people called "Amy Ryan" apart, nor find a record whose name has a
typo when its birth date, address and id agree. Record linkage has a standard answer (Fellegi
and Sunter, 1969; what Splink and recordlinkage implement): compare two records field by field,
each comparison landing on a *level* (same, one typo, similar, different), and weigh each level
by how much more often it happens between records of one thing (``m``) than between records of
two things (``u``). A pair's match weight is the sum of ``log2(m / u)`` over the fields both
records have, plus the prior odds; its posterior probability decides.

The model is estimated from the entity's own data, never from labels:

* **Which fields, compared how** (:func:`infer_kinds`): every property the type declares, or the
  nodes carry, except names (the name rules of :mod:`kgot.memory.resolution` weigh those) and
  long free text. The kind comes from the schema (``format: date``, numbers, enums), the
  property's name (``postcode``, ``*_id``, ``address``, ``surname``) and its values (digits of
  an id, ``YYYYMMDD`` dates). Name parts (``given_name``, ``surname``) are names compared with
  typos in mind (Jaro–Winkler, one edit including a transposition, so ``micheal``/``michael``,
  ``jon``/``john`` and ``clark``/``clarke`` are one typo apart).
* **u** from pairs drawn at random (almost all are two different things), with the exact level
  taken from the values' frequencies (two records sharing a rare surname say more than two
  sharing a common one).
* **m** and the prior from expectation–maximisation over the candidate pairs the blocks found,
  starting from defaults that hold for typical registers; with too few pairs to estimate
  (a small graph) the defaults stand.

This module holds the comparisons and the model; :mod:`kgot.memory.resolution` decides with it.
The comparisons use rapidfuzz (already kgot's string library: C implementations of
Jaro–Winkler and the optimal-string-alignment distance), the estimation numpy.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import OSA, JaroWinkler

__all__ = [
    "FieldEvidence",
    "FieldKind",
    "FieldModel",
    "fit_model",
    "infer_kinds",
]


class FieldKind(StrEnum):
    """How a property's values are compared."""

    NAME = "name"  # a person's given name or surname, a place's name: typos are likely
    DATE = "date"  # a date: typos, a day and month swapped, the same year
    IDENTIFIER = "identifier"  # an id: equal, or one edit apart (a typing slip), else different
    POSTCODE = "postcode"  # a short code: equal, one edit apart, else different
    TEXT = "text"  # an address, a short description: similar or not
    NUMBER = "number"  # a number: equal, close, different
    CATEGORY = "category"  # a value of a small set (a state, a country): equal or different


# The levels of each kind, best agreement first; the last is disagreement.
LEVELS: dict[FieldKind, tuple[str, ...]] = {
    FieldKind.NAME: ("same", "one typo", "similar", "different"),
    FieldKind.DATE: ("same", "one typo or day and month swapped", "same year", "different"),
    FieldKind.IDENTIFIER: ("same", "one edit apart", "different"),
    FieldKind.POSTCODE: ("same", "one edit apart", "different"),
    FieldKind.TEXT: ("same", "nearly the same", "similar", "different"),
    FieldKind.NUMBER: ("same", "close", "different"),
    FieldKind.CATEGORY: ("same", "different"),
}
# m (the chance of each level between two records of one thing) before estimation: values seen
# in registers with a few percent of typos (Splink's defaults are of the same order).
DEFAULT_M: dict[FieldKind, tuple[float, ...]] = {
    FieldKind.NAME: (0.88, 0.07, 0.02, 0.03),
    FieldKind.DATE: (0.88, 0.07, 0.02, 0.03),
    FieldKind.IDENTIFIER: (0.9, 0.07, 0.03),
    FieldKind.POSTCODE: (0.9, 0.06, 0.04),
    FieldKind.TEXT: (0.8, 0.1, 0.05, 0.05),
    FieldKind.NUMBER: (0.9, 0.05, 0.05),
    FieldKind.CATEGORY: (0.95, 0.05),
}
# u (the chance of each level between two records of different things) where the data are
# too few to tell: what registers of a few thousand people show. The data's own counts are
# blended in with the weight of _PSEUDO_PAIRS pairs, so a graph of three people does not
# conclude that a shared town is proof (one town among three records is not rare).
DEFAULT_U: dict[FieldKind, tuple[float, ...]] = {
    FieldKind.NAME: (0.005, 0.002, 0.005, 0.988),
    FieldKind.DATE: (0.0005, 0.002, 0.02, 0.9775),
    FieldKind.IDENTIFIER: (0.0002, 0.0005, 0.9993),
    FieldKind.POSTCODE: (0.003, 0.02, 0.977),
    FieldKind.TEXT: (0.005, 0.002, 0.005, 0.988),
    FieldKind.NUMBER: (0.05, 0.1, 0.85),
    FieldKind.CATEGORY: (0.2, 0.8),
}
# The most m may give a field's outright disagreement: one thing's records disagree outright
# on a field now and then (a typo beyond the fuzzy levels, a move, a missing part), seldom
# more than this (FEBRL's registers show 0.05–0.2). Without the ceiling EM has a second,
# wrong solution wherever namesakes are many: it calls every pair of one name a match and
# learns that matches disagree on everything else (10,000 records of FEBRL's copies with
# their values shuffled: merge precision 0.43, and 0.00 at 20,000).
MAX_M_DIFFERENT: dict[FieldKind, float] = {
    FieldKind.NAME: 0.2,  # a given name left out, a nickname, names swapped
    FieldKind.DATE: 0.05,
    FieldKind.IDENTIFIER: 0.1,
    FieldKind.POSTCODE: 0.1,
    FieldKind.TEXT: 0.1,
    FieldKind.NUMBER: 0.15,
    FieldKind.CATEGORY: 0.1,
}
_IDENTIFYING = frozenset({FieldKind.DATE, FieldKind.IDENTIFIER})
_IDENTIFYING_WEIGHT = -3.0  # log2: disagreeing is at most 1/8 as likely within one thing
_PSEUDO_PAIRS = 50.0
DEFAULT_PRIOR = 0.05  # the share of candidate pairs that are one thing, before estimation
_FLOOR = 1e-6  # no level is impossible: one unseen coincidence must not be infinite evidence
_MIN_PAIRS_TO_ESTIMATE = 200  # fewer candidate pairs: keep the defaults (EM would overfit)
_RANDOM_PAIRS = 20_000
_EM_ROUNDS = 25
_LONG_TEXT = 80  # median length above which a property is prose, not a comparable field
_NAME_PROPERTIES = frozenset({"name", "aliases"})  # weighed by the name rules

_ID_NAME = re.compile(r"(^|_)(id|ids|number|no|code|ssn|isbn|issn|lei|cusip|isin|figi|vat)$")
_POSTCODE_NAME = re.compile(r"(post|zip|postal)_?code|^zip$|^postcode$")
_DATE_NAME = re.compile(r"(^|_)(date|dob|born|birth|birthday|day)($|_)|_(on|at)$")
_NAME_PART = re.compile(
    r"(^|_)(given|first|last|middle|family|sur|maiden|nick)_?name$|^surname$|^forename$"
)
_TEXT_NAME = re.compile(r"address|street|suburb|city|town|locality|district|county|region")
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_COMPACT_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_NOT_ALNUM = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class FieldEvidence:
    """How one field of two records compared, and what it weighed (``log2(m / u)``)."""

    property: str
    kind: FieldKind
    values: tuple[str, str]
    level: str
    weight: float

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "kind": str(self.kind),
            "values": list(self.values),
            "level": self.level,
            "weight": round(self.weight, 2),
        }


# --------------------------------------------------------------------------------------------
# Values and comparisons


def comparable(value: Any) -> str | None:
    """``value`` as the text comparisons read (NFKC, trimmed, case-folded), ``None`` when
    empty or not a scalar."""
    if value is None or isinstance(value, bool | dict | list | tuple):
        return None
    text = unicodedata.normalize("NFKC", str(value)).strip().casefold()
    return text or None


def compare(kind: FieldKind, a: str, b: str) -> int:
    """The level (an index into :data:`LEVELS`) at which two non-empty values agree."""
    if a == b:
        return 0
    if kind in (FieldKind.IDENTIFIER, FieldKind.POSTCODE):
        left, right = _alnum(a), _alnum(b)
        return 0 if left == right else 1 if OSA.distance(left, right) <= 1 else 2
    if kind is FieldKind.NAME:
        if OSA.distance(a, b) <= 1 or JaroWinkler.normalized_similarity(a, b) >= 0.94:
            return 1
        return 2 if JaroWinkler.normalized_similarity(a, b) >= 0.84 else 3
    if kind is FieldKind.DATE:
        return _compare_dates(a, b)
    if kind is FieldKind.TEXT:
        similarity = JaroWinkler.normalized_similarity(a, b)
        if similarity >= 0.95 or OSA.distance(a, b) <= 1:
            return 1
        return 2 if similarity >= 0.85 else 3
    if kind is FieldKind.NUMBER:
        return 1 if _close_numbers(a, b) else 2
    return 1  # CATEGORY: different


def _alnum(text: str) -> str:
    return _NOT_ALNUM.sub("", text)


def _date_parts(text: str) -> tuple[str, str, str] | None:
    found = _ISO_DATE.match(text) or _COMPACT_DATE.match(text)
    return (found[1], found[2], found[3]) if found else None


def _compare_dates(a: str, b: str) -> int:
    left, right = _date_parts(a), _date_parts(b)
    if left is None or right is None:
        return 1 if OSA.distance(a, b) <= 1 else 3
    if left == right:
        return 0
    digits_a, digits_b = "".join(left), "".join(right)
    swapped = (left[0], left[2], left[1]) == right
    if swapped or OSA.distance(digits_a, digits_b) <= 1:
        return 1
    return 2 if left[0] == right[0] else 3


def _close_numbers(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return OSA.distance(a, b) <= 1
    if math.isnan(x) or math.isnan(y):
        return False
    return abs(x - y) <= 0.05 * max(abs(x), abs(y)) or OSA.distance(a, b) <= 1


# --------------------------------------------------------------------------------------------
# Which fields, compared how


def infer_kinds(
    records: Sequence[Mapping[str, Any]],
    schema_properties: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    identity: Sequence[str] = (),
    hints: Mapping[str, str] | None = None,
) -> dict[str, FieldKind]:
    """The comparable fields of one type's records and how to compare each (module docstring).

    ``schema_properties``: the type's JSON Schema ``properties``; ``identity``: its identity
    properties (always identifiers); ``hints``: property → kind, from the type's declaration,
    over anything inferred (``ignore`` drops a property).
    """
    hints = dict(hints or {})
    schema_properties = schema_properties or {}
    names = set(schema_properties)
    for record in records:
        names.update(record)
    kinds: dict[str, FieldKind] = {}
    for prop in sorted(names):
        if prop in _NAME_PROPERTIES or prop.startswith("_") or prop == "label":
            continue
        hint = hints.get(prop)
        if hint == "ignore":
            continue
        if hint is not None:
            kinds[prop] = FieldKind(hint)
            continue
        values = [v for v in (comparable(r.get(prop)) for r in records) if v is not None]
        if prop in identity:
            kinds[prop] = FieldKind.IDENTIFIER
            continue
        kind = _kind_of(prop, schema_properties.get(prop) or {}, values)
        if kind is not None:
            kinds[prop] = kind
    return kinds


def _kind_of(prop: str, schema: Mapping[str, Any], values: Sequence[str]) -> FieldKind | None:
    name = prop.casefold()
    lengths = sorted(len(v) for v in values)
    if lengths and lengths[len(lengths) // 2] > _LONG_TEXT:
        return None  # prose: a description, notes
    declared = schema.get("type")
    if schema.get("format") in ("date", "date-time") or _DATE_NAME.search(name):
        return FieldKind.DATE
    if "enum" in schema or declared == "boolean":
        return FieldKind.CATEGORY
    if _NAME_PART.search(name):
        return FieldKind.NAME
    if _POSTCODE_NAME.search(name):
        return FieldKind.POSTCODE
    if _ID_NAME.search(name):
        return FieldKind.IDENTIFIER
    if declared in ("integer", "number"):
        return FieldKind.NUMBER
    if _TEXT_NAME.search(name):
        return FieldKind.TEXT
    if not values:
        return None
    if all(_date_parts(v) is not None for v in values[:200]):
        return FieldKind.DATE
    distinct = len(set(values))
    if distinct <= max(20, len(values) // 50):
        return FieldKind.CATEGORY
    if all(v.isdigit() for v in values[:200]):
        return FieldKind.IDENTIFIER if lengths[len(lengths) // 2] >= 6 else FieldKind.NUMBER
    return FieldKind.TEXT


# --------------------------------------------------------------------------------------------
# Records as arrays: the comparisons of many pairs at once


@dataclass
class Encoded:
    """One type's records as arrays, for comparing many pairs in C (rapidfuzz's ``cpdist``)
    and numpy: per field, each record's comparable text (identifiers and codes reduced to
    letters and digits, dates to ``YYYYMMDD``), a code per distinct value (-1: missing), the
    value's share of the records holding the field, and for dates and numbers their parts."""

    ids: list[str]
    kinds: dict[str, FieldKind]
    texts: dict[str, list[str]]
    codes: dict[str, np.ndarray]
    shares: dict[str, np.ndarray]
    dates: dict[str, np.ndarray] = field(default_factory=dict)  # (n, 3): year, month, day
    numbers: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(
        cls, records: Mapping[str, Mapping[str, str]], kinds: Mapping[str, FieldKind]
    ) -> Encoded:
        ids = list(records)
        encoded = cls(ids=ids, kinds=dict(kinds), texts={}, codes={}, shares={})
        for prop, kind in kinds.items():
            texts = [_normal_form(kind, records[i].get(prop)) for i in ids]
            codebook: dict[str, int] = {}
            codes = np.array(
                [-1 if t is None else codebook.setdefault(t, len(codebook)) for t in texts],
                dtype=np.int64,
            )
            counts = np.bincount(codes[codes >= 0], minlength=len(codebook)).astype(float)
            held = codes >= 0
            # The chance that another record holding the field holds this value too, blended
            # with the kind's default (a value held twice among three records is not rare).
            default = DEFAULT_U[kind][0] * _PSEUDO_PAIRS
            shares = np.zeros(len(ids))
            shares[held] = (counts[codes[held]] - 1 + default) / (counts.sum() - 1 + _PSEUDO_PAIRS)
            encoded.texts[prop] = [t or "" for t in texts]
            encoded.codes[prop] = codes
            encoded.shares[prop] = shares
            if kind is FieldKind.DATE:
                encoded.dates[prop] = np.array(
                    [_date_numbers(t) for t in encoded.texts[prop]], dtype=np.int64
                ).reshape(len(ids), 3)
            if kind is FieldKind.NUMBER:
                encoded.numbers[prop] = np.array(
                    [_number(t) for t in encoded.texts[prop]], dtype=float
                )
        return encoded

    def levels(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """``(pairs, fields)`` levels of the record pairs ``left[i]``, ``right[i]`` (row
        positions), -1 where either lacks the field; as :func:`compare` gives them."""
        out = np.full((len(left), len(self.kinds)), -1, dtype=np.int8)
        for column, (prop, kind) in enumerate(self.kinds.items()):
            codes = self.codes[prop]
            present = (codes[left] >= 0) & (codes[right] >= 0)
            exact = present & (codes[left] == codes[right])
            fuzzy = np.flatnonzero(present & ~exact)
            levels = np.zeros(len(left), dtype=np.int8)
            if len(fuzzy):
                levels[fuzzy] = self._fuzzy_levels(prop, kind, left[fuzzy], right[fuzzy])
            out[:, column] = np.where(present, levels, -1)
        return out

    def _fuzzy_levels(
        self, prop: str, kind: FieldKind, left: np.ndarray, right: np.ndarray
    ) -> np.ndarray:
        """Levels of pairs whose values differ (level 0 is excluded)."""
        last = len(LEVELS[kind]) - 1
        if kind is FieldKind.CATEGORY:
            return np.full(len(left), 1, dtype=np.int8)
        texts = self.texts[prop]
        a = [texts[i] for i in left]
        b = [texts[i] for i in right]
        edits = process.cpdist(a, b, scorer=OSA.distance, workers=1)
        if kind in (FieldKind.IDENTIFIER, FieldKind.POSTCODE):
            return np.where(edits <= 1, 1, 2).astype(np.int8)
        if kind is FieldKind.NUMBER:
            x, y = self.numbers[prop][left], self.numbers[prop][right]
            with np.errstate(invalid="ignore"):
                close = np.abs(x - y) <= 0.05 * np.maximum(np.abs(x), np.abs(y))
            return np.where(close | (edits <= 1), 1, 2).astype(np.int8)
        if kind is FieldKind.DATE:
            x, y = self.dates[prop][left], self.dates[prop][right]
            parsed = (x[:, 0] >= 0) & (y[:, 0] >= 0)
            swapped = (x[:, 0] == y[:, 0]) & (x[:, 1] == y[:, 2]) & (x[:, 2] == y[:, 1])
            year = x[:, 0] == y[:, 0]
            near = np.where(parsed, swapped | (edits <= 1), edits <= 1)
            return np.where(near, 1, np.where(parsed & year, 2, 3)).astype(np.int8)
        similarity = process.cpdist(a, b, scorer=JaroWinkler.normalized_similarity, workers=1)
        if kind is FieldKind.NAME:
            one = (edits <= 1) | (similarity >= 0.94)
            return np.where(one, 1, np.where(similarity >= 0.84, 2, last)).astype(np.int8)
        one = (similarity >= 0.95) | (edits <= 1)  # TEXT
        return np.where(one, 1, np.where(similarity >= 0.85, 2, last)).astype(np.int8)


def _normal_form(kind: FieldKind, value: str | None) -> str | None:
    """The text two values are compared as: equal forms are the same value."""
    if value is None:
        return None
    if kind in (FieldKind.IDENTIFIER, FieldKind.POSTCODE):
        return _alnum(value) or value
    if kind is FieldKind.DATE:
        parts = _date_parts(value)
        return "".join(parts) if parts else value
    return value


def _date_numbers(text: str) -> tuple[int, int, int]:
    parts = _date_parts(text) if text else None
    return (int(parts[0]), int(parts[1]), int(parts[2])) if parts else (-1, -1, -1)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


# --------------------------------------------------------------------------------------------
# The model


@dataclass
class FieldModel:
    """m and u per field and level, the prior, and the exact-value frequencies of one type."""

    kinds: dict[str, FieldKind]
    m: dict[str, np.ndarray]
    u: dict[str, np.ndarray]
    prior: float = DEFAULT_PRIOR
    # property -> value (its normal form) -> its share of the records holding the property
    frequencies: dict[str, dict[str, float]] = field(default_factory=dict)
    estimated: bool = False  # m and the prior came from EM (else the defaults)
    # property -> the share of a value left out of ``frequencies``: a stored model
    # (:meth:`to_json`) keeps only the values more common than the rarest, which all share it.
    rare_shares: dict[str, float] = field(default_factory=dict)
    _weight_tables: tuple[dict[str, list[float]], dict[str, dict[str, float]]] | None = field(
        default=None, repr=False, compare=False
    )

    def levels(self, a: Mapping[str, str], b: Mapping[str, str]) -> dict[str, int]:
        """The level of each field both records hold."""
        return {
            prop: compare(kind, a[prop], b[prop])
            for prop, kind in self.kinds.items()
            if prop in a and prop in b
        }

    def level_weight(self, prop: str, level: int, value: str | None = None) -> float:
        """``log2(m / u)`` of one field's level; an exact match on a ``value`` weighs by how
        rare the value is."""
        m = float(self.m[prop][level])
        u = float(self.u[prop][level])
        if level == 0 and value is not None:
            share = self.frequencies.get(prop, {}).get(_normal_form(self.kinds[prop], value) or "")
            if share is None:
                share = self.rare_shares.get(prop)
            if share is not None:
                u = max(share, _FLOOR)
        return math.log2(max(m, _FLOOR) / max(u, _FLOOR))

    def weight(self, a: Mapping[str, str], b: Mapping[str, str]) -> float:
        """The pair's match weight: prior log-odds plus each shared field's weight (what
        :meth:`level_weight` gives, from tables made once: a write weighs a new node against
        each candidate with this)."""
        tables, exact = self._tables()
        total = math.log2(self.prior / (1 - self.prior))
        for prop, kind in self.kinds.items():
            x, y = a.get(prop), b.get(prop)
            if x is None or y is None:
                continue
            level = 0 if x == y else compare(kind, x, y)  # (most shared values are equal)
            if level:
                total += tables[prop][level]
            else:
                form = _normal_form(kind, x) or ""
                found = exact[prop].get(form)
                total += found if found is not None else self.level_weight(prop, 0, x)
        return total

    def _tables(self) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
        """Each field's level weights, and each exact value's (by how rare it is)."""
        if self._weight_tables is None:
            tables = {
                prop: [self.level_weight(prop, level) for level in range(len(self.m[prop]))]
                for prop in self.kinds
            }
            exact = {
                prop: {
                    value: math.log2(max(float(self.m[prop][0]), _FLOOR) / max(share, _FLOOR))
                    for value, share in self.frequencies.get(prop, {}).items()
                }
                for prop in self.kinds
            }
            self._weight_tables = (tables, exact)
        return self._weight_tables

    def weights(
        self,
        encoded: Encoded,
        left: np.ndarray,
        right: np.ndarray,
        *,
        levels: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`weight` of many pairs at once (row positions in ``encoded``; their
        ``levels`` when computed already)."""
        if levels is None:
            levels = encoded.levels(left, right)
        total = np.full(len(left), math.log2(self.prior / (1 - self.prior)))
        for column, prop in enumerate(self.kinds):
            at = levels[:, column]
            present = at >= 0
            table = np.log2(np.maximum(self.m[prop], _FLOOR) / np.maximum(self.u[prop], _FLOOR))
            field_weight = table[np.maximum(at, 0)]
            exact = at == 0
            share = np.maximum(encoded.shares[prop][left], _FLOOR)
            rare = np.log2(max(float(self.m[prop][0]), _FLOOR) / share)
            field_weight = np.where(exact, rare, field_weight)
            total += np.where(present, field_weight, 0.0)
        return total

    def to_json(self) -> dict[str, Any]:
        """The model as JSON, to be stored and used again without the records it was fitted
        on. Of each field's exact-value frequencies only the values more common than the
        rarest are kept (the rarest, usually values held once, are most of them and all
        share one figure, kept as ``rare_shares``): weights are unchanged."""
        frequencies: dict[str, dict[str, float]] = {}
        rare = dict(self.rare_shares)
        for prop, shares in self.frequencies.items():
            if not shares:
                continue
            lowest = min(shares.values())
            rare[prop] = lowest
            frequencies[prop] = {v: share for v, share in shares.items() if share != lowest}
        return {
            "kinds": {prop: kind.value for prop, kind in self.kinds.items()},
            "m": {prop: [float(x) for x in values] for prop, values in self.m.items()},
            "u": {prop: [float(x) for x in values] for prop, values in self.u.items()},
            "prior": self.prior,
            "estimated": self.estimated,
            "frequencies": frequencies,
            "rare_shares": rare,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldModel:
        """A model :meth:`to_json` wrote."""
        return cls(
            kinds={prop: FieldKind(kind) for prop, kind in data["kinds"].items()},
            m={prop: np.array(values, dtype=float) for prop, values in data["m"].items()},
            u={prop: np.array(values, dtype=float) for prop, values in data["u"].items()},
            prior=float(data["prior"]),
            frequencies={p: dict(shares) for p, shares in data["frequencies"].items()},
            estimated=bool(data["estimated"]),
            rare_shares={p: float(share) for p, share in data["rare_shares"].items()},
        )

    def agreeing(self, a: Mapping[str, str], b: Mapping[str, str]) -> int:
        """How many of the fields both records hold agree (at a level the model counts as
        evidence of one thing)."""
        tables, _ = self._tables()
        return sum(
            1 for prop, level in self.levels(a, b).items() if level == 0 or tables[prop][level] > 0
        )

    def contradictions(self, evidence: Iterable[FieldEvidence]) -> list[str]:
        """The identifying fields on which ``evidence`` (of :meth:`explain`) disagrees
        outright: dates and identifiers whose disagreement the model weighs as strong evidence
        of two things (at most an eighth as likely between one thing's records). A street
        number or a date that often changes weighs less and is not identifying."""
        return [
            e.property
            for e in evidence
            if e.kind in _IDENTIFYING
            and e.level == LEVELS[e.kind][-1]
            and e.weight <= _IDENTIFYING_WEIGHT
        ]

    def explain(self, a: Mapping[str, str], b: Mapping[str, str]) -> list[FieldEvidence]:
        """Each shared field's comparison and weight, strongest first."""
        found = [
            FieldEvidence(
                prop,
                self.kinds[prop],
                (a[prop], b[prop]),
                LEVELS[self.kinds[prop]][level],
                self.level_weight(prop, level, a[prop] if level == 0 else None),
            )
            for prop, level in self.levels(a, b).items()
        ]
        return sorted(found, key=lambda e: -abs(e.weight))


def probability(weight: float) -> float:
    """The posterior probability of a match weight (log2 odds)."""
    if weight > 60:
        return 1.0
    if weight < -60:
        return 0.0
    odds = 2.0**weight
    return odds / (1 + odds)


def fit_model(
    encoded: Encoded,
    left: np.ndarray,
    right: np.ndarray,
    *,
    levels: np.ndarray | None = None,
    seed: int = 0,
) -> FieldModel:
    """Estimate the model of one type from its records and the candidate pairs its blocks
    found (``left[i]``, ``right[i]``: row positions; module docstring). Deterministic for a
    seed."""
    kinds = encoded.kinds
    model = FieldModel(
        kinds=dict(kinds),
        m={p: np.array(DEFAULT_M[k], dtype=float) for p, k in kinds.items()},
        u=_u_from_random_pairs(encoded, seed),
        frequencies={p: _frequencies(encoded, p) for p in kinds},
    )
    if len(left) >= _MIN_PAIRS_TO_ESTIMATE and kinds:
        _expectation_maximisation(model, encoded.levels(left, right) if levels is None else levels)
    return model


def _frequencies(encoded: Encoded, prop: str) -> dict[str, float]:
    texts, shares, codes = encoded.texts[prop], encoded.shares[prop], encoded.codes[prop]
    return {texts[i]: float(shares[i]) for i in range(len(texts)) if codes[i] >= 0}


def _u_from_random_pairs(encoded: Encoded, seed: int) -> dict[str, np.ndarray]:
    """u of each field's levels from pairs of records drawn at random (one sample for all
    fields, each counting the pairs that both hold it), the exact level from the values'
    counts (the chance two records holding the field share a value); both blended with the
    kind's defaults (:data:`DEFAULT_U`) so that a small graph keeps sensible weights."""
    u: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(seed)
    count = len(encoded.ids)
    draws = min(_RANDOM_PAIRS, count * (count - 1) // 2)
    left = rng.integers(0, max(count, 1), draws)
    right = rng.integers(0, max(count, 1), draws)
    keep = left != right
    sampled = encoded.levels(left[keep], right[keep]) if draws else None
    for column, (prop, kind) in enumerate(encoded.kinds.items()):
        default = np.array(DEFAULT_U[kind])
        levels = len(default)
        counts = np.zeros(levels)
        if sampled is not None:
            at = sampled[:, column]
            counts = np.bincount(at[at >= 0], minlength=levels).astype(float)
        codes = encoded.codes[prop]
        values = np.bincount(codes[codes >= 0]).astype(float)
        held = values.sum()
        equal_pairs, all_pairs = float(values @ (values - 1)) / 2, held * (held - 1) / 2
        table = np.empty(levels)
        table[0] = (equal_pairs + _PSEUDO_PAIRS * default[0]) / (all_pairs + _PSEUDO_PAIRS)
        unequal = counts[1:].sum()
        shape = (counts[1:] + _PSEUDO_PAIRS * default[1:]) / (
            unequal + _PSEUDO_PAIRS * default[1:].sum()
        )
        table[1:] = (1 - table[0]) * shape
        u[prop] = np.maximum(table, _FLOOR)
    return u


def _expectation_maximisation(model: FieldModel, levels: np.ndarray) -> None:
    """Estimate m and the prior over the candidate pairs' ``levels``; u stays as sampled."""
    props = list(model.kinds)
    prior = DEFAULT_PRIOR * 2  # blocked pairs hold far more matches than random ones
    for _ in range(_EM_ROUNDS):
        log_odds = np.full(len(levels), math.log(prior / (1 - prior)))
        for column, prop in enumerate(props):
            at = levels[:, column]
            present = at >= 0
            ratio = np.log(np.maximum(model.m[prop], _FLOOR) / np.maximum(model.u[prop], _FLOOR))
            log_odds += np.where(present, ratio[np.maximum(at, 0)], 0.0)
        posterior = 1 / (1 + np.exp(-np.clip(log_odds, -700, 700)))
        new_prior = float(np.clip(posterior.mean(), 1e-4, 0.999))
        for column, prop in enumerate(props):
            present = levels[:, column] >= 0
            weights = posterior[present]
            if weights.sum() <= 0:
                continue
            counts = np.bincount(
                levels[present, column], weights=weights, minlength=len(model.m[prop])
            )
            m = np.maximum((counts + 0.1) / (weights.sum() + 0.1 * len(counts)), 1e-4)
            model.m[prop] = _capped(m, MAX_M_DIFFERENT[model.kinds[prop]])
        converged = abs(new_prior - prior) < 1e-5
        prior = new_prior
        if converged:
            break
    model.prior = prior
    model.estimated = True


def _capped(m: np.ndarray, ceiling: float) -> np.ndarray:
    """``m`` with its last level (outright disagreement) at most ``ceiling``, the agreeing
    levels scaled up to keep their proportions (:data:`MAX_M_DIFFERENT`)."""
    if m[-1] <= ceiling:
        return m
    capped = m.copy()
    capped[:-1] *= (1 - ceiling) / m[:-1].sum()
    capped[-1] = ceiling
    return capped


def record_values(properties: Mapping[str, Any], kinds: Iterable[str]) -> dict[str, str]:
    """The comparable values of a node's ``properties`` for the model's fields."""
    values: dict[str, str] = {}
    for prop in kinds:
        value = comparable(properties.get(prop))
        if value is not None:
            values[prop] = value
    return values
