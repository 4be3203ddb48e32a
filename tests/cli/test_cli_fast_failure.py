"""`kgot ask` checks its input and configuration before loading anything heavy, and refuses a
model endpoint that is down with one probe (issue 27, item 6).

The modules a failed command loaded are read from ``python -X importtime -m kgot …`` (the real
entry point, in its own process): a regression that imports LangChain, LangGraph or the store
before checking the input shows here whatever the machine's speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgot.llm import http as llm_http
from kgot.tests.support.command_line import refused, run_cli
from kgot.tests.support.openai_server import unreachable_url

# Packages (and kgot layers) that cost from a tenth of a second to seconds to import, none of
# which is needed to refuse bad input or a missing model.
HEAVY = (
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langgraph",
    "langsmith",
    "openai",
    "tiktoken",
    "networkx",
    "rdflib",
    "pyoxigraph",
    "pandas",
    "numpy",
    "sqlalchemy",
    "kgot.controller",
    "kgot.persistence",
    "kgot.sandbox",
    "kgot.graph_backends",
)


def _kgot(tmp_path: Path, *args: str) -> tuple[int, str, set[str]]:
    """Run ``kgot ARGS…`` with ``-X importtime``: its exit code, its own stderr lines and
    the top-level names of every module it imported."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("KGOT_", "OPENAI_"))
    }
    env.update(KGOT_DB=str(tmp_path / "kgot.db"), COLUMNS="80")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kgot", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    said: list[str] = []
    loaded: set[str] = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                loaded.add(name)
        else:
            said.append(line)
    return done.returncode, "\n".join(said), loaded


def _heavy(loaded: set[str]) -> list[str]:
    return sorted(
        name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "q"], "no model configured"),
        (["ask", "--trace", "q"], "no model configured"),
        (["ask", "--planning-model", "openai:m", "q"], "no model configured for the execution"),
        (["ask", "--model", "openai:m", "--votes", "0", "q"], "controller.votes"),
        (["ask", "--model", "openai:m", "--backend", "nope", "q"], "controller.backend"),
        (["ask", "--model", "openai:m", "--bogus", "q"], "No such option: --bogus"),
        (["ask", "--model", "openai:m", "-a", "missing.txt", "q"], "attachment missing.txt"),
        (["ask", "--model", "openai:m", "--graph", "missing.json", "q"], "--graph missing"),
        (["ask", "--model", "openai:m", "  "], "is empty"),
        (["ask", "--model", "openai:m", "--gaia-format", "--no-gaia-format", "q"], "not both"),
    ],
)
def test_bad_input_is_refused_before_heavy_imports(
    tmp_path: Path, args: list[str], message: str
) -> None:
    code, said, loaded = _kgot(tmp_path, *args)
    assert code == 2, said
    assert said.count("\n") == 0 and said.startswith("kgot: error: "), said
    assert message in said
    assert _heavy(loaded) == []
    assert not (tmp_path / "kgot.db").exists()  # nothing half-written


@pytest.mark.slow
def test_an_unreachable_endpoint_is_refused_before_heavy_imports(tmp_path: Path) -> None:
    url = unreachable_url()
    code, said, loaded = _kgot(tmp_path, "ask", "--model", "openai:m", "--base-url", url, "q")
    assert code == 2, said
    assert said.startswith(f"kgot: error: model endpoint {url} is unreachable"), said
    assert "\n" not in said
    assert _heavy(loaded) == []
    assert not (tmp_path / "kgot.db").exists()


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"]])
def test_help_imports_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    code, said, loaded = _kgot(tmp_path, *args)
    assert code == 0, said
    assert _heavy(loaded) == []


def test_an_unreachable_endpoint_costs_one_probe(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Both roles at one dead URL: one connection attempt, no run, no store, exit 2 — where
    the run used to send 5 votes x 5 attempts before failing (15-20 s)."""
    probed: list[str] = []
    real = llm_http._probe

    async def counted(base_url: str) -> None:
        probed.append(base_url)
        await real(base_url)

    monkeypatch.setattr(llm_http, "_probe", counted)
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    url = unreachable_url()
    result = run_cli(capsys, "ask", "--model", "openai:m", "--base-url", url, "q")
    refused(result, f"model endpoint {url} is unreachable")
    assert "--base-url, KGOT_BASE_URL or llm.base_url" in result[2]
    assert probed == [url]
    assert not (tmp_path / "kgot.db").exists()
