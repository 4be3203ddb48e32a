"""Where `kgot ask` takes its question from: the argument, stdin (`-`) or --question-file; and
the warning when the question alone is longer than the model's context window."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.tests.support.openai_server import OpenAIServer, Reply

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUESTION = "What is the population density of Paris?"


@pytest.fixture(autouse=True)
def store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))


def _ask_quickstart(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    """Run the quickstart with this question; the result holds the run's recorded question."""
    code = main(
        ["ask", "--model", f"scripted:{EXAMPLES / 'quickstart.json'}", "-a",
         str(EXAMPLES / "cities.txt"), "--json", *args]
    )  # fmt: skip
    out, err = capsys.readouterr()
    if code != 0:
        return code, {}, err
    result = json.loads(out)
    assert main(["runs", "list", "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)
    return code, {**result, "question": run["question"]}, err


@pytest.mark.slow
def test_dash_reads_the_question_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(QUESTION + "\n"))
    code, result, err = _ask_quickstart(capsys, "-")
    assert code == 0, err
    assert result["question"] == QUESTION
    assert result["answer"] == "about 19,949 inhabitants per km²"


@pytest.mark.slow
def test_question_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "question.txt"
    path.write_text(f"{QUESTION}\n", encoding="utf-8")
    code, result, err = _ask_quickstart(capsys, "--question-file", str(path))
    assert code == 0, err
    assert result["question"] == QUESTION
    assert "warning" not in err  # the scripted model states no context window


@pytest.mark.parametrize(
    "case",
    [
        (["-"], "  \n", "the question read from stdin is empty"),
        (["--question-file", "MISSING"], "", "cannot read --question-file"),
        (["--question-file", "LATIN1"], "", "is not UTF-8 text"),
        (["--question-file", "EMPTY"], "", "is empty"),
        (["--question-file", "EMPTY", "also an argument"], "", "not both"),
        (["--resume", "some-run", "--question-file", "EMPTY"], "", "drop a question"),
    ],
)
def test_unusable_questions_are_one_line_errors(
    case: tuple[list[str], str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args, stdin, message = case
    files = {"MISSING": tmp_path / "missing.txt", "LATIN1": tmp_path / "latin1.txt",
             "EMPTY": tmp_path / "empty.txt"}  # fmt: skip
    files["LATIN1"].write_bytes("Qu'est-ce que la densité ?".encode("latin-1"))
    files["EMPTY"].write_text("\n", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    argv = [str(files[arg]) if arg in files else arg for arg in args]
    code = main(["ask", "--model", f"scripted:{EXAMPLES / 'quickstart.json'}", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
    assert message in err


@pytest.mark.slow
@pytest.mark.parametrize(("words", "warned"), [(200_000, True), (1_000, False)])
def test_a_question_longer_than_the_context_window_is_warned_about(
    words: int,
    warned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """gpt-4o-mini's profile states a 128,000-token window; the endpoint is up (it answers the
    reachability probe) but refuses every request, so the run fails right after the warning
    (which comes before any request)."""
    monkeypatch.setenv("KGOT_LLM_MAX_RETRIES", "0")
    path = tmp_path / "long.txt"
    path.write_text("word " * words + "?", encoding="utf-8")
    with OpenAIServer(default=Reply.error(401, "no key")) as server:
        code = main(
            ["ask", "--model", "openai:gpt-4o-mini", "--base-url", server.url,
             "--timeout", "2", "--question-file", str(path)]
        )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    warnings = [line for line in err.splitlines() if line.startswith("kgot: warning:")]
    if warned:
        assert warnings == [
            "kgot: warning: the question alone is about 200,001 tokens, more than the "
            "128,000-token context window of openai:gpt-4o-mini (planning model); shorten it, "
            "or pass the long text as a file with -a FILE (tools read files in pages)"
        ]
    else:
        assert warnings == []
