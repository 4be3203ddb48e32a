"""Ready-to-paste MCP client configurations for ``kgot mcp serve`` (``kgot mcp config CLIENT``).

Each client keeps its servers in a JSON file of its own shape:

* Claude Desktop: ``claude_desktop_config.json`` (macOS ``~/Library/Application
  Support/Claude/``, Windows ``%APPDATA%\\Claude\\``), key ``mcpServers``; it starts stdio
  servers only;
* VS Code: ``.vscode/mcp.json`` in a workspace (or the user profile's ``mcp.json``), key
  ``servers``, each with a ``type``; secrets come from ``inputs`` it prompts for once;
* Cursor: ``~/.cursor/mcp.json`` (or ``.cursor/mcp.json`` in a project), key ``mcpServers``;
  it expands ``${env:NAME}`` in headers.

A client starts a stdio server with its own environment, not the shell's that ran this
command: ``KGOT_DB``, ``KGOT_CONFIG`` and the virtual environment's ``PATH`` do not reach it.
So the configuration names everything by absolute path: the ``kgot`` executable, the store,
the settings file. It never holds a secret: a store URL's password is left out, and an HTTP
token is a placeholder the client fills in.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kgot.errors import EntityNotFoundError, UsageError
from kgot.persistence import parse_target

if TYPE_CHECKING:
    from kgot.persistence import Store

__all__ = [
    "CLIENTS",
    "Client",
    "Launch",
    "StoreArgument",
    "client_named",
    "http_config",
    "http_url",
    "kgot_launch",
    "require_entity",
    "stdio_config",
    "store_argument",
]


@dataclass(frozen=True)
class Client:
    """One MCP client's configuration format.

    Attributes:
        name: the CLIENT argument, also the default ``--label``.
        title: for messages.
        servers_key: the top-level key holding the servers.
        typed: whether each server names its transport in ``type``.
        http: how the client sends a bearer token over Streamable HTTP: ``"input"`` (VS Code
            prompts for it and keeps it in its secret storage), ``"env"`` (Cursor reads an
            environment variable), ``None`` (stdio only).
    """

    name: str
    title: str
    servers_key: str
    typed: bool
    http: str | None


CLIENTS: Mapping[str, Client] = {
    client.name: client
    for client in (
        Client("claude-desktop", "Claude Desktop", "mcpServers", typed=False, http=None),
        Client("vscode", "VS Code", "servers", typed=True, http="input"),
        Client("cursor", "Cursor", "mcpServers", typed=False, http="env"),
    )
}

# VS Code's schema for server names; the other clients take any key, so one rule fits all.
_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def client_named(name: str) -> Client:
    """The client called ``name``.

    Raises:
        UsageError: no such client (the message names the choices).
    """
    client = CLIENTS.get(name.strip().lower())
    if client is None:
        raise UsageError(f"unknown client {name!r}; choose one of: {', '.join(CLIENTS)}")
    return client


@dataclass(frozen=True)
class Launch:
    """How a client starts kgot: ``command`` then ``prefix`` then kgot's own arguments."""

    command: str
    prefix: tuple[str, ...] = ()


def kgot_launch(executable: str | None = None) -> Launch:
    """This environment's ``kgot``, by absolute path: the console script beside the running
    interpreter (a virtual environment's ``bin/``), else the one on ``PATH``, else the
    interpreter itself with ``-m kgot``.

    Symbolic links are kept, not resolved: a virtual environment's ``python`` is a link to the
    base interpreter, and following it would leave the environment (and its packages) behind.
    """
    python = Path(executable or sys.executable).absolute()
    script = python.parent / ("kgot.exe" if os.name == "nt" else "kgot")
    if script.is_file() and os.access(script, os.X_OK):
        return Launch(str(script))
    found = shutil.which("kgot")
    if found:
        return Launch(str(Path(found).absolute()))
    return Launch(str(python), ("-m", "kgot"))


@dataclass(frozen=True)
class StoreArgument:
    """The ``--db`` value to write, and whether a password was left out of it."""

    value: str
    password_dropped: bool = False


def store_argument(location: str) -> StoreArgument:
    """The store as the configuration names it: a SQLite store by its absolute path (a client
    starts the server in a folder of its own choosing), a PostgreSQL URL as given but without
    its password, which would otherwise sit in clear text in the client's file (libpq finds it
    in ``PGPASSWORD`` or ``~/.pgpass`` instead).

    Raises:
        StoreLocationError: the location is malformed.
    """
    target = parse_target(location)
    if target.sqlite_path is not None:
        return StoreArgument(str(target.sqlite_path))
    from sqlalchemy.engine import URL, make_url

    url = make_url(location.strip())  # the user's own form, `?schema=` included
    if url.password is None:
        return StoreArgument(url.render_as_string(hide_password=False))
    # URL.set treats password=None as "leave it", so the URL is built again without one.
    bare = URL.create(
        url.drivername, url.username, None, url.host, url.port, url.database, url.query
    )
    return StoreArgument(bare.render_as_string(hide_password=False), True)


def require_entity(store: Store, entity: str, *, db: str | None = None) -> None:
    """Refuse an entity the store does not hold (the same answer ``kgot mcp serve``, ``kgot
    mcp config`` and ``kgot mcp token add`` give).

    Args:
        db: the ``--db`` the command was given, repeated in the commands the message suggests
            (so the entity is created in the store that was checked).

    Raises:
        UsageError: no entity of that name, saying how to create it first.
    """
    try:
        store.get_entity(entity)
    except EntityNotFoundError:
        where = f" --db {shlex.quote(db)}" if db else ""
        raise UsageError(
            f"no entity named {entity!r}; create it first with `kgot entities create "
            f"{shlex.quote(entity)}{where}`, or see `kgot entities list{where}`"
        ) from None


def _checked_name(name: str) -> str:
    if not _SERVER_NAME.match(name):
        raise UsageError(
            f"--name takes a letter then up to 63 letters, digits, '_' or '-', not {name!r}"
        )
    return name


def stdio_config(
    client: Client,
    launch: Launch,
    *,
    entity: str,
    label: str,
    db: str,
    config_path: Path | None = None,
    name: str = "kgot",
) -> dict[str, Any]:
    """The client's file with one stdio server: ``kgot [--config FILE] mcp serve --entity E
    --label L --db STORE``.

    Raises:
        UsageError: ``name`` is not a valid server name.
    """
    top = ["--config", str(config_path.expanduser().absolute())] if config_path else []
    args = [
        *launch.prefix,
        *top,
        *("mcp", "serve", "--entity", entity, "--label", label, "--db", db),
    ]
    server: dict[str, Any] = {"type": "stdio"} if client.typed else {}
    server |= {"command": launch.command, "args": args}
    return {client.servers_key: {_checked_name(name): server}}


def http_url(text: str) -> str:
    """The server's endpoint: an ``http(s)://`` URL as given, or ``HOST:PORT`` (what ``kgot mcp
    serve --http`` takes) as ``http://HOST:PORT/mcp``.

    Raises:
        UsageError: anything else, or a URL carrying a user or password.
    """
    value = text.strip()
    if "://" not in value:
        from kgot.mcp_server.serving import parse_address

        address = parse_address(value)
        host = f"[{address.host}]" if ":" in address.host else address.host
        return f"http://{host}:{address.port}/mcp"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--http takes http://HOST:PORT/mcp (or HOST:PORT), not {_without_userinfo(value)!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "--http must not carry a user or password: the token goes in a header the client "
            "fills in"
        )
    return value


def _without_userinfo(value: str) -> str:
    return re.sub(r"(://)[^/@]*@", r"\1***@", value)


def http_config(
    client: Client, url: str, *, token_env: str | None = None, name: str = "kgot"
) -> dict[str, Any]:
    """The client's file with one Streamable HTTP server whose bearer token the client supplies:
    VS Code prompts for it (a password input), Cursor reads ``token_env`` (default
    ``KGOT_MCP_TOKEN``) from its environment.

    Raises:
        UsageError: the client starts stdio servers only, ``--token-env`` does not fit the
            client or is not a variable name, ``name`` is invalid.
    """
    key = _checked_name(name)
    if client.http is None:
        raise UsageError(
            f"{client.title} starts only stdio servers from its config file; drop --http and "
            "give --entity NAME"
        )
    if client.http == "input":
        if token_env is not None:
            raise UsageError(
                f"{client.title} prompts for the token and keeps it in its secret storage; "
                "drop --token-env"
            )
        input_id = f"{key}-token"
        server = {
            "type": "http",
            "url": url,
            "headers": {"Authorization": f"Bearer ${{input:{input_id}}}"},
        }
        prompt = {
            "type": "promptString",
            "id": input_id,
            "description": "kgot MCP bearer token (from `kgot mcp token add`)",
            "password": True,
        }
        return {client.servers_key: {key: server}, "inputs": [prompt]}
    variable = token_env or "KGOT_MCP_TOKEN"
    if not _ENV_NAME.match(variable):
        raise UsageError(f"--token-env takes an environment variable's name, not {variable!r}")
    server = {"url": url, "headers": {"Authorization": f"Bearer ${{env:{variable}}}"}}
    return {client.servers_key: {key: server}}
