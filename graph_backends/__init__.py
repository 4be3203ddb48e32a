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
from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    import networkx as nx

    from kgot.graph_backends.common import PropertyGraphBackend
    from kgot.graph_backends.graph_state import size_problems
    from kgot.graph_backends.jobs.lookups import request_key as lookup_key
    from kgot.graph_backends.jobs.outcome import MAX_ITEMS as MAX_READ_ITEMS
    from kgot.graph_backends.jobs.rdf_model import NODE as RDF_NODE
    from kgot.graph_backends.jobs.rdf_model import decode_local as rdf_decode_local
    from kgot.graph_backends.jobs.rdf_model import encode_local as rdf_encode_local
    from kgot.graph_backends.jobs.sparql_guard import check as check_sparql
    from kgot.graph_backends.networkx_backend import NetworkXBackend
    from kgot.graph_backends.rdf_backend import RdfBackend
    from kgot.graph_backends.runner import FactsNeededError
    from kgot.graph_backends.view_lines import LineFormat
    from kgot.graph_backends.views import BACKGROUND_INDEX_NODES
    from kgot.sandbox import Sandbox

BACKENDS = ("networkx", "rdf")

# Loaded on first use (the backends bring pyoxigraph and the sandbox's job code): name -> its
# module and its name there (the jobs' names say more with the package's prefix).
_LAZY = {
    "BACKGROUND_INDEX_NODES": ("views", "BACKGROUND_INDEX_NODES"),
    "FactsNeededError": ("runner", "FactsNeededError"),
    "lookup_key": ("jobs.lookups", "request_key"),
    "LineFormat": ("view_lines", "LineFormat"),
    "MAX_READ_ITEMS": ("jobs.outcome", "MAX_ITEMS"),
    "NetworkXBackend": ("networkx_backend", "NetworkXBackend"),
    "PropertyGraphBackend": ("common", "PropertyGraphBackend"),
    "RDF_NODE": ("jobs.rdf_model", "NODE"),
    "RdfBackend": ("rdf_backend", "RdfBackend"),
    "check_sparql": ("jobs.sparql_guard", "check"),
    "rdf_decode_local": ("jobs.rdf_model", "decode_local"),
    "rdf_encode_local": ("jobs.rdf_model", "encode_local"),
    "size_problems": ("graph_state", "size_problems"),
}

__all__ = [
    "BACKENDS",
    "BACKGROUND_INDEX_NODES",
    "FORMATS",
    "MAX_READ_ITEMS",
    "RDF_NODE",
    "FactsNeededError",
    "GraphBackend",
    "GraphView",
    "LineFormat",
    "NetworkXBackend",
    "PropertyGraphBackend",
    "QueryLanguage",
    "QueryResult",
    "RdfBackend",
    "ViewRequest",
    "check_sparql",
    "graph_format",
    "lookup_key",
    "open_backend",
    "prepare_backend",
    "rdf_decode_local",
    "rdf_encode_local",
    "read_graph",
    "read_import_file",
    "size_problems",
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


__getattr__ = lazy_exports(
    __name__, {name: f".{module}:{attribute}" for name, (module, attribute) in _LAZY.items()}
)
