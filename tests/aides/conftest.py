"""Fixtures for the aide tests: the persistence tests' fresh stores (SQLite and PostgreSQL),
the controller tests' settings (a scripted model stands in for the LLM) and a loopback SMTP
server (``mail``)."""

from __future__ import annotations

from kgot.tests.controller.conftest import (  # noqa: F401  (fixtures, found by name)
    settings,
)
from kgot.tests.persistence.conftest import (  # noqa: F401  (fixtures, found by name)
    _shared_postgres_url,
    postgres_url,
    store,
    store_url,
)
from kgot.tests.support.smtp_server import mail  # noqa: F401  (fixture, found by name)
