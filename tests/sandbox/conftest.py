"""Real sandboxes for the sandbox tests: one warm bwrap and one fallback pool per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError
from kgot.sandbox import Sandbox, open_sandbox
from kgot.sandbox.bwrap import bwrap_problem, find_bwrap
from kgot.sandbox.fallback import fallback_problem

# Small limits keep the hostile tests quick on a 2-core machine.
TEST_SETTINGS = {
    "pool_size": 1,
    "timeout": 10.0,
    "memory_mb": 256,
    "cpu_seconds": 10,
    "max_processes": 32,
    "work_dir_mb": 32,
    "max_file_mb": 64,
    "preload": ["networkx"],
}


def _skip_reason(kind: str) -> str | None:
    if kind == "bwrap":
        return bwrap_problem(find_bwrap())
    return fallback_problem()


def make_sandbox(kind: str, **overrides: object) -> Sandbox:
    """A sandbox of ``kind``; the test skips, saying why, where this machine cannot have one
    (no bubblewrap, no namespaces, or a Python environment jobs' uid may not read)."""
    reason = _skip_reason(kind)
    if reason is not None:
        pytest.skip(f"{kind} sandbox unavailable here: {reason}")
    try:
        return open_sandbox(SandboxSettings(kind=kind, **{**TEST_SETTINGS, **overrides}))
    except SandboxUnavailableError as error:
        pytest.skip(f"{kind} sandbox unavailable here: {error}")


@pytest.fixture(scope="module", params=["bwrap", "fallback"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """Each hardened kind in turn, warm, shared by the tests of one module."""
    box = make_sandbox(request.param)
    yield box
    box.close()


@pytest.fixture(scope="module")
def bwrap_sandbox() -> Iterator[Sandbox]:
    box = make_sandbox("bwrap")
    yield box
    box.close()


@pytest.fixture
def sandbox_factory() -> Iterator[object]:
    """``factory(kind, **settings)``: a fresh sandbox, closed after the test."""
    made: list[Sandbox] = []

    def factory(kind: str, **overrides: object) -> Sandbox:
        box = make_sandbox(kind, **overrides)
        made.append(box)
        return box

    yield factory
    for box in made:
        box.close()
