"""Running ``kgot …`` in-process from a test: its exit code and what it printed, and the
check that a command was refused the way kgot refuses bad input (exit code 2, one line)."""

from __future__ import annotations

import pytest

from kgot.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kgot ARGS…``: its exit code, stdout and stderr (only what this command printed)."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def refused(result: tuple[int, str, str], message: str) -> None:
    """``result`` (of :func:`run_cli`) is a refusal saying ``message``: exit code 2 and one
    line, ``kgot: error: …``, on stderr (no traceback)."""
    code, out, err = result
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("kgot: error: "), err
    assert "Traceback" not in err, err
    assert message in err, err
