"""An aide's cycle: poll, ingest, upkeep, program, deliver (docs/aides.md).

:func:`open_aide` gives an :class:`Aide`; :meth:`Aide.run_cycle` runs one cycle and returns its
:class:`CycleReport`. Every step's state is in the store (:mod:`kgot.aides.aide_rows`), not in
memory, so a cycle that is killed is finished by the next one:

1. **Poll** each source (:mod:`kgot.aides.sources`); its new items and cursor are recorded in
   one transaction. A failing source is reported and polled again next cycle; the others go on.
2. **Ingest** each pending item (new, or failed with attempts left), oldest first: claim it
   (on PostgreSQL with ``FOR UPDATE SKIP LOCKED``, so several workers share an aide),
   ingest its text through the controller's INSERT path (:class:`kgot.controller.ingest.
   Ingestor`) with the result key ``aide <id>/item <id>``, renewing the claim's lease every
   third of it meanwhile, and mark it done with the commit's version. An item whose commit
   landed before a crash is found by that key when it is claimed again, and is marked done
   without a second ingestion.
3. **Upkeep**: the memory's upkeep pass on the entity (expiry, pruning, promotion, merges),
   after a cycle that ingested something, else at most once per :data:`aide_rows.UPKEEP_EVERY`
   (a pass reads the whole graph: seconds at 10,000 nodes).
4. **Program**: ``digest`` briefs on the facts this cycle changed, a KGoT retrieve over them
   (:mod:`kgot.aides.programs`).
5. **Deliver** the digest to each output (:mod:`kgot.aides.outputs`), once per output and
   cycle: the delivery log's key is unique per output.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kgot.aides import aide_rows
from kgot.errors import (
    ConfigError,
    KgotError,
    ModelError,
    SandboxUnavailableError,
    StoreError,
)
from kgot.persistence import as_utc

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.aides.aide_rows import AideRow
    from kgot.config import Settings
    from kgot.controller import IngestReport, RecordedRun
    from kgot.persistence import Store

log = logging.getLogger("kgot.aides")


@dataclass
class ItemOutcome:
    """What became of one item in a cycle."""

    item_id: str
    title: str
    source_ref: str | None
    status: str  # done | failed | lost (its lease went to another worker, which records it)
    version: int | None = None
    reason: str | None = None
    summary: str = ""
    attempts: int = 0


@dataclass
class CycleReport:
    """One cycle of an aide: what it read, ingested, spent and delivered, and why it stopped.

    ``cost_usd`` is ``None`` when a model's price is unknown; ``stop_reason`` says why the
    cycle ended before its pending items did (a budget, a signal), else ``None``.
    """

    aide: str
    entity: str
    cycle_id: int
    started_at: datetime
    finished_at: datetime | None = None
    duration_s: float = 0.0
    sources: int = 0
    new_items: int = 0
    reclaimed: int = 0
    source_errors: list[str] = field(default_factory=list)
    items: list[ItemOutcome] = field(default_factory=list)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    upkeep: str | None = None
    digest: dict[str, Any] | None = None
    program: dict[str, Any] | None = None  # what a program other than digest did
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    backlog: int = 0  # items still pending after the cycle

    @property
    def ingested(self) -> int:
        return sum(1 for item in self.items if item.status == "done")

    @property
    def failed(self) -> int:
        return sum(1 for item in self.items if item.status == "failed")

    @property
    def lost(self) -> int:
        return sum(1 for item in self.items if item.status == "lost")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat() if self.finished_at else None
        data["ingested"] = self.ingested
        data["failed"] = self.failed
        data["lost"] = self.lost
        return data

    def line(self) -> str:
        """One line for the log and the terminal."""
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        parts = [
            f"cycle {self.cycle_id} of {self.aide}: {self.new_items} new items",
            f"{self.ingested} ingested",
            f"{self.failed} failed",
            f"{len(self.source_errors)} source errors",
            f"{self.llm_calls} LLM calls",
            cost,
            f"{self.duration_s:.1f} s",
        ]
        if self.lost:
            parts.append(f"{self.lost} taken over by another worker")
        if self.backlog:
            parts.append(f"{self.backlog} waiting")
        if self.stop_reason:
            parts.append(f"stopped: {self.stop_reason}")
        return ", ".join(parts)


class Aide:
    """One aide, bound to its entity (see :func:`open_aide`)."""

    def __init__(
        self,
        store: Store,
        row: AideRow,
        settings: Settings,
        models: Mapping[str, BaseChatModel] | None = None,
    ) -> None:
        self.store = store
        self.row = row
        self.settings = settings
        self.models = models
        # While a cycle runs: called with each model call its ingestions and program make,
        # to write the cycle's spend as it happens (programs subscribe their ledgers to it).
        self.on_model_call: Callable[[Any], None] | None = None

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def entity(self) -> str:
        return self.row.entity

    # -------------------------------------------------------------------------- set-up

    def add_source(self, kind: str, value: str) -> int:
        """Add a source (``rss`` URL or feed file, ``dir`` folder or ``search`` query); its id.

        Raises:
            UsageError: not a URL or feed file, not a folder, an empty query, or the same
                source twice.
        """
        from kgot.aides.sources import parse_source_spec

        spec = parse_source_spec(kind, value, max_mb=self.settings.tools.max_download_mb)
        return aide_rows.add_source(self.store, self.row, kind, spec)

    def add_output(self, kind: str, value: str | None = None, **options: Any) -> int:
        """Add an output (``stdout``, ``jsonl`` path, ``webhook`` URL with ``secret_env``); its
        id.

        Raises:
            UsageError: a webhook that is not http(s), a bad path, the same output twice, a
                secret or password variable that is not set here.
        """
        from kgot.aides.outputs import parse_output_spec, require_variables

        spec = parse_output_spec(kind, value, **options)
        require_variables(spec)
        return aide_rows.add_output(self.store, self.row, kind, spec)

    def delete(self) -> None:
        """Delete the aide and what it recorded (sources, items, cycles, outputs, deliveries);
        the entity and its graph stay."""
        aide_rows.delete_aide(self.store, self.row)

    def sources(self) -> list[aide_rows.SourceInfo]:
        """The aide's sources, oldest first, each with its items counted by status."""
        return aide_rows.source_infos(self.store, self.row)

    def outputs(self) -> list[aide_rows.OutputInfo]:
        """The aide's outputs, oldest first, each with its delivery log counted."""
        return aide_rows.output_infos(self.store, self.row)

    def set_source(
        self, source_id: int, value: str, *, kind: str | None = None
    ) -> aide_rows.SourceUpdate:
        """Point source ``source_id`` at ``value`` (checked as :meth:`add_source` checks it);
        the source keeps its kind, id and items. A changed value is polled afresh (a new
        cursor); item ids the source has read stay known, so an entry read before is not
        ingested twice. Returns a :class:`aide_rows.SourceUpdate` (``.changed``,
        ``.summary()``).

        Args:
            kind: the kind the caller means (``--rss``, ``--dir``, ``--search``); refused when
                it is not the source's.

        Raises:
            UsageError: no such source, another kind, a bad value, or another source's value.
        """
        from kgot.aides.sources import parse_source_spec

        [source] = aide_rows.source_infos(self.store, self.row, source_id)
        # The kind is checked before the value, which is read as that kind.
        aide_rows.keeps_kind(self.row, source_id, source.kind, kind or source.kind)
        spec = parse_source_spec(source.kind, value, max_mb=self.settings.tools.max_download_mb)
        return aide_rows.update_source(self.store, self.row, source_id, source.kind, spec)

    def remove_source(self, source_id: int) -> aide_rows.SourceRemoval:
        """Remove a source. What it brought stays in the graph (its done items' rows too, for
        ``items``); its items not ingested yet are dropped; an item being ingested is left to
        finish. Returns what was done (``.summary()`` says it in one line). A source added
        again later is a new source: it reads its items anew (:meth:`set_source` does not).

        Raises:
            UsageError: the aide has no such source.
        """
        return aide_rows.remove_source(self.store, self.row, source_id)

    def remove_output(self, output_id: int) -> aide_rows.OutputRemoval:
        """Remove an output with its delivery log's rows; what it was sent stays where it went.

        Raises:
            UsageError: the aide has no such output.
        """
        return aide_rows.remove_output(self.store, self.row, output_id)

    # -------------------------------------------------------------------------- the cycle

    def check_ready(self) -> None:
        """Refuse to run when a setting of the aide's program cannot work here (an advisor
        reading prices from yfinance without the package), saying how to fix it.

        Raises:
            ConfigError: naming the setting and the fix.
        """
        from kgot.aides.programs import check_ready

        check_ready(self.store, self.row)

    def run_cycle(self, now: datetime | None = None, **limits: Any) -> CycleReport:
        """Run one cycle (see :meth:`run_cycle_async` for the limits)."""
        return asyncio.run(self.run_cycle_async(now, **limits))

    async def run_cycle_async(
        self,
        now: datetime | None = None,
        *,
        max_items: int | None = None,
        max_cost_usd: float | None = None,
        max_cost_usd_day: float | None = None,
        should_stop: Callable[[], bool] | None = None,
        lease: timedelta = aide_rows.LEASE,
    ) -> CycleReport:
        """Poll, ingest, upkeep, program, deliver (module docstring).

        Args:
            now: the cycle's time (polls, leases, upkeep clocks); default: the current time.
            max_items: items ingested at most this cycle (the rest wait for the next).
            max_cost_usd: the cycle stops ingesting once its model cost reaches this.
            max_cost_usd_day: … or once the aide's cost this UTC day reaches this.
            should_stop: asked before each item; ``True`` ends the cycle after the current
                item (a signal), still recording the cycle and delivering its digest.
            lease: how long a claim on an item lasts without renewal (renewed every third of
                it while the item is worked on); after that another worker may take it over.
        """
        # The controller (LangGraph, LangChain) is loaded when a cycle runs, not when the aide
        # commands start.
        from kgot.controller import traced_step
        from kgot.persistence import current_owner

        self.check_ready()  # before the cycle is recorded: nothing half-done to explain
        now = now or datetime.now(UTC)
        started = time.perf_counter()

        def clock() -> datetime:  # the cycle's time as it goes on (leases are set from it)
            return now + timedelta(seconds=time.perf_counter() - started)

        owner = current_owner()
        cycle_id = aide_rows.start_cycle(self.store, self.row, now, owner)
        report = CycleReport(aide=self.name, entity=self.entity, cycle_id=cycle_id, started_at=now)
        self.on_model_call = self._spend_writer(cycle_id, clock)
        budget = _Budget(max_cost_usd, max_cost_usd_day, lambda: self._day_cost(now, cycle_id))
        try:
            # The cycle is a recorded run (`kgot runs show "aide NAME/cycle N"`): its steps,
            # the model calls in them and the commits its ingestions wrote under its id.
            async with self._recorded_run(cycle_id) as run:
                report.reclaimed = aide_rows.reclaim_abandoned(self.store, self.row, now)
                with traced_step("poll"):
                    await self._poll(report, now)
                reports: list[IngestReport] = []
                if aide_rows.pending_items(self.store, self.row, 1):
                    await self._ingest(
                        report,
                        max_items,
                        reports,
                        now=now,
                        clock=clock,
                        lease=lease,
                        owner=owner,
                        budget=budget,
                        should_stop=should_stop or (lambda: False),
                    )
                # At most once per UPKEEP_EVERY, whatever was ingested: the cycle's own
                # writes were resolved as they were written, and a full pass over a large
                # entity costs seconds that would otherwise fall on every cycle.
                if aide_rows.upkeep_due(self.store, self.row, now):
                    with traced_step("upkeep"):
                        report.upkeep = await asyncio.to_thread(self._upkeep, now)
                if self.row.program != "digest":
                    from kgot.aides.programs import run_program

                    with traced_step("program"):
                        report.program = await run_program(self, report, now, budget.exceeded)
                if report.digest is not None:  # kept before delivery: a crash does not lose it
                    aide_rows.finish_cycle(
                        self.store, cycle_id, {"report": report.to_json(), "made_digest": 1}
                    )
                with traced_step("deliver"):
                    await self._deliver(report, now)
                report.backlog = len(aide_rows.pending_items(self.store, self.row, None))
                run.outcome = _outcome(report)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # A signal (the CLI cancels the cycle) or Ctrl-C in the Python API: nothing new
            # is started; the item being ingested was given back (_ingest_one).
            report.stop_reason = report.stop_reason or (
                "stopped by a signal; what the cycle had not done waits for the next run"
            )
            self._finish(report, started, status="stopped")
            raise
        except BaseException as error:
            report.stop_reason = report.stop_reason or f"failed: {_one_line(error)}"
            self._finish(report, started, status="failed")
            raise
        finally:
            self.on_model_call = None
        self._finish(report, started, status="stopped" if report.stop_reason else "finished")
        log.info("%s", report.line())
        return report

    def _run_id(self, cycle_id: int) -> str:
        """The cycle's run id: what its run is recorded as and its commits name."""
        return f"aide {self.name}/cycle {cycle_id}"

    def _recorded_run(self, cycle_id: int) -> RecordedRun:
        from kgot.controller import RecordedRun, otel_sink

        return RecordedRun(
            self.store,
            self._run_id(cycle_id),
            kind="aide_cycle",
            question=f"cycle {cycle_id} of aide {self.name} ({self.row.program})",
            entity=self.entity,
            options={"aide": self.name, "cycle": cycle_id, "program": self.row.program},
            backend=self.settings.controller.backend,
            exporter=otel_sink(self.settings),
        )

    def _day_cost(self, now: datetime, cycle_id: int) -> float:
        """What the aide's other cycles spent since UTC midnight, read now: other workers'
        running cycles and killed ones write their spend as it happens."""
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return aide_rows.cost_since(self.store, self.row, midnight, excluding=cycle_id)

    def _spend_writer(self, cycle_id: int, clock: Callable[[], datetime]) -> Callable[[Any], None]:
        """A usage-ledger listener adding each model call to the cycle's row as it is made."""

        def write(call: Any) -> None:
            try:
                aide_rows.add_spend(
                    self.store,
                    cycle_id,
                    calls=1,
                    input_tokens=call.input_tokens,
                    output_tokens=call.output_tokens,
                    cost_usd=call.cost_usd,
                    now=clock(),
                )
            except StoreError as error:  # the final figures are still written at the end
                log.warning("%s: the cycle's spend was not recorded: %s", self.name, error)

        return write

    async def _poll(self, report: CycleReport, now: datetime) -> None:
        from kgot.aides.sources import poll_async

        for source in aide_rows.sources(self.store, self.row):
            report.sources += 1
            result = await poll_async(
                source.kind, source.spec, source.cursor, settings=self.settings, now=now
            )
            recorded = aide_rows.record_poll(
                self.store,
                self.row,
                source.id,
                result.items,
                cursor=result.cursor,
                error=result.error,
                now=now,
                spec=source.spec,  # an edit meanwhile (kgot aide source set) voids this poll
            )
            report.new_items += recorded.added
            if recorded.error:
                shown = f"source {source.id} ({aide_rows.part_text(source.kind, source.spec)})"
                report.source_errors.append(f"{shown}: {recorded.error}")
                log.warning("%s: %s", shown, recorded.error)

    async def _ingest(
        self,
        report: CycleReport,
        max_items: int | None,
        reports: list[IngestReport],
        *,
        now: datetime,
        clock: Callable[[], datetime],
        lease: timedelta,
        owner: str,
        budget: _Budget,
        should_stop: Callable[[], bool],
    ) -> None:
        from kgot.aides.programs import digest
        from kgot.controller import Ingestor, traced_step

        # Under the cycle's run id: its ingestions are steps of the cycle's run.
        run_id = self._run_id(report.cycle_id)
        async with Ingestor(
            self.store, self.entity, self.settings, models=self.models, run_id=run_id
        ) as ingestor:
            if self.on_model_call is not None:
                ingestor.ledger.subscribe(self.on_model_call)
            claimed = 0
            while max_items is None or claimed < max_items:
                if should_stop():
                    report.stop_reason = "asked to stop; the rest waits for the next run"
                    break
                spent = _spent(ingestor.ledger)
                over = budget.exceeded(spent)
                if over:
                    report.stop_reason = over
                    break
                row = aide_rows.claim_next(
                    self.store, self.row, owner, clock(), report.cycle_id, lease=lease
                )
                if row is None:
                    break  # nothing left (other workers may hold the rest)
                claimed += 1
                try:
                    outcome, ingested = await self._ingest_one(
                        ingestor, row, now, _Claim(owner, lease, clock)
                    )
                except _CycleHalt as halt:
                    report.stop_reason = f"{halt}; the item waits for the next cycle"
                    log.warning("%s: %s", self.name, report.stop_reason)
                    break
                report.items.append(outcome)
                if ingested is not None and not ingested.already_committed:
                    reports.append(ingested)
                log.info(
                    "%s: item %s %s (%s)",
                    self.name,
                    row.item_id,
                    outcome.status,
                    outcome.reason or outcome.summary,
                )
            if reports and self.row.program == "digest":
                titles = [item.title for item in report.items if item.status == "done"]
                with traced_step("digest"):
                    made = await digest(
                        ingestor,
                        reports,
                        entity=self.entity,
                        titles=titles,
                        # A spent cost budget leaves the digest its writing, not the retrieve.
                        retrieve=budget.exceeded(_spent(ingestor.ledger)) is None,
                    )
                if made is not None:
                    report.digest = {
                        "aide": self.name,
                        "entity": self.entity,
                        "cycle": report.cycle_id,
                        "at": now.isoformat(),
                        **made.to_json(),
                        "items": [
                            {"title": item.title, "source_ref": item.source_ref}
                            for item in report.items
                            if item.status == "done"
                        ],
                    }
            totals = ingestor.ledger.totals()
            report.llm_calls = totals.calls
            report.input_tokens = totals.input_tokens
            report.output_tokens = totals.output_tokens
            report.cost_usd = totals.cost_usd

    async def _ingest_one(
        self, ingestor: Any, row: Any, now: datetime, claim: _Claim
    ) -> tuple[ItemOutcome, IngestReport | None]:
        """Ingest one claimed item, its lease renewed meanwhile, and record how it ended
        (unless the lease went to another worker: the item is then that worker's to record)."""
        attempts = int(row.attempts) + 1  # the claim counted this one
        outcome = ItemOutcome(
            item_id=row.item_id,
            title=row.title,
            source_ref=row.source_ref,
            status="failed",
            attempts=attempts,
        )
        ingested: IngestReport | None = None
        keeper = _LeaseKeeper(self.store, self.name, row, claim)
        try:
            async with keeper:
                ingested = await ingestor.ingest(
                    row.text,
                    source_ref=row.source_ref,
                    title=row.title or None,
                    result_key=f"aide {self.row.id}/item {row.id}",
                )
        except (ModelError, ConfigError, SandboxUnavailableError, StoreError) as error:
            # Not the item's fault (the endpoint, the sandbox, the database): it waits, with
            # the attempt given back, and the cycle stops instead of failing every item.
            aide_rows.release_item(
                self.store, row.id, owner=claim.owner, status=row.status, attempts=row.attempts
            )
            raise _CycleHalt(f"{type(error).__name__}: {_one_line(error)}") from error
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Stopped by a signal: the item waits for the next run, this attempt not counted
            # (its result key keeps a commit that landed from being written twice).
            aide_rows.release_item(
                self.store, row.id, owner=claim.owner, status=row.status, attempts=row.attempts
            )
            raise
        except KgotError as error:
            outcome.reason = _one_line(error)
        else:
            if ingested.ok:
                outcome.status = "done"
                outcome.version = ingested.version
                outcome.summary = ingested.summary()
            else:
                outcome.reason = ingested.failed
        if outcome.status == "failed" and attempts >= aide_rows.MAX_ATTEMPTS:
            tried = aide_rows.count_of(attempts, "ingestion attempt")
            outcome.reason = f"{outcome.reason} (the item was given up after {tried})"
        recorded = aide_rows.finish_item(
            self.store,
            row.id,
            owner=claim.owner,
            ok=outcome.status == "done",
            version=outcome.version,
            reason=outcome.reason,
            report=ingested.to_json() if ingested is not None else None,
            now=now,
        )
        if not recorded:
            # Its lease ran out (this process stalled) and another worker took the item
            # over. The result key keeps its facts to one commit, whichever landed first;
            # the item's end is the new owner's to record.
            outcome.status = "lost"
            outcome.reason = (
                "its lease ran out and another worker took it over "
                f"(this worker's ingestion: {outcome.reason or outcome.summary})"
            )
        return outcome, ingested

    def _upkeep(self, now: datetime) -> str:
        from kgot.memory import open_memory

        done = open_memory(self.store, self.entity).upkeep(now=now)
        line = (
            f"{done.expired} expired, {done.pruned} pruned, {done.promoted} promoted, "
            f"{done.merged} merged"
        )
        if done.left:  # an ingestion re-stated them while the pass ran: they stay current
            line += f", {done.left} left (re-stated during the pass)"
        return line

    async def _deliver(self, report: CycleReport, now: datetime) -> None:
        """Deliver this cycle's digest to each output, and the digests of recent cycles that
        an output has not accepted yet (it failed, or the process died before delivering)."""
        from kgot.aides.outputs import deliver_once

        recent = aide_rows.recent_digests(self.store, self.row, aide_rows.REDELIVER_CYCLES)
        for output in aide_rows.outputs(self.store, self.row):
            added = as_utc(output.created_at)
            for cycle_id, started, digest in recent:
                if added is not None and started is not None and started < added:
                    continue  # made before this output existed
                key = f"aide {self.row.id}/cycle {cycle_id}"
                result = await deliver_once(
                    self.store,
                    self.row,
                    output,
                    key,
                    digest,
                    cycle_id=cycle_id,
                    now=now,
                    settings=self.settings,
                )
                if result is None:
                    continue  # delivered, or given up on, before
                report.deliveries.append(
                    {
                        "output": output.id,
                        "kind": output.kind,
                        "cycle": cycle_id,
                        "ok": result.ok,
                        "error": result.error,
                    }
                )
                if not result.ok:
                    log.warning("%s: output %s failed: %s", self.name, output.id, result.error)

    def _finish(self, report: CycleReport, started: float, *, status: str) -> None:
        report.duration_s = time.perf_counter() - started
        report.finished_at = datetime.now(UTC)
        # The spend written call by call is the cycle's (the report's own figures are summed
        # from ledgers only at the end of each stage, which a signal may not reach).
        spend = aide_rows.cycle_spend(self.store, report.cycle_id)
        if spend is not None and spend.llm_calls >= report.llm_calls:
            report.llm_calls = spend.llm_calls
            report.input_tokens = spend.input_tokens
            report.output_tokens = spend.output_tokens
            report.cost_usd = spend.cost_usd
        aide_rows.finish_cycle(
            self.store,
            report.cycle_id,
            {
                "finished_at": report.finished_at,
                "status": status,
                "stop_reason": report.stop_reason,
                "items": report.ingested,
                "failed": report.failed,
                "llm_calls": report.llm_calls,
                "input_tokens": report.input_tokens,
                "output_tokens": report.output_tokens,
                "cost_usd": report.cost_usd,
                "duration_s": report.duration_s,
                "errors": report.source_errors or None,
                "report": report.to_json(),
            },
        )


class _CycleHalt(Exception):
    """Ingestion cannot go on this cycle (the model endpoint, the sandbox or the store)."""


@dataclass(frozen=True)
class _Claim:
    """Whose claims a cycle makes, for how long, and its clock."""

    owner: str
    lease: timedelta
    clock: Callable[[], datetime]


class _LeaseKeeper:
    """Renews the lease of the item being ingested every third of the lease, as long as the
    ingestion runs: a slow item is not taken over by another worker while its own is alive.

    It is a task of the cycle's event loop, not a thread: if the loop stalls, the renewals
    stop and the item goes to another worker when the lease runs out, as when the process
    died. A renewal that finds the lease gone (it ran out and was taken over) stops the
    renewals; a store error is logged and the next beat tries again.
    """

    def __init__(self, store: Store, aide: str, row: Any, claim: _Claim) -> None:
        self.store = store
        self.aide = aide
        self.row = row
        self.claim = claim
        self.lost = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _LeaseKeeper:
        self._task = asyncio.create_task(self._beat(), name=f"lease of item {self.row.id}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _beat(self) -> None:
        period = self.claim.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(period)
            expires = self.claim.clock() + self.claim.lease
            try:
                held = await asyncio.to_thread(
                    aide_rows.renew_lease, self.store, self.row.id, self.claim.owner, expires
                )
            except StoreError as error:
                log.warning(
                    "%s: item %s: lease not renewed (%s); trying again",
                    self.aide,
                    self.row.item_id,
                    _one_line(error),
                )
                continue
            if not held:
                self.lost = True
                log.warning(
                    "%s: item %s: its lease ran out and another worker took it over",
                    self.aide,
                    self.row.item_id,
                )
                return


@dataclass
class _Budget:
    cycle: float | None
    day: float | None
    others_today: Callable[[], float]  # the aide's other cycles today, read when asked

    def exceeded(self, spent: float) -> str | None:
        """Why no more model work may be started this cycle, or ``None``."""
        if self.cycle is not None and spent >= self.cycle:
            return f"the cycle's cost reached --max-cost-usd {self.cycle:g} (${spent:.4f})"
        if self.day is not None:
            today = self.others_today() + spent
            if today >= self.day:
                return f"today's cost reached the daily budget {self.day:g} (${today:.4f})"
        return None


def _outcome(report: CycleReport) -> str:
    """The cycle's run answer: what it did, in a few words (the figures are in its totals)."""
    parts = [f"{report.new_items} new items", f"{report.ingested} ingested"]
    if report.failed:
        parts.append(f"{report.failed} failed")
    if report.backlog:
        parts.append(f"{report.backlog} waiting")
    if report.digest is not None:
        parts.append("a digest")
    if report.stop_reason:
        parts.append(f"stopped: {report.stop_reason}")
    return ", ".join(parts)


def _spent(ledger: Any) -> float:
    """The model cost so far (an unknown price counts as 0: the budget cannot see it)."""
    return float(ledger.totals().cost_usd or 0.0)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:500]


def open_aide(
    store: Store,
    name: str,
    *,
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
) -> Aide:
    """The aide called ``name`` in ``store``.

    Args:
        settings: effective settings (models, sandbox, tools); default: environment and file.
        models: chat models per role instead of the configured ones (tests, embedding apps).

    Raises:
        UsageError: no such aide.
    """
    from kgot.config import load_settings

    return Aide(store, aide_rows.get_aide(store, name), settings or load_settings(), models)


def create_aide(
    store: Store,
    name: str,
    entity: str,
    *,
    program: str = "digest",
    settings: Settings | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
) -> Aide:
    """Create an aide bound to ``entity`` (created, empty, when missing).

    Raises:
        UsageError: the name is taken or malformed, or the program is unknown.
    """
    from kgot.errors import EntityNotFoundError

    try:
        store.get_entity(entity)
    except EntityNotFoundError:
        store.create_entity(entity)
    row = aide_rows.create_aide(store, name, entity, program, {})
    from kgot.aides.programs import on_create

    on_create(store, row)
    return open_aide(store, name, settings=settings, models=models)
