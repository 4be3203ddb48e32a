"""The MCP server: kgot's tools and resources on the SDK's ``MCPServer`` (mcp 2.x).

Every handler finds the client's grant first (:meth:`KgotMCP.grant`: the fixed one of a stdio
server, else the one the bearer token of the HTTP request maps to), checks the scope, then
reaches the entity through :class:`~kgot.mcp_server.access.Tenancy`, which answers an entity
outside the grant exactly as one that does not exist. Store work runs in worker threads; a
kgot error becomes an error result whose text says what to change (the SDK prefixes it with
``Error executing tool NAME:``), any other exception a generic one (details stay in the
server's log).

This module imports the SDK; nothing else of kgot imports this module but the CLI and the
benchmark, so kgot works without the ``mcp`` extra.
"""

# No `from __future__ import annotations` here: the SDK reads the tools' annotations at
# registration, and the models they name must be real objects, not strings.

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from kgot.config import Settings
from kgot.errors import KgotError
from kgot.mcp_server import graph_reads, writes
from kgot.mcp_server.access import AccessError, Tenancy
from kgot.mcp_server.asking import AskLimits
from kgot.mcp_server.asking import ask as run_ask
from kgot.mcp_server.asking import remember as run_remember
from kgot.mcp_server.extensions import add_extension_tools
from kgot.mcp_server.handlers import (
    MAX_FACT_ID_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_REF_CHARS,
    MAX_WORDS_CHARS,
    EntityArg,
    client_errors,
    in_thread,
)
from kgot.mcp_server.tokens import Grant
from kgot.mcp_server.tool_schemas import (
    AskOut,
    EdgeIn,
    ForgetOut,
    HistoryOut,
    NodeIn,
    NodeOut,
    QueryOut,
    RememberOut,
    SaveOut,
    SearchHitOut,
    SearchOut,
    TraverseOut,
    TypeOut,
    TypesOut,
    VerdictOut,
)
from kgot.mcp_server.tooling import (
    ASK,
    FORGET,
    READ,
    WRITE,
    KgotServer,
    ToolSet,
    scoped_tool_list,
)
from kgot.version import __version__

__all__ = ["KgotMCP", "build_server"]

log = logging.getLogger(__name__)

_INSTRUCTIONS = (
    "kgot keeps a typed, persistent knowledge graph per entity. Search it with search_memory, "
    "read nodes with get_node and traverse, check claims with verify_claim, record facts with "
    "save_facts (types: list_types, propose_type) or remember (free text), retire a wrong or "
    "unwanted fact with forget, and ask questions the KGoT loop answers with ask."
)


@dataclass
class KgotMCP:
    """What the handlers share: the store's tenancy, settings, caps and options."""

    tenancy: Tenancy
    settings: Settings
    limits: AskLimits = field(default_factory=AskLimits)
    fixed_grant: Grant | None = None  # stdio: the tenant fixed on the command line
    allow_query: bool = False
    _sandbox: Any = None

    def grant(self, ctx: Context) -> Grant:
        """The calling client's grant.

        Raises:
            ToolError: an HTTP request without a verified token (the transport refuses those
                before any handler runs; this is a second lock).
        """
        grant = self.grant_of(ctx.request_context.request)
        if grant is None:
            raise ToolError("not authenticated: send Authorization: Bearer <token>")
        return grant

    def grant_of(self, request: Any) -> Grant | None:
        """The grant of the client that sent ``request`` (``None`` over stdio): the fixed one
        of a stdio server, else the one its verified bearer token carries; ``None`` without
        one."""
        if self.fixed_grant is not None:
            return self.fixed_grant
        user = request.scope.get("user") if request is not None else None
        token = getattr(user, "access_token", None)
        entities = (token.claims or {}).get("entities") if token is not None else None
        if token is None or not isinstance(entities, list | tuple):
            return None
        return Grant(token.client_id, tuple(entities), frozenset(token.scopes))

    def scopes_of(self, request: Any) -> frozenset[str] | None:
        grant = self.grant_of(request)
        return None if grant is None else grant.scopes

    def allowed(self, ctx: Context, scope: str, what: str) -> Grant:
        """The calling client's grant, if it has ``scope`` (else a tool error saying so)."""
        with client_errors():
            grant = self.grant(ctx)
            self.tenancy.require(grant, scope, what)
            return grant

    def sandbox(self) -> Any:
        """The sandbox of the query tool, opened on first use."""
        if self._sandbox is None:
            from kgot.sandbox import open_sandbox

            self._sandbox = open_sandbox(self.settings.sandbox.model_copy(update={"pool_size": 0}))
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def build_server(
    app: KgotMCP, *, token_verifier: Any = None, auth: AuthSettings | None = None
) -> MCPServer:
    """The MCP server with every tool and resource bound to ``app``; over HTTP, ``auth`` and
    ``token_verifier`` make the transport refuse requests without a known bearer token."""
    tools = ToolSet()
    _reading_tools(tools, app)
    _writing_tools(tools, app)
    _model_tools(tools, app)
    if app.allow_query:
        _query_tool(tools, app)
    add_extension_tools(tools, app)  # the kgot.mcp_tools extension point (extensions.py)
    server: MCPServer = KgotServer(
        "kgot",
        version=__version__,
        instructions=_INSTRUCTIONS,
        log_level="WARNING",
        token_verifier=token_verifier,
        auth=auth,
        tools=tools.tools,
        middleware=[scoped_tool_list(tools.scopes, app.scopes_of)],
    )
    _resources(server, app)
    return server


# ---------------------------------------------------------------------------- reading


def _reading_tools(tools: ToolSet, app: KgotMCP) -> None:
    tenancy = app.tenancy

    @tools.tool(scope="read", title="Search memory", annotations=READ)
    async def search_memory(
        query: Annotated[
            str,
            Field(
                max_length=MAX_WORDS_CHARS,
                description="Words to look for, e.g. 'acme headquarters'.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Hits to return.")] = 10,
        type: Annotated[
            str | None,
            Field(
                max_length=MAX_NAME_CHARS,
                description="Only facts of this node type or relationship.",
            ),
        ] = None,
        min_confidence: Annotated[
            float | None, Field(ge=0, le=1, description="Only facts at least this trusted.")
        ] = None,
        as_of: Annotated[
            str | None,
            Field(
                max_length=64,
                description="ISO date or date-time at which freshness is scored (default: "
                "now), for reproducible scores. Not a look into the past: today's current facts "
                "are searched either way; history shows what held at a time.",
            ),
        ] = None,
    ) -> SearchOut:
        """Search the entity's current facts (nodes and edges), best first, ranked by
        relevance, type weight, confidence and freshness. Superseded, merged-away and expired
        facts never appear."""
        grant = app.allowed(ctx, "read", "search_memory")
        moment = _instant(as_of)

        def work() -> SearchOut:
            memory = tenancy.memory(grant, entity)
            hits = memory.search(
                query, limit=limit, type=type, min_confidence=min_confidence, now=moment
            )
            rows = [SearchHitOut.model_validate(hit.to_dict()) for hit in hits]
            return SearchOut(entity=memory.entity, hits=rows)

        return await in_thread(work)

    @tools.tool(scope="read", title="Read a node", annotations=READ)
    async def get_node(
        id: Annotated[
            str,
            Field(
                max_length=MAX_ID_CHARS,
                description="A node id; an id merged away leads to its node.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
    ) -> NodeOut:
        """A node with its properties, provenance (confidence, source, who wrote it, when) and
        its edges in and out (at most 100 each way)."""
        grant = app.allowed(ctx, "read", "get_node")
        return await in_thread(
            lambda: tenancy.run(grant, entity, lambda s: graph_reads.get_node(s, id))
        )

    @tools.tool(scope="read", title="Walk the graph", annotations=READ)
    async def traverse(
        start: Annotated[
            str, Field(max_length=MAX_ID_CHARS, description="The node id to start from.")
        ],
        ctx: Context,
        entity: EntityArg = None,
        depth: Annotated[
            int,
            Field(ge=1, le=graph_reads.MAX_DEPTH, description="How many edges away to go."),
        ] = 1,
        max_nodes: Annotated[
            int,
            Field(
                ge=1,
                le=graph_reads.MAX_TRAVERSE_NODES,
                description="Stop after this many nodes (truncated says so).",
            ),
        ] = 50,
        relationships: Annotated[
            list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | None,
            Field(max_length=50, description="Follow only these relationships."),
        ] = None,
        direction: Annotated[
            Literal["out", "in", "both"],
            Field(description="Follow edges out of each node, into it, or both."),
        ] = "both",
    ) -> TraverseOut:
        """The neighbourhood of a node, breadth first, bounded by depth (at most 3) and size
        (at most 200 nodes, 500 edges); truncated says a bound was hit."""
        grant = app.allowed(ctx, "read", "traverse")
        return await in_thread(
            lambda: tenancy.run(
                grant,
                entity,
                lambda s: graph_reads.traverse(
                    s,
                    start,
                    depth=depth,
                    max_nodes=max_nodes,
                    relationships=relationships,
                    direction=direction,
                ),
            )
        )

    @tools.tool(scope="read", title="Check a claim", annotations=READ)
    async def verify_claim(
        subject: Annotated[
            str,
            Field(
                max_length=MAX_ID_CHARS,
                description="The node the claim is about: id or name.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        property: Annotated[
            str | None,
            Field(max_length=MAX_NAME_CHARS, description="A property claim: its name."),
        ] = None,
        value: Annotated[
            Annotated[str, Field(max_length=MAX_REF_CHARS)] | int | float | bool | None,
            Field(description="A property claim: the value."),
        ] = None,
        relation: Annotated[
            str | None,
            Field(max_length=MAX_NAME_CHARS, description="A relation claim: the relationship."),
        ] = None,
        object: Annotated[
            str | None,
            Field(
                max_length=MAX_ID_CHARS,
                description="A relation claim: the target's id or name.",
            ),
        ] = None,
    ) -> VerdictOut:
        """Check a claim against the entity's graph without a model: subject plus property
        and value, or relation and object. The verdict is corroborated, contradicted, mixed or
        inconclusive, with the facts behind it and values that held once."""
        grant = app.allowed(ctx, "read", "verify_claim")

        def work() -> VerdictOut:
            verdict = tenancy.memory(grant, entity).verify_claim(
                subject, property=property, value=value, relation=relation, object=object
            )
            return VerdictOut.model_validate(verdict.to_json())

        return await in_thread(work)

    @tools.tool(scope="read", title="List the types", annotations=READ)
    async def list_types(ctx: Context, entity: EntityArg = None) -> TypesOut:
        """The node and edge types the entity's facts must follow: JSON Schemas of their
        properties, descriptions, examples and memory settings."""
        grant = app.allowed(ctx, "read", "list_types")
        return await in_thread(lambda: tenancy.run(grant, entity, graph_reads.list_types))

    @tools.tool(scope="read", title="A fact's history", annotations=READ)
    async def history(
        fact: Annotated[
            str,
            Field(
                max_length=MAX_FACT_ID_CHARS,
                description="A node id, or an edge as 'source -[key]-> target'.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
    ) -> HistoryOut:
        """Every stored version of a fact, oldest first: its values, when each held, why it
        closed (changed, contradicted, merged, expired, …) and its provenance."""
        grant = app.allowed(ctx, "read", "history")
        return await in_thread(
            lambda: tenancy.run(grant, entity, lambda s: graph_reads.history(s, fact))
        )


# ---------------------------------------------------------------------------- writing


def _writing_tools(tools: ToolSet, app: KgotMCP) -> None:
    tenancy = app.tenancy

    @tools.tool(scope="write", title="Save facts", annotations=WRITE)
    async def save_facts(
        nodes: Annotated[
            list[NodeIn],
            Field(
                max_length=writes.MAX_SAVE_NODES,
                description="Nodes: {id, label, properties} or flat node-link objects "
                '({"id": "acme", "label": "Organization", "name": "Acme Corp"}).',
            ),
        ],
        ctx: Context,
        edges: Annotated[
            list[EdgeIn],
            Field(
                max_length=writes.MAX_SAVE_EDGES,
                description="Edges: {source, target, relationship, key?, properties} or flat.",
            ),
        ] = [],  # noqa: B006
        entity: EntityArg = None,
        source_ref: Annotated[
            str | None,
            Field(
                max_length=MAX_REF_CHARS,
                description="Where the facts come from (URL, document).",
            ),
        ] = None,
        confidence: Annotated[
            float | None,
            Field(ge=0, le=1, description="Trust of facts that set no _confidence."),
        ] = None,
    ) -> Annotated[CallToolResult, SaveOut]:
        """Save nodes and edges (node-link objects) as one change: type-checked against the
        entity's types, duplicates landed on the existing node, a node id that exists is
        updated, single-valued facts superseded, committed with provenance mcp:<client>.
        Returns what was inserted, updated, merged, corroborated and superseded. A violation
        writes nothing and returns the violations."""
        grant = app.allowed(ctx, "write", "save_facts")
        trust = app.settings.memory.trust_for("mcp")

        def work() -> SaveOut:
            memory = tenancy.memory(grant, entity)
            with tenancy.write_lock(memory.entity):
                return writes.save_facts(
                    memory,
                    nodes,
                    edges,
                    label=grant.label,
                    trust=trust,
                    source_ref=source_ref,
                    confidence=confidence,
                )

        result = await in_thread(work)
        data = result.model_dump(mode="json")
        if result.written:
            text = json.dumps(data, ensure_ascii=False, indent=2)
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=data
            )
        listed = "\n".join(f"- {problem}" for problem in result.violations)
        text = (
            f"nothing was written to entity {result.entity!r}; fix these and call save_facts "
            "again (list_types shows the types; propose_type adds one none of them fits):"
            f"\n{listed}"
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data, is_error=True
        )

    @tools.tool(scope="write", title="Forget a fact", annotations=FORGET)
    async def forget(
        fact: Annotated[
            str,
            Field(
                max_length=MAX_FACT_ID_CHARS,
                description="A node id (its edges are forgotten with it) or an edge as "
                "'source -[key]-> target', as search_memory, get_node and history name them.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        property: Annotated[
            str | None,
            Field(
                max_length=MAX_NAME_CHARS,
                description="Forget only this property of the node (e.g. 'ceo'); the node stays.",
            ),
        ] = None,
    ) -> ForgetOut:
        """Forget one current fact the user says is wrong or unwanted: a node with its edges,
        one property of a node, or an edge. Nothing is deleted: it closes as 'forgotten'
        (history shows it), and searches and reads no longer return it. Ask the user first."""
        grant = app.allowed(ctx, "write", "forget")

        def work() -> ForgetOut:
            memory = tenancy.memory(grant, entity)
            with tenancy.write_lock(memory.entity):
                done = memory.forget(fact, property=property, by=f"mcp:{grant.label}")
            return ForgetOut.model_validate(done.to_json())

        return await in_thread(work)

    @tools.tool(scope="write", title="Propose a type", annotations=WRITE)
    async def propose_type(
        kind: Annotated[
            Literal["node", "edge"], Field(description="A node type (label) or an edge type.")
        ],
        name: Annotated[
            str,
            Field(
                max_length=MAX_NAME_CHARS,
                description="PascalCase node label or snake_case relationship.",
            ),
        ],
        description: Annotated[
            str,
            Field(max_length=MAX_REF_CHARS, description="What the type means, when to use it."),
        ],
        justification: Annotated[
            str,
            Field(
                max_length=MAX_REF_CHARS,
                description="Why none of the existing types (list_types) fits.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        properties: Annotated[
            dict[str, Any] | None,
            Field(description="JSON Schema (Draft 2020-12) of the properties object."),
        ] = None,
        example: Annotated[
            dict[str, Any] | None, Field(description="Example properties that fit the schema.")
        ] = None,
        identity: Annotated[
            list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | None,
            Field(max_length=50, description="Node types: properties identifying one thing."),
        ] = None,
        functional: Annotated[
            list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | bool | None,
            Field(
                description="Node types: single-valued properties; edge types: true when a "
                "source has at most one current edge of it."
            ),
        ] = None,
        source_types: Annotated[
            list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | None,
            Field(max_length=100, description="Edge types: the node labels it may start at."),
        ] = None,
        target_types: Annotated[
            list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | None,
            Field(max_length=100, description="Edge types: the node labels it may point to."),
        ] = None,
        half_life_days: Annotated[
            float | None,
            Field(gt=0, description="Days after which a fact's freshness score halves."),
        ] = None,
        ttl_days: Annotated[
            float | None,
            Field(gt=0, description="Days after which a fact of this type expires."),
        ] = None,
        rank_weight: Annotated[
            float | None,
            Field(ge=0, le=1, description="How much search ranks this type's facts (0-1)."),
        ] = None,
    ) -> TypeOut:
        """Add a node or edge type to the entity when no existing type fits, under the same
        rules as the agent's type tools: a new name, a valid schema, a fitting example and a
        justification."""
        grant = app.allowed(ctx, "write", "propose_type")
        spec = {
            "kind": kind,
            "name": name,
            "description": description,
            "justification": justification,
            "properties": properties,
            "example": example,
            "identity": identity,
            "functional": functional,
            "source_types": source_types,
            "target_types": target_types,
            "half_life_days": half_life_days,
            "ttl_days": ttl_days,
            "rank_weight": rank_weight,
        }
        return await in_thread(
            lambda: tenancy.run(
                grant, entity, lambda s: writes.propose_type(s, spec, label=grant.label)
            )
        )


# ---------------------------------------------------------------------------- models


def _model_tools(tools: ToolSet, app: KgotMCP) -> None:
    tenancy = app.tenancy

    @tools.tool(scope="write", title="Remember a text", annotations=WRITE)
    async def remember(
        text: Annotated[
            str,
            Field(
                max_length=app.limits.remember_max_chars,
                description="What to remember: notes, a message, a page.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        source_ref: Annotated[
            str | None,
            Field(
                max_length=MAX_REF_CHARS,
                description="Where the text came from (kept on its facts).",
            ),
        ] = None,
    ) -> RememberOut:
        """Extract the knowledge a text states into the entity's graph (a model writes graph
        code, run in the sandbox, checked against the types, committed). Returns what was
        inserted, merged, corroborated and superseded, and what it cost."""
        grant = app.allowed(ctx, "write", "remember")
        name = await in_thread(lambda: tenancy.session(grant, entity).entity)
        with client_errors():
            return await run_remember(
                tenancy.store,
                app.settings,
                name,
                text,
                label=grant.label,
                source_ref=source_ref,
                limits=app.limits,
            )

    @tools.tool(scope="ask", title="Ask a question", annotations=ASK)
    async def ask(
        question: Annotated[
            str,
            Field(
                max_length=app.limits.max_question_chars,
                description="The question to answer.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        max_cost_usd: Annotated[
            float | None,
            Field(
                gt=0,
                description="Stop the run once its model cost reaches this (at most "
                "the server's cap).",
            ),
        ] = None,
    ) -> AskOut:
        """Answer a question with the KGoT loop on the entity's graph: it gathers what is
        missing with tools, writes it to the graph and answers from it. Long-running: progress
        notifications name each step; the run stops at the cost or request cap."""
        grant = app.allowed(ctx, "ask", "ask")
        name = await in_thread(lambda: tenancy.session(grant, entity).entity)

        async def progress(done: float, total: float | None, message: str) -> None:
            with contextlib.suppress(Exception):  # a client gone quiet must not stop the run
                await ctx.report_progress(done, total, message)

        with client_errors():
            return await run_ask(
                tenancy.store,
                app.settings,
                name,
                question,
                limits=app.limits,
                max_cost_usd=max_cost_usd,
                progress=progress,
            )


# ---------------------------------------------------------------------------- query


def _query_tool(tools: ToolSet, app: KgotMCP) -> None:
    tenancy = app.tenancy

    @tools.tool(scope="admin", title="Run a read query", annotations=READ)
    async def query(
        code: Annotated[
            str,
            Field(
                max_length=20_000,
                description="A read query in the configured backend's language (Python on "
                "NetworkX: set `result`; or SPARQL). On a large entity G holds the nodes the "
                "code names by id; find(label, **properties) and neighbours(id) reach the rest.",
            ),
        ],
        ctx: Context,
        entity: EntityArg = None,
        max_items: Annotated[
            int,
            Field(ge=1, le=20_000, description="Cut the result to this many items."),
        ] = 1_000,
    ) -> QueryOut:
        """Run a raw read query in the sandbox on this entity's graph only (admin scope)."""
        grant = app.allowed(ctx, "admin", "query")

        def work(session: Any) -> QueryOut:
            from kgot.controller import open_entity_backend
            from kgot.errors import StepFailure, UsageError
            from kgot.graph_backends import open_backend

            # A large entity is not loaded: the query gets a working set (the nodes it names,
            # what its find()/neighbours() calls ask for), as graph code in a question does.
            backend = open_entity_backend(
                session,
                "",
                lambda graph: open_backend(app.settings.controller.backend, app.sandbox(), graph),
                max_nodes=app.settings.controller.working_set_nodes,
                track=False,
            )
            try:
                result = backend.query(code, max_items=max_items)
            except StepFailure as failure:
                raise UsageError(f"the query failed: {failure}") from None
            finally:
                backend.close()  # a resident worker holding this entity's graph goes too
            return QueryOut(entity=session.entity, value=result.value, truncated=result.truncated)

        return await in_thread(lambda: tenancy.run(grant, entity, work))


# ---------------------------------------------------------------------------- resources


def _resources(server: MCPServer, app: KgotMCP) -> None:
    tenancy = app.tenancy

    async def read(ctx: Context, name: str, work: Callable[[Any], Any]) -> str:
        try:
            grant = app.allowed(ctx, "read", "reading resources")
            found = await anyio.to_thread.run_sync(lambda: tenancy.run(grant, name, work))
        except (AccessError, ToolError) as refused:
            raise ResourceNotFoundError(str(refused)) from None
        except KgotError as error:
            raise ResourceNotFoundError(str(error)) from None
        data = found.model_dump(mode="json") if hasattr(found, "model_dump") else found
        return json.dumps(data, ensure_ascii=False, indent=2)

    @server.resource(
        "kgot://entities/{name}/stats",
        mime_type="application/json",
        description="Node and edge counts of an entity, per type, and its version.",
    )
    async def entity_stats(name: str, ctx: Context) -> str:
        return await read(ctx, name, graph_reads.stats)

    @server.resource(
        "kgot://entities/{name}/types",
        mime_type="application/json",
        description="The node and edge types of an entity.",
    )
    async def entity_types(name: str, ctx: Context) -> str:
        return await read(ctx, name, graph_reads.list_types)

    @server.resource(
        "kgot://entities/{name}/nodes/{node_id}",
        mime_type="application/json",
        description="A node with its properties, provenance and edges (percent-encode the id).",
    )
    async def entity_node(name: str, node_id: str, ctx: Context) -> str:
        return await read(ctx, name, lambda s: graph_reads.get_node(s, node_id))


def _instant(text: str | None) -> Any:
    if text is None:
        return None
    from kgot.memory import parse_instant

    moment = parse_instant(text)
    if moment is None:
        raise ToolError(f"as_of must be an ISO date or date-time such as 2026-03-01, not {text!r}")
    return moment
