"""`kgot runs list` prints ids abbreviated like git (whole, at 80 columns) and `kgot runs show`
takes any unique abbreviation; `runs show` gives the reason of each failed tool call."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kgot.cli.ask_cmd import abbreviation_length, resolve_run_id
from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.persistence import open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Two ids share their first 9 characters: 10 tell them apart.
TWINS = ("3f1c0a2b-aaaa-4aaa-8aaa-000000000001", "3f1c0a2b-bbbb-4bbb-8bbb-000000000002")
LONER = "7d00e5c1-cccc-4ccc-8ccc-000000000003"

Kgot = Callable[..., tuple[int, str, str]]


@pytest.fixture
def kgot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Kgot:
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def runs(kgot: Kgot, tmp_path: Path) -> Kgot:
    """One real run whose tool call failed (the first twin), and two recorded runs."""
    script = json.loads((EXAMPLES / "quickstart.json").read_text(encoding="utf-8"))
    script["define_tool_calls"] = [
        {"$tool_calls": [{"name": "inspect_file", "args": {"path": "missing.txt"}}]}
    ]
    script["query"] = ["```python\nresult = 'nothing known'\n```"]
    script["math_check"] = [{"needs_math": False, "reason": "-"}]
    script["solve"] = [{"answer": "unknown", "reasoning": "-"}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    code, _, err = kgot("ask", "--model", f"scripted:{path}", "--run-id", TWINS[0], "Density?")
    assert code == 0, err
    store = open_store(str(tmp_path / "kgot.db"))
    try:
        for run_id in (TWINS[1], LONER):
            store.start_run(run_id, "Another question?", None, {})
    finally:
        store.close()
    return kgot


@pytest.mark.slow
def test_runs_list_prints_whole_short_ids_at_80_columns(runs: Kgot) -> None:
    code, out, err = runs("runs", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split()[:2] == ["run", "id"] and len(lines) == 4  # one line a run
    ids = [line.split()[0] for line in lines[1:]]
    assert sorted(ids) == sorted([TWINS[0][:10], TWINS[1][:10], LONER[:10]])


@pytest.mark.slow
@pytest.mark.parametrize("given", [TWINS[0], TWINS[0][:10], "3f1c0a2b-a"])
def test_runs_show_takes_a_unique_abbreviation(runs: Kgot, given: str) -> None:
    code, out, err = runs("runs", "show", given)
    assert code == 0, err
    assert f"run_id       {TWINS[0]}\n" in out
    lines = out.splitlines()
    failed = lines.index("  [ERR] iteration 1: inspect_file {'path': 'missing.txt'}")
    reason = lines[failed + 1]  # the tool's own error, as the model saw it
    assert reason.startswith("        reason: Error: ") and "'missing.txt'" in reason


@pytest.mark.slow
def test_runs_show_json_keeps_the_full_id(runs: Kgot) -> None:
    code, out, err = runs("runs", "show", "7d00", "--json")
    assert code == 0, err
    assert json.loads(out)["run_id"] == LONER


@pytest.mark.slow
def test_an_ambiguous_abbreviation_asks_for_more(runs: Kgot) -> None:
    code, out, err = runs("runs", "show", "3f1c")
    assert code == 2 and out == ""
    assert err == (
        "kgot: error: run id '3f1c' is the start of 2 run ids; give more characters "
        "(see `kgot runs list`)\n"
    )
    code, _, err = runs("runs", "show", "0000")
    assert code == 2 and "no run '0000'" in err


def test_abbreviations_like_git() -> None:
    assert abbreviation_length([LONER], [*TWINS, LONER]) == 8
    assert abbreviation_length([LONER, TWINS[0]], [*TWINS, LONER]) == 10
    assert abbreviation_length(["r1"], ["r1", "r1x"]) == 8  # shorter ids stay whole
    assert resolve_run_id("r1", ["r1", "r1x"]) == "r1"  # an exact id is never ambiguous
    assert resolve_run_id("r1x", ["r1x"]) == "r1x"
    assert resolve_run_id("nope", []) == "nope"
    with pytest.raises(UsageError, match="start of 2 run ids"):
        resolve_run_id("r", ["r1", "r2"])


@pytest.mark.slow
def test_resume_takes_a_unique_abbreviation(runs: Kgot) -> None:
    code, out, err = runs("ask", "--resume", "3f1c0a2b-a")
    assert code == 0, err  # the finished run is reported again, under its whole id
    assert out == "unknown\n"
    code, out, err = runs("ask", "--resume", "3f1c")
    assert code == 2 and out == ""
    assert "run id '3f1c' is the start of 2 run ids" in err
