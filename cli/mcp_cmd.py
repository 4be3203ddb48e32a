"""`kgot mcp …`: serve entity graphs to MCP clients, and manage the HTTP transport's tokens
(docs/mcp.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kgot.cli.common import print_json, settings_from
from kgot.cli.store_cmd import DbOption, JsonOption, opened_store
from kgot.errors import UsageError

if TYPE_CHECKING:
    from kgot.mcp_server import Stopped

app = typer.Typer(
    help="Serve entity graphs over the Model Context Protocol; manage its tokens.",
    no_args_is_help=True,
)
token_app = typer.Typer(
    help="Bearer tokens of `kgot mcp serve --http` (the file keeps only their hashes).",
    no_args_is_help=True,
)
app.add_typer(token_app, name="token")

TokensOption = Annotated[
    Path,
    typer.Option(
        "--tokens", help="The tokens file (TOML; created by `token add`).", show_default=False
    ),
]


@app.command("serve")
def serve(
    ctx: typer.Context,
    entity: Annotated[
        str | None,
        typer.Option("--entity", "-e", help="stdio: the one entity served.", show_default=False),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (needs --tokens).",
            show_default=False,
        ),
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="HTTP: the tokens file.", show_default=False),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="stdio: who writes (provenance mcp:LABEL; default stdio).",
            show_default=False,
        ),
    ] = None,
    allow_query: Annotated[
        bool,
        typer.Option(
            "--allow-query",
            help="Offer the raw query tool (sandboxed, one entity) to admin-scoped clients.",
        ),
    ] = False,
    ask_max_cost_usd: Annotated[
        float,
        typer.Option("--ask-max-cost-usd", min=0.0001, help="Cost cap of one ask run (USD)."),
    ] = 1.0,
    ask_max_llm_calls: Annotated[
        int,
        typer.Option("--ask-max-llm-calls", min=1, help="Model requests cap of one ask run."),
    ] = 200,
    db: DbOption = None,
) -> None:
    """Serve over stdio (--entity E) or Streamable HTTP (--http HOST:PORT --tokens FILE)."""
    from kgot.mcp_server import (
        AskLimits,
        ServeOptions,
        checked_label,
        parse_address,
        require_sdk,
        serve_http,
        serve_stdio,
    )

    require_sdk()
    options = ServeOptions(
        allow_query=allow_query,
        limits=AskLimits(max_cost_usd=ask_max_cost_usd, max_llm_calls=ask_max_llm_calls),
    )
    settings = settings_from(ctx, {"store.db": db})
    if http is None:
        if entity is None:
            raise UsageError("give --entity NAME for stdio, or --http HOST:PORT --tokens FILE")
        if tokens is not None:
            raise UsageError("--tokens belongs to --http; stdio serves the --entity given")
        writer = checked_label(label or "stdio", "--label")
        with opened_store(ctx, db, entity=entity) as store:
            stopped = serve_stdio(store, settings, entity, options, label=writer)
        if stopped is not None:  # else the client closed the pipe or went away: exit 0, quietly
            _stopped(stopped)
        return
    if entity is not None:
        raise UsageError("over --http the tokens grant the entities; drop --entity")
    if label is not None:
        raise UsageError("over --http each token's label names the writer; drop --label")
    address = parse_address(http)
    if tokens is None:
        raise UsageError("--http needs --tokens FILE (create tokens with `kgot mcp token add`)")
    with opened_store(ctx, db) as store:
        stopped = serve_http(store, settings, address, tokens.expanduser(), options)
    _stopped(stopped)


def _stopped(stopped: Stopped) -> None:
    """A server stopped by a signal exits as `kgot ask` does: 128 + the signal's number."""
    sys.stderr.write(f"kgot: {stopped.message()}\n")
    raise typer.Exit(stopped.exit_code)


@token_app.command("add")
def token_add(
    ctx: typer.Context,
    label: Annotated[str, typer.Argument(help="Who holds the token, e.g. claude-desktop.")],
    tokens: TokensOption,
    entity: Annotated[
        list[str],
        typer.Option(
            "--entity",
            "-e",
            help="An entity it may use (repeatable, or a,b); it must exist in the store.",
            show_default=False,
        ),
    ],
    scope: Annotated[
        str, typer.Option("--scope", help="read, write, ask, admin (comma-separated).")
    ] = "read",
    as_json: JsonOption = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The store `serve --http` will serve, where the entities must exist "
            "(default: KGOT_DB / config).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Make a token; it is printed once, only its hash is stored.

    The tokens file names entities, not a store: the entities are checked
    in the store given here, which should be the one `serve --http` serves.
    """
    from kgot.mcp_server import add_token, checked_label, parse_scopes, require_entity

    checked_label(label)  # what needs no store is checked first
    parse_scopes([scope])
    names = [part.strip() for value in entity for part in value.split(",") if part.strip()]
    if names:  # none: add_token says what to give
        # A grant for an entity that does not exist would only ever answer "no entity named"
        # (a typo, or the wrong store); it is refused before the file is touched.
        with opened_store(ctx, db, entity=names[0]) as store:
            for name in dict.fromkeys(names):
                require_entity(store, name, db=db)
    token, record = add_token(tokens.expanduser(), label, names, [scope])
    if as_json:
        print_json({"token": token, **record.to_json()})
        return
    typer.echo(token)
    sys.stderr.write(
        f"kgot: token {label!r} for {', '.join(record.entities)} "
        f"({', '.join(record.scopes)}) added to {tokens}; it is shown only now\n"
    )


@token_app.command("list")
def token_list(tokens: TokensOption, as_json: JsonOption = False) -> None:
    """List the tokens: label, entities, scopes, creation time (never the tokens)."""
    from kgot.mcp_server import read_token_file

    records = read_token_file(tokens.expanduser()).records
    if as_json:
        print_json([record.to_json() for record in records])
        return
    if not records:
        typer.echo(f"no tokens in {tokens}")
    for record in records:
        typer.echo(
            f"{record.label}  entities={','.join(record.entities)}  "
            f"scopes={','.join(record.scopes)}  created={record.created_at or '?'}"
        )


@token_app.command("revoke")
def token_revoke(
    label: Annotated[str, typer.Argument(help="The token's label.")],
    tokens: TokensOption,
) -> None:
    """Remove a token; a running server refuses it from its next request."""
    from kgot.mcp_server import revoke_token

    revoke_token(tokens.expanduser(), label)
    typer.echo(f"revoked token {label!r}")


@app.command("config")
def config(
    ctx: typer.Context,
    client: Annotated[
        str,
        typer.Argument(help="claude-desktop, vscode or cursor.", show_default=False),
    ],
    entity: Annotated[
        str | None,
        typer.Option("--entity", "-e", help="stdio: the one entity served.", show_default=False),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="stdio: who writes (provenance mcp:LABEL; default: the client's name).",
            show_default=False,
        ),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="URL",
            help="A running `serve --http` server (http://HOST:PORT/mcp or HOST:PORT) instead "
            "of stdio; the client supplies the token.",
            show_default=False,
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            metavar="VAR",
            help="Cursor over --http: the variable holding the token (default KGOT_MCP_TOKEN).",
            show_default=False,
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The server's key in the file.")] = "kgot",
    db: DbOption = None,
) -> None:
    """Print a client's MCP configuration (JSON) that starts or reaches this kgot.

    Paths are absolute (this environment's kgot, the store, --config): the
    client does not share this shell's environment. No secret is printed: a
    store URL's password is left out; over --http VS Code prompts for the
    token and Cursor reads it from VAR.

    \b
    Where the files live:
      claude-desktop  claude_desktop_config.json in ~/Library/Application
                      Support/Claude/ (macOS), %APPDATA%\\Claude\\ (Windows)
      vscode          .vscode/mcp.json, or the profile's mcp.json
                      (command "MCP: Open User Configuration")
      cursor          ~/.cursor/mcp.json, or .cursor/mcp.json in a project
    """
    import os

    from kgot.cli.common import global_options
    from kgot.mcp_server import (
        checked_label,
        client_named,
        http_config,
        http_url,
        kgot_launch,
        require_entity,
        stdio_config,
        store_argument,
    )

    chosen = client_named(client)
    if http is not None:
        for given, option in ((entity, "--entity"), (label, "--label"), (db, "--db")):
            if given is not None:
                raise UsageError(f"over --http the token decides who and what; drop {option}")
        print_json(http_config(chosen, http_url(http), token_env=token_env, name=name))
        return
    if token_env is not None:
        raise UsageError("--token-env belongs to --http; stdio needs no token")
    if entity is None:
        raise UsageError(f"give --entity NAME: the entity {chosen.title} will use")
    writer = checked_label(label or chosen.name, "--label")
    with opened_store(ctx, db, entity=entity) as store:
        require_entity(store, entity)
        location = store_argument(settings_from(ctx, {"store.db": db}).store.db)
    if location.password_dropped:
        sys.stderr.write(
            "kgot: the store URL's password is left out of the configuration; give it to the "
            "server through PGPASSWORD in the client's env, or ~/.pgpass\n"
        )
    settings_file = global_options(ctx).config_path or (
        Path(os.environ["KGOT_CONFIG"]) if os.environ.get("KGOT_CONFIG") else None
    )
    print_json(
        stdio_config(
            chosen,
            kgot_launch(),
            entity=entity,
            label=writer,
            db=location.value,
            config_path=settings_file,
            name=name,
        )
    )
