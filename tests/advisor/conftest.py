"""Fixtures for the advisor tests: the persistence tests' fresh stores (SQLite and PostgreSQL)
and the controller tests' settings (a scripted model stands in for the LLM)."""

from __future__ import annotations

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
