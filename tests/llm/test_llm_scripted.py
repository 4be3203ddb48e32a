"""The scripted model's configuration errors (issue 27, item 1 and item 13): a step the script
has no reply for is one line naming the step and the file to extend, passed on unchanged by the
model client and ending a command with exit code 2; ``scripted:PATH`` settings hold an absolute
path, so a run started in one folder resumes from another."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from kgot.config import ModelSettings, load_settings
from kgot.errors import ConfigError
from kgot.llm import ScriptedChatModel, build_llm_clients
from kgot.llm.scripted import NoScriptedReplyError
from kgot.tests.support.command_line import refused, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DENSITY = "about 19,949 inhabitants per km²"


# ---------------------------------------------------------------------- the model and its client


def test_a_step_without_replies_names_the_step_and_the_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"decide": [{"decision": "INSERT"}]}), encoding="utf-8")
    model = ScriptedChatModel.from_file(script)

    with pytest.raises(NoScriptedReplyError) as caught:
        model.invoke([HumanMessage("write the code")], config={"metadata": {"kgot_step": "fix"}})

    error = caught.value
    assert isinstance(error, ConfigError) and error.exit_code == 2
    assert (error.step, error.source) == ("fix", str(script))
    assert str(error) == (
        "the scripted model has no reply for step 'fix' (call 1 of that step): "
        f'add a "fix" list of replies to {script} (or a "*" list, for any step)'
    )


def test_a_call_naming_no_step_asks_for_a_reply_for_any_step() -> None:
    model = ScriptedChatModel(script={"decide": ["INSERT"]})
    with pytest.raises(NoScriptedReplyError, match=r'add a "\*" list of replies to the script'):
        model.invoke("hello")


def test_replies_for_any_step_answer_a_step_without_its_own() -> None:
    model = ScriptedChatModel(script={"*": ["fallback"], "decide": []})
    reply = model.invoke("hi", config={"metadata": {"kgot_step": "decide"}})
    assert reply.content == "fallback"


@pytest.mark.anyio
async def test_the_client_passes_the_error_on_as_it_is_and_records_the_call(
    make_settings,
) -> None:
    scripted = ScriptedChatModel(script={"decide": ["INSERT"]})
    roles = build_llm_clients(
        make_settings(**{"llm.model": "scripted:unused.json"}),
        models={"planning": scripted, "execution": scripted},
    )

    with pytest.raises(NoScriptedReplyError) as caught:
        await roles.planning.text([HumanMessage("the maths")], step="math")

    message = str(caught.value)
    assert "step 'math'" in message
    assert "please report" not in message and "model endpoint" not in message
    [call] = roles.planning.ledger.calls
    assert (call.step, call.ok) == ("math", False)
    assert call.error and "NoScriptedReplyError" in call.error
    assert len(scripted.calls) == 1  # a configuration problem is not retried


# ---------------------------------------------------------------------- absolute script paths


def test_a_relative_script_path_is_made_absolute_when_settings_are_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"llm.model": "scripted:examples/../quickstart.json"}, environ={})
    expected = f"scripted:{tmp_path / 'quickstart.json'}"
    assert settings.llm.planning.model == settings.llm.execution.model == expected
    # The environment's value is anchored the same way; other models are left as they are.
    from_env = load_settings(environ={"KGOT_PLANNING_MODEL": "scripted:a.json"})
    assert from_env.llm.planning.model == f"scripted:{tmp_path / 'a.json'}"
    assert ModelSettings(model="ollama:llama3.1:8b").model == "ollama:llama3.1:8b"
    assert ModelSettings(model="scripted:/abs/s.json").model == "scripted:/abs/s.json"


def test_a_config_file_s_script_path_is_read_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    config = folder / "kgot.toml"
    config.write_text(
        '[llm]\nmodel = "scripted:shared.json"\n[llm.execution]\nmodel = "scripted:tools.json"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    settings = load_settings(config_path=config, environ={})
    assert settings.llm.planning.model == f"scripted:{folder / 'shared.json'}"
    assert settings.llm.execution.model == f"scripted:{folder / 'tools.json'}"


# ---------------------------------------------------------------------- through the kgot command


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    copy = tmp_path / "examples"
    copy.mkdir()
    for name in ("quickstart.json", "cities.txt", "notes.md", "types.yaml"):
        shutil.copy(EXAMPLES / name, copy / name)
    return copy


@pytest.mark.slow
def test_kgot_ask_with_a_script_that_lacks_a_step_is_one_line_and_exit_2(
    examples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(examples)
    question = "What is the population density of Paris?"
    # The quickstart's graph code is Python: on the RDF backend it fails and needs a fix the
    # script has no reply for (what a new user met trying `--backend rdf` with it).
    result = run_cli(
        capsys,
        *("ask", "--backend", "rdf", "--model", "scripted:quickstart.json"),
        *("-a", "cities.txt", "--run-id", "rdf-try", question),
    )

    refused(result, f'add a "fix_code" list of replies to {examples / "quickstart.json"}')
    assert "step 'fix_code'" in result[2] and "--resume" not in result[2]
    code, out, _ = run_cli(capsys, "runs", "show", "rdf-try")
    assert code == 0 and "status       failed" in out and "fix_code" in out


@pytest.mark.slow
def test_ingest_and_verify_with_a_script_that_lacks_their_step_write_nothing(
    examples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(examples)
    db = ("--db", str(examples / "store.db"))
    assert run_cli(capsys, "entities", "create", "acme", *db)[0] == 0
    (examples / "empty.json").write_text("{}", encoding="utf-8")

    ingested = run_cli(
        capsys, "ingest", "--entity", "acme", "notes.md", "--model", "scripted:empty.json", *db
    )
    refused(ingested, "no reply for step 'update_graph'")
    verified = run_cli(
        capsys,
        *("memory", "verify", "--entity", "acme", "Acme's CEO is Maria Lopez"),
        *("--model", "scripted:empty.json", *db),
    )
    refused(verified, "no reply for step 'verify_claim'")
    code, out, _ = run_cli(capsys, "graph", "stats", "--entity", "acme", *db)
    assert code == 0 and json.loads(out)["nodes"] == 0


@pytest.mark.slow
def test_a_run_started_in_one_folder_resumes_from_another(
    examples: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = json.loads((examples / "quickstart.json").read_text(encoding="utf-8"))
    solve = script.pop("solve")
    (examples / "partial.json").write_text(json.dumps(script), encoding="utf-8")
    monkeypatch.chdir(examples)
    question = "What is the population density of Paris?"
    started = run_cli(
        capsys,
        *("ask", "--model", "scripted:partial.json", "-a", "cities.txt"),
        *("--run-id", "density", question),
    )
    refused(started, f'add a "solve" list of replies to {examples / "partial.json"}')

    # Do what the message says, then continue the run from elsewhere: the checkpoint's settings
    # name the script by its absolute path, not by one relative to the folder it started in.
    script["solve"] = solve
    (examples / "partial.json").write_text(json.dumps(script), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(capsys, "ask", "--resume", "density")

    assert (code, out) == (0, DENSITY + "\n"), err
    assert list(elsewhere.iterdir()) == []
