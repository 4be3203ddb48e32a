"""Plain-text layout for listings: counted nouns, and tables of one line per row that fit the
terminal's width (80 columns when there is no terminal).

Rich tables wrap a long cell onto as many lines as it needs, so a listing of twenty types with
long descriptions took over a hundred lines, a word a line. A listing here clips the cells
that can be clipped instead (with an ellipsis) and never the ones a user types back (a run id):
each row stays one line that ``grep`` and ``head`` can work with, and the full text is one
``show`` away.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.cells import cell_len

from kgot.cli.common import printable

GAP = "  "
ELLIPSIS = "…"


def plural(number: int, noun: str, nouns: str | None = None) -> str:
    """``number`` with its noun, singular for one: ``1 node``, ``2 nodes``, ``3 retries``
    (``nouns`` for a plural that is not ``noun`` + s)."""
    return f"{number:,} {noun if number == 1 else (nouns or noun + 's')}"


def short_time(value: object, now: datetime | None = None) -> str:
    """A stored time for a listing column, like ``ls -l``: ``11-29 10:42`` this year, the
    date alone (``2024-11-29``) before it; "" for none. Times are shown as stored (UTC)."""
    text = str(value or "")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text[:16].replace("T", " ")
    year = (now or datetime.now(UTC)).year
    return moment.strftime("%m-%d %H:%M") if moment.year == year else moment.strftime("%Y-%m-%d")


def terminal_width() -> int:
    """The width to fit: ``COLUMNS``, else the terminal's, else 80 (piped, redirected)."""
    return shutil.get_terminal_size((80, 24)).columns


@dataclass(frozen=True)
class Column:
    """One column of a :func:`table_lines` table.

    Attributes:
        title: the heading.
        share: 0 for a column as wide as its widest cell (at most ``widest``); a positive
            number for a column that takes that many shares of the width left over.
        widest: the most a content-sized column may take.
        clip: ``False`` for cells that are never cut (identifiers the user types back).
        right: align to the right (numbers).
    """

    title: str
    share: int = 0
    widest: int = 24
    clip: bool = True
    right: bool = False


def table_lines(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None = None
) -> list[str]:
    """A heading and one line per row, fitted to ``width`` (default: :func:`terminal_width`).

    Each cell is made one line (whitespace runs become one space, control characters go) and
    cut with an ellipsis where its column is narrower. Content-sized columns get their width
    first; shared columns split what is left by their shares, a column that needs less than
    its part leaving the rest to the others.
    """
    width = terminal_width() if width is None else width
    cells = [[_one_line(cell) for cell in row] for row in rows]
    natural = [
        max([cell_len(column.title), *(cell_len(row[n]) for row in cells)])
        for n, column in enumerate(columns)
    ]
    widths = [
        natural[n] if column.share or not column.clip else min(natural[n], column.widest)
        for n, column in enumerate(columns)
    ]
    shared = [n for n, column in enumerate(columns) if column.share]
    fixed = sum(widths[n] for n in range(len(columns)) if n not in shared)
    left = width - fixed - len(GAP) * (len(columns) - 1)
    wanted = [(columns[n].share, natural[n], columns[n].title) for n in shared]
    for i, part in _split(left, wanted):
        widths[shared[i]] = part
    lines = [_line([column.title for column in columns], widths, columns)]
    lines += [_line(row, widths, columns) for row in cells]
    return lines


def _split(left: int, wanted: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """Widths for the shared columns: the narrowest needs are met first, so what a column
    does not use goes to the wider ones."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i][1])
    shares_left = sum(share for share, _, _ in wanted)
    result: list[tuple[int, int]] = []
    for i in order:
        share, need, title = wanted[i]
        fair = left * share // shares_left if shares_left else 0
        part = min(need, max(fair, cell_len(title), len(ELLIPSIS) + 4))
        result.append((i, part))
        left -= part
        shares_left -= share
    return result


def _line(cells: Sequence[str], widths: Sequence[int], columns: Sequence[Column]) -> str:
    out = []
    for cell, width, column in zip(cells, widths, columns, strict=True):
        text = clip(cell, width) if column.clip else cell
        padding = " " * max(0, width - cell_len(text))
        out.append(padding + text if column.right else text + padding)
    return GAP.join(out).rstrip()


def _one_line(text: str) -> str:
    return " ".join(printable(text).split())


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells, ending in an ellipsis when it was cut."""
    if cell_len(text) <= width:
        return text
    kept: list[str] = []
    used = cell_len(ELLIPSIS)
    for char in text:
        used += cell_len(char)
        if used > width:
            break
        kept.append(char)
    return "".join(kept).rstrip() + ELLIPSIS
