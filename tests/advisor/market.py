"""A small market graph the advisor tests share, written straight into a store (no model),
and the scripted model replies that go with it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, Store

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def at(days_ago: float, now: datetime = NOW) -> str:
    return (now - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def edge(source: str, relationship: str, target: str, **properties: Any) -> Edge:
    return Edge(source, target, relationship, relationship, properties)


def commit(
    store: Store, entity: str, nodes: Iterable[Node] = (), edges: Iterable[Edge] = ()
) -> int:
    session = store.session(entity)
    session.load_graph()
    return session.commit(
        Changeset(added_nodes=tuple(nodes), added_edges=tuple(edges)),
        Provenance(run_id="test", step="test", source_ref="test"),
    )


def change(store: Store, entity: str, node: Node) -> int:
    session = store.session(entity)
    session.load_graph()
    return session.commit(
        Changeset(changed_nodes=(node,)), Provenance(run_id="test", step="test", source_ref="b")
    )


def market(store: Store, entity: str, now: datetime = NOW) -> None:
    """Apple (held by alice), TLT in fixed income, Nvidia, Microsoft; events of the last days."""
    nodes = [
        Node("apple", "Company", {"name": "Apple", "ticker": "AAPL"}),
        Node("aapl", "Asset", {"symbol": "AAPL", "type": "stock"}),
        Node("technology", "Sector", {"name": "Technology"}),
        Node("equities", "AssetClass", {"name": "Equities"}),
        Node("fixed_income", "AssetClass", {"name": "Fixed Income"}),
        Node("tlt", "Asset", {"symbol": "TLT", "type": "etf"}),
        Node("nvidia", "Company", {"name": "Nvidia", "ticker": "NVDA"}),
        Node("nvda", "Asset", {"symbol": "NVDA", "type": "stock"}),
        Node("fed", "Institution", {"name": "Federal Reserve", "policy_rate": 4.5}),
        Node(
            "aapl_q4",
            "MarketEvent",
            {"type": "earnings", "summary": "EPS beat", "occurred_at": at(2, now)},
        ),
        Node(
            "fed_hike",
            "MarketEvent",
            {"type": "fed_decision", "summary": "rates up", "occurred_at": at(1, now)},
        ),
        Node(
            "old_shock",
            "MarketEvent",
            {"type": "indicator_release", "summary": "weak data", "occurred_at": at(30, now)},
        ),
        Node(
            "sector_news",
            "MarketEvent",
            {"type": "regulation", "summary": "chip rules", "occurred_at": at(1, now)},
        ),
        Node(
            "news_fed",
            "News",
            {"headline": "Fed raises rates", "published_at": at(1, now), "sentiment": "negative"},
        ),
    ]
    edges = [
        edge("aapl", "issued_by", "apple"),
        edge("apple", "in_sector", "technology"),
        edge("technology", "belongs_to", "equities"),
        edge("aapl", "belongs_to", "equities"),
        edge("tlt", "belongs_to", "fixed_income"),
        edge("nvda", "issued_by", "nvidia"),
        edge("nvidia", "in_sector", "technology"),
        edge("aapl_q4", "affects", "apple", direction="positive", magnitude=0.7),
        edge("fed_hike", "affects", "fixed_income", direction="negative", magnitude=0.7),
        edge("old_shock", "affects", "equities", direction="negative", magnitude=0.9),
        edge("sector_news", "affects", "technology", direction="negative", magnitude=0.5),
        edge("news_fed", "mentions", "fed"),
    ]
    commit(store, entity, nodes, edges)


def insight(
    node_id: str,
    about: str,
    *,
    action: str | None = "buy",
    strength: float = 0.8,
    age_days: float = 0.5,
    kind: str = "signal",
    basis: list[dict[str, Any]] | None = None,
    now: datetime = NOW,
) -> tuple[Node, Edge]:
    properties: dict[str, Any] = {
        "type": kind,
        "summary": f"{action or kind} {about}",
        "strength": strength,
        "generated_at": at(age_days, now),
    }
    if action is not None:
        properties["action"] = action
    if basis:
        properties["basis"] = basis
    return Node(node_id, "Insight", properties), edge(node_id, "about", about)


# A read query of the market graph, as the insight pass's RETRIEVE writes one.
QUERY = """```python
result = [
    {"id": n, "label": d["label"], "summary": d.get("summary") or d.get("headline"),
     "effects": [[e["relationship"], t] for _, t, e in G.out_edges(n, data=True)]}
    for n, d in sorted(G.nodes(data=True)) if d["label"] in ("MarketEvent", "News", "Insight")
]
```"""
