"""The ``advisor`` program: what an advisor aide does each cycle after ingesting and upkeep.

1. **Users.** Each user's holdings and watchlist are read from the tables.
2. **Prices.** The provider's daily bars of every followed symbol go into the price cache.
3. **Re-check.** Current insights whose basis a newer fact contradicts are closed
   (:func:`kgot.aides.advisor.insights.recheck`), once per graph version.
4. **Insight pass** (:func:`kgot.aides.advisor.insights.run_pass`), once per graph version:
   KGoT's RETRIEVE with the question "is there a briefing-worthy insight?" (a read query in
   the sandbox, :meth:`kgot.controller.ingest.Ingestor.retrieve`), then a structured answer
   over an evidence pack of the symbols users follow (symbols only: no user data) and what
   the query found.
5. **Alerts** (:mod:`kgot.aides.advisor.alerts`) for each user; new ones are recorded (their
   keys are unique per user).
6. **Briefings** for each user whose evidence pack changed since their last briefing.
7. **Delivery** of new briefings and alerts (and ones an output has not accepted yet) to the
   aide's outputs: an output added for one user (``kgot aide user output``) gets only that
   user's, other outputs get every user's. Delivery keys: ``aide <id>/briefing <id>`` and
   ``aide <id>/alert <id>``; the delivery log sends each once.

A cycle in which nothing changed (graph version, prices, holdings) reads the tables and the
cache, finds nothing to do and makes no model call. Model calls stop when the cycle's or the
day's cost budget is reached (``kgot aide run --max-cost-usd``); what was not written waits.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kgot.aides.advisor import advisor_rows
from kgot.aides.advisor.evidence import DEFAULT_BUDGET, MarketIndex, build_pack, fact_strength

if TYPE_CHECKING:
    from kgot.aides.advisor.advisor_rows import Portfolio
    from kgot.aides.advisor.market_data import Quote
    from kgot.aides.aide_rows import AideRow
    from kgot.aides.runtime import Aide, CycleReport
    from kgot.persistence import Store

log = logging.getLogger("kgot.aides")

INSIGHT_BUDGET = 3000  # tokens of evidence the insight pass looks at
RETRIEVE_CALLS = 3  # model calls of the insight pass's read query (writing and fixing it)
REDELIVER = 50  # newest briefings and alerts looked at for (re)delivery
BRIEFING_TRIES = 3  # cycles that try a user's briefing on one evidence pack before giving up
STATE = "advisor_state"  # the aide settings key of what the last cycle saw


def on_create(store: Store, aide: AideRow) -> None:
    """Install the advisor's types into the aide's entity (``kgot aide create``)."""
    from kgot.aides.advisor.types import install_types

    install_types(store, aide.entity)


def check_ready(store: Store, aide: AideRow) -> None:
    """Refuse to run when a setting cannot work here (``kgot aide run``, each cycle): a price
    provider whose package is missing."""
    from kgot.aides.advisor.market_data import require_provider

    require_provider(store, aide)


@dataclass
class AdvisorCycle:
    """What the program did in one cycle (``CycleReport.program``)."""

    users: int = 0
    skipped: str | None = None
    prices: list[str] = field(default_factory=list)  # provider problems
    recheck: dict[str, Any] | None = None
    insights: dict[str, Any] | None = None
    alerts: int = 0
    briefings: list[int] = field(default_factory=list)
    unchanged: int = 0  # users whose pack had not changed
    failures: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)  # users whose briefing waits for news
    stopped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "program": "advisor",
            "users": self.users,
            "skipped": self.skipped,
            "prices": self.prices,
            "recheck": self.recheck,
            "insights": self.insights,
            "alerts": self.alerts,
            "briefings": self.briefings,
            "unchanged": self.unchanged,
            "failures": self.failures,
            "given_up": self.given_up,
            "stopped": self.stopped,
        }


class _Models:
    """The planning model, built on first use (a cycle with nothing to write needs none),
    and the usage of every model call the program made (its own and its retrieve's)."""

    def __init__(self, aide: Aide) -> None:
        self.aide = aide
        self._planning: Any = None
        self.ledgers: list[Any] = []

    @property
    def planning(self) -> Any:
        if self._planning is None:
            from kgot.llm import UsageLedger, build_llm_clients

            ledger = UsageLedger()
            self.track(ledger)
            roles = build_llm_clients(self.aide.settings, ledger, models=self.aide.models)
            self._planning = roles.planning
        return self._planning

    def track(self, ledger: Any) -> None:
        """Count ``ledger``'s calls as the program's, each written to the cycle's spend as it
        is made (a cycle killed mid-briefing still shows what it cost)."""
        self.ledgers.append(ledger)
        if self.aide.on_model_call is not None:
            ledger.subscribe(self.aide.on_model_call)

    def spent(self) -> float:
        return sum(float(ledger.totals().cost_usd or 0.0) for ledger in self.ledgers)

    def add_to(self, report: CycleReport) -> None:
        for ledger in self.ledgers:
            totals = ledger.totals()
            report.llm_calls += totals.calls
            report.input_tokens += totals.input_tokens
            report.output_tokens += totals.output_tokens
            if report.cost_usd is not None:
                report.cost_usd = (
                    None if totals.cost_usd is None else report.cost_usd + totals.cost_usd
                )


async def run_cycle(
    aide: Aide,
    report: CycleReport,
    now: datetime,
    exceeded: Callable[[float], str | None] = lambda _spent: None,
) -> AdvisorCycle:
    """Steps 1-7 of the module docstring; ``exceeded(spent)`` says why no more model calls
    may be made (the cycle's budgets), given what this program has spent."""
    cycle = _Cycle(aide, report, now, exceeded)
    try:
        if cycle.people:
            await asyncio.to_thread(cycle.refresh_prices)
            await cycle.think()
    finally:
        cycle.models.add_to(report)
    await _deliver(aide, report, now)
    return cycle.done


def _symbols(people: Sequence[Portfolio]) -> list[str]:
    """Every symbol some user holds or watches (no user attached)."""
    return sorted({s for p in people for s in (*p.held, *p.watchlist)})


def _world(version: int, quotes: dict[str, Quote], people: Sequence[Portfolio]) -> str:
    """A hash of what the alerts and briefings depend on (never stored in clear)."""
    data = {
        "version": version,
        "quotes": {s: q.to_json() for s, q in sorted(quotes.items())},
        "people": [
            [
                p.user.id,
                p.user.risk,
                sorted(p.user.thresholds.items()),
                list(p.held),
                list(p.watched),
            ]
            for p in people
        ],
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class _Cycle:
    """One cycle of the program: its users, graph, state and spending."""

    def __init__(
        self,
        aide: Aide,
        report: CycleReport,
        now: datetime,
        exceeded: Callable[[float], str | None],
    ) -> None:
        self.aide = aide
        self.store = aide.store
        self.row = aide.row
        self.report = report
        self.now = now
        self.exceeded = exceeded
        self.done = AdvisorCycle()
        self.models = _Models(aide)
        self.base_cost = float(report.cost_usd or 0.0)
        self.people = advisor_rows.portfolios(self.store, self.row)
        self.done.users = len(self.people)
        self.symbols = _symbols(self.people)
        self.session = self.store.session(aide.entity)
        self.run_id = f"aide {aide.name}/cycle {report.cycle_id}"
        self.graph: Any = None
        self.version = 0

    def over(self) -> str | None:
        """Why no more model calls may be made now, or ``None``."""
        return self.exceeded(self.base_cost + self.models.spent())

    def refresh_prices(self) -> None:
        from kgot.aides.advisor.market_data import MarketData

        self.done.prices = MarketData.of(self.store, self.row).refresh(self.symbols, self.now)
        for problem in self.done.prices:
            log.warning("%s: prices: %s", self.aide.name, problem)

    async def load(self) -> None:
        self.graph = await asyncio.to_thread(
            self.session.load_graph, include_meta=True, track=False
        )
        self.version = int(self.graph.graph.get("kgot_version", self.version))

    async def think(self) -> None:
        """Re-check, insight pass, alerts and briefings (steps 3-6), unless nothing changed."""
        from kgot.aides.advisor.market_data import MarketData

        quotes = MarketData.of(self.store, self.row).quotes(self.symbols)
        state = dict(advisor_rows.aide_settings(self.store, self.row).get(STATE) or {})
        self.version = self.session.version
        world = _world(self.version, quotes, self.people)
        if state.get("world") == world and state.get("insight_version") == self.version:
            self.done.skipped = "nothing changed since the last cycle"
            return
        await self.load()
        if state.get("checked_version") != self.version:
            await self.recheck()
            state["checked_version"] = self.version
        if state.get("insight_version") != self.version:
            reason = self.over()
            if reason is not None:
                self.done.stopped = reason
            else:
                if await self.insight_pass(quotes):
                    state["checked_version"] = self.version  # its basis was verified just now
                state["insight_version"] = self.version
        index = MarketIndex(
            self.graph,
            self.session.type_catalog(),
            now=self.now,
            strength=fact_strength(self.session),
        )
        self.alerts(index, quotes)
        await self.briefings(index, quotes, state)
        if self.done.stopped is None and not self.done.failures:
            state["world"] = _world(self.version, quotes, self.people)
        advisor_rows.update_settings(self.store, self.row, {STATE: state})

    async def recheck(self) -> None:
        from kgot.aides.advisor.insights import recheck

        checked = await asyncio.to_thread(
            recheck, self.session, self.graph, now=self.now, run_id=self.run_id
        )
        self.done.recheck = checked.to_json()
        for insight, why in checked.closed.items():
            log.info("%s: insight %s closed: %s", self.aide.name, insight, why)
        if checked.closed:
            await self.load()

    async def insight_pass(self, quotes: dict[str, Quote]) -> bool:
        """Ask the graph for insights about the followed symbols it knows: KGoT's RETRIEVE
        (a read query written by the model, run in the sandbox) with the insight question,
        then the structured answer over the pack and what the query found; whether any
        insight was written."""
        from kgot.aides.advisor.insights import insight_question, run_pass
        from kgot.controller import Ingestor
        from kgot.errors import ModelError, SandboxUnavailableError

        index = MarketIndex(self.graph, self.session.type_catalog(), now=self.now)
        focus = [s for s in self.symbols if index.known(s)]
        if not focus:
            return False
        async with Ingestor(
            self.store,
            self.aide.entity,
            self.aide.settings,
            models=self.aide.models,
            run_id=f"{self.run_id}/insights",
        ) as ingestor:
            self.models.track(ingestor.ledger)
            retrieved = None
            try:
                retrieved = await ingestor.retrieve(
                    insight_question(focus), focus=focus, max_calls=RETRIEVE_CALLS
                )
            except (ModelError, SandboxUnavailableError) as error:
                log.warning("%s: the insight retrieve failed: %s", self.aide.name, error)
            named = [("node", n) for n in (retrieved.nodes or [])] if retrieved else []
            pack = build_pack(index, focus, budget=INSIGHT_BUDGET, quotes=quotes, extra=named)
            made = await run_pass(
                ingestor.planning,
                self.session,
                self.graph,
                pack,
                now=self.now,
                run_id=self.run_id,
                result_key=f"aide {self.row.id}/insights at version {self.version}",
                retrieved=retrieved.text if retrieved is not None else None,
            )
        self.done.insights = made.to_json()
        for why in made.rejected:
            log.info("%s: insight left out: %s", self.aide.name, why)
        if made.written:
            await self.load()
        return bool(made.written)

    def alerts(self, index: MarketIndex, quotes: dict[str, Quote]) -> None:
        from kgot.aides.advisor.alerts import AlertIndex, evaluate

        alert_index = AlertIndex(index)
        known = advisor_rows.alert_keys(self.store, self.row)
        for portfolio in self.people:
            found = evaluate(
                alert_index,
                portfolio,
                now=self.now,
                quotes=quotes,
                known=known.get(portfolio.user.id, set()),
            )
            made = advisor_rows.record_alerts(
                self.store,
                self.row,
                portfolio.user,
                found,
                cycle_id=self.report.cycle_id,
                now=self.now,
            )
            self.done.alerts += len(made)
            for alert in made:
                log.info(
                    "%s: alert %s for %s: %s", self.aide.name, alert.id, alert.user, alert.rule
                )

    async def briefings(
        self, index: MarketIndex, quotes: dict[str, Quote], state: dict[str, Any]
    ) -> None:
        """A briefing for each user whose pack changed. A model whose drafts never cite the
        pack properly (``WritingFailed``) is given :data:`BRIEFING_TRIES` cycles on one pack;
        then the user's briefing waits until their evidence changes (``state["failed"]``:
        user id -> [pack key, tries]), so a cycle on a schedule does not pay for the same
        failure for ever. A model endpoint that fails is retried every cycle."""
        settings = advisor_rows.aide_settings(self.store, self.row)
        budget = int(settings.get("briefing_budget") or DEFAULT_BUDGET)
        failed: dict[str, list[Any]] = dict(state.get("failed") or {})
        try:
            await self._brief_each(index, quotes, budget, failed)
        finally:
            current = {str(p.user.id) for p in self.people}
            state["failed"] = {k: v for k, v in failed.items() if k in current}

    async def _brief_each(
        self,
        index: MarketIndex,
        quotes: dict[str, Quote],
        budget: int,
        failed: dict[str, list[Any]],
    ) -> None:
        from kgot.aides.advisor.api import latest_briefing, write_briefing
        from kgot.aides.advisor.writing import WritingFailed
        from kgot.errors import ModelError

        for portfolio in self.people:
            if not portfolio.held and not portfolio.watched:
                continue
            pack = build_pack(
                index, portfolio.held, portfolio.watched, budget=budget, quotes=quotes
            )
            if not pack.items or latest_briefing(
                self.store, self.row, portfolio.user, pack.key, budget
            ):
                self.done.unchanged += 1
                continue
            who, key = portfolio.user.name, str(portfolio.user.id)
            tried = failed.get(key)
            tries = int(tried[1]) if tried and tried[0] == pack.key else 0
            if tries >= BRIEFING_TRIES:
                self.done.given_up.append(who)
                continue
            reason = self.over()
            if reason is not None:
                self.done.stopped = reason
                return
            try:
                made = await write_briefing(
                    self.models.planning,
                    self.store,
                    self.row,
                    portfolio,
                    pack,
                    now=self.now,
                    cycle_id=self.report.cycle_id,
                )
            except (WritingFailed, ModelError) as error:
                self.done.failures.append(f"briefing for {who}: {error}")
                log.warning("%s: briefing for %s failed: %s", self.aide.name, who, error)
                if isinstance(error, WritingFailed):
                    failed[key] = [pack.key, tries + 1]
                    if tries + 1 >= BRIEFING_TRIES:
                        log.warning(
                            "%s: briefing for %s failed in %d cycles on this evidence; it "
                            "waits until the evidence changes",
                            self.aide.name,
                            who,
                            tries + 1,
                        )
                continue
            failed.pop(key, None)
            self.done.briefings.append(made.id)
            log.info("%s: briefing %s for %s", self.aide.name, made.id, portfolio.user.name)


# ---------------------------------------------------------------------------- delivery


def briefing_payload(aide: AideRow, briefing: advisor_rows.StoredBriefing) -> dict[str, Any]:
    day = briefing.created_at.date().isoformat() if briefing.created_at else ""
    return {
        "kind": "briefing",
        "aide": aide.name,
        "entity": aide.entity,
        "user": briefing.user,
        "briefing": briefing.id,
        "at": briefing.created_at.isoformat() if briefing.created_at else None,
        "subject": f"Briefing for {briefing.user} {day}".strip(),
        "text": briefing.text,
        "facts": list(briefing.facts),
    }


def alert_payload(aide: AideRow, alert: advisor_rows.StoredAlert) -> dict[str, Any]:
    return {
        "kind": "alert",
        "aide": aide.name,
        "entity": aide.entity,
        "user": alert.user,
        "alert": alert.id,
        "at": alert.created_at.isoformat() if alert.created_at else None,
        "rule": alert.rule,
        "severity": alert.severity,
        "subject": f"[{alert.severity}] {alert.rule} for {alert.user}",
        "text": alert.message,
        "facts": list(alert.facts),
    }


async def _deliver(aide: Aide, report: CycleReport, now: datetime) -> None:
    """Send new briefings and alerts, and recent ones an output has not accepted yet, to each
    output made before them (a user's output: that user's only)."""
    from kgot.aides import aide_rows
    from kgot.aides.outputs import deliver_once
    from kgot.persistence import as_utc

    store, row = aide.store, aide.row
    outputs = aide_rows.outputs(store, row)
    if not outputs:
        return
    pending: list[tuple[str, str, datetime | None, dict[str, Any]]] = []
    for briefing in reversed(advisor_rows.briefings(store, row, limit=REDELIVER)):
        pending.append(
            (
                f"aide {row.id}/briefing {briefing.id}",
                briefing.user,
                briefing.created_at,
                briefing_payload(row, briefing),
            )
        )
    for alert in reversed(advisor_rows.alerts(store, row, limit=REDELIVER)):
        pending.append(
            (
                f"aide {row.id}/alert {alert.id}",
                alert.user,
                alert.created_at,
                alert_payload(row, alert),
            )
        )
    for output in outputs:
        added = as_utc(output.created_at)
        for_user = dict(output.spec).get("user")
        for key, user, made_at, payload in pending:
            if for_user is not None and for_user != user:
                continue  # another user's output never sees this user's data
            if added is not None and made_at is not None and made_at < added:
                continue
            spec = {k: v for k, v in dict(output.spec).items() if k != "user"}
            result = await deliver_once(
                store,
                row,
                output,
                key,
                payload,
                cycle_id=report.cycle_id,
                now=now,
                settings=aide.settings,
                spec=spec,
            )
            if result is None:
                continue  # delivered, or given up on, before
            report.deliveries.append(
                {
                    "output": output.id,
                    "kind": output.kind,
                    "delivery": key,
                    "ok": result.ok,
                    "error": result.error,
                }
            )
            if not result.ok:
                log.warning("%s: output %s failed: %s", aide.name, output.id, result.error)
