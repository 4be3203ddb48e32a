"""Fixtures for the advisor tests: the persistence tests' fresh stores (SQLite and PostgreSQL)
and the controller tests' settings (a scripted model stands in for the LLM); an advisor made
from the command line, and the helpers its tests share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kgot.cli.main import main
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
from kgot.tests.support.command_line import refused, run_cli


@pytest.fixture
def advisor(
    store_url: str,  # noqa: F811  (the fixture imported above)
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """An advisor ``adv`` with one user, ``alice``, on SQLite and on PostgreSQL: the
    ``--db`` arguments that reach it."""
    db = ["--db", store_url]
    assert main(["aide", "create", "adv", "--entity", "markets", "--program", "advisor", *db]) == 0
    assert main(["aide", "user", "add", "adv", "alice", "--risk", "moderate", *db]) == 0
    capsys.readouterr()
    return db


def fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``kgot ARGV…`` is refused (exit code 2, one line ``kgot: error: …``); that line."""
    result = run_cli(capsys, *argv)
    refused(result, "")
    return result[2]


def strict_json(text: str) -> Any:
    """JSON as a strict reader takes it: ``Infinity``/``NaN`` are refused."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def positions_of(
    db: list[str], capsys: pytest.CaptureFixture[str], user: str = "alice"
) -> dict[str, Any]:
    """``kgot aide positions list adv USER --json``, read strictly."""
    code, out, err = run_cli(capsys, "aide", "positions", "list", "adv", user, "--json", *db)
    assert code == 0, err
    return dict(strict_json(out))
