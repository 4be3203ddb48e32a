"""The advisor's ``briefing`` and ``alerts`` as MCP tools, for entities that have an advisor.

The investment advisor (issue 17) is an aide program in :mod:`kgot.aides.advisor`. These two
tools exist only when that package is installed and offers the entry points below; a server
without it lists neither. On a server that has them, calling one on an entity with no aide of
program ``advisor`` says so (after the grant check: an entity outside the grant is still "no
entity").

The advisor is found by the entity it is bound to, among the aides bound to the client's entity
only, and handed to the advisor package as its row: never by name, since an aide's name is
free and may be another entity's name (an aide named ``acme`` working on entity ``beta`` must
not answer a client of ``acme``). An entity with several advisors needs the ``advisor``
argument, which chooses among that entity's own.

The entry points this bridge calls, each a plain function of the advisor package that returns
JSON-ready data:

* ``briefing(store, aide, user, *, budget=None, settings=None)`` — the user's up-to-date
  briefing citing fact ids (the newest one when its evidence pack is unchanged, else the
  planning model writes one: a draft and at most ``MAX_FIXES`` fixes);
* ``alerts(store, aide, user, *, since=None)`` — the user's alerts, newest first, each with
  its rule and facts (no model).

``ask`` on an entity with an advisor also offers the run the advisor's ``market_data`` tool
(``agent_tools(store, entity)``, :func:`advisor_agent_tools`): quotes and daily bars from that
advisor's price cache.

A briefing may call the model, so it has a cost cap like ``ask``: before it starts, its worst
case (every draft, each over the whole evidence budget, the drafts before it and a long reply,
at the planning model's price) must fit the server's ``--ask-max-cost-usd`` (or the call's
lower ``max_cost_usd``), and its drafts ``--ask-max-llm-calls``. A model without a known price
is bounded by the number of drafts only.
"""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from kgot.errors import UsageError
from kgot.mcp_server.handlers import MAX_NAME_CHARS, EntityArg, in_thread
from kgot.mcp_server.models import AdvisorOut
from kgot.mcp_server.tooling import READ, WRITE, ToolSet

if TYPE_CHECKING:
    from kgot.aides.records import AideRow
    from kgot.config import Settings
    from kgot.mcp_server.server import KgotMCP
    from kgot.persistence import Store

__all__ = [
    "ADVISOR_MODULE",
    "advisor_agent_tools",
    "advisor_entry_points",
    "advisor_of",
    "briefing_cost_bound",
    "register",
]

ADVISOR_MODULE = "kgot.aides.advisor"
ADVISOR_PROGRAM = "advisor"
# A briefing's worst case (briefing_cost_bound): the instructions and the user's profile, a
# reply when the model has no max_tokens, the note sent back with a draft that needs a fix.
_PROMPT_TOKENS = 1_500
_REPLY_TOKENS = 2_000
_FIX_TOKENS = 500

AdvisorArg = Annotated[
    str | None,
    Field(
        max_length=MAX_NAME_CHARS,
        description="The advisor's name, when the entity has more than one.",
    ),
]
UserArg = Annotated[
    str, Field(max_length=MAX_NAME_CHARS, description="The advisor's user, e.g. alice.")
]


def advisor_entry_points() -> dict[str, Callable[..., Any]]:
    """The advisor's ``briefing`` and ``alerts`` functions that exist (none without the
    package)."""
    try:
        module = importlib.import_module(ADVISOR_MODULE)
    except ImportError:
        return {}
    found = {name: getattr(module, name, None) for name in ("briefing", "alerts")}
    return {name: function for name, function in found.items() if callable(function)}


def advisor_agent_tools(store: "Store", entity: str) -> list[Any]:
    """The tools the advisor package gives a KGoT run on ``entity`` (``market_data`` when
    the entity has an advisor with a price provider; none without the package)."""
    try:
        module = importlib.import_module(ADVISOR_MODULE)
    except ImportError:
        return []
    build = getattr(module, "agent_tools", None)
    return list(build(store, entity)) if callable(build) else []


def advisor_of(store: "Store", entity: str, name: str | None = None) -> "AideRow":
    """The advisor aide bound to ``entity`` (the one named ``name`` among them, if given).

    Raises:
        UsageError: the entity has none, none of that name, or several and no name.
    """
    from kgot.aides.records import list_aides

    bound = [a for a in list_aides(store) if a.entity == entity and a.program == ADVISOR_PROGRAM]
    if not bound:
        raise UsageError(
            f"entity {entity!r} has no advisor; create one with `kgot aide create NAME --entity "
            f"{entity} --program advisor`"
        )
    names = ", ".join(a.name for a in bound)
    if name is not None:
        bound = [a for a in bound if a.name == name]
        if not bound:
            raise UsageError(
                f"entity {entity!r} has no advisor named {name!r}; its advisors: {names}"
            )
    if len(bound) > 1:
        raise UsageError(
            f"entity {entity!r} has {len(bound)} advisors ({names}); name one with the advisor "
            "argument"
        )
    return bound[0]


def briefing_cost_bound(settings: "Settings", budget: int | None) -> tuple[int, float | None]:
    """The most model requests a briefing makes and what they may cost at most in USD
    (``None``: the planning model's price is unknown)."""
    from kgot.aides.advisor.evidence import DEFAULT_BUDGET
    from kgot.aides.advisor.writing import MAX_FIXES
    from kgot.llm.prices import PriceTable

    drafts = MAX_FIXES + 1
    model = settings.llm.planning.model
    price = PriceTable(settings.llm.prices).price_for(model) if model else None
    if price is None:
        return drafts, None
    reply = settings.llm.planning.max_tokens or _REPLY_TOKENS
    evidence = (budget or DEFAULT_BUDGET) + _PROMPT_TOKENS
    cost = 0.0
    for before in range(drafts):  # each draft reads the evidence and every draft before it
        read = evidence + before * (reply + _FIX_TOKENS)
        cost += (read * price.input + reply * price.output) / 1_000_000
    return drafts, cost


def register(tools: ToolSet, app: "KgotMCP") -> list[str]:
    """Add the advisor tools the advisor package offers; their names."""
    entry_points = advisor_entry_points()
    for name, function in entry_points.items():
        _add_tool(tools, app, name, function)
    return sorted(entry_points)


def _add_tool(tools: ToolSet, app: "KgotMCP", name: str, function: Callable[..., Any]) -> None:
    tenancy = app.tenancy

    def call(
        grant: Any,
        entity: str | None,
        advisor: str | None,
        user: str,
        options: Mapping[str, Any],
        *,
        check: Callable[[], None] = lambda: None,
    ) -> AdvisorOut:
        session = tenancy.session(grant, entity)
        row = advisor_of(tenancy.store, session.entity, advisor)
        check()
        result = function(tenancy.store, row, user, **options)
        return AdvisorOut(entity=session.entity, user=user, result=dict(result))

    if name == "briefing":

        async def briefing(  # noqa: PLR0917 - a tool's parameters are its input schema
            user: UserArg,
            ctx: Context,
            entity: EntityArg = None,
            advisor: AdvisorArg = None,
            budget: Annotated[
                int | None, Field(gt=0, description="Token budget of the evidence (default 1500).")
            ] = None,
            max_cost_usd: Annotated[
                float | None,
                Field(
                    gt=0,
                    description="Refuse a briefing that could cost more (at most the "
                    "server's cap).",
                ),
            ] = None,
        ) -> AdvisorOut:
            """The user's up-to-date briefing from the entity's advisor, citing fact ids: the
            newest one when its evidence is unchanged, else the model writes one (within the
            cost cap)."""
            grant = app.allowed(ctx, "read", "briefing")
            options = {"budget": budget, "settings": app.settings}

            def affordable() -> None:
                _check_briefing_cost(app, budget, max_cost_usd)

            return await in_thread(
                lambda: call(grant, entity, advisor, user, options, check=affordable)
            )

        # a briefing may be written (and kept) by the model: not read-only, nothing destroyed
        tools.add(briefing, name="briefing", scope="read", title="Briefing", annotations=WRITE)
    else:

        async def alerts(
            user: UserArg,
            ctx: Context,
            entity: EntityArg = None,
            advisor: AdvisorArg = None,
            since: Annotated[
                str | None,
                Field(max_length=64, description="Only alerts after this, e.g. 2d or an ISO date."),
            ] = None,
        ) -> AdvisorOut:
            """The user's alerts from the entity's advisor, each with its rule and facts."""
            grant = app.allowed(ctx, "read", "alerts")
            return await in_thread(lambda: call(grant, entity, advisor, user, {"since": since}))

        tools.add(alerts, name="alerts", scope="read", title="Alerts", annotations=READ)


def _check_briefing_cost(app: "KgotMCP", budget: int | None, max_cost_usd: float | None) -> None:
    """Refuse a briefing whose worst case is above the caps (module docstring)."""
    limits = app.limits
    cap = min(max_cost_usd, limits.max_cost_usd) if max_cost_usd else limits.max_cost_usd
    drafts, cost = briefing_cost_bound(app.settings, budget)
    if drafts > limits.max_llm_calls:
        raise UsageError(
            f"a briefing may take {drafts} model requests, above this server's cap of "
            f"{limits.max_llm_calls} (--ask-max-llm-calls)"
        )
    if cost is not None and cost > cap:
        raise UsageError(
            f"a briefing over a {budget or 'default'}-token evidence budget could cost up to "
            f"${cost:.4f}, above the cap of ${cap:g}; pass a smaller budget or a higher "
            "max_cost_usd (at most the server's --ask-max-cost-usd)"
        )
