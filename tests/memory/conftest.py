"""Fixtures for the memory tests: the persistence tests' fresh stores (SQLite and PostgreSQL),
the controller tests' scripted runs, and types for upkeep (an identity key, a functional
property and a functional edge)."""

from __future__ import annotations

from typing import Any

from kgot.tests.controller.conftest import (  # noqa: F401  (fixtures, found by name)
    facts_file,
    run,
    settings,
    store_settings,
)
from kgot.tests.persistence.conftest import (  # noqa: F401  (fixtures, found by name)
    _shared_postgres_url,
    postgres_url,
    store,
    store_url,
)

COMPANY: dict[str, Any] = {
    "kind": "node",
    "name": "Company",
    "description": "A business.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "aliases": {"type": "array", "items": {"type": "string"}},
            "symbol": {"type": "string"},
            "ceo": {"type": "string"},
            "sector": {"type": "string"},
        },
    },
    "identity": ["symbol"],
    "functional": ["ceo"],
}
HEADQUARTERED_IN: dict[str, Any] = {
    "kind": "edge",
    "name": "headquartered_in",
    "description": "Where a company has its head office (one at a time).",
    "source": "Company",
    "functional": True,
}
UPKEEP_TYPES = [COMPANY, HEADQUARTERED_IN]
