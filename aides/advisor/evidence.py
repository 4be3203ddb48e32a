"""The evidence pack: the facts a briefing (or an insight pass, or an answer) may rest on.

Starting from a user's symbols, the pack gathers the graph's facts one and two hops away and
ranks them with the memory's ranking (:func:`kgot.memory.scoring.rank`: relevance, the type's
rank weight, the fact's confidence, its freshness and use), then keeps the best that fit a
token budget:

* **Seeds.** A symbol is the ``Asset`` whose ``symbol`` it is, a ``Company`` whose ``ticker``
  it is, and the company that issues the asset (``issued_by``): the stock and its company are
  one thing to an investor, so an event that affects Apple is one hop from AAPL.
* **Hops.** Edges in either direction: a fact on a seed (hop 0), the edges touching a seed and
  the nodes at their other end (hop 1), the edges from those and their ends (hop 2). A node
  with very many edges (an asset class every asset belongs to) contributes its
  :data:`MAX_FANOUT` most recently written ones per direction.
* **Relevance** is the hop's (1, 0.7, 0.4); the memory's ranking adds the rest. Holdings come
  before the watchlist: every holding fact ranks above every watchlist fact, then by score.
  Latest prices of the symbols (``price:SYMBOL``, from the advisor's cache, never the graph)
  rank as hop 0; their lines date them (``AAPL price 189.5 as of 2026-11-20``).
* **Budget.** Lines are added best first while the pack's tokens
  (:func:`kgot.graph_model.count_tokens`) stay within the budget; a line that does not fit is
  skipped and smaller ones after it may still go in (until :data:`MAX_MISSES` did not fit).
  The pack is never over its budget. Lines, token counts, base scores and fact use are
  computed once per fact and index, so a cycle's later users cost less than its first.

Every item has an id: ``node:ID``, ``edge:SOURCE-KEY->TARGET`` or ``price:SYMBOL``; a briefing
cites these ids and may cite nothing else. The pack's :attr:`EvidencePack.key` (a hash of its
lines) tells whether anything changed since the last briefing.

No user data is read here: the caller passes symbols only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kgot.graph_model import count_tokens
from kgot.memory import fact_freshness, rank, retention, temporal_properties

if TYPE_CHECKING:
    import networkx as nx

    from kgot.aides.advisor.market_data import Quote
    from kgot.persistence import EntitySession, TypeCatalog

HOP_RELEVANCE = (1.0, 0.7, 0.4)
MAX_HOPS = 2
MAX_FANOUT = 40  # edges per direction read from one node while gathering
MAX_MISSES = 200  # lines that did not fit, after which the pack is considered full
MAX_VALUE_CHARS = 240  # of one fact's properties in its line
DEFAULT_BUDGET = 1500
MIN_BUDGET = 100
MAX_BUDGET = 50_000
GROUPS = ("holding", "watch")

FactKey = tuple[str, ...]


def node_fact_id(node_id: str) -> str:
    return f"node:{node_id}"


def edge_fact_id(source: str, key: str, target: str) -> str:
    return f"edge:{source}-{key}->{target}"


@dataclass(frozen=True)
class PackItem:
    """One line of evidence."""

    id: str
    line: str
    group: str  # holding | watch
    hop: int
    score: float
    tokens: int
    key: FactKey | None = None  # the graph fact (None for a price)
    as_of: str | None = None  # a price's "AAPL 189.5 as of 2026-11-20" (None for a fact)


@dataclass
class EvidencePack:
    """The facts chosen for one user (or for the insight pass), best first."""

    items: list[PackItem]
    budget: int
    tokens: int
    considered: int  # candidate lines before the budget
    symbols: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group -> symbols

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]

    @property
    def key(self) -> str:
        """A hash of the pack's lines, in any order: equal packs have equal keys."""
        lines = sorted(item.line for item in self.items)
        return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()

    def prices_as_of(self, cited: Collection[str]) -> list[str]:
        """The prices among ``cited`` with their days (``AAPL 189.5 as of 2026-11-20``), in
        the pack's order."""
        wanted = set(cited)
        return [item.as_of for item in self.items if item.as_of and item.id in wanted]

    def graph_keys(self) -> list[FactKey]:
        return [item.key for item in self.items if item.key is not None]

    def render(self, titles: Mapping[str, str] | None = None) -> str:
        """The pack as the prompt shows it: a section per group (``titles``: the sections'
        names, default Holdings and Watchlist), one line per item."""
        if not self.items:
            return "(no facts about these symbols yet)"
        named = {"holding": "Holdings", "watch": "Watchlist", **dict(titles or {})}
        out: list[str] = []
        for group, title in named.items():
            lines = [item.line for item in self.items if item.group == group]
            if lines:
                symbols = ", ".join(self.symbols.get(group, ())) if titles is None else ""
                out.append(f"{title} ({symbols}):" if symbols else f"{title}:")
                out.extend(lines)
        return "\n".join(out)


def checked_budget(budget: int) -> int:
    """A token budget from a user.

    Raises:
        UsageError: outside :data:`MIN_BUDGET` … :data:`MAX_BUDGET`.
    """
    from kgot.errors import UsageError

    if isinstance(budget, bool) or not isinstance(budget, int):
        raise UsageError(f"--budget must be a whole number of tokens, not {budget!r}")
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise UsageError(
            f"--budget {budget} is outside {MIN_BUDGET}..{MAX_BUDGET} tokens; 1500 is a "
            "good size for a briefing"
        )
    return budget


FactStrength = Callable[[Sequence[FactKey]], Mapping[FactKey, float]]


def fact_strength(session: EntitySession) -> FactStrength:
    """A :class:`MarketIndex` ``strength`` reading the entity's fact use from the store, as a
    cycle and a briefing do (:meth:`EntitySession.fact_use`, for the keys asked only)."""

    def read(keys: Sequence[FactKey]) -> dict[FactKey, float]:
        return {key: use.strength for key, use in session.fact_use(keys).items()}

    return read


class MarketIndex:
    """One graph prepared for packs: symbol lookups, fact lines and base scores, computed
    once and shared by every user's pack (a cycle builds one index, then a pack per user).

    Args:
        graph: the entity's current graph with metadata (``load_graph(include_meta=True)``).
        catalog: the entity's types (rank weights, half-lives, temporal properties).
        now: the moment freshness is measured at.
        strength: fact use (:meth:`EntitySession.fact_use`) for the keys asked, or ``None``.
    """

    def __init__(
        self,
        graph: nx.MultiDiGraph,
        catalog: TypeCatalog,
        *,
        now: datetime | None = None,
        strength: FactStrength | None = None,
    ) -> None:
        self.graph = graph
        self.now = now or datetime.now(UTC)
        self._strength = strength
        self._types: dict[tuple[str, str], tuple[float, float | None, tuple[str, ...]]] = {}
        self._catalog = catalog
        self._lines: dict[FactKey, str] = {}
        self._tokens: dict[FactKey, int] = {}
        self._bases: dict[FactKey, float] = {}
        self._use: dict[FactKey, float] = {}
        self.assets: dict[str, list[str]] = {}  # symbol -> Asset ids
        self.companies: dict[str, list[str]] = {}  # ticker -> Company ids
        for node_id, data in graph.nodes(data=True):
            label = data.get("label")
            if label == "Asset" and isinstance(data.get("symbol"), str):
                self.assets.setdefault(data["symbol"].strip().upper(), []).append(node_id)
            elif label == "Company" and isinstance(data.get("ticker"), str):
                self.companies.setdefault(data["ticker"].strip().upper(), []).append(node_id)

    # -------------------------------------------------------------------------- lookups

    def seeds(self, symbol: str) -> list[str]:
        """The nodes a symbol is: its assets, companies with that ticker, the assets' issuers."""
        found = list(self.assets.get(symbol, ())) + list(self.companies.get(symbol, ()))
        for asset in self.assets.get(symbol, ()):
            for _, target, data in self.graph.out_edges(asset, data=True):
                if data.get("relationship") == "issued_by":
                    found.append(target)
        return list(dict.fromkeys(found))

    def known(self, symbol: str) -> bool:
        return bool(self.assets.get(symbol) or self.companies.get(symbol))

    # -------------------------------------------------------------------------- facts

    def _type(self, kind: str, label: str) -> tuple[float, float | None, tuple[str, ...]]:
        cached = self._types.get((kind, label))
        if cached is None:
            found = self._catalog.get("node" if kind == "node" else "edge", label)
            if found is None:
                cached = (0.5, None, temporal_properties(None))
            else:
                cached = (
                    found.upkeep.rank_weight,
                    found.upkeep.half_life_days,
                    temporal_properties(found.spec.properties),
                )
            self._types[(kind, label)] = cached
        return cached

    def data(self, key: FactKey) -> Mapping[str, Any]:
        if key[0] == "node":
            return self.graph.nodes[key[1]]  # type: ignore[no-any-return]
        return self.graph.edges[key[1], key[2], key[3]]  # type: ignore[no-any-return]

    def fact_id(self, key: FactKey) -> str:
        return node_fact_id(key[1]) if key[0] == "node" else edge_fact_id(key[1], key[3], key[2])

    def line(self, key: FactKey) -> str:
        """The fact as one line of the prompt, led by its id."""
        cached = self._lines.get(key)
        if cached is None:
            data = self.data(key)
            shown = _properties(data)
            if key[0] == "node":
                text = f"{data.get('label', '?')} {shown}"
            else:
                text = f"{key[1]} -{data.get('relationship', key[3])}-> {key[2]} {shown}"
            cached = f"[{self.fact_id(key)}] {text.strip()}"
            self._lines[key] = cached
        return cached

    def tokens(self, key: FactKey) -> int:
        cached = self._tokens.get(key)
        if cached is None:
            cached = self._tokens[key] = count_tokens(self.line(key))
        return cached

    def strengths(self, keys: Sequence[FactKey]) -> Mapping[FactKey, float]:
        """The facts' use strength, read once per fact for this index (0 when unused)."""
        missing = [key for key in keys if key not in self._use]
        if missing:
            found = self._strength(missing) if self._strength is not None else {}
            for key in missing:
                self._use[key] = float(found.get(key, 0.0))
        return self._use

    def base(self, key: FactKey, strength: float = 0.0) -> float:
        """The fact's ranking score at relevance 0 (ranking is linear in relevance)."""
        cached = self._bases.get(key)
        if cached is None:
            data = self.data(key)
            label = str(data.get("label" if key[0] == "node" else "relationship", ""))
            weight, half_life, temporal = self._type(key[0], label)
            fresh, _age = fact_freshness(
                data, now=self.now, half_life_days=half_life, temporal=temporal
            )
            cached = rank(
                0.0,
                rank_weight=weight,
                confidence=float(data.get("_confidence", 1.0) or 0.0),
                fresh=retention(fresh, strength),
            ).score
            self._bases[key] = cached
        return cached

    # -------------------------------------------------------------------------- gathering

    def gather(self, symbols: Iterable[str]) -> dict[FactKey, int]:
        """Every fact within :data:`MAX_HOPS` of the symbols' seeds, with its hop."""
        hops: dict[FactKey, int] = {}
        distance: dict[str, int] = {}
        frontier: list[str] = []
        for symbol in symbols:
            for seed in self.seeds(symbol):
                if seed not in distance:
                    distance[seed] = 0
                    frontier.append(seed)
                    hops[("node", seed)] = 0
        for hop in range(1, MAX_HOPS + 1):
            following: list[str] = []
            for node in frontier:
                for source, target, key in _edges_of(self.graph, node):
                    ident: FactKey = ("edge", source, target, key)
                    hops.setdefault(ident, hop)
                    other = target if source == node else source
                    if other not in distance:
                        distance[other] = hop
                        hops[("node", other)] = hop
                        following.append(other)
            frontier = following
        return hops


def _edges_of(graph: nx.MultiDiGraph, node: str) -> list[tuple[str, str, str]]:
    """The node's edges, out and in, each direction capped at the most recently written
    :data:`MAX_FANOUT` (a graph keeps neighbours in the order their first edge was added, so
    the newest come last: read backwards, stop at the cap)."""
    found: list[tuple[str, str, str]] = []
    for outgoing, neighbours in ((True, graph.succ[node]), (False, graph.pred[node])):
        taken = 0
        for other in reversed(list(neighbours)):
            for key in neighbours[other]:
                found.append((node, other, key) if outgoing else (other, node, key))
                taken += 1
            if taken >= MAX_FANOUT:
                break
    return found


def build_pack(
    index: MarketIndex,
    holdings: Sequence[str],
    watchlist: Sequence[str] = (),
    *,
    budget: int = DEFAULT_BUDGET,
    quotes: Mapping[str, Quote] | None = None,
    extra: Sequence[FactKey] = (),
) -> EvidencePack:
    """The evidence pack for ``holdings`` and ``watchlist`` (module docstring).

    Args:
        index: the graph, prepared once (:class:`MarketIndex`).
        holdings: symbols held; their facts come first.
        watchlist: symbols watched (a held symbol here is ignored).
        budget: tokens the pack's lines may take together.
        quotes: the latest prices by symbol (their lines rank as hop 0).
        extra: more facts to consider (e.g. a question's search hits), ranked as hop 1 of
            the holdings.
    """
    held = list(dict.fromkeys(holdings))
    watched = [s for s in dict.fromkeys(watchlist) if s not in set(held)]
    candidates: dict[FactKey, tuple[int, int]] = {}  # key -> (group order, hop)
    for order, symbols in enumerate((held, watched)):
        for key, hop in index.gather(symbols).items():
            if key not in candidates:
                candidates[key] = (order, hop)
    for key in extra:
        if key not in candidates and _present(index, key):
            candidates[key] = (0, 1)
    strengths = index.strengths(list(candidates))
    ranked: list[tuple[int, float, str, FactKey | Quote]] = []
    for key, (order, hop) in candidates.items():
        relevance = HOP_RELEVANCE[min(hop, len(HOP_RELEVANCE) - 1)]
        score = 0.6 * relevance + index.base(key, strengths.get(key, 0.0))
        ranked.append((order, -score, index.fact_id(key), key))
    for order, symbols in enumerate((held, watched)):
        for symbol in symbols:
            found = (quotes or {}).get(symbol)
            if found is not None:
                ranked.append((order, -1.0, found.fact_id, found))
    ranked.sort(key=lambda entry: (entry[0], entry[1], entry[2]))
    chosen, used = _fill(index, ranked, candidates, budget)
    return EvidencePack(
        items=chosen,
        budget=budget,
        tokens=used,
        considered=len(ranked),
        symbols={"holding": tuple(held), "watch": tuple(watched)},
    )


def _fill(
    index: MarketIndex,
    ranked: Sequence[tuple[int, float, str, Any]],
    candidates: Mapping[FactKey, tuple[int, int]],
    budget: int,
) -> tuple[list[PackItem], int]:
    """The items that fit ``budget``, best first, and the tokens they take."""
    chosen: list[PackItem] = []
    used = 0
    misses = 0
    for order, negative, fact_id, what in ranked:
        if isinstance(what, tuple):
            line, tokens, key, hop = index.line(what), index.tokens(what), what, candidates[what][1]
        else:
            line = f"[{fact_id}] {what.evidence_line()}"
            tokens, key, hop = count_tokens(line), None, 0
        if used + tokens > budget:
            misses += 1
            if misses >= MAX_MISSES or budget - used < 4:
                break  # full: no line is that small
            continue
        chosen.append(
            PackItem(
                id=fact_id,
                line=line,
                group=GROUPS[order],
                hop=hop,
                score=round(-negative, 4),
                tokens=tokens,
                key=key,
                as_of=None if isinstance(what, tuple) else what.as_of,
            )
        )
        used += tokens
    return chosen, used


def _present(index: MarketIndex, key: FactKey) -> bool:
    if key[0] == "node":
        return key[1] in index.graph
    return bool(index.graph.has_edge(key[1], key[2], key[3]))


def _properties(data: Mapping[str, Any]) -> str:
    shown = {
        k: v
        for k, v in data.items()
        if k not in ("label", "relationship") and not k.startswith("_")
    }
    if not shown:
        return ""
    text = json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
