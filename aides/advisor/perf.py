"""The investment advisor's own cost and the precision of its alert rules (issue 17).

Run: ``python -m kgot.aides.advisor.perf`` (``--quick`` for 1,000 nodes and 20 users,
``--json`` for JSON lines). On a real SQLite store, an advisor entity of 10,000 nodes (assets,
companies, sectors, asset classes, events, news, insights and their edges) and 100 users of 5
holdings and 5 watched symbols each, it prints:

* the evidence pack's build time for one user (median and p95 over the users) with the graph
  prepared once per cycle (:class:`kgot.aides.advisor.evidence.MarketIndex`), and a first
  pack that prepares the graph too (target ≤ 100 ms); fact use is read from the store as in a
  cycle; the graph's load from the store is shown apart (a cycle loads it once for every
  user);
* the pack's size against its budget: the largest ratio of tokens to budget over every user
  and the budgets 300, 1,500 and 4,000 (never over: ≤ 1);
* the alert rules' evaluation for all 100 users (target ≤ 200 ms), the rules' index apart;
* precision and recall of the rules on a labelled scenario (every rule, each threshold just
  above and below, old facts, watched-only symbols, positive and neutral effects; targets
  1.0 and 1.0): the expected alerts are written down case by case, not computed by the rules.

Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows
from kgot.aides.advisor.alerts import AlertIndex, evaluate, evaluate_all
from kgot.aides.advisor.evidence import MarketIndex, build_pack, fact_strength
from kgot.aides.advisor.holdings import PositionRow
from kgot.aides.advisor.market_data import quote_from
from kgot.benchmarks import Figure, perf_main
from kgot.graph_model import Changeset, Edge, Node, count_tokens
from kgot.persistence import Provenance, Store, open_store

AREA = "advisor"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SECTORS = 20
CLASSES = ("Equities", "Fixed Income", "Commodities", "Crypto", "Cash", "Real Estate")


def _at(days: float) -> str:
    return (NOW - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _edge(source: str, relationship: str, target: str, **properties: Any) -> Edge:
    return Edge(source, target, relationship, relationship, properties)


def _commit(store: Store, entity: str, nodes: list[Node], edges: list[Edge]) -> None:
    session = store.session(entity)
    session.load_graph()
    session.commit(
        Changeset(added_nodes=tuple(nodes), added_edges=tuple(edges)),
        Provenance(run_id="perf", step="perf"),
    )


def market_graph(nodes: int) -> tuple[list[Node], list[Edge], int]:
    """A market graph of about ``nodes`` nodes; the number of assets it holds."""
    assets = max(50, nodes // 5)
    out_nodes = [Node(f"class{i}", "AssetClass", {"name": name}) for i, name in enumerate(CLASSES)]
    out_nodes += [Node(f"sector{i}", "Sector", {"name": f"Sector {i}"}) for i in range(SECTORS)]
    edges = [_edge(f"sector{i}", "belongs_to", f"class{i % len(CLASSES)}") for i in range(SECTORS)]
    for i in range(assets):
        symbol = f"S{i:05d}"
        out_nodes.append(Node(f"asset{i}", "Asset", {"symbol": symbol, "type": "stock"}))
        out_nodes.append(Node(f"co{i}", "Company", {"name": f"Company {i}", "ticker": symbol}))
        edges += [
            _edge(f"asset{i}", "issued_by", f"co{i}"),
            _edge(f"co{i}", "in_sector", f"sector{i % SECTORS}"),
            _edge(f"asset{i}", "belongs_to", f"class{i % len(CLASSES)}"),
        ]
        out_nodes.append(
            Node(
                f"event{i}",
                "MarketEvent",
                {"type": "earnings", "summary": f"results {i}", "occurred_at": _at(i % 30)},
            )
        )
        edges.append(
            _edge(
                f"event{i}",
                "affects",
                f"co{i}",
                direction=("positive", "negative", "neutral")[i % 3],
                magnitude=round((i % 10) / 10, 1),
            )
        )
        if len(out_nodes) < nodes:
            out_nodes.append(
                Node(
                    f"news{i}",
                    "News",
                    {"headline": f"News on company {i}", "published_at": _at(i % 10)},
                )
            )
            edges.append(_edge(f"news{i}", "mentions", f"co{(i * 7) % assets}"))
    i = 0
    while len(out_nodes) < nodes:
        out_nodes.append(
            Node(
                f"insight{i}",
                "Insight",
                {
                    "type": "signal",
                    "summary": f"signal {i}",
                    "action": ("buy", "sell", "hold")[i % 3],
                    "strength": round((i % 10) / 10, 1),
                    "generated_at": _at((i % 5) / 2),
                },
            )
        )
        edges.append(_edge(f"insight{i}", "about", f"asset{(i * 13) % assets}"))
        i += 1
    kept = out_nodes[:nodes]
    ids = {node.id for node in kept}
    return kept, [e for e in edges if e.source in ids and e.target in ids], assets


def measure(nodes: int = 10_000, users: int = 100) -> list[Figure]:
    count_tokens("warm up")  # the tokenizer loads once per process (about 0.1 s), not per pack
    with (
        tempfile.TemporaryDirectory(prefix="kgot-perf-advisor-") as scratch,
        open_store(str(Path(scratch) / "kgot.db")) as store,
    ):
        aide = create_aide(store, "perf", "market", program="advisor")
        graph_nodes, graph_edges, assets = market_graph(nodes)
        _commit(store, "market", graph_nodes, graph_edges)
        people = _users(store, aide.row, users, assets)
        session = store.session("market")
        started = time.perf_counter()
        graph = session.load_graph(include_meta=True, track=False)
        load = time.perf_counter() - started
        catalog = session.type_catalog()

        strength = fact_strength(session)  # fact use, read from the store as a cycle does
        cold = []
        for portfolio in people[:5]:  # a fresh index each time: nothing cached
            started = time.perf_counter()
            fresh = MarketIndex(graph, catalog, now=NOW, strength=strength)
            build_pack(fresh, portfolio.held, portfolio.watched, budget=1500)
            cold.append(time.perf_counter() - started)
        first = statistics.median(cold)

        index = MarketIndex(graph, catalog, now=NOW, strength=strength)
        timings = []
        ratio = 0.0
        for portfolio in people:
            started = time.perf_counter()
            pack = build_pack(index, portfolio.held, portfolio.watched, budget=1500)
            timings.append(time.perf_counter() - started)
            ratio = max(ratio, pack.tokens / pack.budget)
        for budget in (300, 4000):
            for portfolio in people:
                pack = build_pack(index, portfolio.held, portfolio.watched, budget=budget)
                ratio = max(ratio, pack.tokens / pack.budget)

        started = time.perf_counter()
        alert_index = AlertIndex(index)
        index_time = time.perf_counter() - started
        started = time.perf_counter()
        found = evaluate_all(alert_index, people, now=NOW)
        alert_time = time.perf_counter() - started
        precision, recall, cases = labelled_scenario(store)
    timings.sort()
    return [
        Figure(AREA, f"graph load at {nodes:,} nodes (once per cycle)", load * 1000, "ms"),
        Figure(
            AREA,
            f"evidence pack per user at {nodes:,} nodes (median of {users})",
            statistics.median(timings) * 1000,
            "ms",
            100,
        ),
        Figure(
            AREA,
            "evidence pack per user, p95",
            timings[int(len(timings) * 0.95) - 1] * 1000,
            "ms",
            100,
        ),
        Figure(AREA, "first pack, graph prepared too (median of 5)", first * 1000, "ms", 100),
        Figure(AREA, "pack tokens / budget (max; budgets 300, 1500, 4000)", ratio, "ratio", 1.0),
        Figure(
            AREA, f"alert rules' index at {nodes:,} nodes (once per cycle)", index_time * 1000, "ms"
        ),
        Figure(
            AREA,
            f"alert evaluation for {users} users ({sum(map(len, found.values()))} alerts)",
            alert_time * 1000,
            "ms",
            200,
        ),
        Figure(AREA, f"alert precision ({cases} labelled alerts)", precision, "ratio", 1.0, "min"),
        Figure(AREA, "alert recall", recall, "ratio", 1.0, "min"),
    ]


def _users(store: Store, aide: Any, count: int, assets: int) -> list[advisor_rows.Portfolio]:
    made = []
    for number in range(count):
        user = advisor_rows.add_user(
            store,
            aide,
            f"user{number}",
            risk=("conservative", "moderate", "aggressive")[number % 3],
        )
        held = [f"S{(number * 5 + k) % assets:05d}" for k in range(5)]
        watched = [f"S{(number * 11 + 3 + k) % assets:05d}" for k in range(5)]
        advisor_rows.import_positions(store, aide, user, [PositionRow(s, 10.0) for s in held])
        advisor_rows.add_watch(store, aide, user, [s for s in watched if s not in held])
        made.append(advisor_rows.portfolios(store, aide, user)[0])
    return made


# ---------------------------------------------------------------------------- the scenario


def labelled_scenario(store: Store) -> tuple[float, float, int]:
    """Precision and recall of the rules on hand-labelled cases, and how many alerts the
    labels expect."""
    aide = create_aide(store, "labels", "labelled", program="advisor")
    nodes = [
        Node("eq", "AssetClass", {"name": "Equities"}),
        Node("fi", "AssetClass", {"name": "Fixed Income"}),
        Node("tech", "Sector", {"name": "Technology"}),
    ]
    edges = [_edge("tech", "belongs_to", "eq")]
    for symbol in ("AAA", "BBB", "CCC", "DDD", "BND"):
        low = symbol.lower()
        nodes.append(Node(low, "Asset", {"symbol": symbol}))
        edges.append(_edge(low, "belongs_to", "fi" if symbol == "BND" else "eq"))
        if symbol != "BND":
            nodes.append(Node(f"{low}_co", "Company", {"name": f"{symbol} Corp"}))
            edges += [_edge(low, "issued_by", f"{low}_co"), _edge(f"{low}_co", "in_sector", "tech")]

    def insight(
        node: str, about: str, *, kind: str, action: str | None, strength: float, hours: float
    ) -> None:
        props: dict[str, Any] = {
            "type": kind,
            "summary": node,
            "strength": strength,
            "generated_at": _at(hours / 24),
        }
        if action:
            props["action"] = action
        nodes.append(Node(node, "Insight", props))
        edges.append(_edge(node, "about", about))

    def event(node: str, target: str, direction: str, magnitude: float, days: float) -> None:
        nodes.append(Node(node, "MarketEvent", {"type": "x", "occurred_at": _at(days)}))
        edges.append(_edge(node, "affects", target, direction=direction, magnitude=magnitude))

    # moderate and conservative (0.75 is under aggressive's 0.8)
    insight("sig_aaa_075", "aaa", kind="signal", action="buy", strength=0.75, hours=10)
    # too old for a signal alert (48 h), young enough to contradict the buy (7 days)
    insight("sig_aaa_old", "aaa", kind="signal", action="sell", strength=0.95, hours=60)
    # a hold and an observation never alert
    insight("sig_bbb_hold", "bbb", kind="signal", action="hold", strength=0.95, hours=5)
    insight("obs_bbb", "bbb", kind="observation", action=None, strength=0.99, hours=5)
    # about the issuer of a held asset: everyone
    insight("sig_ccc_co", "ccc_co", kind="signal", action="sell", strength=0.85, hours=20)
    # DDD is only watched: never
    insight("sig_ddd", "ddd", kind="signal", action="buy", strength=0.9, hours=3)
    event("hike", "fi", "negative", 0.7, 1)  # BND: conservative, moderate
    event("chip", "tech", "negative", 0.5, 2)  # sector: conservative only
    event("boom", "eq", "positive", 0.9, 1)  # positive: never
    event("flat", "eq", "neutral", 0.9, 1)  # neutral: never
    event("stale", "eq", "negative", 0.95, 20)  # older than every window
    event("probe", "bbb_co", "negative", 0.9, 2)  # aggressive's 3 days: all three
    _commit(store, "labelled", nodes, edges)

    people = {}
    for name, risk in (("cons", "conservative"), ("mod", "moderate"), ("aggr", "aggressive")):
        user = advisor_rows.add_user(store, aide.row, name, risk=risk)
        advisor_rows.import_positions(
            store, aide.row, user, [PositionRow(s, 1.0) for s in ("AAA", "BBB", "CCC", "BND")]
        )
        advisor_rows.add_watch(store, aide.row, user, ["DDD"])
        people[name] = advisor_rows.portfolios(store, aide.row, user)[0]
    closes = {"AAA": (100, 94), "BBB": (100, 98)}  # -6 % and -2 % on the last day
    quotes = {
        symbol: made
        for symbol, (before, after) in closes.items()
        if (
            made := quote_from(
                symbol,
                [{"day": "2026-11-18", "close": before}, {"day": "2026-11-19", "close": after}],
            )
        )
        is not None
    }
    everyone = ("cons", "mod", "aggr")
    expected = {
        *(("cons", "strong_signal:sig_aaa_075"), ("mod", "strong_signal:sig_aaa_075")),
        *((u, "strong_signal:sig_ccc_co") for u in everyone),
        *((u, "negative_impact:edge:hike-affects->fi") for u in ("cons", "mod")),
        ("cons", "negative_impact:edge:chip-affects->tech"),
        *((u, "negative_impact:edge:probe-affects->bbb_co") for u in everyone),
        *((u, "contradicting_insights:sig_aaa_075|sig_aaa_old") for u in everyone),
        *((u, "price_drop:AAA@2026-11-19") for u in ("cons", "mod")),
    }
    session = store.session("labelled")
    index = AlertIndex(
        MarketIndex(session.load_graph(include_meta=True), session.type_catalog(), now=NOW)
    )
    found = {
        (name, alert.key)
        for name, portfolio in people.items()
        for alert in evaluate(index, portfolio, now=NOW, quotes=quotes)
    }
    hits = len(found & expected)
    return (hits / len(found) if found else 0.0), hits / len(expected), len(expected)


def run(quick: bool = False) -> list[Figure]:
    """The figures at 10,000 nodes and 100 users (``quick``: 1,000 nodes and 20 users)."""
    return measure(1_000, users=20) if quick else measure()


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(
        run,
        prog="python -m kgot.aides.advisor.perf",
        quick_help="1,000 nodes, 20 users",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
