"""build_chat_model and build_llm_clients: which model each setting produces, and bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from kgot.config import ModelSettings
from kgot.errors import ConfigError
from kgot.llm import LLMClient, ScriptedChatModel, UsageLedger, build_chat_model, build_llm_clients
from kgot.llm.models import PLACEHOLDER_API_KEY, served_model_name


def test_no_model_configured_is_one_line_saying_how_to_configure_one(make_settings) -> None:
    with pytest.raises(ConfigError) as caught:
        build_llm_clients(make_settings())
    message = str(caught.value)
    assert "\n" not in message
    assert "KGOT_MODEL=provider:name" in message
    assert "openai:gpt-4o-mini" in message
    assert "--model" in message
    assert "KGOT_BASE_URL" in message


def test_base_url_gives_an_openai_compatible_model_without_sdk_retries() -> None:
    model = build_chat_model(
        ModelSettings(
            model="ollama:llama3.1:8b",
            base_url="http://127.0.0.1:11434/v1",
            timeout=7,
            temperature=0.2,
            max_tokens=100,
        )
    )
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "llama3.1:8b"  # the provider prefix is not sent to the server
    assert model.openai_api_base == "http://127.0.0.1:11434/v1"
    assert model.max_retries == 0
    assert model.request_timeout == 7
    assert model.temperature == 0.2
    assert model.max_tokens == 100
    assert model.openai_api_key.get_secret_value() == PLACEHOLDER_API_KEY


def test_base_url_keeps_a_name_whose_prefix_is_not_a_provider() -> None:
    model = build_chat_model(ModelSettings(model="qwen2.5:7b", base_url="http://h/v1"))
    assert model.model_name == "qwen2.5:7b"


def test_configured_api_key_is_sent() -> None:
    model = build_chat_model(
        ModelSettings(model="openai:m", base_url="http://h/v1", api_key="sk-secret")
    )
    assert model.openai_api_key.get_secret_value() == "sk-secret"


def test_provider_model_via_init_chat_model() -> None:
    model = build_chat_model(
        ModelSettings(model="openai:gpt-4o-mini", api_key="sk-test", timeout=9)
    )
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.max_retries == 0
    assert model.request_timeout == 9


def test_missing_provider_package_names_the_package() -> None:
    if importlib.util.find_spec("langchain_anthropic") is not None:
        pytest.skip("langchain-anthropic is installed here; the missing-package path cannot run")
    with pytest.raises(ConfigError, match=r"pip install langchain-anthropic"):
        build_chat_model(ModelSettings(model="anthropic:claude-3-5-haiku"))


@pytest.mark.parametrize(
    ("model", "pattern"),
    [
        ("nosuchprovider:model", r"unknown model provider 'nosuchprovider'"),
        ("mystery-model", r"names no provider: write it as provider:name"),
        ("openai:", r"has no name after the provider prefix"),
        ("scripted:", r"scripted:PATH"),
    ],
)
def test_bad_model_strings_are_config_errors(model: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as caught:
        build_chat_model(ModelSettings(model=model))
    assert "\n" not in str(caught.value)


def test_missing_api_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="KGOT_API_KEY"):
        build_chat_model(ModelSettings(model="openai:gpt-4o-mini"))


def test_scripted_model_from_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": ["hello"]}))
    model = build_chat_model(ModelSettings(model=f"scripted:{script}", base_url="http://ignored"))
    assert isinstance(model, ScriptedChatModel)


def test_scripted_model_file_nested_too_deeply_is_a_config_error(tmp_path: Path) -> None:
    script = tmp_path / "deep.json"
    script.write_text('{"*": [' + "[" * 5000 + "]" * 5000 + "]}")
    with pytest.raises(ConfigError, match=r"nested too deeply.*as a string"):
        build_chat_model(ModelSettings(model=f"scripted:{script}"))


def test_roles_from_settings_share_one_model_when_settings_are_equal(make_settings) -> None:
    roles = build_llm_clients(make_settings(llm__model="openai:m", llm__base_url="http://h/v1"))
    assert roles.planning.role == "planning"
    assert roles.execution.role == "execution"
    assert roles.planning.model is roles.execution.model
    assert roles.planning.ledger is roles.execution.ledger
    assert roles.planning.model_name == "openai:m"
    assert roles.planning.endpoint == "http://h/v1"


def test_roles_can_use_different_models(make_settings) -> None:
    settings = make_settings(
        llm__model="openai:small",
        llm__base_url="http://h/v1",
        llm__planning__model="openai:big",
        llm__execution__timeout=3,
    )
    ledger = UsageLedger()
    roles = build_llm_clients(settings, ledger)
    assert roles.planning.model_name == "openai:big"
    assert roles.execution.model_name == "openai:small"
    assert roles.execution.timeout == 3
    assert roles.planning.model is not roles.execution.model
    assert roles.planning.ledger is ledger


def test_injected_models_need_no_model_setting(make_settings) -> None:
    scripted = ScriptedChatModel(script={"*": ["x"]})
    roles = build_llm_clients(
        make_settings(llm__max_retries=1), models={"planning": scripted, "execution": scripted}
    )
    assert roles.planning.model is scripted
    assert roles.planning.model_name == "scripted"
    assert roles.execution.retry.max_retries == 1


def test_injecting_one_role_still_builds_the_other(make_settings) -> None:
    scripted = ScriptedChatModel(script={"*": ["x"]})
    with pytest.raises(ConfigError, match="no model configured"):
        build_llm_clients(make_settings(), models={"planning": scripted})


def test_unknown_role_in_models_is_rejected(make_settings) -> None:
    scripted = ScriptedChatModel(script={"*": ["x"]})
    with pytest.raises(ConfigError, match="unknown model role"):
        build_llm_clients(make_settings(), models={"planner": scripted})


def test_json_object_on_a_non_openai_model_is_a_config_error() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(ConfigError, match="OpenAI-compatible"):
        LLMClient(
            FakeListChatModel(responses=["x"]),
            role="planning",
            model_name="fake",
            endpoint="fake",
            structured_output="json_object",
        )


@pytest.mark.parametrize(
    ("model", "served"),
    [
        ("ollama:llama3.1:8b", "llama3.1:8b"),  # the prefix only says how to reach it
        ("Open-AI:gpt-4o-mini", "Open-AI:gpt-4o-mini"),  # not a known prefix once normalised
        ("LM-Studio:qwen", "qwen"),  # normalised as build_chat_model reads providers
        ("meta:llama", "meta:llama"),  # another prefix is part of the name
        ("llama3.1", "llama3.1"),
        ("vllm:", ""),  # nothing after the prefix: the caller refuses or picks a default
    ],
)
def test_the_name_an_openai_compatible_server_is_asked_for(model: str, served: str) -> None:
    """One rule for chat models and embeddings (memory.embeddings asks it too)."""
    assert served_model_name(model) == served
