"""`kgot ingest --entity E FILE|-`: add what a text states to an entity's graph (docs/aides.md).

The text becomes graph code written by the planning model, run in the sandbox, checked against
the entity's types and committed with provenance, exactly as a tool result of `kgot ask
--entity` would (no vote: the text is the result).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from kgot.cli.common import print_json, printable, settings_from
from kgot.cli.store_cmd import DbOption, JsonOption, opened_store
from kgot.errors import UsageError


def ingest(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            help="A file (text, Markdown, HTML, PDF, Office, JSON, …) or - for stdin.",
            show_default=False,
        ),
    ],
    entity: Annotated[
        str,
        typer.Option("--entity", "-e", help="The entity whose graph grows.", show_default=False),
    ],
    source_ref: Annotated[
        str | None,
        typer.Option(
            "--source-ref",
            help="Where the text came from (URL, path); default: the file's path.",
            show_default=False,
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence",
            min=0.0,
            max=1.0,
            help="Trust of its facts (0-1); default: [memory.trust] ingest, else default.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="provider:model for both roles.", show_default=False),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Add what a text states to an entity's graph, and say what became of it."""
    from kgot.aides.ingest import ingest_text_async, read_document

    settings = settings_from(ctx, {"store.db": db, "llm.model": model})
    if source == "-":
        text, title = sys.stdin.read(), None
        reference = source_ref or "stdin"
    else:
        path = Path(source).expanduser()
        text, title = asyncio.run(read_document(path, settings))
        reference = source_ref or str(path.resolve())
    if not text.strip():
        raise UsageError(f"{source} holds no text to ingest")
    with opened_store(ctx, db, entity=entity) as store:
        report = asyncio.run(
            ingest_text_async(
                store,
                entity,
                text,
                source_ref=reference,
                confidence=confidence,
                settings=settings,
                title=title,
            )
        )
    if as_json:
        print_json(report.to_json())
    else:
        typer.echo(printable(f"{entity}: {report.summary()}"))
        for note in report.notes:
            typer.echo(printable(f"  {note}"))
    if not report.ok:
        raise typer.Exit(1)
