"""`kgot ask` and `kgot runs …`: answer questions and look at past runs."""

from __future__ import annotations

import asyncio
import bisect
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from kgot.cli.common import outcome_reached, print_json, printable, settings_from
from kgot.cli.layout import clip, plural
from kgot.errors import GraphFileError, UsageError

runs_app = typer.Typer(help="Look at past runs (checkpointed; resumable).", no_args_is_help=True)

_MODEL = "Model"
_LOOP = "Loop limits"


def ask(
    ctx: typer.Context,
    question: Annotated[
        str | None, typer.Argument(help="The question to answer; - reads it from stdin.")
    ] = None,
    question_file: Annotated[
        Path | None,
        typer.Option(help="Read the question from this file (UTF-8).", show_default=False),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="`provider:name` for both roles, e.g. openai:gpt-4o-mini.", rich_help_panel=_MODEL
        ),
    ] = None,
    planning_model: Annotated[
        str | None, typer.Option(help="Model for decisions and code.", rich_help_panel=_MODEL)
    ] = None,
    execution_model: Annotated[
        str | None, typer.Option(help="Model for tool calls.", rich_help_panel=_MODEL)
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, …).", rich_help_panel=_MODEL
        ),
    ] = None,
    structured_output: Annotated[
        str | None,
        typer.Option(
            help="auto | json_schema | tool_calling | json_object | prompt.", rich_help_panel=_MODEL
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds per LLM call.", rich_help_panel=_MODEL)
    ] = None,
    backend: Annotated[str | None, typer.Option(help="Graph backend: networkx | rdf.")] = None,
    sandbox: Annotated[
        str | None, typer.Option(help="Sandbox: auto | bwrap | fallback | docker | subprocess.")
    ] = None,
    entity: Annotated[
        str | None, typer.Option(help="Grow this entity's persistent graph (default: ephemeral).")
    ] = None,
    db: Annotated[
        str | None, typer.Option(help="Store: SQLite path or postgresql:// URL (default: KGOT_DB).")
    ] = None,
    graph: Annotated[
        Path | None,
        typer.Option(
            help="Start the (ephemeral) graph from this file (.json, .graphml, .ttl or .nt)."
        ),
    ] = None,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach", "-a", metavar="<path>", help="A file the question refers to (repeatable)."
        ),
    ] = None,
    votes: Annotated[
        int | None, typer.Option(help="Concurrent votes per decision.", rich_help_panel=_LOOP)
    ] = None,
    max_iterations: Annotated[
        int | None, typer.Option(help="Rounds before a solution is forced.", rich_help_panel=_LOOP)
    ] = None,
    # Two flags, not typer's `--gaia-format/--no-gaia-format` pair: a pair gets a help column
    # of its own, which squeezed every description of `ask --help` to 22 characters at 80.
    gaia_format: Annotated[
        bool, typer.Option("--gaia-format", help="Format the answer as GAIA expects.")
    ] = False,
    no_gaia_format: Annotated[
        bool,
        typer.Option(
            "--no-gaia-format", help="Plain answer, even where the config file asks for GAIA's."
        ),
    ] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Stream every step to stderr.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object with answer, usage and graph.")
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(help="Continue the interrupted run with this id (or a unique start of it)."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option(help="Id for the new run (default: random).")
    ] = None,
) -> None:
    """Answer QUESTION by building a knowledge graph (the KGoT loop)."""
    # Input and configuration are checked before anything heavy loads: the trace renderer,
    # the model clients and the controller bring LangChain and LangGraph (a second or more),
    # which a mistyped option or a missing model must not wait for.
    if resume:
        _check_resume_inputs(
            {
                "a question": question or question_file,
                "--entity": entity,
                "--attach": attach,
                "--graph": graph,
                "--run-id": run_id,
            }
        )
        resume = full_run_id(resume, settings_from(ctx, {"store.db": db}).store.db)
    else:
        question = _question_text(question, question_file)
        _check_files(attach, graph)
    flags = {
        "llm.model": model,
        "llm.planning.model": planning_model,
        "llm.execution.model": execution_model,
        "llm.base_url": base_url,
        "llm.structured_output": structured_output,
        "llm.timeout": timeout,
        "controller.backend": backend,
        "controller.votes": votes,
        "controller.max_iterations": max_iterations,
        "controller.gaia_format": _gaia_format(gaia_format, no_gaia_format),
        "sandbox.kind": sandbox,
    }
    store_flag = {"store.db": db}
    settings = None if resume else settings_from(ctx, {**flags, **store_flag})
    if settings is not None:
        _check_models(settings)

    from rich.console import Console

    from kgot.cli.trace import TraceRenderer

    err = Console(stderr=True, highlight=False)
    on_event = TraceRenderer(err) if trace else None
    the_run_id = resume or run_id or str(uuid.uuid4())
    try:
        if resume:
            from kgot.controller import resume_async

            # The run's own options come back from its checkpoint; only flags given now
            # override them (not the environment or the config file).
            result = asyncio.run(
                resume_async(
                    resume,
                    settings=settings_from(ctx, store_flag),
                    overrides=flags,
                    on_event=on_event,
                    handle_signals=True,  # a command: SIGTERM and SIGHUP stop it like Ctrl-C
                )
            )
        else:
            assert settings is not None  # loaded above for every new run
            overflow = _context_overflow(question or "", settings)
            if overflow:
                err.print(f"kgot: warning: {overflow}", soft_wrap=True, markup=False)
            result = _ask(question or "", settings, attach, entity, graph, the_run_id, on_event)
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM / SIGHUP (RunTerminated)
        message = _interrupted(the_run_id, settings_from(ctx, store_flag))
        err.print(message, soft_wrap=True, markup=False)
        raise typer.Exit(128 + getattr(stop, "signum", 2)) from None
    except GraphFileError as error:  # the graph to start from is bad input, like any argument
        raise UsageError(str(error)) from None

    _report(result, as_json, err)


def _report(result: Any, as_json: bool, err: Any) -> None:
    """Print a finished run's outcome: the answer (or JSON) on stdout, the summary and any
    failure on stderr.

    Raises:
        typer.Exit: the run failed (code 1).
    """
    from rich.text import Text

    # The run is over and recorded: Ctrl-C while its outcome is printed and the process ends
    # no longer interrupts anything (exit 130 with the answer on the screen would be a lie).
    outcome_reached(1 if result.status == "failed" else 0)
    if as_json:
        print_json(result.to_dict())
    elif result.answer:
        sys.stdout.write(printable(result.answer) + "\n")
    sys.stdout.flush()  # the answer is out now, not when the process ends (a pipe buffers it)
    if not as_json:
        err.print(Text(_summary(result), style="dim"), soft_wrap=True)
    if result.status == "failed":
        err.print(f"kgot: error: {result.error}", style="red", soft_wrap=True, markup=False)
        if result.resumable:
            err.print(
                "the run is checkpointed; after fixing the problem continue it with\n"
                f"  kgot ask --resume {result.run_id}",
                soft_wrap=True,
                markup=False,
            )
        raise typer.Exit(1)


def _ask(
    question: str,
    settings: Any,
    attach: list[Path] | None,
    entity: str | None,
    graph: Path | None,
    run_id: str,
    on_event: Any,
) -> Any:
    """Run the question. The sandbox opens first and starts the run's own worker, so that it
    boots (on another core) while this process imports the controller (LangGraph and
    LangChain: most of a second)."""
    from kgot.graph_backends import prepare_backend
    from kgot.sandbox import open_sandbox

    sandbox = open_sandbox(settings.sandbox)
    try:
        prepare_backend(settings.controller.backend, sandbox)
        from kgot.controller import ask_async

        return asyncio.run(
            ask_async(
                question,
                settings=settings,
                attachments=attach or (),
                entity=entity,
                graph_file=graph,
                run_id=run_id,
                on_event=on_event,
                handle_signals=True,  # a command: SIGTERM and SIGHUP stop it like Ctrl-C
                sandbox=sandbox,
            )
        )
    finally:
        sandbox.close()


def _check_resume_inputs(inputs: dict[str, Any]) -> None:
    """A resumed run keeps its own question and inputs: giving new ones is a mistake."""
    given = [name for name, value in inputs.items() if value]
    if given:
        raise UsageError(
            f"--resume continues a run with its own question and inputs; drop {given[0]}"
        )


def _question_text(question: str | None, question_file: Path | None) -> str:
    """The question from the argument, stdin (``-``) or ``--question-file``, not empty.

    Raises:
        UsageError: both the argument and the file are given, the file or stdin cannot be read
            as text, or the question is empty.
    """
    if question is not None and question_file is not None:
        raise UsageError("give the question as an argument or with --question-file, not both")
    source = "the question"
    try:
        if question_file is not None:
            source = f"--question-file {question_file}"
            question = question_file.read_text(encoding="utf-8")
        elif question == "-":
            source = "the question read from stdin"
            question = sys.stdin.read()
    except UnicodeDecodeError:
        raise UsageError(f"{source} is not UTF-8 text") from None
    except OSError as error:
        raise UsageError(f"cannot read {source}: {error.strerror or error}") from None
    if not (question and question.strip()):
        raise UsageError(
            f'{source} is empty; usage: kgot ask "your question" (or - to read it from stdin, '
            "or --question-file FILE)"
        )
    return question


def _gaia_format(wanted: bool, refused: bool) -> bool | None:
    """``--gaia-format`` / ``--no-gaia-format`` as a setting (``None``: neither given).

    Raises:
        UsageError: both are given.
    """
    if wanted and refused:
        raise UsageError("give --gaia-format or --no-gaia-format, not both")
    return True if wanted else False if refused else None


def _check_files(attach: list[Path] | None, graph: Path | None) -> None:
    """Missing files named on the command line, refused before the run's machinery loads
    (the run checks them again: it is also called from Python).

    Raises:
        UsageError: an attachment or the ``--graph`` file is not a file.
    """
    for path in attach or ():
        if not path.expanduser().is_file():
            raise UsageError(f"attachment {path} does not exist or is not a file")
    if graph is not None and not graph.expanduser().is_file():
        raise UsageError(f"--graph {graph} does not exist or is not a file")


def _check_models(settings: Any) -> None:
    """Refuse a run that cannot reach a model, before the sandbox starts or LangChain loads:
    a role without a model, or a configured base URL that accepts no connection (one probe
    each, milliseconds; at most ``PROBE_CONNECT_TIMEOUT`` seconds for one that never answers).
    The run's model clients then trust the probe instead of repeating it.

    Raises:
        ConfigError: no model configured, or an endpoint is unreachable (names its URL).
    """
    from kgot.config import ROLES
    from kgot.llm import endpoint_url, require_models

    require_models(settings.llm)
    urls = sorted({url for role in ROLES if (url := endpoint_url(getattr(settings.llm, role)))})
    if urls:
        from kgot.llm import ensure_reachable

        async def probe_all() -> None:
            await asyncio.gather(*(ensure_reachable(url) for url in urls))

        asyncio.run(probe_all())


def _context_overflow(question: str, settings: Any) -> str | None:
    """A warning when the question alone is longer than a role's context window, as the
    model's LangChain profile states it (no profile, no window known: no warning). The run
    still starts: the estimate over-counts, and some servers accept more than they state."""
    from kgot.errors import ConfigError
    from kgot.graph_model import count_tokens
    from kgot.llm import build_chat_model

    windows: list[tuple[int, str, str]] = []
    for role in ("planning", "execution"):
        role_settings = getattr(settings.llm, role)
        try:
            profile = build_chat_model(role_settings).profile or {}
        except ConfigError:
            continue  # the run reports the unusable model, after checking its other inputs
        window = profile.get("max_input_tokens")
        if isinstance(window, int) and window > 0:
            windows.append((window, role, role_settings.model))
    if not windows:
        return None
    window, role, model = min(windows, key=lambda known: known[0])  # planning first on ties
    tokens = count_tokens(question)
    if tokens <= window:
        return None
    return (
        f"the question alone is about {tokens:,} tokens, more than the {window:,}-token "
        f"context window of {model} ({role} model); shorten it, or pass the long text as a "
        "file with -a FILE (tools read files in pages)"
    )


def _interrupted(run_id: str, settings: Any) -> str:
    """What to say after Ctrl-C: how to resume, or that nothing was saved yet."""
    from kgot.controller import is_resumable

    try:
        resumable = asyncio.run(is_resumable(run_id, settings))
    except (KeyboardInterrupt, Exception):
        resumable = True  # cannot tell while exiting: keep the hint; --resume explains
    if not resumable:
        return "\ninterrupted before the run's first checkpoint: nothing to resume"
    return (
        f"\ninterrupted: run {run_id} is checkpointed; continue it with\n"
        f"  kgot ask --resume {run_id}"
    )


def _summary(result: Any) -> str:
    cost = "cost unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    tokens = result.input_tokens + result.output_tokens
    failed = f" ({result.failed_llm_calls} failed)" if result.failed_llm_calls else ""
    return (
        f"run {result.run_id} · {result.status} · {plural(result.iterations, 'iteration')} · "
        f"{plural(result.tool_calls, 'tool call')} · {plural(result.llm_calls, 'LLM call')}"
        f"{failed} · {plural(tokens, 'token')} · {cost} · {result.duration_s:.1f} s"
    )


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
    entity: Annotated[str | None, typer.Option(help="Only runs on this entity.")] = None,
    db: Annotated[str | None, typer.Option(help="Store (default: KGOT_DB / config).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List recent runs, newest first."""
    from kgot.cli.layout import Column, short_time, table_lines
    from kgot.persistence import open_store
    from kgot.tools import remove_stale_workspaces

    settings = settings_from(ctx, {"store.db": db})
    runs: list[Any] = []
    every_id: list[str] = []
    if _store_exists(settings.store.db):
        store = open_store(settings.store.db)
        try:
            # Runs whose process was killed show as interrupted (resumable), not running; what
            # such processes left in the temporary directory goes (what a new run also does).
            store.interrupt_dead_runs()
            remove_stale_workspaces()
            runs = store.list_runs(limit=limit, entity=entity)
            every_id = store.run_ids() if runs and not as_json else []
        finally:
            store.close()
    if as_json:
        print_json([_run_dict(run) for run in runs])
        return
    if not runs:
        typer.echo('no runs yet; start one with: kgot ask "…"')
        return
    length = abbreviation_length([run.run_id for run in runs], every_id)
    columns = [
        Column("run id", clip=False),  # what `runs show` takes: never cut
        Column("status"),
        Column("started"),
        Column("entity", widest=16),
        Column("question", share=2),
        Column("answer", share=1),
    ]
    rows = []
    for run in runs:
        data = _run_dict(run)
        rows.append(
            [
                data["run_id"][:length],
                data["status"],
                short_time(data.get("started_at")),
                data.get("entity") or "",
                data["question"],
                data.get("answer") or "",
            ]
        )
    for line in table_lines(columns, rows):
        typer.echo(line)


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run id (see `kgot runs list`).")],
    db: Annotated[str | None, typer.Option(help="Store (default: KGOT_DB / config).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show one run (a question, an ingestion or an aide cycle): what it was of, status,
    answer, totals, the tool calls it made, the commits it wrote and a timeline of its steps
    (from the events recorded as it ran)."""
    from kgot.cli.run_timeline import read_events
    from kgot.persistence import open_store
    from kgot.tracing import dump_trace

    settings = settings_from(ctx, {"store.db": db})
    run_id = full_run_id(run_id, settings.store.db)
    run = None
    stored: list[dict[str, Any]] = []
    commits: list[Any] = []
    if _store_exists(settings.store.db):
        store = open_store(settings.store.db)
        try:
            # A run whose process was killed shows as interrupted here too, not running.
            store.interrupt_dead_runs()
            run = store.get_run(run_id)
            stored = store.run_events(run_id) if run is not None else []
            commits = store.run_commits(run_id) if run is not None else []
        finally:
            store.close()
    if run is None:
        raise UsageError(f"no run {run_id!r}; list runs with `kgot runs list`")
    events = read_events(run_id, stored)  # validated: a drifted row fails here, loudly
    data = _run_dict(run)
    data["checkpoint"] = asyncio.run(_checkpoint_summary(settings, run_id))
    data["commits"] = [commit.to_dict() for commit in commits]
    if as_json:
        data["events"] = dump_trace(events)
        print_json(data)
        return
    for line in _run_lines(data, commits, events):
        typer.echo(line)


def _run_lines(data: dict[str, Any], commits: list[Any], events: list[Any]) -> list[str]:
    """`kgot runs show` as text: the run's fields and totals, its checkpointed tool calls, the
    commits it wrote and its timeline."""
    from kgot.cli.run_timeline import commit_lines, timeline_lines

    lines: list[str] = []
    keys = ("run_id", "kind", "status", "entity", "started_at", "finished_at", "question", "answer")
    for key in keys:
        if data.get(key) is not None:
            lines.append(printable(f"{key:12} {data[key]}"))
    totals = data.get("totals") or {}
    for key in (
        "iterations",
        "tool_calls",
        "llm_calls",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "duration_s",
        "error",
    ):
        if key in totals:
            lines.append(printable(f"{key:12} {totals[key]}"))
    checkpoint = data["checkpoint"]
    if checkpoint.get("resumable"):
        lines.append(f"resumable    yes: kgot ask --resume {data['run_id']}")
    for call in checkpoint.get("tool_calls", []):
        mark = "ok " if call["ok"] else "ERR"
        line = f"  [{mark}] iteration {call['iteration']}: {call['name']} {call['args']}"
        lines.append(printable(line))
        if not call["ok"]:
            reason = " ".join((call.get("summary") or "unknown").split())
            lines.append(printable(f"        reason: {clip(reason, 300)}"))
    return lines + commit_lines(commits) + timeline_lines(events)


async def _checkpoint_summary(settings: Any, run_id: str) -> dict[str, Any]:
    from kgot.controller import build_controller_graph, run_config
    from kgot.persistence import open_checkpointer

    async with open_checkpointer(settings.store.db) as saver:
        config = run_config(run_id, settings.controller)
        snapshot = await build_controller_graph(saver).aget_state(config)
    values = snapshot.values or {}
    return {
        "resumable": bool(snapshot.next),
        "next": list(snapshot.next),
        "iteration": values.get("iteration", 0),
        "tool_calls": values.get("tool_history", []),
        "notes": values.get("notes", []),
    }


# Like git's abbreviated hashes: at least this many characters, more where needed to be unique.
SHORT_ID_CHARS = 8


def abbreviation_length(shown: list[str], every_id: list[str]) -> int:
    """How many leading characters keep each of ``shown`` unique among ``every_id`` (at least
    :data:`SHORT_ID_CHARS`), one length for all so the ids line up."""
    ordered = sorted(set(every_id) | set(shown))
    length = SHORT_ID_CHARS
    for run_id in shown:
        at = bisect.bisect_left(ordered, run_id)
        for neighbour in (*ordered[max(0, at - 1) : at], *ordered[at + 1 : at + 2]):
            length = max(length, _shared_prefix(run_id, neighbour) + 1)
    return length


def _shared_prefix(first: str, second: str) -> int:
    shared = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def resolve_run_id(given: str, candidates: list[str]) -> str:
    """The run ``given`` names: itself, or the one run whose id starts with it.

    Args:
        given: a full run id or an abbreviation of one.
        candidates: every run id starting with ``given``.

    Raises:
        UsageError: ``given`` is the start of several run ids (names how many).
    """
    if given in candidates or not candidates:
        return given  # the exact id, or no run at all (the caller says so)
    if len(candidates) == 1:
        return candidates[0]
    raise UsageError(
        f"run id {given!r} is the start of {len(candidates)} run ids; give more characters "
        "(see `kgot runs list`)"
    )


def full_run_id(given: str, location: str) -> str:
    """The whole id of the run ``given`` names in the store at ``location`` (``given`` itself
    when there is no store or no such run: the caller reports a missing run its own way)."""
    from kgot.persistence import open_store

    if not _store_exists(location):
        return given
    store = open_store(location)
    try:
        return resolve_run_id(given, store.run_ids(given))
    finally:
        store.close()


def _store_exists(location: str) -> bool:
    """Whether there is a store to read (looking must not create a SQLite file)."""
    from kgot.persistence import parse_target, refuse_file_in_path

    target = parse_target(location)
    if not target.is_sqlite or target.sqlite_path is None or target.sqlite_path.exists():
        return not target.is_sqlite or target.sqlite_path is not None
    refuse_file_in_path(target.sqlite_path, target.display)  # no store can ever be there
    return False


def _run_dict(run: Any) -> dict[str, Any]:
    if hasattr(run, "to_dict"):
        return run.to_dict()
    from dataclasses import asdict

    return asdict(run)
