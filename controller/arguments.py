"""The Python API's keyword arguments, turned into what a run uses.

:func:`kgot.ask` and its siblings take the options a user tunes as typed keyword arguments
(``model="openai:gpt-4o-mini"``, ``backend="rdf"``, ``votes=3``, …). Most of them are settings
(:data:`ARGUMENT_SETTINGS` says which); they are laid over the ``settings`` the caller gave (or
the configuration file and environment), the way ``kgot ask``'s flags are. A model may also be a
LangChain chat model object and a sandbox an open sandbox: those go to the run as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.config import Settings, nested_overrides, with_options
from kgot.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.sandbox import Sandbox

# Keyword argument -> the setting it sets (dotted path, as `kgot ask`'s flags and the TOML file).
ARGUMENT_SETTINGS: dict[str, str] = {
    "model": "llm.model",
    "planning_model": "llm.planning.model",
    "execution_model": "llm.execution.model",
    "base_url": "llm.base_url",
    "api_key": "llm.api_key",
    "structured_output": "llm.structured_output",
    "timeout": "llm.timeout",
    "backend": "controller.backend",
    "votes": "controller.votes",
    "max_iterations": "controller.max_iterations",
    "max_tool_calls": "controller.max_tool_calls",
    "fix_code_retries": "controller.fix_code_retries",
    "retrieve_retries": "controller.retrieve_retries",
    "solution_samples": "controller.solution_samples",
    "graph_token_budget": "controller.graph_token_budget",
    "gaia_format": "controller.gaia_format",
    "sandbox": "sandbox.kind",
    "db": "store.db",
}
# Never repeated in an error message.
_SECRET_ARGUMENTS = frozenset({"api_key"})
_ROLE_ARGUMENTS = {"planning": "planning_model", "execution": "execution_model"}


def chat_models(
    *,
    model: str | BaseChatModel | None,
    planning_model: str | BaseChatModel | None,
    execution_model: str | BaseChatModel | None,
    models: Mapping[str, BaseChatModel] | None,
) -> tuple[dict[str, str | None], dict[str, BaseChatModel] | None]:
    """Split the model arguments into model names (settings: ``{argument: name}``) and chat
    model objects per role (what :func:`kgot.llm.build_llm_clients` takes as ``models``).

    Raises:
        TypeError: a model that is neither a ``provider:name`` string nor a chat model.
        UsageError: a role given a chat model twice (in ``models`` and as an argument).
    """
    from langchain_core.language_models import BaseChatModel

    given = {"model": model, "planning_model": planning_model, "execution_model": execution_model}
    for name, value in given.items():
        if value is not None and not isinstance(value, str | BaseChatModel):
            raise TypeError(
                f"{name} must be a 'provider:name' string or a LangChain chat model, "
                f"not {type(value).__name__}"
            )
    names = {name: value if isinstance(value, str) else None for name, value in given.items()}
    objects: dict[str, BaseChatModel] = dict(models or {})
    for role, argument in _ROLE_ARGUMENTS.items():
        # The role's own argument beats `model`, as --planning-model beats --model.
        chosen = given[argument] if given[argument] is not None else model
        if not isinstance(chosen, BaseChatModel):
            continue
        if role in objects:
            raise UsageError(
                f"the {role} model is given twice, in models= and as {argument}= or model=; "
                "give it once"
            )
        objects[role] = chosen
    return names, objects or None


def sandbox_argument(sandbox: str | Sandbox | None) -> tuple[str | None, Sandbox | None]:
    """``sandbox=``: a kind (a setting) or an open sandbox (used as it is, closed by the
    caller).

    Raises:
        TypeError: neither a kind nor a sandbox.
    """
    from kgot.sandbox import Sandbox

    if sandbox is None or isinstance(sandbox, str):
        return sandbox, None
    if not isinstance(sandbox, Sandbox):
        raise TypeError(
            "sandbox must be a kind ('auto', 'bwrap', 'fallback', 'docker', 'subprocess') or an "
            f"open kgot sandbox, not {type(sandbox).__name__}"
        )
    return None, sandbox


def store_location(db: str | Path | None, store: object | None) -> str | None:
    """``db=`` as a settings value (a path is made a string).

    Raises:
        UsageError: both ``db`` and an open ``store`` are given.
    """
    if db is not None and store is not None:
        raise UsageError("give db= (where the store is) or store= (an open store), not both")
    return str(Path(db).expanduser()) if isinstance(db, Path) else db


def with_arguments(
    settings: Settings, arguments: Mapping[str, Any], *layers: Mapping[str, Any]
) -> Settings:
    """``settings`` with option ``layers`` (nested dicts, as a checkpoint keeps them) and then
    the keyword ``arguments`` (``None``: not given) laid over it.

    Raises:
        ConfigError: an argument's value is not valid for its setting (the message names the
            argument), or a layer holds an invalid value.
    """
    dotted = {
        ARGUMENT_SETTINGS[name]: value for name, value in arguments.items() if value is not None
    }
    try:
        return with_options(settings, *layers, nested_overrides(dotted))
    except ConfigError:
        _name_the_argument(settings, arguments)
        raise


def _name_the_argument(settings: Settings, arguments: Mapping[str, Any]) -> None:
    """Raise the refusal of the first argument that is invalid on its own, naming it (the
    settings' own message names only the setting: ``controller.votes``)."""
    for name, value in arguments.items():
        if value is None:
            continue
        try:
            with_options(settings, nested_overrides({ARGUMENT_SETTINGS[name]: value}))
        except ConfigError as error:
            reason = str(error).split("`: ", 1)[-1]
            shown = "…" if name in _SECRET_ARGUMENTS else repr(value)
            raise ConfigError(
                f"invalid argument {name}={shown} ({ARGUMENT_SETTINGS[name]}): {reason}"
            ) from None
