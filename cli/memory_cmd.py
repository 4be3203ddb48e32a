"""`kgot memory …`: upkeep of an entity's long-lived graph (issue 15; docs/memory.md).

Each command is a self-contained function on one entity (``--entity``, required); the store is
the one `kgot entities` uses (``--db`` / ``KGOT_DB`` / config).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from kgot.cli.common import print_json, printable
from kgot.cli.store_cmd import DbOption, JsonOption, opened_store

if TYPE_CHECKING:
    from kgot.persistence import Suggestion

app = typer.Typer(
    help="Upkeep of an entity's graph: resolve duplicates, review the curation queue.",
    no_args_is_help=True,
)

EntityOption = Annotated[
    str,
    typer.Option("--entity", "-e", help="The entity whose graph to work on.", show_default=False),
]
SuggestionArgument = Annotated[
    int, typer.Argument(help="The suggestion's id (see `kgot memory suggestions`).")
]


@app.command("resolve")
def resolve(
    ctx: typer.Context,
    entity: EntityOption,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Merge the duplicates and queue the suggestions."),
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Find nodes that are one real thing. Without --apply nothing is written."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        result = open_memory(store, entity).resolve(apply=apply)
    data = result.to_json()
    if as_json:
        print_json(data)
        return
    verb = "merged" if apply else "would merge"
    for merge in data["merges"]:
        typer.echo(
            printable(
                f"{verb} {', '.join(merge['aliases'])} into {merge['canonical']} "
                f"({merge['type']}, score {merge['score']}: {merge['reason']})"
            )
        )
    for row in data["suggestions"]:
        queued = f"suggestion {row['id']}" if row["id"] is not None else "not queued"
        typer.echo(
            printable(
                f"maybe the same {row['type']}: {' and '.join(row['nodes'])} "
                f"(score {row['score']}; {queued})"
            )
        )
    if not data["merges"] and not data["suggestions"]:
        typer.echo(f"no duplicates found in entity {entity!r}")
    elif not apply:
        typer.echo("nothing was changed; run with --apply to merge and queue suggestions")


@app.command("suggestions")
def suggestions(
    ctx: typer.Context,
    entity: EntityOption,
    status: Annotated[str, typer.Option("--status", help="open, accepted or rejected.")] = "open",
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the curation queue: merges and contradictions the rules would not decide."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        rows = open_memory(store, entity).suggestions(status)
    if as_json:
        print_json([row.to_dict() for row in rows])
        return
    if not rows:
        typer.echo(f"no {status} suggestions in entity {entity!r}")
        return
    for row in rows:
        typer.echo(printable(f"{row.id}  {row.kind}  {_describe(row)}"))


def _describe(row: Suggestion) -> str:
    payload = row.payload
    score = row.score
    if row.kind == "merge":
        nodes = " and ".join(str(n) for n in payload.get("nodes", ()))
        return (
            f"{nodes} may be one {payload.get('type', 'node')} (score {score}; "
            f"{payload.get('reason', '')})"
        )
    if payload.get("fact") == "node":
        return (
            f"{payload.get('node')}.{payload.get('property')}: keep "
            f"{json.dumps(payload.get('old'))} (confidence {payload.get('old_confidence')}) or "
            f"take {json.dumps(payload.get('new'))} (confidence {payload.get('new_confidence')})"
        )
    old, new = payload.get("old") or {}, payload.get("new") or {}
    return (
        f"{payload.get('source')} -{payload.get('relationship')}->: keep {old.get('target')} "
        f"(confidence {payload.get('old_confidence')}) or take {new.get('target')} "
        f"(confidence {payload.get('new_confidence')})"
    )


@app.command("accept")
def accept(
    ctx: typer.Context,
    entity: EntityOption,
    suggestion: SuggestionArgument,
    db: DbOption = None,
) -> None:
    """Carry out a suggestion: merge the nodes, or let the newer value supersede."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        done = open_memory(store, entity).accept(suggestion)
    typer.echo(printable(done))


@app.command("reject")
def reject(
    ctx: typer.Context,
    entity: EntityOption,
    suggestion: SuggestionArgument,
    db: DbOption = None,
) -> None:
    """Close a suggestion without changing the graph."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        done = open_memory(store, entity).reject(suggestion)
    typer.echo(printable(done))


@app.command("upkeep")
def upkeep(
    ctx: typer.Context,
    entity: EntityOption,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="The moment to judge ages at (ISO 8601, e.g. 2026-03-01T12:00:00Z); "
            "default: the current time.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would change; write nothing.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every change, not only the first.")
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Expire facts past their time to live, prune faded ones, promote well-corroborated ones,
    merge duplicates. Nothing is deleted: closed facts stay in history."""
    from kgot.memory import open_memory
    from kgot.memory.upkeep import parse_now

    moment = parse_now(now) if now is not None else None  # a bad --now: before any write
    with opened_store(ctx, db, entity=entity) as store:
        report = open_memory(store, entity).upkeep(now=moment, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
        return
    if dry_run:
        typer.echo("dry run: nothing was written")
    for line in report.lines(limit=None if verbose else _SHOWN_CHANGES):
        typer.echo(printable(line))


_SHOWN_CHANGES = 20  # changes listed without --verbose
