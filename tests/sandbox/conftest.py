"""Real sandboxes for the sandbox tests: one warm bwrap and one fallback pool per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kgot.config import SandboxSettings
from kgot.sandbox import Sandbox, open_sandbox
from kgot.tests.conftest import SANDBOX_REQUIRED_BY
from kgot.tests.support.sandbox_probe import machine_problem

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


def make_sandbox(kind: str, **overrides: object) -> Sandbox:
    """A sandbox of ``kind``. The test skips, saying why, only where this machine cannot have
    one (an independent probe finds no bubblewrap, namespaces or libseccomp), and fails instead
    where CI or KGOT_REQUIRE_SANDBOX is set. Where the machine can have one, kgot's refusal
    (``SandboxUnavailableError``) is the test's failure."""
    reason = machine_problem(kind)
    if reason is not None:
        message = f"{kind} sandbox unavailable here: {reason}"
        if SANDBOX_REQUIRED_BY is not None:
            pytest.fail(f"{SANDBOX_REQUIRED_BY} is set, so the tests need it, but the {message}")
        pytest.skip(message)
    return open_sandbox(SandboxSettings(kind=kind, **{**TEST_SETTINGS, **overrides}))


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
