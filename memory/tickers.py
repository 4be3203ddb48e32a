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
from typing import Any

import networkx as nx

from kgot.graph_model import Node
from kgot.memory.names import is_organisation_type

__all__ = ["TICKER_PROPERTIES", "ticker_names", "with_ticker_names"]

# Properties that hold a security's ticker, on the security or on its issuer.
TICKER_PROPERTIES = ("ticker", "tickers", "symbol", "symbols", "ticker_symbol", "stock_symbol")
# Relationships between a security and its issuer contain one of these words.
_ISSUER_WORDS = ("issu", "ticker", "stock", "share", "security", "listing", "listed")


def ticker_names(graph: nx.MultiDiGraph) -> dict[str, list[str]]:
    """Organisation node id → the tickers it is known by: its own ticker properties, and the
    symbols of the securities linked to it by an issuer-like relationship (either direction).
    A ticker claimed by two organisations is left out."""
    claims: dict[str, set[str]] = defaultdict(set)  # ticker (folded) -> organisations
    shown: dict[str, str] = {}
    for node_id, data in graph.nodes(data=True):
        if is_organisation_type(str(data.get("label", ""))):
            for ticker in _tickers(data):
                claims[ticker.casefold()].add(node_id)
                shown.setdefault(ticker.casefold(), ticker)
    for source, target, data in graph.edges(data=True):
        relationship = str(data.get("relationship", "")).casefold()
        if not any(word in relationship for word in _ISSUER_WORDS):
            continue
        for security, issuer in ((source, target), (target, source)):
            if not is_organisation_type(str(graph.nodes[issuer].get("label", ""))):
                continue
            if is_organisation_type(str(graph.nodes[security].get("label", ""))):
                continue
            for ticker in _tickers(graph.nodes[security]):
                claims[ticker.casefold()].add(issuer)
                shown.setdefault(ticker.casefold(), ticker)
    names: dict[str, list[str]] = defaultdict(list)
    for folded, organisations in sorted(claims.items()):
        if len(organisations) == 1:
            names[next(iter(organisations))].append(shown[folded])
    return dict(names)


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
