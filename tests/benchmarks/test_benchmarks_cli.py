"""`kgot bench …` from the command line: runs, dry runs, bad input, re-reports, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.tests.benchmarks.bench_fixtures import simpleqa_rows, write_csv
from kgot.tests.support.openai_server import OpenAIServer, RecordedRequest, Reply


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["bench", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def script_file(tmp_path: Path, script: dict) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"scripted:{path}"


# ---------------------------------------------------------------- bad input


def test_missing_dataset_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "gaia", "--data", str(tmp_path / "nope"))
    assert code == 2 and out == ""
    assert err.startswith("kgot: error: GAIA dataset ") and "does not exist" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_wrong_columns_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_csv(tmp_path / "bad.csv", simpleqa_rows(2), ("metadata", "question", "answer"))
    code, _, err = run_cli(capsys, "simpleqa", "--data", str(bad), "--dry-run")
    assert code == 2
    assert err == (
        f"kgot: error: SimpleQA dataset {bad} lacks column(s) 'problem' "
        "(has 'metadata', 'question', 'answer'; expected metadata,problem,answer)\n"
    )


@pytest.mark.slow
def test_missing_attachment_is_one_line(
    gaia_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (gaia_root / "2023" / "validation" / "notes.txt").unlink()
    code, _, err = run_cli(capsys, "gaia", "--data", str(gaia_root), "--dry-run")
    assert code == 2 and err.count("\n") == 1
    assert "task task-l1-b" in err and "attachment 'notes.txt' not found" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "fast"], "--mode must be kgot or direct"),
        (["--level", "4"], "--level must be 1, 2 or 3"),
        (["--task-id", "missing"], "task id 'missing' is not in GAIA metadata"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds, got nan"),
        (["--timeout", "inf"], "--timeout must be a positive number of seconds, got inf"),
        (["--timeout", "0"], "--timeout must be a positive number"),
        (["--data-split-mismatch"], "--split validation does not match"),
    ],
)
def test_bad_options(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list, message: str
) -> None:
    model = script_file(tmp_path, {"*": ["FINAL ANSWER: 1"]})
    data = gaia_root
    if args == ["--data-split-mismatch"]:  # a test-split file asked for as validation
        data = gaia_root / "2023" / "test" / "metadata.parquet"
        args = ["--split", "validation"]
    code, _, err = run_cli(
        capsys, "gaia", "--data", str(data), "--out", str(tmp_path / "o"),
        "--model", model, "--quiet", *args,
    )  # fmt: skip
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- dry runs


@pytest.mark.slow
def test_gaia_dry_run(gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run_cli(
        capsys, "gaia", "--data", str(gaia_root), "--out", str(out), "--dry-run"
    )
    metadata = gaia_root / "2023" / "validation" / "metadata.parquet"
    assert code == 0
    assert stdout == (
        f"6 question(s) selected from {metadata.resolve()} (level 1: 2, level 2: 2, level 3: 2);"
        f" 0 already recorded in {out}; 6 to run\n"
    )
    assert not out.exists()  # a dry run writes nothing
    code, stdout, _ = run_cli(
        capsys, "gaia", "--data", str(gaia_root), "--level", "3", "--dry-run", "--json"
    )
    plan = json.loads(stdout)
    assert (plan["selected"], plan["by_level"], plan["with_attachment"]) == (2, {"3": 2}, 0)


@pytest.mark.slow
def test_simpleqa_dry_run_on_the_official_set(
    official_simpleqa: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = run_cli(
        capsys, "simpleqa", "--data", str(official_simpleqa), "--sample-fraction", "0.1",
        "--seed", "123456", "--dry-run",
    )  # fmt: skip
    assert code == 0 and stdout.startswith("433 question(s) selected from ")
    code, stdout, _ = run_cli(
        capsys, "simpleqa", "--data", str(official_simpleqa), "--limit", "25", "--dry-run", "--json"
    )
    assert json.loads(stdout)["selected"] == 25


# ---------------------------------------------------------------- full runs


@pytest.mark.slow
def test_gaia_direct_run_and_report(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = script_file(tmp_path, {"direct_answer": ["Counting legs.\nFINAL ANSWER: 8"]})
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        capsys, "gaia", "--data", str(gaia_root), "--mode", "direct", "--model", model,
        "--out", str(out), "--level", "1", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    assert stdout.splitlines()[0] == f"gaia: 2 task(s) recorded in {out}"
    assert "strict accuracy 50.0% (1/2); level 1 50.0%" in stdout
    assert "submission.jsonl" in stdout

    (out / "report.md").unlink()
    code, stdout, _ = run_cli(capsys, "report", str(out), "--json")
    summary = json.loads(stdout)
    assert code == 0 and summary["correct"] == 1 and summary["run"]["mode"] == "direct"
    assert (out / "report.md").is_file()

    code, _, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 2 and "has no run.json" in err


@pytest.mark.slow
def test_simpleqa_direct_run(
    simpleqa_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A scripted model file replays from its start for every question and every grading,
    # like a fresh run each time.
    model = script_file(tmp_path, {"direct_answer": ["FINAL ANSWER: answer 0"], "grade": ["B"]})
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        capsys, "simpleqa", "--data", str(simpleqa_csv), "--mode", "direct", "--model", model,
        "--out", str(out), "--limit", "3", "--quiet", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert "grades its own answers" in err
    summary = json.loads(stdout)
    assert summary["counts"] == {"correct": 0, "incorrect": 3, "not_attempted": 0}
    assert summary["run"]["models"]["grader"] == model


# ---------------------------------------------------------------- perf runner


@pytest.mark.slow
def test_perf_runs_every_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kgot.benchmarks as package

    (tmp_path / "perf_fakearea.py").write_text(
        "from kgot.benchmarks.figures import Figure\n"
        "def run(quick=False):\n"
        "    n = 1 if quick else 2\n"
        "    return [\n"
        "        Figure('fakearea', 'step p50', 12.0 * n, 'ms', target=20.0),\n"
        "        Figure('fakearea', 'throughput', 5.0, 'ops/s', target=10.0, direction='min'),\n"
        "    ]\n",
        encoding="utf-8",
    )
    (tmp_path / "perf_brokenarea.py").write_text(
        "def run(quick=False):\n    raise RuntimeError('no database')\n", encoding="utf-8"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])

    code, stdout, err = run_cli(capsys, "perf", "--quick", "--only", "fakearea")
    assert code == 1  # a target was missed
    rows = [" ".join(line.split()) for line in stdout.splitlines()]
    assert rows == ["fakearea", "step p50 12 ms ok (≤ 20)", "throughput 5 ops/s MISSED (≥ 10)"]

    code, stdout, err = run_cli(
        capsys, "perf", "--only", "fakearea", "--only", "brokenarea", "--json"
    )
    assert code == 2  # a script failed; the other still printed its figures
    figures = [json.loads(line) for line in stdout.splitlines()]
    assert [f["value"] for f in figures] == [24.0, 5.0] and figures[0]["ok"] is False
    assert "\nbrokenarea failed: RuntimeError: no database" in err

    [timings] = [line for line in err.splitlines() if line.startswith("time per area: ")]
    assert "fakearea " in timings and "brokenarea " in timings

    code, _, err = run_cli(capsys, "perf", "--only", "nosucharea")
    assert code == 2 and "no perf area 'nosucharea' is installed" in err


# ---------------------------------------------------------------- Ctrl-C in a real process


@pytest.mark.slow
def test_ctrl_c_in_a_real_process_then_resume(
    simpleqa_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hung = threading.Event()

    def respond(request: RecordedRequest) -> Reply:
        prompt = request.prompt
        if "Gold target:" in prompt:
            return Reply.text("A")
        number = prompt.split("number ")[1].split(":")[0]
        if number == "2" and not hung.is_set():
            hung.set()
            return Reply.hanging()  # the third question is in flight when Ctrl-C comes
        return Reply.text(f"FINAL ANSWER: answer {number}")

    out = tmp_path / "run"
    with OpenAIServer(responder=respond) as server:
        args = [
            "bench", "simpleqa", "--data", str(simpleqa_csv), "--mode", "direct",
            "--model", "openai:test-model", "--base-url", server.url, "--out", str(out),
            "--limit", "4", "--quiet",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
        process = subprocess.Popen(
            [sys.executable, "-m", "kgot", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            # answer 1, grade 1, answer 2, grade 2, answer 3 (hangs): two records are on disk.
            server.wait_for_requests(5, timeout=60)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        assert f"interrupted: 2 task(s) are recorded in {out}" in err
        lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
        assert [json.loads(line)["grade"] for line in lines] == ["CORRECT", "CORRECT"]

        before = len(server.completions)
        code, stdout, err = run_cli(capsys, *args[1:], "--json")
        assert code == 0, err
        assert len(server.completions) - before == 4  # questions 3 and 4, answered and graded
        assert json.loads(stdout)["counts"]["correct"] == 4


# ---------------------------------------------------------------- output folders


@pytest.mark.slow
def test_a_configuration_error_writes_nothing_and_the_fix_runs(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["gaia", "--data", str(gaia_root), "--out", str(out), "--limit", "1", "--quiet"]
    code, _, err = run_cli(capsys, *args)  # no model configured (kgot mode)
    assert code == 2 and err.startswith("kgot: error: no model configured")
    assert err.count("\n") == 1 and not out.exists()
    args.append("--mode=direct")
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and err.startswith("kgot: error: no model configured")
    assert not out.exists()
    model = script_file(tmp_path, {"*": ["FINAL ANSWER: 8"]})
    code, stdout, err = run_cli(capsys, *args, "--model", model)  # the corrected command
    assert code == 0, err
    assert "strict accuracy 100.0% (1/1)" in stdout


def test_out_pointing_at_a_file_is_a_usage_error(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("", encoding="utf-8")
    model = script_file(tmp_path, {"*": ["FINAL ANSWER: 8"]})
    for extra in ([], ["--dry-run"]):
        code, _, err = run_cli(
            capsys, "gaia", "--data", str(gaia_root), "--out", str(afile), "--model", model,
            "--quiet", *extra,
        )  # fmt: skip
        assert code == 2 and err == (
            f"kgot: error: --out {afile} is not a folder ({afile} is a file); pass a folder path\n"
        )
    assert afile.read_text(encoding="utf-8") == ""


def test_a_second_run_on_the_same_folder_is_refused(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kgot.benchmarks.results import folder_lock

    out = tmp_path / "out"
    out.mkdir()
    model = script_file(tmp_path, {"*": ["FINAL ANSWER: 8"]})
    with folder_lock(out):  # a run in progress (flock: another open file holds it)
        code, _, err = run_cli(
            capsys, "gaia", "--data", str(gaia_root), "--out", str(out), "--model", model,
            "--quiet",
        )  # fmt: skip
    assert code == 2 and err == (
        f"kgot: error: {out} is in use by another kgot bench run; wait for it to finish or "
        "pass another --out\n"
    )
    assert not (out / "results.jsonl").exists() and not (out / "run.json").exists()


@pytest.mark.slow
def test_report_and_dry_run_leave_a_record_being_written_alone(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = script_file(tmp_path, {"direct_answer": ["FINAL ANSWER: 8"]})
    out = tmp_path / "run"
    args = ["gaia", "--data", str(gaia_root), "--mode", "direct", "--model", model,
            "--out", str(out), "--quiet"]  # fmt: skip
    code, _, err = run_cli(capsys, *args, "--limit", "1")
    assert code == 0, err
    results = out / "results.jsonl"
    finished = results.read_bytes()
    record = json.loads(finished)
    record.update(task_id="task-l1-b", correct=False)
    line = (json.dumps(record) + "\n").encode()
    with results.open("ab") as writer:
        writer.write(line[:40])  # a run's append, caught half-way by the readers below
        writer.flush()
        code, stdout, err = run_cli(capsys, "report", str(out), "--json")
        assert code == 0, err
        assert json.loads(stdout)["recorded"] == 1 and "partly written" not in err
        code, stdout, err = run_cli(capsys, *args, "--dry-run", "--json")
        assert code == 0 and json.loads(stdout)["recorded"] == 1
        assert results.read_bytes() == finished + line[:40]  # nothing cut
        writer.write(line[40:])
    code, stdout, _ = run_cli(capsys, "report", str(out), "--json")
    assert json.loads(stdout)["recorded"] == 2  # the finished record counts


def test_the_split_of_a_metadata_file_is_its_folder(
    gaia_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    test_file = gaia_root / "2023" / "test" / "metadata.parquet"
    code, stdout, _ = run_cli(capsys, "gaia", "--data", str(test_file), "--dry-run", "--json")
    plan = json.loads(stdout)
    assert code == 0 and plan["split"] == "test"
    assert plan["out"] == str(Path("bench-runs") / "gaia-test-kgot")
    model = script_file(tmp_path, {"direct_answer": ["FINAL ANSWER: 4"]})
    code, _, err = run_cli(
        capsys, "gaia", "--data", str(test_file), "--mode", "direct", "--model", model, "--quiet"
    )
    assert code == 0, err
    manifest = json.loads((tmp_path / "bench-runs" / "gaia-test-direct" / "run.json").read_text())
    assert manifest["dataset"]["split"] == "test"


def test_simpleqa_data_folder_is_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "simpleqa", "--data", str(tmp_path), "--dry-run")
    assert code == 2 and err == (
        f"kgot: error: SimpleQA dataset {tmp_path} is a folder; pass --data the CSV file "
        "(simple_qa_test_set.csv)\n"
    )


def test_a_missing_attachment_of_an_unselected_question_does_not_block(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (gaia_root / "2023" / "validation" / "notes.txt").unlink()
    code, stdout, err = run_cli(
        capsys, "gaia", "--data", str(gaia_root), "--level", "2", "--out", str(tmp_path / "o"),
        "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    assert stdout.startswith("2 question(s) selected")


# ---------------------------------------------------------------- models over the wire


@pytest.mark.slow
def test_the_grader_has_its_own_endpoint_and_key(
    simpleqa_csv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answer(request: RecordedRequest) -> Reply:
        number = request.prompt.split("number ")[1].split(":")[0]
        return Reply.text(f"FINAL ANSWER: answer {number}")

    monkeypatch.setenv("KGOT_API_KEY", "planner-key")
    monkeypatch.setenv("KGOT_GRADER_API_KEY", "judge-key")
    out = tmp_path / "run"
    with (
        OpenAIServer(responder=answer, api_key="planner-key") as planner,
        OpenAIServer(default=Reply.json({"grade": "A"}), api_key="judge-key") as judge,
    ):
        code, stdout, err = run_cli(
            capsys, "simpleqa", "--data", str(simpleqa_csv), "--mode", "direct",
            "--model", "openai:planner", "--base-url", planner.url,
            "--grader-model", "openai:judge", "--grader-base-url", judge.url,
            "--out", str(out), "--limit", "2", "--quiet", "--json",
        )  # fmt: skip
        answers, gradings = planner.completions, judge.completions
    assert code == 0, err
    assert "grades its own answers" not in err
    assert len(answers) == 2 and all(r.model == "planner" for r in answers)
    assert not any("Gold target" in r.prompt for r in answers)
    assert len(gradings) == 2 and all(r.model == "judge" for r in gradings)
    assert all("Gold target" in r.prompt for r in gradings)
    assert all(r.body["temperature"] == 0 for r in gradings)  # the grader's default
    assert all(r.response_format["type"] == "json_schema" for r in gradings)
    summary = json.loads(stdout)
    assert summary["counts"]["correct"] == 2
    assert summary["run"]["models"]["grader"] == "openai:judge"
    assert summary["run"]["grader_endpoint"] == judge.url
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [json.loads(r["grader_reply"]) for r in records] == [{"grade": "A"}] * 2


@pytest.mark.slow
def test_a_refused_api_key_stops_the_run_after_a_few_questions(
    gaia_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KGOT_API_KEY", "expired-key")
    out = tmp_path / "run"
    with OpenAIServer(api_key="the-real-key") as server:
        code, _, err = run_cli(
            capsys, "gaia", "--data", str(gaia_root), "--mode", "direct",
            "--model", "openai:test-model", "--base-url", server.url, "--out", str(out),
            "--quiet",
        )  # fmt: skip
        asked = len(server.completions)
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("kgot: error: stopped: 3 questions in a row failed with the same error")
    assert "HTTP 401" in err and "--retry-errors" in err
    assert asked == 3  # 401 is not retried, and the other three questions were never asked
    assert json.loads((out / "summary.json").read_text())["errors"] == 3


# Every question: decide to retrieve, run a query that takes a moment in the sandbox, answer.
KGOT_SCRIPT = {
    "decide": [{"decision": "RETRIEVE", "reason": "known"}],
    "query": ["```python\nimport time\ntime.sleep(1.0)\nresult = 'nothing stored'\n```"],
    "math_check": [{"needs_math": False, "reason": ""}],
    "solve": [{"answer": "8", "reasoning": "spiders"}],
}


@pytest.mark.slow
def test_ctrl_c_in_kgot_mode_exits_at_once_then_resumes(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while kgot-mode questions run in the sandbox: exit 130 within seconds, one line,
    no traceback, and a folder the same command resumes."""
    out = tmp_path / "run"
    model = script_file(tmp_path, KGOT_SCRIPT)
    args = ["bench", "gaia", "--data", str(gaia_root), "--model", model, "--out", str(out),
            "-j", "2"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "kgot", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, so cleanup reaches the sandboxes too
    )
    # Whatever happens, nothing outlives the test (the hang this test is about included).
    watchdog = threading.Timer(240, os.killpg, (process.pid, signal.SIGKILL))
    watchdog.start()
    try:
        assert process.stderr is not None
        progress = []
        for line in process.stderr:  # one progress line per recorded question
            progress.append(line)
            if line.startswith("gaia 2/6"):
                break
        assert progress and progress[-1].startswith("gaia 2/6"), "".join(progress)
        # Two questions are recorded; the next two are starting their sandbox queries.
        process.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        try:
            _, err = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail("kgot bench gaia --mode kgot was still running 20 s after Ctrl-C")
        elapsed = time.monotonic() - signalled
    finally:
        watchdog.cancel()
    assert process.returncode == 130, err
    assert elapsed < 10, f"took {elapsed:.1f} s to stop after Ctrl-C"
    assert "Traceback" not in err and "Exception ignored" not in err, err
    [message] = [line for line in err.splitlines() if line.startswith("kgot: error:")]
    recorded = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert message == (
        f"kgot: error: interrupted: {len(recorded)} task(s) are recorded in {out}; "
        "run the same command again to resume"
    )
    assert len(recorded) >= 2 and all(r["error"] is None for r in recorded)

    code, stdout, err = run_cli(capsys, *args[1:], "--quiet", "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["recorded"] == 6 and summary["errors"] == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6  # the recorded questions were not asked again


# ---------------------------------------------------------------- perf sandbox kind


@pytest.fixture
def kind_reporting_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A perf script that reports the sandbox kind it was given, and one that takes none."""
    import kgot.benchmarks as package

    (tmp_path / "perf_kindarea.py").write_text(
        "from kgot.benchmarks.figures import Figure\n"
        "def run(quick=False, sandbox='auto'):\n"
        "    return [Figure('kindarea', f'jobs in {sandbox}', 1.0, 'ms')]\n",
        encoding="utf-8",
    )
    (tmp_path / "perf_plainarea.py").write_text(
        "from kgot.benchmarks.figures import Figure\n"
        "def run(quick=False):\n"
        "    return [Figure('plainarea', 'no jobs', 2.0, 'ms')]\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])


@pytest.mark.usefixtures("kind_reporting_script")
@pytest.mark.parametrize(
    ("flag", "environment", "expected"),
    [
        ([], None, "auto"),
        (["--sandbox", "subprocess"], None, "subprocess"),
        ([], "fallback", "fallback"),
        (["--sandbox", "subprocess"], "fallback", "subprocess"),  # the flag wins
    ],
)
def test_perf_runs_jobs_in_the_chosen_sandbox(
    flag: list[str],
    environment: str | None,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if environment:
        monkeypatch.setenv("KGOT_SANDBOX", environment)
    code, stdout, err = run_cli(
        capsys, "perf", "--only", "kindarea", "--only", "plainarea", "--json", *flag
    )
    assert code == 0, err
    labels = [json.loads(line)["name"] for line in stdout.splitlines()]
    assert labels == [f"jobs in {expected}", "no jobs"]


def test_perf_refuses_an_unknown_sandbox_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = run_cli(capsys, "perf", "--only", "sandbox", "--sandbox", "chroot")
    assert code == 2 and stdout == ""
    assert err.startswith("kgot: error: invalid setting `sandbox.kind`") and err.count("\n") == 1


def test_the_scripts_that_run_jobs_take_the_sandbox_kind() -> None:
    import inspect

    from kgot.benchmarks import perf_controller, perf_sandbox, perf_views

    for script in (perf_controller, perf_sandbox, perf_views):
        assert "sandbox" in inspect.signature(script.run).parameters, script.__name__


# ---------------------------------------------------------------- cost wording


@pytest.mark.slow
def test_cost_is_unknown_when_no_price_is_known(
    gaia_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with OpenAIServer(default=Reply.text("Paris")) as server:
        code, stdout, err = run_cli(
            capsys, "gaia", "--data", str(gaia_root), "--mode", "direct", "--limit", "2",
            "--model", "openai:no-price-model", "--base-url", server.url, "--out", str(out),
            "--quiet",
        )  # fmt: skip
    assert code == 0, err
    assert "cost unknown (no price known for any of the 2 task(s))" in stdout
    assert "$0.0000" not in stdout and "some prices unknown" not in stdout
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "unknown (no price known for any of the 2 task(s)): a run that failed" in report
    assert "at least $0.0000" not in report


def test_describe_cost() -> None:
    from kgot.benchmarks.report import describe_cost

    assert describe_cost(0.25, 0, 4) == "$0.2500"
    assert describe_cost(0.25, 1, 4) == "at least $0.2500 (price unknown for 1 of 4 task(s))"
    assert describe_cost(0.0, 4, 4) == "unknown (no price known for any of the 4 task(s))"


@pytest.mark.slow
def test_perf_sandbox_measures_the_subprocess_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """What a machine without an isolating sandbox is told to use must measure: jobs find their
    mounts where that kind puts them."""
    code, stdout, err = run_cli(
        capsys, "perf", "--only", "sandbox", "--quick", "--json", "--sandbox", "subprocess"
    )
    assert code in (0, 1), err  # 2 = a script failed; missed targets are the kind's
    assert "sandbox failed" not in err
    names = {json.loads(line)["name"] for line in stdout.splitlines()}
    assert "job with a mount, warm p50" in names
