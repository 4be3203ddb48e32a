"""Pairwise precision, recall and F1 of entity resolution on a population.

A resolver's answer on a population is turned into the set of record pairs it says are one
thing, and compared with the true pairs:

* a merge cluster (``canonical`` plus ``aliases``) says every two of its members are one thing,
  and clusters that share a member are one cluster (merges are transitive);
* a suggestion says its own nodes are one thing, and nothing more (a person has not accepted
  it yet, so it joins no cluster).

Only the JSON shape of ``kgot memory resolve --json`` (``{"merges": [{"canonical",
"aliases", …}], "suggestions": [{"nodes", …}]}``) is read: it is the resolver's public contract,
so the same code measures today's model and the next one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

__all__ = [
    "Pair",
    "PairScores",
    "groups_of",
    "merge_pairs",
    "pair_of",
    "pairs_within",
    "score_pairs",
    "suggestion_pairs",
]

Pair = tuple[str, str]  # two record ids, the smaller first


def pair_of(first: str, second: str) -> Pair:
    """The pair of two ids in its one spelling (order does not matter)."""
    return (first, second) if first <= second else (second, first)


def groups_of(links: Iterable[Iterable[str]]) -> list[set[str]]:
    """The connected groups of ``links`` (each an iterable of ids said to be one thing):
    groups sharing an id become one (union-find)."""
    parent: dict[str, str] = {}

    def root(item: str) -> str:
        parent.setdefault(item, item)
        while parent[item] != item:
            parent[item] = parent[parent[item]]  # path halving keeps chains short
            item = parent[item]
        return item

    for link in links:
        members = list(link)
        for member in members:
            root(member)
        for other in members[1:]:
            parent[root(other)] = root(members[0])
    grouped: dict[str, set[str]] = {}
    for item in parent:
        grouped.setdefault(root(item), set()).add(item)
    return list(grouped.values())


def pairs_within(links: Iterable[Iterable[str]]) -> set[Pair]:
    """Every pair of ids in the same group of :func:`groups_of` ``links`` (transitive)."""
    return {
        pair_of(first, second)
        for group in groups_of(links)
        for first, second in combinations(sorted(group), 2)
    }


def merge_pairs(resolution: Mapping[str, Any]) -> set[Pair]:
    """The pairs a resolution's merges make one thing (its ``to_json()``, transitively)."""
    return pairs_within(
        [merge["canonical"], *merge["aliases"]] for merge in resolution.get("merges", ())
    )


def suggestion_pairs(resolution: Mapping[str, Any]) -> set[Pair]:
    """The pairs a resolution's suggestions propose (its ``to_json()``), each on its own."""
    return {
        pair_of(first, second)
        for suggestion in resolution.get("suggestions", ())
        for first, second in combinations(suggestion["nodes"], 2)
    }


@dataclass(frozen=True)
class PairScores:
    """How the pairs a resolver found compare with the true ones.

    Attributes:
        true_positives: found pairs that are true.
        found: pairs the resolver said are one thing.
        true: pairs that really are.
    """

    true_positives: int
    found: int
    true: int

    @property
    def precision(self) -> float:
        """Share of the found pairs that are true (1.0 when nothing was found: no claim,
        no mistake)."""
        return self.true_positives / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        """Share of the true pairs found (1.0 when there are none to find)."""
        return self.true_positives / self.true if self.true else 1.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall (0 when both are 0)."""
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


def score_pairs(found: Iterable[Pair], true: Iterable[Pair]) -> PairScores:
    """Score ``found`` pairs against the ``true`` ones (each given once, in :func:`pair_of`
    spelling)."""
    found_set, true_set = set(found), set(true)
    return PairScores(len(found_set & true_set), len(found_set), len(true_set))
