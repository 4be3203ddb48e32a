"""Graph views for prompts: the part of a graph that matters for a question, within a budget.

KGoT pasted the whole graph into every prompt; at a few thousand nodes that no longer fits. A
view here is built in four steps:

1. **Seeds.** The question and the focus texts (recent tool results) are cut into terms; an
   inverted index finds nodes whose id, label or text values share them. Rare terms weigh more
   (IDF), matches on a node's name-like values more still, and a node whose whole name appears
   in the question most of all. Focus texts count less than the question.
2. **Spreading.** Relevance flows from the seeds to their neighbourhood by an approximate
   personalised PageRank (forward push): a few hops out, split per edge direction and degree,
   so hubs do not flood the view and nodes tied to several seeds rise.
3. **Ranking.** Nodes rank by their score, edges by the geometric mean of their endpoints'
   scores, so a seed's own edges come first and a hub's thousand unrelated edges last.
4. **Filling.** Lines are taken in rank order (then the most recently changed nodes) until the
   token budget is spent; a footer counts what was left out per label and relationship.

An entity run's request carries a :class:`FactLens` (the controller's view of its facts'
trust): candidates are then ordered by the lens's ranking score of their relevance normalised
to 0–1 (which adds the type's rank weight, the fact's confidence and freshness), lines carry the
lens's marker (``[inferred 0.6]``, ``[412 d old]``) instead of ``_``-prefixed metadata
attributes. Requests without a lens (ephemeral runs) are served exactly as before.

Everything derived (terms, postings, rendered lines and their token counts) is cached and kept
current from changesets, so a render costs time in proportion to what it shows, not to the graph.
The search index of a large graph is built in a background thread as soon as the graph is
loaded, so the first prompt does not pay for it (it waits only for what is left of the build).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import re
import threading
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Protocol

import networkx as nx

from kgot.graph_backends.base import GraphView, ViewRequest
from kgot.graph_backends.jobs.outcome import collector_paused
from kgot.graph_backends.view_lines import LineFormat
from kgot.graph_model import (
    LABEL,
    RELATIONSHIP,
    Changeset,
    GraphStats,
    count_tokens,
    node_table,
    predecessor_table,
    successor_table,
)

QUESTION_WEIGHT = 1.0
FOCUS_WEIGHT = 0.6
MAX_FOCUS_TERMS = 200  # the rarest terms of the focus texts; the rest add little but cost time
MAX_SEEDS = 50
PUSH_ALPHA = 0.3  # share of relevance a node keeps when it passes the rest on
PUSH_EPSILON = 1e-4
MAX_PUSH_WORK = 2_000  # neighbour visits per render
CANDIDATE_TOKENS = 14  # ranking looks at budget/14 nodes: about what a budget can show
RECENT_EDGES_PER_NODE = 50
RENDERED_KEPT = 16  # views remembered per graph version (votes and retries ask again)
BACKGROUND_INDEX_NODES = 5_000  # graphs this large are indexed in the background on load
INDEX_CHUNK = 2_000  # nodes indexed per hold of the index lock
MAX_MISFITS = 40  # lines tried after the first one that did not fit
MAX_INDEXED_CHARS = 2_000  # per node; long texts are matched on their beginning
FOOTER_LABELS = 8
FOOTER_SLACK = 8  # tokens kept free in case the footer lists wordier names than estimated
_NAME_HINTS = ("name", "title", "alias")

_TERM = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours
    yourself yourselves"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


class FactLens(Protocol):
    """What a view needs of an entity's fact metadata (the controller implements it)."""

    def prefetch(self, nodes: Iterable[str], edges: Iterable[tuple[str, str, str]] = ()) -> None:
        """Read at once what the view is about to ask of these facts (the lens reads the store
        lazily; without this each fact asked about is a read of its own)."""
        ...

    def node_marker(self, node_id: str) -> str:
        """A short note on the node's trust or age for its line, or ``""``."""
        ...

    def edge_marker(self, ident: tuple[str, str, str]) -> str: ...

    def node_score(self, node_id: str, relevance: float) -> float:
        """The node's ranking score for its relevance (0 to 1); higher ranks first."""
        ...

    def edge_score(self, ident: tuple[str, str, str], relevance: float) -> float: ...


def terms(text: str) -> list[str]:
    """Normalised search terms of ``text``: lower case, accents removed, light plural folding,
    stop words dropped."""
    if not text.isascii():
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    out = []
    for word in _TERM.findall(text.lower()):
        if word in _STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        plural = len(word) > 4 and word[-1] == "s" and word[-2] != "s"
        out.append(word[:-1] if plural else word)
    return out


_SHORT_TEXT = 40  # values up to this long have their terms cached (they tend to repeat)


@functools.lru_cache(maxsize=65_536)
def _short_terms(text: str) -> tuple[str, ...]:
    return tuple(terms(text))


@functools.lru_cache(maxsize=4096)
def _type_terms(label: str) -> tuple[str, ...]:
    """Terms of a label: ``ResearchPaper`` matches "research" and "paper"."""
    return tuple(terms(_CAMEL.sub(" ", label)))


@functools.lru_cache(maxsize=4096)
def _is_name_key(key: str) -> bool:
    """Properties whose words name the node (``name``, ``title``, ``alias``, ``full_name``…)."""
    lowered = key.lower()
    return any(hint in lowered for hint in _NAME_HINTS)


class ViewIndex:
    """Search index, line cache and renderer for one graph (a :class:`ChangeListener`)."""

    def __init__(self, lines: LineFormat) -> None:
        self.lines = lines
        self._lens: FactLens | None = None  # the lens lines and ranking were made with
        self._graph: nx.MultiDiGraph | None = None
        self._indexed = False
        # The index of a large graph is built in a background thread from the moment the graph
        # is loaded; this lock keeps it and changes to the index apart.
        self._index_lock = threading.Lock()
        self._generation = 0  # which reset a running build belongs to
        self._built = threading.Event()  # cleared while a background build runs
        self._built.set()
        self._terms: dict[str, tuple[str, ...]] = {}
        self._names: dict[str, frozenset[str]] = {}
        self._postings: dict[str, set[str]] = {}
        self._recent: dict[str, None] = {}  # node ids, least recently changed first
        self._node_lines: dict[str, tuple[str, int, str]] = {}
        self._edge_lines: dict[tuple[str, str, str], tuple[str, int, str]] = {}
        self._full: tuple[str, int] | None = None
        self._footer_cost: tuple[tuple[int, int, int, int], int] | None = None
        self._tail = _RecentTail()
        # Views already rendered for this version of the graph, by request.
        self._rendered: OrderedDict[tuple[str, tuple[str, ...], int], GraphView] = OrderedDict()

    # -- following the graph ------------------------------------------------------------------

    def reset(self, graph: nx.MultiDiGraph) -> None:
        with self._index_lock:
            self._generation += 1
            self._graph = graph
            self._rendered.clear()
            self._indexed = False
            self._terms, self._names, self._postings = {}, {}, {}
            self._recent = dict.fromkeys(graph.nodes)
            self._node_lines, self._edge_lines, self._full = {}, {}, None
            self._tail = _RecentTail()
            # A small graph is indexed on its first partial render (which may never come: it
            # fits whole); a large one starts now, so the first prompt does not wait for it.
            if graph.number_of_nodes() >= BACKGROUND_INDEX_NODES:
                self._built.clear()
                threading.Thread(
                    target=self._build_index,
                    args=(graph, list(node_table(graph)), self._generation),
                    name="kgot-view-index",
                    daemon=True,
                ).start()
            else:
                self._built.set()

    def changed(self, graph: nx.MultiDiGraph, changeset: Changeset) -> None:
        with self._index_lock:
            self._graph = graph
            self._full = None
            self._rendered.clear()
            indexing = self._indexed or not self._built.is_set()  # or a build is running
            self._tail.follow(changeset)
            for node_id in changeset.removed_nodes:
                self._unindex(node_id)
                self._recent.pop(node_id, None)
                self._node_lines.pop(node_id, None)
            for node in (*changeset.added_nodes, *changeset.changed_nodes):
                self._unindex(node.id)
                if indexing:
                    self._index(node.id, graph.nodes[node.id])
                self._recent.pop(node.id, None)
                self._recent[node.id] = None
                self._node_lines.pop(node.id, None)
            for ident in changeset.removed_edges:
                self._edge_lines.pop(ident, None)
            for edge in (*changeset.added_edges, *changeset.changed_edges):
                self._edge_lines.pop(edge.ident, None)
                for end in (edge.source, edge.target):  # a new link makes both ends recent
                    if end in self._recent:
                        self._recent.pop(end)
                        self._recent[end] = None

    def wait_for_index(self, timeout: float | None = None) -> bool:
        """Whether the background index build (if any) finished within ``timeout`` seconds."""
        return self._built.wait(timeout)

    def _build_index(self, graph: nx.MultiDiGraph, node_ids: list[str], generation: int) -> None:
        """Index ``node_ids`` in chunks, letting changes in between (they index what they
        touch themselves; a node they reached first is skipped here)."""
        try:
            with collector_paused():
                for start in range(0, len(node_ids), INDEX_CHUNK):
                    with self._index_lock:
                        if generation != self._generation:
                            return
                        self._index_some(graph, node_ids[start : start + INDEX_CHUNK])
            with self._index_lock:
                if generation == self._generation:
                    self._indexed = True
        finally:
            with self._index_lock:
                if generation == self._generation:
                    self._built.set()

    def _index_some(self, graph: nx.MultiDiGraph, node_ids: Iterable[str]) -> None:
        table = node_table(graph)
        for node_id in node_ids:
            if node_id in self._terms:
                continue
            attrs = table.get(node_id)
            if attrs is None:
                continue  # removed since
            try:
                self._index(node_id, attrs)
            except RuntimeError:  # changed while being read: the change indexes it again
                self._unindex(node_id)

    def _ensure_index(self, graph: nx.MultiDiGraph) -> None:
        if self._indexed:
            return
        self._built.wait()  # a background build, if one runs
        with self._index_lock:
            if not self._indexed:  # small graph, or a build that failed
                with collector_paused():
                    self._index_some(graph, list(node_table(graph)))
                self._indexed = True

    def _index(self, node_id: str, attrs: Mapping[str, Any]) -> None:
        name_texts: list[str] = [_CAMEL.sub(" ", node_id)]
        found = set(_type_terms(str(attrs.get(LABEL, ""))))
        budget = MAX_INDEXED_CHARS
        for key, value in attrs.items():
            if key == LABEL or budget <= 0:
                continue
            text = _value_text(value)[:budget]
            if text:
                budget -= len(text)
                if _is_name_key(key):
                    name_texts.append(text)
                elif len(text) <= _SHORT_TEXT:
                    found.update(_short_terms(text))  # categories, numbers, dates repeat
                else:
                    found.update(terms(text))
        names = frozenset(terms(" ".join(name_texts)))
        found.update(names)
        self._terms[node_id] = tuple(found)
        self._names[node_id] = names
        postings = self._postings
        for term in found:
            bucket = postings.get(term)
            if bucket is None:
                postings[term] = {node_id}
            else:
                bucket.add(node_id)

    def _unindex(self, node_id: str) -> None:
        for term in self._terms.pop(node_id, ()):
            bucket = self._postings.get(term)
            if bucket is not None:
                bucket.discard(node_id)
                if not bucket:
                    del self._postings[term]
        self._names.pop(node_id, None)

    # -- rendering ----------------------------------------------------------------------------

    def render(self, graph: nx.MultiDiGraph, request: ViewRequest, stats: GraphStats) -> GraphView:
        """The most relevant part of ``graph`` for ``request``, never above its budget.

        ``stats`` are the graph's current counts (kept by the caller: networkx counts edges by
        walking every node).
        """
        if request.lens is not self._lens:
            self._use_lens(request.lens)
        key = (request.question, tuple(request.focus), request.token_budget)
        view = self._rendered.get(key)
        if view is None:
            view = self._render(graph, request, stats)
            self._rendered[key] = view
            if len(self._rendered) > RENDERED_KEPT:
                self._rendered.popitem(last=False)
        return view

    def _use_lens(self, lens: FactLens | None) -> None:
        """Lines carry the lens's markers: a new lens (once per run) drops every cached line."""
        with self._index_lock:
            self._lens = lens
            self._node_lines, self._edge_lines, self._full = {}, {}, None
            self._rendered.clear()
            self._tail = _RecentTail()

    def _render(self, graph: nx.MultiDiGraph, request: ViewRequest, stats: GraphStats) -> GraphView:
        n_nodes, n_edges = stats.nodes, stats.edges
        budget = request.token_budget
        if n_nodes == 0:
            text = "The graph is empty."
            text = text if count_tokens(text) <= budget else ""
            return GraphView(text, count_tokens(text), 0, 0, 0, 0, {}, {})
        # Each line costs at least 3 tokens, so only small graphs can fit whole. A graph that
        # holds part of what the counts describe (a working set) is never shown as whole.
        if (n_nodes + n_edges) * 3 <= budget and graph.number_of_nodes() == n_nodes:
            text, tokens = self._full_text(graph)
            if tokens <= budget:
                return GraphView(text, tokens, n_nodes, n_edges, n_nodes, n_edges, {}, {})
        self._ensure_index(graph)
        return self._partial(graph, request, stats)

    def _full_text(self, graph: nx.MultiDiGraph) -> tuple[str, int]:
        if self._full is None:
            if self._lens is not None:
                self._lens.prefetch(graph.nodes, graph.edges(keys=True))
            node_lines = [self._node_line(graph, n)[0] for n in graph.nodes]
            edge_lines = [self._edge_line(graph, e)[0] for e in graph.edges(keys=True)]
            header = f"Graph: {_count(len(node_lines), len(edge_lines))} (all shown)."
            parts = [header, self.lines.nodes_heading, *node_lines]
            if edge_lines:
                parts += [self.lines.edges_heading, *edge_lines]
            text = "\n".join(parts)
            self._full = (text, count_tokens(text))
        return self._full

    def _node_line(self, graph: nx.MultiDiGraph, node_id: str) -> tuple[str, int, str]:
        """(line, its tokens, the node's label), cached until the node changes."""
        cached = self._node_lines.get(node_id)
        if cached is None:
            attrs = graph.nodes[node_id]
            lens = self._lens
            if lens is None:
                line = self.lines.node_line(node_id, attrs)
            else:
                line = self.lines.node_line(node_id, _without_meta(attrs))
                marker = lens.node_marker(node_id)
                line = self.lines.mark(line, marker) if marker else line
            cached = self._node_lines[node_id] = (line, count_tokens(line), attrs.get(LABEL))
        return cached

    def _edge_line(
        self, graph: nx.MultiDiGraph, ident: tuple[str, str, str]
    ) -> tuple[str, int, str]:
        """(line, its tokens, the edge's relationship), cached until the edge changes."""
        cached = self._edge_lines.get(ident)
        if cached is None:
            source, target, key = ident
            attrs = graph.edges[ident]
            lens = self._lens
            if lens is None:
                line = self.lines.edge_line(source, target, key, attrs)
            else:
                line = self.lines.edge_line(source, target, key, _without_meta(attrs))
                marker = lens.edge_marker(ident)
                line = self.lines.mark(line, marker) if marker else line
            cached = self._edge_lines[ident] = (
                line,
                count_tokens(line),
                attrs.get(RELATIONSHIP),
            )
        return cached

    def _partial(
        self, graph: nx.MultiDiGraph, request: ViewRequest, stats: GraphStats
    ) -> GraphView:
        n_nodes, n_edges = stats.nodes, stats.edges
        budget = request.token_budget
        headings = (self.lines.nodes_heading, self.lines.edges_heading)
        header_cost = count_tokens(_header(n_nodes, n_edges, n_nodes, n_edges))
        footer_cost = FOOTER_SLACK + self._footer_bound(stats)
        room = budget - header_cost - count_tokens(" ".join(headings)) - footer_cost
        chosen = self._choose_lines(graph, request, room)
        nodes, edges = chosen.nodes, chosen.edges
        while True:
            omitted_nodes = _omitted(stats.nodes_by_label, chosen.labels)
            omitted_edges = _omitted(stats.edges_by_relationship, chosen.relationships)
            header = _header(n_nodes, n_edges, len(nodes), len(edges))
            footer = _footer(omitted_nodes, omitted_edges)
            parts = [header]
            if nodes:
                parts.append(headings[0])
                parts += [entry[0] for entry in nodes]
            if edges:
                parts.append(headings[1])
                parts += [entry[0] for entry in edges]
            parts.append(footer)
            text = "\n".join(parts)
            if newline_additive():
                # Lines were counted when cached; only the parts around them are new.
                tokens = count_tokens(header) + count_tokens(footer) + chosen.tokens
                tokens += count_tokens(headings[0]) if nodes else 0
                tokens += count_tokens(headings[1]) if edges else 0
            else:
                tokens = count_tokens(text)
            if tokens <= budget:
                break
            # The estimate was short (another tokenizer, an unusual footer): drop the last line.
            if not chosen.drop_last():
                text = _tiny(n_nodes, n_edges, budget)
                tokens = count_tokens(text)
                break
        return GraphView(
            text,
            tokens,
            len(nodes),
            len(edges),
            n_nodes,
            n_edges,
            omitted_nodes,
            omitted_edges,
        )

    def _choose_lines(
        self, graph: nx.MultiDiGraph, request: ViewRequest, room: int
    ) -> _ChosenLines:
        """The most relevant lines that fit in ``room`` tokens: the candidates in rank order, then
        the most recently changed nodes with a few of their edges, each line at most once.

        This is the hot path of every prompt over a graph too large to show whole, so cache
        lookups are inlined and the recent nodes come from :class:`_RecentTail`, kept from one
        render (and one graph version) to the next.
        """
        chosen = _ChosenLines()
        nodes, edges, labels, relationships = (
            chosen.nodes,
            chosen.edges,
            chosen.labels,
            chosen.relationships,
        )
        node_lines, edge_lines = self._node_lines, self._edge_lines
        misfits = tokens = 0
        items, candidates = self._candidates(graph, request)
        for _, _, kind, item in items:
            if room < 3 or misfits > MAX_MISFITS:
                break
            if kind == "n":
                entry = node_lines.get(item) or self._node_line(graph, item)
                lines, counts = nodes, labels
            else:
                entry = edge_lines.get(item) or self._edge_line(graph, item)
                lines, counts = edges, relationships
            cost = entry[1]
            if cost > room:
                misfits += 1
                continue
            room -= cost
            tokens += cost
            lines.append(entry)
            counts[entry[2]] = counts.get(entry[2], 0) + 1
        else:
            seen_edges = {item for _, _, kind, item in items if kind == "e"}
            tokens += self._fill_from_tail(
                graph,
                chosen,
                room=room,
                misfits=misfits,
                candidates=candidates,
                seen_edges=seen_edges,
            )
        chosen.tokens = tokens
        return chosen

    def _fill_from_tail(
        self,
        graph: nx.MultiDiGraph,
        chosen: _ChosenLines,
        *,
        room: int,
        misfits: int,
        candidates: Mapping[str, float],
        seen_edges: set[tuple[str, str, str]],
    ) -> int:
        """Spend what is left of ``room`` on the most recently changed nodes (other than the
        candidates) with a few of their edges; returns the tokens added to ``chosen``."""
        nodes, edges, labels, relationships = (
            chosen.nodes,
            chosen.edges,
            chosen.labels,
            chosen.relationships,
        )
        tokens = 0
        for node_id, node_entry, incident in self._tail.blocks(self, graph):
            if room < 3 or misfits > MAX_MISFITS:
                break
            if node_id in candidates:
                continue
            cost = node_entry[1]
            if cost > room:
                misfits += 1
            else:
                room -= cost
                tokens += cost
                nodes.append(node_entry)
                labels[node_entry[2]] = labels.get(node_entry[2], 0) + 1
            for ident, entry in incident:
                if room < 3 or misfits > MAX_MISFITS:
                    break
                if ident in seen_edges:
                    continue
                seen_edges.add(ident)
                cost = entry[1]
                if cost > room:
                    misfits += 1
                    continue
                room -= cost
                tokens += cost
                edges.append(entry)
                relationships[entry[2]] = relationships.get(entry[2], 0) + 1
        return tokens

    def _prefetch_tail(self, graph: nx.MultiDiGraph, node_ids: Sequence[str]) -> None:
        """Have the lens read at once the facts of these recent nodes' blocks not lined yet."""
        if self._lens is None:
            return
        nodes = [n for n in node_ids if n not in self._node_lines]
        edges = [
            ident
            for n in node_ids
            for ident in _incident(graph, n, RECENT_EDGES_PER_NODE)
            if ident not in self._edge_lines
        ]
        if nodes or edges:
            self._lens.prefetch(nodes, edges)

    def _tail_block(self, graph: nx.MultiDiGraph, node_id: str) -> _TailBlock:
        """A recent node's line with the lines of its first incident edges."""
        entry = self._node_lines.get(node_id) or self._node_line(graph, node_id)
        edge_lines = self._edge_lines
        incident = tuple(
            (ident, edge_lines.get(ident) or self._edge_line(graph, ident))
            for ident in _incident(graph, node_id, RECENT_EDGES_PER_NODE)
        )
        return node_id, entry, incident

    def _footer_bound(self, stats: GraphStats) -> int:
        """Tokens of the longest footer these counts could produce (cached per count set)."""
        key = (
            stats.nodes,
            stats.edges,
            len(stats.nodes_by_label),
            len(stats.edges_by_relationship),
        )
        if self._footer_cost is None or self._footer_cost[0] != key:
            text = _footer(
                _worst_case(stats.nodes_by_label), _worst_case(stats.edges_by_relationship)
            )
            self._footer_cost = (key, count_tokens(text))
        return self._footer_cost[1]

    def _candidates(
        self, graph: nx.MultiDiGraph, request: ViewRequest
    ) -> tuple[list[tuple[float, int, str, Any]], dict[str, float]]:
        """The best-scored nodes and the edges among them, sorted as (-weight, order, kind,
        item) tuples (ties keep insertion order), and the candidates' scores."""
        scores = self._spread(graph, self._seeds(graph, request))
        # Lines cost ~10 tokens or more: more candidates than this are never reached.
        capacity = max(50, request.token_budget // CANDIDATE_TOKENS)
        top = heapq.nlargest(capacity, scores.items(), key=itemgetter(1))
        lens = request.lens
        if lens is not None and top:
            return self._ranked_candidates(graph, top, lens)
        candidates = dict(top)
        items: list[tuple[float, int, str, Any]] = [
            (-score, order, "n", node_id) for order, (node_id, score) in enumerate(top)
        ]
        append = items.append
        sqrt = math.sqrt
        order = len(items)
        succ = successor_table(graph)
        count = len(candidates)
        for source, own in top:
            # Each edge between two candidates is found once, from its source; a hub looks its
            # candidates up instead of walking thousands of neighbours.
            adjacency = succ[source]
            if len(adjacency) <= count:
                pairs: Iterable[tuple[str, Any]] = adjacency.items()
            else:
                pairs = ((t, adjacency[t]) for t in candidates if t in adjacency)
            for target, keyed in pairs:
                other = candidates.get(target)
                if other is None:
                    continue
                weight = -sqrt(own * other)
                for key in keyed:
                    order += 1
                    append((weight, order, "e", (source, target, key)))
        items.sort()
        return items, candidates

    def _ranked_candidates(
        self, graph: nx.MultiDiGraph, top: list[tuple[str, float]], lens: FactLens
    ) -> tuple[list[tuple[float, int, str, Any]], dict[str, float]]:
        """:meth:`_candidates` for an entity run: nodes and edges ordered by the lens's score of
        their relevance normalised to 0–1 (a node's spread score over the best one's; an edge's,
        the geometric mean of its ends')."""
        best = top[0][1] or 1.0
        candidates = {node_id: score / best for node_id, score in top}
        succ = successor_table(graph)
        count = len(candidates)
        edges: list[tuple[tuple[str, str, str], float]] = []
        for source, own in candidates.items():
            adjacency = succ[source]
            if len(adjacency) <= count:
                pairs: Iterable[tuple[str, Any]] = adjacency.items()
            else:
                pairs = ((t, adjacency[t]) for t in candidates if t in adjacency)
            for target, keyed in pairs:
                other = candidates.get(target)
                if other is None:
                    continue
                relevance = math.sqrt(own * other)
                edges.extend(((source, target, key), relevance) for key in keyed)
        lens.prefetch(candidates, (ident for ident, _ in edges))
        node_score, edge_score = lens.node_score, lens.edge_score
        items: list[tuple[float, int, str, Any]] = [
            (-node_score(node_id, relevance), order, "n", node_id)
            for order, (node_id, relevance) in enumerate(candidates.items())
        ]
        order = len(items)
        for ident, relevance in edges:
            order += 1
            items.append((-edge_score(ident, relevance), order, "e", ident))
        items.sort()
        return items, candidates

    def _seeds(self, graph: nx.MultiDiGraph, request: ViewRequest) -> dict[str, float]:
        """Nodes matching the question and focus texts, with how well they match."""
        weights: dict[str, float] = dict.fromkeys(terms(request.question), QUESTION_WEIGHT)
        postings = self._postings
        focus_terms = {t for text in request.focus for t in terms(text) if t in postings}
        rarest = sorted(focus_terms - weights.keys(), key=lambda t: len(postings[t]))
        for term in rarest[:MAX_FOCUS_TERMS]:
            weights[term] = FOCUS_WEIGHT
        total = max(1, graph.number_of_nodes())
        common = max(200, total // 20)  # terms on more nodes than this say little
        raw: dict[str, float] = {}
        for term, weight in weights.items():
            bucket = postings.get(term)
            if not bucket or len(bucket) > common:
                continue
            gain = weight * math.log(1 + total / len(bucket))
            for node_id in bucket:
                raw[node_id] = raw.get(node_id, 0.0) + gain * (
                    2.0 if term in self._names[node_id] else 1.0
                )
        if not raw:
            return {}
        query_terms = weights.keys()
        scored = {}
        for node_id, value in raw.items():
            names = self._names[node_id]
            coverage = len(names & query_terms) / len(names) if names else 0.0
            length = len(self._terms[node_id])
            scored[node_id] = value * (1.0 + 2.0 * coverage) / (1.0 + 0.15 * math.log1p(length))
        best = sorted(scored, key=scored.__getitem__, reverse=True)[:MAX_SEEDS]
        return {node_id: scored[node_id] for node_id in best}

    def _spread(self, graph: nx.MultiDiGraph, seeds: Mapping[str, float]) -> dict[str, float]:
        """Approximate personalised PageRank from the seeds (forward push), as node -> score.

        A node passes relevance along its outgoing and its incoming edges in equal halves, each
        half split among that side's neighbours, and pushes a side only while each neighbour
        there would get at least epsilon. So a hub city still hands its country (one outgoing
        edge) a real share, while its thousands of residents (incoming) get nothing and cost no
        work.
        """
        if not seeds:
            return {}
        mass = {node_id: score * score for node_id, score in seeds.items()}
        total = sum(mass.values())
        residual = {node_id: value / total for node_id, value in mass.items()}
        rank: dict[str, float] = {}
        succ, pred = successor_table(graph), predecessor_table(graph)
        queue = deque(residual)
        queued = set(residual)
        work = 0
        keep_share = 1.0 - PUSH_ALPHA
        while queue and work < MAX_PUSH_WORK:
            node_id = queue.popleft()
            queued.discard(node_id)
            value = residual.get(node_id, 0.0)
            if value <= 0.0:
                continue
            out_side, in_side = succ[node_id], pred[node_id]
            out_degree, in_degree = len(out_side), len(in_side)
            sides = (out_degree > 0) + (in_degree > 0)
            if not sides:
                continue
            portion = keep_share * value / sides
            limit = portion / PUSH_EPSILON  # a side is pushed while each neighbour gets epsilon
            push_out = 0 < out_degree <= limit
            push_in = 0 < in_degree <= limit
            if not (push_out or push_in):
                continue  # too little to spread: the node keeps its residual
            residual[node_id] = 0.0
            # What a side too large to push would have received stays with the node.
            rank[node_id] = rank.get(node_id, 0.0) + value - portion * (push_out + push_in)
            for side, degree, pushing in (
                (out_side, out_degree, push_out),
                (in_side, in_degree, push_in),
            ):
                if not pushing:
                    continue
                share = portion / degree
                work += degree
                for neighbour in side:
                    new = residual.get(neighbour, 0.0) + share
                    residual[neighbour] = new
                    if new >= PUSH_EPSILON and neighbour not in queued:
                        queue.append(neighbour)
                        queued.add(neighbour)
        for node_id, value in residual.items():
            if value > 0.0:
                rank[node_id] = rank.get(node_id, 0.0) + value
        return rank


# A recent node: its id, its line entry, and its first incident edges with their line entries.
_TailBlock = tuple[
    str, tuple[str, int, str], tuple[tuple[tuple[str, str, str], tuple[str, int, str]], ...]
]
TAIL_CHUNK = 64  # blocks added to the tail at a time when a render reads past its end


class _RecentTail:
    """The most recently changed nodes as render-ready blocks, kept across graph versions.

    Most views end with recent nodes (a question's candidates rarely fill the budget), and
    rebuilding that tail walked several hundred nodes and their edges on every render. Here it
    is built once, only as far as renders read, and a changeset only rebuilds the blocks of the
    nodes it touched: they move to the front (a change makes a node the most recent), nodes
    that lost edges have their block rebuilt in place, and everything else is kept.

    Invariant: ``_blocks`` holds, in order, the blocks of the ``len(_blocks)`` most recently
    changed nodes as of the last :meth:`blocks` call; ``_moved`` are the nodes made recent since
    (always the newest entries of the index's recency order), ``_stale`` the nodes whose edges
    changed in place. A removed node drops the whole tail (removals are rare; its neighbours'
    blocks would have to be found).
    """

    def __init__(self) -> None:
        self._blocks: list[_TailBlock] = []
        self._moved: set[str] = set()
        self._stale: set[str] = set()

    def follow(self, changeset: Changeset) -> None:
        """Note what ``changeset`` (just applied) changes in the tail."""
        if changeset.removed_nodes:
            self._blocks, self._moved, self._stale = [], set(), set()
            return
        moved, stale = self._moved, self._stale
        for source, target, _ in changeset.removed_edges:
            stale.add(source)
            stale.add(target)
        for node in (*changeset.added_nodes, *changeset.changed_nodes):
            moved.add(node.id)
        for edge in (*changeset.added_edges, *changeset.changed_edges):
            moved.add(edge.source)
            moved.add(edge.target)

    def blocks(self, index: ViewIndex, graph: nx.MultiDiGraph) -> Iterator[_TailBlock]:
        """The blocks, most recent node first, built as far as the caller reads."""
        self._catch_up(index, graph)
        blocks = self._blocks
        yield from blocks  # (delegated: no Python-level step per block)
        position = len(blocks)
        while self._extend(index, graph):
            yield from blocks[position:]
            position = len(blocks)

    def _catch_up(self, index: ViewIndex, graph: nx.MultiDiGraph) -> None:
        moved, stale = self._moved, self._stale
        if not moved and not stale:
            return
        recent = index._recent
        fronted = list(itertools.islice(reversed(recent), len(moved)))
        index._prefetch_tail(graph, [*fronted, *(b[0] for b in self._blocks if b[0] in stale)])
        front = [index._tail_block(graph, node_id) for node_id in fronted]
        kept = [
            index._tail_block(graph, block[0]) if block[0] in stale else block
            for block in self._blocks
            if block[0] not in moved
        ]
        self._blocks = front + kept
        self._moved, self._stale = set(), set()

    def _extend(self, index: ViewIndex, graph: nx.MultiDiGraph) -> bool:
        """Add the next blocks in recency order; False when every node has one."""
        start = len(self._blocks)
        chunk = list(itertools.islice(reversed(index._recent), start, start + TAIL_CHUNK))
        index._prefetch_tail(graph, chunk)
        more = [index._tail_block(graph, node_id) for node_id in chunk]
        self._blocks.extend(more)
        return bool(more)


class _ChosenLines:
    """Lines picked for a view, with their token total and counts per type, kept while they
    are picked (so the footer's counts need no second pass over the lines)."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, int, str]] = []
        self.edges: list[tuple[str, int, str]] = []
        self.labels: dict[str, int] = {}
        self.relationships: dict[str, int] = {}
        self.tokens = 0

    def drop_last(self) -> bool:
        """Drop the last edge line, else the last node line; False when none is left."""
        if self.edges:
            entry, counts = self.edges.pop(), self.relationships
        elif self.nodes:
            entry, counts = self.nodes.pop(), self.labels
        else:
            return False
        counts[entry[2]] -= 1
        self.tokens -= entry[1]
        return True


@functools.cache
def newline_additive() -> bool:
    """Whether joining texts with newlines adds their token counts exactly.

    True for kgot's offline estimate (no token spans whitespace), so a view's size is the sum of
    its cached line counts; a tokenizer that counts newlines or merges across them fails the
    probes and every view is counted whole instead.
    """
    probes = (
        "Graph: 1,234 nodes.",
        '"ada" Person name="Ada"',
        "node:x a type:Y .",
        "ü東 1.5e0",
        "_",
    )
    return all(
        count_tokens(f"{a}\n{b}") == count_tokens(a) + count_tokens(b)
        for a in probes
        for b in probes
    )


def _incident(graph: nx.MultiDiGraph, node_id: str, limit: int) -> Iterator[tuple[str, str, str]]:
    count = 0
    for target, keyed in successor_table(graph)[node_id].items():
        for key in keyed:
            yield (node_id, target, key)
            count += 1
            if count >= limit:
                return
    for source, keyed in predecessor_table(graph)[node_id].items():
        for key in keyed:
            yield (source, node_id, key)
            count += 1
            if count >= limit:
                return


def _without_meta(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attrs`` without kgot's ``_``-prefixed metadata (a lens's marker says it instead)."""
    if not any(key[:1] == "_" for key in attrs):
        return attrs
    return {key: value for key, value in attrs.items() if key[:1] != "_"}


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return " ".join(_value_text(v) for v in value[:50])
    if isinstance(value, dict):
        return " ".join(_value_text(v) for v in list(value.values())[:50])
    return ""


def _header(n_nodes: int, n_edges: int, shown_nodes: int, shown_edges: int) -> str:
    return (
        f"Graph: {_count(n_nodes, n_edges)}; shown: the {_count(shown_nodes, shown_edges, 'and')} "
        "most relevant here (the rest is counted at the end)."
    )


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _count(nodes: int, edges: int, joiner: str = ",") -> str:
    """``3 nodes, 1 edge`` (or ``3 nodes and 1 edge``)."""
    separator = ", " if joiner == "," else f" {joiner} "
    return f"{_plural(nodes, 'node')}{separator}{_plural(edges, 'edge')}"


def _footer(omitted_nodes: Mapping[str, int], omitted_edges: Mapping[str, int]) -> str:
    node_total, edge_total = sum(omitted_nodes.values()), sum(omitted_edges.values())
    return (
        f"Not shown: {_plural(node_total, 'node')}{_breakdown(omitted_nodes, 'label')} and "
        f"{_plural(edge_total, 'edge')}{_breakdown(omitted_edges, 'relationship')}; query the "
        "graph to reach them."
    )


def _breakdown(counts: Mapping[str, int], noun: str) -> str:
    if not counts:
        return ""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    parts = [f"{name} {count:,}" for name, count in ordered[:FOOTER_LABELS]]
    rest = len(ordered) - FOOTER_LABELS
    if rest > 0:
        others = sum(count for _, count in ordered[FOOTER_LABELS:])
        parts.append(f"{others:,} more under {_plural(rest, 'other ' + noun)}")
    return " (" + ", ".join(parts) + ")"


def _worst_case(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts giving the longest footer: everything omitted, the wordiest names listed."""
    total = sum(counts.values())
    wordiest = sorted(counts, key=lambda name: -count_tokens(name))
    worst = dict.fromkeys(wordiest[:FOOTER_LABELS], total)
    if len(wordiest) > FOOTER_LABELS:
        worst[wordiest[FOOTER_LABELS]] = 0  # makes the "N other labels" part appear
        worst = {name: total for name in worst}
    return worst


def _omitted(totals: Mapping[str, int], shown: Mapping[str, int]) -> dict[str, int]:
    """What is left of each type's count once ``shown`` (type -> lines shown) is taken off."""
    left = {name: total - shown.get(name, 0) for name, total in totals.items()}
    return {name: count for name, count in left.items() if count > 0}


def _tiny(n_nodes: int, n_edges: int, budget: int) -> str:
    text = f"Graph: {_count(n_nodes, n_edges)} (none shown: query the graph)."
    return text if count_tokens(text) <= budget else ""
