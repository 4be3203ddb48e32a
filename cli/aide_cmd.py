"""`kgot aide …`: aides that watch sources, grow an entity's graph and report (docs/aides.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli.common import confirm_irreversible, print_json, printable, settings_from
from kgot.cli.store_cmd import DbOption, JsonOption, opened_store
from kgot.errors import ConfigError, KgotError, UsageError

if TYPE_CHECKING:
    from kgot.aides import Aide

app = typer.Typer(
    help="Aides: watch sources, grow an entity's graph, deliver digests.",
    no_args_is_help=True,
)
source_app = typer.Typer(help="Sources an aide polls.", no_args_is_help=True)
output_app = typer.Typer(help="Where an aide delivers.", no_args_is_help=True)
app.add_typer(source_app, name="source")
app.add_typer(output_app, name="output")

NameArgument = Annotated[str, typer.Argument(help="The aide's name.", show_default=False)]
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
# No unit-less durations: `--every 15` reads as 15 minutes to some and 15 seconds to others.
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@app.command("create")
def create(
    ctx: typer.Context,
    name: NameArgument,
    entity: Annotated[
        str,
        typer.Option("--entity", "-e", help="The entity (created if missing).", show_default=False),
    ],
    program: Annotated[
        str, typer.Option("--program", help="What it does each cycle: digest or advisor.")
    ] = "digest",
    db: DbOption = None,
) -> None:
    """Create an aide bound to an entity."""
    from kgot.aides import create_aide

    with opened_store(ctx, db, create=True) as store:
        aide = create_aide(store, name, entity, program=program)
    typer.echo(f"created aide {aide.name} on entity {aide.entity} (program {program})")


@source_app.command("add")
def source_add(
    ctx: typer.Context,
    name: NameArgument,
    rss: Annotated[
        str | None, typer.Option("--rss", help="An RSS/Atom feed: http(s) URL or file.")
    ] = None,
    folder: Annotated[str | None, typer.Option("--dir", help="A folder of documents.")] = None,
    search: Annotated[str | None, typer.Option("--search", help="A web search query.")] = None,
    db: DbOption = None,
) -> None:
    """Add a source: exactly one of --rss, --dir, --search."""
    kind, value = _exactly_one("source", rss=rss, dir=folder, search=search)
    with _aide(ctx, db, name) as aide:
        source_id = aide.add_source(kind, value)
    typer.echo(f"added {kind} source {source_id} to aide {name}")


@source_app.command("list")
def source_list(
    ctx: typer.Context, name: NameArgument, as_json: JsonOption = False, db: DbOption = None
) -> None:
    """The aide's sources with their ids, items and errors."""
    from kgot.aides import AIDE_ITEM_STATUSES

    with _aide(ctx, db, name) as aide:
        found = aide.sources()
    if as_json:
        print_json(
            [
                {
                    "id": source.id,
                    "kind": source.kind,
                    "spec": source.spec,
                    "items": source.items,
                    "last_error": source.last_error,
                    "failures": source.failures,
                    "polled_at": _time(source.polled_at),
                    "created_at": _time(source.created_at),
                }
                for source in found
            ]
        )
        return
    if not found:
        typer.echo(
            f"aide {name} has no sources; add one with `kgot aide source add {name} --dir FOLDER`"
        )
    for source in found:
        counted = ", ".join(
            f"{source.items[status]} {status}"
            for status in AIDE_ITEM_STATUSES
            if source.items.get(status)
        )
        line = f"source {source.id}: {source.text()} ({counted or 'no items yet'})"
        if source.last_error:
            line += f"; failing {source.failures}x: {source.last_error}"
        typer.echo(printable(line))


SourceIdArgument = Annotated[
    int,
    typer.Argument(
        metavar="ID", help="The source's id (`kgot aide source list`).", show_default=False
    ),
]


@source_app.command("set")
def source_set(
    ctx: typer.Context,
    name: NameArgument,
    source_id: SourceIdArgument,
    rss: Annotated[
        str | None, typer.Option("--rss", help="An RSS/Atom feed: http(s) URL or file.")
    ] = None,
    folder: Annotated[str | None, typer.Option("--dir", help="A folder of documents.")] = None,
    search: Annotated[str | None, typer.Option("--search", help="A web search query.")] = None,
    db: DbOption = None,
) -> None:
    """Point a source elsewhere (its kind stays); it is polled afresh, and items already
    read are not ingested again."""
    kind, value = _exactly_one("source", rss=rss, dir=folder, search=search)
    with _aide(ctx, db, name) as aide:
        changed = aide.set_source(source_id, value, kind=kind)
    typer.echo(printable(changed.summary()))


@source_app.command("remove")
def source_remove(
    ctx: typer.Context, name: NameArgument, source_id: SourceIdArgument, db: DbOption = None
) -> None:
    """Remove a source: what it brought stays in the graph; its items not ingested yet are
    dropped."""
    with _aide(ctx, db, name) as aide:
        removed = aide.remove_source(source_id)
    typer.echo(printable(removed.summary()))


@output_app.command("add")
def output_add(
    ctx: typer.Context,
    name: NameArgument,
    webhook: Annotated[str | None, typer.Option("--webhook", help="An http(s) URL.")] = None,
    secret_env: Annotated[
        str | None,
        typer.Option("--secret-env", help="Variable holding the webhook's signing secret."),
    ] = None,
    jsonl: Annotated[str | None, typer.Option("--jsonl", help="A JSONL outbox file.")] = None,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print digests.")] = False,
    smtp: Annotated[
        str | None, typer.Option("--smtp", help="Email: smtp://host:port or smtps://host:port.")
    ] = None,
    to: Annotated[str | None, typer.Option("--to", help="Email recipients, comma-separated.")] = (
        None
    ),
    sender: Annotated[str | None, typer.Option("--from", help="The email's sender.")] = None,
    starttls: Annotated[bool, typer.Option("--starttls", help="STARTTLS on smtp://.")] = False,
    username: Annotated[str | None, typer.Option("--username", help="SMTP login.")] = None,
    password_env: Annotated[
        str | None, typer.Option("--password-env", help="Variable holding the SMTP password.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Add an output: exactly one of --webhook, --jsonl, --stdout, --smtp."""
    kind, value = _exactly_one(
        "output", webhook=webhook, jsonl=jsonl, stdout="-" if stdout else None, smtp=smtp
    )
    if secret_env is not None and kind != "webhook":
        raise UsageError("--secret-env only goes with --webhook")
    mail = {
        "to": to,
        "sender": sender,
        "starttls": starttls or None,
        "username": username,
        "password_env": password_env,
    }
    if kind != "smtp" and any(value is not None for value in mail.values()):
        raise UsageError("--to, --from, --starttls, --username and --password-env go with --smtp")
    options: dict[str, Any] = {"secret_env": secret_env} if kind == "webhook" else {}
    if kind == "smtp":
        options = mail
    with _aide(ctx, db, name) as aide:
        output_id = aide.add_output(kind, None if kind == "stdout" else value, **options)
    typer.echo(f"added {kind} output {output_id} to aide {name}")


@output_app.command("list")
def output_list(
    ctx: typer.Context, name: NameArgument, as_json: JsonOption = False, db: DbOption = None
) -> None:
    """The aide's outputs with their ids and deliveries."""
    with _aide(ctx, db, name) as aide:
        found = aide.outputs()
    if as_json:
        print_json(
            [
                {
                    "id": output.id,
                    "kind": output.kind,
                    "spec": output.spec,
                    "delivered": output.delivered,
                    "undelivered": output.undelivered,
                    "created_at": _time(output.created_at),
                }
                for output in found
            ]
        )
        return
    if not found:
        typer.echo(
            f"aide {name} has no outputs; add one with `kgot aide output add {name} --jsonl FILE`"
        )
    for output in found:
        typer.echo(
            printable(
                f"output {output.id}: {output.text()} ({output.delivered} delivered, "
                f"{output.undelivered} not delivered)"
            )
        )


@output_app.command("remove")
def output_remove(
    ctx: typer.Context,
    name: NameArgument,
    output_id: Annotated[
        int,
        typer.Argument(
            metavar="ID", help="The output's id (`kgot aide output list`).", show_default=False
        ),
    ],
    db: DbOption = None,
) -> None:
    """Remove an output and its delivery log; what it was sent stays where it went."""
    with _aide(ctx, db, name) as aide:
        removed = aide.remove_output(output_id)
    typer.echo(printable(removed.summary()))


@app.command("run")
def run(
    ctx: typer.Context,
    name: NameArgument,
    once: Annotated[bool, typer.Option("--once", help="Run one cycle and exit.")] = False,
    every: Annotated[
        str | None, typer.Option("--every", help="Run a cycle every 15m, 1h, 30s, …")
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option(
            "--cron",
            help='Run on a cron schedule, "*/15 * * * *" (UTC): the first cycle at the next '
            "matching time, as cron does; add --now for one at start-up too.",
        ),
    ] = None,
    run_now: Annotated[
        bool,
        typer.Option(
            "--now",
            help="With --cron: also run a cycle at start-up (--once and --every always do).",
        ),
    ] = False,
    max_items: Annotated[
        int | None, typer.Option("--max-items", min=1, help="Items ingested per cycle at most.")
    ] = None,
    max_cost_usd: Annotated[
        float | None, typer.Option("--max-cost-usd", min=0.0, help="Model cost per cycle.")
    ] = None,
    max_cost_usd_day: Annotated[
        float | None,
        typer.Option("--max-cost-usd-day", min=0.0, help="Model cost per UTC day."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="provider:model for both roles.")
    ] = None,
    json_logs: Annotated[
        bool, typer.Option("--json-logs", help="Log lines as JSON objects.")
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Run the aide: one cycle (--once) or on a schedule until SIGINT/SIGTERM.

    --every runs its first cycle at start-up, then each DURATION after the
    last one ended. --cron waits for the expression's next time (UTC), as
    cron does; --now runs a cycle at start-up too."""
    from kgot.aides import claim_worker, release_worker
    from kgot.persistence import current_owner

    schedule = parse_schedule(once=once, every=every, cron=cron, run_now=run_now)
    settings = settings_from(ctx, {"store.db": db, "llm.model": model})
    _log_to_stderr(json_logs)
    limits = {
        "max_items": max_items,
        "max_cost_usd": max_cost_usd,
        "max_cost_usd_day": max_cost_usd_day,
    }
    with _aide(ctx, db, name, settings=settings) as aide:
        aide.check_ready()  # now, not at a --cron schedule's first time hours later
        owner = current_owner()
        claim_worker(aide.store, aide.row, owner)
        try:
            asyncio.run(_serve(aide, schedule, limits, as_json=as_json))
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM / SIGHUP (RunTerminated)
            signum = getattr(stop, "signum", int(signal.SIGINT))
            sys.stderr.write(
                f"kgot: stopped by {signal.Signals(signum).name}; a cycle it interrupted is "
                "recorded as stopped, and what it had not done waits for the next run\n"
            )
            raise typer.Exit(128 + signum) from None
        finally:
            release_worker(aide.store, aide.row, owner)


async def _serve(
    aide: Aide, schedule: Schedule | None, limits: dict[str, Any], *, as_json: bool
) -> None:
    """Run cycles (one, or on the schedule) until done or stopped by a signal.

    Signals stop it as they stop `kgot ask`: Ctrl-C (asyncio.run) and SIGTERM / SIGHUP
    (:func:`kgot.controller.signals.stopped_by_termination`) cancel this task, so the item
    being ingested is given back (its attempt not counted), a delivery being sent is
    abandoned (retried later under the same key; an email is never sent twice), nothing new
    starts (no program stage, no next item), the cycle is recorded as ``stopped``, and the
    command exits 128 + the signal's number (130, 143, 129).
    """
    from kgot.controller import RunTerminated, stopped_by_termination

    with stopped_by_termination() as stop_signals:
        try:
            if schedule is not None:
                started = datetime.now(UTC)
                first = schedule.first(started)
                if first > started:  # cron without --now: nothing runs before its time
                    await _wait_for(aide, schedule, first, "first")
            while True:
                try:
                    report = await aide.run_cycle_async(**limits)
                except (UsageError, ConfigError):
                    raise
                except KgotError as error:
                    if schedule is None:
                        raise
                    # On a schedule a failed cycle (the database or the network away for a
                    # while) is recorded and logged; the next one runs at its time.
                    logging.getLogger("kgot.aides").error("cycle failed: %s", error)
                else:
                    if as_json:
                        sys.stdout.write(json.dumps(report.to_json(), default=str) + "\n")
                        sys.stdout.flush()
                if schedule is None:
                    return
                await _wait_for(aide, schedule, schedule.after(datetime.now(UTC)), "next")
        except asyncio.CancelledError:
            if stop_signals:
                raise RunTerminated(stop_signals[0]) from None
            raise  # Ctrl-C: asyncio.run raises KeyboardInterrupt once the task has stopped


async def _wait_for(aide: Aide, schedule: Schedule, moment: datetime, which: str) -> None:
    """Sleep until ``moment``, having said when: a worker waiting for its first cron time
    would otherwise look hung."""
    when = moment.astimezone(UTC).isoformat(timespec="seconds")
    hint = "; --now runs one at start-up" if which == "first" and schedule.cron else ""
    logging.getLogger("kgot.aides").info(
        "%s: %s cycle at %s (%s%s)", aide.name, which, when, schedule.described, hint
    )
    await asyncio.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


@app.command("status")
def status(
    ctx: typer.Context, name: NameArgument, as_json: JsonOption = False, db: DbOption = None
) -> None:
    """Last cycles, backlog, failures, sources, outputs and cost."""
    with _aide(ctx, db, name) as aide:
        data = _status(aide)
    if as_json:
        print_json(data)
        return
    counts = data["items"]
    typer.echo(f"aide {data['name']} on entity {data['entity']} (program {data['program']})")
    typer.echo(
        f"items: {counts.get('done', 0)} done, {counts.get('failed', 0)} failed, "
        f"{data['backlog']} waiting; cost today ${data['cost_today_usd']:.4f}"
    )
    for source in data["sources"]:
        line = f"source {source['id']}: {source['kind']} {source['spec']}"
        if source["last_error"]:
            line += f" (failing {source['failures']}x: {source['last_error']})"
        typer.echo(printable(line))
    for output in data["outputs"]:
        typer.echo(printable(f"output {output['id']}: {output['kind']} {output['spec']}"))
    for cycle in data["cycles"]:
        cost = "?" if cycle["cost_usd"] is None else f"${cycle['cost_usd']:.4f}"
        line = (
            f"cycle {cycle['id']} {cycle['started_at']} {cycle['status']}: "
            f"{cycle['items']} ingested, {cycle['failed']} failed, {cycle['llm_calls']} LLM "
            f"calls, {cost}, {cycle['duration_s']:.1f} s"
        )
        if cycle["stop_reason"]:
            line += f" ({cycle['stop_reason']})"
        typer.echo(printable(line))


@app.command("items")
def items_cmd(
    ctx: typer.Context,
    name: NameArgument,
    item_status: Annotated[
        str | None,
        typer.Option("--status", help="new, ingesting, done or failed.", show_default=False),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Newest items shown.")] = 50,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """What the aide read, and what became of it."""
    from kgot.aides import AIDE_ITEM_STATUSES, attempts_note, item_rows

    if item_status is not None and item_status not in AIDE_ITEM_STATUSES:
        raise UsageError(f"--status {item_status!r} is not one of {', '.join(AIDE_ITEM_STATUSES)}")
    with _aide(ctx, db, name) as aide:
        rows = item_rows(aide.store, aide.row, item_status, limit)
    data = [_item_json(row) for row in rows]
    if as_json:
        print_json(data)
        return
    if not data:
        typer.echo(f"aide {name} has no {item_status or ''} items".replace("  ", " "))
    for item in data:
        what = item["reason"] if item["status"] == "failed" else item["summary"] or ""
        version = f" v{item['committed_version']}" if item["committed_version"] else ""
        typer.echo(
            printable(
                f"{item['status']}{version} ({attempts_note(item['status'], item['attempts'])}) "
                f"{item['title']!r} "
                f"{item['source_ref'] or item['item_id']}" + (f": {what}" if what else "")
            )
        )


@app.command("list")
def list_cmd(ctx: typer.Context, as_json: JsonOption = False, db: DbOption = None) -> None:
    """List aides."""
    from kgot.aides import list_aides
    from kgot.persistence import StoreNotFoundError

    try:
        with opened_store(ctx, db) as store:
            rows = list_aides(store)
    except StoreNotFoundError:
        rows = []
    data = [{"name": r.name, "entity": r.entity, "program": r.program} for r in rows]
    if as_json:
        print_json(data)
        return
    if not data:
        typer.echo("no aides yet (create one with `kgot aide create NAME --entity E`)")
    for row in data:
        typer.echo(printable(f"{row['name']}  entity {row['entity']}  program {row['program']}"))


@app.command("delete")
def delete(
    ctx: typer.Context,
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Delete an aide and what it recorded (asks first); its entity's graph stays."""
    from kgot.aides import count_of, item_counts

    with _aide(ctx, db, name) as aide:  # an unknown aide fails before any question
        if not yes:
            items = sum(item_counts(aide.store, aide.row).values())
            recorded = (
                f"{count_of(len(aide.sources()), 'source')}, "
                f"{count_of(items, 'item')}, "
                f"{count_of(len(aide.outputs()), 'output')}"
            )
            confirm_irreversible(
                f"deleting aide {name!r} ({recorded})",
                f"Delete aide {name!r} with {recorded}? Entity {aide.entity!r} and its graph stay.",
            )
        aide.delete()
    typer.echo(f"deleted aide {name} (entity {aide.entity} and its graph are kept)")


# ---------------------------------------------------------------------------- helpers


@contextmanager
def _aide(ctx: typer.Context, db: str | None, name: str, settings: Any = None) -> Iterator[Aide]:
    from kgot.aides import open_aide
    from kgot.persistence import StoreNotFoundError, parse_target

    settings = settings or settings_from(ctx, {"store.db": db})
    try:
        with opened_store(ctx, db) as store:
            yield open_aide(store, name, settings=settings)
    except StoreNotFoundError:
        # Named, since a mistyped KGOT_DB / --db is the usual reason for a missing aide.
        raise UsageError(
            f"no aide named {name!r}: there is no kgot database at "
            f"{parse_target(settings.store.db).display}; create the aide with `kgot aide "
            f"create {name} --entity E` (or check KGOT_DB / --db)"
        ) from None


def _exactly_one(what: str, **given: str | None) -> tuple[str, str]:
    chosen = [(kind, value) for kind, value in given.items() if value is not None]
    if len(chosen) != 1:
        options = ", ".join(f"--{kind}" for kind in given)
        raise UsageError(f"give exactly one {what}: one of {options}")
    return chosen[0]


def parse_every(text: str) -> timedelta:
    """``15m``, ``1h``, ``30s`` or ``1d``: a number and its unit.

    Raises:
        UsageError: anything else (a bare number too), or less than a second.
    """
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(f"--every {text!r} is not a duration; write it like 15m, 1h, 30s or 1d")
    number, unit = match.groups()
    if not unit:
        raise UsageError(
            f"--every {number} needs a unit: {number}s, {number}m, {number}h or {number}d"
        )
    seconds = float(number) * _UNIT_SECONDS[unit]
    if seconds < 1:
        raise UsageError(f"--every {text!r} is shorter than a second")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Schedule:
    """When an aide's cycles run (``kgot aide run --every`` / ``--cron``).

    Attributes:
        after: the start of the next cycle, given the moment the last one ended (or the
            start-up, for the first one when ``at_start`` is false).
        at_start: a cycle runs at once on start-up. Interval schedules do (``--every 1h``
            means "now, then hourly"); cron schedules do not, as cron does not (the first
            cycle waits for the next matching time), unless ``--now`` asks for it.
        described: the option as given, for the log line that says when the next cycle is.
        cron: the schedule is a cron expression.
    """

    after: Callable[[datetime], datetime]
    at_start: bool
    described: str
    cron: bool = False

    def first(self, now: datetime) -> datetime:
        """When the first cycle runs, for a worker starting at ``now``."""
        return now if self.at_start else self.after(now)


def parse_schedule(
    *, once: bool = False, every: str | None = None, cron: str | None = None, run_now: bool = False
) -> Schedule | None:
    """The schedule of ``kgot aide run`` (``None``: one cycle, ``--once``).

    Raises:
        UsageError: not exactly one of once/every/cron, a bad duration or cron expression,
            or ``run_now`` without ``cron`` (the other two run at start-up anyway).
    """
    chosen = [
        flag for flag, value in (("--once", once), ("--every", every), ("--cron", cron)) if value
    ]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --once, --every DURATION, --cron EXPRESSION")
    if run_now and cron is None:
        raise UsageError(
            f"--now goes with --cron; {chosen[0]} runs its first cycle at start-up already"
        )
    if once:
        return None
    if every is not None:
        interval = parse_every(every)
        return Schedule(lambda moment: moment + interval, True, f"--every {every.strip()}")
    from croniter import croniter

    assert cron is not None
    if not croniter.is_valid(cron):
        raise UsageError(
            f'--cron {cron!r} is not a cron expression; write five fields, e.g. "*/15 * * * *"'
        )
    return Schedule(
        lambda moment: croniter(cron, moment.astimezone(UTC)).get_next(datetime),
        run_now,
        f"--cron {cron!r}",
        cron=True,
    )


class _LogLine(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        at = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="seconds")
        message = printable(record.getMessage())
        if self.as_json:
            return json.dumps({"ts": at, "level": record.levelname.lower(), "message": message})
        return f"{at} {record.levelname.lower()} {message}"


class _Stderr(logging.Handler):
    """Each record as one line on the stderr of the moment (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # a closed or broken stderr must not end the run
            self.handleError(record)


def _log_to_stderr(as_json: bool) -> None:
    logger = logging.getLogger("kgot.aides")
    for old in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(old)
    handler = _Stderr()
    handler.setFormatter(_LogLine(as_json))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _status(aide: Aide) -> dict[str, Any]:
    from kgot.aides import (
        cost_since,
        cycle_rows,
        item_counts,
        output_rows,
        pending_items,
        source_rows,
    )

    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    counts = item_counts(aide.store, aide.row)
    return {
        "name": aide.name,
        "entity": aide.entity,
        "program": aide.row.program,
        "items": counts,
        "backlog": len(pending_items(aide.store, aide.row, None)),
        "cost_today_usd": cost_since(aide.store, aide.row, midnight),
        "sources": [
            {
                "id": row.id,
                "kind": row.kind,
                "spec": dict(row.spec),
                "last_error": row.last_error,
                "failures": row.failures,
                "polled_at": _time(row.polled_at),
            }
            for row in source_rows(aide.store, aide.row)
        ],
        "outputs": [
            {"id": row.id, "kind": row.kind, "spec": dict(row.spec)}
            for row in output_rows(aide.store, aide.row)
        ],
        "cycles": [
            {
                "id": row.id,
                "started_at": _time(row.started_at),
                "finished_at": _time(row.finished_at),
                "status": row.status,
                "stop_reason": row.stop_reason,
                "items": row.items,
                "failed": row.failed,
                "llm_calls": row.llm_calls,
                "input_tokens": row.input_tokens,
                "output_tokens": row.output_tokens,
                "cost_usd": row.cost_usd,
                "duration_s": row.duration_s,
                "errors": row.errors or [],
            }
            for row in cycle_rows(aide.store, aide.row)
        ],
    }


def _item_json(row: Any) -> dict[str, Any]:
    report = row.report or {}
    summary = ""
    if row.status == "done" and report:
        from kgot.controller import IngestReport

        fields = {k: v for k, v in report.items() if k in IngestReport.__dataclass_fields__}
        summary = IngestReport(**fields).summary()
    return {
        "item_id": row.item_id,
        "title": row.title,
        "source_ref": row.source_ref,
        "kind": row.kind,
        "status": row.status,
        "attempts": row.attempts,
        "reason": row.reason,
        "committed_version": row.committed_version,
        "summary": summary,
        "published_at": _time(row.published_at),
        "updated_at": _time(row.updated_at),
    }


def _time(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="seconds")
