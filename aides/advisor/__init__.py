"""The investment advisor: the ``advisor`` aide program (issue 17; docs/advisor.md).

Market knowledge lives in the aide's entity graph, in the advisor's seed types (Asset, Company,
Sector, AssetClass, Institution, MarketEvent, News, Insight and their edges). Users live in
tables beside it (``kgot_advisor_*``), never in the graph, a sandbox job or any prompt except
their own briefing and ask steps. Each cycle re-checks old insights, asks the graph whether
there is a briefing-worthy insight, evaluates the alert rules for each user and writes each
user a briefing whose every statement cites the evidence.

The public API (each name is imported on first use):

* users and holdings: :func:`add_user`, :func:`users`, :func:`import_positions`,
  :func:`add_position`, :func:`positions`, :func:`watch`, :func:`add_user_output`; the
  corrections :func:`update_user`, :func:`remove_positions`, :func:`unwatch`,
  :func:`remove_user` (:func:`user_rows`: what it would remove);
* what users read, as JSON-ready data (the MCP server's ``briefing`` and ``alerts`` tools call
  these): :func:`briefing` (``briefing(store, aide, user, budget=None)`` → a dict) and
  :func:`alerts` (``alerts(store, aide, user, since=None)`` → ``{"user", "alerts"}``); typed:
  :func:`get_briefing` (a :class:`Briefing`), :func:`user_alerts` (:class:`StoredAlert` s),
  :func:`ack_alert`, :func:`ask`, and the ``*_async`` variants;
* prices: :func:`set_market_data`, :func:`quotes`, :func:`history`
  (:mod:`kgot.aides.advisor.market_data`);
* the KGoT agent's tools on the advisor's entity: :func:`agent_tools` (``market_data``), the
  advisor's entity tool provider, which the controller asks for every run on an entity;
* how kgot finds the advisor: four entry points in kgot's ``pyproject.toml`` (the entity tool
  provider, the aide program :mod:`~kgot.aides.advisor.program`, the `kgot aide` commands in
  :mod:`~kgot.aides.advisor.cli` and the MCP tools in :mod:`~kgot.aides.advisor.mcp`);
  nothing outside this package names it (docs/architecture.md, "Extension points");
* the parts: :func:`install_types`, :func:`build_pack`, :func:`check_citations`,
  :func:`evaluate_alerts`.

``aide`` is the aide's name, the name of the entity one advisor aide is bound to, or the
aide's :class:`kgot.aides.aide_rows.AideRow`; ``user`` the user's name. An unknown one raises
:class:`kgot.errors.UsageError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.aides.advisor.advisor_rows import (
        Portfolio,
        Position,
        StoredAlert,
        StoredBriefing,
        User,
    )
    from kgot.aides.advisor.agent import agent_tools
    from kgot.aides.advisor.alerts import Alert
    from kgot.aides.advisor.alerts import evaluate as evaluate_alerts
    from kgot.aides.advisor.api import (
        Answer,
        Briefing,
        ack_alert,
        add_position,
        add_user,
        add_user_output,
        alerts,
        ask,
        ask_async,
        briefing,
        briefing_async,
        get_briefing,
        get_briefing_async,
        history,
        import_positions,
        parse_since,
        positions,
        quotes,
        remove_positions,
        remove_user,
        set_market_data,
        unwatch,
        update_user,
        user_alerts,
        user_rows,
        users,
        watch,
    )
    from kgot.aides.advisor.evidence import EvidencePack, MarketIndex, build_pack
    from kgot.aides.advisor.types import install_types
    from kgot.aides.advisor.writing import check_citations

_HOMES = {
    "Alert": ("alerts", "Alert"),
    "evaluate_alerts": ("alerts", "evaluate"),
    "EvidencePack": ("evidence", "EvidencePack"),
    "MarketIndex": ("evidence", "MarketIndex"),
    "build_pack": ("evidence", "build_pack"),
    "Portfolio": ("records", "Portfolio"),
    "Position": ("records", "Position"),
    "StoredAlert": ("records", "StoredAlert"),
    "StoredBriefing": ("records", "StoredBriefing"),
    "User": ("records", "User"),
    "install_types": ("types", "install_types"),
    "check_citations": ("writing", "check_citations"),
    "agent_tools": ("agent", "agent_tools"),
    **{
        name: ("api", name)
        for name in (
            "Answer",
            "Briefing",
            "ack_alert",
            "add_position",
            "add_user",
            "add_user_output",
            "alerts",
            "ask",
            "ask_async",
            "briefing",
            "briefing_async",
            "get_briefing",
            "get_briefing_async",
            "history",
            "import_positions",
            "parse_since",
            "positions",
            "quotes",
            "remove_positions",
            "remove_user",
            "set_market_data",
            "unwatch",
            "update_user",
            "user_alerts",
            "user_rows",
            "users",
            "watch",
        )
    },
}

__all__ = [
    "Alert",
    "Answer",
    "Briefing",
    "EvidencePack",
    "MarketIndex",
    "Portfolio",
    "Position",
    "StoredAlert",
    "StoredBriefing",
    "User",
    "ack_alert",
    "add_position",
    "add_user",
    "add_user_output",
    "agent_tools",
    "alerts",
    "ask",
    "ask_async",
    "briefing",
    "briefing_async",
    "build_pack",
    "check_citations",
    "evaluate_alerts",
    "get_briefing",
    "get_briefing_async",
    "history",
    "import_positions",
    "install_types",
    "parse_since",
    "positions",
    "quotes",
    "remove_positions",
    "remove_user",
    "set_market_data",
    "unwatch",
    "update_user",
    "user_alerts",
    "user_rows",
    "users",
    "watch",
]


__getattr__ = lazy_exports(
    __name__, {name: f".{module}:{attribute}" for name, (module, attribute) in _HOMES.items()}
)
