"""The advisor's seed types (``seed_types.yaml``) and their installation into an entity.

``kgot aide create NAME --program advisor`` installs them into the aide's entity, scoped to it
and ``created_by: system``: 8 node types (Asset, Company, Sector, AssetClass, Institution,
MarketEvent, News, Insight) and 8 edge types (issued_by, in_sector, belongs_to, affects,
mentions, about, derived_from, correlated), each with its JSON Schema, description, example
and upkeep settings (identity, functional values, half-life, rank weight).

``mentions`` is also a global starter type (Document → anything); the advisor's (News →
anything) shadows it in the advisor's entity only. The agent can still propose new types
(e.g. ``Regulation``) through its type tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kgot.persistence import Store, TypeSpec

JUSTIFICATION = "investment advisor seed type (kgot aide create --program advisor)"


@dataclass(frozen=True)
class InstalledTypes:
    """What :func:`install_types` did: the types it added and the ones the entity had
    already (its own definitions are kept as they are)."""

    added: tuple[str, ...] = ()
    kept: tuple[str, ...] = field(default_factory=tuple)


def advisor_type_specs() -> list[TypeSpec]:
    """The advisor's node and edge types, node types first (edges name them)."""
    from kgot.persistence import parse_type_document, specs_from_document

    text = resources.files("kgot.aides.advisor").joinpath("seed_types.yaml").read_text("utf-8")
    return specs_from_document(parse_type_document(text, "seed_types.yaml"), "seed_types.yaml")


def install_types(store: Store, entity: str) -> InstalledTypes:
    """Add the advisor's types to ``entity`` (all or none), leaving any type the entity
    already defines itself (a second advisor on the same entity, a user's own ``Asset``).

    Raises:
        TypeRejectedError: a type cannot be stored (nothing was stored).
        EntityNotFoundError: no such entity.
    """
    catalog = store.type_catalog(entity)
    specs = advisor_type_specs()
    own = {
        (spec.kind, spec.name)
        for spec in specs
        if (found := catalog.get(spec.kind, spec.name)) is not None and found.scope is not None
    }
    missing = [spec for spec in specs if (spec.kind, spec.name) not in own]
    if missing:
        store.create_types(
            missing,
            entity=entity,
            created_by="system",
            justification=JUSTIFICATION,
            shadow=True,  # the global `mentions` (Document → any) gives way to News → any
        )
    return InstalledTypes(
        added=tuple(spec.name for spec in missing),
        kept=tuple(sorted(name for _kind, name in own)),
    )
