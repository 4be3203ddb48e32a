"""`kgot ingest --entity E FILE|-`: add what a text states to an entity's graph (docs/aides.md).

The text becomes graph code written by the planning model, run in the sandbox, checked against
the entity's types and committed with provenance, exactly as a tool result of `kgot ask
--entity` would (no vote: the text is the result).

Two caps bound its cost: ``--max-chars`` (``[ingest] max_chars``) refuses a longer text before
any model call, and ``--max-cost-usd`` (``[ingest] max_cost_usd``) stops between the pieces a
long text is written in; the pieces left unwritten are named, with the ``--result-key`` that
writes only them.
"""

from __future__ import annotations

import asyncio
import shlex
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
            help="Trust of its facts (0-1); default: the setting memory.trust's ingest, else "
            "its default.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="provider:model for both roles.", show_default=False),
    ] = None,
    max_chars: Annotated[
        int | None,
        typer.Option(
            "--max-chars",
            min=1,
            help="Refuse a longer text before any model call; default: the setting "
            "ingest.max_chars (300000).",
            show_default=False,
        ),
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            min=0.0001,
            help="Stop between pieces once the model cost reaches this (USD; needs the "
            "model's price); default: the setting ingest.max_cost_usd, else no cap.",
            show_default=False,
        ),
    ] = None,
    result_key: Annotated[
        str | None,
        typer.Option(
            "--result-key",
            help="Name this ingestion: pieces already committed under the key are not written "
            "again (to finish one the cost cap stopped); default: a new key.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Add what a text states to an entity's graph, and say what became of it."""
    from kgot.aides import TextTooLongError, ingest_text_async, read_document

    settings = settings_from(
        ctx,
        {
            "store.db": db,
            "llm.model": model,
            "ingest.max_chars": max_chars,
            "ingest.max_cost_usd": max_cost_usd,
        },
    )
    if result_key is not None and not result_key.strip():
        raise UsageError("--result-key must not be empty")
    if source == "-":
        text, title = sys.stdin.read(), None
        reference = source_ref or "stdin"
    else:
        path = Path(source).expanduser()
        text, title = asyncio.run(read_document(path, settings))
        reference = source_ref or str(path.resolve())
    text = text.strip()
    if not text:
        raise UsageError(f"{source} holds no text to ingest")
    with opened_store(ctx, db, entity=entity) as store:
        try:
            report = asyncio.run(
                ingest_text_async(
                    store,
                    entity,
                    text,
                    source_ref=reference,
                    confidence=confidence,
                    settings=settings,
                    title=title,
                    result_key=result_key,
                )
            )
        except TextTooLongError as refused:  # before the sandbox and the model were opened
            raise refused.reworded(
                "stdin" if source == "-" else source,
                f"split it, or raise the cap with --max-chars {refused.chars} (or [ingest] "
                "max_chars in the config file)",
            ) from None
    if as_json:
        print_json(report.to_json())
    else:
        typer.echo(printable(f"{entity}: {report.summary()}"))
        for note in report.notes:
            typer.echo(printable(f"  {note}"))
        typer.echo(printable(f"  recorded as run {report.run_id} (kgot runs show)"))
    if report.stopped_by is not None:
        # One line a person can act on: what was written, what was not, and the command that
        # writes only the rest (its pieces' keys are derived from the result key).
        again = (
            "to write only those run the same command with --result-key "
            f"{shlex.quote(report.result_key or '')} (and a higher --max-cost-usd)"
        )
        sys.stderr.write(printable(f"kgot: error: {report.stop_line(again)}") + "\n")
    if not report.ok:
        raise typer.Exit(1)
