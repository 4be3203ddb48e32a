"""The Python API: :func:`ask`, :func:`ask_async`, :func:`resume`, :func:`resume_async`.

Every option a user tunes is a typed keyword argument (an IDE lists them; a misspelt one is a
``TypeError``, as in any Python call). Options that are settings are laid over ``settings``
(default: the configuration file and the ``KGOT_*`` environment), as ``kgot ask``'s flags are
(:mod:`kgot.controller.arguments`); the run itself is :mod:`kgot.controller.run`'s.

The synchronous forms run the coroutine to its end, also where an event loop is running already
(:mod:`kgot.controller.blocking`). Every argument is documented in docs/python.md.

The signatures are written out four times rather than derived from one another (a ParamSpec
wrapper would hide them from IDEs and ``help()``); tests/controller/test_controller_python_api.py
keeps them in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.config import BackendName, SandboxKind, Settings, StructuredMethod, load_settings
from kgot.controller.arguments import chat_models, sandbox_argument, store_location, with_arguments
from kgot.controller.blocking import run_to_end
from kgot.controller.result import AskResult
from kgot.controller.run import continue_run, start_run
from kgot.tracing import EventSink

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from kgot.persistence import Store
    from kgot.sandbox import Sandbox


def ask(
    question: str,
    *,
    model: str | BaseChatModel | None = None,
    planning_model: str | BaseChatModel | None = None,
    execution_model: str | BaseChatModel | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    structured_output: StructuredMethod | None = None,
    timeout: float | None = None,
    backend: BackendName | None = None,
    entity: str | None = None,
    attachments: Sequence[str | Path] = (),
    graph_file: str | Path | None = None,
    db: str | Path | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
    sandbox: SandboxKind | Sandbox | None = None,
    votes: int | None = None,
    max_iterations: int | None = None,
    max_tool_calls: int | None = None,
    fix_code_retries: int | None = None,
    retrieve_retries: int | None = None,
    solution_samples: int | None = None,
    graph_token_budget: int | None = None,
    gaia_format: bool | None = None,
    run_id: str | None = None,
    on_event: EventSink | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
) -> AskResult:
    """Answer ``question`` with the KGoT loop and return the result.

    For code that does not await (scripts, notebooks, synchronous handlers). It also works where
    an event loop is running already (Jupyter, a FastAPI handler, a LangGraph node): the run
    then goes on a thread with a loop of its own while this call waits, which blocks the
    caller's loop meanwhile; async code should ``await kgot.ask_async(...)`` instead. Ctrl-C,
    or a cancellation of the calling task, stops the run (recorded as interrupted, resumable).

    Options left ``None`` keep their value from ``settings``.

    Args:
        question: the question (must not be empty).
        model: the model of both roles: a ``"provider:name"`` string (``"openai:gpt-4o-mini"``,
            ``"scripted:replies.json"``) or a LangChain chat model object.
        planning_model: the model that votes, writes graph code and queries, and answers
            (beats ``model`` for that role); a name or a chat model.
        execution_model: the model that picks tool calls (beats ``model`` for that role).
        base_url: an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio).
        api_key: the endpoint's API key (never stored with the run).
        structured_output: how JSON answers are asked for: ``"auto"``, ``"json_schema"``,
            ``"tool_calling"``, ``"json_object"`` or ``"prompt"``.
        timeout: seconds per model call.
        backend: ``"networkx"`` (Python graph code) or ``"rdf"`` (SPARQL).
        entity: grow this entity's persistent graph; ``None`` = an ephemeral graph.
        attachments: files the question refers to; tools receive them by path.
        graph_file: start the ephemeral graph from this graph file (``.json``, ``.graphml``,
            ``.ttl``, ``.nt``); the file is never modified. Not with ``entity``.
        db: the store: a SQLite path or a ``postgresql://`` URL (default: ``KGOT_DB``).
        store: an open store instead of ``db`` (the caller closes it).
        settings: the whole configuration (:class:`kgot.config.Settings`); the arguments
            above override its values. Default: the configuration file and the environment.
        sandbox: where model-written code runs: a kind (``"auto"``, ``"bwrap"``,
            ``"fallback"``, ``"docker"``, ``"subprocess"``) or an open sandbox (the caller
            closes it).
        votes: concurrent votes per INSERT/RETRIEVE decision.
        max_iterations: rounds before retrieval and a solution are forced.
        max_tool_calls: tool calls per INSERT step.
        fix_code_retries: attempts to fix graph code that fails.
        retrieve_retries: query attempts when a query fails or finds nothing.
        solution_samples: answers sampled before the most frequent is picked.
        graph_token_budget: the most tokens of graph one prompt shows.
        gaia_format: format the answer as the GAIA benchmark expects.
        run_id: the new run's id (default: a new UUID); ``resume(run_id)`` continues it.
        on_event: called with every trace event as it happens (a model of
            :mod:`kgot.tracing.events`), on the thread that runs the run; an exception in
            it stops its calls, not the run.
        models: chat models by role (``{"planning": …, "execution": …}``), the older form of
            ``planning_model`` / ``execution_model``; a role given twice is refused.
        extra_tools: LangChain tools offered to the model besides kgot's.
        checkpointer: a LangGraph checkpointer (default: the store's database).
        handle_signals: while the run goes, SIGTERM and SIGHUP stop it as Ctrl-C does (where
            they are at their default action, in the main thread with no running loop); off by
            default, so a program keeps its own signal handling.

    Raises:
        TypeError: an unknown keyword argument, or a model or sandbox of the wrong type.
        UsageError: empty question, a missing attachment, ``entity`` with ``graph_file``,
            ``db`` with ``store``, a role's model given twice.
        ConfigError: an invalid argument value (named), no model configured, bad settings.
        GraphFileError: ``graph_file`` cannot be read.
        EntityNotFoundError: ``entity`` does not exist.
        StoreError: the database cannot be reached.
    """
    return run_to_end(
        ask_async(
            question,
            model=model,
            planning_model=planning_model,
            execution_model=execution_model,
            base_url=base_url,
            api_key=api_key,
            structured_output=structured_output,
            timeout=timeout,
            backend=backend,
            entity=entity,
            attachments=attachments,
            graph_file=graph_file,
            db=db,
            store=store,
            settings=settings,
            sandbox=sandbox,
            votes=votes,
            max_iterations=max_iterations,
            max_tool_calls=max_tool_calls,
            fix_code_retries=fix_code_retries,
            retrieve_retries=retrieve_retries,
            solution_samples=solution_samples,
            graph_token_budget=graph_token_budget,
            gaia_format=gaia_format,
            run_id=run_id,
            on_event=on_event,
            models=models,
            extra_tools=extra_tools,
            checkpointer=checkpointer,
            handle_signals=handle_signals,
        )
    )


async def ask_async(
    question: str,
    *,
    model: str | BaseChatModel | None = None,
    planning_model: str | BaseChatModel | None = None,
    execution_model: str | BaseChatModel | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    structured_output: StructuredMethod | None = None,
    timeout: float | None = None,
    backend: BackendName | None = None,
    entity: str | None = None,
    attachments: Sequence[str | Path] = (),
    graph_file: str | Path | None = None,
    db: str | Path | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
    sandbox: SandboxKind | Sandbox | None = None,
    votes: int | None = None,
    max_iterations: int | None = None,
    max_tool_calls: int | None = None,
    fix_code_retries: int | None = None,
    retrieve_retries: int | None = None,
    solution_samples: int | None = None,
    graph_token_budget: int | None = None,
    gaia_format: bool | None = None,
    run_id: str | None = None,
    on_event: EventSink | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
) -> AskResult:
    """Answer ``question`` with the KGoT loop: :func:`ask` for async code (``await
    kgot.ask_async(...)``), with the same arguments, documented there. Cancelling the call
    stops the run (recorded as interrupted, resumable)."""
    names, chat = chat_models(
        model=model, planning_model=planning_model, execution_model=execution_model, models=models
    )
    kind, open_sandbox = sandbox_argument(sandbox)
    arguments = {
        **names,
        "base_url": base_url,
        "api_key": api_key,
        "structured_output": structured_output,
        "timeout": timeout,
        "backend": backend,
        "db": store_location(db, store),
        "sandbox": kind,
        "votes": votes,
        "max_iterations": max_iterations,
        "max_tool_calls": max_tool_calls,
        "fix_code_retries": fix_code_retries,
        "retrieve_retries": retrieve_retries,
        "solution_samples": solution_samples,
        "graph_token_budget": graph_token_budget,
        "gaia_format": gaia_format,
    }
    return await start_run(
        question,
        settings=with_arguments(settings or load_settings(), arguments),
        attachments=attachments,
        entity=entity,
        graph_file=graph_file,
        run_id=run_id,
        models=chat,
        extra_tools=extra_tools,
        on_event=on_event,
        store=store,
        checkpointer=checkpointer,
        handle_signals=handle_signals,
        sandbox=open_sandbox,
    )


def resume(
    run_id: str,
    *,
    model: str | BaseChatModel | None = None,
    planning_model: str | BaseChatModel | None = None,
    execution_model: str | BaseChatModel | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    structured_output: StructuredMethod | None = None,
    timeout: float | None = None,
    db: str | Path | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
    sandbox: SandboxKind | Sandbox | None = None,
    votes: int | None = None,
    max_iterations: int | None = None,
    max_tool_calls: int | None = None,
    fix_code_retries: int | None = None,
    retrieve_retries: int | None = None,
    solution_samples: int | None = None,
    graph_token_budget: int | None = None,
    gaia_format: bool | None = None,
    overrides: Mapping[str, Any] | None = None,
    on_event: EventSink | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
) -> AskResult:
    """Continue the interrupted run ``run_id`` from its last checkpoint and return its result
    (a finished run is only reported). Works with or without a running event loop, as
    :func:`ask` does.

    The run keeps its question, attachments, entity, starting graph and backend, and the
    options it started with (models, endpoints, loop limits, sandbox kind; never secrets such
    as ``api_key``, which come from ``settings`` or the arguments). The arguments change
    options for the rest of the run, with :func:`ask`'s meaning; so does ``overrides``, a
    mapping of dotted setting paths (``{"llm.max_retries": 8}``) for settings without an
    argument of their own (the arguments win over it).

    Raises:
        UsageError: no run with that id has a checkpoint, or it is running already.
        TypeError, ConfigError: as for :func:`ask`.
    """
    return run_to_end(
        resume_async(
            run_id,
            model=model,
            planning_model=planning_model,
            execution_model=execution_model,
            base_url=base_url,
            api_key=api_key,
            structured_output=structured_output,
            timeout=timeout,
            db=db,
            store=store,
            settings=settings,
            sandbox=sandbox,
            votes=votes,
            max_iterations=max_iterations,
            max_tool_calls=max_tool_calls,
            fix_code_retries=fix_code_retries,
            retrieve_retries=retrieve_retries,
            solution_samples=solution_samples,
            graph_token_budget=graph_token_budget,
            gaia_format=gaia_format,
            overrides=overrides,
            on_event=on_event,
            models=models,
            extra_tools=extra_tools,
            checkpointer=checkpointer,
            handle_signals=handle_signals,
        )
    )


async def resume_async(
    run_id: str,
    *,
    model: str | BaseChatModel | None = None,
    planning_model: str | BaseChatModel | None = None,
    execution_model: str | BaseChatModel | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    structured_output: StructuredMethod | None = None,
    timeout: float | None = None,
    db: str | Path | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
    sandbox: SandboxKind | Sandbox | None = None,
    votes: int | None = None,
    max_iterations: int | None = None,
    max_tool_calls: int | None = None,
    fix_code_retries: int | None = None,
    retrieve_retries: int | None = None,
    solution_samples: int | None = None,
    graph_token_budget: int | None = None,
    gaia_format: bool | None = None,
    overrides: Mapping[str, Any] | None = None,
    on_event: EventSink | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    handle_signals: bool = False,
) -> AskResult:
    """Continue the interrupted run ``run_id``: :func:`resume` for async code, with the same
    arguments, documented there."""
    names, chat = chat_models(
        model=model, planning_model=planning_model, execution_model=execution_model, models=models
    )
    kind, open_sandbox = sandbox_argument(sandbox)
    location = store_location(db, store)
    arguments = {
        **names,
        "base_url": base_url,
        "api_key": api_key,
        "structured_output": structured_output,
        "timeout": timeout,
        "sandbox": kind,
        "votes": votes,
        "max_iterations": max_iterations,
        "max_tool_calls": max_tool_calls,
        "fix_code_retries": fix_code_retries,
        "retrieve_retries": retrieve_retries,
        "solution_samples": solution_samples,
        "graph_token_budget": graph_token_budget,
        "gaia_format": gaia_format,
    }
    # The store is where the checkpoint is looked for: it is laid over the settings first.
    base = with_arguments(settings or load_settings(), {"db": location})
    return await continue_run(
        run_id,
        settings=base,
        arguments=arguments,
        overrides=overrides,
        models=chat,
        extra_tools=extra_tools,
        on_event=on_event,
        store=store,
        checkpointer=checkpointer,
        handle_signals=handle_signals,
        sandbox=open_sandbox,
    )
