"""The advisor's ``briefing`` and ``alerts`` as MCP tools, for entities that have an advisor.

The investment advisor (issue 17) is an aide program in :mod:`kgot.aides.advisor`. These two
tools exist only when that package is installed and offers the entry points below; a server
without it lists neither. On a server that has them, calling one on an entity with no aide of
program ``advisor`` says so (after the grant check: an entity outside the grant is still "no
entity").

The entry points this bridge calls, each a plain function of the advisor package that returns
JSON-ready data:

* ``briefing(store, entity, user, *, budget=None, settings=None)`` — the user's up-to-date
  briefing citing fact ids (the newest one when its evidence pack is unchanged, else the
  planning model writes one: one writing call and its citation fixes);
* ``alerts(store, entity, user, *, since=None)`` — the user's alerts, newest first, each with
  its rule and facts (no model).

The advisor package takes an entity's name where it takes an advisor's (``kgot.aides.advisor``
finds the one advisor bound to it).
"""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from kgot.errors import UsageError
from kgot.mcp_server.handlers import EntityArg, in_thread
from kgot.mcp_server.models import AdvisorOut

if TYPE_CHECKING:
    from kgot.mcp_server.server import KgotMCP
    from kgot.persistence import Store

__all__ = ["ADVISOR_MODULE", "advisor_entry_points", "has_advisor", "register"]

ADVISOR_MODULE = "kgot.aides.advisor"
ADVISOR_PROGRAM = "advisor"


def advisor_entry_points() -> dict[str, Callable[..., Any]]:
    """The advisor's ``briefing`` and ``alerts`` functions that exist (none without the
    package)."""
    try:
        module = importlib.import_module(ADVISOR_MODULE)
    except ImportError:
        return {}
    found = {name: getattr(module, name, None) for name in ("briefing", "alerts")}
    return {name: function for name, function in found.items() if callable(function)}


def has_advisor(store: "Store", entity: str) -> bool:
    """Whether an aide running the advisor program is bound to ``entity``."""
    from kgot.aides.records import list_aides

    return any(a.entity == entity and a.program == ADVISOR_PROGRAM for a in list_aides(store))


def register(server: MCPServer, app: "KgotMCP") -> list[str]:
    """Add the advisor tools the advisor package offers; their names."""
    entry_points = advisor_entry_points()
    for name, function in entry_points.items():
        _add_tool(server, app, name, function)
    return sorted(entry_points)


def _add_tool(server: MCPServer, app: "KgotMCP", name: str, function: Callable[..., Any]) -> None:
    tenancy = app.tenancy

    def call(grant: Any, entity: str | None, user: str, options: Mapping[str, Any]) -> AdvisorOut:
        session = tenancy.session(grant, entity)
        if not has_advisor(tenancy.store, session.entity):
            raise UsageError(
                f"entity {session.entity!r} has no advisor; create one with `kgot aide create "
                f"NAME --entity {session.entity} --program advisor`"
            )
        result = function(tenancy.store, session.entity, user, **options)
        return AdvisorOut(entity=session.entity, user=user, result=dict(result))

    if name == "briefing":

        async def briefing(
            user: Annotated[str, Field(description="The advisor's user, e.g. alice.")],
            ctx: Context,
            entity: EntityArg = None,
            budget: Annotated[int | None, Field(gt=0, description="Token budget.")] = None,
        ) -> AdvisorOut:
            """The user's latest briefing from the entity's advisor, citing fact ids."""
            grant = app.allowed(ctx, "read", "briefing")
            options = {"budget": budget, "settings": app.settings}
            return await in_thread(lambda: call(grant, entity, user, options))

        server.add_tool(briefing, name="briefing")
    else:

        async def alerts(
            user: Annotated[str, Field(description="The advisor's user, e.g. alice.")],
            ctx: Context,
            entity: EntityArg = None,
            since: Annotated[
                str | None, Field(description="Only alerts after this, e.g. 2d or an ISO date.")
            ] = None,
        ) -> AdvisorOut:
            """The user's alerts from the entity's advisor, each with its rule and facts."""
            grant = app.allowed(ctx, "read", "alerts")
            return await in_thread(lambda: call(grant, entity, user, {"since": since}))

        server.add_tool(alerts, name="alerts")
