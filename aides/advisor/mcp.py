"""The advisor's ``briefing`` and ``alerts`` as MCP tools, for entities that have an advisor.

`kgot mcp serve` finds this module through the ``kgot.mcp_tools`` extension point
(``advisor = "kgot.aides.advisor.mcp:register"`` in kgot's ``pyproject.toml``;
:mod:`kgot.mcp_server.extensions`), as it would a separate distribution's: the server names no
advisor. Calling one of the tools on an entity with no aide of program ``advisor`` says so
(after the grant check: an entity outside the grant is still "no entity").

The advisor is found by the entity it is bound to, among the aides bound to the client's entity
only, and handed to the advisor's API as its row: never by name, since an aide's name is free
and may be another entity's name (an aide named ``acme`` working on entity ``beta`` must not
answer a client of ``acme``). An entity with several advisors needs the ``advisor`` argument,
which chooses among that entity's own.

The tools call two plain functions of :mod:`kgot.aides.advisor.api` that return JSON-ready
data:

* ``briefing(store, aide, user, *, budget=None, settings=None)`` — the user's up-to-date
  briefing citing fact ids (the newest one when its evidence pack is unchanged, else the
  planning model writes one: a draft and at most ``MAX_FIXES`` fixes);
* ``alerts(store, aide, user, *, since=None)`` — the user's alerts, newest first, each with
  its rule and facts (no model).

``ask`` on an entity with an advisor offers the run the advisor's ``market_data`` tool through
the controller's entity tool providers (:mod:`kgot.aides.advisor.agent`), as every run on that
entity gets it.

A briefing may call the model, so it has a cost cap like ``ask``: before it starts, its worst
case (every draft, each over the whole evidence budget, the drafts before it and a long reply,
at the planning model's price) must fit the server's ``--ask-max-cost-usd`` (or the call's
lower ``max_cost_usd``), and its drafts ``--ask-max-llm-calls``. A model without a known price
is bounded by the number of drafts only.

This module sits in the advisor's package but uses the MCP server's helpers, as any package
extending the server would; the layers contract allows exactly that (docs/architecture.md).
"""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from kgot.errors import UsageError
from kgot.mcp_server import MAX_NAME_CHARS, READ, WRITE, EntityArg, JsonValue, ToolSet, in_thread

if TYPE_CHECKING:
    from kgot.aides.aide_rows import AideRow
    from kgot.config import Settings
    from kgot.mcp_server import KgotMCP
    from kgot.persistence import Store

__all__ = ["AdvisorOut", "advisor_of", "briefing_cost_bound", "register"]

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


class AdvisorOut(BaseModel):
    """What ``briefing`` and ``alerts`` return: the advisor's JSON-ready answer for a user."""

    entity: str
    user: str
    result: dict[str, JsonValue]


def advisor_of(store: "Store", entity: str, name: str | None = None) -> "AideRow":
    """The advisor aide bound to ``entity`` (the one named ``name`` among them, if given).

    Raises:
        UsageError: the entity has none, none of that name, or several and no name.
    """
    from kgot.aides.advisor.advisor_rows import PROGRAM
    from kgot.aides.aide_rows import list_aides

    bound = [a for a in list_aides(store) if a.entity == entity and a.program == PROGRAM]
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
    from kgot.llm import PriceTable

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
    """Add ``briefing`` and ``alerts`` to the server's tools (the ``kgot.mcp_tools`` entry
    point); their names."""
    from kgot.aides.advisor.api import alerts, briefing

    _add_tool(tools, app, "briefing", briefing)
    _add_tool(tools, app, "alerts", alerts)
    return ["alerts", "briefing"]


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
