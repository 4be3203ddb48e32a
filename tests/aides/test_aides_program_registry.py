"""Aide programs come from the ``kgot.aide_programs`` extension point (issue 28, part 2): a
registered program is accepted by ``create_aide`` and set up by its ``on_create``; a program
that is not installed is refused with the installed ones named, at creation and, for an aide
whose program went away, before its cycle. Real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.aide_rows import get_aide
from kgot.aides.programs import AIDE_PROGRAMS, check_ready, program_names
from kgot.errors import ConfigError, UsageError
from kgot.persistence import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "aides.db")) as opened:
        yield opened


@pytest.fixture
def echo() -> Iterator[list[str]]:
    """A program called ``echo``, registered in this process; what its hooks were called for."""
    calls: list[str] = []

    async def run_cycle(*_args: Any) -> Any:
        return SimpleNamespace(to_json=lambda: {"echoed": True})

    program = SimpleNamespace(
        on_create=lambda _store, row: calls.append(f"on_create {row.name}"),
        check_ready=lambda _store, row: calls.append(f"check_ready {row.name}"),
        run_cycle=run_cycle,
    )
    AIDE_PROGRAMS.register("echo", program)
    yield calls
    AIDE_PROGRAMS.unregister("echo")


def test_a_registered_program_is_created_and_set_up(store: Store, echo: list[str]) -> None:
    assert program_names()[0] == "digest" and {"advisor", "echo"} <= set(program_names())
    aide = create_aide(store, "parrot", "acme", program="echo")
    assert aide.row.program == "echo"
    check_ready(store, aide.row)
    assert echo == ["on_create parrot", "check_ready parrot"]


def test_a_program_not_installed_is_refused(store: Store, echo: list[str]) -> None:
    with pytest.raises(UsageError, match="unknown program 'poetry'; use one of: digest, "):
        create_aide(store, "poet", "acme", program="poetry")
    create_aide(store, "parrot", "acme", program="echo")
    AIDE_PROGRAMS.unregister("echo")  # its package was uninstalled since
    with pytest.raises(ConfigError, match="the aide program 'echo' is not installed"):
        check_ready(store, get_aide(store, "parrot"))
