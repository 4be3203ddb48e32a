"""Ingestion: a text becomes facts of an entity's graph through the INSERT path, with no vote.

The text is treated as one tool result: the planning model writes graph code for it, the code
runs in the sandbox on a copy of the graph, the entity's memory rewrites the changeset (a node
the entity has lands on it, functional facts supersede), the store checks it against the
entity's types and commits it with provenance; failing code goes back to the model for a fix
(``controller.fix_code_retries``). This is :func:`kgot.controller.insert._integrate`, the same
code an entity run uses for each tool result, driven without the loop around it.

:class:`Ingestor` keeps the sandbox, the models and the entity's in-memory graph open across
texts (an aide ingests many items per cycle); each :meth:`Ingestor.ingest` catches the graph up
with other writers first. :meth:`Ingestor.retrieve` is the other half of a run without its
loop: the RETRIEVE path's read pass (:func:`kgot.controller.retrieve.query_graph`) over the
same graph, for work that reads what was ingested (an aide's digest).

A long text is written in pieces of ``tools.max_output_chars``, one model write (and its fixes)
each, so two caps bound what one ingestion may cost (``[ingest]`` settings, or per call):
``max_chars``, checked before any model call (:class:`TextTooLongError`), and ``max_cost_usd``,
checked between pieces: once the pieces written cost that much, the rest are left unwritten and
the report says which (``parts_done``, ``parts_missing``); each piece is committed under its own
result key, so ingesting the text again under the same ``result_key`` writes only those.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kgot.controller.context import RunContext, warm_pool_once_open
from kgot.controller.insert import catch_up, integrate
from kgot.controller.recorded_run import RecordedRun, recording, traced_step
from kgot.controller.retrieve import Retrieval, query_graph
from kgot.controller.run import finish_in_thread, open_run_sandbox, otel_sink
from kgot.controller.state import PendingResult, RunState
from kgot.controller.working_set import open_entity_backend
from kgot.errors import ConfigError, UsageError
from kgot.memory import MergedId, WriteOutcome, WrittenEdge
from kgot.persistence import FactKey, fact_id
from kgot.tracing import emit, excerpt

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.config import Settings
    from kgot.persistence import Store

# The longest answer line an ingestion's run keeps (what each text wrote, joined).
RUN_ANSWER_CHARS = 1_000

# The producer name ingested text is written as: its trust is `[memory.trust] ingest` (else
# `default`), unless the caller gives a confidence.
INGEST_PRODUCER = "ingest"


class TextTooLongError(UsageError):
    """A text longer than the ingestion cap (``ingest.max_chars``), refused before any model
    call. It is refused the same way however often it is tried.

    Its message is one line naming ``what`` (the text), its size (``chars``), the model writes
    it would take at least (pieces of ``piece_chars``), the cap (``max_chars``) and ``fix``;
    :meth:`reworded` names the text and the fix as the caller knows them (``kgot ingest``: the
    file, and ``--max-chars``).
    """

    def __init__(
        self,
        *,
        chars: int,
        max_chars: int,
        piece_chars: int,
        what: str = "the text",
        fix: str = "split it, or raise the cap (`[ingest] max_chars` in the config file, "
        "max_chars= in Python)",
    ) -> None:
        # A lower bound, not split_text's count: pieces end at paragraphs, so there are more,
        # and cutting megabytes only to refuse them would be slow.
        pieces = -(-chars // piece_chars)
        super().__init__(
            f"{what} has {chars:,} characters (at least {pieces:,} "
            f"piece{'' if pieces == 1 else 's'} of {piece_chars:,}, one model write each), "
            f"above the ingestion cap of {max_chars:,} (ingest.max_chars); {fix}"
        )
        self.chars = chars
        self.max_chars = max_chars
        self.piece_chars = piece_chars

    def reworded(self, what: str, fix: str) -> TextTooLongError:
        """The same refusal, naming the text ``what`` and with ``fix``."""
        return TextTooLongError(
            chars=self.chars,
            max_chars=self.max_chars,
            piece_chars=self.piece_chars,
            what=what,
            fix=fix,
        )


def check_ingestion(
    settings: Settings,
    text: str,
    *,
    confidence: float | None = None,
    max_chars: int | None = None,
    max_cost_usd: float | None = None,
) -> tuple[str, float | None]:
    """What :meth:`Ingestor.ingest` checks before any model call, so that a caller can refuse a
    text before it opens an :class:`Ingestor` (the sandbox, the graph): return ``text``
    stripped and the cost cap that applies to it (``max_cost_usd``, else
    ``settings.ingest``'s, as ``max_chars``).

    Raises:
        UsageError: empty text, a confidence outside 0–1, a cap that is not above 0.
        TextTooLongError: the text is longer than ``max_chars``.
    """
    text = text.strip()
    if not text:
        raise UsageError("the text to ingest is empty; pass a file with content or text")
    if confidence is not None and not 0 <= confidence <= 1:
        raise UsageError(f"confidence must be within 0..1, not {confidence}")
    caps = settings.ingest
    max_chars = caps.max_chars if max_chars is None else max_chars
    max_cost_usd = caps.max_cost_usd if max_cost_usd is None else max_cost_usd
    if max_chars < 1:
        raise UsageError(f"max_chars must be 1 or more, not {max_chars}")
    if max_cost_usd is not None and not max_cost_usd > 0:
        raise UsageError(f"max_cost_usd must be above 0, not {max_cost_usd}")
    if len(text) > max_chars:
        raise TextTooLongError(
            chars=len(text), max_chars=max_chars, piece_chars=settings.tools.max_output_chars
        )
    return text, max_cost_usd


def part_ranges(numbers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5`` (piece numbers, for a line a person reads)."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


@dataclass
class IngestReport:
    """What one ingestion did to the entity's graph.

    Attributes:
        entity: the entity written to.
        source_ref: where the text came from (stored on every fact it produced).
        version: the entity's version after the commit; ``None`` when nothing was committed.
        already_committed: the ``result_key`` had a commit already (nothing written again).
        inserted_nodes / inserted_edges: facts that are new to the graph (node ids;
            :class:`~kgot.memory.WrittenEdge`).
        updated_nodes / updated_edges: existing facts that got new or changed properties.
        merged: node ids the text's graph code gave that the memory landed on an existing
            node (a duplicate) or followed to a canonical node.
        restated: facts the text stated again as the graph holds them (fact keys): nothing new
            was written for them, the store counted them as ``corroborated`` (found again by a
            new source) or ``reinforced`` (by the same source).
        superseded: facts closed as contradicted by a new value (fact keys).
        :meth:`to_json` names facts as people see them (:func:`kgot.persistence.fact_id`).
        queued: suggestions filed in the curation queue (kept values, possible duplicates).
        notes: every note of the entity's memory, as the model saw them.
        failed: why no change could be made (the fix-code attempts ran out, or the cost cap
            stopped the ingestion before its last piece); ``None`` if fine.
        result_key: the key the text's pieces were committed under (``<key>/part <n>`` for a
            text of several pieces): ingesting the text again with it writes only what is
            missing.
        parts: the pieces the text was cut into; ``parts_done`` those written (now or by an
            earlier ingestion under the key), ``parts_missing`` those not (failed, or never
            tried because of the cost cap).
        stopped_by: the cap that stopped the ingestion between pieces (``max_cost_usd …``),
            else ``None``.
        llm_calls / input_tokens / output_tokens / cost_usd: what the model work cost
            (``cost_usd`` ``None`` when a model's price is unknown).
        run_id: the run its commits name, recorded with its steps and model calls
            (`kgot runs show RUN_ID`).
    """

    entity: str
    source_ref: str | None
    version: int | None = None
    already_committed: bool = False
    inserted_nodes: list[str] = field(default_factory=list)
    inserted_edges: list[WrittenEdge] = field(default_factory=list)
    updated_nodes: list[str] = field(default_factory=list)
    updated_edges: list[WrittenEdge] = field(default_factory=list)
    merged: list[MergedId] = field(default_factory=list)
    restated: list[FactKey] = field(default_factory=list)
    corroborated: int = 0
    reinforced: int = 0
    superseded: list[FactKey] = field(default_factory=list)
    queued: int = 0
    notes: list[str] = field(default_factory=list)
    failed: str | None = None
    result_key: str | None = None
    parts: int = 1
    parts_done: list[int] = field(default_factory=list)
    stopped_by: str | None = None
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed is None

    @property
    def parts_missing(self) -> list[int]:
        """The pieces not written: every piece not in ``parts_done``."""
        done = set(self.parts_done)
        return [number for number in range(1, self.parts + 1) if number not in done]

    def add(self, outcome: WriteOutcome) -> None:
        """Fold one write's outcome into the report."""
        self._fold_writes(outcome)
        if outcome.failed is not None and self.failed is None:
            self.failed = outcome.failed

    def _fold_writes(self, done: WriteOutcome | IngestReport) -> None:
        """Add what a write (or a piece's report, which adds up writes) did to the graph."""
        if done.version is not None:
            self.version = done.version
        self.inserted_nodes += done.inserted_nodes
        self.inserted_edges += done.inserted_edges
        self.updated_nodes += done.updated_nodes
        self.updated_edges += done.updated_edges
        self.merged += done.merged
        self.restated += [fact for fact in done.restated if fact not in self.restated]
        self.corroborated += done.corroborated
        self.reinforced += done.reinforced
        self.superseded += done.superseded
        self.queued += done.queued
        self.notes += done.notes

    def add_part(self, part: IngestReport, label: str | None) -> None:
        """Fold one piece's report into the text's (``label``: the piece, as failures name
        it; ``None`` for a text of one piece)."""
        self.already_committed = (
            part.already_committed
            if label is None or label.startswith("part 1 ")
            else self.already_committed and part.already_committed
        )
        self._fold_writes(part)
        self.llm_calls += part.llm_calls
        self.input_tokens += part.input_tokens
        self.output_tokens += part.output_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if part.cost_usd is None else self.cost_usd + part.cost_usd
        if part.failed is not None and self.failed is None:
            self.failed = f"{label}: {part.failed}" if label else part.failed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in asdict(self).items():
            out[name] = value
            if name == "parts_done":
                out["parts_missing"] = self.parts_missing
        out["inserted_edges"] = [edge.fact_id for edge in self.inserted_edges]
        out["updated_edges"] = [edge.fact_id for edge in self.updated_edges]
        out["merged"] = [merged._asdict() for merged in self.merged]
        out["restated"] = [fact_id(key) for key in self.restated]
        out["superseded"] = [fact_id(key) for key in self.superseded]
        return {**out, "ok": self.ok}

    def stop_line(self, again: str | None = None) -> str:
        """Where the cost cap stopped the ingestion (``stopped_by``), in one line: the pieces
        committed and those not, then ``again``, how to write only those (default: ingesting
        the text again under ``result_key``). ``failed`` ends with it; ``kgot ingest`` prints
        it with its own ``again``."""
        if again is None:
            again = (
                f"ingesting the text again under result key {self.result_key!r} writes only those"
            )
        return (
            f"stopped at the cost cap {self.stopped_by}: parts {part_ranges(self.parts_done)} "
            f"of {self.parts} committed, {part_ranges(self.parts_missing)} not; {again}"
        )

    def summary(self) -> str:
        """One line: what changed."""
        if self.stopped_by is not None:  # some pieces were written: say what they changed
            return f"{self._changes()}; stopped at the cost cap {self.stopped_by}"
        if self.failed is not None:
            return f"failed: {self.failed}"
        if self.already_committed:
            return f"already committed as version {self.version}"
        return self._changes()

    def _changes(self) -> str:
        # The same line a single write prints: this report is the pieces' writes added up.
        return WriteOutcome(
            version=self.version,
            inserted_nodes=tuple(self.inserted_nodes),
            inserted_edges=tuple(self.inserted_edges),
            updated_nodes=tuple(self.updated_nodes),
            updated_edges=tuple(self.updated_edges),
            merged=tuple(self.merged),
            restated=tuple(self.restated),
            corroborated=self.corroborated,
            reinforced=self.reinforced,
            superseded=tuple(self.superseded),
        ).summary()


class Ingestor:
    """Ingest texts into one entity's graph (module docstring). An async context manager::

        async with Ingestor(store, "acme", settings) as ingestor:
            report = await ingestor.ingest(text, source_ref="notes.md")

    Args:
        store: an open store; the entity must exist.
        entity: the entity whose graph grows.
        settings: effective settings (models, sandbox, backend, fix-code retries, trust).
        models: chat models per role instead of the configured ones (``planning`` writes code).
        run_id: what the commits name as their run (default: ``ingest-<uuid>``).

    The ingestion is a recorded run (``kind`` ``ingest``, :class:`~kgot.controller.
    recorded_run.RecordedRun`) under ``run_id``: `kgot runs show RUN_ID` lists its commits and
    a step ``ingest`` per piece written (``retrieve`` per :meth:`retrieve`), with the model
    calls made in it. Inside the recorded run of the same id (an aide's cycle, whose commits
    name the cycle) it is part of that run instead.
    """

    def __init__(
        self,
        store: Store,
        entity: str,
        settings: Settings,
        *,
        models: Mapping[str, BaseChatModel] | None = None,
        run_id: str | None = None,
    ) -> None:
        self.store = store
        self.entity = entity
        self.settings = settings
        self.models = models
        self.run_id = run_id or f"ingest-{uuid.uuid4()}"
        self._stack = contextlib.AsyncExitStack()
        self._ctx: RunContext | None = None
        self._run: RecordedRun | None = None  # None: part of the enclosing run of this id
        self._written: list[str] = []  # a line per text ingested, the run's answer

    async def __aenter__(self) -> Ingestor:
        from kgot.graph_backends import open_backend
        from kgot.llm import UsageLedger, build_llm_clients
        from kgot.tools import ToolRunner

        ledger = UsageLedger()
        # On a thread: the first build imports the provider's client library (see run.py).
        roles = await finish_in_thread(
            lambda: build_llm_clients(self.settings, ledger, models=self.models)
        )
        session = self.store.session(self.entity)  # EntityNotFoundError for a missing one
        async with contextlib.AsyncExitStack() as stack:
            if not recording(self.run_id):
                self._run = RecordedRun(
                    self.store,
                    self.run_id,
                    kind="ingest",
                    question=f"ingestion into {self.entity}",
                    entity=self.entity,
                    backend=self.settings.controller.backend,
                    exporter=otel_sink(self.settings),
                )
                await stack.enter_async_context(self._run)
            # The session's own worker starts now and takes the entity's graph as soon as it
            # is loaded; the shared pool (document conversion) warms up after it. Opening,
            # loading (as long as the graph is large) and closing run on threads (see
            # open_run_sandbox): an MCP `remember` shares the event loop with every tenant.
            sandbox = await open_run_sandbox(stack, self.settings, self.settings.controller.backend)
            backend = await finish_in_thread(
                lambda: open_entity_backend(
                    session,
                    "",  # no question: items' texts find what they need as they come
                    lambda graph: open_backend(
                        self.settings.controller.backend,
                        sandbox,
                        graph,
                        max_property_bytes=self.settings.store.max_property_bytes,
                    ),
                    max_nodes=self.settings.controller.working_set_nodes,
                )
            )
            # Stops the session's resident worker, killing a job it may be running (an
            # ingestion cancelled mid-job).
            stack.push_async_callback(finish_in_thread, backend.close)
            backend.warm_up(then=warm_pool_once_open(stack, sandbox))
            self._ctx = RunContext(
                settings=self.settings,
                run_id=self.run_id,
                planning=roles.planning,
                execution=roles.execution,
                ledger=ledger,
                backend=backend,
                sandbox=sandbox,
                tools=[],
                runner=ToolRunner(
                    [],
                    timeout=self.settings.tools.timeout,
                    max_output_chars=self.settings.tools.max_output_chars,
                ),
                session=session,
                # The events of the ingestion's writes (code, failures, graph updates) go to
                # the span in progress: the step of the run this ingestion is part of.
                collect=emit,
            )
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        # The exception that ends the block (if any) is the run's: it ends failed or
        # interrupted, not done.
        await self._stack.__aexit__(*exc_info)
        self._ctx = None

    @property
    def planning(self) -> Any:
        """The planning model's client (:class:`kgot.llm.LLMClient`), for work that follows
        ingestion in the same session (an aide's program); its requests join :attr:`ledger`."""
        return self._context().planning

    def graph(self) -> Any:
        """A copy of the entity's graph as this session holds it (its own writes applied;
        other writers' since the last ingestion not yet): a ``networkx.MultiDiGraph``. On an
        entity larger than ``controller.working_set_nodes`` it is the session's working set
        (what its ingestions read and wrote; ``controller/working_set.py``)."""
        return self._context().backend.to_networkx()

    @property
    def ledger(self) -> Any:
        """Every model request made so far (:class:`kgot.llm.UsageLedger`)."""
        return self._context().ledger

    def _context(self) -> RunContext:
        if self._ctx is None:
            raise RuntimeError("use the Ingestor inside `async with`")
        return self._ctx

    async def retrieve(
        self, question: str, *, focus: Sequence[str] = (), max_calls: int | None = None
    ) -> Retrieval:
        """Read the entity's graph for ``question`` the way a run's RETRIEVE step does, with
        no vote before it and no answer after it: the planning model writes a read query
        against a view of the graph seeded by the question and the ``focus`` texts, the query
        runs in the sandbox (never in this process), failing queries go back for a fix and
        empty ones are written anew (``controller.retrieve_retries``,
        ``controller.fix_code_retries``), with at most ``max_calls`` model calls.

        The graph first catches up with other writers. The calls join :attr:`ledger`.

        Raises:
            ModelError: the model endpoint failed.
            SandboxUnavailableError: the sandbox cannot run the query.
        """
        ctx = self._context()
        assert ctx.session is not None
        with traced_step("retrieve"):
            await catch_up(ctx, 1, reason="other writers committed to this entity")
            return await query_graph(ctx, question, iteration=1, focus=focus, max_calls=max_calls)

    async def ingest(
        self,
        text: str,
        *,
        source_ref: str | None = None,
        title: str | None = None,
        confidence: float | None = None,
        result_key: str | None = None,
        producer: str = INGEST_PRODUCER,
        max_chars: int | None = None,
        max_cost_usd: float | None = None,
    ) -> IngestReport:
        """Turn ``text`` into facts of the entity's graph and commit them.

        Args:
            text: what to ingest (plain text or Markdown; convert documents first).
            source_ref: where it came from (a URL or path), stored on every fact.
            title: a title for the prompt (the question the model writes towards).
            confidence: trust of its facts (0–1) when graph code sets none; default: the
                producer's trust in ``[memory.trust]``.
            result_key: names this piece of work: when the entity has a commit with this key
                already, nothing is written again and the report says so (an aide keys each
                item, so a restart after a crash never ingests an item twice).
            producer: the tool name the text is shown as and whose trust applies.
            max_chars: the longest text taken (default ``ingest.max_chars``); a longer one is
                refused before any model call.
            max_cost_usd: stop between pieces once the pieces written cost this much (default
                ``ingest.max_cost_usd``; ``None`` there: no cap). A piece may overshoot it.

        Raises:
            UsageError: empty text, a confidence outside 0–1, a cap that is not above 0.
            TextTooLongError: the text is longer than ``max_chars`` (nothing was asked).
            ConfigError: a cost cap on a text of several pieces with a planning model whose
                price is unknown (the cap could not see the cost); nothing was asked.
            ConfigError, LLMError: the model cannot be used (nothing was written).
        """
        text, max_cost_usd = check_ingestion(
            self.settings,
            text,
            confidence=confidence,
            max_chars=max_chars,
            max_cost_usd=max_cost_usd,
        )
        parts = split_text(text, self.settings.tools.max_output_chars)
        if max_cost_usd is not None and len(parts) > 1:
            self._check_priced(max_cost_usd)
        base = result_key or f"{self.run_id}/{uuid.uuid4()}"
        report = IngestReport(
            entity=self.entity,
            source_ref=source_ref,
            result_key=base,
            parts=len(parts),
            run_id=self.run_id,
        )
        for number, part in enumerate(parts, 1):
            spent = report.cost_usd
            if max_cost_usd is not None and spent is not None and spent >= max_cost_usd:
                # Checked between pieces, never inside one: what was written stays committed,
                # and the rest keeps its keys for a later ingestion under the same result key.
                _stop(report, f"max_cost_usd {max_cost_usd:g} (spent ${spent:.4f})")
                break
            key = base if len(parts) == 1 else f"{base}/part {number}"
            shown = (
                title if len(parts) == 1 else f"{title or 'text'}, part {number} of {len(parts)}"
            )
            with traced_step("ingest"):
                done = await self._ingest_part(
                    part,
                    source_ref=source_ref,
                    title=shown,
                    confidence=confidence,
                    key=key,
                    producer=producer,
                )
            report.add_part(done, None if len(parts) == 1 else f"part {number} of {len(parts)}")
            if done.ok:
                report.parts_done.append(number)
        self._report(report, source_ref or title)
        return report

    def _report(self, report: IngestReport, what: str | None) -> None:
        """Say what ``report`` wrote in the run's answer line (its own run only)."""
        if self._run is None:
            return
        self._written.append(f"{what or 'text'}: {report.summary()}")
        self._run.outcome = excerpt("; ".join(self._written), RUN_ANSWER_CHARS)

    def _check_priced(self, max_cost_usd: float) -> None:
        """Refuse a cost cap the ledger could not see: the planning model (which writes every
        piece) has no known price, so its calls would cost ``None`` and never reach the cap."""
        planning = self._context().planning
        name = str(getattr(planning, "model_name", "") or "")
        prices = getattr(planning, "prices", None)
        if prices is not None and prices.price_for(name) is None:
            raise ConfigError(
                f"the ingestion cost cap max_cost_usd {max_cost_usd:g} needs the price of "
                f'{name}, which kgot does not know; set [llm.prices."{name}"] input and output '
                "(USD per million tokens), or ingest without a cost cap"
            )

    async def _ingest_part(
        self,
        text: str,
        *,
        source_ref: str | None,
        title: str | None,
        confidence: float | None,
        key: str,
        producer: str,
    ) -> IngestReport:
        """Ingest one piece of text under ``key`` (nothing when the key has a commit)."""
        ctx = self._context()
        assert ctx.session is not None
        report = IngestReport(entity=self.entity, source_ref=source_ref)
        earlier = ctx.session.committed(key)
        if earlier is not None:
            report.version = int(earlier["version"])
            report.already_committed = True
            return report
        ctx.settings = _with_trust(self.settings, producer, confidence)
        result = PendingResult(
            name=producer,
            args={"source_ref": source_ref} if source_ref else {},
            output=text,
            source_ref=source_ref,
        )
        state = RunState(question=_question(title, source_ref), iteration=1)
        calls_before = len(ctx.ledger.calls)
        try:
            outcome = await integrate(ctx, state, result, key)
        finally:
            ctx.settings = self.settings
            _add_usage(report, ctx.ledger.calls[calls_before:])
        if outcome.already_committed:
            # Another worker did the same work (it took the item over) and its commit landed
            # first: the store kept that one and wrote nothing of ours.
            return self._taken_over(report, outcome)
        report.add(outcome)
        return report

    def _taken_over(self, report: IngestReport, outcome: WriteOutcome) -> IngestReport:
        """``report`` as an earlier commit of its key: nothing of this ingestion was written
        (nor applied to the in-memory graph; the next ingestion catches it up with the commit
        that was kept). Rare: a worker whose item was taken over."""
        return IngestReport(
            entity=self.entity,
            source_ref=report.source_ref,
            version=outcome.version,
            already_committed=True,
            llm_calls=report.llm_calls,
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
            cost_usd=report.cost_usd,
        )


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at paragraph ends, else line
    ends, else spaces (a write prompt holds one piece, as it holds one capped tool result)."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = limit  # no good place in the second half: cut where the piece is full
        for separator in ("\n\n", "\n", " "):
            found = window.rfind(separator)
            if found >= limit // 2:
                cut = found
                break
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    pieces.append(rest)
    return [piece for piece in pieces if piece]


def _stop(report: IngestReport, cap: str) -> None:
    """Record that ``cap`` stopped the ingestion before its next piece."""
    report.stopped_by = cap
    line = report.stop_line()
    report.failed = line if report.failed is None else f"{report.failed}; {line}"


def _question(title: str | None, source_ref: str | None) -> str:
    """What the write prompt names as the question: keep what this text states."""
    about = f" ({title})" if title else ""
    origin = f" from {source_ref}" if source_ref else ""
    return (
        f"Record in the graph the facts stated in this text{origin}{about}: who and what it is "
        "about, what happened, when, and how they relate to what the graph already holds."
    )


def _with_trust(settings: Settings, producer: str, confidence: float | None) -> Settings:
    """``settings`` whose trust for ``producer`` is ``confidence`` (unchanged without one)."""
    if confidence is None:
        return settings
    from kgot.config import Trust

    memory = settings.memory
    current = memory.trust_for(producer)
    trust = {
        **memory.trust,
        producer: Trust(confidence=confidence, source_kind=current.source_kind),
    }
    return settings.model_copy(update={"memory": memory.model_copy(update={"trust": trust})})


def _add_usage(report: IngestReport, calls: list[Any]) -> None:
    for call in calls:
        report.llm_calls += 1
        report.input_tokens += call.input_tokens
        report.output_tokens += call.output_tokens
        if report.cost_usd is not None:
            report.cost_usd = None if call.cost_usd is None else report.cost_usd + call.cost_usd
