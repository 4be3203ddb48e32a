"""Time helpers: every stored time is UTC; SQLite hands datetimes back without a zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def utc_now() -> datetime:
    return datetime.now(UTC)


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...


def as_utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime (naive values from SQLite are UTC already)."""
    if value is None:
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def iso(value: datetime | None) -> str | None:
    """RFC 3339 text with a ``Z`` suffix, or ``None``."""
    aware = as_utc(value)
    return aware.isoformat().replace("+00:00", "Z") if aware else None
