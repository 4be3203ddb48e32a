"""Every command's help reads whole in an 80-column terminal, and flags look like flags."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import typer

from kgot.cli.main import app, main

_BOX = "│╭╮╰╯─"


def _commands() -> Iterator[tuple[list[str], list[str]]]:
    """Each command path with every help text it declares (its own and its parameters')."""
    root = typer.main.get_command(app)

    def walk(command: object, path: list[str]) -> Iterator[tuple[list[str], list[str]]]:
        texts = [getattr(command, "help", None) or ""]
        texts += [getattr(param, "help", None) or "" for param in getattr(command, "params", [])]
        yield path, texts
        for name, child in sorted(getattr(command, "commands", {}).items()):
            yield from walk(child, [*path, name])

    yield from walk(root, [])


COMMANDS = list(_commands())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "declared"), COMMANDS, ids=[" ".join(p) or "kgot" for p, _ in COMMANDS]
)
def test_help_reads_whole_at_80_columns(
    path: list[str],
    declared: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "<bool>" not in out  # flags take no value
    whole = " ".join(" ".join(declared).split())
    cut = [
        word
        for word in out.translate({ord(c): " " for c in _BOX}).split()
        if word.endswith("…") and word not in whole
    ]
    assert cut == [], f"help text cut short: {cut}"
    # Bracketed words are text, not Rich markup: `'.[advisor]'`, `[memory] embeddings`
    flat = " ".join(out.translate({ord(c): " " for c in _BOX}).split())
    bracketed = sorted({word for text in declared for word in re.findall(r"\[[^\]\s]+\]", text)})
    assert [word for word in bracketed if word not in flat] == []


def test_flags_are_listed_bare(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["ask", "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for flag in ("--json ", "--trace ", "--help "):
        [line] = [line for line in lines if f"│ {flag}" in line]
        assert "<" not in line, line
    [graph] = [line for line in lines if "│ --graph " in line]
    assert "<path>" in graph  # options that take a value still show its type


def test_bracketed_words_survive_in_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["aide", "market-data", "--help"]) == 0
    assert "pip install -e '.[advisor]' in the checkout" in " ".join(
        capsys.readouterr().out.split()
    )
    assert main(["memory", "embed", "--help"]) == 0
    assert "[memory] embeddings" in " ".join(capsys.readouterr().out.split())
