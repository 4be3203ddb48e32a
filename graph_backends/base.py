"""The graph-backend contract shared by NetworkX, RDF and later backends.

Everything above this package (controller, CLI) sees a graph engine through this module only.
The common currency is the *property graph* of :mod:`kgot.graph_model` (nodes, edges,
changesets). Backends turn LLM-written write code into a :class:`Changeset` (computed on a copy,
never applied partially) and apply validated changesets atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import networkx as nx

from kgot.graph_model import Changeset, GraphStats

if TYPE_CHECKING:
    from kgot.graph_backends.views import FactLens


@dataclass(frozen=True)
class QueryLanguage:
    """What prompts need to know to ask a model for code against a backend."""

    name: str  # "python" | "sparql" | …
    display_name: str  # e.g. "Python (NetworkX)"
    fence: str  # code-fence tag the model should use, e.g. "python"
    read_contract: str  # how read queries see the graph and return a result
    write_contract: str  # how write code changes the graph
    read_example: str
    write_example: str


@dataclass(frozen=True)
class ViewRequest:
    """What a prompt needs to see of the graph."""

    question: str
    token_budget: int
    focus: Sequence[str] = ()  # recent texts (tool results, reasons) whose entities matter
    lens: FactLens | None = None  # an entity run's fact trust: ranking and markers (views.py)


@dataclass(frozen=True)
class GraphView:
    """A rendering of (part of) the graph for a prompt."""

    text: str
    tokens: int
    nodes_shown: int
    edges_shown: int
    nodes_total: int
    edges_total: int
    omitted_nodes_by_label: Mapping[str, int] = field(default_factory=dict)
    omitted_edges_by_relationship: Mapping[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.nodes_shown == self.nodes_total and self.edges_shown == self.edges_total


@dataclass(frozen=True)
class QueryResult:
    """The outcome of a read query that ran without error.

    ``truncated`` says the value was cut to the item cap (``text`` says so too, for prompts).
    """

    value: Any  # JSON-compatible
    text: str  # rendering for prompts
    empty: bool
    truncated: bool = False


@runtime_checkable
class GraphBackend(Protocol):
    """One knowledge graph the controller reads and writes without knowing its engine."""

    @property
    def name(self) -> str: ...

    @property
    def language(self) -> QueryLanguage: ...

    def render(self, request: ViewRequest) -> GraphView:
        """The part of the graph most relevant to the request, within its token budget."""
        ...

    def query(self, query: str, *, max_items: int | None = None) -> QueryResult:
        """Run a read query (in the sandbox where the language is code).

        ``max_items`` caps the result (rows, or items at every depth of a Python value; default
        20,000); a cut result has ``truncated`` set.

        Raises:
            QueryError: the query failed; the message is fit to show the model for a fix.
        """
        ...

    def propose(self, code: str) -> Changeset:
        """Run write code on a copy of the graph and return the validated difference.

        Raises:
            CodeExecutionError: the code failed; the message is fit for fix-code.
            ChangesetError: the result breaks the graph rules (missing label, bad id, …).
        """
        ...

    async def aquery(self, query: str, *, max_items: int | None = None) -> QueryResult:
        """:meth:`query` without blocking the event loop (the controller's way)."""
        ...

    async def apropose(self, code: str) -> Changeset:
        """:meth:`propose` without blocking the event loop (the controller's way)."""
        ...

    def apply(self, changeset: Changeset) -> None:
        """Apply a changeset atomically: all of it or, on error, none of it.

        Raises:
            ChangesetError: the changeset does not fit the current graph.
        """
        ...

    def to_networkx(self) -> nx.MultiDiGraph:
        """The whole graph as a property graph (a copy the caller may keep)."""
        ...

    def load(self, graph: nx.MultiDiGraph) -> None:
        """Replace the whole graph with ``graph`` (a property graph)."""
        ...

    def stats(self) -> GraphStats: ...

    def warm_up(self, then: Callable[[], None] | None = None) -> None:
        """Get ready for the first query or update in the background (a run calls this as it
        opens), then call ``then`` (at once where nothing is prepared ahead)."""
        ...

    def close(self) -> None:
        """Free what the backend holds besides the graph (a resident sandbox worker)."""
        ...
