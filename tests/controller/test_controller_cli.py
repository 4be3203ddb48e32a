"""`kgot ask` / `kgot runs` as users run them: real processes, a scripted model file. Refusals
of bad input run in-process (`run_cli`): what they check is kgot's one-line error and exit code,
not anything a process adds."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kgot.tests.controller.scripts import ADD_PARIS, QUERY_PARIS
from kgot.tests.support.command_line import refused, run_cli

VOTE_INSERT = {"decision": "INSERT", "reason": "the population is missing"}
VOTE_RETRIEVE = {"decision": "RETRIEVE", "reason": "the graph has it"}
ANSWER = {"answer": "2102650", "reasoning": "from the graph"}


def _script(tmp_path: Path, name: str, script: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"scripted:{path}"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    env.update(extra)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["KGOT_DB"] = str(tmp_path / "kgot.db")
    env["KGOT_LLM_MAX_RETRIES"] = "1"
    return env


def kgot(
    tmp_path: Path, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgot", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, **env),
        timeout=timeout,
        check=False,
    )


def _full_script(facts: Path) -> dict[str, Any]:
    return {
        "decide": [VOTE_INSERT] * 5 + [VOTE_RETRIEVE] * 5,
        "define_tool_calls": [
            {"$tool_calls": [{"name": "inspect_file", "args": {"path": str(facts)}}]}
        ],
        "update_graph": [ADD_PARIS],
        "query": [QUERY_PARIS],
        "math_check": [{"needs_math": False, "reason": "stated"}],
        "solve": [ANSWER],
    }


@pytest.mark.slow
def test_ask_prints_the_answer_and_a_summary(tmp_path: Path, facts_file: Path) -> None:
    model = _script(tmp_path, "s.json", _full_script(facts_file))
    result = kgot(
        tmp_path, "ask", "--model", model, "-a", str(facts_file), "What is the population of Paris?"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2102650\n"
    assert "answered · 2 iterations · 1 tool call · 17 LLM calls" in result.stderr


@pytest.mark.slow
def test_ask_json_and_trace(tmp_path: Path, facts_file: Path) -> None:
    model = _script(tmp_path, "s.json", _full_script(facts_file))
    result = kgot(
        tmp_path,
        "ask",
        "--model",
        model,
        "-a",
        str(facts_file),
        "--json",
        "--trace",
        "What is the population of Paris?",
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["answer"] == "2102650"
    assert document["status"] == "answered"
    assert document["llm_calls"] == 17
    assert document["cost_usd"] == 0.0  # scripted models are free, not "unknown"
    assert {n["id"] for n in document["graph"]["nodes"]} == {"paris", "france"}
    for expected in (
        "Iteration 1",
        "INSERT",
        "inspect_file",
        "update_graph code",
        "graph:",
        "Iteration 2",
        "RETRIEVE",
        "query result",
        "2102650",
        "answered",
    ):
        assert expected in result.stderr, expected

    listed = kgot(tmp_path, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    assert run["run_id"] == document["run_id"]
    assert run["status"] == "answered"
    shown = kgot(tmp_path, "runs", "show", document["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "2102650" in shown.stdout
    assert "inspect_file" in shown.stdout


@pytest.mark.slow
def test_model_text_cannot_drive_the_terminal(tmp_path: Path, facts_file: Path) -> None:
    """Escape sequences in model text (answers, vote reasons, code) never reach the terminal
    raw: not through --trace, `runs list` or `runs show`."""
    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mParis"
    script = _full_script(facts_file)
    script["decide"] = [{**VOTE_INSERT, "reason": hostile}] * 5 + [VOTE_RETRIEVE] * 5
    script["solve"] = [{"answer": hostile, "reasoning": hostile}]
    model = _script(tmp_path, "s.json", script)
    asked = kgot(
        tmp_path, "ask", "--model", model, "-a", str(facts_file), "--trace", "--run-id", "r1",
        "Which city? \x1b[5m",
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert "Paris" in asked.stdout
    listed = kgot(tmp_path, "runs", "list")
    shown = kgot(tmp_path, "runs", "show", "r1")
    for output in (asked.stdout, asked.stderr, listed.stdout, shown.stdout):
        assert "\x1b" not in output and "\x07" not in output
    assert "owned" in asked.stderr and "owned" in shown.stdout  # the text itself stays


@pytest.fixture
def in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What `kgot()` gives its process, for `run_cli`: the store (returned) and one retry."""
    store = tmp_path / "kgot.db"
    monkeypatch.setenv("KGOT_DB", str(store))
    monkeypatch.setenv("KGOT_LLM_MAX_RETRIES", "1")
    return store


@pytest.mark.slow
def test_bad_input_gets_one_line_errors(
    in_process: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(run_cli(capsys, "ask", "   "), "question is empty")

    no_model = run_cli(capsys, "ask", "What is 2+2?")
    refused(no_model, "no model configured")
    assert "KGOT_MODEL" in no_model[2]

    missing = run_cli(capsys, "ask", "--model", "scripted:/nope.json", "-a", "/nope.pdf", "q?")
    refused(missing, "attachment /nope.pdf does not exist")

    mixed = run_cli(capsys, "ask", "--resume", "some-run", "--entity", "acme")
    refused(mixed, "--resume continues a run with its own question and inputs; drop --entity")

    refused(run_cli(capsys, "runs", "show", "no-such-run"), "no run 'no-such-run'")


def _node_link(path: Path, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> str:
    document = {"directed": True, "multigraph": True, "graph": {}, "nodes": nodes}
    path.write_text(json.dumps({**document, "edges": edges}), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_a_graph_to_start_from_is_held_to_the_import_caps(
    tmp_path: Path,
    in_process: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "caps.toml"
    config.write_text(
        "[store]\nmax_import_mb = 1\nmax_import_nodes = 3\nmax_import_edges = 2\n"
        "max_property_bytes = 1024\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("KGOT_CONFIG", str(config))
    model = _script(tmp_path, "idle.json", {})
    node = {"label": "Concept", "name": "n"}
    many = _node_link(tmp_path / "many.json", [{"id": str(i), **node} for i in range(5)], [])
    loops = [{"source": "a", "target": "a", "relationship": "r", "key": str(i)} for i in range(3)]
    linked = _node_link(tmp_path / "linked.json", [{"id": "a", **node}], loops)
    huge = tmp_path / "huge.json"
    huge.write_text(Path(many).read_text(encoding="utf-8") + " " * 2**20, encoding="utf-8")
    big = _node_link(tmp_path / "big.json", [{"id": "a", **node, "text": "x" * 3000}], [])
    store = tmp_path / "import.db"
    created = run_cli(capsys, "entities", "create", "e", "--db", str(store))
    assert created[0] == 0, created[2]

    for file in (many, linked, str(huge)):
        asked = run_cli(capsys, "ask", "--model", model, "--graph", file, "q?")
        imported = run_cli(capsys, "graph", "import", "--entity", "e", "--db", str(store), file)
        refused(asked, f"kgot: error: {file}: ")
        assert asked[1:] == imported[1:]  # the import's own words
    asked = run_cli(capsys, "ask", "--model", model, "--graph", big, "q?")
    refused(asked, f"kgot: error: {big}: node 'a': property `text`: the value is 3,002")
    assert "more than the 1,024 a property may hold" in asked[2]
    assert "store.max_property_bytes" in asked[2]
    assert not in_process.exists()  # a refused run leaves no store behind


@pytest.mark.slow
def test_unreachable_endpoint_names_the_url(
    in_process: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    ask = ("ask", "--model", "openai:gpt-4o-mini", "--base-url", url, "--timeout", "2")
    result = run_cli(capsys, *ask, "What is 2+2?")
    # Refused by the one probe before the run starts: configuration (2), nothing to resume.
    refused(result, url)
    assert "--resume" not in result[2]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="signals to process groups are POSIX")
def test_ctrl_c_checkpoints_and_resume_finishes(tmp_path: Path) -> None:
    slow = {
        "decide": [VOTE_INSERT] * 5,
        "define_tool_calls": [
            {"$tool_calls": [{"name": "python", "args": {"code": "import time; time.sleep(60)"}}]}
        ],
    }
    command = [
        sys.executable,
        "-m",
        "kgot",
        "ask",
        "--trace",
        "--run-id",
        "ctrl-c-run",
        "--model",
        _script(tmp_path, "slow.json", slow),
        "What is the population of Paris?",
    ]
    # A short sandbox timeout keeps the test quick if the interrupted job were to run on.
    config = tmp_path / "short.toml"
    config.write_text("[sandbox]\ntimeout = 6\n", encoding="utf-8")
    env = _env(tmp_path, KGOT_CONFIG=str(config))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_for(process, "⚙ python", timeout=60)
        time.sleep(0.5)  # let the tool call start
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "Traceback" not in stderr
    assert "kgot ask --resume ctrl-c-run" in stderr
    from kgot.config import load_settings
    from kgot.controller import is_resumable

    settings = load_settings({"store.db": str(tmp_path / "kgot.db")}, environ={})
    assert asyncio.run(is_resumable("ctrl-c-run", settings))
    # A run interrupted before its first checkpoint left nothing: no resume hint for it.
    assert not asyncio.run(is_resumable("never-started", settings))
    from kgot.cli.ask_cmd import _interrupted

    assert "nothing to resume" in _interrupted("never-started", settings)
    assert "kgot ask --resume ctrl-c-run" in _interrupted("ctrl-c-run", settings)

    resumed = kgot(
        tmp_path,
        "ask",
        "--resume",
        "ctrl-c-run",
        "--model",
        _script(
            tmp_path,
            "finish.json",
            {
                # The interrupted step (vote, then choose and run tools) runs again, this
                # time quickly.
                "decide": [VOTE_INSERT] * 5 + [VOTE_RETRIEVE] * 5,
                "define_tool_calls": [
                    {"$tool_calls": [{"name": "python", "args": {"code": "print('ok')"}}]}
                ],
                "update_graph": ["```python\npass\n```"],
                "query": ["```python\nresult = 'nothing known'\n```"],
                "math_check": [{"needs_math": False, "reason": "-"}],
                "solve": [{"answer": "unknown", "reasoning": "-"}],
            },
        ),
        KGOT_CONFIG=str(config),
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "unknown\n"
    listed = json.loads(kgot(tmp_path, "runs", "list", "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [("ctrl-c-run", "answered")]


def _wait_for(process: subprocess.Popen[str], marker: str, *, timeout: float) -> None:
    """Read the process's stderr until ``marker`` shows up."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            seen += line
            if marker in line:
                return
        if process.poll() is not None:
            break
    raise AssertionError(f"{marker!r} never appeared; stderr so far:\n{seen}")
