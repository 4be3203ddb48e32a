"""Turn one role's :class:`~kgot.config.ModelSettings` into a LangChain chat model."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from kgot.config import ROLES, LLMSettings, ModelSettings
from kgot.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

NO_MODEL_MESSAGE = (
    "no model configured: set KGOT_MODEL=provider:name (e.g. openai:gpt-4o-mini) or pass "
    "--model, and KGOT_BASE_URL for a local OpenAI-compatible server (vLLM, Ollama, llama.cpp)"
)
_ROLE_WORK = {"planning": "votes, code, queries, answers", "execution": "tool calls"}
# Sent to OpenAI-compatible servers that need no key: the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"
# Prefixes that only say "reach it through an OpenAI-compatible base URL"; stripped from the name
# sent to the server (`ollama:llama3.1:8b` asks for `llama3.1:8b`).
_COMPATIBLE_PREFIXES = frozenset(
    {
        "openai",
        "openai_compatible",
        "vllm",
        "ollama",
        "lmstudio",
        "lm_studio",
        "llamacpp",
        "llama_cpp",
        "local",
        "deepseek",
        "groq",
        "together",
        "fireworks",
        "openrouter",
        "xai",
        "mistralai",
    }
)

# Providers whose LangChain class runs on the OpenAI SDK and accepts `http_async_client`.
_OPENAI_SDK_PROVIDERS = frozenset({"openai", "azure_openai"})
# Bare names LangChain resolves to OpenAI (its own inference rule).
_OPENAI_NAME_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt")


def require_models(llm: LLMSettings, *, given: Collection[str] = ()) -> None:
    """Check that every role has a model, before anything is built or imported.

    This module imports no LangChain, so a command can refuse a missing model in milliseconds
    instead of after loading the model machinery (a second or more).

    Args:
        llm: the LLM settings.
        given: roles whose chat model the caller supplies ready-made.

    Raises:
        ConfigError: no role has a model (:data:`NO_MODEL_MESSAGE`), or one role lacks one
            while the other has one (names the role and its variables).
    """
    needed = [role for role in ROLES if role not in given]
    missing = [role for role in needed if not (getattr(llm, role).model or "").strip()]
    if not missing:
        return
    if len(missing) == len(needed):
        raise ConfigError(NO_MODEL_MESSAGE)
    role = missing[0]
    raise ConfigError(
        f"no model configured for the {role} role ({_ROLE_WORK[role]}): set "
        f"KGOT_{role.upper()}_MODEL or --{role}-model, or KGOT_MODEL / --model for both roles"
    )


def endpoint_url(settings: ModelSettings) -> str | None:
    """The base URL :func:`build_chat_model` sends this role's requests to, if it is one the
    user configured (``base_url``); ``None`` for a scripted model or a provider's own API."""
    provider = (settings.model or "").partition(":")[0].strip().lower()
    if provider == "scripted" or not settings.base_url:
        return None
    return settings.base_url


def served_model_name(model: str) -> str:
    """The name an OpenAI-compatible server is asked for: ``model`` without a prefix that only
    says to reach it through the base URL (``ollama:llama3.1:8b`` asks for ``llama3.1:8b``);
    any other prefix is part of the name. Empty when nothing follows such a prefix."""
    provider, colon, name = model.partition(":")
    compatible = provider.strip().lower().replace("-", "_") in _COMPATIBLE_PREFIXES
    return name if colon and compatible else model


def build_chat_model(settings: ModelSettings) -> BaseChatModel:
    """The chat model one role's settings describe.

    * ``scripted:PATH`` → :meth:`ScriptedChatModel.from_file` (tests, demos);
    * ``base_url`` set → an OpenAI-compatible ``ChatOpenAI`` at that URL, whatever the provider
      prefix (vLLM, Ollama, LM Studio, llama.cpp's server, OpenRouter, …);
    * otherwise ``provider:name`` through LangChain's ``init_chat_model``.

    SDK-level retries are off (kgot retries itself, see :mod:`kgot.llm.retry`) and the
    configured timeout is passed on.

    Raises:
        ConfigError: no model configured, an unknown provider, a provider whose integration
            package is not installed (names the pip package), or settings the model class
            rejects (e.g. a missing API key).
    """
    model = (settings.model or "").strip()
    if not model:
        raise ConfigError(NO_MODEL_MESSAGE)
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    provider = provider.strip().lower().replace("-", "_")

    if provider == "scripted":
        from kgot.llm.scripted import ScriptedChatModel

        if not name:
            raise ConfigError("scripted model needs a script file: use scripted:PATH")
        return ScriptedChatModel.from_file(name)

    common: dict[str, Any] = {"timeout": settings.timeout, "max_retries": 0}
    if settings.temperature is not None:
        common["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        common["max_tokens"] = settings.max_tokens
    api_key = settings.api_key.get_secret_value() if settings.api_key else None

    if settings.base_url:
        served_name = served_model_name(model)
        if not served_name:
            raise ConfigError(f"model {model!r} has no name after the provider prefix")
        return _openai_compatible(served_name, settings.base_url, api_key, common)
    if not name:
        raise ConfigError(f"model {model!r} has no name after the provider prefix")
    if api_key is not None:
        common["api_key"] = api_key
    return _init_provider_model(model, provider, name, common)


def _openai_compatible(
    name: str, base_url: str, api_key: str | None, common: dict[str, Any]
) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    from kgot.llm.http import loop_safe_async_client

    try:
        return ChatOpenAI(
            model=name,
            base_url=base_url,
            api_key=SecretStr(api_key or PLACEHOLDER_API_KEY),
            http_async_client=loop_safe_async_client(),
            **common,
        )
    except Exception as error:  # pydantic / SDK validation of the given values
        raise ConfigError(
            f"cannot set up the OpenAI-compatible model {name!r} at {base_url}: "
            f"{_first_line(error)}"
        ) from None


def _init_provider_model(
    model: str, provider: str, name: str, common: dict[str, Any]
) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    if provider in _OPENAI_SDK_PROVIDERS or (
        not provider and name.lower().startswith(_OPENAI_NAME_PREFIXES)
    ):
        from kgot.llm.http import loop_safe_async_client

        common = {**common, "http_async_client": loop_safe_async_client()}
    try:
        # Without a prefix LangChain infers the provider from well-known names (gpt-…, claude-…).
        return init_chat_model(name, model_provider=provider or None, **common)
    except ImportError as error:
        package = _package_to_install(error, provider)
        raise ConfigError(
            f"model provider {provider!r} needs the {package} package: pip install {package}"
        ) from None
    except ValueError as error:
        if "provider" in str(error).lower() and not provider:
            raise ConfigError(
                f"model {model!r} names no provider: write it as provider:name "
                "(e.g. openai:gpt-4o-mini), or set KGOT_BASE_URL for an OpenAI-compatible server"
            ) from None
        if "provider" in str(error).lower():
            raise ConfigError(
                f"unknown model provider {provider!r} in {model!r}: use a LangChain provider "
                "(openai, anthropic, google_genai, mistralai, ollama, …) or set KGOT_BASE_URL "
                "for an OpenAI-compatible server"
            ) from None
        raise ConfigError(f"cannot set up model {model!r}: {_first_line(error)}") from None
    except Exception as error:  # e.g. the SDK refusing to start without an API key
        text = str(error).lower()
        if "api_key" in text or "credentials" in text or "api key" in text:
            raise ConfigError(
                f"model {model!r} needs an API key: set KGOT_API_KEY (or the provider's own "
                "variable, e.g. OPENAI_API_KEY)"
            ) from None
        raise ConfigError(f"cannot set up model {model!r}: {_first_line(error)}") from None


def _package_to_install(error: ImportError, provider: str) -> str:
    found = re.search(r"pip install (?:-U )?[`'\"]?([A-Za-z0-9_.\-\[\]]+)", str(error))
    return found.group(1) if found else f"langchain-{provider.replace('_', '-')}"


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
