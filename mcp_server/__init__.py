"""``kgot mcp serve``: entity graphs as long-term memory for any MCP client (issue 18;
docs/mcp.md).

Tools (search_memory, get_node, traverse, save_facts, remember, verify_claim, list_types,
propose_type, history, ask; query with ``--allow-query``; the advisor's briefing and alerts
where an advisor exists) and resources (``kgot://entities/{name}/stats``, ``…/types``,
``…/nodes/{id}``) on the official MCP SDK (2.x, the optional extra ``kgot[mcp]``), over stdio
(one entity, fixed on the command line) or Streamable HTTP (bearer tokens from a tokens file
that holds only hashes; each token grants entities and scopes).

* :mod:`kgot.mcp_server.tokens` — the tokens file (no SDK needed);
* :mod:`kgot.mcp_server.access` — grants, entities, scopes: one answer for "not yours" and
  "does not exist";
* :mod:`kgot.mcp_server.serving` — ``serve_stdio`` / ``serve_http``;
* :mod:`kgot.mcp_server.server` — the tools and resources on ``MCPServer``.

Nothing here is imported by ``import kgot``; the SDK loads only when a server is built.
The names below are what other packages use (``kgot mcp …``, the perf figures, a package's MCP
tool provider: docs/architecture.md, "Extension points"); each loads its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.mcp_server.asking import AskLimits
    from kgot.mcp_server.client_config import (
        client_named,
        http_config,
        http_url,
        kgot_launch,
        require_entity,
        stdio_config,
        store_argument,
    )
    from kgot.mcp_server.handlers import MAX_NAME_CHARS, EntityArg, in_thread
    from kgot.mcp_server.server import KgotMCP
    from kgot.mcp_server.serving import (
        ServeOptions,
        Stopped,
        parse_address,
        require_sdk,
        serve_http,
        serve_stdio,
    )
    from kgot.mcp_server.tokens import (
        add_token,
        checked_label,
        parse_scopes,
        read_token_file,
        revoke_token,
    )
    from kgot.mcp_server.tool_schemas import JsonValue
    from kgot.mcp_server.tooling import READ, WRITE, ToolSet

_HOMES = {
    "AskLimits": "kgot.mcp_server.asking",
    "EntityArg": "kgot.mcp_server.handlers",
    "JsonValue": "kgot.mcp_server.tool_schemas",
    "KgotMCP": "kgot.mcp_server.server",
    "MAX_NAME_CHARS": "kgot.mcp_server.handlers",
    "READ": "kgot.mcp_server.tooling",
    "ServeOptions": "kgot.mcp_server.serving",
    "Stopped": "kgot.mcp_server.serving",
    "ToolSet": "kgot.mcp_server.tooling",
    "WRITE": "kgot.mcp_server.tooling",
    "add_token": "kgot.mcp_server.tokens",
    "checked_label": "kgot.mcp_server.tokens",
    "client_named": "kgot.mcp_server.client_config",
    "http_config": "kgot.mcp_server.client_config",
    "http_url": "kgot.mcp_server.client_config",
    "in_thread": "kgot.mcp_server.handlers",
    "kgot_launch": "kgot.mcp_server.client_config",
    "parse_address": "kgot.mcp_server.serving",
    "parse_scopes": "kgot.mcp_server.tokens",
    "read_token_file": "kgot.mcp_server.tokens",
    "require_entity": "kgot.mcp_server.client_config",
    "require_sdk": "kgot.mcp_server.serving",
    "revoke_token": "kgot.mcp_server.tokens",
    "serve_http": "kgot.mcp_server.serving",
    "serve_stdio": "kgot.mcp_server.serving",
    "stdio_config": "kgot.mcp_server.client_config",
    "store_argument": "kgot.mcp_server.client_config",
}

__all__ = [
    "MAX_NAME_CHARS",
    "READ",
    "WRITE",
    "AskLimits",
    "EntityArg",
    "JsonValue",
    "KgotMCP",
    "ServeOptions",
    "Stopped",
    "ToolSet",
    "add_token",
    "checked_label",
    "client_named",
    "http_config",
    "http_url",
    "in_thread",
    "kgot_launch",
    "parse_address",
    "parse_scopes",
    "read_token_file",
    "require_entity",
    "require_sdk",
    "revoke_token",
    "serve_http",
    "serve_stdio",
    "stdio_config",
    "store_argument",
]


__getattr__ = lazy_exports(__name__, _HOMES)
