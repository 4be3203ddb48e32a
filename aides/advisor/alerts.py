"""Alerts: deterministic, explainable rules over the graph and the prices, per user.

No model is involved: an alert is a rule that matched facts, and it says which rule and which
facts (their ids, as a briefing cites them). The rules look at what a user *holds*:

``strong_signal``
    A current ``Insight`` of type ``signal`` with action ``buy`` or ``sell`` and a strength of
    at least ``signal_strength``, generated within ``signal_max_age_hours``, ``about`` a held
    asset or its issuer.
``negative_impact``
    An ``affects`` edge with direction ``negative`` and a magnitude of at least
    ``impact_magnitude`` on a held asset, its company, the company's sector or the asset class
    of the asset or sector, from an event that occurred (or an institution's edge written)
    within ``impact_max_age_days``.
``contradicting_insights``
    Two current signals about the same held asset, one ``buy`` and one ``sell``, both
    generated within ``contradiction_window_days``.
``price_drop``
    A held symbol's latest daily close at least ``price_drop_pct`` percent below the day
    before (from the advisor's price cache; the fact id is ``price:SYMBOL@DAY``).

Thresholds come from the user's risk profile (:data:`DEFAULTS`: a conservative profile alerts
earlier on risk) and may be set per user (``kgot aide user add … --threshold
impact_magnitude=0.5``). An alert's :attr:`Alert.key` is its rule and the facts it rests on;
the store keeps it unique per user, so the same alert is never made, nor sent, twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, overload

from kgot.errors import UsageError
from kgot.memory import parse_instant

if TYPE_CHECKING:
    from kgot.aides.advisor.advisor_rows import Portfolio
    from kgot.aides.advisor.evidence import MarketIndex
    from kgot.aides.advisor.market_data import Quote

RULES = ("strong_signal", "negative_impact", "contradicting_insights", "price_drop")
DEFAULTS: dict[str, dict[str, float]] = {
    "conservative": {
        "signal_strength": 0.6,
        "signal_max_age_hours": 48,
        "impact_magnitude": 0.4,
        "impact_max_age_days": 14,
        "contradiction_window_days": 7,
        "price_drop_pct": 3.0,
    },
    "moderate": {
        "signal_strength": 0.7,
        "signal_max_age_hours": 48,
        "impact_magnitude": 0.6,
        "impact_max_age_days": 7,
        "contradiction_window_days": 7,
        "price_drop_pct": 5.0,
    },
    "aggressive": {
        "signal_strength": 0.8,
        "signal_max_age_hours": 48,
        "impact_magnitude": 0.75,
        "impact_max_age_days": 3,
        "contradiction_window_days": 7,
        "price_drop_pct": 8.0,
    },
}
THRESHOLDS = tuple(DEFAULTS["moderate"])
_UNIT_RANGE = {"signal_strength", "impact_magnitude"}
# The other thresholds' ceilings: a drop is at most 100%, and an age or window of ten years
# keeps every timedelta the rules make in range (inf or 1e300 days would overflow one).
_MAXIMA = {
    "signal_max_age_hours": 87_600.0,
    "impact_max_age_days": 3_650.0,
    "contradiction_window_days": 3_650.0,
    "price_drop_pct": 100.0,
}


@dataclass(frozen=True)
class Alert:
    """One alert for one user: the rule, the facts behind it and what it says."""

    rule: str
    key: str
    severity: str  # info | warning | critical
    message: str
    facts: tuple[str, ...]
    symbol: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "key": self.key,
            "severity": self.severity,
            "message": self.message,
            "facts": list(self.facts),
            "symbol": self.symbol,
        }


@overload
def checked_thresholds(given: Mapping[str, Any]) -> dict[str, float]: ...


@overload
def checked_thresholds(
    given: Mapping[str, Any], *, drops: Literal[True]
) -> dict[str, float | None]: ...


def checked_thresholds(given: Mapping[str, Any], *, drops: bool = False) -> Mapping[str, Any]:
    """Per-user thresholds, checked. With ``drops`` (a change to a user's), ``None`` or an
    empty value is kept as ``None``: drop the user's own, so the risk profile's applies.

    Raises:
        UsageError: an unknown name, or a value that is not a number in range.
    """
    checked: dict[str, float | None] = {}
    for name, value in given.items():
        if name not in THRESHOLDS:
            raise UsageError(
                f"unknown alert threshold {name!r}; use one of {', '.join(THRESHOLDS)}"
            )
        if drops and (value is None or not str(value).strip()):
            checked[name] = None
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"threshold {name} must be a number, not {value!r}") from None
        top = 1.0 if name in _UNIT_RANGE else _MAXIMA[name]
        if not math.isfinite(number) or not 0 <= number <= top:
            raise UsageError(f"threshold {name} must be 0 to {top:g}, not {value!r}")
        checked[name] = number
    return checked


def thresholds_for(risk: str, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The thresholds of a risk profile with the user's own settings over them."""
    return {**DEFAULTS.get(risk, DEFAULTS["moderate"]), **dict(overrides or {})}


class AlertIndex:
    """What the rules look up, computed once per graph for every user: the insights about a
    node, the ``affects`` edges into it, the sectors and asset classes above it."""

    def __init__(self, market: MarketIndex) -> None:
        self.market = market
        graph = market.graph
        self.about: dict[str, list[str]] = {}
        self.affects: dict[str, list[tuple[str, str, str]]] = {}
        self.up: dict[str, list[tuple[str, str, str]]] = {}  # in_sector / belongs_to out
        for source, target, key, data in graph.edges(keys=True, data=True):
            relationship = data.get("relationship")
            if relationship == "about":
                self.about.setdefault(target, []).append(source)
            elif relationship == "affects":
                self.affects.setdefault(target, []).append((source, target, key))
            elif relationship in ("in_sector", "belongs_to"):
                self.up.setdefault(source, []).append((source, target, key))

    def exposure(self, symbol: str) -> dict[str, list[tuple[str, str, str]]]:
        """The nodes a held symbol is exposed to, each with the edges leading there from the
        symbol's seeds: the seeds themselves (no edges), sectors, asset classes."""
        reached: dict[str, list[tuple[str, str, str]]] = {}
        seeds = self.market.seeds(symbol)
        for seed in seeds:
            reached.setdefault(seed, [])
        for asset in self.market.assets.get(symbol, ()):
            for source, target, key, data in self.market.graph.out_edges(
                asset, keys=True, data=True
            ):
                if data.get("relationship") == "issued_by":
                    reached[target] = [(source, target, key)]
        frontier = list(reached)
        for _ in range(2):  # company -> sector -> asset class
            following = []
            for node in frontier:
                for edge in self.up.get(node, ()):
                    if edge[1] not in reached:
                        reached[edge[1]] = [*reached[node], edge]
                        following.append(edge[1])
            frontier = following
        return reached


def evaluate(
    index: AlertIndex,
    portfolio: Portfolio,
    *,
    now: datetime,
    quotes: Mapping[str, Quote] | None = None,
    known: set[str] | frozenset[str] = frozenset(),
) -> list[Alert]:
    """The alerts the rules find for one user's holdings, except keys in ``known``."""
    limits = thresholds_for(portfolio.user.risk, portfolio.user.thresholds)
    found: dict[str, Alert] = {}
    for symbol in portfolio.held:
        exposure = index.exposure(symbol)
        for alert in (
            *_signals(index, symbol, exposure, limits, now),
            *_impacts(index, symbol, exposure, limits, now),
            *_contradictions(index, symbol, exposure, limits, now),
            *_price_drop(symbol, (quotes or {}).get(symbol), limits),
        ):
            if alert.key not in known:
                found.setdefault(alert.key, alert)
    return list(found.values())


def _edge_id(edge: tuple[str, str, str]) -> str:
    from kgot.aides.advisor.evidence import edge_fact_id

    return edge_fact_id(edge[0], edge[2], edge[1])


def _name(index: AlertIndex, node: str) -> str:
    data = index.market.graph.nodes[node]
    for key in ("name", "symbol", "headline", "summary"):
        if isinstance(data.get(key), str) and data[key].strip():
            return str(data[key])
    return node


def _signals(
    index: AlertIndex,
    symbol: str,
    exposure: Mapping[str, Any],
    limits: Mapping[str, float],
    now: datetime,
) -> list[Alert]:
    graph = index.market.graph
    seeds = set(index.market.seeds(symbol))
    made = []
    for seed in seeds:
        for insight in index.about.get(seed, ()):
            data = graph.nodes[insight]
            if data.get("label") != "Insight" or data.get("type") != "signal":
                continue
            action = data.get("action")
            strength = data.get("strength")
            if action not in ("buy", "sell") or not isinstance(strength, int | float):
                continue
            if strength < limits["signal_strength"]:
                continue
            generated = parse_instant(data.get("generated_at"))
            max_age = timedelta(hours=limits["signal_max_age_hours"])
            if generated is None or now - generated > max_age or generated - now > max_age:
                continue
            about = next(iter(graph[insight][seed]))
            made.append(
                Alert(
                    rule="strong_signal",
                    key=f"strong_signal:{insight}",
                    severity="warning" if action == "sell" else "info",
                    message=(
                        f"{action.upper()} signal on {symbol} (strength {strength:.2f}, "
                        f"{_hours(now - generated)} old): {data.get('summary', '')}"
                    ),
                    facts=(f"node:{insight}", _edge_id((insight, seed, about))),
                    symbol=symbol,
                )
            )
    return made


def _impacts(
    index: AlertIndex,
    symbol: str,
    exposure: Mapping[str, list[tuple[str, str, str]]],
    limits: Mapping[str, float],
    now: datetime,
) -> list[Alert]:
    graph = index.market.graph
    made = []
    for target, path in exposure.items():
        for edge in index.affects.get(target, ()):
            data = graph.edges[edge[0], edge[1], edge[2]]
            magnitude = data.get("magnitude")
            if data.get("direction") != "negative" or not isinstance(magnitude, int | float):
                continue
            if magnitude < limits["impact_magnitude"]:
                continue
            source = graph.nodes[edge[0]]
            when = (
                parse_instant(source.get("occurred_at"))
                if source.get("label") == ("MarketEvent")
                else parse_instant(data.get("_created_at"))
            )
            if when is None or now - when > timedelta(days=limits["impact_max_age_days"]):
                continue
            via = "" if not path else " via " + " → ".join(_name(index, e[1]) for e in path)
            made.append(
                Alert(
                    rule="negative_impact",
                    key=f"negative_impact:{_edge_id(edge)}",
                    severity="critical" if magnitude >= 0.8 else "warning",
                    message=(
                        f"{_name(index, edge[0])} affects {_name(index, target)} negatively "
                        f"(magnitude {magnitude:g}); you hold {symbol}{via}"
                    ),
                    facts=(
                        f"node:{edge[0]}",
                        _edge_id(edge),
                        *(_edge_id(step) for step in path),
                    ),
                    symbol=symbol,
                )
            )
    return made


def _contradictions(
    index: AlertIndex,
    symbol: str,
    exposure: Mapping[str, Any],
    limits: Mapping[str, float],
    now: datetime,
) -> list[Alert]:
    graph = index.market.graph
    window = timedelta(days=limits["contradiction_window_days"])
    by_action: dict[str, list[str]] = {"buy": [], "sell": []}
    for seed in index.market.seeds(symbol):
        for insight in index.about.get(seed, ()):
            data = graph.nodes[insight]
            generated = parse_instant(data.get("generated_at"))
            if (
                data.get("label") == "Insight"
                and data.get("type") == "signal"
                and data.get("action") in by_action
                and generated is not None
                and now - generated <= window
            ):
                by_action[data["action"]].append(insight)
    made = []
    for buy in sorted(set(by_action["buy"])):
        for sell in sorted(set(by_action["sell"])):
            made.append(
                Alert(
                    rule="contradicting_insights",
                    key=f"contradicting_insights:{buy}|{sell}",
                    severity="warning",
                    message=(
                        f"insights disagree on {symbol}: buy ({_summary(graph, buy)}) and "
                        f"sell ({_summary(graph, sell)})"
                    ),
                    facts=(f"node:{buy}", f"node:{sell}"),
                    symbol=symbol,
                )
            )
    return made


def _summary(graph: Any, node: str) -> str:
    return str(graph.nodes[node].get("summary", ""))


def _price_drop(symbol: str, quote: Quote | None, limits: Mapping[str, float]) -> list[Alert]:
    if quote is None or quote.change_pct is None or quote.change_pct > -limits["price_drop_pct"]:
        return []
    return [
        Alert(
            rule="price_drop",
            key=f"price_drop:{symbol}@{quote.day}",
            severity="critical" if quote.change_pct <= -2 * limits["price_drop_pct"] else "warning",
            message=(
                f"{symbol} fell {-quote.change_pct:.1f}% on {quote.day} to {quote.close:g} "
                f"(your threshold {limits['price_drop_pct']:g}%)"
            ),
            facts=(f"price:{symbol}@{quote.day}",),
            symbol=symbol,
        )
    ]


def _hours(delta: timedelta) -> str:
    hours = max(delta.total_seconds(), 0) / 3600
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} d"


def evaluate_all(
    index: AlertIndex,
    portfolios: Sequence[Portfolio],
    *,
    now: datetime,
    quotes: Mapping[str, Quote] | None = None,
    known: Mapping[int, set[str]] | None = None,
) -> dict[int, list[Alert]]:
    """:func:`evaluate` for each portfolio, by user id."""
    return {
        p.user.id: evaluate(
            index, p, now=now, quotes=quotes, known=(known or {}).get(p.user.id, set())
        )
        for p in portfolios
    }
