"""Both harnesses in kgot mode: the real controller, sandbox and store, a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.benchmarks.gaia import run_gaia
from kgot.benchmarks.progress import ProgressView
from kgot.benchmarks.simpleqa import run_simpleqa
from kgot.config import load_settings
from kgot.llm.scripted import ScriptedCall, ScriptedChatModel

pytestmark = pytest.mark.slow  # each question is a full run: sandbox, graph, checkpoints

ANSWERS = {"spider": "8", "secret word": "heliotrope", "number 0": "answer 0"}


def controller_script(call: ScriptedCall) -> object:
    """Retrieve at once, query the (empty) graph, answer from the question."""
    if call.step == "decide":
        return {"decision": "RETRIEVE", "reason": "the answer is known"}
    if call.step in ("query", "fix_query"):
        return "```python\nresult = 'nothing stored'\n```"
    if call.step == "math_check":
        return {"needs_math": False, "reason": ""}
    if call.step == "solve":
        for key, answer in ANSWERS.items():
            if key in call.prompt:
                return {"answer": answer, "reasoning": "known"}
        return {"answer": "unknown", "reasoning": ""}
    if call.step == "grade":
        return "A" if "answer 0" in call.prompt.split("<predicted_answer>\n")[1] else "B"
    raise AssertionError(f"unexpected step {call.step}")


@pytest.mark.slow
def test_gaia_kgot_mode_runs_each_question_on_its_own(gaia_root: Path, tmp_path: Path) -> None:
    from kgot.persistence import open_store

    model = ScriptedChatModel(script=controller_script)
    out = tmp_path / "out"
    outcome = run_gaia(
        gaia_root,
        settings=load_settings({}, environ={}),
        out_dir=out,
        limit=2,
        concurrency=2,
        models={"planning": model, "execution": model},
        progress=ProgressView(enabled=False),
    )
    assert outcome.summary["correct"] == 2 and outcome.summary["errors"] == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len({r["run_id"] for r in records}) == 2  # one run (and graph) per question
    for record in records:
        assert record["status"] == "answered" and record["iterations"] >= 1
        assert record["llm_calls"] > 0 and record["cost_usd"] == 0.0
        assert record["trace"][0]["type"] == "run_started"
        assert record["trace"][-1]["type"] == "run_finished"
        assert "nodes" in record["graph"]

    # The runs were checkpointed in the output folder's store, attachment included.
    store = open_store(str(out / "runs.db"))
    try:
        runs = {r["task_id"]: store.get_run(r["run_id"]) for r in records}
    finally:
        store.close()
    assert runs["task-l1-a"].options["attachments"] == []
    [attachment] = runs["task-l1-b"].options["attachments"]
    assert Path(attachment) == gaia_root / "2023" / "validation" / "notes.txt"


@pytest.mark.slow
def test_simpleqa_kgot_mode(simpleqa_csv: Path, tmp_path: Path) -> None:
    model = ScriptedChatModel(script=controller_script)
    outcome = run_simpleqa(
        simpleqa_csv,
        settings=load_settings({}, environ={}),
        out_dir=tmp_path,
        limit=2,
        models={"planning": model, "execution": model},
        progress=ProgressView(enabled=False),
    )
    assert outcome.summary["counts"] == {"correct": 1, "incorrect": 1, "not_attempted": 0}
    assert len(model.calls_for("grade")) == 2


@pytest.mark.slow
def test_cli_gaia_kgot_mode_with_a_scripted_model_file(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kgot.cli.main import main

    script = {
        "decide": [{"decision": "RETRIEVE", "reason": "known"}],
        "query": ["```python\nresult = 'nothing stored'\n```"],
        "math_check": [{"needs_math": False, "reason": ""}],
        "solve": [{"answer": "8", "reasoning": "spiders"}],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        ["bench", "gaia", "--data", str(gaia_root), "--model", f"scripted:{path}",
         "--out", str(out), "--limit", "1", "--quiet", "--json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert (summary["recorded"], summary["correct"]) == (1, 1)
    assert summary["run"]["mode"] == "kgot"
    assert summary["run"]["models"] == {
        "planning": f"scripted:{path}",
        "execution": f"scripted:{path}",
    }
    assert summary["run"]["gaia_format"] is True
