"""Text every database can store: no NUL character, no lone surrogate.

PostgreSQL refuses a NUL (U+0000) in a text value and in JSON it parses (``jsonb``), and
neither database driver can encode a lone UTF-16 surrogate (U+D800–U+DFFF) to UTF-8. Both
reach kgot from outside: a feed entry written ``&#0;`` or ``&#xD800;``, a page, a model's
reply, an MCP client's arguments. Refusing them would let one bad entry stall whatever wrote
it on every retry, so they are replaced by U+FFFD (the replacement character) on the way into
the database, in one place (:func:`install`, an engine hook) instead of at every caller.

What is read back is then what was stored: the replacement is visible, not silent data loss
of the rest of the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, event

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# json.dumps (ensure_ascii) writes them as escapes; PostgreSQL's jsonb refuses both escapes.
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)


def storable_text(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD (itself when clean)."""
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    return _UNSTORABLE.sub(REPLACEMENT, text)


def storable(value: Any) -> Any:
    """``value`` with every string in it (keys too, at any depth) made storable."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, Mapping):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(storable(item) for item in value)
    return value


def dumps(value: Any) -> str:
    """The JSON the engine writes for a JSON column: ``json.dumps``, made storable.

    The common case (nothing to replace) costs one dump and one scan of its output; a value
    that needs cleaning (or merely holds a backslash-u text that looks like an escape) is
    cleaned and dumped again.
    """
    text = json.dumps(value)
    if "\\u" in text and _UNSTORABLE_ESCAPE.search(text):
        text = json.dumps(storable(value))
    return text


def install(engine: Engine) -> None:
    """Make every text parameter ``engine`` sends storable (see the module's notes)."""
    event.listen(engine, "before_cursor_execute", _clean_parameters, retval=True)


def _clean_parameters(
    _connection: Any,
    _cursor: Any,
    statement: str,
    parameters: Any,
    _context: Any,
    executemany: bool,
) -> tuple[str, Any]:
    if not executemany:
        return statement, _clean_row(parameters)
    cleaned = [_clean_row(row) for row in parameters]
    if all(new is old for new, old in zip(cleaned, parameters, strict=True)):
        return statement, parameters
    return statement, cleaned


def _clean_row(row: Any) -> Any:
    """One statement's parameters (a tuple, list or mapping), the same object when clean."""
    if isinstance(row, Mapping):
        dirty = [key for key, value in row.items() if isinstance(value, str) and _needs(value)]
        if not dirty:
            return row
        cleaned = dict(row)
        for key in dirty:
            cleaned[key] = storable_text(row[key])
        return cleaned
    if isinstance(row, list | tuple):
        if not any(isinstance(value, str) and _needs(value) for value in row):
            return row
        return type(row)(storable_text(v) if isinstance(v, str) else v for v in row)
    return row


def _needs(text: str) -> bool:
    if "\x00" in text:
        return True
    return not text.isascii() and _UNSTORABLE.search(text) is not None
