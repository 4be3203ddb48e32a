"""Tickers as names of the companies that issue them (issue 29, item 4).

A news item says "AAPL rose 3%"; a model writing graph code makes a Company node called "AAPL".
Names alone never join it to "Apple Inc.": a ticker is not an acronym of the name. The graph
often knows better: the company itself holds a ``ticker`` (or ``symbol``) property, or an
Asset with ``symbol: AAPL`` is linked to it (``issued_by``, ``issuer``, ``stock_of``, …).
Resolution then counts the ticker as one more name of the issuer (for resolving only: the
stored node does not change), so a mention named exactly like the ticker lands on the company.

Only exact tickers count (a ticker one letter off is another security), and a ticker two
organisations claim names neither.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kgot.graph_model import Node
from kgot.memory.names import is_organisation_type

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "TICKER_PROPERTIES",
    "TickerClaims",
    "issuer_links",
    "organisation_tickers",
    "security_tickers",
    "ticker_claims",
    "ticker_names",
    "with_ticker_names",
]

# Properties that hold a security's ticker, on the security or on its issuer.
TICKER_PROPERTIES = ("ticker", "tickers", "symbol", "symbols", "ticker_symbol", "stock_symbol")
# Relationships between a security and its issuer contain one of these words.
ISSUER_WORDS = ("issu", "ticker", "stock", "share", "security", "listing", "listed")


class TickerClaims:
    """Which organisations claim each ticker (folded), as a graph is read and written. Every
    operation costs what the organisation at hand claims, never the whole graph's tickers: a
    graph is read by one :meth:`claim` per node."""

    def __init__(self) -> None:
        self._claims: dict[str, set[str]] = defaultdict(set)  # folded ticker -> organisations
        self._held: dict[str, list[str]] = defaultdict(list)  # organisation -> folded tickers
        self._shown: dict[str, str] = {}

    def claim(self, organisation: str, tickers: Iterable[str]) -> list[str]:
        """Record that ``organisation`` is known by ``tickers``; those it now alone claims."""
        for ticker in tickers:
            folded = ticker.casefold()
            if organisation not in self._claims[folded]:
                self._claims[folded].add(organisation)
                self._held[organisation].append(folded)
            self._shown.setdefault(folded, ticker)
        return self.names_of(organisation)

    def names_of(self, organisation: str) -> list[str]:
        """The tickers ``organisation`` alone claims."""
        return [
            self._shown[folded]
            for folded in sorted(self._held.get(organisation, ()))
            if len(self._claims[folded]) == 1
        ]

    def names(self) -> dict[str, list[str]]:
        """Organisation → the tickers it alone claims."""
        return {org: found for org in self._held if (found := self.names_of(org))}


def organisation_tickers(label: str, data: Mapping[str, Any]) -> list[str]:
    """An organisation node's own tickers (none for other nodes)."""
    return _tickers(data) if is_organisation_type(label) else []


def issuer_links(
    relationship: str, ends: tuple[str, str], labels: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(security, issuer) for an edge of ``relationship`` between ``ends`` (either direction)
    when it is issuer-like and links a non-organisation to an organisation (``labels``: node
    id → type)."""
    if not any(word in relationship.casefold() for word in ISSUER_WORDS):
        return []
    return [
        (security, issuer)
        for security, issuer in (ends, ends[::-1])
        if is_organisation_type(labels.get(issuer, ""))
        and not is_organisation_type(labels.get(security, ""))
    ]


def ticker_claims(graph: nx.MultiDiGraph) -> TickerClaims:
    """The tickers each organisation of ``graph`` is known by: its own ticker properties, and
    the symbols of the securities linked to it by an issuer-like relationship."""
    claims = TickerClaims()
    labels = {node_id: str(data.get("label", "")) for node_id, data in graph.nodes(data=True)}
    for node_id, data in graph.nodes(data=True):
        claims.claim(node_id, organisation_tickers(labels[node_id], data))
    for source, target, data in graph.edges(data=True):
        for security, issuer in issuer_links(
            str(data.get("relationship", "")), (source, target), labels
        ):
            claims.claim(issuer, _tickers(graph.nodes[security]))
    return claims


def ticker_names(graph: nx.MultiDiGraph) -> dict[str, list[str]]:
    """Organisation node id → the tickers it is known by (:func:`ticker_claims`); a ticker
    claimed by two organisations is left out."""
    return ticker_claims(graph).names()


def security_tickers(data: Mapping[str, Any]) -> list[str]:
    """A security's tickers (its ``symbol``, ``ticker``, …)."""
    return _tickers(data)


def with_ticker_names(nodes: Iterable[Node], tickers: Mapping[str, list[str]]) -> list[Node]:
    """``nodes`` with each organisation's tickers among its ``aliases`` (copies; the others
    unchanged): what resolution compares."""
    out = []
    for node in nodes:
        extra = tickers.get(node.id)
        if not extra:
            out.append(node)
            continue
        aliases = node.properties.get("aliases")
        known = [aliases] if isinstance(aliases, str) else list(aliases or [])
        out.append(Node(node.id, node.label, {**node.properties, "aliases": [*known, *extra]}))
    return out


def _tickers(data: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for prop in TICKER_PROPERTIES:
        value = data.get(prop)
        values = value if isinstance(value, list | tuple) else [value]
        found += [v.strip() for v in values if isinstance(v, str) and 1 < len(v.strip()) <= 12]
    return found
