"""Swappable graph backends behind one contract.

Entry points: :func:`open_backend` (``networkx`` or ``rdf``), :func:`read_graph` and
:func:`write_graph` (``.json``, ``.graphml``, ``.ttl``, ``.nt``; :func:`graph_format` checks an
extension before anything is read). The contract lives in :mod:`kgot.graph_backends.base`, the
graph's data types in :mod:`kgot.graph_model`; docs/graph-backends.md documents the graph-code
contract and the property-graph ↔ RDF mapping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.errors import UsageError
from kgot.graph_backends.base import (
    GraphBackend,
    GraphView,
    QueryLanguage,
    QueryResult,
    ViewRequest,
)
from kgot.graph_backends.graph_files import (
    FORMATS,
    graph_format,
    read_graph,
    read_import_file,
    write_graph,
)

if TYPE_CHECKING:
    import networkx as nx

    from kgot.sandbox.base import Sandbox

BACKENDS = ("networkx", "rdf")

__all__ = [
    "BACKENDS",
    "FORMATS",
    "GraphBackend",
    "GraphView",
    "QueryLanguage",
    "QueryResult",
    "ViewRequest",
    "graph_format",
    "open_backend",
    "prepare_backend",
    "read_graph",
    "read_import_file",
    "write_graph",
]


def prepare_backend(name: str, sandbox: Sandbox) -> None:
    """Start what a backend called ``name`` will need of ``sandbox`` (its run's own worker,
    where the sandbox keeps one), before the backend exists: a run calls this as it opens the
    sandbox, so the worker starts while the store opens and the graph loads."""
    prepare = getattr(sandbox, "prepare_resident", None)
    if prepare is None or name not in BACKENDS:
        return
    if name == "networkx":
        from kgot.graph_backends.networkx_backend import NetworkXBackend

        prepare(NetworkXBackend.resident_modules)
    else:
        from kgot.graph_backends.rdf_backend import RdfBackend

        prepare(RdfBackend.resident_modules)


def open_backend(
    name: str,
    sandbox: Sandbox,
    graph: nx.MultiDiGraph | None = None,
    *,
    timeout_s: float | None = None,
    endpoint: str | None = None,
    endpoint_update: str | None = None,
    endpoint_graph: str | None = None,
    max_property_bytes: int | None = None,
) -> GraphBackend:
    """A backend holding ``graph`` (a property graph; ``None`` = empty).

    Args:
        name: ``networkx`` (graph code in Python) or ``rdf`` (SPARQL).
        sandbox: where graph code and queries run.
        graph: the initial property graph; it is copied and checked.
        timeout_s: wall-clock limit per query or update (default: the sandbox's).
        endpoint: ``rdf`` only: URL of a SPARQL 1.1 query endpoint that also holds the graph.
        endpoint_update: its update URL (default: ``endpoint``).
        endpoint_graph: the named graph kgot uses there (default: the endpoint's default graph).
        max_property_bytes: changes with a larger property value (as UTF-8 JSON) are refused
            (``store.max_property_bytes``; ``None``: no cap).

    Raises:
        UsageError: unknown backend name, or an endpoint given for ``networkx``.
        ChangesetError: ``graph`` breaks the property-graph rules.
        StoreError: the endpoint cannot be reached.
    """
    if name == "networkx":
        if endpoint:
            raise UsageError("a SPARQL endpoint needs the rdf backend; use --backend rdf")
        from kgot.graph_backends.networkx_backend import NetworkXBackend

        return NetworkXBackend(
            sandbox, graph, timeout_s=timeout_s, max_property_bytes=max_property_bytes
        )
    if name == "rdf":
        from kgot.graph_backends.rdf_backend import RdfBackend

        remote = None
        if endpoint:
            from kgot.graph_backends.remote import SparqlEndpoint

            remote = SparqlEndpoint(
                endpoint, update_url=endpoint_update, graph_iri=endpoint_graph, timeout_s=timeout_s
            )
        return RdfBackend(
            sandbox,
            graph,
            timeout_s=timeout_s,
            endpoint=remote,
            max_property_bytes=max_property_bytes,
        )
    raise UsageError(f"unknown graph backend {name!r}; choose one of: {', '.join(BACKENDS)}")
