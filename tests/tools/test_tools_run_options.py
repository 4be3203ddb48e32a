"""`kgot tools run`/`tools list` as a new user meets them (issue 27, items 8–11): no false
sandbox alarm, `-a` attaches a file as in `kgot ask`, `--workspace DIR` is made and keeps the
python tool's files, and `tools list` fits 80 columns without cutting a URL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from kgot.cli.main import app
from kgot.tests.support.command_line import refused, run_cli

NOTES = "Meeting moved to Thursday.\n"


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file outside the working directory, so only an attachment makes it readable."""
    path = tmp_path / "files" / "notes.txt"
    path.parent.mkdir()
    path.write_text(NOTES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return path


# -- item 9: -a is --attach everywhere -------------------------------------------------------------


def _commands(command: Any, path: str = "kgot") -> list[tuple[str, Any]]:
    """Every command under ``command`` with its path (typer's own click: matched by shape)."""
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, f"{path} {name}")
    return found


def test_dash_a_means_attach_in_every_command() -> None:
    meanings = {
        path: option.name
        for path, command in _commands(typer.main.get_command(app))
        for option in command.params
        if "-a" in getattr(option, "opts", ())
    }
    assert "kgot ask" in meanings and "kgot tools run" in meanings
    assert set(meanings.values()) == {"attach"}, meanings


@pytest.mark.slow
def test_dash_a_attaches_a_file_to_tools_run(notes: Path, capsys) -> None:
    code, out, err = run_cli(
        capsys, "tools", "run", "inspect_file", "--arg", "path=notes.txt", "-a", str(notes)
    )
    assert code == 0, err
    assert "Meeting moved to Thursday." in out
    # Without the attachment the file is out of reach: -a is what made it readable.
    code, out, err = run_cli(capsys, "tools", "run", "inspect_file", "--arg", "path=notes.txt")
    assert code == 1 and "no file 'notes.txt'" in err


def test_dash_a_attaches_a_file_to_ask(capsys) -> None:
    refused(run_cli(capsys, "ask", "-a", "/no/such/file.txt", "Which day?"), "attachment")


def test_an_argument_given_with_dash_a_is_explained(capsys) -> None:
    refused(
        run_cli(capsys, "tools", "run", "python", "-a", "code=print(1)"),
        "-a is --attach, as in kgot ask: give a tool argument as --arg code=print(1)",
    )


# -- item 10: --workspace DIR ----------------------------------------------------------------------


@pytest.mark.slow
def test_workspace_is_created_even_when_nothing_is_saved(tmp_path: Path, capsys) -> None:
    kept = tmp_path / "runs" / "ws"
    code, out, err = run_cli(
        capsys, "tools", "run", "python", "--arg", "code=print(6 * 7)", "--workspace", str(kept)
    )
    assert code == 0, err
    assert out.strip() == "42"
    assert kept.is_dir()


@pytest.mark.slow
def test_python_outputs_land_in_the_workspace(tmp_path: Path, capsys) -> None:
    kept = tmp_path / "ws"
    code = (
        "import os\n"
        "open('relative.csv', 'w').write('k,v\\n')  # the working directory\n"
        "open('/work/out/absolute.txt', 'w').write('kept')\n"
        "print(os.getcwd())\n"
    )
    result = run_cli(
        capsys, "tools", "run", "python", "--arg", f"code={code}", "--workspace", str(kept)
    )
    assert result[0] == 0, result[2]
    assert result[1].splitlines()[0] == "/work/out"
    assert (kept / "relative.csv").read_text() == "k,v\n"
    assert (kept / "absolute.txt").read_text() == "kept"
    # A later command reads them from the workspace it mounts.
    again = run_cli(
        capsys,
        "tools",
        "run",
        "python",
        "--arg",
        "code=print(open('/mnt/inputs/workspace/relative.csv').read().strip())",
        "--workspace",
        str(kept),
    )
    assert again[0] == 0, again[2]
    assert again[1].splitlines()[0] == "k,v"


def test_a_workspace_that_cannot_be_made_is_refused(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    refused(
        run_cli(
            capsys,
            "tools",
            "run",
            "python",
            "--arg",
            "code=print(1)",
            "--workspace",
            str(blocker / "ws"),
        ),
        "cannot create it",
    )


# -- item 11: tools list at 80 columns -------------------------------------------------------------

# 67 characters: it fills the notes column (80 columns less the label) only on a line of its own.
LONG_URL = "https://wiki.internal.example.org/mediawiki/w/api.php?origin=kgot-t"


def test_tools_list_fits_80_columns_and_keeps_urls_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    config = tmp_path / "kgot.toml"
    config.write_text(f'[tools]\nwikipedia_api = "{LONG_URL}"\n')
    monkeypatch.setenv("KGOT_CONFIG", str(config))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "tools", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert any(line.strip() == LONG_URL for line in lines), out
    # The reason a tool is off is whole too: a setting's name is never cut.
    assert "llm.execution.model" in out and "set KGOT_MODEL" in out


# -- item 8: no false alarm on successful calls ----------------------------------------------------


@pytest.mark.slow
def test_successful_calls_never_warn_about_the_sandbox(notes: Path) -> None:
    """The real command, again and again: a warm-up cut short by the command's end used to
    say "the sandbox worker did not start … `--sandbox subprocess`" on some of them."""
    calls = [
        ["tools", "run", "python", "--arg", "code=print(6 * 7)"],
        ["tools", "run", "inspect_file", "--arg", "path=notes.txt", "-a", str(notes)],
    ]
    for round_number in range(6):
        for argv in calls:
            done = subprocess.run(
                [sys.executable, "-m", "kgot", *argv],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (round_number, argv, done.stderr)
            assert "did not start" not in done.stderr, (round_number, argv, done.stderr)
            assert "--sandbox subprocess" not in done.stderr, (round_number, argv, done.stderr)
            assert done.stderr == "", (round_number, argv, done.stderr)
