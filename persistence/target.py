"""Where a store lives: parsing the `store.db` setting into something an engine can open.

Accepted forms:

* a file path (``~/data/kgot.db``, ``./kgot.db``) or ``sqlite:///path`` — SQLite;
* ``postgresql://user:pass@host:port/db`` (also ``postgres://`` and ``postgresql+psycopg://``)
  — PostgreSQL through psycopg 3. A kgot-specific query parameter ``schema=NAME`` keeps all kgot
  tables (and the LangGraph checkpoint tables) in that PostgreSQL schema, created on first use;
  every other query parameter goes to libpq unchanged.

LangGraph checkpoints live next to the store: for SQLite in a sibling file
(``kgot.db`` → ``kgot.checkpoints.db``) so that checkpoint writes on every step never queue
behind graph commits for the database lock; for PostgreSQL in the same database and schema.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from kgot.config import default_data_dir
from kgot.errors import EntityNotFoundError, StoreError, StoreLocationError

_POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


class StoreNotFoundError(StoreError):
    """There is no kgot database at the location (``open_store(..., create=False)``): a
    mistyped ``KGOT_DB`` / ``--db`` is bad input, exit code 2."""

    exit_code = 2


class StoreUnusableError(StoreLocationError):
    """The store location parses, but no store can be opened there: the server is not
    reachable, the file is a directory or not a database, permission is refused, its folder
    does not exist. The location (or the machine) has to change: exit code 2."""


def no_store_for_entity(entity: str, location: str) -> EntityNotFoundError:
    """The error for an entity asked for where there is no kgot database at all."""
    return EntityNotFoundError(
        f"no entity named {entity!r}: there is no kgot database at "
        f"{parse_target(location).display} yet; create it with `kgot entities create "
        f"{entity}` (or check KGOT_DB / --db if you expected one there)"
    )


def prepare_sqlite_folder(path: Path, display: str) -> None:
    """Make sure the folder that is to hold the SQLite file ``path`` exists.

    Only kgot's default data folder (``$XDG_DATA_HOME/kgot``) is created: any other folder
    comes from KGOT_DB / --db / ``store.db``, where a missing one is far more likely a typo
    than a wish, and creating it would hide the mistake behind a new, empty store.

    Raises:
        StoreUnusableError: the folder does not exist (and is not the default one), is not a
            folder, or cannot be created.
    """
    folder = path.parent
    if folder.is_dir():
        return
    refuse_file_in_path(path, display)
    if folder != default_data_dir().expanduser().resolve():
        raise StoreUnusableError(
            f"the folder {folder} for database {display} does not exist; create it first "
            f"(mkdir -p {shlex.quote(str(folder))}) or correct KGOT_DB / --db"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreUnusableError(
            f"cannot create the folder {folder} for database {display}: "
            f"{error.strerror or error} (set KGOT_DB or --db to a writable path)"
        ) from None


def refuse_file_in_path(path: Path, display: str) -> None:
    """Refuse a SQLite path below a file (``notes.txt/kgot.db``): no database can ever be
    there, whether the command would create one or only read.

    Raises:
        StoreUnusableError: a parent of ``path`` is a file.
    """
    for parent in path.parents:
        if parent.exists():
            if parent.is_dir():
                return
            raise StoreUnusableError(
                f"cannot use database {display}: {parent} is a file, not a folder (set "
                "KGOT_DB or --db to a path in an existing folder)"
            )


_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class StoreTarget:
    """A parsed store location.

    Attributes:
        dialect: ``"sqlite"`` or ``"postgresql"``.
        url: the SQLAlchemy URL to connect with (kgot-only parameters removed).
        display: the location for messages, password masked.
        sqlite_path: the database file (SQLite only).
        schema: the PostgreSQL schema holding kgot's tables (``None`` = the default search path).
    """

    dialect: str
    url: URL
    display: str
    sqlite_path: Path | None = None
    schema: str | None = None

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """The SQLite file holding LangGraph checkpoints (SQLite stores only)."""
        if self.sqlite_path is None:
            raise ValueError("only SQLite stores keep checkpoints in a separate file")
        return self.sqlite_path.with_name(f"{self.sqlite_path.stem}.checkpoints.db")

    def libpq_conninfo(self) -> str:
        """A libpq connection URL for psycopg (LangGraph's Postgres saver), schema included."""
        url = self.url.set(drivername="postgresql")
        if self.schema:
            options = f"-csearch_path={self.schema}"
            existing = url.query.get("options")
            if existing:
                options = f"{existing} {options}"
            url = url.update_query_dict({"options": options})
        return url.render_as_string(hide_password=False)


def parse_target(location: str) -> StoreTarget:
    """Parse a `store.db` value (a SQLite path or a PostgreSQL URL).

    Raises:
        StoreLocationError: the value is empty, uses an unsupported scheme or names an invalid
            schema.
    """
    text = location.strip()
    if not text:
        raise StoreLocationError(
            "the store location is empty (set KGOT_DB or --db to a path or URL)"
        )
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in _POSTGRES_SCHEMES:
        return _postgres_target(text)
    if scheme == "sqlite":
        path_text = text.split("://", 1)[1]
        path_text = path_text[1:] if path_text.startswith("/") else path_text
        if not path_text or path_text == ":memory:":
            raise StoreLocationError(
                f"store {text!r} has no file path (use sqlite:///path/to/kgot.db; an in-memory "
                "store cannot be shared between connections)"
            )
        return _sqlite_target(Path(path_text))
    if scheme:
        raise StoreLocationError(
            f"unsupported store URL scheme {scheme!r} in {_mask(text)} "
            "(use a SQLite file path or a postgresql:// URL)"
        )
    if text == ":memory:":
        raise StoreLocationError(
            "an in-memory store cannot be shared between connections (use a file path)"
        )
    return _sqlite_target(Path(text))


def _sqlite_target(path: Path) -> StoreTarget:
    resolved = path.expanduser().resolve()
    return StoreTarget(
        dialect="sqlite",
        url=URL.create("sqlite+pysqlite", database=str(resolved)),
        display=str(resolved),
        sqlite_path=resolved,
    )


def _postgres_target(text: str) -> StoreTarget:
    try:
        url = make_url(text)
    except ArgumentError as error:
        raise StoreLocationError(f"malformed PostgreSQL URL {_mask(text)}: {error}") from None
    schema = url.query.get("schema")
    if isinstance(schema, tuple):
        raise StoreLocationError(f"the store URL {_mask(text)} names `schema` more than once")
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise StoreLocationError(
            f"invalid PostgreSQL schema name {schema!r} in the store URL "
            "(use letters, digits and underscores, not starting with a digit)"
        )
    url = url.difference_update_query(["schema"]).set(drivername="postgresql+psycopg")
    return StoreTarget(
        dialect="postgresql",
        url=url,
        display=url.set(drivername="postgresql").render_as_string(hide_password=True)
        + (f" (schema {schema})" if schema else ""),
        schema=schema,
    )


def _mask(text: str) -> str:
    """The URL with any password replaced, for messages about malformed input."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", text)
