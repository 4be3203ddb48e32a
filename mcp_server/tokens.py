"""Bearer tokens of the MCP server's HTTP transport, kept in a TOML file that holds only hashes.

Each token is a random secret shown once, by ``kgot mcp token add``; the file keeps its SHA-256
(a 256-bit random secret needs no slow hash: there is nothing to guess), a label naming who
holds it, the entities it may use and its scopes::

    [[tokens]]
    label = "claude-desktop"
    sha256 = "9f2c…"            # 64 hex digits
    entities = ["acme"]
    scopes = ["read", "write"]
    created_at = "2026-11-27T08:00:00Z"

Scopes: ``read`` (search, nodes, history, claims, types, resources), ``write`` (save facts,
remember, propose types), ``ask`` (run the KGoT loop), ``admin`` (the raw query tool, only on a
server started with ``--allow-query``).

:class:`TokenRegistry` answers the server's lookups and reads the file again whenever it
changes, so a revoked token stops working at its next request, without a restart. A file that
turns malformed, or readable or writable by other users, while the server runs refuses every
token until it is fixed (fail closed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import threading
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgot.atomic_file import replace_file
from kgot.errors import UsageError

__all__ = [
    "SCOPES",
    "Grant",
    "TokenFile",
    "TokenRecord",
    "TokenRegistry",
    "add_token",
    "checked_label",
    "hash_token",
    "parse_scopes",
    "read_token_file",
    "revoke_token",
]

log = logging.getLogger(__name__)

SCOPES = ("read", "write", "ask", "admin")
TOKEN_PREFIX = "kgot_mcp_"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
_FILE_MODE = 0o600  # the hashes are not secrets, but who may use which entity is nobody's business


@dataclass(frozen=True)
class Grant:
    """What one client may do: the token's label (its provenance ``mcp:<label>``), the entities
    it may use and its scopes."""

    label: str
    entities: tuple[str, ...]
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


@dataclass(frozen=True)
class TokenRecord:
    """One entry of the tokens file."""

    label: str
    sha256: str
    entities: tuple[str, ...]
    scopes: tuple[str, ...]
    created_at: str | None = None

    @property
    def grant(self) -> Grant:
        return Grant(self.label, self.entities, frozenset(self.scopes))

    def to_toml(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "label": self.label,
            "sha256": self.sha256,
            "entities": list(self.entities),
            "scopes": list(self.scopes),
        }
        if self.created_at is not None:
            data["created_at"] = self.created_at
        return data

    def to_json(self) -> dict[str, Any]:
        """What ``kgot mcp token list --json`` shows: everything but the hash."""
        return {
            "label": self.label,
            "entities": list(self.entities),
            "scopes": list(self.scopes),
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class TokenFile:
    """The parsed tokens file."""

    path: Path
    records: tuple[TokenRecord, ...]

    def by_hash(self) -> dict[str, TokenRecord]:
        return {record.sha256: record for record in self.records}


def checked_label(label: str, what: str = "token label") -> str:
    """``label`` if it may name a client (its provenance is ``mcp:<label>``).

    Raises:
        UsageError: anything but 1-64 letters, digits, '.', '_' or '-'.
    """
    if not _LABEL.match(label):
        raise UsageError(
            f"{what} {label!r} must be 1-64 letters, digits, '.', '_' or '-' (e.g. claude-desktop)"
        )
    return label


def hash_token(token: str) -> str:
    """The hex SHA-256 the file keeps of ``token``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_scopes(text: str | Iterable[str]) -> tuple[str, ...]:
    """Scopes from ``read,write`` (or a list of such), in the canonical order.

    Raises:
        UsageError: an unknown or no scope.
    """
    words = [text] if isinstance(text, str) else list(text)
    scopes = {part.strip() for word in words for part in word.split(",") if part.strip()}
    unknown = sorted(scopes - set(SCOPES))
    if unknown:
        raise UsageError(
            f"unknown scope {', '.join(map(repr, unknown))}; use one or more of "
            f"{', '.join(SCOPES)} (e.g. --scope read,write)"
        )
    if not scopes:
        raise UsageError(f"give at least one scope: {', '.join(SCOPES)} (e.g. --scope read)")
    return tuple(scope for scope in SCOPES if scope in scopes)


def read_token_file(path: Path, *, missing_ok: bool = False) -> TokenFile:
    """Parse the tokens file at ``path``.

    Raises:
        UsageError: the file is missing (unless ``missing_ok``), unreadable, not TOML, or an
            entry breaks a rule; one line names the file and every problem.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing_ok:
            return TokenFile(path, ())
        raise UsageError(
            f"tokens file {path} does not exist; create it with `kgot mcp token add LABEL "
            f"--entity NAME --scope read --tokens {path}`"
        ) from None
    except OSError as error:
        raise UsageError(f"cannot read tokens file {path} ({error.strerror or error})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(
            f"tokens file {path} is not valid TOML ({error}); fix or recreate it"
        ) from None
    return TokenFile(path, tuple(_records(path, data)))


def _records(path: Path, data: Mapping[str, Any]) -> list[TokenRecord]:
    extra = sorted(set(data) - {"tokens"})
    problems = [f"unknown top-level key {', '.join(map(repr, extra))}"] if extra else []
    entries = data.get("tokens", [])
    if not isinstance(entries, list):
        problems.append("'tokens' must be an array of tables ([[tokens]])")
        entries = []
    records: list[TokenRecord] = []
    labels: set[str] = set()
    hashes: set[str] = set()
    for number, entry in enumerate(entries, 1):
        where = f"token {number}"
        if not isinstance(entry, dict):
            problems.append(f"{where} is not a table")
            continue
        found = _record(entry, where, problems)
        if found is None:
            continue
        if found.label in labels:
            problems.append(f"{where}: label {found.label!r} is used twice")
        if found.sha256 in hashes:
            problems.append(f"{where}: the same token hash appears twice")
        labels.add(found.label)
        hashes.add(found.sha256)
        records.append(found)
    if problems:
        raise UsageError(
            f"tokens file {path} is malformed: {'; '.join(problems)}; fix it, or revoke and add "
            "the tokens again with `kgot mcp token`"
        )
    return records


def _record(entry: Mapping[str, Any], where: str, problems: list[str]) -> TokenRecord | None:
    before = len(problems)
    extra = sorted(set(entry) - {"label", "sha256", "entities", "scopes", "created_at"})
    if extra:
        problems.append(f"{where}: unknown key {', '.join(map(repr, extra))}")
    label = entry.get("label")
    if not isinstance(label, str) or not _LABEL.match(label):
        problems.append(f"{where}: label must be 1-64 letters, digits, '.', '_' or '-'")
        label = ""
    where = f"{where} ({label})" if label else where
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not _HEX.match(digest):
        problems.append(f"{where}: sha256 must be 64 lower-case hex digits")
    entities = entry.get("entities")
    if (
        not isinstance(entities, list)
        or not entities
        or not all(isinstance(e, str) and e.strip() for e in entities)
    ):
        problems.append(f"{where}: entities must be a non-empty list of entity names")
        entities = []
    scopes = entry.get("scopes")
    if not isinstance(scopes, list) or not scopes or not all(isinstance(s, str) for s in scopes):
        problems.append(f"{where}: scopes must be a non-empty list of {', '.join(SCOPES)}")
        scopes = []
    elif set(scopes) - set(SCOPES):
        unknown = ", ".join(sorted(set(scopes) - set(SCOPES)))
        problems.append(f"{where}: unknown scope {unknown} (use {', '.join(SCOPES)})")
    created = entry.get("created_at")
    if created is not None and not isinstance(created, str):
        created = str(created)
    if len(problems) > before:
        return None
    return TokenRecord(
        label=str(label),
        sha256=str(digest),
        entities=tuple(dict.fromkeys(entities)),
        scopes=tuple(s for s in SCOPES if s in scopes),
        created_at=created,
    )


def _write(path: Path, records: Sequence[TokenRecord]) -> None:
    import tomli_w

    header = (
        "# kgot MCP server tokens: only SHA-256 hashes of the tokens are kept here.\n"
        "# Manage with `kgot mcp token add|list|revoke --tokens THIS_FILE`.\n\n"
    )
    body = tomli_w.dumps({"tokens": [record.to_toml() for record in records]})
    try:
        replace_file(path, (header + body).encode("utf-8"), _FILE_MODE)
    except OSError as error:
        raise UsageError(f"cannot write tokens file {path} ({error.strerror or error})") from None


def _check_private(path: Path) -> None:
    """Refuse a tokens file that other users may read or change (see :class:`TokenRegistry`).

    Raises:
        UsageError: group or other permission bits, or another owner than this user or root.
    """
    try:
        info = path.stat()
    except OSError as error:
        raise UsageError(f"cannot read tokens file {path} ({error.strerror or error})") from None
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise UsageError(
            f"tokens file {path} has mode {mode:04o}: other users may read or change who may "
            f"use which entity; make it private with `chmod 600 {path}`"
        )
    if info.st_uid not in (os.getuid(), 0):
        raise UsageError(
            f"tokens file {path} belongs to another user (uid {info.st_uid}), who could grant "
            "any entity; keep it in a file of the user that runs the server"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Two ``token`` commands at once: one reads and writes the file after the other."""
    if not path.parent.is_dir():
        raise UsageError(f"the folder of tokens file {path} does not exist; create it first")
    lock_path = path.with_name(f".{path.name}.lock")
    try:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
    except OSError as error:
        raise UsageError(f"cannot lock tokens file {path} ({error.strerror or error})") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def add_token(
    path: Path, label: str, entities: Sequence[str], scopes: Sequence[str]
) -> tuple[str, TokenRecord]:
    """Make a new token, store its hash under ``label``; return the token (shown once) and
    its record.

    Raises:
        UsageError: a malformed label, no entity, a label in use, a malformed file.
    """
    checked_label(label)
    names = tuple(dict.fromkeys(e.strip() for e in entities if e.strip()))
    if not names:
        raise UsageError("give the entities the token may use: --entity NAME (repeatable)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = TokenRecord(
        label=label,
        sha256=hash_token(token),
        entities=names,
        scopes=parse_scopes(scopes),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    with _locked(path):
        current = read_token_file(path, missing_ok=True)
        if any(r.label == label for r in current.records):
            raise UsageError(
                f"a token labelled {label!r} exists in {path}; revoke it first (`kgot mcp token "
                f"revoke {label} --tokens {path}`) or choose another label"
            )
        _write(path, [*current.records, record])
    return token, record


def revoke_token(path: Path, label: str) -> TokenRecord:
    """Remove the token labelled ``label``; a running server refuses it from its next request.

    Raises:
        UsageError: no such label, a missing or malformed file.
    """
    with _locked(path):
        current = read_token_file(path)
        kept = [r for r in current.records if r.label != label]
        if len(kept) == len(current.records):
            known = ", ".join(r.label for r in current.records) or "none"
            raise UsageError(f"no token labelled {label!r} in {path} (labels: {known})")
        _write(path, kept)
    return next(r for r in current.records if r.label == label)


class TokenRegistry:
    """The server's view of the tokens file, read again when it changes (module docstring).

    The server trusts the file only while it is private: whoever may change it can grant
    themselves any entity, so a file other users may read or write, or that belongs to another
    user, is refused like a malformed one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._by_hash: dict[str, TokenRecord] = {}
        self.load()

    def load(self) -> TokenFile:
        """Read the file now.

        Raises:
            UsageError: it is missing, malformed or not private (the server does not start).
        """
        stamp = self._file_stamp()
        parsed = read_token_file(self.path)
        _check_private(self.path)
        with self._lock:
            self._stamp, self._by_hash = stamp, parsed.by_hash()
        return parsed

    def _file_stamp(self) -> tuple[int, ...] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        # the mode and owner too: a chmod that opens the file must be noticed
        return (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_mode)

    def _current(self) -> dict[str, TokenRecord]:
        stamp = self._file_stamp()
        with self._lock:
            if stamp == self._stamp and stamp is not None:
                return self._by_hash
        try:
            parsed = read_token_file(self.path)
            _check_private(self.path)
        except UsageError as problem:
            log.error("refusing every token until the tokens file is fixed: %s", problem)
            with self._lock:
                self._stamp, self._by_hash = None, {}
            return {}
        with self._lock:
            self._stamp, self._by_hash = stamp, parsed.by_hash()
            return self._by_hash

    def lookup(self, token: str) -> Grant | None:
        """The grant of ``token``, or ``None`` for a token the file does not hold."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
            return None
        digest = hash_token(token)
        for known, record in self._current().items():
            if hmac.compare_digest(known, digest):
                return record.grant
        return None
