"""Ctrl-C after `kgot ask` printed its answer does not turn the answered run into an
interruption (issue 27, item 7): the command exits 0, quietly, whenever in the rest of its
work (summary, closing up, the interpreter's exit) the signal lands.

The moment is made deterministic from outside: the test reads the answer line from the
process's stdout (kgot flushes it as soon as it is written) and signals then, while the
process is still finishing.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgot.tests.support.command_line import run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUESTION = "What is the population density of Paris?"
ANSWER = "about 19,949 inhabitants per km²"
ASK = [
    "ask", "--model", f"scripted:{EXAMPLES / 'quickstart.json'}",
    "-a", str(EXAMPLES / "cities.txt"), QUESTION,
]  # fmt: skip


def _answer_line(process: subprocess.Popen[str], timeout: float = 120.0) -> str:
    """The first line the process writes to stdout (waits for it, up to ``timeout``)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as waiting:
        waiting.register(process.stdout, selectors.EVENT_READ)
        if not waiting.select(timeout):
            process.kill()
            pytest.fail(f"no answer within {timeout:g} s")
    return process.stdout.readline()


@pytest.mark.slow
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_after_the_answer_exits_0_quietly(tmp_path: Path, presses: int) -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("KGOT_", "OPENAI_"))
    }
    env["KGOT_DB"] = str(tmp_path / "kgot.db")
    process = subprocess.Popen(
        [sys.executable, "-m", "kgot", *ASK],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        answer = _answer_line(process)
        for press in range(presses):
            if process.poll() is None:  # it may have finished already: that is fine too
                process.send_signal(signal.SIGINT)
            if press + 1 < presses:
                time.sleep(0.05)  # a second Ctrl-C, as an impatient user presses it
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert answer.strip() == ANSWER, err
    assert process.returncode == 0, err
    assert out == ""  # nothing after the answer on stdout
    assert "interrupted" not in err and "Traceback" not in err and "Exception" not in err, err
    assert "kgot: error" not in err, err


@pytest.mark.slow
def test_an_in_process_caller_gets_its_sigint_handling_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The quiet Ctrl-C lasts for the `kgot` process only: `main()` called from Python
    leaves SIGINT as it found it."""
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    before = signal.getsignal(signal.SIGINT)
    code, out, err = run_cli(capsys, *ASK)
    assert (code, out.strip()) == (0, ANSWER), err
    assert signal.getsignal(signal.SIGINT) is before
