"""`kgot ask --help` is readable at 80 columns (issue 27, item 11): its descriptions get a
column of about 40 characters, not 22 (a `--x/--no-x` pair of flags used to take a column of
its own and squeeze every description to a few words a line)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kgot.errors import ConfigError
from kgot.tests.support.command_line import run_cli

# Two or more spaces separate the columns of a help row; the description is the last column.
_COLUMN_GAP = re.compile(r"\s{2,}")


def _description_columns(help_text: str) -> dict[str, int]:
    """Each panel's description column: the width from where its descriptions start to the
    panel's right border (the start is where wrapped description lines continue)."""
    widths: dict[str, int] = {}
    panel = ""
    starts: list[int] = []
    inner = 0
    for line in help_text.splitlines():
        if line.startswith("╭─"):
            panel, starts = line.strip("╭─╮ "), []
            continue
        if line.startswith("╰"):
            if starts:
                widths[panel] = inner - min(starts)
            continue
        if not line.startswith("│"):
            continue
        body = line[1:].rstrip("│")
        inner = len(body)
        content = body.rstrip()
        parts = list(_COLUMN_GAP.finditer(content))
        if parts:  # the description starts after the last wide gap
            starts.append(parts[-1].end())
    return widths


def test_ask_help_descriptions_are_at_least_40_wide_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "ask", "--help")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    widths = _description_columns(out)
    assert {"Options", "Model", "Loop limits"} <= set(widths), out
    narrow = {panel: width for panel, width in widths.items() if width < 40}
    assert not narrow, f"description columns under 40 characters: {narrow}\n{out}"
    # Both gaia flags still exist, each on a row of its own.
    assert "--gaia-format " in out and "--no-gaia-format " in out


@pytest.mark.parametrize(
    ("flags", "expected"),
    [((), True), (("--gaia-format",), True), (("--no-gaia-format",), False)],
)
def test_gaia_format_flags_still_override_the_config_file(
    flags: tuple[str, ...],
    expected: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Split into two flags, the pair still overrides the config file both ways (read from
    the settings the command checks before a run; the check stops it there)."""
    from kgot.cli import ask_cmd

    seen: list[bool] = []

    def record(settings: Any) -> None:
        seen.append(settings.controller.gaia_format)
        raise ConfigError("stopped before the run")

    monkeypatch.setattr(ask_cmd, "_check_models", record)
    config = tmp_path / "config.toml"
    config.write_text("[controller]\ngaia_format = true\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "--config", str(config), "ask", *flags, "q")
    assert (code, seen) == (2, [expected]), err
