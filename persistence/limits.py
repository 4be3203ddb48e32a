"""How much one write or import may ask of the store: the caps a commit and an import check
before doing the work (``[store]`` settings, see :class:`kgot.config.StoreSettings`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreLimits:
    """Caps on what a commit or an import may hold, and on the time checking it may take.

    Attributes:
        max_property_bytes: largest property value, as UTF-8 JSON (a document's text belongs
            in a file the fact points to, not in the graph).
        check_seconds: the longest checking one changeset against its types may take; a
            schema that makes more work of its values is reported, never waited out.
        max_import_bytes: largest graph file ``kgot graph import`` reads.
        max_import_nodes: most nodes one import may hold.
        max_import_edges: most edges one import may hold.
    """

    max_property_bytes: int = 1_000_000
    check_seconds: float = 30.0
    max_import_bytes: int = 100 * 1024 * 1024
    max_import_nodes: int = 250_000
    max_import_edges: int = 1_000_000


DEFAULT_LIMITS = StoreLimits()
