"""`kgot ask` against models that misbehave, as a user runs it: a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgot.tests.support.openai_server import OpenAIServer, Reply


def kgot(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    clean.update(
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        KGOT_DB=str(tmp_path / "kgot.db"),
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "kgot", *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_model_that_never_answers_json_fails_the_run_at_the_first_step(
    tmp_path: Path,
) -> None:
    script = tmp_path / "chatty.json"
    script.write_text(json.dumps({"*": ["I think we should INSERT more facts first."]}))
    result = kgot(tmp_path, "ask", "--model", f"scripted:{script}", "What is 2+2?")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    summary, error, *resume_hint = result.stderr.splitlines()
    assert " · failed · " in summary
    assert "20 LLM calls (20 failed)" in summary  # 5 votes × 4 attempts, not 8 rounds' worth
    assert error.startswith(f"kgot: error: model endpoint scripted (scripted:{script})")
    assert "step decide: all 20 requests returned no JSON object in the reply" in error
    assert "KGOT_STRUCTURED_OUTPUT=tool_calling, json_object or prompt" in error
    assert "kgot ask --resume" in "\n".join(resume_hint)


@pytest.mark.slow
@pytest.mark.parametrize("nesting", ["[", '{"a": '])
def test_deeply_nested_model_json_is_a_failed_answer_not_a_crash(
    tmp_path: Path, nesting: str
) -> None:
    deep = '{"decision": "INSERT", "reason": ' + nesting * 5000
    script = tmp_path / "deep.json"
    script.write_text(json.dumps({"*": [deep]}))
    result = kgot(tmp_path, "ask", "--model", f"scripted:{script}", "What is 2+2?")
    assert result.returncode == 1, result.stderr  # was 70, "internal error: RecursionError"
    assert "internal error" not in result.stderr
    assert "returned JSON nested too deeply" in result.stderr


@pytest.mark.slow
def test_a_hung_endpoint_prints_one_status_line_while_the_run_waits(tmp_path: Path) -> None:
    config = tmp_path / "config" / "kgot" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[llm]\nwaiting_notice_after = 0.3\n")  # 15 s by default
    with OpenAIServer(default=Reply.hanging()) as server:
        result = kgot(
            tmp_path,
            "ask",
            "--model",
            "openai:test-model",
            "--base-url",
            server.url,
            "--timeout",
            "1.5",
            "What is 2+2?",
            KGOT_LLM_MAX_RETRIES="0",
        )
    assert result.returncode == 1, result.stderr
    notices = [line for line in result.stderr.splitlines() if "still waiting" in line]
    assert notices == [
        f"kgot: still waiting for model endpoint {server.url} (openai:test-model): 5 requests "
        "for step decide, try 1 of 1, 0 s so far; each try gives up after 1.5 s"
    ]
    assert "no answer within 1.5 s" in result.stderr
