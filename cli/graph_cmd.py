"""`kgot graph …`: convert graph files, query them, count what they hold.

Graph files are read and written by extension (``.json`` node-link, ``.graphml``, ``.ttl``,
``.nt``) with :func:`kgot.graph_backends.read_graph` / ``write_graph``; results print as JSON.
``--entity`` options work on a persistent entity instead of a file (``store_cmd``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kgot.cli import store_cmd
from kgot.cli.common import print_json, settings_from
from kgot.cli.layout import plural
from kgot.errors import UsageError

app = typer.Typer(
    help="Convert, query and inspect graph files (.json, .graphml, .ttl, .nt).",
    no_args_is_help=True,
)

BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        "-b",
        help="networkx (QUERY is Python setting `result`) or rdf (QUERY is SPARQL SELECT/ASK); "
        "default: the configured backend.",
        show_default=False,
    ),
]
EntityOption = Annotated[
    str | None,
    typer.Option("--entity", help="A persistent entity instead of a FILE.", show_default=False),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="Store for --entity (default: KGOT_DB / config).", show_default=False
    ),
]
SandboxOption = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="Isolation for the query: auto, bwrap, fallback, docker or subprocess.",
        show_default=False,
    ),
]


@app.command("convert")
def convert(
    source: Annotated[Path, typer.Argument(help="Graph file to read.", show_default=False)],
    target: Annotated[Path, typer.Argument(help="Graph file to write.", show_default=False)],
) -> None:
    """Convert a graph file into another format (chosen by OUTPUT's extension)."""
    from kgot.graph_backends import graph_format, read_graph, write_graph
    from kgot.graph_model import graph_stats

    graph_format(target)  # an unusable target fails before the source is read
    graph = read_graph(source)
    write_graph(graph, target)
    stats = graph_stats(graph)
    typer.echo(
        f"wrote {target}: {plural(stats.nodes, 'node')}, {plural(stats.edges, 'edge')}",
        err=True,
    )


@app.command("query")
def query(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Graph file to query.", show_default=False)],
    text: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help="The query; `@PATH` reads it from a file, `-` from standard input.",
            show_default=False,
        ),
    ],
    backend: BackendOption = None,
    sandbox: SandboxOption = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Wall-clock seconds for the query.", show_default=False),
    ] = None,
    max_items: Annotated[
        int | None,
        typer.Option(
            "--max-items",
            min=1,
            help="Largest result: rows, or items at every depth of a Python value (default "
            "20,000); a longer result is cut, with a warning on stderr.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a read query on a graph file and print its result as JSON."""
    query_text = _query_text(text)
    overrides = {
        "controller.backend": backend,
        "sandbox.kind": sandbox,
        "sandbox.timeout": timeout,
    }
    settings = settings_from(ctx, overrides)

    from kgot.errors import StepFailure
    from kgot.graph_backends import MAX_READ_ITEMS, open_backend, read_graph
    from kgot.sandbox import open_sandbox

    limit = max_items or MAX_READ_ITEMS
    graph = read_graph(file)
    box = open_sandbox(settings.sandbox.model_copy(update={"pool_size": 0}))
    try:
        store = open_backend(settings.controller.backend, box, graph)
        result = store.query(query_text, max_items=limit)
    except StepFailure as failure:
        summary = getattr(failure, "summary", None) or str(failure).splitlines()[0]
        raise UsageError(
            f"query on {file} failed: {summary}"
            f"{_language_fix(summary, settings.controller.backend)}"
        ) from None
    finally:
        box.close()
    print_json(result.value)
    if result.truncated:
        typer.echo(
            f"kgot: warning: the result was cut to its first {plural(limit, 'item')}; pass "
            "--max-items N for more",
            err=True,
        )


@app.command("stats")
def stats(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Argument(help="Graph file to count.", show_default=False)
    ] = None,
    entity: EntityOption = None,
    db: DbOption = None,
) -> None:
    """Print node and edge counts per label and relationship as JSON (FILE or --entity)."""
    from kgot.graph_backends import read_graph
    from kgot.graph_model import graph_stats

    if entity is not None and file is None:
        store_cmd.entity_stats(ctx, entity, db)
        return
    if file is None or entity is not None:
        raise UsageError("give either a graph FILE or --entity NAME")
    print_json(graph_stats(read_graph(file)).to_dict())


@app.command("export")
def export(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Graph file to write.", show_default=False)],
    entity: Annotated[str, typer.Option("--entity", help="The entity to export.")],
    meta: Annotated[
        bool, typer.Option("--meta/--no-meta", help="Include _confidence, _source_kind, …")
    ] = True,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="VERSION",
            help="The graph as it was at this version (as `kgot entities show` and `entities "
            "history` list them: 5 or v5), or at this ISO time (2024-05-01T12:00:00Z; no zone "
            "means UTC).",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Write an entity's persistent graph to FILE (format by extension), as it is now or as
    it was at a version or time."""
    store_cmd.export_entity(ctx, entity, file, meta, db, as_of=as_of)


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Graph file to read.", show_default=False)],
    entity: Annotated[str, typer.Option("--entity", help="The entity to import into.")],
    replace: Annotated[
        bool, typer.Option("--replace", help="Also remove facts the file does not hold.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and report, write nothing.")
    ] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Write the file's facts as they are: no write-time rules (a duplicate under "
            "another id stays a second node, a new value of a functional property does not "
            "supersede the old one).",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Merge FILE into an entity's graph: validated against its types, one atomic commit,
    through the same write-time rules and trust (`[memory.trust] import`) as every writer."""
    store_cmd.import_entity(ctx, entity, file, replace, dry_run, db, raw=raw)


def _language_fix(summary: str, backend: str) -> str:
    """The flag that fixes a query written for the other backend."""
    if backend == "networkx" and "SPARQL" in summary and "syntax" in summary.lower():
        return "; for SPARQL pass --backend rdf"
    if backend == "rdf" and "Python" in summary:
        return "; for Python pass --backend networkx"
    return ""


def _query_text(text: str) -> str:
    if text == "-":
        value = sys.stdin.read()
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            value = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or error
            raise UsageError(f"cannot read the query file {path}: {reason}") from None
    else:
        value = text
    if not value.strip():
        raise UsageError("the query is empty; pass it as QUERY, @FILE or - (standard input)")
    return value
