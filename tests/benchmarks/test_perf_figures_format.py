"""How `kgot bench perf` prints its figures (issue 27, item 11): lines of 80–100 characters,
not 159, whatever the names, with the figures of an area under its heading."""

from __future__ import annotations

import pytest

from kgot.benchmarks.figures import MAX_WIDTH, Figure, format_figures, print_figures

# Names as long as the real ones (the MCP figures were what made lines 159 characters).
FIGURES = [
    Figure("advisor", "graph load at 1,000 nodes (once per cycle)", 18.63, "ms"),
    Figure("advisor", "evidence pack per user, p95", 7.213, "ms", target=100),
    Figure(
        "mcp",
        "SQLite, 2,000 nodes / 2,000 edges: search_memory over Streamable HTTP, first call "
        "after a write (index rebuild)",
        122.512,
        "ms",
    ),
    Figure(
        "mcp",
        "SQLite, 2,000 nodes / 2,000 edges: search_memory over Streamable HTTP, 8 concurrent "
        "clients",
        62.109,
        "requests/s",
    ),
    Figure("store", "SQLite: commit 100 changes p50", 84.45, "ms", target=50),
    Figure("views", "max prompt tokens, 10k nodes, rdf (budget 8,000)", 7973, "tokens", 8000),
    Figure("memory", "resolution recall (labelled set)", 0.979, "ratio", 0.85, "min"),
]


@pytest.mark.parametrize("width", [80, 90, 100])
def test_every_line_fits_the_width(width: int) -> None:
    lines = format_figures(FIGURES, width=width)
    assert max(len(line) for line in lines) <= width, "\n".join(lines)


def test_areas_head_their_figures_and_long_names_wrap_whole() -> None:
    lines = format_figures(FIGURES, width=80)
    assert [line for line in lines if not line.startswith(" ")] == [
        "advisor",
        "mcp",
        "store",
        "views",
        "memory",
    ]
    text = " ".join(" ".join(lines).split())
    # A wrapped name loses no word, and its value stays on its first line.
    assert "first call after a write (index rebuild)" in text
    first = next(line for line in lines if "search_memory" in line or "SQLite, 2,000" in line)
    assert first.rstrip().endswith("122.512 ms")


def test_values_and_verdicts_line_up() -> None:
    lines = format_figures(FIGURES, width=100)
    rows = {" ".join(line.split()[:2]): line for line in lines if line.startswith("  ")}
    assert rows["SQLite: commit"].endswith("84.45 ms  MISSED (≤ 50)")
    assert rows["evidence pack"].endswith("7.213 ms  ok (≤ 100)")
    assert rows["resolution recall"].endswith("0.979 ratio  ok (≥ 0.85)")
    values = ["18.63 ms", "7.213 ms", "122.512 ms", "62.109 requests/s", "84.45 ms"]
    value_ends = {
        line.index(value) + len(value) for line in lines for value in values if value in line
    }
    assert len(value_ends) == 1, lines  # right-aligned in one column


def test_print_figures_follows_the_terminal_up_to_100_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    print_figures(FIGURES)
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 80
    monkeypatch.setenv("COLUMNS", "240")
    print_figures(FIGURES)
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= MAX_WIDTH
