"""`kgot ask --trace` piped or redirected writes each line whole; in a terminal it fits lines
to the terminal's width."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from kgot.cli.main import main
from kgot.cli.trace import TraceRenderer
from kgot.tracing.events import Code, RunStarted

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUESTION = (
    "What is the population density of Paris, in inhabitants per square kilometre, "
    "according to the city statistics bulletin of 2023 that is attached?"
)
CODE_LINE = '    G.add_node(key, label="City", name=name, population=population, area_km2=area)'


@pytest.mark.slow
def test_piped_trace_keeps_lines_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    monkeypatch.setenv("COLUMNS", "80")
    code = main(
        ["ask", "--model", f"scripted:{EXAMPLES / 'quickstart.json'}", "-a",
         str(EXAMPLES / "cities.txt"), "--trace", QUESTION]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    lines = err.splitlines()
    assert f"Question: {QUESTION}" in lines
    assert CODE_LINE in lines  # 80 characters of code: inside a frame it would wrap
    assert "── update_graph code (attempt 1) ──" in lines
    assert "╭" not in err and "│" not in err


def test_terminal_trace_fits_the_width() -> None:
    screen = io.StringIO()
    renderer = TraceRenderer(Console(file=screen, force_terminal=True, width=60, color_system=None))
    renderer(
        RunStarted(
            iteration=0,
            kind="ask",
            run_id="r1",
            backend="networkx",
            question=QUESTION,
            resumed=False,
            entity=None,
        )
    )
    renderer(Code(iteration=1, purpose="update_graph", attempt=1, code=CODE_LINE))
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 60
    assert any(line.startswith("╭─ update_graph code (attempt 1)") for line in lines)


def test_query_attempts_read_as_queries_and_fixes() -> None:
    # A read query's attempt is `generation.fix`; "attempt 1.0" read like a version number.
    screen = io.StringIO()
    renderer = TraceRenderer(Console(file=screen, width=80, color_system=None))
    for attempt in ("1.0", "2.1"):
        renderer(Code(iteration=2, purpose="query", attempt=attempt, code="result = 1"))
    lines = screen.getvalue().splitlines()
    assert "── query code (query 1) ──" in lines
    assert "── query code (query 2, fix 1) ──" in lines
