"""The python tool against the real sandbox, and llm_query with the scripted model."""

from __future__ import annotations

import pytest

from kgot.config import SandboxSettings
from kgot.errors import ModelError, SandboxUnavailableError
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.tools.tool_fixtures import call, make_runner, tools_settings
from kgot.tools import ToolContext


@pytest.fixture(scope="module")
def sandbox():
    from kgot.sandbox import open_sandbox

    try:
        box = open_sandbox(SandboxSettings(pool_size=1))
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {error}")
    yield box
    box.close()


@pytest.fixture
def python_runner(sandbox, samples):
    def make(*names: str, **settings):
        ctx = ToolContext(
            settings=tools_settings(**settings),
            sandbox=sandbox,
            attachments=tuple(samples[n] for n in names),
        )
        return make_runner(ctx)

    return make


@pytest.mark.slow
def test_prints_come_back(python_runner, sandbox):
    outcome = call(python_runner(), "python", code="import math\nprint(math.comb(10, 3))")
    assert outcome.ok, outcome.output
    assert outcome.output.strip() == "120"
    assert outcome.source_ref == f"sandbox:{sandbox.name}"


@pytest.mark.slow
def test_attachments_are_mounted_read_only(python_runner):
    code = (
        "import pandas as pd\n"
        "frame = pd.read_csv('/mnt/inputs/people.csv')\n"
        "print(int(frame['age'].sum()))\n"
        "try:\n"
        "    open('/mnt/inputs/people.csv', 'a').write('x')\n"
        "    print('WRITABLE')\n"
        "except OSError:\n"
        "    print('read-only')\n"
    )
    outcome = call(python_runner("people.csv"), "python", code=code)
    assert outcome.ok, outcome.output
    assert outcome.output.split() == ["77", "read-only"]


def test_description_names_the_mounts(python_runner):
    runner = python_runner("people.csv")
    assert "/mnt/inputs/people.csv" in runner.tools["python"].description


@pytest.mark.slow
def test_exceptions_come_back_with_the_traceback(python_runner):
    outcome = call(python_runner(), "python", code="print('before')\n1 / 0\n")
    assert not outcome.ok and outcome.error_kind == "execution"
    assert "before" in outcome.output and "ZeroDivisionError" in outcome.output
    assert "the code failed" in outcome.output


@pytest.mark.slow
def test_runaway_code_is_stopped(python_runner):
    outcome = call(python_runner(timeout=4.0), "python", code="while True:\n    pass\n")
    assert not outcome.ok and outcome.error_kind == "timeout"
    assert "stopped after 2 s" in outcome.output


def test_files_written_to_out_are_readable_with_inspect_file(python_runner):
    runner = python_runner()
    code = "open('/work/out/result.csv', 'w').write('k,v\\nanswer,42\\n')\nprint('done')"
    outcome = call(runner, "python", code=code)
    assert outcome.ok, outcome.output
    assert "workspace/result.csv" in outcome.output
    read = call(runner, "inspect_file", path="workspace/result.csv")
    assert read.ok and "| answer | 42 |" in read.output


@pytest.mark.slow
def test_allowed_packages_install_through_the_tool(tmp_path):
    from kgot.sandbox import open_sandbox
    from kgot.tests.sandbox.wheels import MODULE, PACKAGE, build_wheel

    wheels = build_wheel(tmp_path)
    settings = SandboxSettings(
        pool_size=1,
        preload=[],
        allow_packages=[PACKAGE],
        packages_dir=str(tmp_path / "cache"),
        pip_args=["--no-index", "--find-links", str(wheels)],
    )
    try:
        box = open_sandbox(settings)
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {error}")
    try:
        runner = make_runner(ToolContext(settings=tools_settings(), sandbox=box))
        code = f"import {MODULE}\nprint({MODULE}.ANSWER)"
        installed = call(runner, "python", code=code, packages=[PACKAGE])
        assert installed.ok and installed.output.strip() == "42", installed.output
        refused = call(runner, "python", code="import requests", packages=["requests"])
        assert not refused.ok and refused.error_kind == "execution"
        assert "'requests' is not allowed" in refused.output
    finally:
        box.close()


def test_llm_query_through_a_chat_model():
    model = ScriptedChatModel(script={"llm_query": ["Paris."]})
    runner = make_runner(ToolContext(settings=tools_settings(), llm=model))
    outcome = call(runner, "llm_query", query="Capital of France?")
    assert outcome.ok and outcome.output == "Paris."
    sent = model.calls_for("llm_query")[0].messages
    assert sent[-1].content == "Capital of France?" and "sub-question" in sent[0].content


def test_llm_query_through_the_llm_client():
    from kgot.config import load_settings
    from kgot.llm import build_llm_clients

    model = ScriptedChatModel(script={"llm_query": ["42"]})
    settings = load_settings(environ={}, config_path=None)
    roles = build_llm_clients(settings, models={"planning": model, "execution": model})
    runner = make_runner(ToolContext(settings=tools_settings(), llm=roles.execution))
    outcome = call(runner, "llm_query", query="The answer?")
    assert outcome.ok and outcome.output == "42"
    assert roles.execution.ledger.calls[-1].step == "llm_query"


def test_llm_query_failure_is_an_outcome():
    model = ScriptedChatModel(script={"llm_query": [ModelError("endpoint http://x unreachable")]})
    runner = make_runner(ToolContext(settings=tools_settings(), llm=model))
    outcome = call(runner, "llm_query", query="Anything?")
    assert not outcome.ok and outcome.error_kind == "network"
    assert "unreachable" in outcome.output


@pytest.mark.slow
def test_a_linked_attachment_is_mounted_under_its_own_name(sandbox, samples, tmp_path):
    blob = tmp_path / "blobs" / "9f8e7d6c5b"
    blob.parent.mkdir()
    blob.write_bytes(samples["people.csv"].read_bytes())
    link = tmp_path / "snapshot" / "people.csv"
    link.parent.mkdir()
    link.symlink_to(blob)
    ctx = ToolContext(settings=tools_settings(), sandbox=sandbox, attachments=(link,))
    runner = make_runner(ctx)
    assert "/mnt/inputs/people.csv" in runner.tools["python"].description
    code = "print(open('/mnt/inputs/people.csv').read().splitlines()[2])"
    outcome = call(runner, "python", code=code)
    assert outcome.ok, outcome.output
    assert outcome.output.strip() == "Alan,41,Wilmslow"
