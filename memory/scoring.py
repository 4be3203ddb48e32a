"""Trust, freshness and ranking of facts: the arithmetic memory upkeep shares (issue 15, 3–4).

Pure functions of a fact's stored metadata, its type's upkeep settings and its use; nothing
here reads a store. Search, the upkeep pass and the prompt views all score facts through this
module, so they agree on what "fresh", "weak" and "relevant" mean.

* **Freshness** is a true half-life: ``0.5 ** (age_days / half_life_days)``; a type without a
  half-life (``half_life_days: null``) is evergreen and always 1. A fact's age runs from its own
  time when it has one: the latest of its temporal properties (``published_at``,
  ``occurred_at``, … — any property its type declares with ``format: date`` or ``date-time``,
  and the usual names when the type declares none). A news item published a year ago is a year
  old even if it was written into the graph today or re-stated since. A fact without a time of
  its own ages from its last reinforcement (a re-statement by a source), else its creation.
* **Retention** adds what use earned: a fact's strength (+0.10 per retrieval into a used answer,
  +0.20 per positive feedback, capped at 1; :class:`kgot.persistence.FactUse`) closes that share
  of the gap between its freshness and 1. ``retention = freshness + strength · (1 − freshness)``.
* **Weight** of a fact is ``confidence · retention``; the upkeep pass prunes facts of decaying
  types whose weight fell below :data:`PRUNE_BELOW`.
* **Ranking**: ``0.6·relevance + 0.15·rank_weight + 0.15·confidence + 0.10·freshness`` with
  relevance normalised to 0–1 by the caller and retention as the freshness component.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

__all__ = [
    "DEFAULT_WEIGHTS",
    "PRUNE_BELOW",
    "SECONDS_PER_DAY",
    "ScoreParts",
    "Weights",
    "age_anchor",
    "age_days",
    "fact_freshness",
    "freshness",
    "parse_instant",
    "rank",
    "retention",
    "temporal_properties",
]

SECONDS_PER_DAY = 86_400.0
PRUNE_BELOW = 0.01  # a decaying fact whose weight falls below this is pruned by upkeep
# Temporal properties looked for when a type's schema declares no date or date-time property.
CONVENTIONAL_TEMPORAL = (
    "published_at",
    "occurred_at",
    "generated_at",
    "published",
    "as_of",
    "date",
)


@dataclass(frozen=True)
class Weights:
    """How the four components add up to a ranking score (seed weights; they sum to 1)."""

    relevance: float = 0.6
    rank_weight: float = 0.15
    confidence: float = 0.15
    freshness: float = 0.10


DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True)
class ScoreParts:
    """A fact's ranking score and its four components, each 0 to 1."""

    relevance: float
    rank_weight: float
    confidence: float
    freshness: float
    weights: Weights = DEFAULT_WEIGHTS

    @property
    def score(self) -> float:
        w = self.weights
        return (
            w.relevance * self.relevance
            + w.rank_weight * self.rank_weight
            + w.confidence * self.confidence
            + w.freshness * self.freshness
        )

    def to_dict(self, digits: int = 4) -> dict[str, float]:
        return {
            "score": round(self.score, digits),
            "relevance": round(self.relevance, digits),
            "rank_weight": round(self.rank_weight, digits),
            "confidence": round(self.confidence, digits),
            "freshness": round(self.freshness, digits),
        }


def freshness(age: float, half_life_days: float | None) -> float:
    """``0.5 ** (age / half_life_days)`` for an age in days (a future date counts as age 0);
    1 for an evergreen type (``None``)."""
    if half_life_days is None:
        return 1.0
    return float(0.5 ** (max(age, 0.0) / half_life_days))


def retention(fresh: float, strength: float = 0.0) -> float:
    """Freshness with the fact's use strength closing that share of the gap to 1."""
    strength = min(max(strength, 0.0), 1.0)
    return min(1.0, fresh + strength * (1.0 - fresh))


def parse_instant(value: Any) -> datetime | None:
    """A datetime (UTC) from an ISO date or date-time string or a datetime/date; ``None`` for
    anything else, so a malformed value never breaks a read."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str) or not 4 <= len(value) <= 64:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def temporal_properties(schema: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The properties a type's schema declares as dates or date-times, in schema order; the
    conventional names (``published_at``, ``occurred_at``, …) when it declares none."""
    found = schema.get("properties") if isinstance(schema, Mapping) else None
    names = tuple(
        name
        for name, sub in (found.items() if isinstance(found, Mapping) else ())
        if isinstance(sub, Mapping) and sub.get("format") in ("date", "date-time")
    )
    return names or CONVENTIONAL_TEMPORAL


def age_days(now: datetime, instants: Iterable[datetime | None]) -> float | None:
    """Days from the latest of ``instants`` to ``now``; ``None`` when there is none."""
    latest = max((i for i in instants if i is not None), default=None)
    if latest is None:
        return None
    return (now - latest).total_seconds() / SECONDS_PER_DAY


def age_anchor(properties: Mapping[str, Any], temporal: Iterable[str]) -> datetime | None:
    """The instant a fact's age runs from (module docstring): the latest of its ``temporal``
    properties that parse, else ``_reinforced_at``, else ``_created_at``; ``None`` when it has
    none of them."""
    own = [parse_instant(properties.get(name)) for name in temporal if name in properties]
    latest = max((instant for instant in own if instant is not None), default=None)
    if latest is not None:
        return latest
    return parse_instant(properties.get("_reinforced_at")) or parse_instant(
        properties.get("_created_at")
    )


def fact_freshness(
    properties: Mapping[str, Any],
    *,
    now: datetime,
    half_life_days: float | None,
    temporal: Iterable[str] = CONVENTIONAL_TEMPORAL,
) -> tuple[float, float | None]:
    """``(freshness, age in days)`` of a fact as ``load_graph(include_meta=True)`` gives it
    (its age from :func:`age_anchor`). A fact with no instant at all counts as new."""
    age = age_days(now, [age_anchor(properties, temporal)])
    return freshness(age or 0.0, half_life_days), age


def rank(
    relevance: float,
    *,
    rank_weight: float,
    confidence: float,
    fresh: float,
    weights: Weights = DEFAULT_WEIGHTS,
) -> ScoreParts:
    """The ranking score of one fact from its four components (each clamped to 0–1)."""
    return ScoreParts(
        relevance=_unit(relevance),
        rank_weight=_unit(rank_weight),
        confidence=_unit(confidence),
        freshness=_unit(fresh),
        weights=weights,
    )


def _unit(value: float) -> float:
    if not isinstance(value, int | float) or math.isnan(value):
        return 0.0
    return min(max(float(value), 0.0), 1.0)
