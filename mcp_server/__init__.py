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
"""
