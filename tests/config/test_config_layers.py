"""Configuration precedence: flags > environment > TOML file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.config import load_settings, masked_dump
from kgot.errors import ConfigError


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_source(tmp_path: Path) -> None:
    settings = load_settings(environ={}, config_path=None)
    assert settings.llm.planning.model is None
    assert settings.controller.votes == 5
    assert settings.controller.max_iterations == 7
    assert settings.controller.graph_token_budget == 8000
    assert settings.llm.planning.structured_output == "auto"


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.toml",
        '[llm]\nmodel = "openai:file"\ntimeout = 10\n[controller]\nvotes = 3\n',
    )
    env = {"KGOT_MODEL": "openai:env", "KGOT_CONFIG": str(config)}
    settings = load_settings(environ=env)
    assert settings.llm.planning.model == "openai:env"
    assert settings.llm.execution.timeout == 10
    assert settings.controller.votes == 3
    flagged = load_settings({"llm.model": "openai:flag", "controller.votes": 9}, environ=env)
    assert flagged.llm.planning.model == "openai:flag"
    assert flagged.llm.execution.model == "openai:flag"
    assert flagged.controller.votes == 9


def test_role_table_beats_shared_table_in_the_same_layer(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.toml",
        '[llm]\nmodel = "a:shared"\n[llm.planning]\nmodel = "a:planner"\n',
    )
    settings = load_settings(environ={}, config_path=config)
    assert settings.llm.planning.model == "a:planner"
    assert settings.llm.execution.model == "a:shared"
    # A higher layer's shared value still beats a lower layer's role value.
    flagged = load_settings({"llm.model": "b:flag"}, environ={}, config_path=config)
    assert flagged.llm.planning.model == "b:flag"


def test_openai_variables_are_only_fallbacks(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-from-openai", "OPENAI_BASE_URL": "http://openai.example"}
    settings = load_settings(environ=env)
    assert settings.llm.planning.api_key is not None
    assert settings.llm.planning.api_key.get_secret_value() == "sk-from-openai"
    env["KGOT_API_KEY"] = "sk-kgot"
    env["KGOT_BASE_URL"] = "http://kgot.example"
    settings = load_settings(environ=env)
    assert settings.llm.execution.api_key.get_secret_value() == "sk-kgot"
    assert settings.llm.execution.base_url == "http://kgot.example"
    config = _write(tmp_path / "c.toml", '[llm]\nbase_url = "http://file.example"\n')
    openai_only = {"OPENAI_BASE_URL": "http://openai.example"}
    from_file = load_settings(environ=openai_only, config_path=config)
    assert from_file.llm.planning.base_url == "http://file.example"


def test_env_values_are_typed_and_validated() -> None:
    settings = load_settings(environ={"KGOT_LLM_TIMEOUT": "2.5", "KGOT_LLM_MAX_RETRIES": "7"})
    assert settings.llm.planning.timeout == 2.5
    assert settings.llm.execution.max_retries == 7
    with pytest.raises(ConfigError, match=r"llm\.planning\.timeout"):
        load_settings(environ={"KGOT_LLM_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match="structured_output"):
        load_settings(environ={"KGOT_STRUCTURED_OUTPUT": "telepathy"})


def test_bad_files_are_reported_with_their_path(tmp_path: Path) -> None:
    broken = _write(tmp_path / "broken.toml", "[llm\nmodel=")
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        load_settings(environ={}, config_path=broken)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={"KGOT_CONFIG": str(tmp_path / "nope.toml")})
    unknown = _write(tmp_path / "unknown.toml", "[controller]\nvotez = 3\n")
    with pytest.raises(ConfigError, match="votez"):
        load_settings(environ={}, config_path=unknown)


def test_masked_dump_hides_secrets() -> None:
    settings = load_settings(environ={"KGOT_API_KEY": "sk-very-secret-1234"})
    dumped = masked_dump(settings)
    assert dumped["llm"]["planning"]["api_key"] == "****1234"
    assert "very-secret" not in str(dumped)


@pytest.mark.slow
def test_config_show_cli_masks_and_reports_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGOT_API_KEY", "sk-abcdefghijklmnop")
    monkeypatch.setenv("KGOT_MODEL", "openai:gpt-4o-mini")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "openai:gpt-4o-mini" in out
    assert "abcdefghijkl" not in out and "****mnop" in out
    monkeypatch.setenv("KGOT_LLM_TIMEOUT", "later")
    assert main(["config", "show"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("kgot: error: invalid setting")
    assert "Traceback" not in captured.err
    assert captured.err.count("\n") == 1


def test_documented_reference_is_current() -> None:
    from kgot.config import config_reference

    docs = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert config_reference() in docs.read_text(encoding="utf-8"), (
        "docs/configuration.md is out of date: paste the output of `kgot config reference`"
    )


def test_openai_variables_never_reach_other_providers() -> None:
    env = {
        "OPENAI_API_KEY": "sk-openai-secret",
        "OPENAI_BASE_URL": "http://openai-proxy.example/v1",
        "KGOT_PLANNING_MODEL": "anthropic:claude-sonnet-4-0",
        "KGOT_EXECUTION_MODEL": "openai:gpt-4o-mini",
    }
    settings = load_settings(environ=env)
    assert settings.llm.planning.api_key is None
    assert settings.llm.planning.base_url is None
    assert settings.llm.execution.api_key.get_secret_value() == "sk-openai-secret"
    assert settings.llm.execution.base_url == "http://openai-proxy.example/v1"
    # Any model behind an explicit OpenAI-compatible URL takes the key, not the URL.
    local = load_settings(
        environ={**env, "KGOT_PLANNING_MODEL": "llamacpp:local", "KGOT_BASE_URL": "http://h/v1"}
    )
    assert local.llm.planning.api_key.get_secret_value() == "sk-openai-secret"
    assert local.llm.planning.base_url == "http://h/v1"


def test_badly_shaped_tables_are_config_errors(tmp_path: Path) -> None:
    for text, name in (("llm = 3\n", "`llm`"), ('[llm]\nplanning = "x"\n', "`llm.planning`")):
        config = _write(tmp_path / "shape.toml", text)
        with pytest.raises(ConfigError, match=name + r" in .*shape\.toml must be a table"):
            load_settings(environ={}, config_path=config)


def test_missing_config_file_names_where_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fix --config"):
        load_settings(environ={}, config_path=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="fix KGOT_CONFIG"):
        load_settings(environ={"KGOT_CONFIG": str(tmp_path / "nope.toml")})


def test_xdg_location_comes_from_the_given_environment(tmp_path: Path) -> None:
    (tmp_path / "kgot").mkdir()
    _write(tmp_path / "kgot" / "config.toml", "[controller]\nvotes = 2\n")
    settings = load_settings(environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.controller.votes == 2


def test_masked_dump_hides_url_passwords() -> None:
    settings = load_settings(
        {
            "store.db": "postgresql://kgot:s3cret@db.example/kgot",
            "llm.base_url": "http://u:pw@h/v1",
        },
        environ={},
    )
    dumped = str(masked_dump(settings))
    assert "s3cret" not in dumped and ":pw@" not in dumped
    assert "postgresql://kgot:***@db.example/kgot" in dumped
