"""Entity tool providers: tools a package adds to every run on an entity.

The controller asks every provider of the ``kgot.entity_tools`` entry-point group
(:mod:`kgot.extension_points`) for the tools of each run on an entity, whoever started it
(``kgot.ask``, ``kgot ask --entity``, the MCP server's ``ask``, an aide), so no caller has to
remember to pass them. A provider is ``provider(store, entity) -> Sequence[BaseTool]``: it
reads what it needs from the store the run uses (the run's own connection pool, on a worker
thread) and returns ``[]`` for an entity it has nothing for. Its tools are offered like kgot's
own; their results become graph facts like any tool result.

A tool the caller passes as ``extra_tools`` replaces a provided one of the same name (the
caller chose it for this run); a provided tool named like one of kgot's, or like another
provider's, is a :class:`~kgot.errors.ConfigError`: the model must never see two tools of one
name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from kgot.errors import ConfigError
from kgot.extension_points import ENTITY_TOOLS, Registry, function_check

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from kgot.persistence import Store

__all__ = ["ENTITY_TOOL_PROVIDERS", "EntityToolProvider", "entity_tools"]

EntityToolProvider = Callable[["Store", str], Sequence["BaseTool"]]


ENTITY_TOOL_PROVIDERS: Registry[EntityToolProvider] = Registry(
    ENTITY_TOOLS, "entity tool provider", function_check("(store, entity) -> tools")
)


def entity_tools(
    store: Store, entity: str, *, builtin: Collection[str], given: Collection[str] = ()
) -> list[BaseTool]:
    """Every provider's tools for a run on ``entity``, providers in name order.

    Args:
        builtin: the names of kgot's own tools in this run (a provided one may not take one).
        given: the names of the caller's ``extra_tools``, which replace provided ones.

    Raises:
        ConfigError: a provider cannot be loaded, or offers a tool named like kgot's or like
            another provider's.
    """
    offered: dict[str, tuple[str, BaseTool]] = {}
    for provider_name, provider in ENTITY_TOOL_PROVIDERS.items():
        for tool in provider(store, entity):
            if tool.name in given:
                continue
            if tool.name in builtin:
                raise ConfigError(
                    f"the entity tool provider {provider_name!r} offers a tool named "
                    f"{tool.name!r}, which is one of kgot's; the provider must rename it"
                )
            if tool.name in offered:
                raise ConfigError(
                    f"the entity tool providers {offered[tool.name][0]!r} and "
                    f"{provider_name!r} both offer a tool named {tool.name!r}; uninstall one"
                )
            offered[tool.name] = (provider_name, tool)
    return [tool for _provider, tool in offered.values()]
