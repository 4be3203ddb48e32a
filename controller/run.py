"""Running one question end to end: build the services, run the graph, report the result."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import networkx as nx

from kgot.config import Settings, load_settings, nested_overrides, public_dump
from kgot.controller.arguments import with_arguments
from kgot.controller.context import RunContext, warm_pool_once_open
from kgot.controller.graph import build_controller_graph, run_config
from kgot.controller.result import AskResult
from kgot.controller.run_record import EventRecorder
from kgot.controller.signals import RunTerminated, stopped_by_termination
from kgot.controller.state import RunState
from kgot.errors import GraphFileError, KgotError, UsageError
from kgot.graph_model import Changeset, apply_to_networkx
from kgot.llm import NoScriptedReplyError
from kgot.persistence import storable_text
from kgot.tracing import (
    EventSink,
    RunFinished,
    RunStarted,
    StepFinished,
    TraceEvent,
    Usage,
    add_usage,
    empty_usage,
    span,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from kgot.graph_backends import GraphBackend
    from kgot.persistence import Store, StoreLimits
    from kgot.sandbox import Sandbox


@dataclass(frozen=True)
class _RunSpec:
    """What identifies a run across resumes (kept in the state and the runs table)."""

    run_id: str
    question: str
    attachments: tuple[str, ...]
    entity: str | None
    backend: str
    graph_file: str | None = None

    def described(self) -> dict[str, Any]:
        """What a run_started event says of the run."""
        return {
            "kind": "ask",
            "question": self.question,
            "run_id": self.run_id,
            "backend": self.backend,
            "entity": self.entity,
        }


async def start_run(
    question: str,
    *,
    settings: Settings,
    attachments: Sequence[str | Path] = (),
    entity: str | None = None,
    graph_file: str | Path | None = None,
    run_id: str | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    on_event: EventSink | None = None,
    store: Store | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
    sandbox: Sandbox | None = None,
) -> AskResult:
    """Answer ``question`` with the KGoT loop under ``settings`` (the arguments are
    :func:`kgot.controller.ask_async`'s, once its keyword arguments were laid over the
    settings).

    Raises:
        UsageError: empty question, a missing attachment, or both ``entity`` and
            ``graph_file``.
        GraphFileError: ``graph_file`` cannot be read.
        ConfigError: no model configured, bad settings.
        EntityNotFoundError: ``entity`` does not exist.
        StoreError: the database cannot be reached.
    """
    # A NUL or a lone surrogate (from a client, a file, a pasted page) could be neither
    # checkpointed nor stored: each becomes U+FFFD, as in everything the store keeps.
    question = storable_text(question).strip()
    if not question:
        raise UsageError('the question is empty; pass the question text, e.g. kgot ask "…"')
    if entity and graph_file:
        raise UsageError(
            "give either an entity or a graph file to start from, not both "
            "(import the file into the entity with `kgot graph import --entity`)"
        )
    paths = tuple(_check_attachment(path) for path in attachments)
    spec = _RunSpec(
        run_id=run_id or str(uuid.uuid4()),
        question=question,
        attachments=paths,
        entity=entity,
        backend=settings.controller.backend,
        graph_file=str(Path(graph_file).expanduser().resolve()) if graph_file else None,
    )
    return await _execute(
        spec,
        settings,
        models=models,
        extra_tools=extra_tools,
        on_event=on_event,
        store=store,
        checkpointer=checkpointer,
        resume=False,
        handle_signals=handle_signals,
        sandbox=sandbox,
    )


async def is_resumable(run_id: str, settings: Settings | None = None) -> bool:
    """Whether ``run_id`` has a checkpoint :func:`resume_async` can continue (a run stopped
    before its first checkpoint has none: nothing of it was saved)."""
    snapshot = await _last_checkpoint(run_id, settings or load_settings(), None, None)
    if snapshot is None:
        return False
    return bool((snapshot.values or {}).get("question")) and bool(snapshot.next)


async def _last_checkpoint(
    run_id: str,
    settings: Settings,
    store: Store | None,
    checkpointer: BaseCheckpointSaver | None,
) -> Any:
    """The run's latest LangGraph state snapshot (empty values when it has none), or ``None``
    when there is no store at all (looking for a run creates none)."""
    from kgot.persistence import StoreNotFoundError

    try:
        async with _opened(settings, store, checkpointer, create=False) as (_store, saver):
            return await build_controller_graph(saver).aget_state(
                run_config(run_id, settings.controller)
            )
    except StoreNotFoundError:
        return None


async def continue_run(
    run_id: str,
    *,
    settings: Settings,
    arguments: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    on_event: EventSink | None = None,
    store: Store | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
    sandbox: Sandbox | None = None,
) -> AskResult:
    """Continue an interrupted run from its last checkpoint (a finished run is just reported).

    The run continues with the options it started with (models, endpoints, loop limits,
    sandbox, tools; never secrets, which come from ``settings``); ``overrides`` (dotted paths,
    e.g. ``{"llm.timeout": 300}``) and then the keyword ``arguments`` of
    :func:`kgot.controller.resume_async` (``{"timeout": 300}``; see
    :mod:`kgot.controller.arguments`) change some of them for the rest of the run. The other
    arguments are :func:`start_run`'s.

    Raises:
        UsageError: no run with that id has a checkpoint.
    """
    snapshot = await _last_checkpoint(run_id, settings, store, checkpointer)
    values: dict[str, Any] = dict(snapshot.values or {}) if snapshot is not None else {}
    if not values.get("question"):
        raise UsageError(f"no run {run_id!r} to resume; list runs with `kgot runs list`")
    spec = _RunSpec(
        run_id=run_id,
        question=values["question"],
        attachments=tuple(values.get("attachments", [])),
        entity=values.get("entity"),
        backend=values["backend"],
        graph_file=values.get("graph_file"),
    )
    settings = with_arguments(
        settings, arguments or {}, values["options"], nested_overrides(overrides or {})
    )
    return await _execute(
        spec,
        settings,
        models=models,
        extra_tools=extra_tools,
        on_event=on_event,
        store=store,
        checkpointer=checkpointer,
        resume=True,
        handle_signals=handle_signals,
        sandbox=sandbox,
    )


async def _execute(
    spec: _RunSpec,
    settings: Settings,
    *,
    models: Mapping[str, BaseChatModel] | None,
    extra_tools: Sequence[BaseTool],
    on_event: EventSink | None,
    store: Store | None,
    checkpointer: BaseCheckpointSaver | None,
    resume: bool,
    handle_signals: bool,
    sandbox: Sandbox | None = None,
) -> AskResult:
    from kgot.llm import UsageLedger, build_llm_clients

    ledger = UsageLedger()
    # Fails early without a model. On a thread: the first build imports the provider's client
    # library (~0.9 s for langchain-openai), which must not hold an event loop others share.
    roles = await finish_in_thread(lambda: build_llm_clients(settings, ledger, models=models))
    limits = settings.store.limits()
    async with contextlib.AsyncExitStack() as stack:
        # A new run's sandbox and starting graph can refuse it; both are checked before the
        # store is opened, which creates the default store: a refused run leaves none behind.
        # The graph goes first: a refused one never starts sandbox workers, which would be
        # warming in threads while the process exits.
        start = None if resume or spec.entity else _start_graph(spec.graph_file, limits)
        sandbox = await _run_sandbox(stack, settings, spec.backend, sandbox, resume=resume)
        opened_store, saver = await stack.enter_async_context(
            _opened(settings, store, checkpointer, entity=spec.entity)
        )
        session = opened_store.session(spec.entity) if spec.entity else None
        controller = await finish_in_thread(lambda: build_controller_graph(saver))  # ~10 ms
        config = run_config(spec.run_id, settings.controller)
        snapshot = await controller.aget_state(config)
        values: dict[str, Any] = dict(snapshot.values or {})
        if not resume and (values or opened_store.get_run(spec.run_id) is not None):
            raise UsageError(
                f"run {spec.run_id!r} already exists; continue it with `kgot ask --resume "
                f"{spec.run_id}` or choose another --run-id"
            )
        await _claim(stack, opened_store, spec.run_id, resume=resume)
        if resume and not snapshot.next:  # finished (or failed at the very end): report it
            status = values.get("status") or "failed"
            return _result(spec, values, None, status=status, limits=limits)
        # Kept in the store as the run goes (`kgot runs show`); what a stopped run left
        # unwritten is written as it ends.
        trace = await stack.enter_async_context(
            _Collector(on_event, EventRecorder(opened_store, spec.run_id), otel_sink(settings))
        )
        ctx = await _services(
            stack,
            spec,
            settings,
            sandbox=sandbox or await open_run_sandbox(stack, settings, spec.backend),
            start=start,
            roles=roles,
            ledger=ledger,
            store=opened_store,
            session=session,
            extra_tools=extra_tools,
            values=values,
            collect=trace,
        )
        ctx.unsaved_commits_possible = resume and "update_graph" in snapshot.next
        ctx.iteration = values.get("iteration", 0)
        # The run's root span, open until the run ends: its steps are its children (every
        # invocation of a resumed run is a root span of its own, under the same run id).
        stack.enter_context(span(sink=trace, iteration=lambda: ctx.iteration))
        # What the checkpoint held when this invocation began: with the steps' usage in the
        # trace, the totals at any moment, also when no checkpoint follows a step.
        carried: Usage = values.get("usage") or empty_usage()
        await _record_start(opened_store, spec, carried)
        trace(RunStarted(iteration=ctx.iteration, resumed=resume, **spec.described()))
        stop_signals = stack.enter_context(stopped_by_termination(enabled=handle_signals))
        failure: KgotError | None = None
        try:
            first = None if resume else _initial_state(spec, public_dump(settings))
            # The steps' events come through LangGraph's custom stream (what the node wrapper
            # and the steps write); the state is read once, at the end (streaming "updates" or
            # "values" would cost a copy of the state per step).
            async for _mode, event in controller.astream(
                first, config, context=ctx, durability="sync", stream_mode=["custom"]
            ):
                trace(cast("TraceEvent", event))  # only kgot's steps write to this stream
            final = (await controller.aget_state(config)).values
        except (asyncio.CancelledError, KeyboardInterrupt):
            # The trace ends too (the root span closes), then the record.
            trace(RunFinished(status="interrupted", answer="", error="stopped before it ended"))
            await _record_end(opened_store, spec, "interrupted", None, {**trace.usage(carried)})
            if stop_signals:
                raise RunTerminated(stop_signals[0]) from None
            raise
        except KgotError as error:
            failure = error
            snapshot = await controller.aget_state(config)
            result = await finish_in_thread(
                functools.partial(
                    _result,
                    spec,
                    dict(snapshot.values or {}),
                    ctx,
                    status="failed",
                    error=str(error),
                    resumable=bool(snapshot.next),
                    usage=trace.usage(carried),
                )
            )
        except Exception as error:
            # A bug, not the user's problem: still never leave the run recorded as running.
            totals = {**trace.usage(carried), "error": f"internal error: {type(error).__name__}"}
            await _record_end(opened_store, spec, "failed", None, totals)
            raise
        else:
            status = final.get("status", "failed")
            result = await finish_in_thread(
                functools.partial(_result, spec, dict(final), ctx, status=status)
            )
        return await _end_run(opened_store, spec, trace, result, failure)


async def _end_run(
    store: Store, spec: _RunSpec, trace: _Collector, result: AskResult, failure: KgotError | None
) -> AskResult:
    """Record how the run ended and close its trace. A scripted model with no reply for a step
    (``failure``) is a script to extend, not a run to resume as it is: its configuration error
    is raised once the run is recorded as failed, so that `kgot ask` prints one line naming the
    step and the file and exits 2."""
    await _record_end(store, spec, result.status, result.answer, _run_totals(result))
    trace(
        RunFinished(
            iteration=result.iterations,
            status=result.status,
            answer=result.answer,
            error=result.error,
        )
    )
    result.trace = trace.events
    if isinstance(failure, NoScriptedReplyError):
        raise failure
    return result


async def _record_start(store: Store, spec: _RunSpec, carried: Usage) -> None:
    """Record the run as running (:meth:`Store.start_run`, which claims it). A cancel that
    arrives meanwhile is raised once the run is recorded, so it is recorded as interrupted
    before the cancel goes on."""
    options = {
        "backend": spec.backend,
        "attachments": list(spec.attachments),
        "graph_file": spec.graph_file,
    }
    try:
        await finish_in_thread(
            lambda: store.start_run(spec.run_id, spec.question, spec.entity, options)
        )
    except asyncio.CancelledError:
        await _record_end(store, spec, "interrupted", None, {**carried})
        raise


async def _record_end(
    store: Store, spec: _RunSpec, status: str, answer: str | None, totals: Mapping[str, Any]
) -> None:
    """Record how the run ended (:meth:`Store.finish_run`)."""
    await finish_in_thread(lambda: store.finish_run(spec.run_id, status, answer, totals))


def otel_sink(settings: Settings) -> EventSink | None:
    """The OpenTelemetry exporter when ``[tracing] otel`` is on, else ``None``.

    Raises:
        ConfigError: it is on and OpenTelemetry is not installed.
    """
    if not settings.tracing.otel:
        return None
    from kgot.tracing import shared_exporter

    return shared_exporter()


class _Collector:
    """The one place a run's events are gathered: the steps' events as ``astream`` yields
    them, and those raised outside the steps. Each is kept for the result's trace, recorded
    in the store by ``recorder`` (the rest when the collector is closed), exported by
    ``exporter`` (OpenTelemetry, when on) and handed to ``on_event``."""

    def __init__(
        self,
        on_event: EventSink | None,
        recorder: EventRecorder | None = None,
        exporter: EventSink | None = None,
    ) -> None:
        self.events: list[TraceEvent] = []
        self.on_event = on_event
        self.recorder = recorder
        self.exporter = exporter

    async def __aenter__(self) -> _Collector:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.recorder is not None:  # the run stopped between two writes
            # A store write (it may wait for the database's lock): on a thread.
            await finish_in_thread(self.recorder.flush)

    def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)
        if self.recorder is not None:
            self.recorder.add(event)  # written in batches, at steps' ends
        if self.exporter is not None:
            try:
                self.exporter(event)
            except Exception:  # a trace back end must not end the run either
                log.exception("exporting the trace failed; this run exports no more of it")
                self.exporter = None
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a broken display must not end the run
            log.exception("on_event failed on a %s event; it gets no more events", event.type)
            self.on_event = None

    def usage(self, carried: Usage) -> Usage:
        """The run's totals from ``carried`` (the checkpoint's when this invocation began) and
        the steps this invocation finished, those whose update no checkpoint holds included
        (a step that failed or was stopped)."""
        total = carried
        for event in self.events:
            if isinstance(event, StepFinished):
                total = add_usage(total, event.usage)
        return total


# finish_in_thread's threads. Not the event loop's default executor: its few threads (CPU count
# + 4) may all be waiting for sandbox jobs, the very jobs a close would kill.
_FINISHING = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kgot-finish")


async def finish_in_thread(call: Callable[[], T]) -> T:
    """``call()`` on a worker thread, seen through to its end.

    For blocking work as a run starts and ends (opening and closing its sandbox, a close
    killing any job still running; loading its graph; recording the run; building its
    result): it must not hold the event loop, which in the MCP server serves every tenant,
    and it must not be cut short either. A cancel that
    arrives meanwhile (a cancelled run unwinding may be cancelled again, e.g. by an anyio
    cancel scope, which keeps cancelling) is raised once ``call`` has returned; an error of
    ``call`` is raised instead.
    """
    context = contextvars.copy_context()  # what asyncio.to_thread would hand the thread
    done = asyncio.get_running_loop().run_in_executor(_FINISHING, context.run, call)
    cancelled: asyncio.CancelledError | None = None
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError as cancel:
            cancelled = cancel
    result = done.result()
    if cancelled is not None:
        raise cancelled
    return result


def clean_up_after_dead_runs(store: Store) -> tuple[list[str], list[Path]]:
    """Record runs whose process died without saying so (SIGKILL, a crash, a restart) as
    ``interrupted`` (resumable), and remove the temporary tool directories such processes
    left; return the run ids and directories. Live runs and their directories are left alone.
    """
    from kgot.tools import remove_stale_workspaces

    return store.interrupt_dead_runs(), remove_stale_workspaces()


async def _claim(
    stack: contextlib.AsyncExitStack, store: Store, run_id: str, *, resume: bool
) -> None:
    """Refuse a run that is running already, here or (when it is resumed) in another process of
    this machine. The look at the store is a quick refusal before the sandbox and tools start;
    :meth:`Store.start_run` decides, while it claims the run."""
    # Writes (dead runs marked) and a scan of the temporary directory: not on the event loop.
    await finish_in_thread(lambda: clean_up_after_dead_runs(store))
    stack.enter_context(_claimed_in_this_process(run_id))
    if resume:
        store.check_not_running(run_id)


# Runs this process is running now. The store tells processes apart (start_run claims a run
# for one of them); two threads of one process share its record there, so they are told apart
# here.
_running_here: set[str] = set()
_running_here_lock = threading.Lock()


@contextlib.contextmanager
def _claimed_in_this_process(run_id: str) -> Iterator[None]:
    with _running_here_lock:
        if run_id in _running_here:
            raise UsageError(
                f"run {run_id} is still running in this process; wait for it to end before "
                "resuming it"
            )
        _running_here.add(run_id)
    try:
        yield
    finally:
        with _running_here_lock:
            _running_here.discard(run_id)


async def _services(
    stack: contextlib.AsyncExitStack,
    spec: _RunSpec,
    settings: Settings,
    *,
    sandbox: Sandbox,
    start: nx.MultiDiGraph | None,
    roles: Any,
    ledger: Any,
    store: Store,
    session: Any,
    extra_tools: Sequence[BaseTool],
    values: dict[str, Any],
    collect: EventSink,
) -> RunContext:
    """Graph backend and tools for one invocation (on ``sandbox`` and, for an ephemeral graph,
    the ``start`` graph when it was read already), closed with ``stack``."""
    from kgot.graph_backends import open_backend
    from kgot.tools import ToolContext, ToolRunner, build_tools

    def on_graph(graph: nx.MultiDiGraph) -> GraphBackend:
        return open_backend(
            spec.backend, sandbox, graph, max_property_bytes=settings.store.max_property_bytes
        )

    def backend_on_graph() -> GraphBackend:
        if session:
            from kgot.controller.working_set import open_entity_backend

            return open_entity_backend(
                session,
                spec.question,
                on_graph,
                max_nodes=settings.controller.working_set_nodes,
            )
        initial = (
            start if start is not None else _start_graph(spec.graph_file, settings.store.limits())
        )
        return on_graph(_replay(initial, values.get("changesets", [])))

    # Reading the graph (under the entity session's lock) and building the backend on it (which
    # checks and indexes it) take as long as the graph is large, ~0.1-0.2 s of CPU for 10,000
    # nodes (an entity's working set is read by index: see working_set.py): on a thread, so
    # that the event loop goes on serving meanwhile.
    backend = await finish_in_thread(backend_on_graph)
    # Stops the run's resident worker, killing a job it may be running (a cancelled run).
    stack.push_async_callback(finish_in_thread, backend.close)
    # The run's own worker starts and takes the graph while the first votes are with the
    # model; the shared pool (python tool, conversion) warms up after it, not against it.
    backend.warm_up(then=warm_pool_once_open(stack, sandbox))
    context = ToolContext.from_settings(
        settings,
        sandbox=sandbox,
        llm=roles.execution,
        attachments=[Path(p) for p in spec.attachments],
    )
    own_tools = build_tools(context)
    type_tools: list[BaseTool] = []
    provided: list[BaseTool] = []
    if session is not None:
        from kgot.controller.tool_providers import entity_tools
        from kgot.tools import build_type_tools

        type_tools = list(build_type_tools(session, run_id=spec.run_id))
        type_tools += _memory_tools(session)
        builtin = {tool.name for tool in [*own_tools, *type_tools]}
        given = {tool.name for tool in extra_tools}
        # Providers read the store (the advisor its aides and price cache): off the loop.
        provided = await finish_in_thread(
            lambda: entity_tools(store, session.entity, builtin=builtin, given=given)
        )
    tools = [*own_tools, *extra_tools, *provided, *type_tools]
    return RunContext(
        settings=settings,
        run_id=spec.run_id,
        planning=roles.planning,
        execution=roles.execution,
        ledger=ledger,
        backend=backend,
        sandbox=sandbox,
        tools=tools,
        runner=ToolRunner(
            tools,
            timeout=settings.tools.timeout,
            max_output_chars=settings.tools.max_output_chars,
        ),
        session=session,
        collect=collect,
        type_tool_names=frozenset(tool.name for tool in type_tools),
    )


def _memory_tools(session: Any) -> list[BaseTool]:
    """The entity run's ``verify_claim`` tool, bound to the run's session (tools may not import
    kgot.memory, so the check is handed in). Listed with the type tools: their results are not
    turned into graph facts."""
    from kgot.memory import verify_claim
    from kgot.tools import build_memory_tools

    def check(subject: str, **claim: Any) -> dict[str, Any]:
        return verify_claim(session, subject, **claim).to_json()

    return build_memory_tools(check)


def _initial_state(spec: _RunSpec, options: dict[str, Any]) -> RunState:
    return RunState(
        options=options,
        question=spec.question,
        attachments=list(spec.attachments),
        entity=spec.entity,
        backend=spec.backend,
        graph_file=spec.graph_file,
        iteration=0,
    )


async def _run_sandbox(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    backend: str,
    given: Sandbox | None,
    *,
    resume: bool,
) -> Sandbox | None:
    """The sandbox a new run starts with: the caller's (its run's own worker prepared, a no-op
    when the caller did that), else a new one; a resumed run opens its own later, once its
    checkpoint says it has work left."""
    if given is not None:
        from kgot.graph_backends import prepare_backend

        prepare_backend(backend, given)
        return given
    return None if resume else await open_run_sandbox(stack, settings, backend)


async def open_run_sandbox(
    stack: contextlib.AsyncExitStack, settings: Settings, backend: str
) -> Sandbox:
    """The configured sandbox, closed with ``stack``. The run's own worker for ``backend``
    starts at once; the shared pool warms up once the run's graph is in that worker (see
    :func:`_services`)."""
    from kgot.graph_backends import prepare_backend
    from kgot.sandbox import open_sandbox

    # Opened and closed on a thread: the first open in a process probes the machine (~0.2 s),
    # and a close stops workers, killing any job still running.
    opened: list[Sandbox] = []

    def open_and_prepare() -> Sandbox:
        opened.append(open_sandbox(settings.sandbox))
        prepare_backend(backend, opened[0])
        return opened[0]

    try:
        return await finish_in_thread(open_and_prepare)
    finally:
        if opened:  # also when cancelled meanwhile, or when preparing failed
            stack.push_async_callback(finish_in_thread, opened[0].close)


@contextlib.asynccontextmanager
async def _opened(
    settings: Settings,
    store: Store | None,
    checkpointer: BaseCheckpointSaver | None,
    *,
    entity: str | None = None,
    create: bool = True,
) -> AsyncIterator[tuple[Store, BaseCheckpointSaver]]:
    """The given store and checkpointer, or ones opened (and closed) from the settings.

    A run on an ``entity`` needs the entity's store to exist: a missing one is reported like
    a missing entity, and nothing (database, checkpoint file) is created for it. Without
    ``create`` a missing store raises :class:`~kgot.persistence.StoreNotFoundError`.
    """
    from kgot.persistence import StoreNotFoundError, open_checkpointer, open_store

    async with contextlib.AsyncExitStack() as stack:
        if store is None:
            try:
                store = open_store(
                    settings.store.db,
                    create=create and entity is None,
                    limits=settings.store.limits(),
                )
            except StoreNotFoundError as missing:
                if entity is None:
                    raise
                from kgot.persistence import no_store_for_entity

                raise no_store_for_entity(entity, settings.store.db) from missing
            stack.callback(store.close)
        if checkpointer is not None:
            saver: BaseCheckpointSaver = checkpointer
        else:
            saver = await stack.enter_async_context(open_checkpointer(settings.store.db))
        yield store, saver


def _check_attachment(path: str | Path) -> str:
    # Absolute, but links are not followed: the name the user gave is the one tools see (a
    # Hugging Face cache links `report.pdf` to a blob without a suffix).
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    if not absolute.is_file():
        raise UsageError(f"attachment {path} does not exist or is not a file")
    return str(absolute)


def _start_graph(graph_file: str | None, limits: StoreLimits | None) -> nx.MultiDiGraph:
    """The graph a run without an entity starts from: empty, or read from ``graph_file``
    within the store's caps (``None``: the default ones), as ``kgot graph import`` reads one
    (a file too large to import is too large to hold in memory, checkpoint and show to the
    model as well).

    Raises:
        GraphFileError: the file cannot be read, is over a cap, or holds a property value
            larger than ``store.max_property_bytes`` (one line naming the file and the cap).
    """
    if graph_file is None:
        return nx.MultiDiGraph()
    from kgot.config import DEFAULT_LIMITS
    from kgot.graph_backends import read_import_file, size_problems
    from kgot.graph_model import edges_of, nodes_of

    limits = limits or DEFAULT_LIMITS
    path = Path(graph_file)
    graph = read_import_file(path, limits)
    # The backend refuses a change with a larger value; a value the file brings is held to
    # the same cap (every run's graph keeps it), in the words the backend uses.
    everything = Changeset(added_nodes=tuple(nodes_of(graph)), added_edges=tuple(edges_of(graph)))
    problems = size_problems(everything, limits.max_property_bytes)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise GraphFileError(f"{path}: {problems[0]}{more}")
    return graph


def _replay(graph: nx.MultiDiGraph, changesets: list[dict[str, Any]]) -> nx.MultiDiGraph:
    """Rebuild an ephemeral run's graph: its starting graph plus the changesets its checkpoint
    recorded."""
    for data in changesets:
        apply_to_networkx(graph, Changeset.from_dict(data))
    return graph


def _run_totals(result: AskResult) -> dict[str, Any]:
    """What the runs table keeps of a result: the figures, not the graph or the trace."""
    data = result.to_dict()
    data.pop("graph", None)
    return data


def _result(
    spec: _RunSpec,
    state: dict[str, Any],
    ctx: RunContext | None,
    *,
    status: str,
    error: str | None = None,
    resumable: bool = False,
    limits: StoreLimits | None = None,
    usage: Usage | None = None,
) -> AskResult:
    """The result of the run whose state is ``state``; its totals are the state's (the sum of
    its steps' usage) unless ``usage`` says otherwise (a run that stopped in a step). It holds
    the whole graph as node-link data (~0.3 s for 10,000 nodes): runs build it on a thread."""
    usage = usage or state.get("usage") or empty_usage()
    if ctx is not None:
        final_graph = ctx.backend.to_networkx()
    else:  # a finished run reported again: ephemeral graphs are rebuilt from the checkpoint
        final_graph = (
            None
            if spec.entity
            else _replay(_start_graph(spec.graph_file, limits), state.get("changesets", []))
        )
    graph = nx.node_link_data(final_graph, edges="edges") if final_graph is not None else {}
    return AskResult(
        answer=state.get("answer") or "",
        run_id=spec.run_id,
        status=status,  # type: ignore[arg-type]
        iterations=state.get("iteration", 0),
        tool_calls=usage["tool_calls"],
        llm_calls=usage["llm_calls"],
        failed_llm_calls=usage["failed_llm_calls"],
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cost_usd=usage["cost_usd"],
        duration_s=usage["duration_s"],
        usage_by_step=usage["by_step"],
        graph=graph,
        error=error or state.get("error"),
        resumable=resumable,
    )
