"""Tools other packages add to `kgot mcp serve`: the ``kgot.mcp_tools`` extension point
(:mod:`kgot.extension_points`; the advisor's ``briefing`` and ``alerts`` come this way).

An entry point of the group names ``register(tools: ToolSet, app: KgotMCP) -> Sequence[str]``,
which adds its tools with :meth:`~kgot.mcp_server.tooling.ToolSet.add` (each with the scope a
token needs for it, checked by ``app.allowed`` in the tool) and returns their names. It runs
when a server is built, with the MCP SDK imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kgot.errors import ConfigError
from kgot.extension_points import MCP_TOOLS, Registry, function_check

if TYPE_CHECKING:
    from kgot.mcp_server.server import KgotMCP
    from kgot.mcp_server.tooling import ToolSet

__all__ = ["MCP_TOOL_PROVIDERS", "McpToolProvider", "add_extension_tools"]

McpToolProvider = Callable[["ToolSet", "KgotMCP"], Sequence[str]]


MCP_TOOL_PROVIDERS: Registry[McpToolProvider] = Registry(
    MCP_TOOLS, "MCP tool provider", function_check("register(tools, app)")
)


def add_extension_tools(tools: ToolSet, app: KgotMCP) -> list[str]:
    """Let every MCP tool provider add its tools, in name order; the names added.

    Raises:
        ConfigError: a provider cannot be loaded, or names a tool the server has already.
    """
    added: list[str] = []
    for provider_name, register in MCP_TOOL_PROVIDERS.items():
        before = {tool.name for tool in tools.tools}
        try:
            names = list(register(tools, app))
        except ValueError as error:
            raise ConfigError(
                f"the MCP tool provider {provider_name!r} could not add its tools: {error}"
            ) from error
        taken = [name for name in names if name in before]
        if taken:
            raise ConfigError(
                f"the MCP tool provider {provider_name!r} adds {', '.join(taken)}, which this "
                "server has already; uninstall it or the provider it clashes with"
            )
        added += names
    return added
